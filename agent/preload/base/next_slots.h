// The caches in which a preloaded library's interposers keep the
// definition each goes on to (the C library's execve, dup2, read, ...),
// registered in one section of the library so that all of them can be
// filled at once, early.
//
// Why: filling a cache at a wrapper's first call looks in the dynamic
// linker (dlsym, dl_iterate_phdr), which takes its lock. In a fork child
// that lock may be held for good: another thread of the parent held it at
// the fork (loading a library, walking them) and is not in the child.
// Chromium's browser forks and calls dup2 before exec: a child that looked
// dup2 up there hung. Each library fills every cache before the
// program's first fork (the samplers at start, the runtime in its pre-fork
// handler) and again before a later one when objects came since; the
// child finds them full.
//
//   FP_HOT_DATA int (*next_dup2)(int, int);
//   FP_NEXT_SLOT(next_dup2, "dup2");
//   ...
//   fieldprof::preload::FillEveryNext();  // in a pre-fork handler
//
// The section's bounds are hidden symbols: each library sees its own.
#ifndef FIELDPROF_AGENT_PRELOAD_BASE_NEXT_SLOTS_H_
#define FIELDPROF_AGENT_PRELOAD_BASE_NEXT_SLOTS_H_

#include <cstdint>

namespace fieldprof::preload {

struct NextSlot {
  const char* name;
  void* cache;  // a function pointer (or an atomic one), null until found
};

}  // namespace fieldprof::preload

// Registers `var`, a function pointer (or std::atomic of one) of static
// storage, as the cache of `name`'s next definition.
#define FP_NEXT_SLOT(var, name)                                                            \
  [[gnu::used, gnu::section("fp_next_slots")]] static const ::fieldprof::preload::NextSlot \
      var##_next_slot = {name, &var}

extern "C" const fieldprof::preload::NextSlot __start_fp_next_slots[]
    __attribute__((weak, visibility("hidden")));
extern "C" const fieldprof::preload::NextSlot __stop_fp_next_slots[]
    __attribute__((weak, visibility("hidden")));

namespace fieldprof::preload {

// Fills this library's empty caches: `resolve(names, out, n)` sets out[i]
// to names[i]'s next definition, or leaves it 0 when there is none (an
// unwinder function before libgcc_s is loaded stays empty). Returns how
// many stay empty.
template <typename Resolve>
int FillNextSlots(Resolve&& resolve) {
  constexpr int kBatch = 64;
  const char* names[kBatch];
  uintptr_t found[kBatch];
  void** caches[kBatch];
  int empty = 0;
  const NextSlot* s = __start_fp_next_slots;
  while (s != nullptr && s < __stop_fp_next_slots) {
    int n = 0;
    for (; s < __stop_fp_next_slots && n < kBatch; ++s) {
      void** cache = static_cast<void**>(s->cache);
      if (__atomic_load_n(cache, __ATOMIC_ACQUIRE) != nullptr) continue;
      names[n] = s->name;
      found[n] = 0;
      caches[n++] = cache;
    }
    if (n == 0) continue;
    resolve(names, found, n);
    for (int i = 0; i < n; ++i) {
      if (found[i] == 0) {
        ++empty;
      } else {
        __atomic_store_n(caches[i], reinterpret_cast<void*>(found[i]), __ATOMIC_RELEASE);
      }
    }
  }
  return empty;
}

// Defined by each library that links this base (agent/preload/base/): for
// each names[i] whose out[i] is 0, the address of the name's next
// definition after the library, or 0 when there is none. The runtime reads
// the loaded objects' symbol tables itself (agent/preload/runtime/binder/next_symbol.h);
// the samplers ask dlsym(RTLD_NEXT).
void FindNext(const char* const* names, uintptr_t* out, int n);

// Fills every empty cache of this library (FindNext).
inline int FillEveryNext() { return FillNextSlots(FindNext); }

// Whether objects came since the last fill: a name found nowhere then may
// be found now. Each library has its own (hidden, as all of its symbols).
inline bool next_slots_stale = true;
inline void NextSlotsMayResolve() { __atomic_store_n(&next_slots_stale, true, __ATOMIC_RELAXED); }

// Before a fork: fills what is empty, unless nothing came since the last
// fill. The first fork fills every cache.
inline void FillEveryNextIfStale() {
  if (__atomic_exchange_n(&next_slots_stale, false, __ATOMIC_RELAXED)) FillEveryNext();
}

// The next definition of `name`, kept in `cache`: filled before a fork by
// FillEveryNext, so that a fork child never looks; looked up here only if
// it was missing then (a name found nowhere yet, or a call before the
// fill). No guard variable: a function-local static's guard deadlocked
// when a signal arrived inside the lookup and its handler called the same
// wrapper.
template <typename F>
F Next(F* cache, const char* name) {
  F f = __atomic_load_n(cache, __ATOMIC_ACQUIRE);
  if (f == nullptr) [[unlikely]] {
    uintptr_t a = 0;
    FindNext(&name, &a, 1);
    f = reinterpret_cast<F>(a);
    __atomic_store_n(cache, f, __ATOMIC_RELEASE);
  }
  return f;
}

}  // namespace fieldprof::preload

#endif  // FIELDPROF_AGENT_PRELOAD_BASE_NEXT_SLOTS_H_
