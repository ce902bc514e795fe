#include "agent/preload/runtime/binder/next_symbol.h"

#include <link.h>
#include <sys/auxv.h>
#include <unistd.h>

#include "agent/preload/runtime/binder/elf_object.h"

namespace fieldprof::rt {
namespace {

struct Walk {
  const char* const* names;
  uintptr_t* out;
  int n;
  int left;
  bool past_us;
  bool any;  // every object but ours, in order (g_loaded_late)
};

int OnObject(dl_phdr_info* info, size_t, void* data) {
  Walk& w = *static_cast<Walk*>(data);
  const bool ours = LoadedAt(*info, reinterpret_cast<uintptr_t>(&ResolveNext));
  if (w.any) {
    if (ours) return 0;
  } else if (!w.past_us) {
    w.past_us = ours;
    return 0;
  }
  ElfObject o;
  if (!ParseElfObject(info->dlpi_addr, info->dlpi_name, info->dlpi_phdr, info->dlpi_phnum,
                      static_cast<uintptr_t>(getpagesize()), &o)) {
    return 0;
  }
  for (int i = 0; i < w.n; ++i) {
    if (w.out[i] != 0) continue;
    const Elf64_Sym* s = FindDefinition(o, w.names[i], GnuHash(w.names[i]), VersionNeed{});
    if (s == nullptr) continue;
    uintptr_t a = o.base + s->st_value;
    if (ELF64_ST_TYPE(s->st_info) == STT_GNU_IFUNC) a = reinterpret_cast<uintptr_t (*)()>(a)();
    w.out[i] = a;
    --w.left;
  }
  return w.left == 0 ? 1 : 0;
}

}  // namespace

bool g_loaded_late = false;

void ResolveNext(const char* const* names, uintptr_t* out, int n) {
  Walk w{names, out, n, 0, false, g_loaded_late};
  for (int i = 0; i < n; ++i) w.left += out[i] == 0;
  if (w.left > 0) dl_iterate_phdr(OnObject, &w);
}

}  // namespace fieldprof::rt
