// Raw Linux system calls (x86-64) for the part of the runtime that runs in
// every sampled process before it is known to be measured: the first look
// and the decision (first_look.h, decide.h). The first call of a libc
// function from this library goes through lazy binding (a symbol lookup,
// and an XSAVE of the vector registers onto a stack page that may be
// fresh) and often faults in a page of libc's text that the program never
// uses; on the virtual machines measured each fault costs ~10 us
// (docs/benchmarks-history.md). These wrappers are inline `syscall` instructions:
// no libc, no errno (a failure returns -errno), no vector register.
#ifndef FIELDPROF_AGENT_PRELOAD_RUNTIME_SYS_H_
#define FIELDPROF_AGENT_PRELOAD_RUNTIME_SYS_H_

#include <fcntl.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/sysinfo.h>
#include <time.h>

#include <cstddef>
#include <cstdint>

namespace fieldprof::rt::sys {

inline long Call(long nr, long a = 0, long b = 0, long c = 0, long d = 0) {
  long r;
  register long r10 __asm__("r10") = d;
  __asm__ __volatile__("syscall"
                       : "=a"(r)
                       : "0"(nr), "D"(a), "S"(b), "d"(c), "r"(r10)
                       : "rcx", "r11", "memory");
  return r;
}

inline long L(const void* p) { return reinterpret_cast<long>(p); }

inline int OpenAt(int dirfd, const char* path, int flags, int mode = 0) {
  return static_cast<int>(Call(SYS_openat, dirfd, L(path), flags, mode));
}
inline int Close(int fd) { return static_cast<int>(Call(SYS_close, fd)); }
inline long Read(int fd, void* buf, size_t n) {
  return Call(SYS_read, fd, L(buf), static_cast<long>(n));
}
inline long Pread(int fd, void* buf, size_t n, long off) {
  return Call(SYS_pread64, fd, L(buf), static_cast<long>(n), off);
}
inline long Pwrite(int fd, const void* buf, size_t n, long off) {
  return Call(SYS_pwrite64, fd, L(buf), static_cast<long>(n), off);
}
inline int Ftruncate(int fd, long len) { return static_cast<int>(Call(SYS_ftruncate, fd, len)); }
inline int Flock(int fd, int op) { return static_cast<int>(Call(SYS_flock, fd, op)); }
inline int Fstat(int fd, struct stat* st) { return static_cast<int>(Call(SYS_fstat, fd, L(st))); }
inline int Stat(const char* path, struct stat* st) {
  return static_cast<int>(Call(SYS_newfstatat, AT_FDCWD, L(path), L(st), 0));
}
inline long Readlink(const char* path, char* buf, size_t n) {
  return Call(SYS_readlinkat, AT_FDCWD, L(path), L(buf), static_cast<long>(n));
}
inline int Fallocate(int fd, int mode, long off, long len) {
  return static_cast<int>(Call(SYS_fallocate, fd, mode, off, len));
}
inline int Unlink(const char* path) {
  return static_cast<int>(Call(SYS_unlinkat, AT_FDCWD, L(path), 0));
}
// fcntl with a pointer argument (F_OFD_SETLK and friends).
inline int Fcntl(int fd, int cmd, void* arg) {
  return static_cast<int>(Call(SYS_fcntl, fd, cmd, L(arg)));
}
inline int Fchmod(int fd, unsigned mode) { return static_cast<int>(Call(SYS_fchmod, fd, mode)); }
inline int Mkdir(const char* path, unsigned mode) {
  return static_cast<int>(Call(SYS_mkdir, L(path), mode));
}
inline int Chmod(const char* path, unsigned mode) {
  return static_cast<int>(Call(SYS_chmod, L(path), mode));
}
inline int Sysinfo(struct sysinfo* si) { return static_cast<int>(Call(SYS_sysinfo, L(si))); }
// Bytes of the mask the kernel filled, or -errno.
inline long SchedGetaffinity(void* mask, size_t bytes) {
  return Call(SYS_sched_getaffinity, 0, static_cast<long>(bytes), L(mask));
}
inline long Getrandom(void* buf, size_t n, unsigned flags) {
  return Call(SYS_getrandom, L(buf), static_cast<long>(n), flags);
}
inline int Getpid() { return static_cast<int>(Call(SYS_getpid)); }
inline unsigned Geteuid() { return static_cast<unsigned>(Call(SYS_geteuid)); }
inline int Nanosleep(long ns) {
  const timespec t{0, ns};
  return static_cast<int>(Call(SYS_nanosleep, L(&t), 0));
}
// CLOCK_MONOTONIC by the system call, not the vDSO: the vDSO's first use
// faults in its two data pages, ~20 us here against ~1 us for the call.
inline int64_t MonoNs() {
  timespec ts{};
  Call(SYS_clock_gettime, CLOCK_MONOTONIC, L(&ts));
  return int64_t{ts.tv_sec} * 1000000000 + ts.tv_nsec;
}

// The value of NAME in an environment block, or nullptr (getenv without
// libc).
inline const char* Env(char** envp, const char* name) {
  for (char** e = envp; e != nullptr && *e != nullptr; ++e) {
    const char* p = *e;
    const char* n = name;
    while (*n != 0 && *p == *n) {
      ++p;
      ++n;
    }
    if (*n == 0 && *p == '=') return p + 1;
  }
  return nullptr;
}

}  // namespace fieldprof::rt::sys

#endif  // FIELDPROF_AGENT_PRELOAD_RUNTIME_SYS_H_
