// The records of fieldprof record's perf_event rings as the kernel writes
// them for the sample_type perf_sampler.cc asks (IP, TID, TIME, CPU,
// PERIOD, REGS_USER, STACK_USER), read in place: by the copier, which
// trims them on their way to the files (perf_sampler.cc), and by the
// unwinder (perf_unwind.cc).
#ifndef FIELDPROF_TOOLS_RECORD_PERF_RECORDS_H_
#define FIELDPROF_TOOLS_RECORD_PERF_RECORDS_H_

#include <linux/perf_event.h>

#include <cstddef>
#include <cstdint>
#include <cstring>

namespace fieldprof::tools {

inline constexpr int kDwarfRegs = 17;  // x86-64: rax rdx rcx rbx rsi rdi rbp rsp r8-r15, rip

// A field of a record at `p`, which moves past it; false past `end`.
template <typename T>
bool ReadField(const char*& p, const char* end, T* out) {
  if (end - p < static_cast<ptrdiff_t>(sizeof(T))) return false;
  std::memcpy(out, p, sizeof(T));
  p += sizeof(T);
  return true;
}

// A sample, its registers in DWARF order. A context-switch sample's
// period is 1; a task-clock sample's, its nanoseconds (at least 100,000).
struct SampleView {
  uint64_t ip = 0, time = 0, period = 0;
  uint32_t pid = 0, tid = 0, cpu = 0;
  bool has_regs = false;
  uint64_t dwarf[kDwarfRegs] = {};
  // The stack copy: `copied` bytes at `stack` (a size word before them, a
  // dyn_size word after), of which `stack_size` held stack.
  const char* stack = nullptr;
  uint64_t copied = 0;
  uint64_t stack_size = 0;
};

bool ParseSample(const char* rec, uint16_t size, SampleView* s);

}  // namespace fieldprof::tools

#endif  // FIELDPROF_TOOLS_RECORD_PERF_RECORDS_H_
