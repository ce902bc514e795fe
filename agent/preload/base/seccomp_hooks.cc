// prctl() and syscall(), wrapped once for every preloaded library that
// links this file: before either installs a seccomp filter, the library's
// BeforeSeccomp (image_end.h). A filter installed by the system call
// instruction itself, as Chromium's sandbox does, is not seen here.
#include <cstdarg>

#include "agent/preload/base/image_end.h"
#include "agent/preload/base/next_slots.h"
#include "agent/preload/base/seccomp_calls.h"

#ifdef FIELDPROF_RUNTIME
#define FP_SECCOMP_DATA __attribute__((section(".data.fp_hot")))
#else
#define FP_SECCOMP_DATA
#endif

namespace {

using PrctlFn = int (*)(int, unsigned long, unsigned long, unsigned long, unsigned long);
FP_SECCOMP_DATA PrctlFn next_prctl;
FP_SECCOMP_DATA fieldprof::preload::SyscallFn next_syscall;
FP_NEXT_SLOT(next_prctl, "prctl");
FP_NEXT_SLOT(next_syscall, "syscall");

}  // namespace

namespace fieldprof::preload {
SyscallFn NextSyscall() { return Next(&next_syscall, "syscall"); }
// unwinder_io.h's, in the libraries that unwind with libunwind; absent
// (null) in the runtime.
__attribute__((weak, visibility("hidden"))) bool UnwinderSyscall(long number, const long* args,
                                                                 long* result);
}  // namespace fieldprof::preload

extern "C" __attribute__((visibility("default"))) int prctl(int option, ...) {
  va_list ap;
  va_start(ap, option);
  const unsigned long a2 = va_arg(ap, unsigned long), a3 = va_arg(ap, unsigned long),
                      a4 = va_arg(ap, unsigned long), a5 = va_arg(ap, unsigned long);
  va_end(ap);
  if (fieldprof::PrctlInstallsSeccomp(option)) fieldprof::preload::BeforeSeccomp();
  return fieldprof::preload::Next(&next_prctl, "prctl")(option, a2, a3, a4, a5);
}

extern "C" __attribute__((visibility("default"))) long syscall(long number, ...) {
  fieldprof::SyscallArgs args;
  FP_SYSCALL_ARGS(number, args);
  const long* a = args.a;
  if (long r = 0; fieldprof::preload::UnwinderSyscall != nullptr &&
                  fieldprof::preload::UnwinderSyscall(number, a, &r)) {
    return r;  // libunwind's memory check, while its library unwinds
  }
  if (fieldprof::SyscallInstallsSeccomp(number, a[0])) fieldprof::preload::BeforeSeccomp();
  return fieldprof::preload::NextSyscall()(number, a[0], a[1], a[2], a[3], a[4], a[5]);
}
