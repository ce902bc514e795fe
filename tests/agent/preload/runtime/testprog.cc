// Calls the test library as told by its arguments and prints what it got,
// so runs with and without the runtime can be compared byte for byte.
//   testprog alloc N CALLS | sleep US CALLS | write FILE N CALLS | fsum | fpmany N | throw
//            | recurse N | nested N | varargs | structs | threads T N | signal | longjmp
//            | fork | forkin | vfork | exec | execfail | execfail5 | _exit | many N | dlopen LIB
//            | dlrace LIB N | reopenover|reopenmoved LIB FN [AGAIN]
//            | sigtrap handler|signal|ignore|default
#include <dlfcn.h>
#include <fcntl.h>
#include <link.h>
#include <pthread.h>
#include <setjmp.h>
#include <signal.h>
#include <stdio.h>
#include <sys/mman.h>
#include <sys/time.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cstdlib>
#include <cstring>
#include <stdexcept>
#include <string>
#include <string_view>
#include <thread>
#include <vector>

#include "tests/agent/preload/runtime/spin.h"

extern "C" {
void fp_test_alloc(size_t n);
void fp_test_sleep_us(long us);
long fp_test_write(int fd, long n);
double fp_test_fsum(double, double, double, double, double, double, double, double, double);
long double fp_test_lmul(long double, long double);
long fp_test_recurse(long n, long (*cb)(long));
double fp_test_vsum(int n, ...);
long fp_test_many(long, long, long, long, long, long, long, long, long, long);
struct FpBig {
  long v[6];
};
FpBig fp_test_big(long x);
struct FpPair {
  long n;
  double d;
};
FpPair fp_test_pair(long x);
void fp_test_callback(void (*cb)(void*), void* arg);
void fp_test_spin_us(long us);
void fp_test_spin_ns(long ns);
const long* fp_test_spin_truth(unsigned long* calls);
}

namespace {

long Recurse(long n) { return fp_test_recurse(n - 1, Recurse); }

std::atomic<int> g_signals{0};
std::atomic<int> g_traps{0}, g_trap_codes_raised{0};
void OnTrapInfo(int, siginfo_t* si, void*) {
  g_traps.fetch_add(1);
  if (si->si_code == SI_TKILL) g_trap_codes_raised.fetch_add(1);
}
void OnTrap(int) { g_traps.fetch_add(1); }
void OnTrapOther(int) {}
void OnAlarm(int) {
  fp_test_alloc(100);  // a measured call inside a handler, maybe inside another
  g_signals.fetch_add(1);
}

jmp_buf g_jump;
void JumpOut(void*) { longjmp(g_jump, 1); }
void Nothing(void*) {}
void SpinInside(void* ns) { fp_test_spin_ns(*static_cast<long*>(ns)); }

// fp_test_spin_ns's twin, not measured (a call inside this program).
__attribute__((noinline)) long LocalSpin(long ns) { return SpinNs(ns); }

// What a spin's call takes beyond the span it measures itself (its first
// clock reading's start, its last one's end, the call and return), in ns:
// the least over 50 batches of 20 calls, timed from outside (a preempted
// batch counts for nothing).
double SpinOverheadNs(long ns) {
  long (*volatile spin)(long) = LocalSpin;
  double best = 1e18;
  for (int batch = 0; batch < 50; ++batch) {
    constexpr int kCalls = 20;
    timespec a, b;
    long own = 0;
    clock_gettime(CLOCK_MONOTONIC, &a);
    for (int i = 0; i < kCalls; ++i) own += spin(ns);
    clock_gettime(CLOCK_MONOTONIC, &b);
    const long wall = (b.tv_sec - a.tv_sec) * 1000000000 + (b.tv_nsec - a.tv_nsec);
    best = std::min(best, static_cast<double>(wall - own) / kCalls);
  }
  return best;
}

// Inside a measured fp_test_callback: 300 bytes of its own and a measured
// fp_test_alloc of 5000, in the order `alloc_first` says.
void NestedAlloc(void* alloc_first) {
  void* p = nullptr;
  if (alloc_first != nullptr) p = malloc(300);
  fp_test_alloc(5000);
  if (alloc_first == nullptr) p = malloc(300);
  __asm__ __volatile__("" : : "r"(p) : "memory");
  free(p);
}

void ForkInside(void* child_flag) {
  fflush(stdout);
  *static_cast<pid_t*>(child_flag) = fork();
}

// Execs this program again as `testprog execvariants NEXT` through the
// exec variant `k` (0 execve ... 8 execveat); returns only if it failed.
constexpr int kExecVariants = 9;
void ExecVariant(int k, const std::string& next) {
  const char* self = "/proc/self/exe";
  char* const argv[] = {const_cast<char*>("testprog"), const_cast<char*>("execvariants"),
                        const_cast<char*>(next.c_str()), nullptr};
  const char* a0 = argv[0];
  const char* a1 = argv[1];
  const char* a2 = argv[2];
  switch (k) {
    case 0:
      execve(self, argv, environ);
      break;
    case 1:
      execv(self, argv);
      break;
    case 2:
      execvp(self, argv);
      break;
    case 3:
      execvpe(self, argv, environ);
      break;
    case 4:
      execl(self, a0, a1, a2, static_cast<char*>(nullptr));
      break;
    case 5:
      execlp(self, a0, a1, a2, static_cast<char*>(nullptr));
      break;
    case 6:
      execle(self, a0, a1, a2, static_cast<char*>(nullptr), environ);
      break;
    case 7: {
      const int fd = open(self, O_RDONLY | O_CLOEXEC);
      if (fd >= 0) fexecve(fd, argv, environ);
      break;
    }
    default:
      execveat(AT_FDCWD, self, argv, environ, 0);
      break;
  }
}

// One branch per hazard the runtime must survive (threads, signals, fork,
// exec, longjmp, exceptions...), each a few lines named as the tests name
// it: a table of cases, longer than a function should be, read one branch
// at a time.
int Hazard(int argc, char** argv) {
  const char* what = argv[1];
  if (!strcmp(what, "recurse") && argc == 3) {
    printf("sum %ld\n", fp_test_recurse(atol(argv[2]), Recurse));
  } else if (!strcmp(what, "nested") && argc == 3) {
    const int n = atoi(argv[2]);
    for (int i = 0; i < n; ++i) {
      fp_test_callback(NestedAlloc, reinterpret_cast<void*>(static_cast<intptr_t>(i & 1)));
    }
  } else if (!strcmp(what, "varargs")) {
    printf("%.3f\n", fp_test_vsum(10, 1.0, 2.0, 3.0, 4.0, 5.0, 6.0, 7.0, 8.0, 9.5, 10.25));
    printf("%ld\n", fp_test_many(1, 2, 3, 4, 5, 6, 7, 8, 9, 10));
  } else if (!strcmp(what, "some")) {
    // Eight of the test library's APIs called, the rest of its imports not.
    fp_test_alloc(16);
    fp_test_sleep_us(0);
    const double f = fp_test_fsum(1, 2, 3, 4, 5, 6, 7, 8, 9);
    const long double l = fp_test_lmul(2.0L, 3.0L);
    const double v = fp_test_vsum(2, 1.0, 2.0);
    const long m = fp_test_many(1, 2, 3, 4, 5, 6, 7, 8, 9, 10);
    const FpBig big = fp_test_big(1);
    const FpPair pair = fp_test_pair(2);
    printf("%.1f %.1Lf %.1f %ld %ld %ld\n", f, l, v, m, big.v[0], pair.n);
  } else if (!strcmp(what, "structs")) {
    FpBig b = fp_test_big(7);
    FpPair p = fp_test_pair(10);
    printf("%ld %ld %ld %ld %.2f\n", b.v[0], b.v[3], b.v[5], p.n, p.d);
  } else if (!strcmp(what, "threads") && argc == 4) {
    const int threads = atoi(argv[2]), calls = atoi(argv[3]);
    std::vector<std::thread> ts;
    for (int t = 0; t < threads; ++t) {
      ts.emplace_back([calls] {
        for (int i = 0; i < calls; ++i) fp_test_alloc(64);
      });
    }
    for (auto& t : ts) t.join();
    printf("threads %d x %d\n", threads, calls);
  } else if (!strcmp(what, "signal")) {
    struct sigaction sa = {};
    sa.sa_handler = OnAlarm;
    sigaction(SIGALRM, &sa, nullptr);
    itimerval it = {{0, 700}, {0, 700}};
    setitimer(ITIMER_REAL, &it, nullptr);
    for (int i = 0; i < 300 && g_signals.load() < 20; ++i) fp_test_spin_us(500);
    itimerval off = {};
    setitimer(ITIMER_REAL, &off, nullptr);
    printf("signals %s\n", g_signals.load() > 0 ? "handled" : "none");
  } else if (!strcmp(what, "sigtrap") && argc == 3) {
    // SIGTRAP is the program's, whoever samples it: its handler gets its
    // own traps only (raised: SI_TKILL), sigaction() gives back what it
    // set, and its default kills it.
    for (int i = 0; i < 150; ++i) fp_test_spin_us(1000);
    const char* how = argv[2];
    if (!strcmp(how, "handler")) {
      struct sigaction sa = {}, old = {};
      sa.sa_handler = OnTrapOther;
      sigaction(SIGTRAP, &sa, nullptr);
      sa.sa_sigaction = OnTrapInfo;
      sa.sa_flags = SA_SIGINFO;
      sigaction(SIGTRAP, &sa, &old);
      printf("previous %s\n", old.sa_handler == OnTrapOther ? "ours" : "other");
    } else if (!strcmp(how, "signal")) {
      signal(SIGTRAP, OnTrap);
      printf("previous %s\n", signal(SIGTRAP, OnTrap) == OnTrap ? "ours" : "other");
    } else if (!strcmp(how, "ignore")) {
      signal(SIGTRAP, SIG_IGN);
    }
    raise(SIGTRAP);
    for (int i = 0; i < 150; ++i) fp_test_spin_us(1000);
    raise(SIGTRAP);
    printf("traps %d, raised %d\n", g_traps.load(), g_trap_codes_raised.load());
  } else if (!strcmp(what, "longjmp")) {
    // Static: locals may be clobbered by longjmp.
    static int jumped = 0;
    for (static int i = 0; i < 5; ++i) {
      if (setjmp(g_jump) == 0) {
        fp_test_callback(JumpOut, nullptr);
      } else {
        ++jumped;
      }
      fp_test_callback(Nothing, nullptr);
    }
    printf("jumped %d\n", jumped);
  } else if (!strcmp(what, "fork")) {
    // fp_test_alloc allocates (its calls take the C path); fp_test_pair is
    // short and quiet (the assembly's per-tick-value counts).
    for (int i = 0; i < 3; ++i) fp_test_alloc(10), fp_test_pair(i);
    fflush(stdout);
    const pid_t pid = fork();
    if (pid == 0) {
      for (int i = 0; i < 5; ++i) fp_test_alloc(10), fp_test_pair(i);
      printf("child\n");
      return 0;
    }
    int st = 0;
    waitpid(pid, &st, 0);
    for (int i = 0; i < 2; ++i) fp_test_alloc(10), fp_test_pair(i);
    printf("parent, child exit %d\n", WEXITSTATUS(st));
  } else if (!strcmp(what, "forkin")) {
    pid_t pid = -1;
    fp_test_callback(ForkInside, &pid);  // both processes return through it
    fp_test_callback(Nothing, nullptr);
    if (pid == 0) {
      printf("child returned\n");
      return 0;
    }
    int st = 0;
    waitpid(pid, &st, 0);
    printf("parent returned, child exit %d\n", WEXITSTATUS(st));
  } else if (!strcmp(what, "vfork")) {
    static int ok = 0;  // static: vfork may clobber locals
    for (static int i = 0; i < 3; ++i) {
      const pid_t pid = vfork();
      if (pid == 0) {
        execl("/bin/true", "true", static_cast<char*>(nullptr));
        _exit(127);
      }
      int st = 0;
      waitpid(pid, &st, 0);
      ok += WIFEXITED(st) && WEXITSTATUS(st) == 0;
    }
    printf("vforked %d\n", ok);
  } else if (!strcmp(what, "exec")) {
    fp_test_alloc(10);
    fflush(stdout);
    execl("/proc/self/exe", "testprog", "alloc", "10", "3", static_cast<char*>(nullptr));
    return 9;
  } else if (!strcmp(what, "execvariants") && argc == 3) {
    // Each exec variant in turn, one image after another: image K execs
    // the next through variant K; the last ends by _Exit.
    const int k = atoi(argv[2]);
    fp_test_alloc(10);
    printf("image %d\n", k);
    fflush(stdout);
    if (k >= kExecVariants) {
      printf("done execvariants\n");
      fflush(stdout);
      _Exit(7);
    }
    ExecVariant(k, std::to_string(k + 1));
    return 9;
  } else if (!strcmp(what, "many") && argc == 3) {
    double sum = 0;
    for (long i = 0; i < atol(argv[2]); ++i) sum += fp_test_pair(i % 100).d;
    printf("sum %.1f\n", sum);
  } else if (!strcmp(what, "execfail")) {
    fp_test_alloc(10);
    execl("/nonexistent/fieldprof-test", "x", static_cast<char*>(nullptr));
    fp_test_alloc(10);
    fp_test_alloc(10);
  } else if (!strcmp(what, "execfail5")) {
    fp_test_alloc(10);
    for (int i = 0; i < 5; ++i)
      execl("/nonexistent/fieldprof-test", "x", static_cast<char*>(nullptr));
    fp_test_alloc(10);
  } else if (!strcmp(what, "_exit")) {
    fp_test_alloc(10);
    fp_test_alloc(10);
    printf("done _exit\n");
    fflush(stdout);
    _exit(7);
  } else if (!strcmp(what, "mainexport") && argc == 3) {
    // A library calls the program's own export (fp_test_main_export).
    void* h = dlopen(argv[2], RTLD_NOW | RTLD_LOCAL);
    if (h == nullptr) return 8;
    auto* call = reinterpret_cast<long (*)(long)>(dlsym(h, "fp_test2_call_main"));
    if (call == nullptr) return 8;
    printf("main %ld\n", call(50));
  } else if (!strcmp(what, "dlrace") && argc == 4) {
    // One thread opens and closes LIB N times while another looks names up
    // (dlsym with RTLD_DEFAULT: the binder looks at the loaded objects
    // each time), so looks land while the library is being relocated.
    const long n = std::atol(argv[3]);
    static std::atomic<bool> stop{false};
    std::thread looker([] {
      while (!stop.load()) {
        if (dlsym(RTLD_DEFAULT, "fp_test_main_export") == nullptr) std::abort();
      }
    });
    long total = 0;
    for (long i = 0; i < n; ++i) {
      void* h = dlopen(argv[2], RTLD_NOW | RTLD_LOCAL);
      if (h == nullptr) return 8;
      auto* len = reinterpret_cast<long (*)(const char*)>(dlsym(h, "fp_relro_len"));
      if (len == nullptr) return 8;
      total += len("fieldprof");
      dlclose(h);
    }
    stop = true;
    looker.join();
    printf("dlrace %ld\n", total);
  } else if ((!strcmp(what, "reopenover") || !strcmp(what, "reopenmoved")) &&
             (argc == 4 || argc == 5)) {
    // LIB opened, its FN (long (const char*)) called, LIB closed and opened
    // again (or AGAIN, a file of the same size). The RELRO test library
    // (LIB or one it brought) comes back elsewhere, over most of its old
    // place: a page held at the top of where it was pushes its next load
    // one page down (mappings are placed top-down). Exit 9 when the
    // second load is not over the first (reopenover) or not elsewhere
    // (reopenmoved): the layout the case needs was not had. Stderr says
    // where each load was.
    const bool over = !strcmp(what, "reopenover");
    const uintptr_t page = static_cast<uintptr_t>(sysconf(_SC_PAGESIZE));
    long total = 0;
    uintptr_t old_lo = 0, old_hi = 0;
    for (int round = 0; round < 2; ++round) {
      // First load: room above the library for what a runtime maps when it
      // looks at the new objects and binds their calls (trampolines, its
      // live file's slots), held during the dlopen so the library goes
      // below it, given back for the dlsym and the calls so those mappings
      // go there, then taken again where they left it free, so that the
      // library's next load has no room above and goes below its old top.
      // (Not at the second load: the room could take the old place.)
      void* room = MAP_FAILED;
      if (round == 0) {
        room = mmap(nullptr, 256 * page, PROT_NONE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
        if (room == MAP_FAILED) return 8;
      }
      void* h = dlopen(argv[round == 1 && argc == 5 ? 4 : 2], RTLD_NOW | RTLD_LOCAL);
      if (room != MAP_FAILED) munmap(room, 256 * page);
      if (h == nullptr) return 8;
      auto* len = reinterpret_cast<long (*)(const char*)>(dlsym(h, argv[3]));
      if (len == nullptr) return 8;
      total += len("fieldprof") + len("reopened");
      if (room != MAP_FAILED) {
        for (uintptr_t p = reinterpret_cast<uintptr_t>(room);
             p < reinterpret_cast<uintptr_t>(room) + 256 * page; p += page) {
          // A page a runtime took meanwhile stays its.
          mmap(reinterpret_cast<void*>(p), page, PROT_NONE,
               MAP_PRIVATE | MAP_ANONYMOUS | MAP_FIXED_NOREPLACE, -1, 0);
        }
      }
      // Found by its file name: dlsym may answer with a measuring stub.
      struct Span {
        const char* name = nullptr;
        uintptr_t lo = ~uintptr_t{0}, hi = 0;
      } span;
      dl_iterate_phdr(
          [](dl_phdr_info* info, size_t, void* data) {
            auto& s = *static_cast<Span*>(data);
            const std::string_view name(info->dlpi_name);
            constexpr std::string_view kFile = "/libfieldprof_testlib_relro.so";
            if (name.size() < kFile.size() || name.substr(name.size() - kFile.size()) != kFile) {
              return 0;
            }
            s.name = info->dlpi_name;
            for (int i = 0; i < info->dlpi_phnum; ++i) {
              const ElfW(Phdr)& p = info->dlpi_phdr[i];
              if (p.p_type != PT_LOAD) continue;
              s.lo = std::min<uintptr_t>(s.lo, info->dlpi_addr + p.p_vaddr);
              s.hi = std::max<uintptr_t>(s.hi, info->dlpi_addr + p.p_vaddr + p.p_memsz);
            }
            return 1;
          },
          &span);
      if (span.name == nullptr) return 8;
      fprintf(stderr, "load %d: %s at %#lx-%#lx\n", round, span.name,
              static_cast<unsigned long>(span.lo), static_cast<unsigned long>(span.hi));
      dlclose(h);
      if (round == 1 && (span.lo == old_lo || (over && (span.lo >= old_hi || span.hi <= old_lo)))) {
        fprintf(stderr, "%s: the second load is not %s the first\n", what,
                over ? "over" : "elsewhere than");
        return 9;
      }
      old_lo = span.lo, old_hi = span.hi;
      if (round == 0) {
        const uintptr_t top = (span.hi + page - 1) / page * page - page;
        if (mmap(reinterpret_cast<void*>(top), page, PROT_NONE,
                 MAP_PRIVATE | MAP_ANONYMOUS | MAP_FIXED_NOREPLACE, -1, 0) == MAP_FAILED) {
          return 8;
        }
      }
    }
    printf("reopen %ld\n", total);
  } else if (!strcmp(what, "dlopen") && argc == 3) {
    long total = 0;
    for (int round = 0; round < 2; ++round) {
      void* h = dlopen(argv[2], RTLD_NOW | RTLD_LOCAL);
      if (h == nullptr) return 8;
      auto* work = reinterpret_cast<long (*)(long)>(dlsym(h, "fp_test2_work"));
      if (work == nullptr) return 8;
      for (int i = 0; i < 4 - 2 * round; ++i) total += work(1000);
      dlclose(h);
    }
    printf("dl %ld\n", total);
  } else {
    return 2;
  }
  printf("done %s\n", what);
  return 7;
}

}  // namespace
void fp_test_throw(int v);

// Exported (the executable is linked with --export-dynamic) for the test
// libraries to call back.
extern "C" __attribute__((visibility("default"), noinline)) long fp_test_main_export(long n) {
  return n * 3;
}

int main(int argc, char** argv) {
  if (argc < 2) return 2;
  const char* what = argv[1];
  if (!strcmp(what, "alloc") && argc == 4) {
    for (int i = 0; i < atoi(argv[3]); ++i) fp_test_alloc(strtoul(argv[2], nullptr, 10));
  } else if (!strcmp(what, "sleep") && argc == 4) {
    for (int i = 0; i < atoi(argv[3]); ++i) fp_test_sleep_us(atol(argv[2]));
  } else if (!strcmp(what, "write") && argc == 5) {
    int fd = open(argv[2], O_WRONLY | O_CREAT | O_TRUNC, 0600);
    long total = 0;
    for (int i = 0; i < atoi(argv[4]); ++i) total += fp_test_write(fd, atol(argv[3]));
    close(fd);
    printf("wrote %ld\n", total);
  } else if (!strcmp(what, "fpmany") && argc > 2) {
    // Many calls of two APIs in turn, each result checked: past batches of
    // kept durations and the overhead budget's checks.
    const long n = atol(argv[2]);
    long bad = 0;
    long double product = 1;
    double total = 0;
    for (long i = 0; i < n; ++i) {
      const double x = static_cast<double>(i % 7);
      const double s = fp_test_fsum(x, 0.5, 0.25, 0, 0, 0, 0, 0, 0.125);
      if (s != x + 0.875) ++bad;
      total += s;
      const long double f = 1.0L + static_cast<long double>(i % 5) / 1e18L;
      const long double p = fp_test_lmul(f, 3.0L);
      if (p != f * 3.0L) ++bad;
      product = product * p / 3.0L;
    }
    printf("%.3f %.21Lg bad %ld\n", total, product, bad);
  } else if (!strcmp(what, "spin") && argc == 6) {
    // spin NS CALLS outer|nested TRUTHFILE: CALLS calls of NS ns each, at the
    // outermost level or inside fp_test_callback. The truth goes to
    // TRUTHFILE: what a call takes beyond its own span, then each call's
    // span, a line each.
    long ns = atol(argv[2]);
    const long calls = atol(argv[3]);
    const bool nested = !strcmp(argv[4], "nested");
    unsigned long n = 0;
    fp_test_spin_truth(&n);
    for (long i = 0; i < calls; ++i) {
      if (nested) {
        fp_test_callback(SpinInside, &ns);
      } else {
        fp_test_spin_ns(ns);
      }
    }
    const long* spans = fp_test_spin_truth(&n);
    FILE* f = fopen(argv[5], "w");
    if (f == nullptr) return 3;
    fprintf(f, "%.3f\n", SpinOverheadNs(ns));
    for (unsigned long i = 0; i < n && i < (1ul << 17); ++i) fprintf(f, "%ld\n", spans[i]);
    fclose(f);
  } else if (!strcmp(what, "clock") && argc == 3) {
    // libc's time and gettimeofday are IFUNCs that choose vDSO functions.
    long late = 0;
    for (int i = 0; i < atoi(argv[2]); ++i) {
      timeval tv{};
      gettimeofday(&tv, nullptr);
      late += time(nullptr) + 1 < tv.tv_sec;
    }
    printf("clock late %ld\n", late);
  } else if (!strcmp(what, "fsum")) {
    printf("%.3f\n", fp_test_fsum(1.5, 2.25, 3, 4, 5, 6, 7, 8, 9.125));
  } else if (!strcmp(what, "throw")) {
    int caught = 0;
    for (int i = 0; i < 5; ++i) {
      try {
        fp_test_throw(i % 2);
      } catch (const std::runtime_error& e) {
        ++caught;
      }
    }
    printf("caught %d\n", caught);
  } else {
    return Hazard(argc, argv);
  }
  printf("done %s\n", what);
  return 7;  // a distinctive exit code that must survive
}
