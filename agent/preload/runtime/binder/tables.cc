// The binder's tables: one mapping made at start, and the pages of it a
// run uses are the only ones ever touched (binder/internal.h).
#include <sys/mman.h>
#include <unistd.h>

#include "agent/preload/runtime/binder/internal.h"

namespace fieldprof::rt {

FP_HOT_DATA BinderTables* g_tables;
FP_HOT_DATA ApiNames* api_names;
FP_HOT_DATA Seen* g_seen;
FP_HOT_DATA bool g_starting;
FP_HOT_DATA uintptr_t g_page;

// Each first touch of a fresh page is a page fault: ~10 us on the virtual
// machines measured, against ~1.5 us a page when the kernel fills a range
// in one call (docs/benchmarks-history.md). So a small table the binder will use
// whole is mapped populated, and of a big one the parts about to be used
// are populated (MADV_POPULATE_WRITE, Linux 5.14; older kernels fault the
// pages in one by one, as before).
constexpr size_t kPopulateAtMost = 64 << 10;

void* MapZero(size_t bytes) {
  const int populate = bytes <= kPopulateAtMost ? MAP_POPULATE : 0;
  void* p = mmap(nullptr, bytes, PROT_READ | PROT_WRITE,
                 MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE | populate, -1, 0);
  return p == MAP_FAILED ? nullptr : p;
}

size_t RoundUp(size_t n, size_t to) { return (n + to - 1) / to * to; }

void Populate(const void* from, size_t bytes) {
  constexpr int kPopulateWrite = 23;  // MADV_POPULATE_WRITE
  const uintptr_t lo = reinterpret_cast<uintptr_t>(from) & ~(g_page - 1);
  const uintptr_t hi = RoundUp(reinterpret_cast<uintptr_t>(from) + bytes, g_page);
  madvise(reinterpret_cast<void*>(lo), hi - lo, kPopulateWrite);
}

bool MapTables() {
  g_page = static_cast<uintptr_t>(getpagesize());
  g_tables = static_cast<BinderTables*>(MapZero(sizeof(BinderTables)));
  if (g_tables == nullptr) return false;
  g_binder.blocks = g_tables->blocks;
  g_binder.forced = g_tables->forced;
  g_binder.objects = g_tables->objects;
  g_seen = g_tables->seen;
  api_names = g_tables->names;
  return true;
}

}  // namespace fieldprof::rt
