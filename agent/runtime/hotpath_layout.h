/* Byte offsets of the hot path's data, for the assembly fast path
 * (stubs_x86_64.S). Plain preprocessor definitions so the assembler can
 * read them; hotpath.cc checks every one against the C++ structures with
 * static_assert, so a change of layout fails the build instead of the
 * program. */
#ifndef FIELDPROF_AGENT_RUNTIME_HOTPATH_LAYOUT_H_
#define FIELDPROF_AGENT_RUNTIME_HOTPATH_LAYOUT_H_

/* runtime.h's FP_CALIBRATION_SLOT, for the assembler */
#define FP_PROBE_SLOT 8

/* ThreadState (thread-local) */
#define FP_TS_ALLOC_BYTES 0
#define FP_TS_ALLOC_COUNT 8
#define FP_TS_FILE_IO 16
#define FP_TS_SOCK_IO 24
#define FP_TS_SS 32
#define FP_TS_SLAB_P 48

/* ShadowStack and its Entry */
#define FP_SS_DEPTH 0
#define FP_SS_NRING 4
#define FP_SS_RING_TICKS 8
#define FP_SS_RING_SLOT 1032
#define FP_RING 128
#define FP_SS_E 1160
#define FP_SHADOW_DEPTH 32
#define FP_E_SIZE 72 /* the assembly scales by 9 * 8 */
#define FP_E_RET_ADDR 0
#define FP_E_RET_SLOT 8
#define FP_E_T0 16
#define FP_E_ALLOC_BYTES0 24
#define FP_E_ALLOC_COUNT0 32
#define FP_E_FILE0 40
#define FP_E_SOCK0 48
#define FP_E_CHILD_ALLOC 56
#define FP_E_SLOT 64

/* Globals: the fields the fast path reads come first */
#define FP_G_VDSO 0
#define FP_G_NS_PER_TICK 8
#define FP_G_PROBE_TICKS 16
#define FP_G_CALIBRATION_LAST 24

/* Slab: h[api][metric], then calls[api], then quiet[api] */
#define FP_SLAB_API_STRIDE 18720 /* FP_NUM_METRICS histograms */
#define FP_SLAB_CALLS 149760
#define FP_SLAB_QUIET 149824

/* Histogram (common/histogram.h) and its buckets */
#define FP_H_ZERO 0
#define FP_H_BUCKETS 16
#define FP_H_BUCKET_SIZE 48 /* the assembly scales by 3 * 16 */
#define FP_HB_COUNT 0
#define FP_HB_SUM 16
#define FP_HB_SUM_SQ 32
#define FP_H_NOT_MIN 3088
#define FP_H_MAX 3096
#define FP_H_SATURATED 3104

#endif /* FIELDPROF_AGENT_RUNTIME_HOTPATH_LAYOUT_H_ */
