#include "agent/preload/points/auto_points.h"

#include <pthread.h>
#include <stdlib.h>
#include <string.h>

#include <algorithm>
#include <mutex>
#include <string>
#include <unordered_map>

#include "agent/preload/base/next_slots.h"
#include "agent/preload/base/recorder_abi.h"
#include "agent/preload/points/ring.h"
#include "common/points/points_format.h"

namespace fieldprof::points {
namespace {

using fieldprof::preload::Next;

bool g_auto = false;

constexpr char kTag[] = "auto";
const fieldprof_point_site kStart = {kTag, "start"}, kFork = {kTag, "fork"}, kMain = {kTag, "main"},
                           kExec = {kTag, "exec"}, kExit = {kTag, "exit"},
                           kThread = {kTag, "thread"};

// A point of the program's, not of the recorder's own work.
void Hit(const fieldprof_point_site* site, int kind) {
  if (g_auto && t_own == 0) fieldprof_point_hit(site, kind, 0);
}

// The dlopen scopes open on this thread, innermost last (null: no scope).
constexpr int kDlopenDepth = 16;
__thread const fieldprof_point_site* t_dlopen[kDlopenDepth];
__thread int t_dlopen_depth;

// The sites of the dlopen scopes, one a library's file name, kept for the
// process's life (the drain reads a site's names when it first sees it).
std::mutex g_sites_mu;
std::unordered_map<std::string, const fieldprof_point_site*>* g_dlopen_sites;

const fieldprof_point_site* DlopenSite(const char* file) {
  const char* base = strrchr(file, '/');
  std::string name = std::string("dlopen ") + (base != nullptr ? base + 1 : file);
  name.resize(std::min<size_t>(name.size(), kMaxString));
  std::lock_guard<std::mutex> l(g_sites_mu);
  if (g_dlopen_sites == nullptr) {
    g_dlopen_sites = new std::unordered_map<std::string, const fieldprof_point_site*>();
  }
  auto [it, fresh] = g_dlopen_sites->try_emplace(name, nullptr);
  if (fresh) it->second = new fieldprof_point_site{kTag, strdup(name.c_str())};
  return it->second;
}

// What a wrapped thread runs: its scope around the program's routine, ended
// also by pthread_exit and cancellation. The library is built without C++
// exceptions (no destructor runs in a forced unwinding), so the end is a
// cancellation cleanup, which the unwinding runs.
struct ThreadStart {
  void* (*fn)(void*);
  void* arg;
};
void EndThreadScope(void*) { Hit(&kThread, FP_POINT_KIND_END); }
void* ThreadMain(void* p) {
  const ThreadStart s = *static_cast<ThreadStart*>(p);
  free(p);
  void* result;
  Hit(&kThread, FP_POINT_KIND_BEGIN);
  pthread_cleanup_push(EndThreadScope, nullptr);
  result = s.fn(s.arg);
  pthread_cleanup_pop(1);
  return result;
}

using MainFn = int (*)(int, char**, char**);
MainFn g_main = nullptr;
// main's return is an exit too: __libc_start_main's own call of exit is
// inside the C library, where no wrapper sees it.
int Main(int argc, char** argv, char** envp) {
  Hit(&kMain, FP_POINT_KIND_POINT);
  const int status = g_main(argc, argv, envp);
  Hit(&kExit, FP_POINT_KIND_POINT);
  return status;
}

using StartMainFn = int (*)(MainFn, int, char**, void (*)(), void (*)(), void (*)(), void*);
StartMainFn g_next_start_main = nullptr;
FP_NEXT_SLOT(g_next_start_main, "__libc_start_main");
using PthreadCreateFn = int (*)(pthread_t*, const pthread_attr_t*, void* (*)(void*), void*);
PthreadCreateFn g_next_pthread_create = nullptr;
FP_NEXT_SLOT(g_next_pthread_create, "pthread_create");
using ExitFn = void (*)(int);
ExitFn g_next_exit = nullptr;
FP_NEXT_SLOT(g_next_exit, "exit");

}  // namespace

bool AutoPointsOn() { return g_auto; }

void StartAutoPoints() {
  const char* on = getenv(kAutoEnv);
  g_auto = on != nullptr && strcmp(on, "1") == 0;
}

void AutoStart() {
  if (g_auto) fieldprof_point_hit(&kStart, FP_POINT_KIND_POINT, 0);
}
void AutoForked() {
  if (g_auto) fieldprof_point_hit(&kFork, FP_POINT_KIND_POINT, 0);
}
void AutoExec() { Hit(&kExec, FP_POINT_KIND_POINT); }
void AutoExit() { Hit(&kExit, FP_POINT_KIND_POINT); }

void AutoDlopenBegin(const char* file) {
  if (!g_auto) return;
  const fieldprof_point_site* site = nullptr;
  if (file != nullptr && t_own == 0) {
    site = DlopenSite(file);
    Hit(site, FP_POINT_KIND_BEGIN);
  }
  if (t_dlopen_depth < kDlopenDepth) t_dlopen[t_dlopen_depth] = site;
  ++t_dlopen_depth;
}

void AutoDlopenEnd() {
  if (!g_auto || t_dlopen_depth == 0) return;
  --t_dlopen_depth;
  const fieldprof_point_site* site =
      t_dlopen_depth < kDlopenDepth ? t_dlopen[t_dlopen_depth] : nullptr;
  if (site != nullptr) Hit(site, FP_POINT_KIND_END);
}

}  // namespace fieldprof::points

namespace pf = fieldprof::points;

extern "C" {

// main entered, with automatic points: main is called through pf::Main.
__attribute__((visibility("default"))) int __libc_start_main(pf::MainFn main, int argc, char** argv,
                                                             void (*init)(), void (*fini)(),
                                                             void (*rtld_fini)(), void* stack_end) {
  const pf::StartMainFn next = pf::Next(&pf::g_next_start_main, "__libc_start_main");
  if (pf::g_auto) {
    pf::g_main = main;
    main = pf::Main;
  }
  return next(main, argc, argv, init, fini, rtld_fini, stack_end);
}

// Each thread's scope, with automatic points. Not the recorder's own
// threads (its drain: t_own).
__attribute__((visibility("default"))) int pthread_create(pthread_t* t, const pthread_attr_t* attr,
                                                          void* (*fn)(void*), void* arg) {
  const pf::PthreadCreateFn next = pf::Next(&pf::g_next_pthread_create, "pthread_create");
  if (!pf::g_auto || pf::t_own != 0) return next(t, attr, fn, arg);
  auto* start = static_cast<pf::ThreadStart*>(malloc(sizeof(pf::ThreadStart)));
  if (start == nullptr) return next(t, attr, fn, arg);
  *start = {fn, arg};
  const int r = next(t, attr, pf::ThreadMain, start);
  if (r != 0) free(start);
  return r;
}

__attribute__((visibility("default"))) void exit(int status) noexcept {
  pf::AutoExit();
  pf::Next(&pf::g_next_exit, "exit")(status);
  __builtin_unreachable();
}

}  // extern "C"
