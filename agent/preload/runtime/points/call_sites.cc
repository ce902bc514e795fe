// Code changed while other threads may be running it (detour.h): a
// function's entry moved through the padding beside it
// (DetourWhileThreadsRun), or, where that cannot be done, the calls its
// module makes to it re-aimed at a thunk that enters its slot
// (RedirectCalls).
//
// Moving an entry. Only the first instruction is replaced, by a 2-byte
// jump (EB rel8, one store) to a 5-byte jump written first into the
// padding between two functions, which no thread executes. A thread is
// before the first instruction or past it, never inside it, so it either
// takes the new jump or goes on in the old code. Functions whose first
// instruction is one byte (push %rbx) are left to RedirectCalls.
//
// Finding them. The module's code is scanned for the bytes of a direct
// call, jump or conditional jump with a 32-bit displacement whose target is
// the function. Such bytes may also sit inside another instruction or in
// data, so a candidate is taken only when decoding the function that holds
// it, from that function's first byte (the start and length its FDE gives,
// found through .eh_frame_hdr's sorted table), lands on it.
//
// Patching them. Another thread may be about to execute a site, or be
// stopped right on it, but never inside it: a site is one instruction. Each
// is rewritten as HotSpot rewrites its call sites on x86: its first two
// bytes become a jump to itself (EB FE, one 2-byte store, atomic within a
// cache line), so a thread that reaches it waits there; then the bytes
// after the first two; then the first two, which completes the new
// instruction. Between the steps every core that runs one of the process's
// threads executes a serializing instruction (membarrier's SYNC_CORE),
// which is what Intel's rules for code modified on one core and executed
// on another ask for. A fork waits for the three steps (WaitForCodePatch),
// so no child starts with a jump to itself in its code.
#include <linux/membarrier.h>
#include <sched.h>
#include <stdio.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/syscall.h>
#include <unistd.h>

#include "agent/preload/runtime/points/detour.h"
#include "agent/preload/runtime/points/detour_internal.h"

namespace fieldprof::rt {

namespace {

using code::Branch;

// Nonzero while sites are half patched (WaitForCodePatch).
int g_patching;

// Whether membarrier's SYNC_CORE is there for this process (code::Load
// registered it).
bool SyncCoreReady(const char** why) {
  if (!code::SyncCoreRegistered()) {
    *why = "the kernel cannot make other cores see code changed (no membarrier)";
    return false;
  }
  return true;
}

bool SyncCores() {
  return syscall(SYS_membarrier, MEMBARRIER_CMD_PRIVATE_EXPEDITED_SYNC_CORE, 0, 0) == 0;
}

// One 2-byte store: atomic when it does not cross a cache line.
void Store16(uintptr_t at, uint16_t v) {
  __asm__ __volatile__("movw %1, (%0)" : : "r"(at), "r"(v) : "memory");
}

int32_t Load32(uintptr_t at) {
  int32_t v;
  memcpy(&v, reinterpret_cast<const void*>(at), 4);
  return v;
}

// .eh_frame_hdr: its sorted table of (function start, FDE), both as 4-byte
// offsets from the header, as GNU ld writes it (table encoding
// DW_EH_PE_datarel | DW_EH_PE_sdata4).
struct FdeTable {
  uintptr_t hdr = 0;
  const int32_t* table = nullptr;  // pairs
  uint32_t count = 0;
  uintptr_t map_lo = 0, map_hi = 0;  // the object's loaded bytes: where an FDE may be
};

bool ReadFdeTable(const ElfObject& e, FdeTable* t) {
  for (int i = 0; i < e.phnum; ++i) {
    if (e.phdr[i].p_type != PT_GNU_EH_FRAME) continue;
    const uintptr_t hdr = e.base + e.phdr[i].p_vaddr;
    const auto* h = reinterpret_cast<const uint8_t*>(hdr);
    // version 1; eh_frame_ptr a 4-byte value; count udata4; table datarel|sdata4
    if (e.phdr[i].p_memsz < 12 || h[0] != 1 || (h[1] & 0x0f) != 0x0b || h[2] != 0x03 ||
        h[3] != 0x3b) {
      return false;
    }
    uint32_t count;
    memcpy(&count, h + 8, 4);
    if (count == 0 || (e.phdr[i].p_memsz - 12) / 8 < count) return false;
    *t = {hdr, reinterpret_cast<const int32_t*>(h + 12), count, e.map_lo, e.map_hi};
    return true;
  }
  return false;
}

uintptr_t FdeStart(const FdeTable& t, uint32_t i) {
  return t.hdr + static_cast<intptr_t>(t.table[2 * i]);
}

// The index of the last function start <= at, or false when none is.
bool FdeIndex(const FdeTable& t, uintptr_t at, uint32_t* i) {
  uint32_t a = 0, b = t.count;  // the last start <= at is in [a, b)
  if (FdeStart(t, 0) > at) return false;
  while (b - a > 1) {
    const uint32_t m = a + (b - a) / 2;
    (FdeStart(t, m) <= at ? a : b) = m;
  }
  *i = a;
  return true;
}

// The function of entry i: [*lo, *hi) as its FDE says. False when the FDE's
// start is not in the encoding the table implies (pc-relative, 4 bytes),
// which the table's own start confirms.
bool FdeRange(const FdeTable& t, uint32_t i, uintptr_t* lo, uintptr_t* hi) {
  const uintptr_t fde = t.hdr + static_cast<intptr_t>(t.table[2 * i + 1]);
  if (fde < t.map_lo || fde > t.map_hi - 16) return false;  // a damaged table
  uint32_t length;
  memcpy(&length, reinterpret_cast<const void*>(fde), 4);
  // At least the CIE pointer, the start and the length (4 bytes each).
  if (length < 12 || length == 0xffffffffu) return false;
  const uintptr_t begin = fde + 8 + static_cast<intptr_t>(Load32(fde + 8));
  uint32_t range;
  memcpy(&range, reinterpret_cast<const void*>(fde + 12), 4);
  if (begin != FdeStart(t, i)) return false;
  *lo = begin;
  *hi = begin + range;
  return true;
}

// The function holding `at`: [*lo, *hi) as its FDE says; false when no FDE
// covers it (FdeRange).
bool FunctionAt(const FdeTable& t, uintptr_t at, uintptr_t* lo, uintptr_t* hi) {
  uint32_t i = 0;
  return FdeIndex(t, at, &i) && FdeRange(t, i, lo, hi) && at < *hi;
}

struct Site {
  uintptr_t at;
  uint32_t len;   // 5: call or jmp rel32; 6: jcc rel32
  uint8_t op[2];  // its first two bytes as they were
};

// The candidates in one executable segment [lo, hi), appended to sites.
void ScanSegment(uintptr_t lo, uintptr_t hi, uintptr_t fn, Site* sites, int cap, int* n) {
  const auto* b = reinterpret_cast<const uint8_t*>(lo);
  const size_t size = hi - lo;
  for (size_t i = 0; i + 5 <= size && *n < cap; ++i) {
    const uintptr_t at = lo + i;
    if ((b[i] == 0xe8 || b[i] == 0xe9) && at + 5 + static_cast<intptr_t>(Load32(at + 1)) == fn) {
      sites[(*n)++] = {at, 5, {b[i], b[i + 1]}};
    } else if (i + 6 <= size && b[i] == 0x0f && (b[i + 1] & 0xf0) == 0x80 &&
               at + 6 + static_cast<intptr_t>(Load32(at + 2)) == fn) {
      sites[(*n)++] = {at, 6, {b[i], b[i + 1]}};
    }
  }
}

// Keeps the candidates that are instructions aiming at `fn` (sites are in
// ascending order); returns how many.
int KeepInstructions(const FdeTable& t, uintptr_t fn, Site* sites, int n) {
  int kept = 0;
  uintptr_t lo = 0, hi = 0, cursor = 0;  // the function being decoded, and where
  for (int k = 0; k < n; ++k) {
    const uintptr_t at = sites[k].at;
    if (at < lo || at >= hi || at < cursor) {
      if (!FunctionAt(t, at, &lo, &hi)) continue;
      cursor = lo;
    }
    uintptr_t next = 0;
    bool ok = true;
    while (ok && cursor < at) {
      ok = code::Decode(cursor, hi - cursor, &next);
      cursor = next;
    }
    if (!ok) {
      hi = 0;  // bytes that do not decode: trust nothing more of this function
      continue;
    }
    if (cursor != at || !code::Decode(at, hi - at, &next)) continue;
    const cs_x86& x = code::Insn().detail->x86;
    const Branch kind = code::RelativeBranch(x);
    const bool right = next - at == sites[k].len &&
                       static_cast<uintptr_t>(x.operands[0].imm) == fn &&
                       (kind == Branch::kCall || kind == Branch::kJcc ||
                        (kind == Branch::kJmp && x.opcode[0] == 0xe9));
    cursor = next;
    if (right) sites[kept++] = sites[k];
  }
  return kept;
}

// Makes the pages holding [at, at + len) writable (and executable, as they
// stay while other threads run them), or back to read and execute.
bool Protect(uintptr_t at, size_t len, bool writable) {
  const uintptr_t lo = at & ~(code::kPage - 1);
  const uintptr_t hi = (at + len + code::kPage - 1) & ~(code::kPage - 1);
  return mprotect(reinterpret_cast<void*>(lo), hi - lo,
                  PROT_READ | PROT_EXEC | (writable ? PROT_WRITE : 0)) == 0;
}

// Re-aims the sites (all usable: see RedirectCalls) at `thunk`, in the
// three steps the file's comment gives.
void PatchSites(const Site* sites, int n, uintptr_t thunk) {
  __atomic_store_n(&g_patching, 1, __ATOMIC_RELEASE);
  for (int k = 0; k < n; ++k) Store16(sites[k].at, 0xfeeb);  // jmp to itself
  SyncCores();
  for (int k = 0; k < n; ++k) {
    const Site s = sites[k];
    uint8_t rel[4];
    code::PutRel32(rel, static_cast<int64_t>(thunk - (s.at + s.len)));
    // After the first two bytes: the displacement's last three (a call
    // or jmp), or all four (a jcc, whose opcode is the two bytes).
    if (s.len == 5) {
      memcpy(reinterpret_cast<void*>(s.at + 2), rel + 1, 3);
    } else {
      memcpy(reinterpret_cast<void*>(s.at + 2), rel, 4);
    }
  }
  SyncCores();
  for (int k = 0; k < n; ++k) {
    const Site s = sites[k];
    uint8_t rel[4];
    code::PutRel32(rel, static_cast<int64_t>(thunk - (s.at + s.len)));
    // The first two bytes as they end: the opcode and the displacement's
    // first byte, or the jcc's two opcode bytes as they were.
    Store16(s.at, s.len == 5 ? static_cast<uint16_t>(s.op[0] | rel[0] << 8)
                             : static_cast<uint16_t>(s.op[0] | s.op[1] << 8));
  }
  SyncCores();
  __atomic_store_n(&g_patching, 0, __ATOMIC_RELEASE);
}

// The module's own GOT entries for `fn`: JUMP_SLOT relocations whose
// symbol the module itself defines at `fn`, the way GCC calls an
// exported function of the same library, through the PLT (the binder
// leaves these alone: they are not imports from another module). Up to
// `cap` into got[]; only entries that still go where the dynamic linker
// left them (`fn`, or the lazy PLT entry in the module's code).
int OwnPltSlots(const ElfObject& e, uintptr_t fn, uintptr_t** got, int cap) {
  int n = 0;
  for (size_t r = 0; r < e.njmprel && n < cap; ++r) {
    const Elf64_Rela& rel = e.jmprel[r];
    if (ELF64_R_TYPE(rel.r_info) != R_X86_64_JUMP_SLOT) continue;
    const Elf64_Sym& sym = e.symtab[ELF64_R_SYM(rel.r_info)];
    if (sym.st_shndx == SHN_UNDEF || ELF64_ST_TYPE(sym.st_info) != STT_FUNC ||
        e.base + sym.st_value != fn) {
      continue;
    }
    auto* entry = reinterpret_cast<uintptr_t*>(e.base + rel.r_offset);
    const uintptr_t now = __atomic_load_n(entry, __ATOMIC_ACQUIRE);
    if (now == fn || (now >= e.text_lo && now < e.text_hi)) got[n++] = entry;
  }
  return n;
}

// Points each entry at `thunk` with one aligned 8-byte store, which a
// thread calling through the PLT reads whole, before or after; a page the
// dynamic linker made read-only (RELRO) is writable only for the store.
// Returns how many were changed.
int PatchPltSlots(const ElfObject& e, uintptr_t* const* got, int n, uintptr_t thunk) {
  int done = 0;
  for (int k = 0; k < n; ++k) {
    const auto at = reinterpret_cast<uintptr_t>(got[k]);
    const bool relro = at >= e.relro_lo && at < e.relro_hi;
    void* page = reinterpret_cast<void*>(at & ~(code::kPage - 1));
    if (relro && mprotect(page, code::kPage, PROT_READ | PROT_WRITE) != 0) continue;
    __atomic_store_n(got[k], thunk, __ATOMIC_RELEASE);
    if (relro) mprotect(page, code::kPage, PROT_READ);
    ++done;
  }
  return done;
}

// Whether [lo, hi) holds padding alone: nops and int3s, decoded from lo.
bool OnlyPadding(uintptr_t lo, uintptr_t hi) {
  for (uintptr_t at = lo; at < hi;) {
    uintptr_t next = 0;
    if (!code::Decode(at, hi - at, &next)) return false;
    const cs_insn& i = code::Insn();
    const bool xchg_ax_ax = i.size == 2 && i.bytes[0] == 0x66 && i.bytes[1] == 0x90;
    if (i.id != X86_INS_NOP && i.id != X86_INS_INT3 && !xchg_ax_ax) return false;
    at = next;
  }
  return true;
}

constexpr size_t kPadJump = 5;  // jmp rel32, in the padding
// The most bytes two functions are apart by alignment alone (GCC aligns to
// at most 64 bytes); a wider gap is something else, and is not decoded.
constexpr size_t kMaxPadding = 128;

// Where kPadJump bytes of padding beside the function [fn, end) (entry i
// of the table) are that a 2-byte jump at fn reaches (rel8 from fn + 2):
// between the end of the function before and fn, or between end and the
// function after. Padding is what no FDE covers, lies inside the module's
// code [text_lo, text_hi), is at most kMaxPadding bytes, and decodes as
// nops and int3s only (code without an FDE, such as crtstuff's, is refused
// so). 0 when there is none.
uintptr_t PaddingBeside(const FdeTable& t, uint32_t i, uintptr_t fn, uintptr_t end,
                        uintptr_t text_lo, uintptr_t text_hi) {
  const uintptr_t near_lo = fn + 2 - 128, near_hi = fn + 2 + 127;  // rel8's reach
  const auto usable = [&](uintptr_t lo, uintptr_t hi) {
    return lo >= text_lo && hi <= text_hi && lo <= hi && hi - lo >= kPadJump &&
           hi - lo <= kMaxPadding && OnlyPadding(lo, hi);
  };
  uintptr_t lo = 0, hi = 0;
  if (i > 0 && FdeRange(t, i - 1, &lo, &hi) && usable(hi, fn)) {
    const uintptr_t at = hi > near_lo ? hi : near_lo;
    if (at + kPadJump <= fn) return at;
  }
  if (i + 1 < t.count && end <= near_hi && usable(end, FdeStart(t, i + 1))) return end;
  return 0;
}

}  // namespace

uintptr_t DetourWhileThreadsRun(const ElfObject& e, uintptr_t fn, size_t size, uint32_t slot,
                                uintptr_t* real, const char** why) {
  if (!DetourLoad(why) || !SyncCoreReady(why)) return 0;
  if ((fn & 63) == 63) {
    *why = "its entry's first two bytes straddle a cache line, so no store writes them at once";
    return 0;
  }
  FdeTable t;
  uint32_t i = 0;
  uintptr_t lo = 0, hi = 0;
  if (!ReadFdeTable(e, &t) || !FdeIndex(t, fn, &i) || !FdeRange(t, i, &lo, &hi) || lo != fn ||
      hi > e.text_hi) {
    *why = "the module's unwind table gives no function starting at its entry";
    return 0;
  }
  if (size == 0 || size > hi - fn) size = hi - fn;
  uintptr_t next = 0;
  if (!code::Decode(fn, size, &next)) {
    *why = "its first instruction does not decode";
    return 0;
  }
  if (next - fn < 2) {
    *why = "its first instruction is shorter than the 2-byte jump (a thread could stop inside it)";
    return 0;
  }
  const uintptr_t pad = PaddingBeside(t, i, fn, hi, e.text_lo, e.text_hi);
  if (pad == 0) {
    *why = "no padding beside it for the jump to its copy";
    return 0;
  }
  int moved = 0;
  const uintptr_t page = code::MoveEntry(fn, size, 2, slot, &moved, why);
  if (page == 0) return 0;
  const int64_t to_page = static_cast<int64_t>(page - (pad + kPadJump));
  if (moved != 1) {  // cannot be: its first instruction covers the 2 bytes
    munmap(reinterpret_cast<void*>(page), code::kPage);
    *why = "more than its first instruction would be moved";
    return 0;
  }
  if (!code::FitsRel32(to_page) || !Protect(pad, kPadJump, true) || !Protect(fn, 2, true)) {
    munmap(reinterpret_cast<void*>(page), code::kPage);
    Protect(pad, kPadJump, false);
    *why = "its code could not be made writable";
    return 0;
  }
  // The slot's function first: a thread may enter the slot the moment the
  // entry is changed. Then the padding: no thread reaches it until the
  // entry leads there.
  __atomic_store_n(real, page + code::kThunk, __ATOMIC_RELEASE);
  __atomic_store_n(&g_patching, 1, __ATOMIC_RELEASE);
  uint8_t jump[kPadJump] = {0xe9};
  code::PutRel32(jump + 1, to_page);
  memcpy(reinterpret_cast<void*>(pad), jump, kPadJump);
  SyncCores();
  Store16(fn, static_cast<uint16_t>(0xeb | (static_cast<uint8_t>(pad - (fn + 2)) << 8)));
  SyncCores();
  __atomic_store_n(&g_patching, 0, __ATOMIC_RELEASE);
  Protect(pad, kPadJump, false);
  Protect(fn, 2, false);
  return page + code::kThunk;
}

void SayRedirected(int sites, int through_plt, char* out, size_t cap) {
  snprintf(out, cap, "calls from other modules and %d direct calls in its own%s", sites,
           through_plt > 0 ? ", and its calls through its own PLT" : "");
}

void WaitForCodePatch() {
  while (__atomic_load_n(&g_patching, __ATOMIC_ACQUIRE) != 0) sched_yield();
}

int RedirectCalls(const ElfObject& e, uintptr_t fn, uint32_t slot, int* through_plt,
                  const char** why) {
  *through_plt = 0;
  if (!DetourLoad(why) || !SyncCoreReady(why)) return -1;
  FdeTable t;
  if (!ReadFdeTable(e, &t)) {
    *why = "the module has no unwind table (.eh_frame_hdr) to find its instructions by";
    return -1;
  }
  constexpr int kCap = 4096, kPltCap = 8;
  const size_t bytes = kCap * sizeof(Site);
  void* mem = mmap(nullptr, bytes, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
  if (mem == MAP_FAILED) {
    *why = "no memory to list its call sites";
    return -1;
  }
  auto* sites = static_cast<Site*>(mem);
  int n = 0;
  for (int i = 0; i < e.phnum; ++i) {
    const Elf64_Phdr& p = e.phdr[i];
    if (p.p_type == PT_LOAD && (p.p_flags & PF_X) != 0) {
      ScanSegment(e.base + p.p_vaddr, e.base + p.p_vaddr + p.p_filesz, fn, sites, kCap, &n);
    }
  }
  n = KeepInstructions(t, fn, sites, n);
  uintptr_t* got[kPltCap];
  const int slots = OwnPltSlots(e, fn, got, kPltCap);
  uint8_t* page = n + slots > 0 ? code::NearPage(fn) : nullptr;
  if (n + slots > 0 && page == nullptr) {
    munmap(mem, bytes);
    *why = "no free page within reach of a 32-bit call";
    return -1;
  }
  int done = 0;
  if (page != nullptr) {
    code::WriteThunk(page, slot);
    mprotect(page, code::kPage, PROT_READ | PROT_EXEC);
    const auto thunk = reinterpret_cast<uintptr_t>(page);
    // Sites the 2-byte store could tear (across a cache line), whose
    // displacement would not reach, or whose page stays read-only, are
    // left as they are.
    for (int k = 0; k < n; ++k) {
      const Site s = sites[k];
      const int64_t d = static_cast<int64_t>(thunk - (s.at + s.len));
      if ((s.at & 63) != 63 && code::FitsRel32(d) && Protect(s.at, s.len, true)) {
        sites[done++] = s;
      }
    }
    PatchSites(sites, done, thunk);
    for (int k = 0; k < done; ++k) Protect(sites[k].at, sites[k].len, false);
    *through_plt = PatchPltSlots(e, got, slots, thunk);
  }
  munmap(mem, bytes);
  return done;
}

}  // namespace fieldprof::rt
