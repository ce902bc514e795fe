#include "common/spool/spool_sealer.h"

#include <sys/stat.h>

#include <algorithm>
#include <filesystem>
#include <random>

#include "common/base/durable_file.h"
#include "common/wire/validate.h"
#include "common/wire/wire.h"

namespace fieldprof {

namespace {

constexpr std::string_view kHeldPrefix = "stacks-";
constexpr std::string_view kHeldSuffix = ".held";

bool IsStack(const wire::Record& r) { return r.key().metric() == wire::METRIC_STACK_CPU_NS; }

// "stacks-<oldest ms, 13 digits>-<16 hex digits>.held": sorts oldest first.
std::string HeldName(int64_t oldest_ms) {
  std::string ms = std::to_string(std::max<int64_t>(oldest_ms, 0));
  if (ms.size() < 13) ms.insert(0, 13 - ms.size(), '0');
  std::random_device rd;
  const uint64_t r = (static_cast<uint64_t>(rd()) << 32) | rd();
  char hex[17];
  std::snprintf(hex, sizeof hex, "%016llx", static_cast<unsigned long long>(r));
  return std::string(kHeldPrefix) + ms + "-" + hex + std::string(kHeldSuffix);
}

}  // namespace

StatusOr<std::vector<std::string>> ListHeld(const std::string& dir) {
  std::vector<std::string> out;
  std::error_code ec;
  std::filesystem::directory_iterator it(dir, ec);
  if (ec == std::errc::no_such_file_or_directory) return out;
  if (ec) return IOError("cannot read " + dir + ": " + ec.message());
  for (const auto& e : it) {
    const std::string name = e.path().filename().string();
    if (name.size() <= kHeldPrefix.size() + kHeldSuffix.size() ||
        name.compare(0, kHeldPrefix.size(), kHeldPrefix) != 0 ||
        name.compare(name.size() - kHeldSuffix.size(), kHeldSuffix.size(), kHeldSuffix) != 0 ||
        name.find(".tmp-") != std::string::npos) {
      continue;
    }
    out.push_back(name);
  }
  std::sort(out.begin(), out.end());
  return out;
}

wire::RunRecord SplitRun(const wire::RunRecord& run, bool stacks) {
  wire::RunRecord part = run;
  auto* records = part.mutable_records();
  records->erase(std::remove_if(records->begin(), records->end(),
                                [&](const wire::Record& x) { return IsStack(x) != stacks; }),
                 records->end());
  return part;
}

StatusOr<wire::Batch> ReadHeld(const std::string& path) {
  struct stat st;
  if (::stat(path.c_str(), &st) != 0) return NotFound(path + ": no such file");
  if (!S_ISREG(st.st_mode) || static_cast<uint64_t>(st.st_size) > kMaxBatchBytes) {
    return InvalidArgument(path + ": not a held file (not a regular file, or too large)");
  }
  FP_ASSIGN_OR_RETURN(std::string bytes, ReadWholeFile(path));
  wire::Batch b;
  if (!b.ParseFromString(bytes) || b.schema_version() != kSchemaVersion) {
    return InvalidArgument(path + ": not a held batch of this version");
  }
  if (Status s = ValidatePlatform(b.client_platform()); !s.ok()) {
    return InvalidArgument(path + ": " + s.message());
  }
  for (int i = 0; i < b.records_size(); ++i) {
    if (!IsStack(b.records(i))) {
      return InvalidArgument(path + ": record " + std::to_string(i) + " is not a stack");
    }
    if (Status s = ValidateRecord(b.records(i)); !s.ok()) {
      return InvalidArgument(path + ": record " + std::to_string(i) + ": " + s.message());
    }
  }
  return b;
}

SpoolSealer::SpoolSealer(size_t max_bytes, const Platform& platform, SealFn seal)
    : max_bytes_(max_bytes),
      platform_(platform),
      seal_(std::move(seal)),
      batch_(max_bytes, platform),
      held_(max_bytes, platform) {}

Status SpoolSealer::AddHeld(const std::string& name, const wire::Batch& held) {
  if (!held_.TryAddHeld(held)) {
    // Held under a larger batch size than today's: what is held so far
    // goes as it is.
    FP_RETURN_IF_ERROR(SealHeld());
    held_.TryAddHeld(held);  // an empty builder takes any
  }
  held_files_.push_back(name);
  return Status::Ok();
}

Status SpoolSealer::Add(const std::string& name, const wire::RunRecord& run) {
  const wire::RunRecord api = SplitRun(run, false), stacks = SplitRun(run, true);
  // Neither builder takes a part of this run before both can: a seal in
  // between must find the run wholly in (consumed) or wholly out.
  if (!batch_.Fits(api)) FP_RETURN_IF_ERROR(SealBatch());
  if (stacks.records_size() > 0 && !held_.Fits(stacks)) {
    // A batch's worth of distinct stacks: sealed on their own.
    FP_RETURN_IF_ERROR(SealBatch());
    FP_RETURN_IF_ERROR(SealHeld());
  }
  batch_.TryAdd(api);
  if (stacks.records_size() > 0) held_.TryAdd(stacks);
  consumed_.push_back(name);
  CountRunInBatch(run, &runs_);
  has_records_ = has_records_ || api.records_size() > 0;
  return Status::Ok();
}

Status SpoolSealer::SealBatch() {
  if (batch_.empty() && consumed_.empty()) return Status::Ok();
  SealStep step;
  step.batch = &batch_;
  step.runs = &runs_;
  step.consumed = &consumed_;
  step.held.taken = held_files_;
  if (!held_.empty()) {
    step.held.made_name = HeldName(held_.oldest_unix_ms());
    step.held.made_bytes = held_.Held().SerializeAsString();
  }
  FP_RETURN_IF_ERROR(seal_(step));
  held_files_.clear();
  if (!step.held.made_name.empty()) held_files_.push_back(step.held.made_name);
  consumed_.clear();
  runs_.Clear();
  has_records_ = false;
  return Status::Ok();
}

Status SpoolSealer::SealHeld() {
  if (held_.empty()) return Status::Ok();
  const wire::AgentCounters none;
  const std::vector<std::string> no_runs;
  SealStep step;
  step.batch = &held_;
  step.runs = &none;
  step.consumed = &no_runs;
  step.held.taken = held_files_;
  FP_RETURN_IF_ERROR(seal_(step));
  held_files_.clear();
  return Status::Ok();
}

Status SpoolSealer::Finish(bool flush, int64_t now_ms, int64_t max_age_ms) {
  deadline_ms_ = 0;
  const bool held_due = !held_.empty() && (flush || now_ms - held_.oldest_unix_ms() >= max_age_ms);
  // A batch needs records: runs that left counters only wait for some.
  const bool batch_due = has_records_ && (flush || now_ms - batch_.oldest_unix_ms() >= max_age_ms);
  if (held_due) {
    // Into the last batch when they fit, else a batch of their own.
    if (batch_.TryAddHeld(held_.Held())) {
      held_ = BatchBuilder(max_bytes_, platform_);
      FP_RETURN_IF_ERROR(SealBatch());
    } else {
      FP_RETURN_IF_ERROR(SealBatch());
      FP_RETURN_IF_ERROR(SealHeld());
    }
  } else if (batch_due) {
    FP_RETURN_IF_ERROR(SealBatch());
  }
  auto due = [&](int64_t oldest) {
    const int64_t d = oldest + max_age_ms;
    deadline_ms_ = deadline_ms_ == 0 ? d : std::min(deadline_ms_, d);
  };
  if (has_records_) due(batch_.oldest_unix_ms());
  if (!held_.empty()) due(held_.oldest_unix_ms());
  return Status::Ok();
}

}  // namespace fieldprof
