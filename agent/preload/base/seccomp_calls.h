// The calls that put a process under a seccomp filter, as the libraries
// fieldprof preloads into other programs see them: each of them wraps
// prctl() and syscall() and, before such a call, stops making system calls
// of its own (a filter may kill the process at the first it did not
// expect). Header-only: no dependency for the preloaded libraries.
#ifndef FIELDPROF_AGENT_PRELOAD_BASE_SECCOMP_CALLS_H_
#define FIELDPROF_AGENT_PRELOAD_BASE_SECCOMP_CALLS_H_

#include <linux/seccomp.h>
#include <sys/prctl.h>
#include <sys/syscall.h>

#include <cstdarg>

namespace fieldprof {

// The six arguments a syscall() caller passed (the unused ones are
// whatever their registers held, as the C library's own syscall() takes
// them).
struct SyscallArgs {
  long a[6];
};
#define FP_SYSCALL_ARGS(last_named, out)             \
  do {                                               \
    va_list ap_;                                     \
    va_start(ap_, last_named);                       \
    for (long& x_ : (out).a) x_ = va_arg(ap_, long); \
    va_end(ap_);                                     \
  } while (0)

// prctl(option, ...) installs a filter (or strict mode).
inline bool PrctlInstallsSeccomp(long option) { return option == PR_SET_SECCOMP; }

// syscall(number, first, ...) installs a filter: seccomp() with a mode
// that sets one, or prctl(PR_SET_SECCOMP) by number.
inline bool SyscallInstallsSeccomp(long number, long first) {
  return (number == SYS_seccomp &&
          (first == SECCOMP_SET_MODE_FILTER || first == SECCOMP_SET_MODE_STRICT)) ||
         (number == SYS_prctl && PrctlInstallsSeccomp(first));
}

}  // namespace fieldprof

#endif  // FIELDPROF_AGENT_PRELOAD_BASE_SECCOMP_CALLS_H_
