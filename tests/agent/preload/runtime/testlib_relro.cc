// A library that keeps the dynamic linker busy relocating it: its RELRO
// pages hold a table of 4,096 function pointers, and one of them points
// to an IFUNC whose resolver, which the dynamic linker runs in the middle
// of relocating this library, spins for about a millisecond. Only then
// are the last relocations written and the RELRO pages made read-only. It
// calls strlen through its PLT, so a forced strlen gives the binder an
// entry to trap in it (HazardTest.ADlopenInOneThreadWhileAnotherLooksUp).
#include <x86intrin.h>

#include <cstring>

namespace {
long Next(long x) { return x + 1; }
}  // namespace

extern "C" {

using FpRelroFn = long (*)(long);

// Runs before this library is relocated: no call, no global data (Next's
// address is PC-relative).
__attribute__((visibility("hidden"))) FpRelroFn fp_relro_resolve() {
  const unsigned long long t0 = __rdtsc();
  while (__rdtsc() - t0 < 3000000) _mm_pause();
  return &Next;
}
__attribute__((visibility("hidden"), ifunc("fp_relro_resolve"))) long fp_relro_slow(long x);

#define FP_P1 &Next
#define FP_P4 FP_P1, FP_P1, FP_P1, FP_P1
#define FP_P16 FP_P4, FP_P4, FP_P4, FP_P4
#define FP_P64 FP_P16, FP_P16, FP_P16, FP_P16
#define FP_P256 FP_P64, FP_P64, FP_P64, FP_P64
#define FP_P1K FP_P256, FP_P256, FP_P256, FP_P256

// extern: a const object would otherwise be the file's own, and folded away.
extern __attribute__((visibility("default"))) const FpRelroFn fp_relro_table[4097];
const FpRelroFn fp_relro_table[4097] = {FP_P1K, FP_P1K, FP_P1K, FP_P1K, &fp_relro_slow};

__attribute__((visibility("default"))) long fp_relro_len(const char* s) {
  // The IFUNC's entry is only read, never called: its one relocation is
  // the table's, in the RELRO pages.
  return static_cast<long>(strlen(s)) + (fp_relro_table[4096] == fp_relro_table[0] ? 1 : 0);
}
}
