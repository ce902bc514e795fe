#include "tools/record/perf_records.h"

#include <algorithm>

namespace fieldprof::tools {

bool ParseSample(const char* rec, uint16_t size, SampleView* s) {
  const char* p = rec + sizeof(perf_event_header);
  const char* end = rec + size;
  uint32_t res = 0;
  if (!ReadField(p, end, &s->ip) || !ReadField(p, end, &s->pid) || !ReadField(p, end, &s->tid) ||
      !ReadField(p, end, &s->time) || !ReadField(p, end, &s->cpu) || !ReadField(p, end, &res) ||
      !ReadField(p, end, &s->period)) {
    return false;
  }
  uint64_t abi = 0;
  if (!ReadField(p, end, &abi)) return false;
  if (abi != PERF_SAMPLE_REGS_ABI_NONE) {
    uint64_t regs[17];  // perf_regs order: ax bx cx dx si di bp sp ip r8..r15
    for (uint64_t& r : regs) {
      if (!ReadField(p, end, &r)) return false;
    }
    // DWARF order.
    static constexpr int kFrom[kDwarfRegs] = {0,  3,  2,  1,  4,  5,  6,  7, 9,
                                              10, 11, 12, 13, 14, 15, 16, 8};
    for (int i = 0; i < kDwarfRegs; ++i) s->dwarf[i] = regs[kFrom[i]];
    s->has_regs = true;
  }
  if (!ReadField(p, end, &s->copied)) return false;
  if (s->copied > 0) {
    if (end - p < static_cast<ptrdiff_t>(s->copied + 8)) return false;
    s->stack = p;
    p += s->copied;
    uint64_t dyn = 0;
    ReadField(p, end, &dyn);
    s->stack_size = std::min(dyn, s->copied);
  }
  return true;
}

}  // namespace fieldprof::tools
