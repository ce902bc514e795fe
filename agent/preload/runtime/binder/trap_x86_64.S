// The binder's first-call trap and the dlsym/dlvsym hooks (x86-64 SysV).
// See binder.h.
//
// fp_trap is entered from a trampoline's `call` (binder/state.h): (%rsp)
// is the trampoline's marker, 8(%rsp) the return address of the API's
// caller, and every argument register is the caller's. It keeps them all,
// asks fp_trap_fast (no libc, no vector registers) where the call goes, and
// when that needs more, runs fp_trap_slow with the extended register state
// (x87/SSE/AVX/AVX-512: vector arguments) saved by XSAVE, as the dynamic
// linker's own lazy binding does. Then it jumps there with the stack and
// registers exactly as the caller left them.

#include "agent/preload/runtime/hotpath/xstate_x86_64.inc"

        .text

        .globl  fp_trap
        .hidden fp_trap
        .type   fp_trap, @function
fp_trap:
        popq    %r11                    // the marker; (%rsp): the caller's return address
        pushq   %rbp                    // %rsp 16-aligned from here
        movq    %rsp, %rbp
        pushq   %rdi
        pushq   %rsi
        pushq   %rdx
        pushq   %rcx
        pushq   %r8
        pushq   %r9
        pushq   %rax                    // %al: vector registers used by a varargs call
        pushq   %r10                    // static chain
        pushq   %rbx
        pushq   %r11                    // (%rsp): the marker
        movq    %r11, %rdi
        call    fp_trap_fast            // -> %rax where to go, %rdx nonzero: slow path
        testq   %rdx, %rdx
        jnz     .Ltrap_slow
.Ltrap_go:
        movq    %rax, %r11
        addq    $8, %rsp
        popq    %rbx
        popq    %r10
        popq    %rax
        popq    %r9
        popq    %r8
        popq    %rcx
        popq    %rdx
        popq    %rsi
        popq    %rdi
        popq    %rbp
        jmp     *%r11

.Ltrap_slow:
        movq    (%rsp), %rdi            // marker
        movq    %rax, %rsi              // what the fast path proposed (0: nothing)
        movq    %rsp, %rbx
        subq    fp_xsave_size(%rip), %rsp
        andq    $-64, %rsp
        FP_SAVE_XSTATE
        call    fp_trap_slow            // -> %rax where to go
        movq    %rax, %r11
        FP_RESTORE_XSTATE
        movq    %r11, %rax
        movq    %rbx, %rsp
        jmp     .Ltrap_go
        .size   fp_trap, .-fp_trap

// dlsym(handle, name) and dlvsym(handle, name, version), interposed.
// - Not measuring: a tail jump to the real function.
// - RTLD_DEFAULT (0) or RTLD_NEXT (-1), whose answer depends on who calls:
//   objects loaded since the binder last looked get their traps, then a
//   tail jump, so the real function sees the caller's return address.
// - A handle: fp_dlsym_hook calls the real function and returns the stub
//   of a chosen API instead of the API (the call's result is its own).
// The real functions are found on first use (fp_resolve_dl, with the
// arguments kept).
        .macro  FP_DL_HOOK name, real, hook
        .globl  \name
        .type   \name, @function
\name:
        cmpq    $0, \real(%rip)
        jne     1f
        pushq   %rdi
        pushq   %rsi
        pushq   %rdx
        call    fp_resolve_dl
        popq    %rdx
        popq    %rsi
        popq    %rdi
1:      cmpb    $0, fp_binder_on(%rip)
        je      3f
        cmpq    $0, %rdi
        je      2f
        cmpq    $-1, %rdi
        je      2f
        jmp     \hook
2:      pushq   %rdi
        pushq   %rsi
        pushq   %rdx
        call    fp_notice_objects
        popq    %rdx
        popq    %rsi
        popq    %rdi
3:      jmp     *\real(%rip)
        .size   \name, .-\name
        .endm

        FP_DL_HOOK dlsym, fp_real_dlsym, fp_dlsym_hook
        FP_DL_HOOK dlvsym, fp_real_dlvsym, fp_dlvsym_hook

        .section .note.GNU-stack,"",@progbits
