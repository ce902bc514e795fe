#include "agent/preload/base/unwinder_io.h"

#include <fcntl.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <atomic>
#include <cerrno>

#include "agent/preload/base/high_fd.h"
#include "agent/preload/base/image_end.h"
#include "agent/preload/base/next_slots.h"

namespace fieldprof::preload {

thread_local int t_unwinding __attribute__((tls_model("initial-exec"))) = 0;
thread_local bool t_walk_gave_up __attribute__((tls_model("initial-exec"))) = false;

using Pipe2Fn = int (*)(int*, int);
Pipe2Fn g_next_pipe2 = nullptr;
FP_NEXT_SLOT(g_next_pipe2, "pipe2");

namespace {

// The pipe's two ends, or -1.
std::atomic<int> g_read_fd{-1}, g_write_fd{-1};

long Sys(long number, long a0, long a1, long a2) {
  return NextSyscall()(number, a0, a1, a2, 0, 0, 0);
}

}  // namespace

void OpenUnwinderPipe() {
  if (g_read_fd.load() >= 0) return;
  int fds[2];
  if (Next(&g_next_pipe2, "pipe2")(fds, O_NONBLOCK | O_CLOEXEC) != 0) return;
  // Nonblocking is the open pipe's, kept by the high duplicates.
  g_write_fd.store(MoveFdHigh(fds[1]));
  g_read_fd.store(MoveFdHigh(fds[0]));
}

ssize_t UnwinderRead(void* buf, size_t n) {
  const int fd = g_read_fd.load(std::memory_order_relaxed);
  const long r =
      fd >= 0 ? Sys(SYS_read, fd, reinterpret_cast<long>(buf), static_cast<long>(n)) : -1;
  if (r < 0) errno = EAGAIN;  // empty, or gone: never a reason to reopen
  return r;
}

bool UnwinderSyscall(long number, const long* args, long* result) {
  if (t_unwinding <= 0 || number != SYS_write) return false;
  const int fd = g_write_fd.load(std::memory_order_relaxed);
  if (fd < 0) {
    errno = EBADF;
    *result = -1;  // the address counts as unreadable: the walk stops there
    return true;
  }
  *result = Sys(SYS_write, fd, args[1], args[2]);
  return true;
}

// For pipe2() while unwinding: libunwind's own pipe is two high
// duplicates of ours, so that closing its numbers never closes ours.
bool UnwinderPipe(int fds[2]) {
  OpenUnwinderPipe();
  const int r = g_read_fd.load(), w = g_write_fd.load();
  if (r < 0 || w < 0) return false;
  fds[0] = DupFdHigh(r);
  fds[1] = DupFdHigh(w);
  if (fds[0] >= 0 && fds[1] >= 0) return true;
  if (fds[0] >= 0) close(fds[0]);
  if (fds[1] >= 0) close(fds[1]);
  return false;
}

}  // namespace fieldprof::preload

// pipe2(), wrapped: the pipe libunwind opens while unwinding is ours.
extern "C" __attribute__((visibility("default"))) int pipe2(int fds[2], int flags) {
  if (fieldprof::preload::t_unwinding > 0 && fieldprof::preload::UnwinderPipe(fds)) return 0;
  return fieldprof::preload::Next(&fieldprof::preload::g_next_pipe2, "pipe2")(fds, flags);
}
