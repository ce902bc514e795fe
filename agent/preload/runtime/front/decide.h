// Whether this run is measured, decided once in the constructor, cheapest
// test first so that a run that is not measured pays as little as
// possible:
//   1. consent: the settings file says `consent = yes` (or FIELDPROF_RUN=1,
//      an explicit `fieldprof run`, whose FIELDPROF_* options then apply);
//   2. sampling: a field run is measured with probability sample_fraction;
//   (1 and 2 are first_look.h, without libc; what follows only for runs
//   that pass them)
//   3. the system load (two system calls, no file);
//   4. the machine-wide rate cap: at most max_runs_per_minute measured field
//      runs, kept in <slot_dir>/rate;
//   5. a free machine-wide slot (<slot_dir>/slot-N, flock'ed for the life
//      of the process).
// Explicit runs skip 2 and 3. Refusals at 3-5 add one to the spool's run
// counters (common/spool/run_counters.h); nothing else is written.
//
// DecideRun runs in the constructor; it makes its system calls itself
// (sys.h), calls no libc but for the debug log, and never prints.
#ifndef FIELDPROF_AGENT_PRELOAD_RUNTIME_FRONT_DECIDE_H_
#define FIELDPROF_AGENT_PRELOAD_RUNTIME_FRONT_DECIDE_H_

#include <stdarg.h>

#include <cstdint>

#include "agent/preload/runtime/front/first_look.h"
#include "common/spool/run_counters.h"

namespace fieldprof::rt {

// Plain data, zero in .bss until a run is decided on: SetDefaults writes
// only the fields it sets, so a run that is not measured touches none of
// it. Page-aligned, with what every measured run writes first: one page
// touched, not two (force and the module lists are rarely set).
struct alignas(4096) RunSettings {
  char** envp;  // the environment at start: where the settings file is (ConsentStands)
  bool consent;
  bool explicit_run;  // FIELDPROF_RUN=1
  bool have_seed;
  int k;
  int slots;
  double max_load_per_cpu;
  double overhead_budget;
  double sample_fraction;       // for the debug log: first_look.h samples
  int64_t max_runs_per_minute;  // 0: no cap
  int stack_hz;                 // stack samples a CPU second (stack_samples.h); 0: none
  uint64_t spool_cap_bytes;
  uint64_t seed;
  uint64_t tsc_hz;  // the machine's TSC rate (clock.h); 0: none
  char spool_dir[512];
  char slot_dir[512];
  char live_dir[512];        // empty: /dev/shm/fieldprof-<uid> (live_file.h); "off": none
  char debug_log[512];       // FIELDPROF_DEBUG
  char allow_modules[1024];  // comma-separated sonames; empty = all
  char deny_modules[1024];
  char force[1024];   // "sym" or "module:sym", comma-separated
  char points[1024];  // "module:function", comma-separated (docs/points.md)
  // The agent's list of the system's code (common/system/system_code_list.h):
  // APIs are chosen at random only in the modules it names.
  char system_code[512];
  char share_modules[1024];  // the volunteer's own modules shared by name
};

// The defaults common/settings/runtime_settings.h documents.
void SetDefaults(RunSettings* s);

enum class Verdict { kOff, kNotSampled, kRefusedRate, kRefusedSlot, kRefusedLoad, kMeasure };

struct RunDecision {
  Verdict verdict = Verdict::kOff;
  int slot_fd = -1;  // held while measuring
};

// For a run the first look let through (first_look.h): fills `s` (owned by
// the caller; static storage in the companion) and decides 3-5. Refusals
// are counted in the spool's counters.
// `text`: the settings file as the first look read it, if it did (parsed
// in place: its bytes are changed).
// `envp`: the environment as the constructor got it (read without getenv).
RunDecision DecideRun(RunSettings* s, SettingsText* text, char** envp);

// Whether the settings file still says consent = yes (always, in an
// explicit run): a run measured from before `fieldprof optout` writes no
// record after it. Reads the file again.
bool ConsentStands(const RunSettings& s);
// The same for this process's run (start.cc keeps its settings).
bool RunConsentStands();
// This process's run's settings (start.cc), once it is measured.
const RunSettings& CurrentRunSettings();

// Adds one to a run counter in <spool_dir>/.counters (creating the spool
// directory if needed). Best effort, never waits more than ~5 ms.
void CountRun(const char* spool_dir, FpRunCounter c);

// Appends a line to the FIELDPROF_DEBUG file, if any.
void DebugLine(const char* path, const char* fmt, ...) __attribute__((format(printf, 2, 3)));
void VDebugLine(const char* path, const char* fmt, va_list ap);

// mkdir -p; the last component gets `mode` (exactly, whatever the umask).
void MakeDirs(const char* dir, unsigned mode);

}  // namespace fieldprof::rt

#endif  // FIELDPROF_AGENT_PRELOAD_RUNTIME_FRONT_DECIDE_H_
