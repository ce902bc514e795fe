// CPU-wide switch records (idle transitions with privileges: CAP_PERFMON, root,
// or perf_event_paranoid <= 0). One perf_event per online CPU with
// context_switch set sees every switch on that CPU, with the task on the
// other side: so it tells when a CPU truly went idle (the next task is the
// idle task, pid 0) and which thread it left idle for. fieldprof record
// collects them from its own process while the command runs and pairs
// them with the recorded threads' waits (recording.h).
#ifndef FIELDPROF_TOOLS_RECORD_CPU_SWITCHES_H_
#define FIELDPROF_TOOLS_RECORD_CPU_SWITCHES_H_

#include <atomic>
#include <cstdint>
#include <memory>
#include <string>
#include <string_view>
#include <thread>
#include <vector>

#include "common/base/status.h"
#include "tools/record/ring_wait.h"

namespace fieldprof::tools {

// A thread next to the idle task on a CPU.
struct CpuIdleRecord {
  uint64_t time_ns = 0;  // CLOCK_MONOTONIC
  uint32_t pid = 0, tid = 0;
  uint32_t cpu = 0;
  uint32_t went_idle = 0;  // 1: the thread left the CPU to the idle task; 0: it came from idle
  uint64_t idle_ns = 0;    // how long the CPU stayed idle (after, or before); 0: unknown
};

struct CpuIdleLog {
  std::vector<CpuIdleRecord> records;  // in order of time
  uint64_t lost = 0;                   // records the kernel could not write (a full ring)
};

class CpuWideSwitches {
 public:
  // One event per online CPU, or the kernel's refusal (PermissionDenied
  // without the privileges above).
  static StatusOr<std::unique_ptr<CpuWideSwitches>> Open();
  ~CpuWideSwitches();
  CpuWideSwitches(const CpuWideSwitches&) = delete;
  CpuWideSwitches& operator=(const CpuWideSwitches&) = delete;

  // Enables the events and drains them every 50 ms, or when a CPU's ring
  // is half full (the kernel's wakeup: 12,500 records).
  void Start();
  // Stops, drains the rest, and pairs each CPU's went-idle with its next
  // came-from-idle for the idle times.
  CpuIdleLog Stop();

 private:
  struct Ring {
    int fd = -1;
    uint32_t cpu = 0;
    void* map = nullptr;
    size_t map_size = 0;
  };
  CpuWideSwitches() = default;
  void Drain();

  std::vector<Ring> rings_;
  std::vector<CpuIdleRecord> records_;
  uint64_t lost_ = 0;
  std::atomic<bool> running_{false};
  RingWait wait_;  // the drainer's, between looks
  std::thread drainer_;
};

// The log as a file in the raw directory, for RecordingFromRawDir.
inline constexpr const char* kCpuIdleFile = "cpu-wide.idle";
std::string EncodeCpuIdleLog(const CpuIdleLog& log);
[[nodiscard]] StatusOr<CpuIdleLog> DecodeCpuIdleLog(std::string_view bytes);

}  // namespace fieldprof::tools

#endif  // FIELDPROF_TOOLS_RECORD_CPU_SWITCHES_H_
