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
//   fieldprof::FillNextSlots(resolve);  // in a pre-fork handler
//
// The section's bounds are hidden symbols: each library sees its own.
#ifndef FIELDPROF_COMMON_NEXT_SLOTS_H_
#define FIELDPROF_COMMON_NEXT_SLOTS_H_

#include <cstdint>

namespace fieldprof {

struct NextSlot {
  const char* name;
  void* cache;  // a function pointer (or an atomic one), null until found
};

}  // namespace fieldprof

// Registers `var`, a function pointer (or std::atomic of one) of static
// storage, as the cache of `name`'s next definition.
#define FP_NEXT_SLOT(var, name)                                                                 \
  [[gnu::used,                                                                                  \
    gnu::section("fp_next_slots")]] static const ::fieldprof::NextSlot var##_next_slot = {name, \
                                                                                          &var}

extern "C" const fieldprof::NextSlot __start_fp_next_slots[]
    __attribute__((weak, visibility("hidden")));
extern "C" const fieldprof::NextSlot __stop_fp_next_slots[]
    __attribute__((weak, visibility("hidden")));

namespace fieldprof {

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

}  // namespace fieldprof

#endif  // FIELDPROF_COMMON_NEXT_SLOTS_H_
