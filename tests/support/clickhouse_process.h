// A real ClickHouse server (Debian's clickhouse-server, installed by
// deploy/install-deps.sh) as a child process on loopback ports, with its
// config, data and logs in a test's directory; stopped with the object.
// For the ClickHouse store's tests. SharedClickHouse() is one
// server for a whole test process, started when first asked for; tests keep
// apart by database (UniqueDatabase()).
#ifndef FIELDPROF_TESTS_SUPPORT_CLICKHOUSE_PROCESS_H_
#define FIELDPROF_TESTS_SUPPORT_CLICKHOUSE_PROCESS_H_

#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <fstream>
#include <string>
#include <thread>

#include "common/net/https_client.h"
#include "tests/support/test_util.h"

namespace fieldprof::testing {

class ClickHouseProcess {
 public:
  explicit ClickHouseProcess(const TempDir& dir)
      : dir_(dir), http_port_(FreePort()), tcp_port_(FreePort()) {}
  ~ClickHouseProcess() { Kill(); }
  void Kill() {
    if (pid_ > 0) {
      kill(pid_, SIGKILL);
      waitpid(pid_, nullptr, 0);
      pid_ = -1;
    }
  }

  // Writes its config, starts it and waits for GET /ping. False when it
  // did not answer within 30 s (its log is in dir/clickhouse/err.log).
  bool Start() {
    const std::string home = dir_.File("clickhouse");
    std::filesystem::create_directories(home + "/data");
    std::filesystem::create_directories(home + "/tmp");
    std::ofstream(home + "/config.xml")
        << "<?xml version=\"1.0\"?>\n<yandex>\n"
        << "  <logger><level>warning</level><log>" << home << "/server.log</log><errorlog>" << home
        << "/err.log</errorlog></logger>\n"
        << "  <http_port>" << http_port_ << "</http_port>\n  <tcp_port>" << tcp_port_
        << "</tcp_port>\n  <listen_host>127.0.0.1</listen_host>\n"
        << "  <path>" << home << "/data/</path>\n  <tmp_path>" << home << "/tmp/</tmp_path>\n"
        << "  <users_config>" << home << "/users.xml</users_config>\n"
        << "  <default_profile>default</default_profile>\n"
        << "  <default_database>default</default_database>\n"
        << "  <mark_cache_size>5368709</mark_cache_size>\n</yandex>\n";
    std::ofstream(home + "/users.xml")
        << "<?xml version=\"1.0\"?>\n<yandex>\n"
        << "  <profiles><default><max_memory_usage>2000000000</max_memory_usage></default>"
           "</profiles>\n"
        << "  <users><default><password></password><networks><ip>127.0.0.1</ip></networks>"
           "<profile>default</profile><quota>default</quota></default></users>\n"
        << "  <quotas><default></default></quotas>\n</yandex>\n";
    pid_ = fork();
    if (pid_ == 0) {
      if (freopen((home + "/stdout.log").c_str(), "a", stdout) == nullptr) _exit(126);
      if (freopen((home + "/stderr.log").c_str(), "a", stderr) == nullptr) _exit(126);
      const std::string config = "--config-file=" + home + "/config.xml";
      for (const char* bin : {"/usr/bin/clickhouse-server", "/usr/sbin/clickhouse-server"}) {
        execl(bin, "clickhouse-server", config.c_str(), static_cast<char*>(nullptr));
      }
      _exit(127);
    }
    HttpsClient c(Options());
    for (int i = 0; i < 300; ++i) {
      auto r = c.Get("/ping");
      if (r.ok() && r->status == 200) return true;
      std::this_thread::sleep_for(std::chrono::milliseconds(100));
    }
    return false;
  }

  // Its HTTP interface as clickhouse_url spells it.
  std::string Url() const { return "http://127.0.0.1:" + std::to_string(http_port_); }
  HttpsClientOptions Options() const {
    HttpsClientOptions o;
    o.host = "127.0.0.1";
    o.port = http_port_;
    o.tls = false;
    o.timeout = std::chrono::seconds(30);
    return o;
  }

 private:
  const TempDir& dir_;
  uint16_t http_port_, tcp_port_;
  pid_t pid_ = -1;
};

// One ClickHouse server for the test process, started on first use and
// killed at exit. Null when it did not start (the test then fails with the
// log's location).
inline ClickHouseProcess* SharedClickHouse() {
  static TempDir* dir = new TempDir;  // outlives the server: never freed
  static ClickHouseProcess* server = [] {
    auto* s = new ClickHouseProcess(*dir);
    if (!s->Start()) {
      delete s;
      return static_cast<ClickHouseProcess*>(nullptr);
    }
    std::atexit([] {
      if (server != nullptr) server->Kill();
      std::error_code ec;
      std::filesystem::remove_all(dir->path(), ec);
    });
    return s;
  }();
  return server;
}

// A database name no other test of this process uses.
inline std::string UniqueDatabase() {
  static int n = 0;
  return "fp_test_" + std::to_string(getpid()) + "_" + std::to_string(++n);
}

}  // namespace fieldprof::testing

#endif  // FIELDPROF_TESTS_SUPPORT_CLICKHOUSE_PROCESS_H_
