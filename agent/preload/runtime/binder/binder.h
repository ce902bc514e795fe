// The binder: which APIs a measured run measures, and the GOT entries that
// send their calls to the stubs. Measured runs only.
//
// At start every import one loaded object makes from another through its
// PLT (a JUMP_SLOT relocation) that may be measured gets a first-call trap:
// its GOT entry points at a small trampoline of ours. The first call
// through it tells the binder which API was called; the trap then decides
// and rewrites the entry, so every later call goes straight on:
// - to the API's stub, when the API is chosen;
// - otherwise to where it went before: the function (an entry the dynamic
//   linker had bound already) or the PLT's lazy-binding entry (which then
//   binds it as if nothing had happened).
// An entry in a RELRO page (BIND_NOW with full RELRO: read-only after
// relocation) keeps pointing at its trampoline, `jmp *T[i]`, and the
// binder rewrites T[i] instead: no page is made writable after start. A
// predicted indirect jump, measured at +0.000 ns per call in a loop.
//
// The choice: every API name gets a priority, a hash of the run's seed and
// the name. The run measures the k APIs of lowest priority among those it
// calls: at each first call, an API joins the chosen ones if fewer than k
// are chosen or it ranks below the highest-ranked chosen one, which is
// then dropped (its calls so far are discarded: g.evicted). So the k
// measured at the end are a uniform random choice among the APIs the run
// called, each measured from its first call on; which APIs a run calls
// matters, how long they take never does, and the same seed makes the same
// choice whatever the order of first calls. APIs named in `force` are
// always measured and count toward k.
//
// In a big program only names of low priority are trapped: each with
// probability p = min(1, max(kTrapAll, kTrapPerApi * k) / imports at
// start), as a threshold on the priority (forced names always); programs
// with up to kTrapAll imports (python3 -c pass: 506) keep them all. The k
// lowest-priority APIs the run calls are then chosen exactly as if every
// name were trapped, as long as k of the names called fall below the
// threshold; otherwise the run measures fewer. With a threshold of 128 per
// API and no floor, a test program calling a handful of APIs often
// measured none: hence the floor.
//
// Objects loaded later (dlopen) get their traps when the program next asks
// dlsym/dlvsym for a symbol (the hooks in trap_x86_64.S call
// BinderNoticeNewObjects first); a function pointer that dlsym returns for
// a chosen API is its stub.
//
// Thread safety: one spin lock over the binder's state; a trap that fires
// on a thread already inside the binder (a signal handler, or libc called
// from the binder) passes the call on unchanged. Work that reads other
// objects' memory runs inside dl_iterate_phdr, under the dynamic linker's
// lock, so no object is unmapped meanwhile.
#ifndef FIELDPROF_AGENT_PRELOAD_RUNTIME_BINDER_BINDER_H_
#define FIELDPROF_AGENT_PRELOAD_RUNTIME_BINDER_BINDER_H_

#include <cstdint>

namespace fieldprof::rt {

struct BinderConfig {
  int k = 2;
  uint64_t seed = 0;
  const char* force = "";  // "sym" or "module:sym", comma-separated
  // "module:function", comma-separated: forced too, on top of k, and each
  // one's durations also go into the record as a point series (points.h).
  const char* points = "";
  const char* allow_modules = "";  // comma-separated sonames; "" = all
  const char* deny_modules = "";
  // The list of the system's code (common/system/system_code_list.h; "": none,
  // so nothing is chosen at random), and the modules the volunteer shares
  // by name although they are not in it.
  const char* system_code = "";
  const char* share_modules = "";
  const char* debug_log = nullptr;
  // Lab mode (lab.h): every import is trapped, and bound to a lab stub when
  // the lab observes it; no field choice is made.
  bool lab = false;
};

// From the constructor of a measured run: traps every candidate import of
// the objects loaded so far. The strings in `c` must live as long as the
// process. False when nothing could be set up (nothing is measured then).
bool BinderStart(const BinderConfig& c);

// Traps the imports of objects loaded since the last look (cheap when none
// were). Measured runs only.
void BinderNoticeNewObjects();

// What dlsym(handle, name) returning `addr` gives the caller: the stub of a
// chosen API defined there, else `addr`.
uintptr_t BinderDlsymResult(const char* name, uintptr_t addr);

// The overhead budget of `slot` ran out: every caller bound to its stub is
// pointed at the API itself, and callers that call it first later go
// straight to it. Returns the number of call sites rebound.
int BinderRebindSlot(int slot);

// Whether the API bound to `slot` was named in the `points` setting (its
// durations also go into the record as a point series).
bool SlotIsPoint(int slot);

// The child of a fork: the binder's lock, if another thread held it, is free.
void BinderAfterFork();

struct BinderStats {
  uint64_t forced, objects, imports, first_calls, apis_called, evictions, refused_no_stub;
};
BinderStats GetBinderStats();

}  // namespace fieldprof::rt

#endif  // FIELDPROF_AGENT_PRELOAD_RUNTIME_BINDER_BINDER_H_
