// Detours: a function's entry made a jump to a stub (detour.h).
#include "agent/preload/runtime/points/detour.h"

#include <dirent.h>
#include <dlfcn.h>
#include <fcntl.h>
#include <linux/membarrier.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <unistd.h>

#include "agent/preload/runtime/hotpath/hotpath.h"
#include "agent/preload/runtime/points/detour_internal.h"

namespace fieldprof::rt {
namespace code {

namespace {

bool g_sync_core = false;  // registered for membarrier's SYNC_CORE (Load)

struct Capstone {
  bool tried = false;
  const char* why = nullptr;
  decltype(&cs_open) open = nullptr;
  decltype(&cs_option) option = nullptr;
  decltype(&cs_malloc) new_insn = nullptr;
  decltype(&cs_disasm_iter) iter = nullptr;
  csh handle = 0;
  cs_insn* insn = nullptr;
};
Capstone cs;

}  // namespace

bool Decode(uintptr_t at, size_t max, uintptr_t* next) {
  const auto* code = reinterpret_cast<const uint8_t*>(at);
  size_t n = max < 16 ? max : 16;
  uint64_t a = at;
  if (!cs.iter(cs.handle, &code, &n, &a, cs.insn)) return false;
  *next = static_cast<uintptr_t>(a);
  return true;
}

const cs_insn& Insn() { return *cs.insn; }

Branch RelativeBranch(const cs_x86& x) {
  if (x.op_count != 1 || x.operands[0].type != X86_OP_IMM) return Branch::kNone;
  const uint8_t o0 = x.opcode[0], o1 = x.opcode[1];
  if (o0 == 0xe8) return Branch::kCall;
  if (o0 == 0xe9 || o0 == 0xeb) return Branch::kJmp;
  if (o0 >= 0x70 && o0 <= 0x7f) return Branch::kJcc;
  if (o0 == 0x0f && o1 >= 0x80 && o1 <= 0x8f) return Branch::kJcc;
  if (o0 >= 0xe0 && o0 <= 0xe3) return Branch::kLoop;
  return Branch::kNone;
}

bool HasGroup(const cs_insn& i, uint8_t group) {
  for (uint8_t k = 0; k < i.detail->groups_count; ++k) {
    if (i.detail->groups[k] == group) return true;
  }
  return false;
}

bool FitsRel32(int64_t d) { return d >= INT32_MIN && d <= INT32_MAX; }

uint8_t* NearPage(uintptr_t fn) {
  constexpr uintptr_t kStep = uintptr_t{16} << 20;
  const uintptr_t base = fn & ~(kStep - 1);
  for (uintptr_t i = 4; i < 96; ++i) {
    for (int side = 0; side < 2; ++side) {
      const uintptr_t a = side == 0 ? base + i * kStep : base - i * kStep;
      if (side == 1 && a > base) continue;  // wrapped below 0
      void* p = mmap(reinterpret_cast<void*>(a), kPage, PROT_READ | PROT_WRITE,
                     MAP_PRIVATE | MAP_ANONYMOUS | MAP_FIXED_NOREPLACE, -1, 0);
      if (p == MAP_FAILED) continue;
      if (reinterpret_cast<uintptr_t>(p) == a) return static_cast<uint8_t*>(p);
      munmap(p, kPage);  // a kernel that took the address as a hint only
    }
  }
  return nullptr;
}

void PutRel32(uint8_t* at, int64_t d) {
  const int32_t v = static_cast<int32_t>(d);
  memcpy(at, &v, 4);
}

void WriteThunk(uint8_t* out, uint32_t slot) {
  // movq %r11, -32(%rsp); movl $slot, %r11d; jmp *0(%rip) and
  // fp_detour_entry's address; int3 up to kThunk.
  static const uint8_t kSaveR11[] = {0x4c, 0x89, 0x5c, 0x24, 0xe0};
  memcpy(out, kSaveR11, sizeof kSaveR11);
  out[5] = 0x41;
  out[6] = 0xbb;
  memcpy(out + 7, &slot, 4);
  out[11] = 0xff;
  out[12] = 0x25;
  memset(out + 13, 0, 4);
  const auto entry = reinterpret_cast<uintptr_t>(&fp_detour_entry);
  memcpy(out + 17, &entry, 8);
  memset(out + 25, 0xcc, kThunk - 25);
}

bool SyncCoreRegistered() { return g_sync_core; }

bool Load(const char** why) {
  if (!cs.tried) {
    cs.tried = true;
    const long cmds = syscall(SYS_membarrier, MEMBARRIER_CMD_QUERY, 0, 0);
    g_sync_core =
        cmds > 0 && (cmds & MEMBARRIER_CMD_PRIVATE_EXPEDITED_SYNC_CORE) != 0 &&
        syscall(SYS_membarrier, MEMBARRIER_CMD_REGISTER_PRIVATE_EXPEDITED_SYNC_CORE, 0, 0) == 0;
    void* lib = dlopen("libcapstone.so.4", RTLD_NOW | RTLD_LOCAL);
    if (lib != nullptr) {
      cs.open = reinterpret_cast<decltype(cs.open)>(dlsym(lib, "cs_open"));
      cs.option = reinterpret_cast<decltype(cs.option)>(dlsym(lib, "cs_option"));
      cs.new_insn = reinterpret_cast<decltype(cs.new_insn)>(dlsym(lib, "cs_malloc"));
      cs.iter = reinterpret_cast<decltype(cs.iter)>(dlsym(lib, "cs_disasm_iter"));
    }
    if (lib == nullptr || cs.open == nullptr || cs.option == nullptr || cs.new_insn == nullptr ||
        cs.iter == nullptr) {
      cs.why = "no libcapstone.so.4 (Debian's libcapstone4) to decode its instructions";
    } else if (cs.open(CS_ARCH_X86, CS_MODE_64, &cs.handle) != CS_ERR_OK ||
               cs.option(cs.handle, CS_OPT_DETAIL, CS_OPT_ON) != CS_ERR_OK ||
               (cs.insn = cs.new_insn(cs.handle)) == nullptr) {
      cs.why = "capstone would not start";
    }
  }
  if (cs.why != nullptr) *why = cs.why;
  return cs.why == nullptr;
}

}  // namespace code

namespace {

using code::Branch;
using code::Decode;
using code::FitsRel32;
using code::HasGroup;
using code::Insn;
using code::kPage;
using code::kThunk;
using code::NearPage;
using code::PutRel32;
using code::RelativeBranch;

constexpr size_t kJump = 5;                             // jmp rel32
constexpr char kOwnThreadComm[] = "fieldprof-drain\n";  // as /proc gives it

// Where a RIP-relative memory operand of the decoded instruction points
// (`next`: the instruction after it), or 0.
uintptr_t RipTarget(const cs_x86& x, uintptr_t next) {
  for (uint8_t k = 0; k < x.op_count; ++k) {
    const cs_x86_op& op = x.operands[k];
    if (op.type == X86_OP_MEM && op.mem.base == X86_REG_RIP) {
      return next + static_cast<uintptr_t>(op.mem.disp);
    }
  }
  return 0;
}

// Whether any branch or RIP-relative address in [fn, fn + size) lands
// inside the entry's jump (`cover` bytes), after its first byte. A linear
// sweep: bytes that do not decode (data, padding) are stepped over one at
// a time.
bool SomethingLandsInEntry(uintptr_t fn, size_t size, size_t cover) {
  for (uintptr_t at = fn, end = fn + size; at < end;) {
    uintptr_t next = 0;
    if (!Decode(at, end - at, &next)) {
      ++at;
      continue;
    }
    const cs_x86& x = Insn().detail->x86;
    uintptr_t t = RipTarget(x, next);
    if (RelativeBranch(x) != Branch::kNone) t = static_cast<uintptr_t>(x.operands[0].imm);
    if (t > fn && t < fn + cover) return true;
    at = next;
  }
  return false;
}

// The process's threads other than fieldprof's own (the points recorder's
// drain thread, named so when it is made): -1 when unknown.
int ProgramThreads() {
  DIR* d = opendir("/proc/self/task");
  if (d == nullptr) return -1;
  int n = 0;
  while (const dirent* e = readdir(d)) {
    if (e->d_name[0] == '.') continue;
    char path[320], comm[32] = {};
    snprintf(path, sizeof path, "/proc/self/task/%s/comm", e->d_name);
    const int fd = open(path, O_RDONLY | O_CLOEXEC);
    if (fd >= 0) {
      const ssize_t r = read(fd, comm, sizeof comm - 1);
      (void)r;
      close(fd);
    }
    if (strcmp(comm, kOwnThreadComm) != 0) ++n;
  }
  closedir(d);
  return n;
}

// The ELF symbol table of the file `path`: functions named `symbol` inside
// [lo, hi) once biased by `base`, appended to addr/size (no duplicates).
void FromSymtab(const char* path, const char* symbol, uintptr_t base, uintptr_t lo, uintptr_t hi,
                uintptr_t* addr, size_t* size, int cap, int* n) {
  const int fd = open(path, O_RDONLY | O_CLOEXEC);
  if (fd < 0) return;
  struct stat st;
  void* map = MAP_FAILED;
  if (fstat(fd, &st) == 0 && st.st_size >= static_cast<off_t>(sizeof(Elf64_Ehdr))) {
    map = mmap(nullptr, static_cast<size_t>(st.st_size), PROT_READ, MAP_PRIVATE, fd, 0);
  }
  close(fd);
  if (map == MAP_FAILED) return;
  const auto* f = static_cast<const uint8_t*>(map);
  const size_t bytes = static_cast<size_t>(st.st_size);
  const auto* eh = reinterpret_cast<const Elf64_Ehdr*>(f);
  const bool elf = memcmp(eh->e_ident, ELFMAG, SELFMAG) == 0 &&
                   eh->e_ident[EI_CLASS] == ELFCLASS64 && eh->e_shentsize == sizeof(Elf64_Shdr) &&
                   eh->e_shoff < bytes && eh->e_shnum <= (bytes - eh->e_shoff) / sizeof(Elf64_Shdr);
  const auto* sh = elf ? reinterpret_cast<const Elf64_Shdr*>(f + eh->e_shoff) : nullptr;
  for (int s = 0; sh != nullptr && s < eh->e_shnum; ++s) {
    if (sh[s].sh_type != SHT_SYMTAB || sh[s].sh_link >= eh->e_shnum) continue;
    const Elf64_Shdr& strs = sh[sh[s].sh_link];
    if (sh[s].sh_offset > bytes || sh[s].sh_size > bytes - sh[s].sh_offset ||
        strs.sh_offset > bytes || strs.sh_size > bytes - strs.sh_offset || strs.sh_size == 0) {
      continue;
    }
    const auto* syms = reinterpret_cast<const Elf64_Sym*>(f + sh[s].sh_offset);
    const char* names = reinterpret_cast<const char*>(f + strs.sh_offset);
    const size_t count = sh[s].sh_size / sizeof(Elf64_Sym);
    const size_t len = strlen(symbol);
    for (size_t k = 0; k < count && *n < cap; ++k) {
      const Elf64_Sym& y = syms[k];
      if (ELF64_ST_TYPE(y.st_info) != STT_FUNC || y.st_shndx == SHN_UNDEF) continue;
      if (y.st_name >= strs.sh_size || strs.sh_size - y.st_name <= len) continue;
      if (memcmp(names + y.st_name, symbol, len + 1) != 0) continue;
      const uintptr_t a = base + y.st_value;
      if (a < lo || a >= hi) continue;
      bool seen = false;
      for (int j = 0; j < *n; ++j) seen = seen || addr[j] == a;
      if (seen) continue;
      addr[*n] = a;
      size[*n] = y.st_size;
      ++*n;
    }
  }
  munmap(map, bytes);
}

}  // namespace

bool DetourLoad(const char** why) { return code::Load(why); }

bool OtherThreadsRun() { return ProgramThreads() != 1; }

int FindFunctions(const ElfObject& e, const char* symbol, uintptr_t* addr, size_t* size, int cap) {
  int n = 0;
  const Elf64_Sym* d = FindDefinition(e, symbol, GnuHash(symbol), VersionNeed{});
  if (d != nullptr && ELF64_ST_TYPE(d->st_info) == STT_FUNC && cap > 0) {
    const uintptr_t a = e.base + d->st_value;
    if (a >= e.text_lo && a < e.text_hi) {
      addr[n] = a;
      size[n] = d->st_size;
      ++n;
    }
  }
  const char* path = e.path != nullptr && e.path[0] != 0 ? e.path : "/proc/self/exe";
  FromSymtab(path, symbol, e.base, e.text_lo, e.text_hi, addr, size, cap, &n);
  return n;
}

namespace code {

namespace {

// A moved copy being made: a thunk to fp_detour_entry, the instructions
// moved, a jump back; each rel32 in it is fixed once its page is known.
struct MovedCode {
  uint8_t out[160];
  size_t used = kThunk;  // the way to fp_detour_entry, first
  struct Fix {
    size_t at;   // a rel32 in out[] ...
    size_t end;  // ... relative to the end of its instruction there
    uintptr_t target;
  } fixes[16];
  int nfix = 0;
};

// The instruction at `at` (of the function `fn`, `size` bytes, whose
// first `cover` bytes move) onto `m`; `next` is the one after it. False,
// with why, for an instruction that cannot move.
bool MoveInstruction(uintptr_t fn, size_t size, size_t cover, uintptr_t at, uintptr_t* next,
                     MovedCode* m, const char** why) {
  if (!Decode(at, fn + size - at, next)) {
    *why = "its first instructions do not decode";
    return false;
  }
  const cs_insn& i = Insn();
  const cs_x86& x = i.detail->x86;
  const Branch b = RelativeBranch(x);
  if (b == Branch::kCall || HasGroup(i, X86_GRP_CALL)) {
    *why = "a call among its first instructions (its return would land in moved code)";
    return false;
  }
  if (b == Branch::kLoop) {
    *why = "a loop instruction among its first instructions";
    return false;
  }
  const bool leaves = HasGroup(i, X86_GRP_RET) || HasGroup(i, X86_GRP_INT) ||
                      HasGroup(i, X86_GRP_IRET) || (HasGroup(i, X86_GRP_JUMP) && b != Branch::kJcc);
  if (*next < fn + cover && leaves) {
    *why = "its code leaves it before the jump's end";
    return false;
  }
  if (m->nfix + 1 >= 16 || m->used + 16 + kJump > sizeof m->out) {
    *why = "its first instructions are too many";
    return false;
  }
  if (b == Branch::kJmp || b == Branch::kJcc) {
    const uint8_t cc = x.opcode[0] == 0x0f ? (x.opcode[1] & 0x0f) : (x.opcode[0] & 0x0f);
    if (b == Branch::kJmp) {
      m->out[m->used++] = 0xe9;
    } else {
      m->out[m->used++] = 0x0f;
      m->out[m->used++] = static_cast<uint8_t>(0x80 | cc);
    }
    m->fixes[m->nfix++] = {m->used, m->used + 4, static_cast<uintptr_t>(x.operands[0].imm)};
    m->used += 4;
    return true;
  }
  memcpy(m->out + m->used, reinterpret_cast<const void*>(at), i.size);
  if (const uintptr_t t = RipTarget(x, *next); t != 0) {
    if (x.encoding.disp_offset == 0 || x.encoding.disp_size != 4) {
      *why = "a RIP-relative operand capstone gives no offset for";
      return false;
    }
    m->fixes[m->nfix++] = {m->used + x.encoding.disp_offset, m->used + i.size, t};
  }
  m->used += i.size;
  return true;
}

// `m` onto a page near `fn`, its rel32s fixed, executable: its address,
// or 0 with why.
uintptr_t PlaceMoved(uintptr_t fn, uint32_t slot, MovedCode* m, const char** why) {
  uint8_t* page = NearPage(fn);
  if (page == nullptr) {
    *why = "no free page within reach of a 32-bit jump";
    return 0;
  }
  const auto where = reinterpret_cast<uintptr_t>(page);
  bool fits = true;
  code::WriteThunk(m->out, slot);
  for (int k = 0; k < m->nfix; ++k) {
    const int64_t d = static_cast<int64_t>(m->fixes[k].target - (where + m->fixes[k].end));
    fits = fits && FitsRel32(d);
    PutRel32(m->out + m->fixes[k].at, d);
  }
  if (!fits) {
    munmap(page, kPage);
    *why = "what its first instructions address is out of a moved copy's reach";
    return 0;
  }
  memcpy(page, m->out, m->used);
  if (mprotect(page, kPage, PROT_READ | PROT_EXEC) != 0) {
    munmap(page, kPage);
    *why = "its moved copy could not be made executable";
    return 0;
  }
  return where;
}

}  // namespace

uintptr_t MoveEntry(uintptr_t fn, size_t size, size_t cover, uint32_t slot, int* moved_insns,
                    const char** why) {
  // The first instructions, whole, covering `cover` bytes.
  MovedCode m;
  *moved_insns = 0;
  uintptr_t at = fn;
  while (at < fn + cover) {
    uintptr_t next = 0;
    if (!MoveInstruction(fn, size, cover, at, &next, &m, why)) return 0;
    ++*moved_insns;
    at = next;
  }
  if (SomethingLandsInEntry(fn, size, cover)) {
    *why = "a branch in it lands inside its first bytes, which the jump replaces";
    return 0;
  }
  // Then back behind what was moved.
  m.out[m.used++] = 0xe9;
  m.fixes[m.nfix++] = {m.used, m.used + 4, at};
  m.used += 4;
  return PlaceMoved(fn, slot, &m, why);
}

}  // namespace code

uintptr_t Detour(uintptr_t fn, size_t size, uint32_t slot, const char** why) {
  if (!DetourLoad(why)) return 0;
  if (size < kJump) {
    *why = "shorter than the 5-byte jump that would replace its entry";
    return 0;
  }
  int insns = 0;
  const uintptr_t where = code::MoveEntry(fn, size, kJump, slot, &insns, why);
  if (where == 0) return 0;
  const int64_t entry_rel = static_cast<int64_t>(where - (fn + kJump));
  if (!FitsRel32(entry_rel)) {  // NearPage keeps it within reach
    munmap(reinterpret_cast<void*>(where), kPage);
    *why = "no free page within reach of a 32-bit jump";
    return 0;
  }
  // The entry: made writable for the five bytes, then as it was (text is
  // read and execute). No other thread runs (the caller asked).
  const uintptr_t lo = fn & ~(kPage - 1);
  const uintptr_t hi = (fn + kJump + kPage - 1) & ~(kPage - 1);
  void* text = reinterpret_cast<void*>(lo);
  if (mprotect(text, hi - lo, PROT_READ | PROT_WRITE | PROT_EXEC) != 0) {
    munmap(reinterpret_cast<void*>(where), kPage);
    *why = "its code could not be made writable";
    return 0;
  }
  uint8_t jump[kJump] = {0xe9};
  PutRel32(jump + 1, entry_rel);
  memcpy(reinterpret_cast<void*>(fn), jump, kJump);
  mprotect(text, hi - lo, PROT_READ | PROT_EXEC);
  return where + kThunk;
}

}  // namespace fieldprof::rt
