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
#include <stdio.h>
#include <string.h>

#include "agent/preload/runtime/binder/internal.h"
#include "agent/preload/runtime/front/decide.h"
#include "agent/preload/runtime/points/detour.h"
#include "common/wire/key_rules.h"

namespace fieldprof::rt {

namespace {

void Say(const ForcedApi& f, const char* what, const char* why) {
  DebugLine(g_binder.debug_log, "points: %s:%s: %s%s%s", f.module, f.symbol, what,
            why != nullptr ? ": " : "", why != nullptr ? why : "");
}

// With a second thread running, the entry of `fn` stays as it is: its
// slot is bound to it, as for calls from other modules, and the direct
// calls its own module makes to it are re-aimed at the slot (detour.h).
// `again`: its module was opened again (points/field_setting.cc's caller);
// `stays`: why the entry could not be moved.
void RedirectPoint(const Object& ob, const ForcedApi& fa, int32_t ai, uintptr_t fn, bool again,
                   const char* stays) {
  Api& a = g_binder.apis[ai];
  const int stub = a.stub;
  // Its callers elsewhere bind to the stub from now on (FirstCallSlow).
  a.flags &= static_cast<uint8_t>(~kApiDetoured);
  if (!BindStub(stub, fn, &ob, fa.symbol, true)) {
    Say(fa, "not measured", "its names break the key rules");
    return;
  }
  const char* why = nullptr;
  int plt = 0;
  const int n = RedirectCalls(ob.elf, fn, static_cast<uint32_t>(stub), &plt, &why);
  if (n < 0) {
    a.flags &= static_cast<uint8_t>(~kApiRedirected);
    Say(fa, "calls from other modules only", why);
    return;
  }
  a.flags |= kApiRedirected;
  g_binder.moved_in[stub] = static_cast<uint16_t>(&ob - g_binder.objects + 1);
  char what[128], said[256];
  SayRedirected(n, plt, what, sizeof what);
  snprintf(said, sizeof said,
           "a second thread runs, so its entry stays (%s%s); calls through pointers inside the "
           "module are not timed",
           stays, again ? "; its module was opened again" : "");
  Say(fa, what, said);
}

// Whether the entry of `fa`'s function in `ob` may be moved now (else
// said why); `again` is set when its module was opened again after an
// earlier move.
bool MayMove(const Object& ob, const ForcedApi& fa, int32_t ai, const DetourLook& look,
             const char** again) {
  *again = nullptr;
  const int stub = g_binder.apis[ai].stub;
  // A library closed and opened again is a new object: its function's
  // entry is moved too, and the slot runs the new copy's moved
  // instructions, as long as the copy moved before is gone and is the
  // same build (the slot's record keeps one build id).
  if (g_binder.apis[ai].flags & (kApiDetoured | kApiRedirected)) {
    const uint32_t before = g_binder.moved_in[stub] - 1u;
    char build[sizeof api_names[0].build_id];
    KeyBuildId(&ob, build, sizeof build);
    if (before < g_binder.nobjects && g_binder.objects[before].alive) {
      Say(fa, "calls from other modules only", "its entry is moved in another copy of the module");
      return false;
    }
    if (strcmp(build, api_names[stub].build_id) != 0) {
      Say(fa, "not measured", "another build of its module was loaded after the first closed");
      return false;
    }
    *again = "moved again: its module was opened again";
  } else if (g.bound[stub]) {
    Say(fa, "calls from other modules only", "bound before its module was looked at");
    return false;
  }
  if (!look.ready) {
    Say(fa, "calls from other modules only", look.unready);
    return false;
  }
  if (!key_rules::SymbolOk(fa.symbol, strlen(fa.symbol))) {
    Say(fa, "not measured", "not a symbol name a key may hold");
    return false;
  }
  return true;
}

// The `points` functions defined in `ob`, keyed as `module`.
void DetourPoints(const Object& ob, const char* module, const DetourLook& look) {
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
    const char* again = nullptr;
    if (!MayMove(ob, fa, ai, look, &again)) continue;
    const int stub = g_binder.apis[ai].stub;
    const char* why = nullptr;
    const bool threads = look.Threads();
    const uintptr_t moved =
        threads ? DetourWhileThreadsRun(ob.elf, addr[0], size[0], static_cast<uint32_t>(stub),
                                        &fp_real[stub], &why)
                : Detour(addr[0], size[0], static_cast<uint32_t>(stub), &why);
    if (moved == 0 && threads) {
      RedirectPoint(ob, fa, ai, addr[0], again != nullptr, why);
      continue;
    }
    if (moved == 0) {
      // Opened again, its imports go on to the entry (kApiDetoured), so
      // with the entry left alone none of its calls is timed.
      Say(fa, again != nullptr ? "not measured" : "calls from other modules only", why);
      continue;
    }
    // From here the entry enters this slot for good: the slot is never
    // given to another API, and runs the moved copy even unmeasured
    // (fp_enter passes a slot that does not measure straight on).
    __atomic_store_n(&fp_real[stub], moved, __ATOMIC_RELEASE);
    g_binder.apis[ai].flags = (g_binder.apis[ai].flags & ~kApiRedirected) | kApiDetoured;
    g_binder.moved_in[stub] = static_cast<uint16_t>(&ob - g_binder.objects + 1);
    if (!BindStub(stub, moved, &ob, fa.symbol, true)) {
      Say(fa, "not measured", "its names break the key rules");
      continue;
    }
    Say(fa, "every call",
        again != nullptr ? again
        : threads        ? "moved while a second thread ran, through the padding beside it"
        : n > 1          ? "the first of its definitions (static functions of one name)"
                         : nullptr);
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
