// Lab mode's binding (lab.h): every import is trapped, and on its first
// call bound to a lab stub when the lab observes it in this pass.
#include <string.h>

#include "agent/runtime/binder_internal.h"
#include "agent/runtime/lab.h"
#include "common/key_rules.h"

namespace fieldprof::rt {

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

}  // namespace fieldprof::rt
