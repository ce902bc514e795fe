// libfieldprof-front.so: what a session preloads into every process: the
// first look at the run (first_look.h: consent and the sampling coin,
// three system calls, no libc call; the only code most processes run);
// in a sampled run the decision (decide.h: load, rate cap, slot); and only
// in a run it will measure, a dlopen of the runtime beside it
// (libfieldprof.so), which takes the decision over (front_handoff.h) and
// sets everything up, pointing the program's imports at its interposers
// itself (late_interpose.h). A process it does not measure maps this
// object and nothing of the runtime.
//
// The runtime is found next to this file, through the symbolic link a
// session preloads it by ($XDG_RUNTIME_DIR/fieldprof/libfieldprof.so ->
// /usr/lib/fieldprof/libfieldprof-front.so) when there is one.
#include <dlfcn.h>
#include <unistd.h>

#include "agent/preload/runtime/front/first_look.h"
#include "agent/preload/runtime/front/front_handoff.h"
#include "agent/preload/runtime/sys.h"

// Read by the runtime (front_handoff.h); in .bss, untouched unless sampled
// (or read, when a module built with fieldprof/points.h comes or goes).
extern "C" __attribute__((visibility("default")))
fieldprof::rt::FrontHandoff fieldprof_front_handoff;
fieldprof::rt::FrontHandoff fieldprof_front_handoff;

// A module built with fieldprof/points.h comes or goes: the header calls
// this first among the module's constructors and last among its
// destructors, whichever object first defines it. Loaded with
// RTLD_LOCAL, the runtime is not one to be found, so the front answers and
// passes the call on once the runtime measures this run (it arms the
// module before its constructors pass their points). Otherwise nothing.
extern "C" __attribute__((visibility("default"))) void fieldprof_point_module(
    volatile unsigned short* semaphore, int arriving) {
  void (*const to)(volatile unsigned short*, int) =
      __atomic_load_n(&fieldprof_front_handoff.point_module, __ATOMIC_ACQUIRE);
  if (to != nullptr) to(semaphore, arriving);
}

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

// The runtime beside this object, or false (`out` unset).
bool FindRuntime(char* out, size_t cap);

__attribute__((constructor(101))) void Front(int, char**, char** envp) {
  SettingsText text;
  if (LookAtRun(envp, &text) != FirstLook::kGoOn) return;
  FrontHandoff& h = fieldprof_front_handoff;
  const RunDecision d = DecideRun(&h.settings, &text, envp);
  if (d.verdict != Verdict::kMeasure) return;
  char runtime[4096];
  h.slot_fd = d.slot_fd;
  h.ready = 1;
  // Its constructor runs now, with this process's arguments and
  // environment, as if it had been preloaded, and takes the decision over.
  if (FindRuntime(runtime, sizeof runtime) && dlopen(runtime, RTLD_NOW | RTLD_LOCAL) != nullptr) {
    return;
  }
  h.ready = 0;  // not measured after all: the slot goes back
  sys::Close(h.slot_fd);
}

bool FindRuntime(char* runtime, size_t cap) {
  Dl_info self;
  if (dladdr(reinterpret_cast<void*>(&Front), &self) == 0 || self.dli_fname == nullptr) {
    return false;
  }
  char target[4096];
  const char* where = self.dli_fname;
  const ssize_t n = readlink(where, target, sizeof target - 1);
  if (n > 0) {
    target[n] = 0;
    if (target[0] == '/') {
      where = target;
    } else {
      // A relative link is relative to the link's own directory: the
      // runtime is then beside the link's directory joined with it.
      char joined[4096];
      size_t slash = 0, len = 0;
      for (; self.dli_fname[len] != 0; ++len) {
        if (self.dli_fname[len] == '/') slash = len + 1;
      }
      if (slash + static_cast<size_t>(n) + 1 > sizeof joined) return false;
      for (size_t i = 0; i < slash; ++i) joined[i] = self.dli_fname[i];
      for (ssize_t i = 0; i <= n; ++i) joined[slash + static_cast<size_t>(i)] = target[i];
      return RuntimeBeside(joined, runtime, cap);
    }
  }
  return RuntimeBeside(where, runtime, cap);
}

}  // namespace
}  // namespace fieldprof::rt
