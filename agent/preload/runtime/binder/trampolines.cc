// Which imports the binder traps, and their trampolines (binder.h says
// how a trap works; binder/state.h lays a trampoline out).
#include <string.h>
#include <sys/mman.h>

#include "agent/preload/runtime/binder/internal.h"

namespace fieldprof::rt {

// Functions a return-address wrapper must never sit in front of, whatever
// the choice or `force` says:
// - they return twice (vfork: the child returns through the stub on the
//   parent's stack; setjmp/getcontext: the saved return address would be
//   the stub's);
// - they look at their own return address to find their caller (dlopen
//   searches the caller's RUNPATH, dlsym(RTLD_NEXT) starts after it).
bool UnsafeToWrap(const char* name) {
  static const char* const kNames[] = {
      "vfork",       "__vfork",    "clone",       "__clone",    "clone3",
      "setjmp",      "_setjmp",    "__setjmp",    "sigsetjmp",  "__sigsetjmp",
      "savectx",     "getcontext", "swapcontext", "setcontext", "makecontext",
      "dlopen",      "dlmopen",    "dlsym",       "dlvsym",     "__libc_dlopen_mode",
      "__libc_dlsym"};
  for (const char* n : kNames) {
    if (!strcmp(name, n)) return true;
  }
  return false;
}

// Never a candidate: what this library defines (its interposers: callers
// bind to it, and fieldprof's own code is never measured), the unwinder and
// the C++ ABI, the dynamic linker's own, vector-ABI functions (arguments
// and results in registers a slow path's FXSAVE would not keep), and
// UnsafeToWrap.
bool Excluded(const char* name, uint32_t gnu, const Object* ours) {
  if (ours != nullptr && FindDefinition(ours->elf, name, gnu, VersionNeed{}) != nullptr)
    return true;
  if (name[0] == '_') {
    if (!strncmp(name, "_Unwind", 7) || !strncmp(name, "__cxa_", 6) || !strncmp(name, "_dl_", 4) ||
        !strncmp(name, "_ZGV", 4) || !strcmp(name, "__tls_get_addr") ||
        !strcmp(name, "__libc_start_main")) {
      return true;
    }
  }
  return UnsafeToWrap(name);
}

namespace {

void WriteTrampoline(uint8_t* code, uintptr_t* table, uint32_t j, uintptr_t thunk) {
  uint8_t* t = code + kTrampSize * j;
  t[0] = 0xff;  // jmp *table[j](%rip)
  t[1] = 0x25;
  int32_t rel = static_cast<int32_t>(reinterpret_cast<intptr_t>(&table[j]) -
                                     reinterpret_cast<intptr_t>(t + kTrampCallOffset));
  memcpy(t + 2, &rel, 4);
  t[6] = 0xe8;  // call thunk
  rel = static_cast<int32_t>(static_cast<intptr_t>(thunk) -
                             reinterpret_cast<intptr_t>(t + kTrampMarkerOffset));
  memcpy(t + 7, &rel, 4);
  memset(t + kTrampMarkerOffset, 0xcc, kTrampSize - kTrampMarkerOffset);
  table[j] = reinterpret_cast<uintptr_t>(t + kTrampCallOffset);
}

// The names a look at `most` imports will likely add to the API table; at
// start, also the threshold below which a name's priority is trapped
// (binder.h), once, from the imports at start.
uint64_t ExpectedNames(uint64_t most) {
  if (!g_starting) return 0;
  if (g_binder.lab) {
    g_binder.trap_below = ~uint64_t{0};  // the lab observes every API
    return most;
  }
  // Small programs (up to kTrapAll imports) keep every name: one that
  // calls a handful of APIs still measures some.
  uint64_t want = uint64_t{kTrapPerApi} * static_cast<uint64_t>(g_binder.k_random);
  if (g_binder.k_random > 0 && want < kTrapAll) want = kTrapAll;
  g_binder.trap_below =
      want >= most ? ~uint64_t{0}
                   : static_cast<uint64_t>((static_cast<unsigned __int128>(want) << 64) / most);
  // Sized once (a table grown while trapping costs a mapping and a copy).
  return want >= most ? most : want + want / 8;
}

// A block's memory: its slots and table, then its code (trampolines and
// the thunk that jumps to fp_trap).
struct BlockMemory {
  uint8_t* base = nullptr;
  size_t data = 0, code = 0;
  uint8_t* thunk = nullptr;
};

bool MapBlock(uint64_t most, TrampBlock* b, BlockMemory* m) {
  m->data = RoundUp(most * (sizeof(ImportSlot) + sizeof(uintptr_t)), g_page);
  m->code = RoundUp(most * kTrampSize + 16, g_page);
  m->base = static_cast<uint8_t*>(MapZero(m->data + m->code));
  if (m->base == nullptr) return false;
  b->slots = reinterpret_cast<ImportSlot*>(m->base);
  b->table = reinterpret_cast<uintptr_t*>(m->base + most * sizeof(ImportSlot));
  b->code = m->base + m->data;
  b->count = 0;
  m->thunk = b->code + most * kTrampSize;
  m->thunk[0] = 0xff;  // jmp *0(%rip), then fp_trap's address
  m->thunk[1] = 0x25;
  memset(m->thunk + 2, 0, 4);
  const uintptr_t trap = reinterpret_cast<uintptr_t>(&fp_trap);
  memcpy(m->thunk + 6, &trap, 8);
  return true;
}

// The candidate imports of object `o` into `b`, each with its trampoline
// (its GOT entry is not touched yet).
void AddSlots(uint32_t o, const Object* ours, uintptr_t thunk, TrampBlock& b) {
  const ElfObject& e = g_binder.objects[o].elf;
  for (size_t r = 0; r < e.njmprel; ++r) {
    const Elf64_Rela& rel = e.jmprel[r];
    if (ELF64_R_TYPE(rel.r_info) != R_X86_64_JUMP_SLOT) continue;
    const uint32_t symidx = static_cast<uint32_t>(ELF64_R_SYM(rel.r_info));
    const Elf64_Sym& sym = e.symtab[symidx];
    if (sym.st_shndx != SHN_UNDEF || ELF64_ST_TYPE(sym.st_info) == STT_GNU_IFUNC) continue;
    const char* name = e.strtab + sym.st_name;
    if (*name == 0) continue;
    auto* got = reinterpret_cast<uintptr_t*>(e.base + rel.r_offset);
    const uintptr_t orig = __atomic_load_n(got, __ATOMIC_ACQUIRE);
    if (orig == 0) continue;  // a weak import that resolved to nothing
    const bool lazy = orig >= e.text_lo && orig < e.text_hi;
    if (!lazy && ours != nullptr && orig >= ours->elf.map_lo && orig < ours->elf.map_hi) continue;
    const uint64_t key = NameKey(name);
    if (Mix64(g_binder.seed ^ key) >= g_binder.trap_below && !IsForced(key)) continue;
    if (Excluded(name, GnuHash(name), ours)) continue;
    if (!ApiRoom(1)) break;
    ApiFor(key);
    const uint32_t j = b.count++;
    ImportSlot& s = b.slots[j];
    s.got = got;
    s.name_key = key;
    s.orig = orig;
    s.object = o;
    s.symidx = symidx;
    s.state = kTrapped;
    s.lazy = lazy;
    s.relro = reinterpret_cast<uintptr_t>(got) >= e.relro_lo &&
              reinterpret_cast<uintptr_t>(got) < e.relro_hi;
    s.stub = -1;
    WriteTrampoline(b.code, b.table, j, thunk);
  }
}

// Points the object's slots' entries at their trampolines: RELRO pages
// made writable for the writes and read-only again; an entry that cannot
// be written is left alone.
void TrapEntries(const Object& ob, TrampBlock& b) {
  const ElfObject& e = ob.elf;
  const bool relro = e.relro_hi > e.relro_lo;
  bool writable = !relro;
  if (relro) {
    writable = mprotect(reinterpret_cast<void*>(e.relro_lo), e.relro_hi - e.relro_lo,
                        PROT_READ | PROT_WRITE) == 0;
  }
  for (uint32_t j = ob.first_slot; j < ob.first_slot + ob.nslots; ++j) {
    ImportSlot& s = b.slots[j];
    if (s.relro && !writable) {
      s.state = kDirect;  // cannot be trapped: left alone
      continue;
    }
    const uintptr_t to =
        reinterpret_cast<uintptr_t>(b.code + kTrampSize * j + (s.relro ? 0 : kTrampCallOffset));
    // The dynamic linker may bind a lazy entry meanwhile: trap what is there.
    uintptr_t expected = s.orig;
    while (!__atomic_compare_exchange_n(s.got, &expected, to, false, __ATOMIC_ACQ_REL,
                                        __ATOMIC_ACQUIRE)) {
      s.orig = expected;
      s.lazy = expected >= e.text_lo && expected < e.text_hi;
    }
  }
  if (relro && writable) {
    mprotect(reinterpret_cast<void*>(e.relro_lo), e.relro_hi - e.relro_lo, PROT_READ);
  }
}

}  // namespace

void BuildTraps(uint32_t first) {
  if (g_binder.nblocks == kMaxBlocks) return;
  const Object* ours = Ours();
  uint64_t most = 0;
  for (uint32_t o = first; o < g_binder.nobjects; ++o) {
    const Object& ob = g_binder.objects[o];
    if (!ob.ours && !ob.vdso && !ob.rtld) most += ob.elf.njmprel;
  }
  if (most == 0 || most > (1u << 24)) return;
  if (!ApiRoom(static_cast<uint32_t>(ExpectedNames(most)))) return;
  TrampBlock& b = g_binder.blocks[g_binder.nblocks];
  BlockMemory m;
  if (!MapBlock(most, &b, &m)) return;
  for (uint32_t o = first; o < g_binder.nobjects; ++o) {
    Object& ob = g_binder.objects[o];
    ob.block = static_cast<int16_t>(g_binder.nblocks);
    ob.first_slot = b.count;
    if (!ob.ours && !ob.vdso && !ob.rtld)
      AddSlots(o, ours, reinterpret_cast<uintptr_t>(m.thunk), b);
    ob.nslots = b.count - ob.first_slot;
  }
  if (b.count == 0 || mprotect(b.code, m.code, PROT_READ | PROT_EXEC) != 0) {
    munmap(m.base, m.data + m.code);
    for (uint32_t o = first; o < g_binder.nobjects; ++o) g_binder.objects[o].nslots = 0;
    return;
  }
  ++g_binder.nblocks;
  g_binder.imports += b.count;
  for (uint32_t o = first; o < g_binder.nobjects; ++o) {
    if (g_binder.objects[o].nslots != 0) TrapEntries(g_binder.objects[o], b);
  }
}

}  // namespace fieldprof::rt
