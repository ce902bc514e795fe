#include "aggregator/store/rocks_status.h"

namespace fieldprof::aggregator {

// What went wrong, without the file names RocksDB's messages carry:
// these messages reach clients, which must not learn server paths. The
// operator's log gets the whole message (MarkBroken).
std::string Describe(const rocksdb::Status& s) {
  if (s.IsNoSpace()) return "no space left on the disk";
  if (s.IsIOError()) return "I/O error";
  if (s.IsCorruption()) return "corruption";
  if (s.IsBusy() || s.IsTimedOut() || s.IsTryAgain()) return "busy";
  if (s.IsInvalidArgument()) return "invalid argument";
  return "RocksDB error (code " + std::to_string(static_cast<int>(s.code())) + ")";
}

Status FromRocks(const rocksdb::Status& s, std::string_view what) {
  if (s.ok()) return Status::Ok();
  std::string m(what);
  m += ": ";
  m += Describe(s);
  if (s.IsCorruption()) return DataLoss(std::move(m));
  if (s.IsNoSpace()) return NoSpace(std::move(m));
  if (s.IsIOError()) return IOError(std::move(m));
  if (s.IsBusy() || s.IsTimedOut() || s.IsTryAgain()) return ResourceExhausted(std::move(m));
  return Internal(std::move(m));
}

}  // namespace fieldprof::aggregator
