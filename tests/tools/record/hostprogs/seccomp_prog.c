/* A program that, after its setup, puts itself under a seccomp filter
 * that kills the process at any system call but the few it makes itself
 * (write, exit_group, rt_sigreturn, futex, brk and the clock), as
 * sandboxed programs do. Nothing that runs inside it may make another.
 * By prctl(PR_SET_SECCOMP), or with the argument "syscall" by seccomp()
 * through the C library's syscall(), as libseccomp installs filters.
 * For tests/tools/record/host_safety_test.cc. */
#include <linux/audit.h>
#include <linux/filter.h>
#include <linux/seccomp.h>
#include <stddef.h>
#include <stdio.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/syscall.h>
#include <unistd.h>

#define ALLOW(nr) BPF_JUMP(BPF_JMP | BPF_JEQ | BPF_K, (nr), 0, 1), \
                  BPF_STMT(BPF_RET | BPF_K, SECCOMP_RET_ALLOW)

int main(int argc, char** argv) {
  struct sock_filter filter[] = {
      BPF_STMT(BPF_LD | BPF_W | BPF_ABS, offsetof(struct seccomp_data, arch)),
      BPF_JUMP(BPF_JMP | BPF_JEQ | BPF_K, AUDIT_ARCH_X86_64, 1, 0),
      BPF_STMT(BPF_RET | BPF_K, SECCOMP_RET_KILL_PROCESS),
      BPF_STMT(BPF_LD | BPF_W | BPF_ABS, offsetof(struct seccomp_data, nr)),
      ALLOW(SYS_write), ALLOW(SYS_exit_group), ALLOW(SYS_exit), ALLOW(SYS_rt_sigreturn),
      ALLOW(SYS_futex), ALLOW(SYS_brk), ALLOW(SYS_clock_gettime),
      BPF_STMT(BPF_RET | BPF_K, SECCOMP_RET_KILL_PROCESS),
  };
  struct sock_fprog prog = {sizeof filter / sizeof filter[0], filter};
  char line[128];
  setvbuf(stdout, NULL, _IONBF, 0);
  const int by_syscall = argc > 1 && strcmp(argv[1], "syscall") == 0;
  if (prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) != 0 ||
      (by_syscall ? syscall(SYS_seccomp, SECCOMP_SET_MODE_FILTER, 0, &prog)
                  : prctl(PR_SET_SECCOMP, SECCOMP_MODE_FILTER, &prog)) != 0) {
    perror("seccomp");
    return 2;
  }
  volatile unsigned long sum = 0;
  for (unsigned long i = 0; i < 100000000ul; ++i) sum += i * 7;
  int n = snprintf(line, sizeof line, "under seccomp: sum %lu\n", (unsigned long)(sum & 0xffff));
  write(1, line, (size_t)n);
  return 0;  /* through exit(): destructors run under the filter too */
}
