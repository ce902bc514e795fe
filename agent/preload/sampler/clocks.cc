// The sampling clocks (sampler.h): a task-clock perf_event per thread, or
// per-thread POSIX timers, and which of them this process gets.
#include <elf.h>
#include <fcntl.h>
#include <linux/perf_event.h>
#include <signal.h>
#include <sys/ioctl.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <atomic>
#include <cstdlib>
#include <cstring>

#include "agent/preload/base/go_program.h"
#include "agent/preload/base/owned_signals.h"
#include "agent/preload/sampler/sampler.h"
#include "common/stacks/sampler_format.h"

namespace fieldprof::sampler {
namespace {

// The descriptors of our task-clock events that signal by kSampleSignal,
// marked as they open and never unmarked: a sample still on its way after
// its event closed is ours too. Descriptors past the table are taken as
// ours when the code says a descriptor sent it (a program's own F_SETSIG
// descriptors signal by a signal of their own).
constexpr int kMarkedFds = 1 << 16;
std::atomic<uint64_t> g_clock_fds[kMarkedFds / 64];

void MarkClockFd(int fd) {
  if (fd >= 0 && fd < kMarkedFds) {
    g_clock_fds[fd / 64].fetch_or(uint64_t{1} << (fd % 64), std::memory_order_relaxed);
  }
}

bool ClockFd(int fd) {
  if (fd < 0) return false;
  if (fd >= kMarkedFds) return true;
  return (g_clock_fds[fd / 64].load(std::memory_order_relaxed) >> (fd % 64) & 1) != 0;
}

}  // namespace

bool IsSampleSignal(const siginfo_t* si) {
  if (si == nullptr || si->si_signo != kSampleSignal) return false;
  if (si->si_code == SI_TIMER) {
    return reinterpret_cast<uintptr_t>(si->si_value.sival_ptr) == kProfTimerValue;
  }
  return si->si_code >= POLL_IN && si->si_code <= POLL_HUP && ClockFd(si->si_fd);
}

bool OwnSampleSignal(void (*on_sample)(int, siginfo_t*, void*)) {
  return preload::OwnSignal(kSampleSignal, IsSampleSignal, on_sample);
}

void ReturnSampleSignal() { preload::ReturnSignal(kSampleSignal); }

bool SampleSignalTaken() {
  return preload::SignalOwned(kSampleSignal) && !preload::HandlerStillOurs(kSampleSignal);
}

int OpenTaskClock(uint64_t period_ns, bool user_only, bool trap) {
  perf_event_attr a{};
  a.size = sizeof a;
  a.type = PERF_TYPE_SOFTWARE;
  a.config = PERF_COUNT_SW_TASK_CLOCK;
  a.sample_period = period_ns;
  a.exclude_kernel = user_only ? 1 : 0;
  a.exclude_hv = 1;
  a.wakeup_events = 1;
  a.disabled = 1;
  if (trap) {
    a.sigtrap = 1;
    a.remove_on_exec = 1;  // the kernel's condition for sigtrap
    a.sig_data = kSampleSigData;
  }
  const pid_t tid = static_cast<pid_t>(syscall(SYS_gettid));
  int fd = static_cast<int>(syscall(SYS_perf_event_open, &a, tid, -1, -1,
                                    static_cast<unsigned long>(PERF_FLAG_FD_CLOEXEC)));
  if (fd < 0) return -1;
  fd = MoveFdHigh(fd);
  if (trap) {
    if (ioctl(fd, PERF_EVENT_IOC_ENABLE, 0) == 0) return fd;
    close(fd);
    return -1;
  }
  MarkClockFd(fd);
  f_owner_ex owner{F_OWNER_TID, tid};
  if (fcntl(fd, F_SETFL, O_ASYNC | O_NONBLOCK) != 0 || fcntl(fd, F_SETSIG, kSampleSignal) != 0 ||
      fcntl(fd, F_SETOWN_EX, &owner) != 0 || ioctl(fd, PERF_EVENT_IOC_ENABLE, 0) != 0) {
    close(fd);
    return -1;
  }
  return fd;
}

SourceChoice ChooseSource(uint64_t period_ns, bool wall) {
  using namespace fieldprof::raw;  // NOLINT: the SampleSource names
  SourceChoice c;
  // fieldprof record samples from outside: here only idle transitions.
  if (const char* s = getenv("FIELDPROF_RECORD_SAMPLES"); s != nullptr && s[0] == '0') {
    c.source = kNoSamples;
    return c;
  }
  // A Go runtime installs its signal handlers with the raw system call,
  // over ours: a sample's signal would reach it (SIGTRAP: a crash; SIGURG:
  // taken for the runtime's own preemption). Step aside; fieldprof record
  // says so.
  if (preload::IsGoProgram()) {
    c.stepped_aside = true;
    c.source = kNoSamples;
    return c;
  }
  if (wall) {
    c.source = kWallTimers;
    return c;
  }
  // --clock timer: task-clock costs each context switch an hrtimer stop
  // and start (about 12 us on this VM), timers cost switches nothing.
  if (const char* clock = getenv("FIELDPROF_RECORD_CLOCK");
      clock != nullptr && strcmp(clock, "timer") == 0) {
    c.source = kThreadTimers;
    return c;
  }
  for (const bool user_only : {false, true}) {
    // kSampleSignal through O_ASYNC first: a synchronous SIGTRAP is cheaper
    // (about 5 us a sample here against 40), but programs reset SIGTRAP
    // behind the wrapped sigaction() (Chromium's children, by the raw
    // system call), and the next sample then kills them.
    for (const bool trap : {false, true}) {
      const int fd = OpenTaskClock(period_ns, user_only, trap);
      if (fd < 0) continue;
      close(fd);
      c.trap = trap;
      c.source = user_only ? kTaskClockUser : kTaskClock;
      return c;
    }
  }
  c.source = kThreadTimers;
  return c;
}

}  // namespace fieldprof::sampler
