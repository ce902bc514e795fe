// Developer mode: a program's developers upload the per-run
// detail of its instrumentation points and read it back; nobody else can.
//   POST /v1/dev/runs        a wire.DevUpload (protobuf, at most 1 MiB),
//                            "Authorization: Bearer <developer token>":
//                            200 {"runs","duplicates"} once every run is
//                            durable; a run kept already counts as a
//                            duplicate and changes nothing
//   GET  /v1/dev/tags        the developer's tags per program, the most
//                            recently run first
//   GET  /v1/dev/runs?tag=T[&program=P][&from=DAY&to=DAY]
//                            the developer's runs with tag T that began in
//                            those days (UTC, both included), oldest first
//   GET  /v1/dev/runs/{id}   one run's file, as `fieldprof points record`
//                            wrote it
//   GET  /v1/dev/report?tag=T[&program=P][&from=DAY&to=DAY]
//                            those runs analysed as `fieldprof points show
//                            --json` does (common/points/points_analysis.h): per
//                            segment, each run's value, dirty runs removed;
//                            each run's "file" is its id. At most 5,000 runs
//                            and 256 MiB of run files.
// Without a developer's token every endpoint answers 401; a run of a
// program the developer is not registered for, 403. Another developer's
// run is 404, like one that does not exist. Developers are named in the
// developers file (--developers_file), NAME TOKEN PROGRAM[,PROGRAM...]
// with '*' globs, apart from the vendors; only the tokens' SHA-256 digests
// are kept. Without a dev store every endpoint answers 404.
#ifndef FIELDPROF_AGGREGATOR_DEV_DEV_HANDLER_H_
#define FIELDPROF_AGGREGATOR_DEV_DEV_HANDLER_H_

#include <string_view>
#include <vector>

#include "aggregator/http/http_types.h"
#include "aggregator/ingest/ingest_handler.h"
#include "aggregator/reads/vendor_access.h"
#include "aggregator/store/dev_store.h"
#include "common/points/points_file.h"

namespace fieldprof::aggregator {

using Developer = Vendor;  // name, token digest, program globs

class DevHandler {
 public:
  // `store` (may be null: no developer mode) must outlive the handler.
  DevHandler(DevStore* store, std::vector<Developer> developers, WallClock clock)
      : store_(store), developers_(std::move(developers)), clock_(std::move(clock)) {}

  HttpResponse Upload(std::string_view authorization, std::string_view body);
  HttpResponse Tags(std::string_view authorization);
  HttpResponse Runs(std::string_view authorization, std::string_view query);
  HttpResponse Run(std::string_view authorization, std::string_view id);
  HttpResponse Report(std::string_view authorization, std::string_view query);
  // Two groups of a tag's runs (tag=, program=, from=, to= for A; B's
  // b_program= (A's when absent), b_from=, b_to=) compared segment by
  // segment, as `fieldprof points compare` does.
  HttpResponse Compare(std::string_view authorization, std::string_view query);

 private:
  // The developer the header's token is, or null.
  const Developer* Who(std::string_view authorization) const;
  // The runs a query names (tag=, program=, from=, to=), as listed; with
  // `stacks`, the query may also ask for the stacks (stacks=1).
  StatusOr<std::vector<DevRunInfo>> Query(const Developer& who, std::string_view query,
                                          std::string* tag, bool* stacks = nullptr);
  // The runs of `tag` and `program` ("": any) begun in the days [from, to]
  // (YYYY-MM-DD, UTC; "": unbounded).
  StatusOr<std::vector<DevRunInfo>> Select(const Developer& who, const std::string& tag,
                                           const std::string& program, const std::string& from,
                                           const std::string& to);
  // The listed runs read and decoded; bounded in runs and bytes.
  StatusOr<std::vector<fieldprof::PointsRun>> Load(const Developer& who,
                                                   const std::vector<DevRunInfo>& listed);

  DevStore* const store_;
  const std::vector<Developer> developers_;
  const WallClock clock_;
};

}  // namespace fieldprof::aggregator

#endif  // FIELDPROF_AGGREGATOR_DEV_DEV_HANDLER_H_
