#include "tools/record/cpu_switches.h"

#include <linux/perf_event.h>
#include <sys/ioctl.h>
#include <sys/mman.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <map>

#include "common/base/encoding.h"

namespace fieldprof::tools {

namespace {

constexpr size_t kDataPages = 256;  // 1 MiB a CPU: some 25,000 switch records
constexpr char kIdleMagic[] = "FPCPUIDLE1\n";

// PERF_RECORD_SWITCH_CPU_WIDE with sample_id_all (TID, TIME, CPU).
struct SwitchRecord {
  perf_event_header h;
  uint32_t next_prev_pid, next_prev_tid;
  uint32_t pid, tid;
  uint64_t time;
  uint32_t cpu, reserved;
};

}  // namespace

StatusOr<std::unique_ptr<CpuWideSwitches>> CpuWideSwitches::Open() {
  std::unique_ptr<CpuWideSwitches> s(new CpuWideSwitches());
  const long cpus = sysconf(_SC_NPROCESSORS_ONLN);
  const size_t page = static_cast<size_t>(sysconf(_SC_PAGESIZE));
  for (long cpu = 0; cpu < cpus; ++cpu) {
    perf_event_attr a{};
    a.size = sizeof a;
    a.type = PERF_TYPE_SOFTWARE;
    a.config = PERF_COUNT_SW_DUMMY;
    a.context_switch = 1;
    a.sample_id_all = 1;
    a.sample_type = PERF_SAMPLE_TID | PERF_SAMPLE_TIME | PERF_SAMPLE_CPU;
    a.use_clockid = 1;
    a.clockid = CLOCK_MONOTONIC;  // the samples' clock
    a.disabled = 1;
    const int fd = static_cast<int>(syscall(SYS_perf_event_open, &a, -1, static_cast<int>(cpu), -1,
                                            static_cast<unsigned long>(PERF_FLAG_FD_CLOEXEC)));
    if (fd < 0) {
      const int e = errno;
      if (e == EACCES || e == EPERM) {
        return Unsupported(
            "CPU-wide switch records need CAP_PERFMON (or root, or "
            "kernel.perf_event_paranoid <= 0)");
      }
      return IOError("perf_event_open on CPU " + std::to_string(cpu) + ": " + std::strerror(e));
    }
    Ring r;
    r.fd = fd;
    r.cpu = static_cast<uint32_t>(cpu);
    r.map_size = (1 + kDataPages) * page;
    r.map = mmap(nullptr, r.map_size, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
    if (r.map == MAP_FAILED) {
      const int e = errno;
      close(fd);
      return IOError("mapping CPU " + std::to_string(cpu) +
                     "'s switch records: " + std::strerror(e));
    }
    s->rings_.push_back(r);
  }
  return s;
}

CpuWideSwitches::~CpuWideSwitches() {
  if (running_) Stop();
  for (Ring& r : rings_) {
    munmap(r.map, r.map_size);
    close(r.fd);
  }
}

void CpuWideSwitches::Start() {
  for (Ring& r : rings_) ioctl(r.fd, PERF_EVENT_IOC_ENABLE, 0);
  running_ = true;
  for (const Ring& r : rings_) wait_.Add(r.fd);
  // Every 50 ms, or at the kernel's wakeup when a ring is half full. Each
  // look of the drainer is a switch of its own on some CPU, so a tighter
  // cadence (it was 5 ms) showed in the recorded program's time.
  drainer_ = std::thread([this] {
    while (running_.load(std::memory_order_relaxed)) {
      Drain();
      wait_.Wait(50);
    }
  });
}

// Copies each ring's new records out, keeping the switches with the idle
// task on the other side.
void CpuWideSwitches::Drain() {
  for (Ring& r : rings_) {
    auto* meta = static_cast<perf_event_mmap_page*>(r.map);
    const uint64_t head = __atomic_load_n(&meta->data_head, __ATOMIC_ACQUIRE);
    uint64_t tail = meta->data_tail;
    const uint64_t size = meta->data_size;
    const char* data = static_cast<const char*>(r.map) + meta->data_offset;
    while (tail < head) {
      perf_event_header h;
      auto copy = [&](void* to, uint64_t at, size_t n) {
        for (size_t i = 0; i < n; ++i) static_cast<char*>(to)[i] = data[(at + i) % size];
      };
      copy(&h, tail, sizeof h);
      if (h.size == 0) break;
      if (h.type == PERF_RECORD_SWITCH_CPU_WIDE && h.size >= sizeof(SwitchRecord)) {
        SwitchRecord s;
        copy(&s, tail, sizeof s);
        const bool out = (h.misc & PERF_RECORD_MISC_SWITCH_OUT) != 0;
        if (s.next_prev_pid == 0 && s.pid != 0) {
          records_.push_back({s.time, s.pid, s.tid, s.cpu, out ? 1u : 0u, 0});
        }
      } else if (h.type == PERF_RECORD_LOST) {
        uint64_t lost[2];
        copy(lost, tail + sizeof h, sizeof lost);
        lost_ += lost[1];
      }
      tail += h.size;
    }
    __atomic_store_n(&meta->data_tail, tail, __ATOMIC_RELEASE);
  }
}

CpuIdleLog CpuWideSwitches::Stop() {
  if (running_.exchange(false)) {
    wait_.Wake();
    drainer_.join();
    for (Ring& r : rings_) ioctl(r.fd, PERF_EVENT_IOC_DISABLE, 0);
    Drain();
  }
  CpuIdleLog log;
  log.lost = lost_;
  log.records = std::move(records_);
  std::stable_sort(
      log.records.begin(), log.records.end(),
      [](const CpuIdleRecord& a, const CpuIdleRecord& b) { return a.time_ns < b.time_ns; });
  // Each CPU's idle periods: from a went-idle to that CPU's next
  // came-from-idle, whoever it ran.
  std::map<uint32_t, size_t> idle_since;  // cpu -> its open went-idle record
  for (size_t i = 0; i < log.records.size(); ++i) {
    CpuIdleRecord& rec = log.records[i];
    if (rec.went_idle != 0) {
      idle_since[rec.cpu] = i;
      continue;
    }
    auto it = idle_since.find(rec.cpu);
    if (it == idle_since.end()) continue;
    CpuIdleRecord& began = log.records[it->second];
    rec.idle_ns = began.idle_ns = rec.time_ns - began.time_ns;
    idle_since.erase(it);
  }
  return log;
}

std::string EncodeCpuIdleLog(const CpuIdleLog& log) {
  std::string out(kIdleMagic, sizeof kIdleMagic - 1);
  PutVarint(&out, log.lost);
  PutVarint(&out, log.records.size());
  for (const CpuIdleRecord& r : log.records) {
    for (uint64_t v : {r.time_ns, uint64_t{r.pid}, uint64_t{r.tid}, uint64_t{r.cpu},
                       uint64_t{r.went_idle}, r.idle_ns}) {
      PutVarint(&out, v);
    }
  }
  return out;
}

StatusOr<CpuIdleLog> DecodeCpuIdleLog(std::string_view in) {
  if (in.substr(0, sizeof kIdleMagic - 1) != std::string_view(kIdleMagic, sizeof kIdleMagic - 1)) {
    return DataLoss("not a CPU-wide idle log");
  }
  in.remove_prefix(sizeof kIdleMagic - 1);
  CpuIdleLog log;
  uint64_t n = 0;
  if (!GetVarint(&in, &log.lost) || !GetVarint(&in, &n) || n > in.size()) {
    return DataLoss("CPU-wide idle log: bad header");
  }
  log.records.resize(n);
  for (CpuIdleRecord& r : log.records) {
    uint64_t v[6];
    for (uint64_t& x : v) {
      if (!GetVarint(&in, &x)) return DataLoss("CPU-wide idle log: truncated");
    }
    r = {v[0],
         static_cast<uint32_t>(v[1]),
         static_cast<uint32_t>(v[2]),
         static_cast<uint32_t>(v[3]),
         static_cast<uint32_t>(v[4] != 0),
         v[5]};
  }
  return log;
}

}  // namespace fieldprof::tools
