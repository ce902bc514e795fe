// libunwind's memory check, kept off the program's descriptors.
//
// libunwind 1.6 checks that an address may be read (a signal frame's saved
// registers, a frame-pointer guess) by writing one byte of it into a pipe
// and reading the pipe empty again. It opens that pipe at its first use, at
// the lowest free descriptors (3 and 4 in most programs), and keeps the
// numbers. A program that closes what it inherited above stderr (daemons,
// Chromium's children, Python's subprocess) and takes those numbers again
// for its own pipes and sockets then had bytes taken from them and written
// into them by every sample that checked an address: Chromium's network
// service lost bytes of its IPC and was restarted over and over until the
// browser gave up. When the pipe read failed, libunwind closed both
// numbers, the program's by then, to open a new one.
//
// So the libraries that unwind with libunwind mark their unwinding
// (UnwindScope), and while it lasts pipe2() (wrapped here) gives a pipe of
// ours at high descriptors, and read() (the sampler's wrapper) and
// syscall(SYS_write) (seccomp_hooks.cc) go to that pipe whatever
// descriptor they name. Outside it nothing changes.
#ifndef FIELDPROF_AGENT_PRELOAD_BASE_UNWINDER_IO_H_
#define FIELDPROF_AGENT_PRELOAD_BASE_UNWINDER_IO_H_

#include <sys/types.h>

#include <cerrno>

namespace fieldprof::preload {

// How deep the calling thread is in its library's unwinding.
extern thread_local int t_unwinding __attribute__((tls_model("initial-exec")));
// Set when, in this unwinding, a walk of the loaded objects found the
// dynamic linker's lock busy past its wait (loader_calls.cc): the later
// walks of the same unwinding do not wait again.
extern thread_local bool t_walk_gave_up __attribute__((tls_model("initial-exec")));

// Marks the calling thread's unwinding for as long as it lives. errno is
// cleared meanwhile and the program's put back after: libunwind reads its
// pipe in `do read(...) while (errno == EINTR)` without clearing errno
// first, and a program's errno is often EINTR when a sample comes (its
// blocking call, just interrupted by the sample before: most of a sleeping
// thread's samples under --wall).
class UnwindScope {
 public:
  UnwindScope() : saved_errno_(errno) {
    if (t_unwinding++ == 0) t_walk_gave_up = false;
    errno = 0;
  }
  ~UnwindScope() {
    --t_unwinding;
    errno = saved_errno_;
  }
  UnwindScope(const UnwindScope&) = delete;
  UnwindScope& operator=(const UnwindScope&) = delete;

 private:
  const int saved_errno_;
};

// Opens the pipe unless it is open: at the library's start, before its
// first unwind (libunwind opens its own then).
void OpenUnwinderPipe();

// For read() while unwinding: reads the pipe of ours (nonblocking). A pipe
// of ours gone (the program closed it) reads as empty, so that libunwind
// never closes numbers to open another.
ssize_t UnwinderRead(void* buf, size_t n);

// For syscall() while unwinding: SYS_write goes to the pipe of ours, and
// `*result` is what the call returns; false for any other call.
bool UnwinderSyscall(long number, const long* args, long* result);

}  // namespace fieldprof::preload

#endif  // FIELDPROF_AGENT_PRELOAD_BASE_UNWINDER_IO_H_
