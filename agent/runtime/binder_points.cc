// The field's `points` setting (docs/points.md): a function named there as
// MODULE:FUNCTION is forced like a `force` API. Callers in other modules
// reach it through an import, which the binder binds to the API's stub;
// calls from inside its own module (a program's static function) have no
// import to bind. So, as the binder first sees the module, the function's
// entry is moved (detour.h) and enters the API's slot itself: the slot's
// real function becomes the moved copy, and imports of the function go on
// to its entry unbound (FirstCallSlow: another target than the slot's), so
// every call is measured once. Where the move cannot be made (detour.h
// says when), the imports alone are measured, as before.
#include <string.h>

#include "agent/runtime/binder_internal.h"
#include "agent/runtime/decide.h"
#include "agent/runtime/detour.h"
#include "common/key_rules.h"

namespace fieldprof::rt {

namespace {

void Say(const ForcedApi& f, const char* what, const char* why) {
  DebugLine(g_binder.debug_log, "points: %s:%s: %s%s%s", f.module, f.symbol, what,
            why != nullptr ? ": " : "", why != nullptr ? why : "");
}

// The `points` functions defined in `ob`, keyed as `module`.
void DetourPoints(const Object& ob, const char* module, bool ready, const char* unready) {
  if (!ModuleAllowed(module)) return;
  const bool program = ob.elf.path != nullptr && ob.elf.path[0] == 0 && ob.initial;
  for (int f = 0; f < g_binder.nforced; ++f) {
    const ForcedApi& fa = g_binder.forced[f];
    if (!fa.point || fa.module[0] == 0) continue;
    if (strcmp(fa.module, module) != 0 && !(program && strcmp(fa.module, ProgramFileName()) == 0)) {
      continue;
    }
    uintptr_t addr[8];
    size_t size[8];
    const int n = FindFunctions(ob.elf, fa.symbol, addr, size, 8);
    if (n == 0) {
      Say(fa, "not found", "no function of that name in the module's symbol tables (stripped?)");
      continue;
    }
    const int32_t ai = FindApiIndex(fa.name_key);
    if (ai < 0 || !Choose(ai)) continue;
    const int stub = g_binder.apis[ai].stub;
    if (g.bound[stub]) {
      Say(fa, "calls from other modules only", "bound before its module was looked at");
      continue;
    }
    if (!ready) {
      Say(fa, "calls from other modules only", unready);
      continue;
    }
    if (!key_rules::SymbolOk(fa.symbol, strlen(fa.symbol))) {
      Say(fa, "not measured", "not a symbol name a key may hold");
      continue;
    }
    const char* why = nullptr;
    const uintptr_t moved = Detour(addr[0], size[0], static_cast<uint32_t>(stub), &why);
    if (moved == 0) {
      Say(fa, "calls from other modules only", why);
      continue;
    }
    // From here the entry enters this slot for good: the slot is never
    // given to another API, and runs the moved copy even unmeasured
    // (fp_enter passes a slot that does not measure straight on).
    __atomic_store_n(&fp_real[stub], moved, __ATOMIC_RELEASE);
    g_binder.apis[ai].flags |= kApiDetoured;
    if (!BindStub(stub, moved, &ob, fa.symbol, true)) {
      Say(fa, "not measured", "its names break the key rules");
      continue;
    }
    Say(fa, "every call",
        n > 1 ? "the first of its definitions (static functions of one name)" : nullptr);
  }
}

}  // namespace

void FieldDetourNewObjects() {
  bool any = false;
  for (int f = 0; f < g_binder.nforced; ++f) {
    any = any || (g_binder.forced[f].point && g_binder.forced[f].module[0] != 0);
  }
  if (any && fp_binder_on) DetourEachNewObject(DetourPoints);
}

}  // namespace fieldprof::rt
