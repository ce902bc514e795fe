// RocksDB's CRC32C on the CPU's instruction (aggregator/store/rocks_crc32c.h):
// the same checksums as RocksDB's own code, RocksDB's calls routed to it,
// and a database written through it read back with every checksum checked
// (which a wrong but consistent CRC would pass too: the comparison with
// RocksDB's own code is what keeps files readable by other builds).
#include "aggregator/store/rocks_crc32c.h"

#include <gtest/gtest.h>
#include <rocksdb/db.h>

#include <cstdlib>
#include <fstream>
#include <memory>
#include <random>
#include <string>

#include "tests/support/test_util.h"

// RocksDB's own declaration (util/crc32c.h, not among Debian's headers).
namespace rocksdb::crc32c {
uint32_t Extend(uint32_t init_crc, const char* data, size_t n);
}  // namespace rocksdb::crc32c
uint32_t WrapRocksExtend(uint32_t, const char*,
                         size_t) asm("__wrap__ZN7rocksdb6crc32c6ExtendEjPKcm");

namespace fieldprof::aggregator {
namespace {

uint32_t Crc(const std::string& s) { return RocksCrc32c(0, s.data(), s.size()); }

bool CpuHasSse42() {
  std::ifstream in("/proc/cpuinfo");
  std::string word;
  while (in >> word) {
    if (word == "sse4_2") return true;
  }
  return false;
}

TEST(RocksCrc32cTest, TheInstructionRunsWhereTheCpuHasIt) {
  if (std::getenv("FIELDPROF_ROCKS_CRC32C") != nullptr) GTEST_SKIP() << "chosen by the environment";
#if defined(__x86_64__)
  EXPECT_EQ(RocksCrc32cCode(), CpuHasSse42() ? "sse4.2" : "rocksdb");
#else
  EXPECT_EQ(RocksCrc32cCode(), "rocksdb");
#endif
}

TEST(RocksCrc32cTest, KnownValues) {
  // RFC 3720, B.4, and the usual check value.
  EXPECT_EQ(Crc(""), 0u);
  EXPECT_EQ(Crc("123456789"), 0xE3069283u);
  EXPECT_EQ(Crc(std::string(32, '\0')), 0x8A9136AAu);
  EXPECT_EQ(Crc(std::string(32, '\xff')), 0x62A8AB43u);
  std::string ascending;
  for (int i = 0; i < 32; ++i) ascending.push_back(static_cast<char>(i));
  EXPECT_EQ(Crc(ascending), 0x46DD794Eu);
  std::string descending;
  for (int i = 31; i >= 0; --i) descending.push_back(static_cast<char>(i));
  EXPECT_EQ(Crc(descending), 0x113FDB5Cu);
}

TEST(RocksCrc32cTest, SameAsRocksDbsOwnAtEveryLengthAndAlignment) {
  if (RocksCrc32cCode() == "rocksdb") GTEST_SKIP() << "RocksDB's own code runs here";
  std::mt19937_64 rng(11);
  std::string buf(128 * 1024 + 64, '\0');
  for (char& c : buf) c = static_cast<char>(rng());
  for (size_t offset = 0; offset < 16; ++offset) {
    for (size_t n = 0; n <= 300; ++n) {
      const uint32_t init = static_cast<uint32_t>(rng());
      ASSERT_EQ(RocksCrc32c(init, buf.data() + offset, n),
                RocksOwnCrc32c(init, buf.data() + offset, n))
          << "offset " << offset << ", " << n << " bytes";
    }
  }
  // A WAL record's size, and one split anywhere then extended.
  const size_t n = 128 * 1024 + 7;
  ASSERT_EQ(RocksCrc32c(0, buf.data() + 3, n), RocksOwnCrc32c(0, buf.data() + 3, n));
  for (int i = 0; i < 200; ++i) {
    const size_t cut = rng() % n;
    const uint32_t first = RocksCrc32c(0, buf.data(), cut);
    ASSERT_EQ(RocksCrc32c(first, buf.data() + cut, n - cut), RocksOwnCrc32c(0, buf.data(), n))
        << "cut at " << cut;
  }
}

TEST(RocksCrc32cTest, RocksDbsCallsReachIt) {
  // A reference to RocksDB's Extend outside its own object is the
  // wrapper's, this test's as the WAL writer's.
  EXPECT_EQ(reinterpret_cast<void*>(&rocksdb::crc32c::Extend),
            reinterpret_cast<void*>(&WrapRocksExtend));
  // And RocksDB's own calls arrive (not so with a shared librocksdb, whose
  // calls stay inside it).
  testing::TempDir dir;
  rocksdb::Options o;
  o.create_if_missing = true;
  rocksdb::DB* raw = nullptr;
  ASSERT_TRUE(rocksdb::DB::Open(o, dir.path(), &raw).ok());
  std::unique_ptr<rocksdb::DB> db(raw);
  const uint64_t before = RocksCrc32cCalls();
  rocksdb::WriteOptions synced;
  synced.sync = true;
  ASSERT_TRUE(db->Put(synced, "k", std::string(64 * 1024, 'v')).ok());
  EXPECT_GT(RocksCrc32cCalls(), before) << "the WAL record's checksum did not come here";
}

TEST(RocksCrc32cTest, ADatabaseWrittenThroughItReadsBackChecked) {
  testing::TempDir dir;
  rocksdb::Options o;
  o.create_if_missing = true;
  o.paranoid_checks = true;
  o.wal_recovery_mode = rocksdb::WALRecoveryMode::kAbsoluteConsistency;
  std::mt19937_64 rng(5);
  std::vector<std::string> values;
  for (int i = 0; i < 40; ++i) {
    std::string v(1000 + rng() % (200 * 1024), '\0');
    for (char& c : v) c = static_cast<char>(rng());
    values.push_back(std::move(v));
  }
  auto open = [&](std::unique_ptr<rocksdb::DB>* out) {
    rocksdb::DB* db = nullptr;
    rocksdb::Status s = rocksdb::DB::Open(o, dir.path(), &db);
    out->reset(db);
    return s;
  };
  rocksdb::WriteOptions synced;
  synced.sync = true;
  {
    std::unique_ptr<rocksdb::DB> db;
    ASSERT_TRUE(open(&db).ok());
    for (size_t i = 0; i < values.size() / 2; ++i) {
      ASSERT_TRUE(db->Put(synced, "k" + std::to_string(i), values[i]).ok());
    }
    ASSERT_TRUE(db->Flush(rocksdb::FlushOptions()).ok());  // a table (XXH3 blocks)
    for (size_t i = values.size() / 2; i < values.size(); ++i) {
      ASSERT_TRUE(db->Put(synced, "k" + std::to_string(i), values[i]).ok());  // only in the WAL
    }
    ASSERT_TRUE(db->Close().ok());
  }
  std::unique_ptr<rocksdb::DB> db;
  rocksdb::Status s = open(&db);  // replays the WAL, each record's CRC32C checked
  ASSERT_TRUE(s.ok()) << s.ToString();
  rocksdb::ReadOptions checked;
  checked.verify_checksums = true;
  for (size_t i = 0; i < values.size(); ++i) {
    std::string got;
    ASSERT_TRUE(db->Get(checked, "k" + std::to_string(i), &got).ok()) << i;
    EXPECT_EQ(got, values[i]) << i;
  }
  ASSERT_TRUE(db->VerifyChecksum().ok());
}

}  // namespace
}  // namespace fieldprof::aggregator
