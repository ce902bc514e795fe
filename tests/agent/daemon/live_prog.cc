// A program for tests/agent/daemon/live_test.cc: calls fp_test_alloc(16) (of
// libfieldprof_testlib.so: one malloc of exactly 16 bytes a call) a known
// number of times, on two threads, and then ends as the test says, with no
// call in flight:
//
//   fieldprof_liveprog CALLS END [STATUS_FILE]
//     END: exit | int | term | hup | kill | abort | segv | rounds
//   exit   returns from main;
//   int, term, hup, abort, segv   raises that end on itself;
//   kill   writes "ready" to STATUS_FILE and waits to be SIGKILLed;
//   rounds does CALLS calls in each of 3 rounds: after each it writes the
//          round's number to STATUS_FILE and waits for STATUS_FILE.go<n>
//          (the test's agent pass in between), then exits;
//   closefds  closes every descriptor past stderr, as daemons do, opens a
//          file of its own (which takes the runtime's descriptor number),
//          forks a child that checks the file is still open (7 if not),
//          does CALLS calls more and exits 0 if its file is as it left it
//          (5 if not): the runtime must never touch a descriptor it lost.
// Prints nothing; the test counts the calls itself (CALLS per round, all
// completed before the end).
#include <fcntl.h>
#include <signal.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <thread>

extern "C" void fp_test_alloc(size_t n);  // tests/agent/preload/runtime/testlib.cc

namespace {

void Calls(long n) {
  for (long i = 0; i < n; ++i) fp_test_alloc(16);
}

// `calls` on two threads, half each.
void Round(long calls) {
  std::thread other(Calls, calls / 2);
  Calls(calls - calls / 2);
  other.join();
}

void Say(const char* path, const std::string& what) {
  const std::string tmp = std::string(path) + ".tmp";
  FILE* f = std::fopen(tmp.c_str(), "w");
  if (f == nullptr) std::exit(3);
  std::fputs(what.c_str(), f);
  std::fclose(f);
  std::rename(tmp.c_str(), path);
}

void WaitFor(const std::string& path) {
  while (access(path.c_str(), F_OK) != 0) usleep(2000);
}

}  // namespace

int main(int argc, char** argv) {
  if (argc < 3) return 2;
  const long calls = std::atol(argv[1]);
  const std::string end = argv[2];
  const char* status = argc > 3 ? argv[3] : nullptr;
  if (end == "rounds") {
    if (status == nullptr) return 2;
    for (int r = 1; r <= 3; ++r) {
      Round(calls);
      Say(status, std::to_string(r));
      WaitFor(std::string(status) + ".go" + std::to_string(r));
    }
    return 0;
  }
  Round(calls);
  if (end == "closefds" && status != nullptr) {
    for (int fd = 3; fd < 1024; ++fd) close(fd);
    const std::string mine = std::string(status) + ".mine";
    const int fd = open(mine.c_str(), O_RDWR | O_CREAT | O_TRUNC, 0600);
    if (fd < 0 || write(fd, "mine\n", 5) != 5) return 4;
    // A fork: the child's runtime lets go of its parent's descriptor (the
    // number it remembers is this file's now).
    const pid_t child = fork();
    if (child == 0) {
      struct stat cst;
      _exit(fstat(fd, &cst) == 0 && cst.st_size == 5 ? 0 : 7);
    }
    int child_status = 0;
    if (child < 0 || waitpid(child, &child_status, 0) != child || !WIFEXITED(child_status) ||
        WEXITSTATUS(child_status) != 0) {
      return 7;
    }
    Round(calls);
    struct stat st;
    char buf[8] = {};
    if (fstat(fd, &st) != 0 || st.st_size != 5 || pread(fd, buf, 5, 0) != 5 ||
        std::string(buf) != "mine\n") {
      return 5;
    }
    return close(fd) == 0 ? 0 : 6;
  }
  if (end == "exit") return 0;
  if (end == "int") raise(SIGINT);
  if (end == "term") raise(SIGTERM);
  if (end == "hup") raise(SIGHUP);
  if (end == "abort") std::abort();
  if (end == "segv") *static_cast<volatile int*>(nullptr) = 1;
  if (end == "kill" && status != nullptr) {
    Say(status, "ready");
    for (;;) pause();
  }
  return 2;
}
