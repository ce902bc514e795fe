// A module's field stacks: where CPU time goes inside a library, summed
// over the volunteers' measured runs (stack series, metric stack_cpu_ns;
// docs/field-stacks.md). One model under every output: /v1/stacks, the
// dashboard's and the vendor report's flame graph, `fieldprof stacks`, the
// IDE's hover, `fieldprof diff --versions`.
//
//   std::vector<SeriesSum> series = ...;  // the module's records
//   FieldStacks s = BuildFieldStacks("libsqlite3.so.0", series, {});
//   s.stacks[0].frames, s.stacks[0].ns / s.total_ns
#ifndef FIELDPROF_COMMON_FIELD_STACKS_H_
#define FIELDPROF_COMMON_FIELD_STACKS_H_

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "common/histogram.h"
#include "common/module_model.h"

namespace fieldprof {

// The frames of a stack series' symbol, outermost first.
std::vector<std::string> SplitStack(std::string_view symbol);

// Whether a frame is a mark (the last frame: where the time went on, or
// what was folded: "[libc.so.6]", "[program]", "[other]", ...).
bool IsStackMark(std::string_view frame);

struct FieldStack {
  std::vector<std::string> frames;  // outermost first
  uint64_t ns = 0;                  // CPU time with this stack, all runs
  uint64_t runs = 0;                // runs that had it
  uint64_t machines = 0;            // the most of any series summed into it (estimate)
  Histogram per_run;                // the CPU time of each run that had it
};

struct FieldStacks {
  std::string module;
  std::vector<std::string> versions;  // that contributed, sorted
  std::vector<FieldStack> stacks;     // the most CPU time first, then by frames
  uint64_t total_ns = 0;
  uint64_t machines = 0;  // the most of any series
};

// The module's stack series that `filter` matches (every version unless it
// names one), summed per stack over versions and platforms.
FieldStacks BuildFieldStacks(const std::string& module, const std::vector<SeriesSum>& series,
                             const ModelFilter& filter);

// {"module", "versions", "total_ns", "machines", "stacks": [{"frames",
// "ns", "runs", "machines"}], "stacks_total", "truncated"}: at most `limit`
// stacks (the dearest), the rest counted.
std::string FieldStacksJson(const FieldStacks& s, size_t limit);

// The folded format flame graph tools read (flamegraph.pl, speedscope,
// inferno): "frame;frame;frame NS" per line, the dearest first.
std::string FieldStacksFolded(const FieldStacks& s);

}  // namespace fieldprof

#endif  // FIELDPROF_COMMON_FIELD_STACKS_H_
