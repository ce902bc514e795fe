// Lab profiles: what `fieldprof lab` makes of a scenario's
// passes, and what `lab merge`, `lab show` and `fieldprof check` read.
//
//   census pass ──> LabGraph (every API, which ran inside which)
//                     │ PlanTiming: colour the graph, no two APIs of a
//                     ▼ set ever on one stack
//   timing passes (one per set, --repeat times) ──> BuildProfile
//                     ▼
//   wire::LabProfile: Records in the field's format, time from the timing
//   passes, allocation and I/O from the census; the graph; the passes.
#ifndef FIELDPROF_TOOLS_SHARED_LAB_PROFILE_H_
#define FIELDPROF_TOOLS_SHARED_LAB_PROFILE_H_

#include <cstdint>
#include <cstdio>
#include <map>
#include <string>
#include <utility>
#include <vector>

#include "common/base/status.h"
#include "common/model/lab_format.h"
#include "common/proto/fieldprof.pb.h"

namespace fieldprof::tools {

[[nodiscard]] StatusOr<wire::LabRunRecord> ReadLabRunRecord(const std::string& path);
[[nodiscard]] StatusOr<wire::LabProfile> ReadLabProfile(const std::string& path);
[[nodiscard]] Status WriteLabProfile(const std::string& path, const wire::LabProfile& p);
// Whether the file begins as a lab profile does.
bool IsLabProfileFile(const std::string& path);

// "module:symbol": how a timing plan names an API (the runtime's plan file).
std::string LabApiName(const wire::ApiKey& k);

// The nesting graph: APIs by (module, version, symbol), and the pairs seen
// on one stack, outer beneath inner, with the calls made directly inside.
class LabGraph {
 public:
  uint32_t Add(const wire::ApiKey& k);
  void AddPair(uint32_t outer, uint32_t inner, uint64_t direct_calls);
  void AddRun(const wire::LabRunRecord& r);
  void AddProfile(const wire::LabProfile& p);
  void ToProfile(wire::LabProfile* p) const;

  size_t size() const { return apis_.size(); }
  const wire::ApiKey& api(uint32_t i) const { return apis_[i]; }
  // (outer, inner) -> calls of inner directly inside outer (0: deeper only).
  const std::map<std::pair<uint32_t, uint32_t>, uint64_t>& pairs() const { return pairs_; }
  // The index of module:symbol (any version), or -1.
  int64_t Find(const std::string& module, const std::string& symbol) const;

 private:
  std::vector<wire::ApiKey> apis_;
  std::map<std::string, uint32_t> index_;
  std::map<std::pair<uint32_t, uint32_t>, uint64_t> pairs_;
};

// Sums the records of the metric range [m_lo, m_hi] from `runs` into
// `out`, by key (the Record bytes of the key); runs add up.
void SumRecords(const std::vector<wire::LabRunRecord>& runs, int m_lo, int m_hi,
                std::map<std::string, wire::Record>* out);

// Merges profiles: records of the same key summed, graphs joined, passes
// and scenarios listed.
wire::LabProfile MergeProfiles(const std::vector<wire::LabProfile>& in);

// Where module:symbol sits in a profile's nesting graph: up to three call
// stacks that lead to it through direct pairs, outermost first, the busiest
// first, as module:symbol names (fieldprof check's call-stack view)...
std::vector<std::vector<std::string>> LabStacks(const wire::LabProfile& p,
                                                const std::string& module,
                                                const std::string& symbol);
// ...and printed, one a line ("the program -> a -> b", demangled), each
// line starting with `indent`.
void PrintLabStacks(std::FILE* out, const wire::LabProfile& p, const std::string& module,
                    const std::string& symbol, const std::string& indent);

}  // namespace fieldprof::tools

#endif  // FIELDPROF_TOOLS_SHARED_LAB_PROFILE_H_
