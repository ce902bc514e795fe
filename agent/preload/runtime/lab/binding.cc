// Lab mode's binding (lab.h): every import is trapped, and on its first
// call bound to a lab stub when the lab observes it in this pass.
#include <stdio.h>
#include <string.h>
#include <unistd.h>

#include "agent/preload/runtime/binder/internal.h"
#include "agent/preload/runtime/lab/lab.h"
#include "agent/preload/runtime/points/detour.h"
#include "common/wire/key_rules.h"

namespace fieldprof::rt {

// The program is "main" in the field's keys unless it is a system program;
// a points entry may name it by its file name.
const char* ProgramFileName() {
  static char name[256];
  if (name[0] != 0) return name;
  char path[4096];
  const ssize_t n = readlink("/proc/self/exe", path, sizeof path - 1);
  if (n <= 0) return name;
  path[n] = 0;
  const char* slash = strrchr(path, '/');
  CopyName(name, sizeof name, slash != nullptr ? slash + 1 : path);
  return name;
}

// Lab mode: the lab index of `real`, defined in `def` as `symbol`, when
// the names keep the key rules, the module filters let it through and the
// lab observes it in this pass; else -1.
int32_t BindLab(const Object* def, const char* symbol, uintptr_t real) {
  const char* module = KeyModule(def);
  if (module == nullptr || !key_rules::SymbolOk(symbol, strlen(symbol))) return -1;
  if (!ModuleAllowed(module)) return -1;
  char build_id[96];
  KeyBuildId(def, build_id, sizeof build_id);
  return LabBind(module, build_id, symbol, real);
}

// Lab mode's first call of an import: to its lab stub, or straight on.
uintptr_t LabFirstCall(TrampBlock& b, uint32_t i) {
  ImportSlot& s = b.slots[i];
  const uintptr_t target = s.lazy ? ResolveLazy(s) : s.orig;
  if (target == 0) return Direct(b, i);  // a lazy entry goes on to the dynamic linker
  const ElfObject& e = g_binder.objects[s.object].elf;
  const int32_t index =
      BindLab(DefinerOf(s, target), e.strtab + e.symtab[s.symidx].st_name, target);
  if (index < 0) return Direct(b, i);
  s.target = target;
  s.state = kLab;
  s.lab = static_cast<uint32_t>(index);
  WriteEntry(b, i, LabStubAddress(s.lab));
  return LabStubAddress(s.lab);
}

namespace {

// The plan's functions defined in `ob` (module `module`): each gets its lab
// index and, where the move can be made, a detour; what became of each is
// told to the command (LabSayPlaced).
// A plan line names module `m` when its part before the colon is `m`.
bool Names(const char* line, const char* colon, const char* m) {
  const size_t n = strlen(m);
  return m[0] != 0 && static_cast<size_t>(colon - line) == n && strncmp(line, m, n) == 0;
}

void DetourObject(const Object& ob, const char* module, const DetourLook& look) {
  const bool program = ob.elf.path != nullptr && ob.elf.path[0] == 0 && ob.initial;
  uint32_t pos = 0;
  const char* line = nullptr;
  while (LabPlanLine(&pos, &line)) {
    const char* colon = strchr(line, ':');
    if (colon == nullptr) continue;
    const char* named = nullptr;  // the module as the plan names it
    if (Names(line, colon, module)) {
      named = module;
    } else if (program && Names(line, colon, ProgramFileName())) {
      named = ProgramFileName();
    }
    if (named == nullptr || !ModuleAllowed(named)) continue;
    const char* symbol = colon + 1;
    if (!key_rules::SymbolOk(symbol, strlen(symbol))) {
      LabSayPlaced(line, "not placed", "not a symbol name");
      continue;
    }
    char build_id[96];
    KeyBuildId(&ob, build_id, sizeof build_id);
    uintptr_t addr[8];
    size_t size[8];
    const int n = FindFunctions(ob.elf, symbol, addr, size, 8);
    if (n == 0) {
      LabSayPlaced(line, "not found",
                   "the module has no function of that name in its symbol tables (stripped?)");
      continue;
    }
    for (int k = 0; k < n; ++k) {
      // An object is looked at once: a detour at this address was made in
      // an earlier copy of the module, closed since (dlclose, then dlopen
      // again at the same place). Its entry is moved again.
      LabForgetDetour(addr[k]);
      const int32_t index = LabBind(named, build_id, symbol, addr[k]);
      if (index < 0) continue;  // detoured already, or no index left
      const char* why = look.unready;
      uintptr_t moved = 0;
      const bool threads = look.ready && look.Threads();
      if (threads && LabDetourRoom()) {
        moved = DetourWhileThreadsRun(ob.elf, addr[k], size[k],
                                      kLabSlot0 + static_cast<uint32_t>(index),
                                      LabReal(static_cast<uint32_t>(index)), &why);
      }
      if (threads && moved == 0) {
        // The entry stays; the module's direct calls go to the lab's slot,
        // whose function is the entry itself (LabBind), as its imports do.
        int plt = 0;
        const char* stays = why;
        const int sites =
            RedirectCalls(ob.elf, addr[k], kLabSlot0 + static_cast<uint32_t>(index), &plt, &why);
        if (sites >= 0) {
          char what[128], said[256];
          SayRedirected(sites, plt, what, sizeof what);
          snprintf(said, sizeof said,
                   "a second thread ran, so its entry was not moved (%s); calls through pointers "
                   "inside the module are not scopes",
                   stays != nullptr ? stays : "too many functions detoured");
          LabSayPlaced(line, what, said);
          continue;
        }
      } else if (threads) {
        // Its entry was moved through the padding beside it.
      } else if (look.ready && LabDetourRoom()) {
        moved = Detour(addr[k], size[k], kLabSlot0 + static_cast<uint32_t>(index), &why);
      } else if (look.ready) {
        why = "too many functions detoured";
      }
      if (moved == 0) {
        LabSayPlaced(line, "imports only", why);  // bound where other modules import it
        continue;
      }
      LabDetoured(static_cast<uint32_t>(index), addr[k], moved);
      LabSayPlaced(
          line, "every call",
          threads ? "moved while a second thread ran, through the padding beside it" : nullptr);
    }
  }
}

}  // namespace

namespace {

struct DetourWork {
  void (*fn)(const Object& ob, const char* module, const DetourLook& look);
  DetourLook look;
};

void DoDetourWork(void* arg) {
  const auto& w = *static_cast<const DetourWork*>(arg);
  for (uint32_t i = 0; i < g_binder.nobjects; ++i) {
    Object& ob = g_binder.objects[i];
    if (!ob.alive || ob.ours || ob.vdso || ob.rtld || ob.detours_looked) continue;
    ob.detours_looked = 1;
    if (const char* module = KeyModule(&ob); module != nullptr) w.fn(ob, module, w.look);
  }
}

}  // namespace

void DetourEachNewObject(void (*fn)(const Object& ob, const char* module, const DetourLook& look)) {
  const int was_in = t_in_binder;
  t_in_binder = 1;  // capstone's own imports pass straight on
  DetourWork w{fn, {}};
  w.look.ready = DetourLoad(&w.look.unready);
  WithObjects(DoDetourWork, &w);
  t_in_binder = was_in;
}

void DetourNewObjects() {
  if (g_lab_mode == kLabOff) {
    FieldDetourNewObjects();
  } else if (g_lab_mode == kLabPoints) {
    DetourEachNewObject(DetourObject);
  }
}

}  // namespace fieldprof::rt
