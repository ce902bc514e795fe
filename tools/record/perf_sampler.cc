#include "tools/record/perf_sampler.h"

#include <fcntl.h>
#include <linux/perf_event.h>
#include <sched.h>
#include <sys/ioctl.h>
#include <sys/mman.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <ctime>
#include <fstream>
#include <sstream>

#include "common/stacks/sampler_format.h"
#include "tools/record/perf_records.h"

namespace fieldprof::tools {

namespace {

void WriteAll(int fd, const std::string& bytes) {
  for (size_t at = 0; at < bytes.size();) {
    const ssize_t w = write(fd, bytes.data() + at, bytes.size() - at);
    if (w < 0 && errno == EINTR) continue;
    if (w <= 0) return;  // a full disk: the recording ends short, the program is unharmed
    at += static_cast<size_t>(w);
  }
}

// The user registers a sample carries (x86-64's perf_regs numbering): the
// sixteen general registers and the instruction pointer, what DWARF CFI
// can name.
constexpr uint64_t kRegsMask = 0xff01ffull;  // ax..ip (0-8), r8..r15 (16-23)

// The sampling event of one CPU: the task clock, or with `switches` the
// context switches (period 1: a sample at each switch off the CPU, taken
// in the scheduler, so only with kernel events). With `switch_records`,
// the task clock's ring also gets the threads' switch records.
int OpenOne(pid_t pid, int cpu, const PerfSamplerOptions& o, bool kernel, bool switches,
            bool switch_records = false) {
  perf_event_attr a{};
  a.size = sizeof a;
  a.type = PERF_TYPE_SOFTWARE;
  a.config = switches ? PERF_COUNT_SW_CONTEXT_SWITCHES : PERF_COUNT_SW_TASK_CLOCK;
  // A switch sample's period is 1; a task-clock sample's, its nanoseconds
  // (at least 100,000): perf_records.h tells them apart so.
  a.sample_period = switches ? 1 : 1000000000ull / o.hz;
  a.sample_type = PERF_SAMPLE_IP | PERF_SAMPLE_TID | PERF_SAMPLE_TIME | PERF_SAMPLE_CPU |
                  PERF_SAMPLE_PERIOD | PERF_SAMPLE_REGS_USER | PERF_SAMPLE_STACK_USER;
  a.sample_regs_user = kRegsMask;
  a.sample_stack_user = o.stack_bytes;
  a.disabled = 1;
  a.enable_on_exec = 1;
  a.inherit = 1;
  a.exclude_kernel = kernel ? 0 : 1;
  a.exclude_hv = 1;
  a.exclude_callchain_kernel = 1;
  if (!switches) {  // the side records once, on the task clock's event
    a.mmap = 1;
    a.mmap2 = 1;
    a.comm = 1;
    a.comm_exec = 1;
    a.task = 1;
    a.context_switch = switch_records ? 1 : 0;
  }
  a.sample_id_all = 1;
  a.use_clockid = 1;
  a.clockid = CLOCK_MONOTONIC;  // the in-process sampler's clock: one timeline
  // No wakeup watermark of our own: the kernel wakes the copier when a
  // ring is half full, and it looks at a quarter anyway (Open). A wakeup is paid
  // in the sampled program, on its CPU, at the sample that crosses the
  // mark: at 16 KiB (every sample or two) the sqlite3 workload ran 3%
  // slower for it (docs/benchmarks.md, fieldprof record).
  unsigned long flags = PERF_FLAG_FD_CLOEXEC;
  if (o.cgroup_fd >= 0 && cpu >= 0) {
    // On the command's group: the CPU's event sees each of its processes
    // as it runs there, from now on (the command is still before its
    // exec); nothing is inherited. Switch records come as CPU-wide ones.
    pid = o.cgroup_fd;
    flags |= PERF_FLAG_PID_CGROUP;
    a.inherit = 0;
    a.enable_on_exec = 0;
    a.disabled = 0;
  }
  return static_cast<int>(syscall(SYS_perf_event_open, &a, pid, cpu, -1, flags));
}

// The CPUs the kernel may run the command on.
std::vector<int> OnlineCpus() {
  std::vector<int> cpus;
  const long n = sysconf(_SC_NPROCESSORS_CONF);
  for (int c = 0; c < n; ++c) {
    char path[64];
    std::snprintf(path, sizeof path, "/sys/devices/system/cpu/cpu%d/online", c);
    const int fd = open(path, O_RDONLY | O_CLOEXEC);
    if (fd < 0) {  // cpu0 often has no such file: always online
      cpus.push_back(c);
      continue;
    }
    char v = '1';
    if (read(fd, &v, 1) != 1) v = '1';
    close(fd);
    if (v == '1') cpus.push_back(c);
  }
  return cpus;
}

}  // namespace

Status PerfSamplerAvailable(const PerfSamplerOptions& o) {
  int fd = OpenOne(0, -1, o, /*kernel=*/false, /*switches=*/false);
  if (fd < 0) {
    const int e = errno;
    return Unavailable(std::string("perf_event_open: ") + std::strerror(e) +
                       (e == EACCES || e == EPERM
                            ? " (/proc/sys/kernel/perf_event_paranoid is above 2, or perf_event "
                              "is not allowed here)"
                            : ""));
  }
  close(fd);
  return Status();
}

Status PerfWaitsAvailable() {
  const int fd = OpenOne(0, -1, PerfSamplerOptions{}, /*kernel=*/true, /*switches=*/true);
  if (fd < 0) {
    const int e = errno;
    return Unavailable(
        std::string("a context-switch perf_event with kernel events: ") + std::strerror(e) +
        (e == EACCES || e == EPERM ? " (needs CAP_PERFMON, root, or perf_event_paranoid <= 1)"
                                   : ""));
  }
  close(fd);
  return Status();
}

Status PerfOnCgroupAvailable() {
  // A kernel that lists no perf_event line may still have it on cgroup2
  // (the events' own refusal then says otherwise).
  std::ifstream controllers("/proc/cgroups");
  for (std::string line; std::getline(controllers, line);) {
    std::istringstream f(line);
    std::string name;
    int hierarchy = -1, groups = 0, enabled = 0;
    if (f >> name >> hierarchy >> groups >> enabled && name == "perf_event" &&
        (hierarchy != 0 || enabled != 1)) {
      return Unavailable(
          "the kernel's perf_event controller is on a cgroup v1 hierarchy, not cgroup2");
    }
  }
  // The sampling event itself, on a CPU this process may run on (CPU 0 may
  // be offline or not ours), user time only.
  cpu_set_t cpus;
  int cpu = 0;
  if (sched_getaffinity(0, sizeof cpus, &cpus) == 0) {
    while (cpu < CPU_SETSIZE - 1 && !CPU_ISSET(cpu, &cpus)) ++cpu;
  }
  const int fd = OpenOne(-1, cpu, PerfSamplerOptions{}, /*kernel=*/false, /*switches=*/false);
  if (fd < 0) {
    const int e = errno;
    return Unavailable(std::string("perf_events on a whole CPU are refused: ") + std::strerror(e) +
                       (e == EACCES || e == EPERM
                            ? " (they need CAP_PERFMON, root, or perf_event_paranoid <= 0)"
                            : ""));
  }
  close(fd);
  return Status();
}

uint32_t PerfSampleSource(bool kernel_time) {
  return kernel_time ? raw::kPerfOutside : raw::kPerfOutsideUser;
}

StatusOr<std::unique_ptr<PerfSampler>> PerfSampler::Open(pid_t pid, const PerfSamplerOptions& o,
                                                         const std::string& dir) {
  std::unique_ptr<PerfSampler> s(new PerfSampler);
  s->page_ = static_cast<size_t>(sysconf(_SC_PAGESIZE));
  const std::vector<int> cpus = OnlineCpus();
  // The waits first, a context-switch event for each CPU: refused (they
  // need kernel events), the recording has no idle transitions, and says
  // so (fh.idle), and the task clocks carry no switch records.
  std::vector<int> switch_fds;
  const auto drop_waits = [&switch_fds] {
    for (int fd : switch_fds) close(fd);
    switch_fds.clear();
  };
  bool waits = o.waits;
  for (size_t i = 0; waits && i < cpus.size(); ++i) {
    const int fd = OpenOne(pid, cpus[i], o, /*kernel=*/true, /*switches=*/true);
    if (fd >= 0) switch_fds.push_back(fd);
    waits = fd >= 0;
  }
  if (!waits) drop_waits();
  // Kernel time if allowed: a sample in a system call then stands for the
  // user stack that made it, as the in-process task clock counts it. The
  // samples come before the waits: task clocks refused beside the
  // context-switch events (out of descriptors, say) are tried again
  // without them.
  int first_error = 0;
  for (const bool with_waits : {true, false}) {
    if (with_waits != waits) continue;
    for (const bool kernel : {true, false}) {
      if (kernel && o.all_user) continue;
      for (int cpu : cpus) {
        const int fd = OpenOne(pid, cpu, o, kernel, /*switches=*/false, with_waits);
        if (fd < 0) {
          first_error = errno;
          break;
        }
        s->rings_.push_back(Ring{});
        s->rings_.back().fd = fd;
      }
      if (s->rings_.size() == cpus.size()) {
        s->kernel_time_ = kernel;
        break;
      }
      for (Ring& r : s->rings_) close(r.fd);
      s->rings_.clear();
    }
    if (!s->rings_.empty()) break;
    drop_waits();
    waits = false;
  }
  // Each CPU's switch samples go into its one ring (SET_OUTPUT, once the
  // rings are mapped), in time order with the rest.
  for (size_t i = 0; i < switch_fds.size() && i < s->rings_.size(); ++i) {
    s->rings_[i].switch_fd = switch_fds[i];
  }
  s->waits_ = waits && !s->rings_.empty();
  if (s->rings_.empty()) {
    return Unavailable(std::string("the kernel refused perf_event sampling of the command (") +
                       std::strerror(first_error) +
                       (first_error == EACCES || first_error == EPERM
                            ? "; /proc/sys/kernel/perf_event_paranoid is above 2, or perf_event "
                              "is not allowed here"
                            : "") +
                       ")");
  }
  // Rings as large as the locked-memory allowance gives (root: 1 MiB a
  // CPU; a user's perf_event_mlock_kb is 516 KiB over all of them).
  // With the waits, a stack copy at every switch too (a ping-pong of two
  // threads switches 100,000 times a second, half of them preemptions):
  // up to 4 MiB a CPU, as the allowance gives.
  for (size_t pages = s->waits_ ? 1024 : 256; pages >= 8; pages /= 2) {
    bool all = true;
    for (Ring& r : s->rings_) {
      void* p = mmap(nullptr, (pages + 1) * s->page_, PROT_READ | PROT_WRITE, MAP_SHARED, r.fd, 0);
      if (p == MAP_FAILED) {
        all = false;
        break;
      }
      r.base = p;
      r.size = pages * s->page_;
    }
    if (all) break;
    for (Ring& r : s->rings_) {
      if (r.base != nullptr) munmap(r.base, r.size + s->page_);
      r.base = nullptr;
      r.size = 0;
    }
  }
  if (s->rings_.front().base == nullptr) {
    return Unavailable("cannot map perf_event rings: " + std::string(std::strerror(errno)) +
                       " (locked memory: ulimit -l, /proc/sys/kernel/perf_event_mlock_kb)");
  }
  // The kernel wakes the copier when a ring is half full; besides that it
  // looks twice in the time a busy CPU takes to fill half a ring, so that
  // a ring is drained a quarter full and three quarters stay for a copier
  // the machine keeps waiting. At most every 50 ms (it was 10): 1 MiB
  // rings and 12 KiB stacks at 999 Hz fill half a ring in about 40 ms, so
  // it looks every 20; 64 KiB stacks, or the small rings of a user's
  // locked-memory allowance, every few. Each look is a wakeup on some CPU,
  // perhaps the program's (docs/benchmarks.md, fieldprof record).
  for (Ring& r : s->rings_) {
    if (r.switch_fd >= 0 && ioctl(r.switch_fd, PERF_EVENT_IOC_SET_OUTPUT, r.fd) != 0) {
      return Unavailable("cannot send the context-switch samples to their CPU's ring: " +
                         std::string(std::strerror(errno)));
    }
  }
  const double bytes_per_ms =
      (static_cast<double>(o.stack_bytes) + 512) * static_cast<double>(o.hz) / 1000;
  const double half_ms = static_cast<double>(s->rings_.front().size) / 2 / bytes_per_ms;
  s->poll_ms_ = static_cast<int>(std::clamp(half_ms / 2, 1.0, 50.0));
  for (size_t i = 0; i < s->rings_.size(); ++i) {
    Ring& r = s->rings_[i];
    const std::string path = dir + "/cpu" + std::to_string(i) + ".perf";
    r.out = open(path.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);
    if (r.out < 0) {
      return IOError("cannot create " + path + ": " + std::strerror(errno));
    }
    r.buffer.reserve(1 << 20);
  }
  return s;
}

PerfSampler::~PerfSampler() {
  Stop();
  for (Ring& r : rings_) {
    if (r.base != nullptr) munmap(r.base, r.size + page_);
    if (r.switch_fd >= 0) close(r.switch_fd);
    if (r.fd >= 0) close(r.fd);
    if (r.out >= 0) close(r.out);
  }
}

void PerfSampler::Start() {
  if (started_) return;
  started_ = true;
  for (const Ring& r : rings_) wait_.Add(r.fd);
  thread_ = std::thread([this] { Loop(); });
}

void PerfSampler::Stop() {
  if (started_) {
    stop_ = true;
    wait_.Wake();
    thread_.join();
    started_ = false;
  }
  DrainAll();
  for (Ring& r : rings_) {
    Filter(r, /*last=*/true);  // a switch sample held back, whatever follows
    if (r.out >= 0 && !r.buffer.empty()) {
      WriteAll(r.out, r.buffer);
      r.buffer.clear();
    }
    if (r.out >= 0) {
      close(r.out);
      r.out = -1;
    }
  }
}

void PerfSampler::Loop() {
  while (!stop_.load(std::memory_order_relaxed)) {
    // The rings fill at up to ~12 MB a CPU-second (12 KiB a sample at
    // 999 Hz): the kernel's wakeup at half a ring, or every poll_ms_ (Open).
    wait_.Wait(poll_ms_);
    DrainAll();
  }
}

bool PerfSampler::DrainAll() {
  bool any = false;
  for (Ring& r : rings_) {
    const uint64_t before = bytes_;
    Drain(r);
    any |= bytes_ != before;
  }
  return any;
}

namespace {

// The sample `rec` (parsed: `s`) onto `out`, its stack copy cut to the
// bytes that held stack (dyn_size, rounded up to 8): most of a 12 KiB copy
// is past the top of a shallow stack. Cut to nothing, the size word alone
// stays, as the kernel writes an empty copy (no dyn_size after it).
void AppendTrimmed(const char* rec, uint16_t size, const SampleView& s, std::string* out) {
  const uint64_t kept = std::min(s.copied, (s.stack_size + 7) & ~uint64_t{7});
  if (s.stack == nullptr || kept == s.copied) {
    out->append(rec, size);
    return;
  }
  const char* copy_end = s.stack + s.copied + 8;  // past the dyn_size word
  perf_event_header h;
  std::memcpy(&h, rec, sizeof h);
  h.size = static_cast<uint16_t>(size - (s.copied - kept) - (kept == 0 ? 8 : 0));
  out->append(reinterpret_cast<const char*>(&h), sizeof h);
  out->append(rec + sizeof h, static_cast<size_t>(s.stack - 8 - (rec + sizeof h)));
  out->append(reinterpret_cast<const char*>(&kept), 8);
  out->append(s.stack, kept);
  if (kept != 0) out->append(s.stack + s.copied, 8);  // dyn_size
  out->append(copy_end, static_cast<size_t>(rec + size - copy_end));
}

}  // namespace

void PerfSampler::Filter(Ring& r, bool last) {
  const std::string& in = r.held;
  size_t at = 0;
  while (at + sizeof(perf_event_header) <= in.size()) {
    perf_event_header h;
    std::memcpy(&h, in.data() + at, sizeof h);
    if (h.size < sizeof h || at + h.size > in.size()) break;  // the kernel writes whole records
    const char* rec = in.data() + at;
    SampleView s;
    if (h.type != PERF_RECORD_SAMPLE || !ParseSample(rec, h.size, &s)) {
      r.buffer.append(rec, h.size);
      if (h.type == PERF_RECORD_SWITCH_CPU_WIDE && h.size >= sizeof h + 8) {
        // Sampled on the command's cgroup: the task on the other side of
        // the switch may be anyone's, and is nobody's business here.
        std::memset(r.buffer.data() + r.buffer.size() - h.size + sizeof h, 0, 8);
      }
      at += h.size;
      continue;
    }
    // A switch sample is written by the scheduler just before the switch
    // record that says whether it was a wait.
    if (waits_ && s.period == 1) {
      const size_t next = at + h.size;
      perf_event_header nh{};
      if (next + sizeof nh > in.size()) {
        if (!last) break;  // held for the next look
      } else {
        std::memcpy(&nh, in.data() + next, sizeof nh);
        if ((nh.type == PERF_RECORD_SWITCH || nh.type == PERF_RECORD_SWITCH_CPU_WIDE) &&
            (nh.misc & PERF_RECORD_MISC_SWITCH_OUT) != 0 &&
            (nh.misc & PERF_RECORD_MISC_SWITCH_OUT_PREEMPT) != 0) {
          at = next;  // a preemption: no wait, no stack to keep
          continue;
        }
      }
    }
    AppendTrimmed(rec, h.size, s, &r.buffer);
    at += h.size;
  }
  r.held.erase(0, at);
}

void PerfSampler::Drain(Ring& r) {
  if (r.base == nullptr) return;
  auto* meta = static_cast<perf_event_mmap_page*>(r.base);
  const uint64_t head = __atomic_load_n(&meta->data_head, __ATOMIC_ACQUIRE);
  const uint64_t tail = meta->data_tail;
  if (head == tail) return;
  const char* data = static_cast<const char*>(r.base) + page_;
  const uint64_t mask = r.size - 1;
  // The records between tail and head, in order, as bytes (a record may
  // wrap around the ring's end).
  for (uint64_t at = tail; at < head;) {
    const uint64_t off = at & mask;
    const uint64_t n = std::min<uint64_t>(head - at, r.size - off);
    r.held.append(data + off, n);
    at += n;
  }
  __atomic_store_n(&meta->data_tail, head, __ATOMIC_RELEASE);
  Filter(r, /*last=*/false);
  bytes_ += r.buffer.size();
  // Written at once (a write a look a CPU at most, Open): a live `record
  // show` and a recovery after a kill see every ring up to the same
  // moment. Held back, one ring's mmap records stayed in memory while
  // another's samples were on disk, and the samples read unsymbolised.
  WriteAll(r.out, r.buffer);
  r.buffer.clear();
}

}  // namespace fieldprof::tools
