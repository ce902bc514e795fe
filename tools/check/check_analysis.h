// fieldprof check's analysis: a pure function from the local costs and the
// field's, per API, to the findings. No files, no network: the command
// (cmd_check.cc) gathers the inputs (check_inputs.h) and prints the result
// (check_render.h).
//
// Per API with enough local calls: the field at the closest platform level
// that has data (the same class, else widened to the same CPU vendor, the
// same architecture, any platform), a one-sided permutation test of the
// local cost against it (common/statistics/permutation_test.h), then
// Benjamini-Hochberg (or -Yekutieli) across the APIs compared. An API has
// evidence when its adjusted p-value is within the false discovery rate and
// its difference passes both floors: the timing resolution (DifferenceFloor)
// and a fraction of the field's statistic.
#ifndef FIELDPROF_TOOLS_CHECK_CHECK_ANALYSIS_H_
#define FIELDPROF_TOOLS_CHECK_CHECK_ANALYSIS_H_

#include <cstdint>
#include <string>
#include <vector>

#include "common/proto/fieldprof.pb.h"
#include "common/statistics/histogram.h"
#include "common/statistics/permutation_test.h"

namespace fieldprof::tools {

// Platform levels of the field, widest first: kWidened[level] names it.
inline constexpr int kPlatformLevels = 4;
inline constexpr const char* kWidened[kPlatformLevels] = {
    "any platform", "the same architecture", "the same CPU vendor", "the same platform class"};

// How closely a field series' platform matches the local one: 3 the same
// class (arch, vendor, family), 2 arch and vendor, 1 arch, 0 any.
int PlatformCloseness(const wire::Platform& local, const wire::Platform& field);

// One API's local cost: every record of the metric, summed.
struct LocalCost {
  std::string module, symbol;
  Histogram histogram;
  uint64_t runs = 0;
  wire::Platform platform;     // of the first run seen
  std::string file;            // the first record file it is in
  uint64_t resolution_ns = 0;  // wall time: the coarsest resolution of its records
};

// The field's cost of that API at each platform level (level 0 the widest;
// a series counts at every level up to its closeness).
struct FieldCost {
  Histogram by_level[kPlatformLevels];
  uint64_t runs_by_level[kPlatformLevels] = {0, 0, 0, 0};
  uint64_t resolution_ns = 0;
  // Why the field's latest day of it is suspect (wire::Record.suspect, or
  // GET /v1/api's suspect_reason); empty when it is not.
  std::string suspect;
};

// What the analysis needs of the options (check_options.h fills it).
struct AnalysisOptions {
  PermutationOptions test;
  bool wall_time = true;  // the metric is wall time (the resolution floor applies)
  double fdr = 0.05;
  bool dependent = false;  // Benjamini-Yekutieli
  double min_calls = 30;
  double min_effect = 0.05;
  double min_diff_ns = 10;
  double fail_excess = -1;  // exit 1 when an API with evidence has this much excess; -1 never
  double fail_p = -1;       // exit 1 when an API with evidence has adjusted p <= this; -1 never
};

struct Finding {
  std::string module, symbol, file;
  Histogram local, field;
  uint64_t local_runs = 0, field_runs = 0;
  int match = kPlatformLevels - 1;  // the platform level the field was taken at
  PermutationResult test;
  double adjusted = 1;
  double excess = 0;  // (local mean - field mean) x local calls
  // Wall time: the coarser side's resolution (wire::Record.resolution_ns).
  uint64_t resolution_ns = 0;
  bool evidence = false;      // adjusted p <= fdr, and a difference past the floors
  std::string field_suspect;  // FieldCost::suspect
};

struct CheckResult {
  std::vector<Finding> findings;  // every API compared, by excess, largest first
  int no_field = 0;               // APIs the field has no data for
  int few_calls = 0;              // APIs under min_calls locally
  int under_resolution = 0;       // significant, but under the resolution floor
  int under_effect = 0;           // significant, but under min_effect
  bool fail = false;              // fail_excess or fail_p met
};

// One API's local and field costs, as the inputs gathered them.
struct ApiCosts {
  LocalCost local;
  FieldCost field;
};

// The findings. An API with fewer than min_calls local calls is only
// counted (its field need not have been looked up).
CheckResult AnalyzeCosts(const std::vector<ApiCosts>& apis, const AnalysisOptions& o);

}  // namespace fieldprof::tools

#endif  // FIELDPROF_TOOLS_CHECK_CHECK_ANALYSIS_H_
