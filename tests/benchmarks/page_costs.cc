// What the kernel operations a process start is made of cost on this
// machine, in TSC ticks and microseconds: a first write to a
// fresh anonymous page, mprotect of a populated page, an anonymous mmap,
// open+close, and a system call that does nothing (getppid) as the floor.
// A measured run's start is mostly these (docs/benchmarks-history.md); their cost
// here, against a physical machine's, bounds what the runtime can reach.
//
//   page_costs [ROUNDS]   (default 5; prints the median round of each)
#include <fcntl.h>
#include <sys/mman.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>
#include <x86intrin.h>

#include <algorithm>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <vector>

namespace {

constexpr int kPages = 64;

double TicksPerUs() {
  timespec a{}, b{};
  clock_gettime(CLOCK_MONOTONIC, &a);
  const uint64_t t0 = __rdtsc();
  timespec d{0, 50 * 1000 * 1000};
  nanosleep(&d, nullptr);
  const uint64_t t1 = __rdtsc();
  clock_gettime(CLOCK_MONOTONIC, &b);
  const double us = (b.tv_sec - a.tv_sec) * 1e6 + (b.tv_nsec - a.tv_nsec) / 1e3;
  return static_cast<double>(t1 - t0) / us;
}

// Ticks per operation of one round of each.
struct Round {
  double fault, mprotect, mmap, open_close, syscall;
};

Round OneRound(long page) {
  Round r{};
  auto* m = static_cast<char*>(
      mmap(nullptr, kPages * page, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0));
  if (m == MAP_FAILED) std::abort();
  uint64_t t = __rdtsc();
  for (int i = 0; i < kPages; ++i) m[i * page] = 1;
  r.fault = static_cast<double>(__rdtsc() - t) / kPages;
  t = __rdtsc();
  for (int i = 0; i < kPages; ++i) mprotect(m + i * page, page, PROT_READ);
  r.mprotect = static_cast<double>(__rdtsc() - t) / kPages;
  munmap(m, kPages * page);
  std::vector<void*> maps(kPages);
  t = __rdtsc();
  for (auto& p : maps) {
    p = mmap(nullptr, page, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
  }
  r.mmap = static_cast<double>(__rdtsc() - t) / kPages;
  for (void* p : maps) munmap(p, page);
  t = __rdtsc();
  for (int i = 0; i < kPages; ++i) close(open("/etc/hostname", O_RDONLY));
  r.open_close = static_cast<double>(__rdtsc() - t) / kPages;
  t = __rdtsc();
  for (int i = 0; i < kPages; ++i) syscall(SYS_getppid);
  r.syscall = static_cast<double>(__rdtsc() - t) / kPages;
  return r;
}

}  // namespace

int main(int argc, char** argv) {
  const int rounds = argc > 1 ? std::max(1, std::atoi(argv[1])) : 5;
  const long page = sysconf(_SC_PAGESIZE);
  const double per_us = TicksPerUs();
  std::vector<Round> all;
  for (int i = 0; i < rounds; ++i) all.push_back(OneRound(page));
  auto median = [&](double Round::*f) {
    std::vector<double> v;
    for (const Round& r : all) v.push_back(r.*f);
    std::nth_element(v.begin(), v.begin() + v.size() / 2, v.end());
    return v[v.size() / 2];
  };
  std::printf("TSC: %.0f ticks/us; median of %d rounds of %d operations each\n", per_us, rounds,
              kPages);
  const struct {
    const char* name;
    double Round::*field;
  } rows[] = {{"first write to a fresh anonymous page", &Round::fault},
              {"mprotect of one populated page", &Round::mprotect},
              {"mmap of one anonymous page", &Round::mmap},
              {"open + close of a small file", &Round::open_close},
              {"getppid (a system call's floor)", &Round::syscall}};
  const double floor = median(&Round::syscall);
  for (const auto& row : rows) {
    const double t = median(row.field);
    std::printf("  %-40s %8.0f ticks  %7.2f us  %6.1fx a system call\n", row.name, t, t / per_us,
                t / floor);
  }
  return 0;
}
