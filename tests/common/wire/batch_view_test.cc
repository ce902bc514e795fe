// The fast wire decoder (common/wire/batch_view.h) against protobuf's parser: on
// every input — generated batches, the malformed corpus, hand-made unusual
// encodings and many random mutations — DecodeBatchView must give exactly
// what DecodeBatch gives: the same acceptance, the same error message, the
// same content.
#include "common/wire/batch_view.h"

#include <gtest/gtest.h>

#include <random>
#include <string>

#include "common/wire/validate.h"
#include "common/wire/wire.h"
#include "tests/support/malformed_corpus.h"
#include "tests/support/test_util.h"
#include "tools/loadgen/batch_gen.h"

namespace fieldprof {
namespace {

using testing::IdOf;
using testing::SimpleBatch;

// Field-by-field equality of two views, with where they differ.
std::string Diff(const BatchView& a, const BatchView& b) {
  auto plat = [](const PlatformView& x, const PlatformView& y) {
    return x.os() == y.os() && x.arch() == y.arch() && x.cpu_vendor() == y.cpu_vendor() &&
           x.cpu_family() == y.cpu_family();
  };
  if (a.schema_version() != b.schema_version()) return "schema_version";
  if (a.batch_id() != b.batch_id()) return "batch_id";
  if (a.created_unix_ms() != b.created_unix_ms()) return "created_unix_ms";
  if (!plat(a.client_platform(), b.client_platform())) return "client_platform";
  if (a.records_size() != b.records_size()) return "records_size";
  for (int i = 0; i < a.records_size(); ++i) {
    const RecordView& x = a.records(i);
    const RecordView& y = b.records(i);
    const std::string at = "record " + std::to_string(i) + ": ";
    if (x.has_key() != y.has_key() || x.has_histogram() != y.has_histogram()) return at + "has";
    if (x.key().module() != y.key().module() || x.key().symbol() != y.key().symbol() ||
        x.key().module_version() != y.key().module_version() ||
        x.key().metric() != y.key().metric() || x.key().has_platform() != y.key().has_platform() ||
        !plat(x.key().platform(), y.key().platform())) {
      return at + "key";
    }
    if (x.runs() != y.runs() || x.truncated() != y.truncated()) return at + "runs";
    if (x.resolution_ns() != y.resolution_ns()) return at + "resolution_ns";
    const HistogramView& h = x.histogram();
    const HistogramView& g = y.histogram();
    if (h.zero_count() != g.zero_count() || h.count() != g.count() || h.sum_lo() != g.sum_lo() ||
        h.sum_hi() != g.sum_hi() || h.sum_sq_lo() != g.sum_sq_lo() ||
        h.sum_sq_hi() != g.sum_sq_hi() || h.min() != g.min() || h.max() != g.max() ||
        h.sum_sq_saturated() != g.sum_sq_saturated() || h.buckets_size() != g.buckets_size()) {
      return at + "histogram";
    }
    for (int k = 0; k < h.buckets_size(); ++k) {
      const BucketView& p = h.buckets(k);
      const BucketView& q = g.buckets(k);
      if (p.index() != q.index() || p.count() != q.count() || p.sum_lo() != q.sum_lo() ||
          p.sum_hi() != q.sum_hi() || p.sum_sq_lo() != q.sum_sq_lo() ||
          p.sum_sq_hi() != q.sum_sq_hi()) {
        return at + "bucket " + std::to_string(k);
      }
    }
  }
  return "";
}

// Checks that both decoders agree on `bytes`; returns whether it was valid.
bool ExpectSameAnswer(const std::string& bytes, const std::string& what) {
  BatchView fast;
  Status fs = DecodeBatchView(bytes, &fast);
  StatusOr<wire::Batch> slow = DecodeBatch(bytes);
  EXPECT_EQ(fs.ok(), slow.ok()) << what << ": fast " << fs.ToString() << " / protobuf "
                                << (slow.ok() ? "OK" : slow.status().ToString());
  if (!fs.ok() || !slow.ok()) {
    if (!fs.ok() && !slow.ok()) {
      EXPECT_EQ(fs.ToString(), slow.status().ToString()) << what;
    }
    return false;
  }
  BatchView expected;
  ViewBatchMessage(*slow, &expected);
  EXPECT_EQ(Diff(fast, expected), "") << what;
  return true;
}

TEST(BatchViewTest, GeneratedBatchesTakeTheFastPathAndMatchProtobuf) {
  tools::BatchGenerator gen({.seed = 17});
  for (int i = 0; i < 8; ++i) {
    const std::string body = gen.Next().SerializeAsString();
    BatchView fast;
    ASSERT_TRUE(ParseBatchViewFast(body, &fast)) << "batch " << i;
    const uint64_t before = BatchViewFallbacks();
    EXPECT_TRUE(ExpectSameAnswer(body, "generated batch " + std::to_string(i)));
    EXPECT_EQ(BatchViewFallbacks(), before) << "a generated batch needed the protobuf fallback";
    ASSERT_GT(fast.records_size(), 100);
  }
}

TEST(BatchViewTest, MalformedCorpusGetsTheSameErrors) {
  for (const auto& bad : testing::MalformedCorpus()) {
    EXPECT_FALSE(ExpectSameAnswer(bad.bytes, bad.name)) << bad.name;
  }
}

// Encodings protobuf accepts that the fast path leaves to it, or must read
// the way protobuf does.
TEST(BatchViewTest, UnusualEncodingsMatchProtobuf) {
  const wire::Batch good = SimpleBatch(IdOf(1), "libz.so.1", "deflate", 1500, 3);
  const std::string g = good.SerializeAsString();
  // A record's key given twice: protobuf merges the two keys.
  {
    wire::Record extra;
    extra.mutable_key()->set_symbol("inflate");
    std::string rec = good.records(0).SerializeAsString() + extra.SerializeAsString();
    wire::Batch b = good;
    b.clear_records();
    std::string body = b.SerializeAsString();
    body += '\x2a';  // field 5, length-delimited
    ASSERT_LT(rec.size(), 128u);
    body += static_cast<char>(rec.size());
    body += rec;
    BatchView fast;
    EXPECT_FALSE(ParseBatchViewFast(body, &fast));
    EXPECT_TRUE(ExpectSameAnswer(body, "key twice"));
    ASSERT_TRUE(DecodeBatchView(body, &fast).ok());
    EXPECT_EQ(fast.records(0).key().symbol(), "inflate");
    EXPECT_EQ(fast.records(0).key().module(), "libz.so.1");
  }
  // A scalar given twice: the last one wins.
  {
    std::string body = g + std::string("\x18\x05", 2);  // created_unix_ms = 5
    BatchView fast;
    EXPECT_TRUE(ParseBatchViewFast(body, &fast));
    EXPECT_EQ(fast.created_unix_ms(), 5);
    EXPECT_TRUE(ExpectSameAnswer(body, "scalar twice"));
  }
  // Unknown fields of every wire type are skipped.
  {
    std::string body = g + std::string("\xf8\x07\x01", 3)                   // field 127 varint
                       + std::string("\xf9\x07", 2) + std::string(8, 'a')   // fixed64
                       + std::string("\xfa\x07\x02hi", 5)                   // bytes
                       + std::string("\xfd\x07", 2) + std::string(4, 'b');  // fixed32
    BatchView fast;
    EXPECT_TRUE(ParseBatchViewFast(body, &fast));
    EXPECT_TRUE(ExpectSameAnswer(body, "unknown fields"));
  }
  // Non-minimal varints, a uint32 field given a 64-bit value (truncated),
  // a negative enum value.
  {
    std::string body = g + std::string("\x08\x81\x80\x80\x80\x00", 6);  // schema_version 1
    EXPECT_TRUE(ExpectSameAnswer(body, "overlong varint"));
    body = g + std::string("\x08\x81\x80\x80\x80\x10", 6);  // 1 + 2^32: truncates to 1
    EXPECT_TRUE(ExpectSameAnswer(body, "truncated uint32"));
    wire::Batch b = good;
    b.mutable_client_platform()->set_os(static_cast<wire::Os>(-1));
    EXPECT_FALSE(ExpectSameAnswer(b.SerializeAsString(), "negative enum"));
  }
  // Invalid UTF-8 in a string: protobuf refuses the parse.
  {
    wire::Batch b = good;
    b.mutable_records(0)->mutable_key()->set_symbol(
        "de\xff"
        "flate");
    EXPECT_FALSE(ExpectSameAnswer(b.SerializePartialAsString(), "invalid utf-8"));
  }
}

// Random damage to valid batches: flipped bytes, inserted and deleted bytes,
// cuts. Each mutant must get the same answer from both decoders.
TEST(BatchViewTest, RandomMutationsGetTheSameAnswer) {
  std::mt19937_64 rng(20261121);
  std::vector<std::string> seeds;
  for (int i = 0; i < 4; ++i) {
    wire::Batch b = SimpleBatch(IdOf(i), "libc.so.6", "malloc", 100u << i, 1 + i * 7);
    b.mutable_records()->Add()->CopyFrom(
        SimpleBatch(IdOf(i), "libz.so.1", "deflate", 0, 2).records(0));
    seeds.push_back(b.SerializeAsString());
  }
  tools::BatchGenerator gen({.seed = 3, .target_bytes = 2000});
  seeds.push_back(gen.Next().SerializeAsString());
  int valid = 0;
  constexpr int kMutants = 100000;
  for (int n = 0; n < kMutants; ++n) {
    std::string m = seeds[rng() % seeds.size()];
    const int edits = 1 + static_cast<int>(rng() % 3);
    for (int e = 0; e < edits && !m.empty(); ++e) {
      const size_t at = rng() % m.size();
      switch (rng() % 4) {
        case 0:
          m[at] = static_cast<char>(rng());
          break;
        case 1:
          m[at] = static_cast<char>(m[at] ^ (1 << (rng() % 8)));
          break;
        case 2:
          m.insert(at, 1, static_cast<char>(rng()));
          break;
        case 3:
          m.erase(at, 1 + rng() % 3);
          break;
      }
    }
    if (ExpectSameAnswer(m, "mutant " + std::to_string(n))) ++valid;
    if (HasFailure()) break;
  }
  // Some mutants stay valid (e.g. a changed count that still adds up is
  // rare, but a changed created_unix_ms or batch id byte is not).
  EXPECT_GT(valid, 0);
  EXPECT_LT(valid, kMutants);
}

}  // namespace
}  // namespace fieldprof
