// fieldprof record's sampler from outside: task-clock
// perf_events on the recorded command, opened by fieldprof record itself
// while the command waits before its exec, and inherited by every thread
// and process it starts. Each sample carries the user registers and a copy
// of the top of the user stack (as `perf record --call-graph dwarf` takes
// them), unwound afterwards with elfutils. Nothing runs inside the
// program: statically linked programs, programs that drop LD_PRELOAD or
// own their signals (Go, Chromium), and each process's own startup before
// its dynamic linker is done are sampled as the rest.
//
// While the command runs, a thread copies the kernel's per-CPU rings into
// one file per CPU; UnwindPerfSamples() then turns those files into the
// raw files the in-process sampler writes (raw_format.h), one per process
// image, so the recording is made the same way from either.
#ifndef FIELDPROF_TOOLS_RECORD_PERF_SAMPLER_H_
#define FIELDPROF_TOOLS_RECORD_PERF_SAMPLER_H_

#include <sys/types.h>

#include <atomic>
#include <cstdint>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "common/base/status.h"
#include "tools/record/ring_wait.h"

namespace fieldprof::tools {

struct PerfSamplerOptions {
  uint32_t hz = 999;             // samples per second of CPU time
  uint32_t stack_bytes = 12288;  // of user stack copied with each sample
  bool all_user = false;         // user time only, even where kernel time is allowed
  // Also each thread's idle transitions from outside: its switch records
  // (PERF_RECORD_SWITCH) and, at each switch off the CPU, its registers
  // and user stack (a context-switch event of period 1), as `perf record
  // -e cs --switch-events --call-graph dwarf` takes them. Needs kernel
  // events (root, CAP_PERFMON, perf_event_paranoid <= 1): the kernel takes
  // the sample in the scheduler.
  bool waits = false;
  // The command's own cgroup (command_cgroup.h), open, or -1: then one
  // event per CPU on the group, copied into none of its processes,
  // instead of events on the command that each process inherits.
  int cgroup_fd = -1;
};

// Whether the kernel lets this process sample its own children so (a
// probe on itself): perf_event_paranoid, seccomp, containers.
[[nodiscard]] Status PerfSamplerAvailable(const PerfSamplerOptions& options);

// Whether the kernel lets this process take the waits from outside
// (PerfSamplerOptions::waits): a context-switch event with kernel events.
[[nodiscard]] Status PerfWaitsAvailable();

// Whether the kernel lets this process sample a cgroup's processes
// (PerfSamplerOptions::cgroup_fd): the perf_event controller on the
// cgroup2 hierarchy (not bound to a v1 one, as /proc/cgroups tells), and
// events on a whole CPU allowed (CAP_PERFMON, root, perf_event_paranoid
// <= 0), which an event on a group is.
[[nodiscard]] Status PerfOnCgroupAvailable();

class PerfSampler {
 public:
  // Opens a sampling event on `pid` for each online CPU, to start at its
  // next exec (on options.cgroup_fd instead, where `pid` is, from now
  // on), and the files in `dir` the rings are copied to. With
  // kernel time where the kernel allows it (root, CAP_PERFMON,
  // perf_event_paranoid <= 1), else user time only.
  [[nodiscard]] static StatusOr<std::unique_ptr<PerfSampler>> Open(
      pid_t pid, const PerfSamplerOptions& options, const std::string& dir);
  ~PerfSampler();
  PerfSampler(const PerfSampler&) = delete;
  PerfSampler& operator=(const PerfSampler&) = delete;

  // The copying thread.
  void Start();
  // Once the command has ended: the rings' last records, and the files
  // closed. Safe to call twice.
  void Stop();

  bool kernel_time() const { return kernel_time_; }
  // Whether the rings carry the threads' waits (options.waits, allowed).
  bool waits() const { return waits_; }
  // Bytes written to the files.
  uint64_t bytes_copied() const { return bytes_; }

 private:
  struct Ring {
    int fd = -1;
    int switch_fd = -1;  // the CPU's context-switch event, into this ring
    void* base = nullptr;
    size_t size = 0;     // data part, a power of two
    int out = -1;        // the CPU's file
    std::string held;    // copied from the ring, not yet filtered (Filter)
    std::string buffer;  // filtered, for the file
  };
  PerfSampler() = default;
  bool DrainAll();  // whether any ring had records
  void Drain(Ring& r);
  // The ring's records in `r.held` onto `r.buffer`, as they go to its
  // file: each sample's stack copy cut to the bytes the kernel found on
  // the stack, and a switch sample dropped when the switch record after
  // it says the thread was preempted (no wait). A switch sample whose
  // record is not in yet stays held, unless it is the end (`last`).
  void Filter(Ring& r, bool last);
  void Loop();

  std::vector<Ring> rings_;
  size_t page_ = 4096;
  int poll_ms_ = 50;  // how often the copier looks at the rings (Open)
  RingWait wait_;     // the copier's, between looks
  bool kernel_time_ = false;
  bool waits_ = false;
  std::atomic<bool> stop_{false};
  std::thread thread_;
  bool started_ = false;
  uint64_t bytes_ = 0;
};

// What UnwindPerfSamples found.
struct PerfUnwindSummary {
  uint64_t samples = 0;
  uint64_t lost = 0;       // records the kernel could not write (a full ring)
  uint64_t unwound = 0;    // samples with more than their own frame
  uint64_t processes = 0;  // process images (a process's exec starts another)
};

// The sample source the raw files carry for samples taken from outside.
uint32_t PerfSampleSource(bool kernel_time);

// Reads the files PerfSampler copied into `dir` and writes, in `out_dir`,
// one raw file per process image (`perf-<pid>-<n>.raw`): its modules (from
// the kernel's mmap records) and its samples, each unwound from the copied
// registers and stack through the modules' CFI (elfutils; frame pointers
// where there is none, as in JIT code). With the waits taken from outside
// (PerfSamplerOptions::waits), each file also holds its threads' switch
// records and, for each switch off the CPU that was a wait, the stack it
// waited at, as the in-program sampler writes them. `hz` is the rate
// asked; `idle`: whether idle transitions were recorded, from outside or
// by the sampler in the programs (each file says so: the sampler leaves
// none for a process that never waited).
[[nodiscard]] StatusOr<PerfUnwindSummary> UnwindPerfSamples(const std::string& dir,
                                                            const std::string& out_dir, uint32_t hz,
                                                            bool kernel_time, bool idle);

}  // namespace fieldprof::tools

#endif  // FIELDPROF_TOOLS_RECORD_PERF_SAMPLER_H_
