// The scale-out as it runs (issue #20): ZooKeeper, ClickHouse in two shards
// of two replicas, three fieldprof-aggregator replicas and haproxy, all real
// and on loopback, started by deploy/scale-out/cluster.sh (what operators
// try it with). A stream of uploads goes through haproxy while a part
// fails, and the load generator's verification then finds every series
// moved by exactly what was acknowledged:
//   - an aggregator replica killed with SIGKILL, and back later;
//   - a ClickHouse replica killed, and back later;
//   - ZooKeeper restarted;
//   - every batch sent a second time.
// At the end one aggregator holds the lease, and every replica serves the
// snapshot it published.
#include <signal.h>

#include <atomic>
#include <chrono>
#include <cstdlib>
#include <fstream>
#include <map>
#include <set>
#include <sstream>
#include <string>
#include <thread>

#include "common/https_client.h"
#include "gtest/gtest.h"
#include "tests/test_util.h"
#include "tools/loadgen.h"

namespace fieldprof {
namespace {

using std::chrono::seconds;

class ClusterTest : public ::testing::Test {
 protected:
  // One cluster for the suite: starting it takes seconds, and each fault
  // is checked on the sums it changes.
  static void SetUpTestSuite() {
    dir_ = new testing::TempDir;
    const std::string d = dir_->path();
    if (!testing::MakeCert(d)) return;
    { std::ofstream(d + "/admin.token") << "cluster-test-admin-token-0123456789\n"; }
    Sh("'" FIELDPROF_SOURCE_DIR "/deploy/make-signing-key.sh' '" + d + "' >/dev/null 2>&1");
    std::string found;
    for (const char* name : {"/snapshot-signing.key", "/signing.key"}) {
      if (std::ifstream(d + name).good()) found = d + name;
    }
    started_ =
        Sh(Cluster("start") + " --bin '" FIELDPROF_AGGREGATOR_DIR "' --owner " +
           std::to_string(getpid()) + (found.empty() ? "" : " --signing-key '" + found + "'") +
           " --agg-args '--admin_token_file " + d +
           "/admin.token --publish_interval_s 3600 "
           "--clickhouse_quorum_timeout_ms 5000' > '" +
           d + "/cluster.out' 2>&1") == 0;
    if (!started_) return;
    std::ifstream env(d + "/c/cluster.env");
    for (std::string line; std::getline(env, line);) {
      const size_t eq = line.find('=');
      if (eq == std::string::npos) continue;
      std::string v = line.substr(eq + 1);
      if (v.size() >= 2 && v.front() == '"') v = v.substr(1, v.size() - 2);
      env_[line.substr(0, eq)] = v;
    }
  }
  static void TearDownTestSuite() {
    if (dir_ == nullptr) return;
    Sh(Cluster("stop") + " >/dev/null 2>&1");
    delete dir_;
    dir_ = nullptr;
  }

  static int Sh(const std::string& cmd) { return std::system(cmd.c_str()); }
  static std::string Cluster(const std::string& verb) {
    return "'" FIELDPROF_SOURCE_DIR "/deploy/scale-out/cluster.sh' " + verb + " '" + dir_->path() +
           "/c'";
  }
  // kill, term or run one part of the cluster.
  static void Part(const std::string& verb, const std::string& name) {
    ASSERT_EQ(Sh(Cluster(verb) + " " + name + " >> '" + dir_->path() + "/cluster.out' 2>&1"), 0)
        << verb << " " << name << "; see " << dir_->path() << "/cluster.out";
  }

  void SetUp() override {
    ASSERT_TRUE(started_) << "the cluster did not start; see " << dir_->path()
                          << "/cluster.out and the logs under " << dir_->path() << "/c";
  }

  static HttpsClientOptions Client(uint16_t port) {
    HttpsClientOptions o;
    o.host = "127.0.0.1";
    o.port = port;
    o.ca_file = env_["CA_FILE"];
    o.timeout = std::chrono::milliseconds(60000);
    return o;
  }
  static uint16_t LbPort() { return static_cast<uint16_t>(std::stoi(env_["LB_PORT"])); }
  static std::vector<uint16_t> AggPorts() {
    std::vector<uint16_t> ports;
    std::istringstream in(env_["AGG_PORTS"]);
    for (int p; in >> p;) ports.push_back(static_cast<uint16_t>(p));
    return ports;
  }

  // A stream of uploads through haproxy for `secs`, verified at the end;
  // `fault` runs alongside it, after a few seconds of it.
  tools::LoadReport Stream(int secs, const std::function<void()>& fault, bool twice = false) {
    tools::LoadOptions o;
    o.client = Client(LbPort());
    o.connections = 48;
    o.batches = 0;
    o.duration_s = secs;
    o.pool = 12;
    o.gen.seed = ++seed_;
    o.gen.target_bytes = 64 * 1024;
    o.verify = true;
    o.resend_duplicates = twice;
    o.max_attempts = 1000;  // an outage is waited out, never given up on
    std::atomic<bool> done{false};
    tools::LoadReport report;
    Status error;
    std::thread load([&] {
      StatusOr<tools::LoadReport> r = tools::RunLoad(o, nullptr);
      if (r.ok()) {
        report = *r;
      } else {
        error = r.status();
      }
      done = true;
    });
    std::this_thread::sleep_for(seconds(3));
    fault();
    load.join();
    EXPECT_TRUE(error.ok()) << error.ToString();
    std::fprintf(stderr, "%s", report.ToText().c_str());
    return report;
  }

  static void ExpectExact(const tools::LoadReport& r) {
    EXPECT_GT(r.batches_ok, 20) << "the stream went on";
    EXPECT_EQ(r.batches_failed, 0) << r.first_error;
    EXPECT_GT(r.keys_verified, 1000);
    EXPECT_EQ(r.keys_mismatched, 0) << r.first_mismatch;
  }

  static testing::TempDir* dir_;
  static bool started_;
  static std::map<std::string, std::string> env_;
  static uint64_t seed_;
};

testing::TempDir* ClusterTest::dir_ = nullptr;
bool ClusterTest::started_ = false;
std::map<std::string, std::string> ClusterTest::env_;
uint64_t ClusterTest::seed_ = 100;

TEST_F(ClusterTest, AnAggregatorKilledMidStream) {
  tools::LoadReport r = Stream(14, [] {
    Part("kill", "agg-2");
    std::this_thread::sleep_for(seconds(5));
    Part("run", "agg-2");
  });
  ExpectExact(r);
  EXPECT_GT(r.batches_retried, 0) << "the uploads in flight to it were retried elsewhere";
}

TEST_F(ClusterTest, AClickHouseReplicaKilledMidStream) {
  tools::LoadReport r = Stream(16, [] {
    Part("kill", "ch-1-2");
    std::this_thread::sleep_for(seconds(6));
    Part("run", "ch-1-2");
  });
  ExpectExact(r);
}

TEST_F(ClusterTest, ZooKeeperRestartedMidStream) {
  tools::LoadReport r = Stream(16, [] {
    Part("term", "zk");
    std::this_thread::sleep_for(seconds(3));
    Part("run", "zk");
  });
  ExpectExact(r);
}

TEST_F(ClusterTest, EveryBatchReplayed) {
  tools::LoadReport r = Stream(
      10, [] {}, /*twice=*/true);
  ExpectExact(r);
  EXPECT_EQ(r.batches_duplicate + r.duplicates_missed, r.batches_ok) << "every batch sent again";
  EXPECT_GT(r.batches_duplicate, 0);
}

// After all that: one lease holder, and the snapshot it publishes is what
// every replica serves.
TEST_F(ClusterTest, OneHolderPublishesAndEveryReplicaServesIt) {
  std::vector<uint16_t> ports = AggPorts();
  ASSERT_EQ(ports.size(), 3u);
  int holders = 0;
  uint16_t holder = 0;
  for (int wait = 0; wait < 300 && holders != 1; ++wait) {
    holders = 0;
    for (uint16_t p : ports) {
      HttpsClient c(Client(p));
      StatusOr<HttpReply> m = c.Get("/metrics");
      if (m.ok() && m->body.find("\nfieldprof_lease_held 1\n") != std::string::npos) {
        ++holders;
        holder = p;
      }
    }
    if (holders != 1) std::this_thread::sleep_for(std::chrono::milliseconds(100));
  }
  ASSERT_EQ(holders, 1);
  for (uint16_t p : ports) {
    HttpsClient c(Client(p));
    StatusOr<HttpReply> r =
        c.Request("POST", "/v1/admin/publish?all=1", "", "",
                  {{"Authorization", "Bearer cluster-test-admin-token-0123456789"}});
    ASSERT_TRUE(r.ok());
    EXPECT_EQ(r->status, p == holder ? 200 : 503) << p << ": " << r->body;
  }
  std::string manifest;
  for (int wait = 0; wait < 100; ++wait) {
    std::set<std::string> seen;
    for (uint16_t p : ports) {
      HttpsClient c(Client(p));
      StatusOr<HttpReply> r = c.Get("/v1/snapshot/manifest");
      seen.insert(r.ok() && r->status == 200 ? r->body : "");
    }
    if (seen.size() == 1 && !seen.begin()->empty()) {
      manifest = *seen.begin();
      break;
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(200));  // followers refresh every 5 s
  }
  ASSERT_FALSE(manifest.empty()) << "the replicas serve different manifests";
  for (uint16_t p : ports) {
    HttpsClient c(Client(p));
    StatusOr<HttpReply> f = c.Get("/v1/snapshot/fragments/0");
    ASSERT_TRUE(f.ok());
    EXPECT_EQ(f->status, 200) << p;
  }
}

}  // namespace
}  // namespace fieldprof
