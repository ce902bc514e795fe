// The real fieldprof-aggregator binary as a child process on a loopback
// port, for tests that need a server across crashes and restarts (the agent
// tests, the aggregator's crash test). TLS with a self-signed certificate
// in `dir` (testing::MakeCert).
#ifndef FIELDPROF_TESTS_SUPPORT_AGGREGATOR_PROCESS_H_
#define FIELDPROF_TESTS_SUPPORT_AGGREGATOR_PROCESS_H_

#include <gtest/gtest.h>
#include <netinet/in.h>
#include <signal.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <fstream>
#include <string>
#include <thread>
#include <vector>

#include "common/net/https_client.h"
#include "tests/support/test_util.h"

namespace fieldprof::testing {

class AggregatorProcess {
 public:
  AggregatorProcess(const TempDir& dir, uint16_t port, std::vector<std::string> extra_args = {})
      : dir_(dir), port_(port), extra_args_(std::move(extra_args)) {}
  ~AggregatorProcess() {
    if (pid_ > 0) Kill();
  }
  // Starts the binary and waits for /healthz (at most 60 s: a machine busy
  // with the rest of the suite can be slow). FreePort() only found a port
  // free a moment ago; when the first start exits at once (another test
  // took it meanwhile), it is tried on a fresh one, up to three times. A
  // restart keeps its port.
  void Start() {
    for (int attempt = 0; attempt < 3; ++attempt) {
      Spawn();
      bool exited = false;
      const bool up = WaitUntil(
          [&] {
            int status = 0;
            if (waitpid(pid_, &status, WNOHANG) == pid_) {
              exited = true;
              return true;
            }
            HttpsClientOptions o = Options();
            o.timeout = std::chrono::milliseconds(2000);
            HttpsClient c(o);
            auto r = c.Get("/healthz");
            return r.ok() && r->status == 200;
          },
          std::chrono::seconds(60));
      if (up && !exited) {
        started_ = true;
        return;
      }
      if (!exited) {
        kill(pid_, SIGKILL);
        waitpid(pid_, nullptr, 0);
      }
      pid_ = -1;
      if (!exited || started_) break;
      port_ = FreePort();
    }
    FAIL() << "aggregator did not come up; its log:\n" << LogTail();
  }
  // The child, its stderr to aggregator.log.
  void Spawn() {
    pid_ = fork();
    if (pid_ == 0) {
      std::string p = std::to_string(port_);
      std::string log = dir_.File("aggregator.log");
      if (freopen(log.c_str(), "a", stderr) == nullptr) _exit(126);
      std::vector<std::string> args = {"fieldprof-aggregator", "--listen", "127.0.0.1", "--port", p,
                                       "--tls_cert", dir_.File("cert.pem"), "--tls_key",
                                       dir_.File("key.pem"), "--db", dir_.File("db"),
                                       "--io_threads", "2", "--workers", "4",
                                       // Tests send from one address and
                                       // one machine; those of the limit
                                       // and of k-anonymity set their own.
                                       "--source_batches_per_minute", "0", "--k_anonymity", "1"};
      args.insert(args.end(), extra_args_.begin(), extra_args_.end());
      std::vector<char*> argv;
      for (std::string& a : args) argv.push_back(a.data());
      argv.push_back(nullptr);
      execv(FIELDPROF_AGGREGATOR_BIN, argv.data());
      _exit(127);
    }
  }
  std::string LogTail() const {
    std::ifstream in(dir_.File("aggregator.log"));
    const std::string all(std::istreambuf_iterator<char>(in), {});
    return all.size() > 2000 ? all.substr(all.size() - 2000) : all;
  }
  void Kill() {
    kill(pid_, SIGKILL);
    waitpid(pid_, nullptr, 0);
    pid_ = -1;
  }
  void Term() {
    kill(pid_, SIGTERM);
    int status = 0;
    waitpid(pid_, &status, 0);
    pid_ = -1;
    EXPECT_TRUE(WIFEXITED(status) && WEXITSTATUS(status) == 0) << "status " << status;
  }
  // Waits until every accepted batch is applied (GET /metrics).
  void WaitApplied() {
    HttpsClient c(Options());
    for (int w = 0; w < 200; ++w) {
      auto m = c.Get("/metrics");
      if (m.ok() && m->body.find("\nfieldprof_pending_batches 0\n") != std::string::npos) return;
      std::this_thread::sleep_for(std::chrono::milliseconds(50));
    }
  }
  HttpsClientOptions Options() const {
    return {.host = "127.0.0.1",
            .port = port_,
            .ca_file = dir_.File("cert.pem"),
            .timeout = std::chrono::milliseconds(5000),
            .local_address = {},
            .loopback_ca_file = {}};
  }
  uint16_t port() const { return port_; }

 private:
  const TempDir& dir_;
  uint16_t port_;
  std::vector<std::string> extra_args_;
  pid_t pid_ = -1;
  bool started_ = false;  // came up once: restarts keep the port
};

}  // namespace fieldprof::testing

#endif  // FIELDPROF_TESTS_SUPPORT_AGGREGATOR_PROCESS_H_
