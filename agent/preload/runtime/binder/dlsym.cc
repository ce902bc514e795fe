// dlsym and dlvsym: the hooks in trap_x86_64.S call the real ones, then
// ask here what the caller gets (binder.h: a chosen API's stub). Objects
// loaded since the last look get their traps on the way.
#include <string.h>

#include "agent/preload/runtime/binder/internal.h"
#include "agent/preload/runtime/binder/late_interpose.h"
#include "agent/preload/runtime/binder/next_symbol.h"
#include "agent/preload/runtime/lab/lab.h"

namespace fieldprof::rt {

namespace {

struct DlsymWork {
  const char* name;
  uintptr_t addr;
  uintptr_t result;
};

// Lab mode: a function another object defines (never data: its address
// is used as such), reached through dlsym, is observed like an import.
void DlsymInLab(DlsymWork& w) {
  const Object* def = ObjectContaining(w.addr);
  if (def == nullptr || def->ours) return;
  const uint32_t h = GnuHash(w.name);
  const Elf64_Sym* sym = FindDefinition(def->elf, w.name, h, VersionNeed{});
  if (sym == nullptr || ELF64_ST_TYPE(sym->st_info) != STT_FUNC ||
      def->elf.base + sym->st_value != w.addr || Excluded(w.name, h, Ours())) {
    return;
  }
  const int32_t index = BindLab(def, w.name, w.addr);
  if (index >= 0) w.result = LabStubAddress(static_cast<uint32_t>(index));
}

void DoDlsymWork(void* arg) {
  auto& w = *static_cast<DlsymWork*>(arg);
  w.result = w.addr;
  if (g_binder.lab) return DlsymInLab(w);
  const int32_t ai = FindApiIndex(NameKey(w.name));
  if (ai < 0) return;
  Api& a = g_binder.apis[ai];
  if (a.flags & (kApiExcluded | kApiEvicted | kApiDetoured)) return;  // (its entry measures)
  const Object* def = DefinerByName(w.name, w.addr);
  const char* module = KeyModule(def);
  if (module == nullptr) return;
  if ((a.flags & kApiForcedModule) && strcmp(module, g_binder.forced[a.force].module) != 0) return;
  if (a.stub >= 0 && g.bound[a.stub]) {
    const int stub = a.stub;
    if (fp_real[stub] != w.addr && !FollowReload(stub, w.addr, def, module)) return;
    if (fp_measuring[stub]) w.result = StubAddress(stub);
    return;
  }
  // A forced API first reached through dlsym.
  if (!(a.flags & kApiForced) || !Choose(ai)) return;
  if (!BindStub(a.stub, w.addr, def, w.name, (a.flags & kApiPoint) != 0)) {
    Unchoose(ai);
    return;
  }
  w.result = StubAddress(a.stub);
}

}  // namespace

uintptr_t BinderDlsymResult(const char* name, uintptr_t addr) {
  if (!fp_binder_on || t_in_binder || name == nullptr || addr == 0) return addr;
  DlsymWork w{name, addr, addr};
  t_in_binder = 1;
  // A module just opened and now looked into (dlsym(handle, ...), the way
  // plugins are reached) has its imports of the runtime's exports pointed
  // at it first, as at any other look (BinderNoticeNewObjects): else they
  // stayed bound to libc's (malloc, read, ...) or to nothing (the point
  // hook: its points, armed, called nothing).
  InterposeLateOnNewObjects();
  WithObjects(DoDlsymWork, &w);
  t_in_binder = 0;
  DetourNewObjects();  // `points` functions in a module just loaded (lab or field)
  return w.result;
}

}  // namespace fieldprof::rt

// The real dlsym and dlvsym, for the hooks in trap_x86_64.S.
extern "C" FP_HIDDEN void fp_resolve_dl() {
  static const char* const kNames[] = {"dlsym", "dlvsym"};
  uintptr_t found[2] = {fp_real_dlsym, fp_real_dlvsym};
  fieldprof::rt::ResolveNext(kNames, found, 2);
  if (found[0] == 0 || found[1] == 0) __builtin_trap();  // no libc dlsym: cannot go on
  __atomic_store_n(&fp_real_dlvsym, found[1], __ATOMIC_RELEASE);
  __atomic_store_n(&fp_real_dlsym, found[0], __ATOMIC_RELEASE);
}

extern "C" FP_HIDDEN void fp_notice_objects() { fieldprof::rt::BinderNoticeNewObjects(); }

extern "C" FP_HIDDEN void* fp_dlsym_hook(void* handle, const char* name) {
  auto* real = reinterpret_cast<void* (*)(void*, const char*)>(fp_real_dlsym);
  void* r = real(handle, name);
  return reinterpret_cast<void*>(
      fieldprof::rt::BinderDlsymResult(name, reinterpret_cast<uintptr_t>(r)));
}

extern "C" FP_HIDDEN void* fp_dlvsym_hook(void* handle, const char* name, const char* version) {
  auto* real = reinterpret_cast<void* (*)(void*, const char*, const char*)>(fp_real_dlvsym);
  void* r = real(handle, name, version);
  return reinterpret_cast<void*>(
      fieldprof::rt::BinderDlsymResult(name, reinterpret_cast<uintptr_t>(r)));
}
