// A function written in assembly whose first instruction is one byte
// (push %rbx), for tests of code changed while threads run
// (agent/preload/runtime/points/call_sites.cc): no thread may be stopped inside a jump
// written over it, so its entry is never moved under running threads.
// Assembly, so that no compiler changes the prologue.
//
//   FIELDPROF_PUSH_RBX_FUNCTION(my_fn, ".hidden my_fn\n", "lea 1(%rdi), %rbx");
//   extern "C" __attribute__((visibility("hidden"))) long my_fn(long x);
//
// defines my_fn(x), which computes `compute` into %rbx from x in %rdi and
// returns %rbx. `visibility` is a directive line for the symbol, or "" for
// an exported one; unwind information (CFI) is emitted, as a compiler does.
#ifndef FIELDPROF_TESTS_SUPPORT_PUSH_RBX_FUNCTION_H_
#define FIELDPROF_TESTS_SUPPORT_PUSH_RBX_FUNCTION_H_

#define FIELDPROF_PUSH_RBX_FUNCTION(name, visibility, compute)                                    \
  __asm__(".text\n.p2align 4\n.globl " #name "\n" visibility ".type " #name ", @function\n" #name \
          ":\n.cfi_startproc\npush %rbx\n.cfi_def_cfa_offset 16\n.cfi_offset %rbx, -16\n" compute \
          "\nmov %rbx, %rax\npop %rbx\n.cfi_def_cfa_offset 8\nret\n.cfi_endproc\n.size " #name    \
          ", .-" #name "\n")

#endif  // FIELDPROF_TESTS_SUPPORT_PUSH_RBX_FUNCTION_H_
