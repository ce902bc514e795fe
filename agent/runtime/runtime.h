// Internal contract of the fieldprof runtime: the rtld-audit module
// (audit.cc, libfieldprof_audit.so, loaded with LD_AUDIT) and the preloaded
// companion (companion.cc + hotpath.cc + stubs, libfieldprof.so, loaded with
// LD_PRELOAD).
//
// Why two libraries: binding is decided in the auditor's la_symbind64, which
// lets every symbol that was not chosen be bound directly to its function
// (no trampoline, no cost) and binds only the chosen ones to a stub. The
// auditor lives in its own link namespace with its own libc, so everything
// that must share the program's libc (allocation and I/O counters, the
// per-thread shadow stacks, the record written at exit) is in the companion.
//
// The auditor calls a few functions of the companion, found in its dynamic
// symbol table. They may run before the companion is relocated, so they
// only store into the companion's own (hidden) variables: no calls, no
// relocated data. Strings passed in are owned by the auditor and live as
// long as the process.
#ifndef FIELDPROF_AGENT_RUNTIME_RUNTIME_H_
#define FIELDPROF_AGENT_RUNTIME_RUNTIME_H_

#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

#define FP_MAX_APIS 8         /* chosen APIs per run (k <= this) */
#define FP_CALIBRATION_SLOT 8 /* the extra stub used to measure the probe cost */
#define FP_NUM_METRICS 6      /* wire::Metric 1..6 */

/* What the auditor decided for this run. */
struct FpRunConfig {
  int active;             /* measure; else the companion stays idle */
  int refused;            /* consent given but refused: 1 = no free slot, 2 = load too high */
  int slot_fd;            /* held for the life of the process (-1: none) */
  double overhead_budget; /* fraction of run time, e.g. 0.01 */
  const char* spool_dir;  /* where the record goes at exit */
  uint64_t spool_cap_bytes;
  const char* debug_log; /* FIELDPROF_DEBUG: diagnostics file, or 0 */
};

/* One chosen API, bound to the stub of `slot`. */
struct FpApi {
  const char* module;   /* soname of the defining object */
  const char* build_id; /* hex GNU build id, or "unknown" */
  const char* symbol;
  uintptr_t real; /* the function */
};

/* Names exported by the companion for the auditor. */
#define FP_SYM_CONFIGURE "fieldprof_rt_configure"
#define FP_SYM_BIND "fieldprof_rt_bind"
#define FP_SYM_RETIRE "fieldprof_rt_retire"
#define FP_SYM_ADD_GOT "fieldprof_rt_add_got"
#define FP_SYM_MEASURING "fieldprof_rt_measuring"
typedef void (*FpConfigureFn)(const struct FpRunConfig*);
/* Returns the stub address callers should be bound to. */
typedef uintptr_t (*FpBindFn)(int slot, const struct FpApi*);
/* Stop measuring a slot (its symbol was replaced in the choice after a dlopen). */
typedef void (*FpRetireFn)(int slot);
/* A caller's GOT entry that the dynamic linker binds (or has bound) to the
   stub of `slot`: once the slot stops measuring, the companion points it at
   the API itself, so that calls no longer pass through the stub. */
typedef void (*FpAddGotFn)(int slot, uintptr_t* got);
/* Whether `slot` still measures (0 once its overhead budget is spent). */
typedef int (*FpMeasuringFn)(int slot);

#ifdef __cplusplus
}
#endif

#endif /* FIELDPROF_AGENT_RUNTIME_RUNTIME_H_ */
