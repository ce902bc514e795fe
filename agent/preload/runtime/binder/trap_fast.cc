// The first-call trap's common case (see binder.h): built with
// -mgeneral-regs-only and calling nothing outside this file and the
// binder's headers, so it runs with the interrupted call's arguments,
// vector registers included, untouched. What needs more (binding a stub
// for the first time, resolving a lazily bound import, module filters,
// pointing dropped APIs' callers at the API) is left to fp_trap_slow.
#include "agent/preload/runtime/binder/state.h"
#include "agent/preload/runtime/lab/lab.h"
#include "agent/preload/runtime/records/live_file.h"

namespace fieldprof::rt {

FP_HOT_DATA constinit BinderState g_binder{};
__thread int t_in_binder FP_TLS;

namespace {

// A free stub for API `a`; false (and counted) when all are used.
bool TakeStub(Api& a) {
  for (int s = 0; s < FP_MAX_SLOTS; ++s) {
    if (g_binder.stub_used[s]) continue;
    g_binder.stub_used[s] = 1;
    a.stub = static_cast<int8_t>(s);
    return true;
  }
  ++g_binder.refused_no_stub;
  return false;
}

// A chosen API is replaced: its stub stops measuring (it still passes calls
// on), what it measured is left out of the record, and its callers are to
// be pointed at the API by the slow path (pending_rebind).
void Drop(Api& a) {
  a.flags |= kApiEvicted;
  const int s = a.stub;
  g.evicted[s] = 1;
  LiveNoteEvicted(s);
  fp_measuring[s] = 0;
  g_binder.pending_rebind |= uint32_t{1} << s;
  ++g_binder.evictions;
}

struct Result {
  uintptr_t target;
  uintptr_t slow;  // nonzero: fp_trap_slow finishes the job
};

Result Direct(TrampBlock& b, uint32_t i) {
  ImportSlot& s = b.slots[i];
  s.state = kDirect;
  const uintptr_t to = DirectTarget(s);
  WriteEntry(b, i, to);
  return {to, g_binder.pending_rebind != 0};
}

Result FirstCall(TrampBlock& b, uint32_t i) {
  ImportSlot& s = b.slots[i];
  if (s.state != kTrapped) return {CurrentTarget(s), 0};
  ++g_binder.first_calls;
  const int32_t ai = FindApiIndex(s.name_key);
  if (ai < 0) return Direct(b, i);
  Api& a = g_binder.apis[ai];
  if (!(a.flags & kApiCalled)) {
    a.flags |= kApiCalled;
    ++g_binder.apis_called;
  }
  if (a.flags & (kApiExcluded | kApiEvicted)) return Direct(b, i);
  if (g_binder.lab) return {0, 1};  // the lab binds in the slow path
  // The module filters need to know where the import leads.
  if (g_binder.filters || (a.flags & kApiForcedModule)) return {0, 1};
  // Past its overhead budget: new callers go straight to the API.
  if (a.stub >= 0 && g.bound[a.stub] && !fp_measuring[a.stub]) return Direct(b, i);
  if (!Choose(ai)) return Direct(b, i);
  const int stub = a.stub;
  // The stub's first caller, or an import still to be resolved: slow path.
  if (!g.bound[stub] || s.lazy) return {0, 1};
  // Another definition of the name, or the same one loaded again since
  // (FollowReload): the slow path tells them apart.
  if (s.orig != fp_real[stub]) return {0, 1};
  return {BindSlot(b, i, stub, s.orig), g_binder.pending_rebind != 0};
}

}  // namespace

uintptr_t BindSlot(TrampBlock& b, uint32_t i, int stub, uintptr_t target) {
  ImportSlot& s = b.slots[i];
  s.target = target;
  s.state = kBound;
  s.stub = static_cast<int8_t>(stub);
  WriteEntry(b, i, StubAddress(stub));
  return StubAddress(stub);
}

ImportSlot* SlotOfMarker(uintptr_t marker, TrampBlock** block, uint32_t* index) {
  for (int n = 0; n < g_binder.nblocks; ++n) {
    TrampBlock& b = g_binder.blocks[n];
    const uintptr_t code = reinterpret_cast<uintptr_t>(b.code);
    if (marker < code + kTrampMarkerOffset || marker >= code + kTrampSize * b.count) continue;
    const uintptr_t off = marker - code - kTrampMarkerOffset;
    if (off % kTrampSize != 0) return nullptr;
    *block = &b;
    *index = static_cast<uint32_t>(off / kTrampSize);
    return &b.slots[*index];
  }
  return nullptr;
}

uintptr_t DirectTarget(const ImportSlot& s) { return s.target != 0 ? s.target : s.orig; }

uintptr_t CurrentTarget(const ImportSlot& s) {
  switch (s.state) {
    case kBound:
      return StubAddress(s.stub);
    case kLab:
      return LabStubAddress(s.lab);
    case kDirect:
      return DirectTarget(s);
    default:
      return s.orig;  // still trapped: passed on as before the trap
  }
}

void WriteEntry(TrampBlock& b, uint32_t i, uintptr_t to) {
  ImportSlot& s = b.slots[i];
  // One aligned store: a thread calling meanwhile sees the old or the new.
  if (s.relro) {
    __atomic_store_n(&b.table[i], to, __ATOMIC_RELEASE);
  } else {
    __atomic_store_n(s.got, to, __ATOMIC_RELEASE);
  }
}

bool Choose(int32_t ai) {
  Api& a = g_binder.apis[ai];
  if (a.flags & (kApiExcluded | kApiEvicted)) return false;
  if (a.stub >= 0) return true;
  if (a.flags & kApiForced) return TakeStub(a);
  if (g_binder.k_random <= 0) return false;
  if (g_binder.nrandom < g_binder.k_random) {
    if (!TakeStub(a)) return false;
    g_binder.random_api[g_binder.nrandom++] = ai;
    return true;
  }
  // Full: `a` joins only if it ranks below the highest-ranked chosen API.
  int worst = 0;
  for (int j = 1; j < g_binder.nrandom; ++j) {
    if (Priority(g_binder.apis[g_binder.random_api[j]]) >
        Priority(g_binder.apis[g_binder.random_api[worst]])) {
      worst = j;
    }
  }
  Api& w = g_binder.apis[g_binder.random_api[worst]];
  if (Priority(a) >= Priority(w)) return false;
  if (!TakeStub(a)) return false;
  Drop(w);
  g_binder.random_api[worst] = ai;
  return true;
}

void Unchoose(int32_t ai) {
  Api& a = g_binder.apis[ai];
  if (a.stub < 0 || g.bound[a.stub]) return;
  g_binder.stub_used[a.stub] = 0;
  a.stub = -1;
  for (int j = 0; j < g_binder.nrandom; ++j) {
    if (g_binder.random_api[j] != ai) continue;
    g_binder.random_api[j] = g_binder.random_api[--g_binder.nrandom];
    break;
  }
}

}  // namespace fieldprof::rt

using fieldprof::rt::BinderLock;
using fieldprof::rt::BinderUnlock;
using fieldprof::rt::g_binder;
using fieldprof::rt::t_in_binder;

// Called by fp_trap (trap_x86_64.S) with the trampoline's marker: where the
// call goes, and whether fp_trap_slow must finish first.
extern "C" FP_HIDDEN fieldprof::rt::Result fp_trap_fast(uintptr_t marker) {
  fieldprof::rt::TrampBlock* b = nullptr;
  uint32_t i = 0;
  fieldprof::rt::ImportSlot* s = fieldprof::rt::SlotOfMarker(marker, &b, &i);
  if (s == nullptr) __builtin_trap();  // cannot happen: only our trampolines call here
  // A thread already inside the binder (a signal handler, or libc called by
  // the binder's slow path) passes the call on as it is.
  if (t_in_binder) return {fieldprof::rt::CurrentTarget(*s), 0};
  t_in_binder = 1;
  BinderLock();
  const fieldprof::rt::Result r = fieldprof::rt::FirstCall(*b, i);
  BinderUnlock();
  t_in_binder = 0;
  return r;
}
