// Internal contract of the fieldprof runtime, libfieldprof.so: one library,
// loaded into programs with LD_PRELOAD, sharing the program's libc.
//
// Its rooms (CMakeLists.txt lists every file):
// - front/: whether this run is measured: the first look every process
//   takes (consent, the sampling coin; first_look.h), then the rest of the
//   decision (the rate cap, a slot, the load; decide.h); most runs stop
//   there;
// - binder/: in a measured run, a first-call trap on every import one
//   object makes from another (its PLT's GOT entry); at each API's first
//   call the run's choice is made (trap_fast.cc, Choose), and the callers
//   of a chosen API are pointed at its stub (binder.h);
// - hotpath/: the measured calls (stubs_x86_64.S, hotpath.h), the clock,
//   the allocation and I/O counters, the overhead budget;
// - records/: the record written to the spool at exit, before exec and
//   _exit, and in a fork child afresh (record.cc); the live file;
// - stacks/, points/, lab/: stack samples, instrumentation points, lab
//   mode (lab.h);
// - start.cc and companion.h: the constructor, and what the parts around
//   the hot path share.
#ifndef FIELDPROF_AGENT_PRELOAD_RUNTIME_RUNTIME_H_
#define FIELDPROF_AGENT_PRELOAD_RUNTIME_RUNTIME_H_

#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

#define FP_MAX_APIS 8 /* chosen APIs per run (k <= this) */
/* Stubs: the chosen APIs, plus those a run chose and then replaced when an
   API of lower priority was first called later (their data is dropped). */
#define FP_MAX_SLOTS 32
#define FP_CALIBRATION_SLOT FP_MAX_SLOTS /* the extra stub that measures the probe cost */
#define FP_NUM_METRICS 6                 /* wire::Metric 1..6 */
#define FP_MAX_POINT_SERIES 64           /* (tag, from, to) per run (points.cc) */

/* What the constructor decided for this run (decide.h). */
struct FpRunConfig {
  int active;             /* measure; else the runtime stays idle */
  int slot_fd;            /* held for the life of the process (-1: none) */
  double overhead_budget; /* fraction of run time, e.g. 0.01 */
  const char* spool_dir;  /* where the record goes at exit */
  uint64_t spool_cap_bytes;
  const char* debug_log; /* FIELDPROF_DEBUG: diagnostics file, or 0 */
};

/* One chosen API, bound to the stub of its slot (its function: fp_real). */
struct FpApi {
  const char* module;   /* soname of the defining object */
  const char* build_id; /* hex GNU build id, or "unknown" */
  const char* symbol;
};

#ifdef __cplusplus
}
#endif

#endif /* FIELDPROF_AGENT_PRELOAD_RUNTIME_RUNTIME_H_ */
