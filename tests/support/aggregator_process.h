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
#include <string>
#include <thread>
#include <vector>

#include "common/https_client.h"
#include "tests/support/test_util.h"

namespace fieldprof::testing {

class AggregatorProcess {
 public:
  AggregatorProcess(const TempDir& dir, uint16_t port, std::vector<std::string> extra_args = {})
      : dir_(dir), port_(port), extra_args_(std::move(extra_args)) {}
  ~AggregatorProcess() {
    if (pid_ > 0) Kill();
  }
  // Starts the binary and waits for /healthz.
  void Start() {
    pid_ = fork();
    if (pid_ == 0) {
      std::string p = std::to_string(port_);
      std::string log = dir_.File("aggregator.log");
      if (freopen(log.c_str(), "a", stderr) == nullptr) _exit(126);
      std::vector<std::string> args = {"fieldprof-aggregator",
                                       "--listen",
                                       "127.0.0.1",
                                       "--port",
                                       p,
                                       "--tls_cert",
                                       dir_.File("cert.pem"),
                                       "--tls_key",
                                       dir_.File("key.pem"),
                                       "--db",
                                       dir_.File("db"),
                                       "--io_threads",
                                       "2",
                                       "--workers",
                                       "4"};
      args.insert(args.end(), extra_args_.begin(), extra_args_.end());
      std::vector<char*> argv;
      for (std::string& a : args) argv.push_back(a.data());
      argv.push_back(nullptr);
      execv(FIELDPROF_AGGREGATOR_BIN, argv.data());
      _exit(127);
    }
    HttpsClient c(Options());
    for (int i = 0; i < 200; ++i) {
      auto r = c.Get("/healthz");
      if (r.ok() && r->status == 200) return;
      std::this_thread::sleep_for(std::chrono::milliseconds(50));
    }
    FAIL() << "aggregator did not come up";
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
            .timeout = std::chrono::milliseconds(5000)};
  }
  uint16_t port() const { return port_; }

 private:
  const TempDir& dir_;
  uint16_t port_;
  std::vector<std::string> extra_args_;
  pid_t pid_ = -1;
};

}  // namespace fieldprof::testing

#endif  // FIELDPROF_TESTS_SUPPORT_AGGREGATOR_PROCESS_H_
