// The loaded modules, as the raw file's module records: the reader
// symbolises each sample's addresses against them.
#include <link.h>
#include <unistd.h>

#include <algorithm>
#include <cstring>

#include "agent/preload/sampler/sampler.h"
#include "common/stacks/sampler_format.h"

namespace fieldprof::sampler {
namespace {

using Write = void (*)(const void*, size_t);

// One object's record: its executable range, its bias and its path (the
// program's own, read from /proc/self/exe).
int OnModule(dl_phdr_info* info, size_t, void* data) {
  const auto write = reinterpret_cast<Write>(data);
  uint64_t lo = ~0ull, hi = 0;
  for (int i = 0; i < info->dlpi_phnum; ++i) {
    const ElfW(Phdr)& p = info->dlpi_phdr[i];
    if (p.p_type != PT_LOAD || (p.p_flags & PF_X) == 0) continue;
    lo = std::min<uint64_t>(lo, info->dlpi_addr + p.p_vaddr);
    hi = std::max<uint64_t>(hi, info->dlpi_addr + p.p_vaddr + p.p_memsz);
  }
  if (hi == 0) return 0;
  char path[4096];
  const char* name = info->dlpi_name;
  if (name == nullptr || name[0] == 0) {  // the program itself
    const ssize_t n = readlink("/proc/self/exe", path, sizeof path - 1);
    path[n > 0 ? n : 0] = 0;
    name = path;
  }
  raw::ModuleHeader m{};
  m.bias = info->dlpi_addr;
  m.lo = lo;
  m.hi = hi;
  m.path_len = static_cast<uint16_t>(strnlen(name, 4095));
  const char tag = 'M';
  write(&tag, 1);
  write(&m, sizeof m);
  write(name, m.path_len);
  return 0;
}

}  // namespace

void ListModulesIfChanged(unsigned long long* adds_seen, void (*write)(const void*, size_t)) {
  unsigned long long adds = 0;
  dl_iterate_phdr(
      [](dl_phdr_info* info, size_t, void* a) {
        *static_cast<unsigned long long*>(a) = info->dlpi_adds;
        return 1;
      },
      &adds);
  if (adds == *adds_seen) return;
  *adds_seen = adds;
  dl_iterate_phdr(OnModule, reinterpret_cast<void*>(write));
}

}  // namespace fieldprof::sampler
