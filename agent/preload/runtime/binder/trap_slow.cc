// First calls: the trap's slow half chooses (binder.h: the choice), binds
// a chosen API's callers to its stub, or points the entry straight on; and
// rebinding when a slot's overhead budget runs out.
#include <string.h>

#include "agent/preload/runtime/binder/internal.h"
#include "agent/preload/runtime/front/decide.h"
#include "agent/preload/runtime/records/live_file.h"
#include "common/wire/key_rules.h"

namespace fieldprof::rt {

// Slot `stub` measures `symbol` at `real` from now on.
bool BindStub(int stub, uintptr_t real, const Object* def, const char* symbol, bool point) {
  ApiNames& n = api_names[stub];
  const char* module = KeyModule(def);
  // Only names that keep the key rules are recorded (common/wire/key_rules.h).
  if (module == nullptr || !key_rules::SymbolOk(symbol, strlen(symbol)) ||
      !CopyName(n.module, sizeof n.module, module) ||
      !CopyName(n.symbol, sizeof n.symbol, symbol)) {
    return false;  // left unmeasured
  }
  KeyBuildId(def, n.build_id, sizeof n.build_id);
  g.apis[stub] = FpApi{n.module, n.build_id, n.symbol};
  __atomic_store_n(&fp_real[stub], real, __ATOMIC_RELEASE);
  n.point = point;
  n.object = def != nullptr ? static_cast<uint32_t>(def - g_binder.objects) : kNoObject;
  __atomic_store_n(&g.bound[stub], 1, __ATOMIC_SEQ_CST);
  // In a live file (live_file.h): the slot's tables in every slab taken so
  // far are allocated before the first call may write them (a slab taken
  // later allocates its own: TakeSlab; the fence pairs with its).
  __atomic_thread_fence(__ATOMIC_SEQ_CST);
  bool backed = true;
  for (int s = 0; backed && s < kSlabs; ++s) {
    if (__atomic_load_n(&g.slabs_ready[s], __ATOMIC_SEQ_CST)) backed = LiveAllocateSlot(s, stub);
  }
  if (!backed) {  // the live file's file system is full: left unmeasured
    g.bound[stub] = 0;
    return false;
  }
  LiveNoteApi(stub, n.module, n.build_id, n.symbol);
  fp_measuring[stub] = 1;
  DebugLine(g_binder.debug_log, "bound %s:%s (build %s) to slot %d", n.module, n.symbol, n.build_id,
            stub);
  return true;
}

bool FollowReload(int stub, uintptr_t real, const Object* def, const char* module) {
  ApiNames& n = api_names[stub];
  if (def == nullptr || module == nullptr || n.object >= g_binder.nobjects) return false;
  const Object& was = g_binder.objects[n.object];
  if (was.alive) return false;
  // The same function: the same module and build (a build known by its
  // id, never "unknown"), at the same place in it (not another version of
  // the name, as dlvsym may give).
  char build_id[sizeof n.build_id];
  KeyBuildId(def, build_id, sizeof build_id);
  if (strcmp(module, n.module) != 0 || strcmp(build_id, n.build_id) != 0 ||
      strcmp(build_id, "unknown") == 0 || real - def->elf.base != fp_real[stub] - was.elf.base) {
    return false;
  }
  n.object = static_cast<uint32_t>(def - g_binder.objects);
  __atomic_store_n(&fp_real[stub], real, __ATOMIC_RELEASE);
  return true;
}

// Callers bound to the stubs in pending_rebind go straight to the API.
int RebindPending() {
  const uint32_t pending = g_binder.pending_rebind;
  if (pending == 0) return 0;
  int done = 0;
  for (int n = 0; n < g_binder.nblocks; ++n) {
    TrampBlock& b = g_binder.blocks[n];
    for (uint32_t i = 0; i < b.count; ++i) {
      ImportSlot& s = b.slots[i];
      if (s.state != kBound || !(pending & (uint32_t{1} << s.stub))) continue;
      if (!s.relro && !g_binder.objects[s.object].alive) continue;
      if (s.target == 0) s.target = fp_real[s.stub];
      s.state = kDirect;
      WriteEntry(b, i, s.target);
      ++done;
    }
  }
  g_binder.pending_rebind = 0;
  return done;
}

uintptr_t Direct(TrampBlock& b, uint32_t i) {
  ImportSlot& s = b.slots[i];
  s.state = kDirect;
  WriteEntry(b, i, DirectTarget(s));
  return DirectTarget(s);
}

// The first call of a slot that needs more than fp_trap_fast could do.
uintptr_t FirstCallSlow(TrampBlock& b, uint32_t i) {
  ImportSlot& s = b.slots[i];
  if (g_binder.lab) return LabFirstCall(b, i);
  const int32_t ai = FindApiIndex(s.name_key);
  if (ai < 0) return Direct(b, i);
  Api& a = g_binder.apis[ai];
  if (a.flags & (kApiExcluded | kApiEvicted | kApiDetoured)) return Direct(b, i);
  if (a.stub >= 0 && g.bound[a.stub] && !fp_measuring[a.stub]) return Direct(b, i);
  const uintptr_t target = s.lazy ? ResolveLazy(s) : s.orig;
  if (target == 0) {
    Unchoose(ai);
    return Direct(b, i);  // a lazy entry goes on to the dynamic linker
  }
  const Object* def = DefinerOf(s, target);
  const char* module = KeyModule(def);
  // Bound already: the slot joins the stub when it leads to the same
  // definition, or to the same one loaded again (FollowReload). Another
  // definition of the name goes straight to it, and the API stays
  // measured where it was chosen.
  if (a.stub >= 0 && g.bound[a.stub]) {
    const int stub = a.stub;
    if (fp_real[stub] != target && !FollowReload(stub, target, def, module)) return Direct(b, i);
    return BindSlot(b, i, stub, target);
  }
  // A random choice only among the system's modules (SystemModule: a
  // stat or two and a look in the system's code, once per module; none
  // once the run stopped measuring, as under a seccomp filter, which may
  // kill at any system call), or those the volunteer shares by name.
  if (module == nullptr || !ModuleAllowed(module) ||
      ((a.flags & kApiForced) == 0 && g.active && !SystemModule(def) &&
       !SharedByVolunteer(def, module))) {
    a.flags |= kApiExcluded;
    Unchoose(ai);
    return Direct(b, i);
  }
  if ((a.flags & kApiForcedModule) && strcmp(module, g_binder.forced[a.force].module) != 0) {
    return Direct(b, i);
  }
  if (!Choose(ai)) return Direct(b, i);
  const int stub = a.stub;
  const ElfObject& e = g_binder.objects[s.object].elf;
  if (!BindStub(stub, target, def, e.strtab + e.symtab[s.symidx].st_name,
                (a.flags & kApiPoint) != 0)) {
    Unchoose(ai);
    a.flags |= kApiExcluded;
    return Direct(b, i);
  }
  return BindSlot(b, i, stub, target);
}

namespace {

struct SlowWork {
  TrampBlock* block;
  uint32_t index;
  uintptr_t result;
};

void DoSlowWork(void* arg) {
  auto& w = *static_cast<SlowWork*>(arg);
  ImportSlot& s = w.block->slots[w.index];
  w.result = s.state == kTrapped ? FirstCallSlow(*w.block, w.index) : CurrentTarget(s);
  RebindPending();
}

struct RebindWork {
  int slot;
  int done;
};

void DoRebindWork(void* arg) {
  auto& w = *static_cast<RebindWork*>(arg);
  g_binder.pending_rebind |= uint32_t{1} << w.slot;
  w.done = RebindPending();
}

}  // namespace

bool SlotIsPoint(int slot) {
  return slot >= 0 && slot < FP_MAX_SLOTS && api_names != nullptr && api_names[slot].point;
}

int BinderRebindSlot(int slot) {
  if (!fp_binder_on || t_in_binder || slot < 0 || slot >= FP_MAX_SLOTS) return 0;
  RebindWork w{slot, 0};
  t_in_binder = 1;
  WithObjects(DoRebindWork, &w);
  t_in_binder = 0;
  return w.done;
}

}  // namespace fieldprof::rt

using fieldprof::rt::t_in_binder;

// The trap's slow half (trap_x86_64.S, extended register state saved).
extern "C" FP_HIDDEN uintptr_t fp_trap_slow(uintptr_t marker, uintptr_t proposed) {
  fieldprof::rt::TrampBlock* b = nullptr;
  uint32_t i = 0;
  fieldprof::rt::ImportSlot* s = fieldprof::rt::SlotOfMarker(marker, &b, &i);
  if (s == nullptr) __builtin_trap();
  if (t_in_binder) return proposed != 0 ? proposed : fieldprof::rt::CurrentTarget(*s);
  fieldprof::rt::SlowWork w{b, i, 0};
  t_in_binder = 1;
  const bool ran = fieldprof::rt::WithObjects(fieldprof::rt::DoSlowWork, &w);
  t_in_binder = 0;
  if (!ran) return proposed != 0 ? proposed : fieldprof::rt::CurrentTarget(*s);
  return w.result;
}
