// A run file of `fieldprof points record` as developer mode uploads it
// (wire.DevRun, POST /v1/dev/runs): the command line's `points upload` and
// the agent both make them here.
#ifndef FIELDPROF_COMMON_POINTS_DEV_RUN_H_
#define FIELDPROF_COMMON_POINTS_DEV_RUN_H_

#include <string>

#include "common/base/status.h"
#include "common/points/points_file.h"
#include "common/proto/fieldprof.pb.h"

namespace fieldprof {

// Its id (the first 16 bytes of the file's SHA-256), the program's file
// name ("main" when it is no file name), when it began, its tags, its
// events, and the file itself. InvalidArgument for a file that does not
// read as a run or has no points.
[[nodiscard]] StatusOr<wire::DevRun> DevRunOf(const std::string& path);
// The same from a file's bytes (`what` names it in errors): also a part of
// a file still being written, up to its last whole record.
[[nodiscard]] StatusOr<wire::DevRun> DevRunOfBytes(std::string bytes, const std::string& what);
// All but the id and the file, from a file read so far (a run still being
// written, read on at each look).
[[nodiscard]] StatusOr<wire::DevRun> DevRunOfScan(const fieldprof::PointsScan& scan,
                                                  const std::string& what);

}  // namespace fieldprof

#endif  // FIELDPROF_COMMON_POINTS_DEV_RUN_H_
