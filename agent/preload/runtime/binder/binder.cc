// The binder's start and the calls the rest of the runtime makes (binder.h
// is the contract; binder/internal.h lists the files that do the work).
#include "agent/preload/runtime/binder/binder.h"

#include <sys/platform/x86.h>

#include "agent/preload/runtime/binder/internal.h"
#include "agent/preload/runtime/binder/late_interpose.h"
#include "agent/preload/runtime/binder/next_symbol.h"
#include "agent/preload/runtime/lab/lab.h"

extern "C" {
// Read by trap_x86_64.S.
FP_HIDDEN uint64_t fp_xsave_size = 512;
FP_HIDDEN FP_HOT_DATA uint32_t fp_xsave_mask = 0;
FP_HIDDEN FP_HOT_DATA uint8_t fp_use_xsave = 0;
FP_HIDDEN FP_HOT_DATA uint8_t fp_binder_on = 0;
FP_HIDDEN FP_HOT_DATA uintptr_t fp_real_dlsym = 0;
FP_HIDDEN FP_HOT_DATA uintptr_t fp_real_dlvsym = 0;
}

namespace fieldprof::rt {
namespace {

// The extended register state the trap's slow half saves: XSAVE of what
// the dynamic linker's lazy binding saves (SSE, AVX, MPX, AVX-512), else
// FXSAVE. No CPUID instruction (a VM exit, ~6 us on a VM): the feature
// bits glibc read at start, and XCR0.
void SetUpRegisterSave() {
  if (!CPU_FEATURE_PRESENT(OSXSAVE)) return;
  uint32_t lo, hi;
  __asm__ __volatile__("xgetbv" : "=a"(lo), "=d"(hi) : "c"(0));
  // The area XSAVE writes for these components ends, in the standard
  // layout, at most where Intel's ends (AMD's is no larger): AVX-512's
  // high ZMM state at 2688 bytes, opmask... at 1152, MPX at 1088, AVX at
  // 832, the legacy area and header at 576.
  size_t size = 576;
  if (lo & (1u << 2)) size = 832;
  if (lo & (3u << 3)) size = 1088;
  if (lo & (7u << 5)) size = 2688;
  fp_xsave_size = size;
  fp_xsave_mask = (1u << 1) | (1u << 2) | (1u << 3) | (1u << 5) | (1u << 6) | (1u << 7);
  fp_use_xsave = 1;
}

void Nothing(void*) {}

}  // namespace

bool BinderStart(const BinderConfig& c) {
  SetUpRegisterSave();
  if (!MapTables()) return false;
  g_binder.seed = c.seed;
  g_binder.allow_modules = c.allow_modules;
  g_binder.deny_modules = c.deny_modules;
  g_binder.system_code = c.system_code;
  g_binder.share_modules = c.share_modules;
  g_binder.debug_log = c.debug_log;
  g_binder.filters = c.allow_modules[0] != 0 || c.deny_modules[0] != 0;
  g_binder.lab = c.lab;
  // Its copy's page stays untouched when there is none (most runs).
  if (c.force[0] != 0) {
    ParseForced(c.force, g_tables->force, sizeof g_tables->force, false, c.debug_log);
  }
  const int forced = g_binder.nforced;
  // Points come on top of k: naming a function to time takes no random
  // choice away (FP_MAX_APIS in all).
  const int points = c.points[0] == 0 ? 0
                                      : ParseForced(c.points, g_tables->points,
                                                    sizeof g_tables->points, true, c.debug_log);
  int k = (c.k > forced ? c.k : forced) + points;
  if (k > FP_MAX_APIS) k = FP_MAX_APIS;
  g_binder.k_random = k > g_binder.nforced ? k - g_binder.nforced : 0;
  // Forced APIs are known by name from the start (dlsym may be the only
  // way they are reached). Otherwise the table is made to the imports'
  // measure by the first BuildTraps.
  if (g_binder.nforced > 0 && !ApiRoom(static_cast<uint32_t>(g_binder.nforced))) return false;
  for (int f = 0; f < g_binder.nforced; ++f) ApiFor(g_binder.forced[f].name_key);
  g_starting = true;
  t_in_binder = 1;
  const bool ok = WithObjects(Nothing, nullptr);
  t_in_binder = 0;
  g_starting = false;
  if (!ok) return false;
  fp_binder_on = 1;  // the caller logs what was trapped (outside its timing)
  return true;
}

void BinderNoticeNewObjects() {
  preload::NextSlotsMayResolve();
  if (!fp_binder_on || t_in_binder) return;
  t_in_binder = 1;
  InterposeLateOnNewObjects();  // before the traps: they skip entries bound to us
  WithObjects(Nothing, nullptr);
  t_in_binder = 0;
  DetourNewObjects();
}

void BinderAfterFork() {
  g_binder.lock = 0;
  t_in_binder = 0;
}

BinderStats GetBinderStats() {
  return {static_cast<uint64_t>(g_binder.nforced),
          g_binder.nobjects,
          g_binder.imports,
          g_binder.first_calls,
          g_binder.apis_called,
          g_binder.evictions,
          g_binder.refused_no_stub};
}

}  // namespace fieldprof::rt
