// Entry stubs and the return path of the fieldprof runtime (x86-64 SysV).
//
// A chosen API's callers are bound to fp_stub_N instead of the function.
// The stub keeps the caller's return address on the thread's shadow stack
// and writes fp_return_point into its stack slot; then it pops that slot
// and calls the function, so the call pushes fp_return_point into the very
// same slot: stack arguments sit where the function expects them, and every
// return is paired with its call, so the CPU predicts all of them (a
// planted return address would cost a mispredicted return per call).
// fp_return_point takes the caller's return address from the shadow stack,
// pushes it back into the slot and returns to it.
//
// The common case runs here without a call or a register save beyond the
// red zone: a thread with its shadow stack (and so its slab), the TSC as
// the clock, the shadow stack's top entry live, and on return an outermost
// call that allocated nothing and did no I/O, with room in the ring.
// Everything else (first call of a thread, nested calls, entries that
// longjmp or an unwinder left, allocation and I/O metrics, the full ring,
// calibration, the overhead budget, the vDSO clock) goes to
// fp_enter/fp_exit in hotpath.cc, which keep the same data the same way.
// The offsets come from hotpath_layout.h, checked there against the C++.
//
// Any signature works: stack arguments are never moved, varargs keep %al,
// struct returns keep %rdi/%rax, and neither path touches a floating-point
// register: fp_enter/fp_exit are built with -mgeneral-regs-only, the
// return path saves %xmm0/%xmm1 around fp_exit for its slow paths, and
// those save the whole x87/SSE state around anything that calls libc.
#include "agent/preload/runtime/hotpath/hotpath_layout.h"
#include "agent/preload/runtime/hotpath/xstate_x86_64.inc"

#define G _ZN9fieldprof2rt1gE
#define T_STATE _ZN9fieldprof2rt7t_stateE

        .text

        .globl  fp_stub_common
        .hidden fp_stub_common
        .type   fp_stub_common, @function
fp_stub_common:
        // %r11 = slot. On entry (%rsp) is the return address, and %rsp+8
        // is 16-byte aligned. Nothing is called on the fast path, so the
        // red zone below %rsp holds the registers it needs.
        .cfi_startproc
        movq    %rax, -8(%rsp)
        movq    %rdx, -16(%rsp)
        movq    %rcx, -24(%rsp)
        cmpq    $0, G+FP_G_VDSO(%rip)
        jne     .Lenter_slow
        movq    T_STATE@gottpoff(%rip), %rax
        movq    %fs:FP_TS_SS(%rax), %rcx        // the shadow stack
        testq   %rcx, %rcx
        jz      .Lenter_slow
        movl    FP_SS_DEPTH(%rcx), %edx
        testl   %edx, %edx
        jnz     .Lenter_nested
        leaq    FP_SS_E(%rcx), %rax             // &e[0]
.Lenter_push:
        // %rcx = shadow stack, %edx = depth d, %rax = &e[d]. The thread's
        // counters are not read: they are taken into the entry only once
        // they are about to change (SnapEntries), and flags 0 says not yet.
        movq    $-1, FP_E_RET_SLOT(%rax)        // FillingSlot: live, matches none
        incl    %edx
        movl    %edx, FP_SS_DEPTH(%rcx)         // reserved
        movq    (%rsp), %rdx
        movq    %rdx, FP_E_RET_ADDR(%rax)
        movq    %r11, FP_E_SLOT(%rax)           // the slot, and flags 0
        leaq    fp_return_point(%rip), %rdx
        movq    %rdx, (%rsp)
        movq    %rsp, FP_E_RET_SLOT(%rax)
        leaq    fp_real(%rip), %rdx
        movq    (%rdx,%r11,8), %r11             // the API
        movq    %rax, %rcx
        rdtsc
        shlq    $32, %rdx
        orq     %rdx, %rax
        movq    %rax, FP_E_T0(%rcx)
        movq    -8(%rsp), %rax
        movq    -16(%rsp), %rdx
        movq    -24(%rsp), %rcx
.Lcall:
        // Measured. The slot at (%rsp) holds fp_return_point, and the
        // caller's return address is on the shadow stack. Between the lea
        // and the call the slot lies in the red zone, which signal delivery
        // never touches.
        leaq    8(%rsp), %rsp
        .cfi_endproc                    // unwinders stop at fp_return_point,
                                        // as at any frame without CFI
        call    *%r11
        .globl  fp_return_point
        .hidden fp_return_point
fp_return_point:
        // The function returned: %rsp is the caller's, 16-byte aligned, and
        // -8(%rsp) the return slot, which holds fp_return_point until the
        // entry is off the shadow stack (see DropDeadEntries). %rcx, %rsi,
        // %rdi, %r8-%r11 are the caller's to lose; %rax and %rdx wait in
        // the red zone. Only an outermost call (depth 1, so e[0]) that left
        // the counters alone is finished here: a short one is counted at its
        // tick value in the slab (Slab::ticks), a longer one goes into the
        // ring, and the ring's flush counts it.
        movq    %rax, -16(%rsp)
        movq    %rdx, -24(%rsp)
        rdtsc
        shlq    $32, %rdx
        orq     %rax, %rdx                      // %rdx = t1, for fp_exit too
        movq    T_STATE@gottpoff(%rip), %rsi
        movq    %fs:FP_TS_SS(%rsi), %rcx
        cmpl    $1, FP_SS_DEPTH(%rcx)
        jne     .Lexit_slow                     // nested, or entries left above
        leaq    -8(%rsp), %rax
        cmpq    %rax, FP_SS_E+FP_E_RET_SLOT(%rcx)
        jne     .Lexit_slow                     // not this call's entry
        movq    FP_SS_E+FP_E_SLOT(%rcx), %r9    // the slot, and the flags above it
        cmpq    $FP_PROBE_SLOT, %r9
        jae     .Lexit_special                  // counters moved, vDSO, or the probe
        movq    %rdx, %rax
        subq    FP_SS_E+FP_E_T0(%rcx), %rax     // ticks
        cmpq    $FP_TICK_TABLE, %rax
        jae     .Lexit_ring                     // a longer call
        // A short call: one more at its tick value in the slab's table (the
        // thread has a slab: it took it with its shadow stack), and one
        // more call, with the overhead budget's turn every 1024.
        movq    %fs:FP_TS_SLAB_P(%rsi), %r10
        movq    FP_SLAB_CALLS(%r10,%r9,8), %r11
        addq    $1, %r11
        testl   $1023, %r11d
        jz      .Lexit_slow
        movq    %r11, FP_SLAB_CALLS(%r10,%r9,8)
        shlq    $FP_TICK_SHIFT, %r9
        addq    %r9, %rax
        addq    $1, FP_SLAB_TICKS(%r10,%rax,8)
        movq    FP_SS_E+FP_E_RET_ADDR(%rcx), %r11  // before the entry is given up
        movl    $0, FP_SS_DEPTH(%rcx)
        movq    -16(%rsp), %rax
        movq    -24(%rsp), %rdx
        pushq   %r11                            // as at .Lexit_return
        ret
.Lexit_ring:
        // A longer call: its raw ticks into the thread's ring, which the
        // call that fills it puts into the histograms.
        movl    FP_SS_NRING(%rcx), %esi
        cmpl    $FP_RING - 1, %esi
        jae     .Lexit_slow                     // this one fills the ring
        // Committed. Signal handlers' measured calls meanwhile are nested,
        // and nested calls never touch the ring.
        movq    %rax, FP_SS_RING_TICKS(%rcx,%rsi,8)
        movb    %r9b, FP_SS_RING_SLOT(%rcx,%rsi)
        addl    $1, %esi
        movl    %esi, FP_SS_NRING(%rcx)         // after the entry it counts
        movq    FP_SS_E+FP_E_RET_ADDR(%rcx), %r11  // before the entry is given up
        movl    $0, FP_SS_DEPTH(%rcx)
.Lexit_return:
        // %r11 = the caller's return address, the entry given up.
        movq    -16(%rsp), %rax
        movq    -24(%rsp), %rdx
        pushq   %r11                            // back into the slot; the return
        ret                                     // predictor expects just this address
.Lexit_special:
        jne     .Lexit_slow                     // (the flags of the cmpq above)
        // The probe (CalibrateProbe): the raw duration, nothing recorded.
        subq    FP_SS_E+FP_E_T0(%rcx), %rdx
        movq    %rdx, G+FP_G_CALIBRATION_LAST(%rip)
        movq    FP_SS_E+FP_E_RET_ADDR(%rcx), %r11
        movl    $0, FP_SS_DEPTH(%rcx)
        jmp     .Lexit_return

.Lexit_slow:
        // %rdx = t1 (fp_exit reads the clock itself when it is the vDSO's);
        // the return values back in place for fp_exit's frame.
        //
        // Unwind rules from here: the frame is the stub's, returning to
        // the caller through the return slot. The slot holds
        // fp_return_point, which has none (an unwinder stops there), but
        // while fp_exit hands a points pass's span to the recorder it holds
        // the caller's address (LabPointSpan), so a stack taken then goes
        // on into the caller.
        .cfi_startproc
        .cfi_def_cfa_offset 0
        movq    %rdx, %rsi
        movq    -16(%rsp), %rax
        movq    -24(%rsp), %rdx
        // The save area stops below the return slot.
        subq    $64, %rsp
        .cfi_def_cfa_offset 64
        movq    %rax, 0(%rsp)
        movq    %rdx, 8(%rsp)
        movdqu  %xmm0, 16(%rsp)
        movdqu  %xmm1, 32(%rsp)
        leaq    64(%rsp), %rdi          // %rsp as the caller will see it
        call    fp_exit                 // -> %rax = the caller's return address
        movq    %rax, %r11
        movq    0(%rsp), %rax
        movq    8(%rsp), %rdx
        movdqu  16(%rsp), %xmm0
        movdqu  32(%rsp), %xmm1
        addq    $64, %rsp
        .cfi_def_cfa_offset 0
        pushq   %r11
        .cfi_def_cfa_offset 8
        ret
        .cfi_endproc

.Lenter_nested:
        // %edx = depth > 0: push on top if the topmost entry is live (its
        // return slot above this call's, or still holding fp_return_point);
        // otherwise fp_enter drops dead entries first.
        cmpl    $FP_SHADOW_DEPTH, %edx
        jae     .Lenter_slow
        leal    -1(%rdx), %eax
        leaq    (%rax,%rax,8), %rax
        movq    FP_SS_E+FP_E_RET_SLOT(%rcx,%rax,8), %rax
        testq   %rax, %rax
        jz      .Lenter_slow                    // restored for an unwinder
        cmpq    %rsp, %rax
        ja      .Lenter_live
        movq    (%rax), %rax
        leaq    fp_return_point(%rip), %rdx
        cmpq    %rdx, %rax
        jne     .Lenter_slow
        movl    FP_SS_DEPTH(%rcx), %edx
.Lenter_live:
        leaq    (%rdx,%rdx,8), %rax
        leaq    FP_SS_E(%rcx,%rax,8), %rax      // &e[d]
        jmp     .Lenter_push
        .size   fp_stub_common, .-fp_stub_common

        // A lab stub (lab.h): %r11 = its slot (kLabSlot0 + the API's lab
        // index). Always the slow entry: fp_enter finds the API, and its
        // return goes through fp_return_point to fp_exit (slot above the
        // probe's), which hands it to LabExit.
        .globl  fp_lab_entry
        .hidden fp_lab_entry
        .type   fp_lab_entry, @function
fp_lab_entry:
        movq    %rax, -8(%rsp)
        movq    %rdx, -16(%rsp)
        movq    %rcx, -24(%rsp)
        .size   fp_lab_entry, .-fp_lab_entry
        // falls through

        .type   fp_enter_slow, @function
fp_enter_slow:
.Lenter_slow:
        .cfi_startproc
        movq    -8(%rsp), %rax
        movq    -16(%rsp), %rdx
        movq    -24(%rsp), %rcx
        subq    $72, %rsp               // 8 registers + pad: %rsp 16-aligned
        .cfi_adjust_cfa_offset 72
        movq    %rdi, 0(%rsp)
        movq    %rsi, 8(%rsp)
        movq    %rdx, 16(%rsp)
        movq    %rcx, 24(%rsp)
        movq    %r8, 32(%rsp)
        movq    %r9, 40(%rsp)
        movq    %rax, 48(%rsp)
        movq    %r10, 56(%rsp)
        movl    %r11d, %edi             // slot
        leaq    72(%rsp), %rsi          // address of the return address
        call    fp_enter                // -> %rax = real function, %rdx = measure?
        movq    %rax, %r11
        testq   %rdx, %rdx              // (the moves and lea below keep the flags)
        movq    0(%rsp), %rdi
        movq    8(%rsp), %rsi
        movq    16(%rsp), %rdx
        movq    24(%rsp), %rcx
        movq    32(%rsp), %r8
        movq    40(%rsp), %r9
        movq    48(%rsp), %rax
        movq    56(%rsp), %r10
        leaq    72(%rsp), %rsp
        .cfi_adjust_cfa_offset -72
        jnz     .Lcall
        jmp     *%r11                   // not measured: a plain tail jump
        .cfi_endproc
        .size   fp_enter_slow, .-fp_enter_slow

// A detour's entry (detour.h): a function's own entry jumped to a thunk
// that left the caller's %r11 at -32(%rsp) and its lab slot in %r11d.
// The function's callers may be compiled knowing which registers it
// leaves alone (GCC's -fipa-ra, for a function in their own module), so
// on the way in and on the way out every register is as the function
// itself would leave it: all general registers are kept here, and on
// return the extended state too (fp_exit may run the points recorder).
        .globl  fp_detour_entry
        .hidden fp_detour_entry
        .type   fp_detour_entry, @function
fp_detour_entry:
        .cfi_startproc
        subq    $88, %rsp               // %rsp 16-aligned; 56(%rsp) holds %r11
        .cfi_adjust_cfa_offset 88
        movq    %rdi, 0(%rsp)
        movq    %rsi, 8(%rsp)
        movq    %rdx, 16(%rsp)
        movq    %rcx, 24(%rsp)
        movq    %r8, 32(%rsp)
        movq    %r9, 40(%rsp)
        movq    %rax, 48(%rsp)
        movq    %r10, 64(%rsp)
        movl    %r11d, %edi             // slot
        leaq    88(%rsp), %rsi          // address of the return address
        call    fp_enter                // -> %rax = the moved copy, %rdx = measure?
        movq    %rax, 72(%rsp)
        testq   %rdx, %rdx              // (the moves and leas below keep the flags)
        movq    0(%rsp), %rdi
        movq    8(%rsp), %rsi
        movq    16(%rsp), %rdx
        movq    24(%rsp), %rcx
        movq    32(%rsp), %r8
        movq    40(%rsp), %r9
        movq    48(%rsp), %rax
        movq    56(%rsp), %r11
        movq    64(%rsp), %r10
        leaq    88(%rsp), %rsp
        .cfi_adjust_cfa_offset -88
        jz      1f
        // Measured: the call pushes fp_detour_return into the return slot.
        // The target waits in the red zone, which signal delivery never
        // touches.
        leaq    8(%rsp), %rsp
        .cfi_endproc
        call    *-24(%rsp)
        .globl  fp_detour_return
        .hidden fp_detour_return
fp_detour_return:
        // The clock first; then every register the function left is kept.
        // Below the return slot (-8): %rax, %rdx, the TSC, then the rest.
        // Unwind rules as at .Lexit_slow (the caller's address is in the
        // return slot while the recorder runs). They start at this label:
        // an unwinder looks a return address up one byte before it, so the
        // measured call's frame, returning here, still finds none. The
        // frame is %rbp's, which libunwind's fast trace follows (with any
        // other register as the frame's base it walks the whole stack the
        // slow way: 2.5 us a stack against 0.2).
        .cfi_startproc
        .cfi_def_cfa_offset 0
        movq    %rax, -16(%rsp)
        movq    %rdx, -24(%rsp)
        rdtsc
        shlq    $32, %rdx
        orq     %rax, %rdx
        movq    %rdx, -32(%rsp)
        movq    %rcx, -40(%rsp)
        movq    %rsi, -48(%rsp)
        movq    %rdi, -56(%rsp)
        movq    %r8, -64(%rsp)
        movq    %r9, -72(%rsp)
        movq    %r10, -80(%rsp)
        movq    %r11, -88(%rsp)
        movq    %rbp, -96(%rsp)
        leaq    -96(%rsp), %rsp         // 16-aligned: the caller's %rsp was
        .cfi_def_cfa_offset 96
        movq    %rsp, %rbp
        .cfi_def_cfa_register %rbp
        .cfi_offset %rbp, -96
        subq    fp_xsave_size(%rip), %rsp
        andq    $-64, %rsp
        FP_SAVE_XSTATE
        leaq    96(%rbp), %rdi          // %rsp as the caller will see it
        movq    64(%rbp), %rsi          // the TSC
        call    fp_exit                 // -> %rax = the caller's return address
        movq    %rax, 88(%rbp)          // into the return slot
        FP_RESTORE_XSTATE
        movq    %rbp, %rsp
        .cfi_def_cfa_register %rsp
        movq    80(%rsp), %rax
        movq    72(%rsp), %rdx
        movq    56(%rsp), %rcx
        movq    48(%rsp), %rsi
        movq    40(%rsp), %rdi
        movq    32(%rsp), %r8
        movq    24(%rsp), %r9
        movq    16(%rsp), %r10
        movq    8(%rsp), %r11
        movq    0(%rsp), %rbp
        .cfi_restore %rbp
        leaq    88(%rsp), %rsp          // the return slot
        .cfi_def_cfa_offset 8
        ret
        .cfi_endproc
1:      jmp     *-16(%rsp)              // not measured: a plain tail jump
        .size   fp_detour_entry, .-fp_detour_entry

// One stub per slot, FP_STUB_SIZE bytes apart from fp_stubs (StubAddress).
// A slot not measured (past the overhead budget, or a choice replaced by a
// lower-priority API called later) costs one byte compare and a jump to
// the API; otherwise load the slot number and go to the common part.
        .macro  FP_STUB n
        .balign FP_STUB_SIZE
.Lstub_\n:
        cmpb    $0, fp_measuring+\n(%rip)
        je      1f
        movl    $\n, %r11d
        jmp     fp_stub_common
1:      jmp     *fp_real+8*\n(%rip)
        .org    .Lstub_\n + FP_STUB_SIZE
        .endm

        .balign FP_STUB_SIZE
        .globl  fp_stubs
        .hidden fp_stubs
        .type   fp_stubs, @function
fp_stubs:
        .irp    n, 0,1,2,3,4,5,6,7,8,9,10,11,12,13,14,15,16,17,18,19,20,21,22,23,24,25,26,27,28,29,30,31,32
        FP_STUB \n
        .endr
        .size   fp_stubs, .-fp_stubs

        .section .note.GNU-stack,"",@progbits
