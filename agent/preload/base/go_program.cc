#include "agent/preload/base/go_program.h"

#include <elf.h>
#include <fcntl.h>
#include <string.h>
#include <unistd.h>

namespace fieldprof::preload {

bool IsGoProgram() {
  const int fd = open("/proc/self/exe", O_RDONLY | O_CLOEXEC);
  if (fd < 0) return false;
  bool go = false;
  Elf64_Ehdr eh;
  // The constructor's only (one thread yet); in .lbss, off the page of
  // .bss a library writes anyway.
  [[gnu::section(".lbss")]] static Elf64_Shdr sh[256];
  [[gnu::section(".lbss")]] static char names[4096];
  if (pread(fd, &eh, sizeof eh, 0) == sizeof eh && memcmp(eh.e_ident, ELFMAG, SELFMAG) == 0 &&
      eh.e_ident[EI_CLASS] == ELFCLASS64 && eh.e_shentsize == sizeof(Elf64_Shdr) &&
      eh.e_shnum > 0 && eh.e_shnum <= 256 && eh.e_shstrndx < eh.e_shnum) {
    // Three reads: the header, the section headers, their names.
    const ssize_t want = static_cast<ssize_t>(eh.e_shnum * sizeof(Elf64_Shdr));
    if (pread(fd, sh, static_cast<size_t>(want), static_cast<off_t>(eh.e_shoff)) == want) {
      const Elf64_Shdr& strtab = sh[eh.e_shstrndx];
      const size_t n = strtab.sh_size < sizeof names - 1 ? strtab.sh_size : sizeof names - 1;
      const ssize_t got = pread(fd, names, n, static_cast<off_t>(strtab.sh_offset));
      if (got > 0) {
        names[got] = 0;
        for (int i = 0; i < eh.e_shnum && !go; ++i) {
          if (sh[i].sh_name >= static_cast<size_t>(got)) continue;
          const char* name = names + sh[i].sh_name;
          go = strcmp(name, ".go.buildinfo") == 0 || strcmp(name, ".note.go.buildid") == 0;
        }
      }
    }
  }
  close(fd);
  return go;
}

}  // namespace fieldprof::preload
