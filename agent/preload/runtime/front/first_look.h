// The first look at a run, in the constructor of every process the runtime
// is loaded into: is there consent, and is this run sampled? Most runs stop
// here, so it costs what it must and no more: a settings file read with
// three raw system calls into a stack buffer, the environment and the
// kernel's per-exec random bytes read from the process's initial stack. No
// libc call (each first call of a libc function costs page faults: ~10 us
// each on the machines measured, docs/benchmarks-history.md), no page of ours
// written, no floating point (built with -mgeneral-regs-only).
//
// Only a run that may be measured goes on to DecideRun (decide.h), which
// reads the settings in full.
#ifndef FIELDPROF_AGENT_PRELOAD_RUNTIME_FRONT_FIRST_LOOK_H_
#define FIELDPROF_AGENT_PRELOAD_RUNTIME_FRONT_FIRST_LOOK_H_

#include <cstdint>

namespace fieldprof::rt {

enum class FirstLook {
  kOff,         // no consent, no settings, or settings that are not valid
  kNotSampled,  // consent, but this run is not among the sampled ones
  kGoOn,        // sampled, or an explicit run: decide in full
};

// `envp` as the dynamic linker passes it to constructors.
// The settings file's bytes as the first look read them, for the decision
// to parse instead of reading the file again: len is -1 unless the whole
// file was read (an explicit run skips the file; a longer one is re-read).
struct SettingsText {
  char bytes[2048];
  int len = -1;
};

FirstLook LookAtRun(char** envp, SettingsText* text = nullptr);

// "0.0625", "1", "1e-3", ... as a fraction of 2^32 (4294967296 = 1), for
// numbers in [0, 1]; false for anything else. Shared with the tests.
bool ParseFractionQ32(const char* s, const char* end, uint64_t* q32);

// The default sample_fraction (common/settings/runtime_settings.h says the same).
inline constexpr uint64_t kDefaultSampleQ32 = uint64_t{1} << 28;  // 1/16

}  // namespace fieldprof::rt

#endif  // FIELDPROF_AGENT_PRELOAD_RUNTIME_FRONT_FIRST_LOOK_H_
