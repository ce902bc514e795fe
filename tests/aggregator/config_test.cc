#include "aggregator/config.h"

#include <gtest/gtest.h>

#include <fstream>

#include "tests/support/test_util.h"

namespace fieldprof::aggregator {
namespace {

StatusOr<AggregatorConfig> Parse(std::vector<const char*> args, bool* help = nullptr) {
  args.insert(args.begin(), "fieldprof-aggregator");
  AggregatorConfig c;
  bool h = false;
  std::string text;
  Status s = ParseAggregatorConfig(static_cast<int>(args.size()), args.data(), &c, &h, &text);
  if (help) *help = h;
  if (!s.ok()) return s;
  return c;
}

TEST(AggregatorConfigTest, FileAndFlags) {
  fieldprof::testing::TempDir dir;
  {
    std::ofstream f(dir.File("agg.conf"));
    f << "tls_cert = /etc/c.pem\ntls_key = /etc/k.pem\ndb = /var/db\nport = 9443\n"
         "fold_interval_ms = 50\nsync = true\npending_memtable_mib = 32\n";
  }
  std::string conf = dir.File("agg.conf");
  auto c = Parse({"--config", conf.c_str(), "--port=9555", "--workers", "3"});
  ASSERT_TRUE(c.ok()) << c.status().ToString();
  EXPECT_EQ(c->server.port, 9555);
  EXPECT_EQ(c->server.worker_threads, 3);
  EXPECT_EQ(c->server.tls_cert_file, "/etc/c.pem");
  EXPECT_EQ(c->store.path, "/var/db");
  EXPECT_EQ(c->store.fold_interval.count(), 50);
  EXPECT_EQ(c->store.pending_write_buffer_bytes, size_t{32} << 20);
  EXPECT_TRUE(c->store.sync);
  auto d = Parse({"--tls_cert", "c", "--tls_key", "k", "--db", "d"});
  ASSERT_TRUE(d.ok()) << d.status().ToString();
  EXPECT_EQ(d->store.pending_write_buffer_bytes, size_t{256} << 20);
}

TEST(AggregatorConfigTest, MissingRequiredAndBadValuesAreClearErrors) {
  auto a = Parse({"--db", "/x"});
  ASSERT_FALSE(a.ok());
  EXPECT_NE(a.status().message().find("--tls_cert and --tls_key are required"), std::string::npos);
  auto b = Parse({"--tls_cert", "c", "--tls_key", "k"});
  EXPECT_NE(b.status().message().find("--db is required"), std::string::npos);
  auto c = Parse({"--tls_cert", "c", "--tls_key", "k", "--db", "d", "--max_body_bytes", "9999999"});
  EXPECT_NE(c.status().message().find("outside"), std::string::npos) << c.status().message();
  fieldprof::testing::TempDir dir;
  {
    std::ofstream f(dir.File("bad.conf"));
    f << "port = 9443\ngarbage\n";
  }
  std::string conf = dir.File("bad.conf");
  auto d = Parse({"--config", conf.c_str()});
  EXPECT_NE(d.status().message().find("bad.conf:2"), std::string::npos) << d.status().message();
}

TEST(AggregatorConfigTest, HelpNeedsNothingElse) {
  bool help = false;
  auto c = Parse({"--help"}, &help);
  EXPECT_TRUE(c.ok());
  EXPECT_TRUE(help);
}

}  // namespace
}  // namespace fieldprof::aggregator
