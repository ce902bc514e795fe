// The fast wire decoder (common/wire/batch_view.h) against protobuf's parser: on
// every input — generated batches, the malformed corpus, hand-made unusual
// encodings and many random mutations — DecodeBatchView must give exactly
// what DecodeBatch gives: the same acceptance, the same error message, the
// same content.
#include "common/wire/batch_view.h"

#include <gtest/gtest.h>
#include <sys/mman.h>
#include <unistd.h>

#include <cstdlib>
#include <cstring>
#include <random>
#include <string>
#include <utility>
#include <vector>

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

// `input` copied to end where an inaccessible page begins: a decoder that
// reads a byte past it crashes the test, with or without ASan (a
// std::string's terminating NUL and spare capacity would hide such a read).
class GuardedBytes {
 public:
  explicit GuardedBytes(const std::string& input) {
    const size_t page = static_cast<size_t>(sysconf(_SC_PAGESIZE));
    size_ = (input.size() + page - 1) / page * page + page;
    void* m = mmap(nullptr, size_, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    if (m == MAP_FAILED) std::abort();
    base_ = static_cast<char*>(m);
    if (mprotect(base_ + size_ - page, page, PROT_NONE) != 0) std::abort();
    char* at = base_ + size_ - page - input.size();
    std::memcpy(at, input.data(), input.size());
    bytes_ = std::string_view(at, input.size());
  }
  ~GuardedBytes() { munmap(base_, size_); }
  GuardedBytes(const GuardedBytes&) = delete;
  GuardedBytes& operator=(const GuardedBytes&) = delete;
  std::string_view bytes() const { return bytes_; }

 private:
  char* base_ = nullptr;
  size_t size_ = 0;
  std::string_view bytes_;
};

// Checks that both decoders agree on `input`; returns whether it was valid.
bool ExpectSameAnswer(const std::string& input, const std::string& what) {
  const GuardedBytes guarded(input);
  const std::string_view bytes = guarded.bytes();
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

std::string Varint(uint64_t v) {
  std::string out;
  for (; v >= 0x80; v >>= 7) out += static_cast<char>(v | 0x80);
  return out + static_cast<char>(v);
}

// A length-delimited field: its tag, its length less `cut`, its bytes.
std::string Message(int field, const std::string& bytes, size_t cut = 0) {
  return static_cast<char>(field << 3 | 2) + Varint(bytes.size() - cut) + bytes;
}

// `batch` (one record of one bucket) with the bucket written as
// `bucket_field` (a whole field: tag, length, bytes), before the
// histogram's other fields or after them.
std::string WithBucketField(const wire::Batch& batch, const std::string& bucket_field,
                            bool bucket_last) {
  const wire::Record& record = batch.records(0);
  wire::Histogram no_buckets = record.histogram();
  no_buckets.clear_buckets();
  wire::Record no_histogram = record;
  no_histogram.clear_histogram();
  wire::Batch no_records = batch;
  no_records.clear_records();
  const std::string histogram = bucket_last ? no_buckets.SerializeAsString() + bucket_field
                                            : bucket_field + no_buckets.SerializeAsString();
  return no_records.SerializeAsString() +
         Message(5, no_histogram.SerializeAsString() + Message(2, histogram));
}

// A bucket's sums of squares of eight, nine and ten bytes, its last field
// (its high half is 0 and not written), read where the bucket ends: the
// decoder reads a long varint as a word, past a small message's end when
// the body goes on. Each with the body going on after the bucket and with
// the bucket the body's last bytes; whole, with the bucket's length one
// short (its last varint ends past it), and with the varint's last byte
// missing (it does not end): both decoders refuse the last two, and none
// reads past the body (GuardedBytes).
TEST(BatchViewTest, LongVarintsAtAMessagesEndAreReadWithinIt) {
  for (const uint64_t value : {uint64_t{1} << 26, uint64_t{1} << 29, uint64_t{3500000000}}) {
    const wire::Batch batch = SimpleBatch(IdOf(1), "libz.so.1", "deflate", value);
    const wire::Record& record = batch.records(0);
    ASSERT_EQ(record.histogram().buckets_size(), 1);
    const wire::Bucket& bucket = record.histogram().buckets(0);
    const uint64_t sum_sq_lo = value * value;
    ASSERT_EQ(bucket.sum_sq_lo(), sum_sq_lo);
    ASSERT_EQ(bucket.sum_sq_hi(), 0u);
    const std::string bucket_bytes = bucket.SerializeAsString();
    ASSERT_EQ(bucket_bytes.substr(bucket_bytes.size() - Varint(sum_sq_lo).size()),
              Varint(sum_sq_lo));
    for (const bool bucket_last : {false, true}) {
      for (const int cut : {0, 1, 2}) {
        const std::string bucket_field =
            cut == 2 ? Message(2, bucket_bytes.substr(0, bucket_bytes.size() - 1))
                     : Message(2, bucket_bytes, cut);
        const std::string body = WithBucketField(batch, bucket_field, bucket_last);
        const std::string what = std::to_string(Varint(sum_sq_lo).size()) + " bytes, " +
                                 (bucket_last ? "at the body's end" : "the body going on") +
                                 (cut == 1 ? ", length one short" : "") +
                                 (cut == 2 ? ", last byte missing" : "");
        EXPECT_EQ(ExpectSameAnswer(body, what), cut == 0) << what;
        const GuardedBytes guarded(body);
        BatchView fast;
        EXPECT_EQ(ParseBatchViewFast(guarded.bytes(), &fast), cut == 0) << what;
        if (cut == 0) {
          EXPECT_EQ(fast.records(0).histogram().buckets(0).sum_sq_lo(), sum_sq_lo) << what;
        }
      }
    }
  }
}

// A bucket's fields written otherwise than in number order once each
// (reversed, repeated with the last one right, among unknown fields, an
// index over 32 bits, a tag in more bytes than it needs): each encoding
// means the same bucket, so the batch stays valid and both decoders must
// give the same values.
TEST(BatchViewTest, ABucketsFieldsInAnyOrderMatchProtobuf) {
  const wire::Batch batch = SimpleBatch(IdOf(1), "libz.so.1", "deflate", 1500, 3);
  const wire::Record& record = batch.records(0);
  ASSERT_EQ(record.histogram().buckets_size(), 1);
  const wire::Bucket& b = record.histogram().buckets(0);
  ASSERT_GT(b.index(), 0u);
  const auto field = [](int number, uint64_t v) {
    return static_cast<char>(number << 3) + Varint(v);
  };
  const std::string index = field(1, b.index()), count = field(2, b.count()),
                    sum = field(3, b.sum_lo()), sum_sq = field(5, b.sum_sq_lo());
  const std::string unknown_varint = field(15, 7);
  const std::string unknown_bytes = Message(14, "xy");
  const std::vector<std::pair<std::string, std::string>> encodings = {
      {"in order", index + count + sum + sum_sq},
      {"reversed", sum_sq + sum + count + index},
      {"a field twice, the last right", field(2, b.count() + 5) + index + count + sum + sum_sq},
      {"zeros written", index + count + sum + field(4, 0) + sum_sq + field(6, 0)},
      {"an unknown varint first", unknown_varint + index + count + sum + sum_sq},
      {"an unknown varint between", index + count + unknown_varint + sum + sum_sq},
      {"unknown bytes last", index + count + sum + sum_sq + unknown_bytes},
      {"an unknown field 16 (a two-byte tag)",
       index + std::string("\x80\x01", 2) + Varint(7) + count + sum + sum_sq},
      {"a field twice after an unknown one",
       index + field(3, b.sum_lo() + 9) + unknown_bytes + count + sum + sum_sq},
      {"the index over 32 bits (truncated)",
       field(1, b.index() + (uint64_t{1} << 32)) + count + sum + sum_sq},
      {"a two-byte tag for a known field",
       std::string("\x88\x00", 2) + Varint(b.index()) + count + sum + sum_sq},
  };
  for (const auto& [what, bucket] : encodings) {
    const std::string body = WithBucketField(batch, Message(2, bucket), /*bucket_last=*/false);
    EXPECT_TRUE(ExpectSameAnswer(body, what)) << what;
    BatchView fast;
    ASSERT_TRUE(ParseBatchViewFast(body, &fast)) << what;
    const BucketView& got = fast.records(0).histogram().buckets(0);
    EXPECT_EQ(got.index(), b.index()) << what;
    EXPECT_EQ(got.count(), b.count()) << what;
    EXPECT_EQ(got.sum_lo(), b.sum_lo()) << what;
    EXPECT_EQ(got.sum_sq_lo(), b.sum_sq_lo()) << what;
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
