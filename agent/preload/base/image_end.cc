// The exec family and _exit/_Exit, wrapped once for every preloaded
// library (image_end.h). The C library's own variants call execve inside,
// not through its exported symbol, so each variant is wrapped; each goes
// on to the next library's definition of the same call (execl to execv,
// execle to execve) and through this library's hooks once.
//
// No C++ runtime: the field runtime links this file too, and links libc
// only. The argument vectors of execl and its kin live on the caller's
// stack.
#include "agent/preload/base/image_end.h"

#include <alloca.h>
#include <errno.h>

#include <cstdarg>
#include <cstddef>

#include "agent/preload/base/next_slots.h"

// The runtime keeps the caches it uses on its hot page (agent/preload/runtime/hotpath/hotpath.h).
#ifdef FIELDPROF_RUNTIME
#define FP_IMAGE_END_DATA __attribute__((section(".data.fp_hot")))
#else
#define FP_IMAGE_END_DATA
#endif
#define FP_IMAGE_END_EXPORT extern "C" __attribute__((visibility("default")))

namespace {

using fieldprof::preload::Next;

template <typename Exec>
int AroundExec(Exec exec) {
  const int before = fieldprof::preload::BeforeExec();
  const int r = exec();
  const int saved = errno;
  fieldprof::preload::AfterFailedExec(before);
  errno = saved;
  return r;
}

using ExecveFn = int (*)(const char*, char* const[], char* const[]);
using ExecvFn = int (*)(const char*, char* const[]);
using ExitFn = void (*)(int);
FP_IMAGE_END_DATA ExecveFn next_execve;
FP_IMAGE_END_DATA ExecveFn next_execvpe;
FP_IMAGE_END_DATA ExecvFn next_execv;
FP_IMAGE_END_DATA ExecvFn next_execvp;
FP_IMAGE_END_DATA int (*next_fexecve)(int, char* const[], char* const[]);
FP_IMAGE_END_DATA int (*next_execveat)(int, const char*, char* const[], char* const[], int);
FP_IMAGE_END_DATA ExitFn next_exit;
FP_IMAGE_END_DATA ExitFn next_Exit;
FP_NEXT_SLOT(next_execve, "execve");
FP_NEXT_SLOT(next_execvpe, "execvpe");
FP_NEXT_SLOT(next_execv, "execv");
FP_NEXT_SLOT(next_execvp, "execvp");
FP_NEXT_SLOT(next_fexecve, "fexecve");
FP_NEXT_SLOT(next_execveat, "execveat");
FP_NEXT_SLOT(next_exit, "_exit");
FP_NEXT_SLOT(next_Exit, "_Exit");

// The arguments of an execl-style call, up to its null pointer, as an argv
// on the caller's stack; after the null, execle's environment.
#define FP_COLLECT_ARGS(arg, argv, after_null)                                      \
  size_t argc_ = 1;                                                                 \
  {                                                                                 \
    va_list ap;                                                                     \
    va_start(ap, arg);                                                              \
    while (va_arg(ap, const char*) != nullptr) ++argc_;                             \
    va_end(ap);                                                                     \
  }                                                                                 \
  auto** argv = static_cast<char**>(__builtin_alloca((argc_ + 1) * sizeof(char*))); \
  {                                                                                 \
    va_list ap;                                                                     \
    va_start(ap, arg);                                                              \
    argv[0] = const_cast<char*>(arg);                                               \
    for (size_t i = 1; i <= argc_; ++i) argv[i] = va_arg(ap, char*);                \
    after_null;                                                                     \
    va_end(ap);                                                                     \
  }

}  // namespace

FP_IMAGE_END_EXPORT int execve(const char* path, char* const argv[], char* const envp[]) {
  return AroundExec([&] { return Next(&next_execve, "execve")(path, argv, envp); });
}
FP_IMAGE_END_EXPORT int execv(const char* path, char* const argv[]) {
  return AroundExec([&] { return Next(&next_execv, "execv")(path, argv); });
}
FP_IMAGE_END_EXPORT int execvp(const char* file, char* const argv[]) {
  return AroundExec([&] { return Next(&next_execvp, "execvp")(file, argv); });
}
FP_IMAGE_END_EXPORT int execvpe(const char* file, char* const argv[], char* const envp[]) {
  return AroundExec([&] { return Next(&next_execvpe, "execvpe")(file, argv, envp); });
}
FP_IMAGE_END_EXPORT int fexecve(int fd, char* const argv[], char* const envp[]) {
  return AroundExec([&] { return Next(&next_fexecve, "fexecve")(fd, argv, envp); });
}
FP_IMAGE_END_EXPORT int execveat(int dirfd, const char* path, char* const argv[],
                                 char* const envp[], int flags) {
  return AroundExec(
      [&] { return Next(&next_execveat, "execveat")(dirfd, path, argv, envp, flags); });
}
FP_IMAGE_END_EXPORT int execl(const char* path, const char* arg, ...) {
  FP_COLLECT_ARGS(arg, argv, (void)0)
  return AroundExec([&] { return Next(&next_execv, "execv")(path, argv); });
}
FP_IMAGE_END_EXPORT int execlp(const char* file, const char* arg, ...) {
  FP_COLLECT_ARGS(arg, argv, (void)0)
  return AroundExec([&] { return Next(&next_execvp, "execvp")(file, argv); });
}
FP_IMAGE_END_EXPORT int execle(const char* path, const char* arg, ...) {
  char* const* envp = nullptr;
  FP_COLLECT_ARGS(arg, argv, envp = va_arg(ap, char* const*))
  return AroundExec([&] { return Next(&next_execve, "execve")(path, argv, envp); });
}
#undef FP_COLLECT_ARGS

FP_IMAGE_END_EXPORT [[noreturn]] void _exit(int status) {
  fieldprof::preload::BeforeExit();
  Next(&next_exit, "_exit")(status);
  __builtin_unreachable();
}
FP_IMAGE_END_EXPORT [[noreturn]] void _Exit(int status) {
  fieldprof::preload::BeforeExit();
  Next(&next_Exit, "_Exit")(status);
  __builtin_unreachable();
}
