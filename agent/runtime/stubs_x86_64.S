// Entry stubs and the return path of the fieldprof runtime (x86-64 SysV).
//
// A chosen API's callers are bound to fp_stub_N instead of the function.
// The stub saves the argument registers and asks fp_enter (hotpath.cc) for
// the real address and whether to measure this call. Not measured: restore
// the arguments untouched and jump there. Measured: fp_enter has kept the
// caller's return address on the thread's shadow stack and written
// fp_return_point into its stack slot; the stub pops that slot and calls
// the function, so the call pushes fp_return_point into the very same slot:
// stack arguments sit where the function expects them, and every return is
// paired with its call, so the CPU predicts all of them (a planted return
// address would cost a mispredicted return per call). fp_return_point
// saves the return registers, asks fp_exit for the caller's return address,
// pushes it back into the slot and returns to it.
//
// Any signature works: stack arguments are never moved, varargs keep %al,
// struct returns keep %rdi/%rax, floating-point arguments and results are
// not touched by fp_enter/fp_exit (built with -mgeneral-regs-only); the
// return path still saves %xmm0/%xmm1 for the rare slow path that calls
// libc (clock calibration). x87 long double results are never touched.
        .text

        .globl  fp_stub_common
        .hidden fp_stub_common
        .type   fp_stub_common, @function
fp_stub_common:
        // %r11d = slot. On entry %rsp points at the return address, and
        // %rsp+8 is 16-byte aligned.
        .cfi_startproc
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
        jnz     1f
        jmp     *%r11                   // not measured: a plain tail jump
1:
        // Measured. The slot at (%rsp) holds fp_return_point already, and
        // the caller's return address is on the shadow stack. Between the
        // lea and the call the slot lies in the red zone, which signal
        // delivery never touches.
        leaq    8(%rsp), %rsp
        .cfi_endproc                    // unwinders stop at fp_return_point,
                                        // as at any frame without CFI
        call    *%r11
        .globl  fp_return_point
        .hidden fp_return_point
fp_return_point:
        // The function returned: %rsp is the caller's and 16-byte aligned.
        // The save area stops below the return slot, which holds
        // fp_return_point until fp_exit is over (see DropDeadEntries).
        subq    $64, %rsp
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
        pushq   %r11                    // back into the slot; the return
        ret                             // predictor expects just this address
        .size   fp_stub_common, .-fp_stub_common

// One stub per slot. A slot not measured (past the overhead budget, or a
// choice replaced after a dlopen) costs one byte compare and a jump to the
// API; otherwise load the slot number and go to the common part.
        .macro  FP_STUB n
        .globl  fp_stub_\n
        .hidden fp_stub_\n
        .type   fp_stub_\n, @function
fp_stub_\n:
        cmpb    $0, fp_measuring+\n(%rip)
        je      1f
        movl    $\n, %r11d
        jmp     fp_stub_common
1:      jmp     *fp_real+8*\n(%rip)
        .size   fp_stub_\n, .-fp_stub_\n
        .endm

        FP_STUB 0
        FP_STUB 1
        FP_STUB 2
        FP_STUB 3
        FP_STUB 4
        FP_STUB 5
        FP_STUB 6
        FP_STUB 7
        FP_STUB 8

        .section .note.GNU-stack,"",@progbits
