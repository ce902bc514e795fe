// The allocation counters (companion.h): bytes and allocations during a
// measured call.
#include <errno.h>
#include <stdlib.h>

#include "agent/preload/runtime/companion.h"
#include "agent/preload/runtime/lab/lab_state.h"

using fieldprof::rt::CountersWillMove;
using fieldprof::rt::Counting;
using fieldprof::rt::ResolveNext;
using fieldprof::rt::t_state;
// Forwarded to the next definition (glibc's, or a preloaded allocator's),
// found with ResolveNext, which allocates nothing itself.

namespace {

struct AllocFns {
  void* (*malloc)(size_t);
  void* (*calloc)(size_t, size_t);
  void* (*realloc)(void*, size_t);
  void (*free)(void*);
  int (*posix_memalign)(void**, size_t, size_t);
  void* (*aligned_alloc)(size_t, size_t);
  void* (*memalign)(size_t, size_t);
  void* (*valloc)(size_t);
  bool lab;  // a census: blocks are told to the lab too (LabAllocated; frees through LabFree)
};
FP_HOT_DATA AllocFns real_alloc;

[[gnu::noinline, gnu::cold]] void ResolveAlloc() {
  static const char* const kNames[] = {"malloc",         "calloc",        "realloc",  "free",
                                       "posix_memalign", "aligned_alloc", "memalign", "valloc"};
  uintptr_t f[8] = {};
  ResolveNext(kNames, f, 8);
  if (f[0] == 0 || f[1] == 0 || f[2] == 0 || f[3] == 0) {
    abort();  // no allocator to forward to: nothing sane is possible
  }
  AllocFns a;
  a.malloc = reinterpret_cast<decltype(a.malloc)>(f[0]);
  a.calloc = reinterpret_cast<decltype(a.calloc)>(f[1]);
  a.realloc = reinterpret_cast<decltype(a.realloc)>(f[2]);
  a.free = reinterpret_cast<decltype(a.free)>(f[3]);
  a.posix_memalign = reinterpret_cast<decltype(a.posix_memalign)>(f[4]);
  a.aligned_alloc = reinterpret_cast<decltype(a.aligned_alloc)>(f[5]);
  a.memalign = reinterpret_cast<decltype(a.memalign)>(f[6]);
  a.valloc = reinterpret_cast<decltype(a.valloc)>(f[7]);
  // malloc last: the fast paths test it.
  real_alloc.calloc = a.calloc;
  real_alloc.realloc = a.realloc;
  real_alloc.free = a.free;
  real_alloc.posix_memalign = a.posix_memalign;
  real_alloc.aligned_alloc = a.aligned_alloc;
  real_alloc.memalign = a.memalign;
  real_alloc.valloc = a.valloc;
  __atomic_store_n(&real_alloc.malloc, a.malloc, __ATOMIC_RELEASE);
}

// Outside a measured call (Counting) the allocation functions just go on
// to the real ones: a program allocates far more often than it calls a
// chosen API.

// Inside a measured call (Counting()), block `p` of `n` bytes.
inline void CountAlloc(void* p, size_t n) {
  CountersWillMove(t_state);
  t_state.alloc_bytes += n;
  ++t_state.alloc_count;
  if (real_alloc.lab) [[unlikely]]
    fieldprof::rt::LabAllocated(p);
}

[[gnu::noinline]] void* MallocSlow(size_t n) {
  if (real_alloc.malloc == nullptr) ResolveAlloc();
  void* p = real_alloc.malloc(n);
  if (p != nullptr && Counting()) CountAlloc(p, n);
  return p;
}

[[gnu::noinline]] void* CallocSlow(size_t a, size_t b) {
  if (real_alloc.malloc == nullptr) ResolveAlloc();
  void* p = real_alloc.calloc(a, b);
  if (p != nullptr && Counting()) CountAlloc(p, a * b);
  return p;
}

[[gnu::noinline]] void* ReallocSlow(void* old, size_t n) {
  if (real_alloc.malloc == nullptr) ResolveAlloc();
  if (real_alloc.lab && old != nullptr && Counting()) fieldprof::rt::LabFreeing(old);
  void* p = real_alloc.realloc(old, n);
  if (p != nullptr && n > 0 && Counting()) CountAlloc(p, n);
  return p;
}

}  // namespace

extern "C" {

// malloc, calloc and realloc are shaped so that their common case (the
// allocator resolved, no measured call on the thread) is a check and a tail
// jump to the real function, with no frame: the rest is out of line.

FP_EXPORT void* malloc(size_t n) {
  if (real_alloc.malloc == nullptr || Counting()) [[unlikely]]
    return MallocSlow(n);
  return real_alloc.malloc(n);
}

FP_EXPORT void* calloc(size_t a, size_t b) {
  if (real_alloc.malloc == nullptr || Counting()) [[unlikely]]
    return CallocSlow(a, b);
  return real_alloc.calloc(a, b);
}

FP_EXPORT void* realloc(void* old, size_t n) {
  if (real_alloc.malloc == nullptr || Counting()) [[unlikely]]
    return ReallocSlow(old, n);
  return real_alloc.realloc(old, n);
}

FP_EXPORT void free(void* p) {
  if (p == nullptr) return;
  if (real_alloc.malloc == nullptr) ResolveAlloc();
  real_alloc.free(p);  // in a census, LabFree first (LabCountAllocations)
}

FP_EXPORT int posix_memalign(void** out, size_t align, size_t n) {
  if (real_alloc.malloc == nullptr) ResolveAlloc();
  if (!Counting()) [[likely]]
    return real_alloc.posix_memalign(out, align, n);
  const int r = real_alloc.posix_memalign(out, align, n);
  if (r == 0) CountAlloc(*out, n);
  return r;
}

FP_EXPORT void* aligned_alloc(size_t align, size_t n) {
  if (real_alloc.malloc == nullptr) ResolveAlloc();
  if (!Counting()) [[likely]]
    return real_alloc.aligned_alloc(align, n);
  void* p = real_alloc.aligned_alloc(align, n);
  if (p != nullptr) CountAlloc(p, n);
  return p;
}

FP_EXPORT void* memalign(size_t align, size_t n) {
  if (real_alloc.malloc == nullptr) ResolveAlloc();
  if (!Counting()) [[likely]]
    return real_alloc.memalign(align, n);
  void* p = real_alloc.memalign(align, n);
  if (p != nullptr) CountAlloc(p, n);
  return p;
}

FP_EXPORT void* valloc(size_t n) {
  if (real_alloc.malloc == nullptr) ResolveAlloc();
  if (!Counting()) [[likely]]
    return real_alloc.valloc(n);
  void* p = real_alloc.valloc(n);
  if (p != nullptr) CountAlloc(p, n);
  return p;
}

}  // extern "C"

namespace {

// The allocator's own free, while a census puts LabFree in its place.
void (*g_next_free)(void*);

// free in a census: a block freed inside a measured call is told to the
// lab first. Swapped in for the allocator's free, so that free itself
// stays a check and a jump for every process that is not a census.
void LabFree(void* p) {
  if (Counting()) fieldprof::rt::LabFreeing(p);
  g_next_free(p);
}

}  // namespace

void fieldprof::rt::LabCountAllocations() {
  if (real_alloc.malloc == nullptr) ResolveAlloc();
  g_next_free = real_alloc.free;
  real_alloc.free = LabFree;
  real_alloc.lab = true;
}

void fieldprof::rt::ResolveAllocators() {
  if (__atomic_load_n(&real_alloc.malloc, __ATOMIC_ACQUIRE) == nullptr) ResolveAlloc();
}
