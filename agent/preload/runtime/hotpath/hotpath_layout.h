/* Byte offsets of the hot path's data, for the assembly fast path
 * (stubs_x86_64.S). Plain preprocessor definitions so the assembler can
 * read them; hotpath.cc checks every one against the C++ structures with
 * static_assert, so a change of layout fails the build instead of the
 * program. */
#ifndef FIELDPROF_AGENT_PRELOAD_RUNTIME_HOTPATH_HOTPATH_LAYOUT_H_
#define FIELDPROF_AGENT_PRELOAD_RUNTIME_HOTPATH_HOTPATH_LAYOUT_H_

/* runtime.h's FP_CALIBRATION_SLOT, for the assembler */
#define FP_PROBE_SLOT 32

/* ThreadState (thread-local) */
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
#define FP_E_SLOT 24 /* and the flags in the next 4 bytes: one word */

/* Slab: calls[slot], and ticks[slot][FP_TICK_TABLE] */
#define FP_SLAB_CALLS 599040
#define FP_SLAB_TICKS 599552
#define FP_TICK_TABLE 1024
#define FP_TICK_SHIFT 10 /* log2 FP_TICK_TABLE */

/* Globals: the field the fast path reads comes first */
#define FP_G_VDSO 0
#define FP_G_CALIBRATION_LAST 24

/* The stubs: fp_stubs + FP_STUB_SIZE * slot */
#define FP_STUB_SIZE 32

#endif /* FIELDPROF_AGENT_PRELOAD_RUNTIME_HOTPATH_HOTPATH_LAYOUT_H_ */
