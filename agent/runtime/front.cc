// libfieldprof-front.so: what a session preloads into every process. About
// a page of code: the first look at the run (first_look.h: consent and the
// sampling coin, three system calls, no libc call) and, only in a run that
// may be measured, a dlopen of the runtime beside it (libfieldprof.so),
// whose constructor decides in full and sets everything up, pointing the
// program's imports at its interposers itself (late_interpose.h). An
// unmeasured process maps this object and nothing of the runtime.
//
// The runtime is found next to this file, through the symbolic link a
// session preloads it by ($XDG_RUNTIME_DIR/fieldprof/libfieldprof.so ->
// /usr/lib/fieldprof/libfieldprof-front.so) when there is one.
#include <dlfcn.h>
#include <unistd.h>

#include "agent/runtime/first_look.h"

namespace fieldprof::rt {
namespace {

constexpr char kRuntime[] = "libfieldprof.so";

// `dir` ends where the last '/' of `path` is; false when there is none or
// the result would not fit `cap` with the runtime's name.
bool RuntimeBeside(const char* path, char* out, size_t cap) {
  size_t slash = 0, n = 0;
  for (; path[n] != 0; ++n) {
    if (path[n] == '/') slash = n + 1;
  }
  if (slash == 0 || slash + sizeof kRuntime > cap) return false;
  for (size_t i = 0; i < slash; ++i) out[i] = path[i];
  for (size_t i = 0; i < sizeof kRuntime; ++i) out[slash + i] = kRuntime[i];
  return true;
}

__attribute__((constructor(101))) void Front(int, char**, char** envp) {
  if (LookAtRun(envp) != FirstLook::kGoOn) return;
  Dl_info self;
  if (dladdr(reinterpret_cast<void*>(&Front), &self) == 0 || self.dli_fname == nullptr) return;
  char target[4096];
  const char* where = self.dli_fname;
  const ssize_t n = readlink(where, target, sizeof target - 1);
  if (n > 0) {
    target[n] = 0;
    // A relative link is relative to the link's own directory.
    if (target[0] != '/') return;
    where = target;
  }
  char runtime[4096];
  if (!RuntimeBeside(where, runtime, sizeof runtime)) return;
  // Its constructor runs now, with this process's arguments and
  // environment, as if it had been preloaded.
  dlopen(runtime, RTLD_NOW | RTLD_LOCAL);
}

}  // namespace
}  // namespace fieldprof::rt
