// The lttng-ust tracepoint of points_benchmark's anchor: one
// event with one integer, as FP_POINT_V carries.
#undef LTTNG_UST_TRACEPOINT_PROVIDER
#define LTTNG_UST_TRACEPOINT_PROVIDER fieldprof_bench

#undef LTTNG_UST_TRACEPOINT_INCLUDE
#define LTTNG_UST_TRACEPOINT_INCLUDE "fieldprof_bench_tp.h"

#if !defined(FIELDPROF_BENCH_TP_H_) || defined(LTTNG_UST_TRACEPOINT_HEADER_MULTI_READ)
#define FIELDPROF_BENCH_TP_H_

#include <lttng/tracepoint.h>

LTTNG_UST_TRACEPOINT_EVENT(fieldprof_bench, tick, LTTNG_UST_TP_ARGS(uint64_t, x),
                           LTTNG_UST_TP_FIELDS(lttng_ust_field_integer(uint64_t, x, x)))

#endif  // FIELDPROF_BENCH_TP_H_

#include <lttng/tracepoint-event.h>
