// The ways a process image ends that no destructor sees: exec, in every
// variant (execve, execv, execvp, execvpe, execl, execlp, execle, fexecve,
// execveat), and _exit/_Exit. image_end.cc wraps each of them once; every
// library fieldprof preloads into other programs links it and says here
// what it does at each end. With several of them preloaded, each call
// passes through each library once (a wrapper goes on to the next
// library's, never back through its own).
//
// Also the calls that put the process under a seccomp filter, prctl() and
// syscall() (seccomp_hooks.cc, seccomp_calls.h): a filter may kill the
// process at the first system call it did not expect, and each library
// makes calls the program never does.
#ifndef FIELDPROF_AGENT_PRELOAD_BASE_IMAGE_END_H_
#define FIELDPROF_AGENT_PRELOAD_BASE_IMAGE_END_H_

namespace fieldprof::preload {

// Defined by the library. Before an exec that may replace the image:
// what the library keeps goes to its file now. The answer comes back to
// AfterFailedExec if the exec fails (the image goes on).
int BeforeExec();
void AfterFailedExec(int before_exec);

// Defined by the library. Before _exit or _Exit end the image.
void BeforeExit();

// Defined by the library, when it links seccomp_hooks.cc. Before a filter
// is installed: nothing more of the library's may make a system call.
void BeforeSeccomp();

// The C library's syscall() (the next definition after this library's
// wrapper), for the library's own calls from places where a wrapper must
// not run (a signal handler, before the cache could be filled).
using SyscallFn = long (*)(long, long, long, long, long, long, long);
SyscallFn NextSyscall();

}  // namespace fieldprof::preload

#endif  // FIELDPROF_AGENT_PRELOAD_BASE_IMAGE_END_H_
