#include "agent/preload/base/fork_hooks.h"

#include <pthread.h>

#include "agent/preload/base/next_slots.h"

namespace fieldprof::preload {
namespace {

DlIteratePhdrFn g_walk = nullptr;
void (*g_before)() = nullptr;
void (*g_child)() = nullptr;
bool g_loader_stuck = false;

void Before() {
  FillEveryNextIfStale();
  if (!LinkerLockKnown()) FindLinkerLock(g_walk);  // found once; a busy moment tries again
  if (g_before != nullptr) g_before();
}

void InChild() {
  // The child's one thread is new: it holds nothing, so an owner of any
  // name is one that did not come along (0 matches no thread).
  g_loader_stuck = LinkerLockHeldByAnother(0);
  if (g_child != nullptr) g_child();
}

}  // namespace

void AtFork(DlIteratePhdrFn walk, void (*before)(), void (*child)()) {
  g_walk = walk;
  g_before = before;
  g_child = child;
  pthread_atfork(Before, nullptr, InChild);
}

bool LoaderStuck() { return g_loader_stuck; }

}  // namespace fieldprof::preload
