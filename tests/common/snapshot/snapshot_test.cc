#include "common/snapshot/snapshot.h"

#include <google/protobuf/io/coded_stream.h>
#include <google/protobuf/io/zero_copy_stream_impl_lite.h>
#include <gtest/gtest.h>

#include <algorithm>
#include <random>

#include "common/wire/wire.h"

namespace fieldprof {
namespace {

ApiKey Key(int i) {
  ApiKey k;
  k.module = "libm" + std::to_string(i % 37) + ".so.1";
  k.module_version = "1.0";
  k.symbol = "fn_" + std::to_string(i);
  k.metric = wire::METRIC_WALL_TIME_NS;
  k.platform.os = wire::OS_LINUX;
  k.platform.arch = wire::ARCH_X86_64;
  return k;
}

wire::Record RecordOf(int i) {
  wire::Record r;
  ApiKeyToWire(Key(i), r.mutable_key());
  Histogram h;
  for (int c = 0; c <= i % 5; ++c) h.Record(100 + i * 3 + c);
  HistogramToWire(h, r.mutable_histogram());
  r.set_runs(1 + i % 3);
  return r;
}

TEST(SnapshotTest, FragmentOfIsStableAndSpreads) {
  // The assignment is a contract with every client's cache: it must not
  // change between releases. 8 was computed independently (Python: FNV-1a
  // 64 of b"libm24.so.1\0fn_12345\0" b"1.0\0" + bytes([1, 1, 1, 0, 0]), mod 64).
  EXPECT_EQ(FragmentOf(Key(12345), 64), 8u);
  std::vector<int> per(64);
  for (int i = 0; i < 20000; ++i) ++per[FragmentOf(Key(i), 64)];
  const auto [lo, hi] = std::minmax_element(per.begin(), per.end());
  EXPECT_GT(*lo, 20000 / 64 / 2) << "a fragment much emptier than the rest";
  EXPECT_LT(*hi, 20000 / 64 * 2) << "a fragment much fuller than the rest";
}

TEST(SnapshotTest, EncodingIsDeterministic) {
  std::vector<wire::Record> a;
  for (int i = 0; i < 200; ++i) a.push_back(RecordOf(i));
  std::vector<wire::Record> b = a;
  std::shuffle(b.begin(), b.end(), std::mt19937(7));
  const std::string ea = EncodeFragment(3, 64, a), eb = EncodeFragment(3, 64, b);
  EXPECT_EQ(ea, eb);
  EXPECT_EQ(DescribeFragment(3, ea).version(), DescribeFragment(3, eb).version());
  b.pop_back();
  const std::string ec = EncodeFragment(3, 64, b);
  EXPECT_NE(DescribeFragment(3, ec).version(), DescribeFragment(3, ea).version());
}

// The hand-written fragment encoding is exactly protobuf's own, for the
// first fragment (index 0 is left out on the wire) and any other.
TEST(SnapshotTest, FragmentBytesAreProtobufsOwnEncoding) {
  for (uint32_t index : {0u, 5u}) {
    std::vector<wire::Record> recs;
    for (int i = 0; i < 300; ++i) recs.push_back(RecordOf(i * 7));
    recs[3].mutable_key()->clear_platform();  // filled in, as before
    wire::Fragment f;
    f.set_schema_version(kFragmentSchemaVersion);
    f.set_index(index);
    f.set_fragment_count(64);
    std::vector<std::pair<std::string, wire::Record>> sorted;
    for (const wire::Record& r : recs) {
      wire::Record c = r;
      c.mutable_key()->mutable_platform();
      sorted.emplace_back(EncodeApiKey(ApiKeyFromWire(c.key(), wire::Platform())), c);
    }
    std::sort(sorted.begin(), sorted.end(),
              [](const auto& a, const auto& b) { return a.first < b.first; });
    for (const auto& [_, r] : sorted) *f.add_records() = r;
    std::string want;
    google::protobuf::io::StringOutputStream stream(&want);
    {
      google::protobuf::io::CodedOutputStream coded(&stream);
      coded.SetSerializationDeterministic(true);
      ASSERT_TRUE(f.SerializeToCodedStream(&coded));
    }
    EXPECT_EQ(EncodeFragment(index, 64, recs), want) << index;
  }
}

class ManifestTest : public ::testing::Test {
 protected:
  void SetUp() override {
    StatusOr<Ed25519Signer> generated = Ed25519Signer::Generate();
    ASSERT_TRUE(generated.ok());
    signer_ = std::make_unique<Ed25519Signer>(std::move(*generated));
    manifest_.set_schema_version(kManifestSchemaVersion);
    manifest_.set_snapshot_version(7);
    manifest_.set_created_unix_ms(1795000000000);
    manifest_.set_fragment_schema_version(kFragmentSchemaVersion);
    manifest_.set_fragment_count(4);
    for (uint32_t i = 0; i < 4; ++i) {
      std::vector<wire::Record> recs;
      for (int k = 0; k < 50; ++k) {
        if (FragmentOf(Key(k), 4) == i) recs.push_back(RecordOf(k));
      }
      fragments_.push_back(EncodeFragment(i, 4, recs));
      *manifest_.add_fragments() = DescribeFragment(i, fragments_.back());
    }
  }
  std::unique_ptr<Ed25519Signer> signer_;
  wire::Manifest manifest_;
  std::vector<std::string> fragments_;
};

TEST_F(ManifestTest, SignedManifestOpensAndFragmentsCheck) {
  auto signed_bytes = SignManifest(manifest_, *signer_);
  ASSERT_TRUE(signed_bytes.ok());
  EXPECT_EQ(*SignManifest(manifest_, *signer_), *signed_bytes);  // same bytes twice
  auto m = OpenSignedManifest(*signed_bytes, signer_->PublicKeyPem());
  ASSERT_TRUE(m.ok()) << m.status().ToString();
  EXPECT_EQ(m->snapshot_version(), 7u);
  for (uint32_t i = 0; i < 4; ++i) {
    EXPECT_TRUE(CheckFragment(*m, i, fragments_[i]).ok()) << i;
  }
}

TEST_F(ManifestTest, TamperedOrForeignIsRefused) {
  const std::string signed_bytes = *SignManifest(manifest_, *signer_);
  // A manifest signed by another key.
  auto other = Ed25519Signer::Generate();
  EXPECT_FALSE(OpenSignedManifest(*SignManifest(manifest_, *other), signer_->PublicKeyPem()).ok());
  // The manifest changed after signing (a fragment's hash swapped).
  wire::SignedManifest s;
  ASSERT_TRUE(s.ParseFromString(signed_bytes));
  wire::Manifest m = manifest_;
  m.mutable_fragments(1)->set_sha256(m.fragments(2).sha256());
  s.set_manifest(m.SerializeAsString());
  auto opened = OpenSignedManifest(s.SerializeAsString(), signer_->PublicKeyPem());
  ASSERT_FALSE(opened.ok());
  EXPECT_NE(opened.status().message().find("signature"), std::string::npos);
  EXPECT_FALSE(OpenSignedManifest("garbage", signer_->PublicKeyPem()).ok());
  // A tampered fragment, one of the wrong size, another index's fragment.
  const wire::Manifest good = *OpenSignedManifest(signed_bytes, signer_->PublicKeyPem());
  std::string f = fragments_[1];
  f[f.size() / 2] ^= 0x40;
  EXPECT_FALSE(CheckFragment(good, 1, f).ok());
  EXPECT_FALSE(CheckFragment(good, 1, fragments_[1] + "x").ok());
  EXPECT_FALSE(CheckFragment(good, 2, fragments_[1]).ok());
  EXPECT_FALSE(CheckFragment(good, 9, fragments_[1]).ok());
}

}  // namespace
}  // namespace fieldprof
