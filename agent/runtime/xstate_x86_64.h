// The extended register state (x87, SSE, AVX, AVX-512: a measured
// function's vector arguments and results) saved and restored around C
// code that may touch it, for the assembly in stubs_x86_64.S and
// trap_x86_64.S. (%rsp) must point at fp_xsave_size bytes, 64-aligned.
// XSAVE where the CPU has it (binder.cc sets fp_use_xsave and the mask),
// else FXSAVE. Both macros clobber %eax and %edx; local labels 8 and 9.
#ifndef FIELDPROF_AGENT_RUNTIME_XSTATE_X86_64_H_
#define FIELDPROF_AGENT_RUNTIME_XSTATE_X86_64_H_

        .macro  FP_SAVE_XSTATE
        cmpb    $0, fp_use_xsave(%rip)
        je      8f
        // XSAVE's header must be clean for XRSTOR: zero its 64 bytes.
        xorl    %eax, %eax
        movq    %rax, 512(%rsp)
        movq    %rax, 520(%rsp)
        movq    %rax, 528(%rsp)
        movq    %rax, 536(%rsp)
        movq    %rax, 544(%rsp)
        movq    %rax, 552(%rsp)
        movq    %rax, 560(%rsp)
        movq    %rax, 568(%rsp)
        movl    fp_xsave_mask(%rip), %eax
        xorl    %edx, %edx
        xsave64 (%rsp)
        jmp     9f
8:      fxsave64 (%rsp)
9:
        .endm

        .macro  FP_RESTORE_XSTATE
        cmpb    $0, fp_use_xsave(%rip)
        je      8f
        movl    fp_xsave_mask(%rip), %eax
        xorl    %edx, %edx
        xrstor64 (%rsp)
        jmp     9f
8:      fxrstor64 (%rsp)
9:
        .endm

#endif  // FIELDPROF_AGENT_RUNTIME_XSTATE_X86_64_H_
