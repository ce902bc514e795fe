// A real ZooKeeper server (Debian's zookeeper package, installed by
// deploy/install-deps.sh) as a child process on a loopback port, with its
// data in a test's directory: started, stopped (SIGTERM, its data kept, as
// a restart) and killed by the test.
#ifndef FIELDPROF_TESTS_SUPPORT_ZOOKEEPER_PROCESS_H_
#define FIELDPROF_TESTS_SUPPORT_ZOOKEEPER_PROCESS_H_

#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <filesystem>
#include <fstream>
#include <string>
#include <thread>

#include "tests/support/test_util.h"

namespace fieldprof::testing {

class ZooKeeperProcess {
 public:
  explicit ZooKeeperProcess(const TempDir& dir) : dir_(dir), port_(FreePort()) {}
  ~ZooKeeperProcess() { Stop(SIGKILL); }

  // Starts it (again, on the same port and data) and waits until it
  // answers "ruok". False when it did not within 30 s (its log is in
  // dir/zookeeper/log).
  bool Start() {
    const std::string home = dir_.File("zookeeper");
    std::filesystem::create_directories(home + "/data");
    std::ofstream(home + "/zoo.cfg") << "tickTime=500\ninitLimit=10\nsyncLimit=5\n"
                                     << "dataDir=" << home << "/data\n"
                                     << "clientPort=" << port_ << "\n"
                                     << "clientPortAddress=127.0.0.1\n"
                                     << "admin.enableServer=false\n"
                                     << "4lw.commands.whitelist=ruok\n"
                                     << "maxSessionTimeout=60000\n";
    pid_ = fork();
    if (pid_ == 0) {
      setpgid(0, 0);
      if (freopen((home + "/log").c_str(), "a", stdout) == nullptr) _exit(126);
      if (dup2(fileno(stdout), fileno(stderr)) < 0) _exit(126);
      const std::string cfg = home + "/zoo.cfg";
      execl("/usr/bin/java", "java", "-Xmx256m", "-cp",
            "/etc/zookeeper/conf_example:/usr/share/java/zookeeper.jar",
            "org.apache.zookeeper.server.quorum.QuorumPeerMain", cfg.c_str(),
            static_cast<char*>(nullptr));
      _exit(127);
    }
    for (int i = 0; i < 300; ++i) {
      if (Ok()) return true;
      std::this_thread::sleep_for(std::chrono::milliseconds(100));
    }
    return false;
  }

  // SIGTERM (a restart keeps the data) or SIGKILL.
  void Stop(int sig = SIGTERM) {
    if (pid_ <= 0) return;
    kill(pid_, sig);
    waitpid(pid_, nullptr, 0);
    pid_ = -1;
  }

  // "127.0.0.1:PORT", as --zookeeper takes it.
  std::string Servers() const { return "127.0.0.1:" + std::to_string(port_); }

 private:
  // Whether it answers the "ruok" four-letter command with "imok".
  bool Ok() const {
    int fd = socket(AF_INET, SOCK_STREAM, 0);
    sockaddr_in a{};
    a.sin_family = AF_INET;
    a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    a.sin_port = htons(port_);
    bool ok = false;
    if (connect(fd, reinterpret_cast<sockaddr*>(&a), sizeof a) == 0 && write(fd, "ruok", 4) == 4) {
      char buf[8] = {};
      ok = read(fd, buf, 4) == 4 && std::string(buf, 4) == "imok";
    }
    close(fd);
    return ok;
  }

  const TempDir& dir_;
  uint16_t port_;
  pid_t pid_ = -1;
};

}  // namespace fieldprof::testing

#endif  // FIELDPROF_TESTS_SUPPORT_ZOOKEEPER_PROCESS_H_
