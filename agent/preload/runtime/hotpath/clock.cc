// The measured run's clock: which one, its rate, and the probe's own cost
// (clock.h).
#include "agent/preload/runtime/hotpath/clock.h"

#include <elf.h>
#include <string.h>
#include <sys/auxv.h>
#include <sys/platform/x86.h>
#include <time.h>

#include <algorithm>
#include <atomic>

#include "agent/preload/runtime/front/decide.h"
#include "agent/preload/runtime/hotpath/hotpath.h"
#include "agent/preload/runtime/records/live_file.h"
#include "agent/preload/runtime/sys.h"
#include "agent/preload/runtime/text.h"

namespace fieldprof::rt {
namespace {

// From the CPUID bits glibc read at start: the CPUID instruction itself
// is a VM exit (~6 us on a VM).
bool InvariantTsc() { return CPU_FEATURE_PRESENT(INVARIANT_TSC); }

// The vDSO's clock_gettime, found in the vDSO's own symbol table (no
// dlopen or dlsym). nullptr if absent.
using GettimeFn = int (*)(clockid_t, timespec*);
GettimeFn FindVdsoClockGettime() {
  const uintptr_t base = getauxval(AT_SYSINFO_EHDR);
  if (base == 0) return nullptr;
  const auto* eh = reinterpret_cast<const Elf64_Ehdr*>(base);
  if (memcmp(eh->e_ident, ELFMAG, SELFMAG) != 0 || eh->e_ident[EI_CLASS] != ELFCLASS64 ||
      eh->e_shoff == 0 || eh->e_shentsize != sizeof(Elf64_Shdr)) {
    return nullptr;
  }
  // The vDSO is mapped whole from file offset 0: offsets are addresses.
  const auto* ph = reinterpret_cast<const Elf64_Phdr*>(base + eh->e_phoff);
  intptr_t bias = 0;
  bool loaded = false;
  for (int i = 0; i < eh->e_phnum && !loaded; ++i) {
    if (ph[i].p_type != PT_LOAD) continue;
    bias = static_cast<intptr_t>(base + ph[i].p_offset - ph[i].p_vaddr);
    loaded = true;
  }
  if (!loaded) return nullptr;
  const auto* sh = reinterpret_cast<const Elf64_Shdr*>(base + eh->e_shoff);
  for (int i = 0; i < eh->e_shnum; ++i) {
    if (sh[i].sh_type != SHT_DYNSYM || sh[i].sh_entsize != sizeof(Elf64_Sym) ||
        sh[i].sh_link >= eh->e_shnum) {
      continue;
    }
    const auto* sym = reinterpret_cast<const Elf64_Sym*>(base + sh[i].sh_offset);
    const char* str = reinterpret_cast<const char*>(base + sh[sh[i].sh_link].sh_offset);
    const size_t n = sh[i].sh_size / sizeof(Elf64_Sym);
    for (size_t j = 0; j < n; ++j) {
      if (ELF64_ST_TYPE(sym[j].st_info) != STT_FUNC || sym[j].st_shndx == SHN_UNDEF) continue;
      if (strcmp(str + sym[j].st_name, "__vdso_clock_gettime") != 0) continue;
      return reinterpret_cast<GettimeFn>(bias + static_cast<intptr_t>(sym[j].st_value));
    }
  }
  return nullptr;
}

// The vDSO clock for the hot path, if it answers without a system call:
// the quickest of 32 back-to-back readings must differ by under 200 ns
// (a vDSO reading takes tens of ns, a system call several hundred).
GettimeFn UsableVdsoClock() {
  GettimeFn f = FindVdsoClockGettime();
  if (f == nullptr) return nullptr;
  int64_t best = INT64_MAX;
  timespec a, b;
  for (int i = 0; i < 32; ++i) {
    if (f(CLOCK_MONOTONIC, &a) != 0 || f(CLOCK_MONOTONIC, &b) != 0) return nullptr;
    const int64_t d = (int64_t{b.tv_sec} - a.tv_sec) * 1000000000 + (b.tv_nsec - a.tv_nsec);
    best = std::min(best, d);
  }
  return best >= 0 && best < 200 ? f : nullptr;
}

// CLOCK_MONOTONIC (by system call: rare, and no vDSO page to fault in) and
// where it falls in ticks: between `before` and `after`. The narrowest of
// up to three tries: a reading that was preempted, or a process's first
// and slow system call, widens the bracket instead of skewing the rate.
struct ClockReading {
  uint64_t before, after;
  int64_t mono_ns;
};
constexpr uint64_t kNarrowTicks = 4096;  // ~1-2 us of TSC, 4 us of the vDSO clock
ClockReading ReadClock() {
  ClockReading best{0, ~uint64_t{0}, 0};
  for (int i = 0; i < 3 && best.after - best.before >= kNarrowTicks; ++i) {
    ClockReading r;
    r.before = Ticks();
    r.mono_ns = sys::MonoNs();
    r.after = Ticks();
    if (r.after - r.before < best.after - best.before) best = r;
  }
  return best;
}

// How far the machine's rate may be from the truth: what a duration may be
// off by.
constexpr uint64_t kRateTolerance = 100;  // 1 / this

extern "C" __attribute__((noinline)) void fp_empty_function() { __asm__ __volatile__(""); }

FP_HOT_DATA std::atomic<int> calibrating{0};

// The machine's rate does not hold on this run's clock: nothing timed may
// be reported. Measuring stops (the stubs go straight through from here)
// and the record is not written.
void Refute(uint64_t dns, uint64_t ticks) {
  g.rate_refuted = 1;
  for (auto& m : fp_measuring) m = 0;
  DebugLine(g.config.debug_log,
            "clock: tsc_hz in the settings gives %llu ns per 2^32 ticks, this run's clock %llu "
            "ns over %llu ticks: not measuring, no record",
            static_cast<unsigned long long>(g.machine_ns_per_tick_q32),
            static_cast<unsigned long long>(dns), static_cast<unsigned long long>(ticks));
}

}  // namespace

bool StartClock(char** envp, uint64_t tsc_hz) {
  const char* clock = sys::Env(envp, "FIELDPROF_CLOCK");
  const bool tsc = InvariantTsc() && (clock == nullptr || !Eq(clock, "vdso"));
  if (!tsc) {
    g.vdso_gettime = UsableVdsoClock();
    if (g.vdso_gettime == nullptr) return false;
  }
  const ClockReading r = ReadClock();
  g.rate_tsc0 = r.before;
  g.rate_tsc0_after = r.after;
  g.rate_mono0_ns = r.mono_ns;
  g.tsc0 = r.after;
  g.mono0_ns = r.mono_ns;
  if (tsc && tsc_hz != 0) {
    g.machine_ns_per_tick_q32 =
        static_cast<uint64_t>((static_cast<unsigned __int128>(1000000000) << 32) / tsc_hz);
    g.ns_per_tick_q32 = g.machine_ns_per_tick_q32;
    __atomic_store_n(&g.calibrated, 1, __ATOMIC_RELEASE);
  }
  return true;
}

bool RateRefuted() { return g.rate_refuted != 0; }

// The rate over the span since start: first when a duration needs
// converting (a thread's first batch, a nested call, the record), then
// again each time the span has grown fourfold, so starting the program is
// never delayed, early conversions are close and later ones closer. With
// the machine's rate, the same readings check it instead. Without the vDSO
// clock, ticks are ns and the rate ~1.
void CalibrateNow() {
  if (g.rate_tsc0 == 0) return;  // before Start
  int expected = 0;
  if (!calibrating.compare_exchange_strong(expected, 1)) return;
  const ClockReading now = ReadClock();
  const int64_t dns = now.mono_ns - g.rate_mono0_ns;
  if (dns > 0 && now.before > g.rate_tsc0_after) {
    // The span in ticks lies within [lo, hi].
    const uint64_t lo = now.before - g.rate_tsc0_after, hi = now.after - g.rate_tsc0;
    const uint64_t mid = lo + (hi - lo) / 2;
    const unsigned __int128 dns_q32 = static_cast<unsigned __int128>(dns) << 32;
    if (g.machine_ns_per_tick_q32 != 0) {
      const uint64_t slowest = static_cast<uint64_t>(dns_q32 / hi);
      const uint64_t fastest = static_cast<uint64_t>(dns_q32 / lo);
      const uint64_t m = g.machine_ns_per_tick_q32;
      if (!g.rate_refuted &&
          (m < slowest - slowest / kRateTolerance || m > fastest + fastest / kRateTolerance)) {
        Refute(static_cast<uint64_t>(dns), mid);
      }
    } else {
      g.ns_per_tick_q32 = static_cast<uint64_t>(dns_q32 / mid);
      __atomic_store_n(&g.calibrated, 1, __ATOMIC_RELEASE);
    }
    g.rate_span_ticks = mid;
    LiveNoteClock();
  }
  calibrating.store(0);
}

void ProbeDurations(void (*probe)(), uint64_t (&out)[kProbeCalls]) {
  for (uint64_t& p : out) {
    g.calibration_last_ticks = ~uint64_t{0};
    probe();
    p = g.calibration_last_ticks;
  }
  std::sort(out, out + kProbeCalls);
}

void CalibrateProbe() {
  fp_real[FP_CALIBRATION_SLOT] = reinterpret_cast<uintptr_t>(&fp_empty_function);
  fp_measuring[FP_CALIBRATION_SLOT] = 1;
  auto* probe = reinterpret_cast<void (*)()>(StubAddress(FP_CALIBRATION_SLOT));
  // The median of 64: what the probe typically adds to a measured duration
  // (the least would leave the typical excess in every duration: ~10 ns
  // with the vDSO clock).
  constexpr int kProbes = kProbeCalls;
  uint64_t probes[kProbes];
  ProbeDurations(probe, probes);
  uint64_t typical = probes[kProbes / 2];
  // The resolution: the spread of the probe's own cost (its 10th to 90th
  // percentile), and at least the least step between two clock readings.
  uint64_t step = ~uint64_t{0};
  for (int i = 0; i < 16; ++i) {
    const uint64_t a = Ticks(), b = Ticks();
    if (b > a) step = std::min(step, b - a);
  }
  const uint64_t spread = probes[kProbes * 9 / 10] - probes[kProbes / 10];
  g.resolution_ticks = std::max(step == ~uint64_t{0} ? 1 : step, spread);
  // A run of probe calls against the same run of direct calls, best of 4.
  uint64_t added = ~uint64_t{0};
  for (int round = 0; round < 4; ++round) {
    constexpr int kRun = 16;
    const uint64_t t0 = Ticks();
    for (int i = 0; i < kRun; ++i) probe();
    const uint64_t t1 = Ticks();
    for (int i = 0; i < kRun; ++i) fp_empty_function();
    const uint64_t t2 = Ticks();
    const uint64_t with = t1 - t0, without = t2 - t1;
    added = std::min(added, with > without ? (with - without) / kRun : 0);
  }
  fp_measuring[FP_CALIBRATION_SLOT] = 0;
  if (typical == ~uint64_t{0}) typical = 0;  // no probe measured (no shadow stack left)
  g.call_cost_ticks = std::max(added, 2 * typical);
  g.probe_ticks = typical;  // Start logs both (outside its timing)
}

}  // namespace fieldprof::rt
