// fieldprof check's inputs: the local costs (run records, lab profiles, or
// the runs of a command made here) and the field's costs (the snapshot
// cache's index, or an aggregator's query API).
#ifndef FIELDPROF_TOOLS_CHECK_CHECK_INPUTS_H_
#define FIELDPROF_TOOLS_CHECK_CHECK_INPUTS_H_

#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "common/base/status.h"
#include "common/net/https_client.h"
#include "common/proto/fieldprof.pb.h"
#include "common/snapshot/snapshot_index.h"
#include "tools/check/check_analysis.h"
#include "tools/check/check_options.h"

namespace fieldprof::tools {

// Runs `fieldprof run` on the command `repeat` times, measuring `apis`,
// into `spool`. The command's output is shown once, for the first run
// (its stdout to `out_fd`). Returns the runs that failed to start or
// exited non-zero, said on stderr.
// Profiles the command with `fieldprof lab --repeat REPEAT` into
// `profile` (the census run's stdout to `out_fd`): every API it calls.
// Returns lab's exit code (0; 1 some run exited unlike the census, the
// profile written; 3 nothing observed).
int ProfileCommandInLab(const std::vector<std::string>& cmd, int repeat, const std::string& profile,
                        int out_fd);

int RunCommandMeasured(const std::vector<std::string>& cmd, const std::string& apis, int repeat,
                       const std::string& spool, int out_fd);

struct LocalInputs {
  std::vector<LocalCost> apis;             // by (module, symbol)
  std::vector<wire::LabProfile> profiles;  // for the call-stack view
  int bad_files = 0;                       // said on stderr, skipped
  size_t files = 0;                        // record files read
};

// Every record of `metric` in `files` (run records or lab profiles),
// summed per API.
LocalInputs ReadLocalCosts(const std::vector<std::string>& files, wire::Metric metric);

// The field: the cache's index, or an aggregator's GET /v1/api, one request
// per platform level until one has data.
class FieldSource {
 public:
  // Opens what `o` names. NotFound when the cache has no snapshot.
  [[nodiscard]] static StatusOr<std::unique_ptr<FieldSource>> Open(const CheckOptions& o);
  // The field's cost of `local`'s API at every platform level.
  [[nodiscard]] Status Lookup(const LocalCost& local, FieldCost* out);

 private:
  FieldSource(const CheckOptions& o) : o_(o) {}
  Status LookupRemote(const LocalCost& local, FieldCost* out);
  Status LookupCache(const LocalCost& local, FieldCost* out);
  const CheckOptions& o_;
  std::optional<SnapshotIndex> index_;
  std::optional<HttpsClient> http_;
};

}  // namespace fieldprof::tools

#endif  // FIELDPROF_TOOLS_CHECK_CHECK_INPUTS_H_
