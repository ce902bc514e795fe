// The provider of fieldprof_bench_tp.h, built into points_benchmark.
#define LTTNG_UST_TRACEPOINT_CREATE_PROBES
#define LTTNG_UST_TRACEPOINT_DEFINE
#include "fieldprof_bench_tp.h"
