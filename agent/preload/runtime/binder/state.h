// The binder's state, shared by its two halves:
// - binder/trap_fast.cc, the first-call trap's common case, built with
//   -mgeneral-regs-only and calling no libc (the interrupted call's
//   argument registers, vector ones included, are still live);
// - binder.cc, everything that may call libc: start, finding objects,
//   trampolines, resolving lazily bound imports, the slow half of a trap
//   (run by trap_x86_64.S with the extended register state saved).
// Guarded by the binder lock (BinderLock below) unless said otherwise.
#ifndef FIELDPROF_AGENT_PRELOAD_RUNTIME_BINDER_STATE_H_
#define FIELDPROF_AGENT_PRELOAD_RUNTIME_BINDER_STATE_H_

#include <cstdint>

#include "agent/preload/runtime/binder/elf_object.h"
#include "agent/preload/runtime/hotpath/hotpath.h"
#include "agent/preload/runtime/runtime.h"

namespace fieldprof::rt {

// ImportSlot::state
inline constexpr uint8_t kTrapped = 0;  // the GOT entry (or T[i]) goes to the trap
inline constexpr uint8_t kDirect = 1;   // to the function, or the lazy PLT entry
inline constexpr uint8_t kBound = 2;    // to the stub of `stub`
inline constexpr uint8_t kLab = 3;      // to the lab stub of `lab` (lab.h)

// One candidate import: an object's GOT entry for a function another
// object defines.
struct ImportSlot {
  uintptr_t* got;
  uint64_t name_key;  // NameKey(name): the API's identity in the choice
  uintptr_t orig;     // the entry before the trap: a function or the lazy PLT entry
  uintptr_t target;   // the function once known (0: not yet)
  uint32_t object;    // index into BinderState::objects
  uint32_t symidx;    // in the object's dynamic symbol table
  uint8_t state;
  uint8_t relro;  // the entry is read-only: it stays on the trampoline, T[i] moves
  uint8_t lazy;   // orig is the lazy PLT entry (target unknown until resolved)
  int8_t stub;    // kBound: the slot
  uint32_t lab;   // kLab: the lab index
};

// A block of trampolines and their slots, made by one look at the loaded
// objects. Trampoline i, 16 bytes at code + 16 * i:
//   +0  jmp *table[i](%rip)   (an entry in a RELRO page points here)
//   +6  call thunk            (a writable entry points here; table[i] too,
//                              until the first call)
//   +11 int3 x 5
// and the thunk after the last one jumps to fp_trap, which finds i from
// the return address the call pushed (code + 16 * i + 11).
struct TrampBlock {
  uint8_t* code;
  uintptr_t* table;
  ImportSlot* slots;
  uint32_t count;
};
inline constexpr int kMaxBlocks = 256;
// Names trapped per randomly chosen API, on average (binder.h).
inline constexpr uint32_t kTrapPerApi = 128;
// Programs with at most this many imports at start have every name trapped.
inline constexpr uint64_t kTrapAll = 1024;
inline constexpr uintptr_t kTrampSize = 16;
inline constexpr uintptr_t kTrampCallOffset = 6;
inline constexpr uintptr_t kTrampMarkerOffset = 11;

// Api::flags
inline constexpr uint8_t kApiCalled = 1;
inline constexpr uint8_t kApiForced = 2;
inline constexpr uint8_t kApiExcluded = 4;  // its module is filtered out
inline constexpr uint8_t kApiEvicted = 8;   // chosen, then replaced
inline constexpr uint8_t kApiForcedModule = 16;
inline constexpr uint8_t kApiPoint = 32;  // named in `points` (binder.h)
// Its function's entry moved (points/field_setting.cc): its slot measures every
// call there, and callers elsewhere go on to that entry, never to the stub.
inline constexpr uint8_t kApiDetoured = 64;
// Its module's direct calls to it re-aimed at its slot (a second thread
// ran, so its entry stayed): bound like any API, callers elsewhere too.
inline constexpr uint8_t kApiRedirected = 128;

// One API name; open addressing by name_key (0: free entry).
struct Api {
  uint64_t name_key;
  int8_t stub;  // -1: not chosen
  uint8_t flags;
  uint8_t force;  // kApiForced: index into BinderState::forced
};

struct Object {
  ElfObject elf;
  int16_t block;                // its trampolines' block (-1: none)
  uint32_t first_slot, nslots;  // its slots in that block
  uint8_t alive;                // in the dynamic linker's list at the last look
  uint8_t initial;              // loaded before the runtime started: in the global scope
  uint8_t ours;                 // libfieldprof.so itself
  uint8_t vdso;
  uint8_t rtld;  // the dynamic linker: defines APIs (__tls_get_addr), its own calls untrapped
  uint8_t detours_looked;  // a points pass looked for its functions (lab.h)
  uint8_t system;          // SystemModule, once looked at: 0 not yet, 1 yes, 2 no
};
inline constexpr int kMaxObjects = 4096;

struct ForcedApi {
  uint64_t name_key;
  const char* symbol;  // in the settings' copy (BinderTables), kept for the run
  char module[256];    // "" = any
  bool point;          // from `points`: its module is always named
};

struct BinderState {
  volatile int lock;
  int k_random;  // chosen at random: k less the forced ones
  uint64_t seed;
  const char* allow_modules;
  const char* deny_modules;
  const char* system_code;    // the list's path (binder.h)
  const char* share_modules;  // the volunteer's shared modules
  // The list, mapped at its first use (module_naming.cc): its sorted
  // entries, how many; read once (1), or not there (2).
  const unsigned char* system_ids;
  uint32_t nsystem_ids;
  uint8_t system_ids_read;
  const char* debug_log;
  bool filters;  // allow or deny list set
  bool lab;      // lab mode (binder.h)

  Object* objects;  // kMaxObjects
  uint32_t nobjects;
  uint64_t adds, subs;  // dl_iterate_phdr's counts at the last look
  bool deferred;        // the last look left an object still being relocated

  TrampBlock* blocks;  // kMaxBlocks (BinderTables)
  int nblocks;

  // Names whose priority is at or above this are never trapped (binder.h);
  // set at start from the number of imports, ~0 when all are.
  uint64_t trap_below;

  Api* apis;  // capacity a power of two, at most half full
  uint32_t api_cap, napis;

  ForcedApi* forced;  // FP_MAX_APIS (BinderTables)
  int nforced;

  int32_t random_api[FP_MAX_APIS];  // the APIs chosen at random (Api indexes)
  int nrandom;
  uint8_t stub_used[FP_MAX_SLOTS];
  uint32_t pending_rebind;  // stubs whose callers are to be pointed at the API
  // Per stub of a kApiDetoured or kApiRedirected API: 1 + the index of the
  // object whose function enters it (points/field_setting.cc); 0 for the others.
  uint16_t moved_in[FP_MAX_SLOTS];

  uint64_t imports, first_calls, apis_called, evictions, refused_no_stub;
};

FP_HIDDEN extern BinderState g_binder;
FP_HIDDEN extern __thread int t_in_binder FP_TLS;

// The identity of an API name in the choice (64-bit FNV-1a: the binder
// compares keys, not strings).
inline uint64_t NameKey(const char* name) {
  uint64_t h = 1469598103934665603ull;
  for (const unsigned char* p = reinterpret_cast<const unsigned char*>(name); *p; ++p) {
    h ^= *p;
    h *= 1099511628211ull;
  }
  return h == 0 ? 1 : h;
}

inline uint64_t Mix64(uint64_t z) {  // splitmix64's finalizer
  z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
  z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
  return z ^ (z >> 31);
}

// The API table's index of `key`, or -1 (open addressing, linear probing;
// the table is at most half full).
inline int32_t FindApiIndex(uint64_t key) {
  if (g_binder.apis == nullptr) return -1;
  const uint32_t mask = g_binder.api_cap - 1;
  for (uint32_t i = static_cast<uint32_t>(key) & mask;; i = (i + 1) & mask) {
    const uint64_t k = g_binder.apis[i].name_key;
    if (k == key) return static_cast<int32_t>(i);
    if (k == 0) return -1;
  }
}

// The API's place in this run's choice: the lowest are chosen (binder.h).
inline uint64_t Priority(const Api& a) { return Mix64(g_binder.seed ^ a.name_key); }

inline void BinderLock() {
  while (__atomic_exchange_n(&g_binder.lock, 1, __ATOMIC_ACQUIRE) != 0) {
    for (int spins = 0; __atomic_load_n(&g_binder.lock, __ATOMIC_RELAXED) != 0; ++spins) {
      if (spins < 1000) {
        __builtin_ia32_pause();
      } else {
        long r;  // sched_yield, as a raw system call: no libc here
        __asm__ __volatile__("syscall" : "=a"(r) : "0"(24L) : "rcx", "r11", "memory");
        spins = 0;
      }
    }
  }
}
inline void BinderUnlock() { __atomic_store_n(&g_binder.lock, 0, __ATOMIC_RELEASE); }

// The slot of a trap's marker (the return address the trampoline's call
// pushed), or nullptr.
ImportSlot* SlotOfMarker(uintptr_t marker, TrampBlock** block, uint32_t* index);
// The entry's current destination, as the next call will find it.
uintptr_t CurrentTarget(const ImportSlot& s);
// Points the slot's entry (or its table entry) at `to`.
void WriteEntry(TrampBlock& b, uint32_t i, uintptr_t to);
// Slot i's callers go through `stub`, bound to `target`; returns the stub.
uintptr_t BindSlot(TrampBlock& b, uint32_t i, int stub, uintptr_t target);
uintptr_t DirectTarget(const ImportSlot& s);
// The choice for API `a` (see binder.h); may drop a chosen API (then its
// stub is in pending_rebind). True: `a` is chosen and has a stub.
bool Choose(int32_t a);
// Gives a chosen API's stub back (it could not be bound).
void Unchoose(int32_t a);

}  // namespace fieldprof::rt

#endif  // FIELDPROF_AGENT_PRELOAD_RUNTIME_BINDER_STATE_H_
