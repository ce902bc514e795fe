#include "tools/check/check_inputs.h"

#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstdio>
#include <cstring>
#include <map>
#include <nlohmann/json.hpp>

#include "common/snapshot/snapshot_cache.h"
#include "common/spool/spool.h"
#include "common/wire/api_key.h"
#include "common/wire/wire.h"
#include "tools/shared/lab_profile.h"
#include "tools/shared/module_source.h"
#include "tools/shared/spawn.h"

namespace fieldprof::tools {
namespace {

// The records of the metric into `local`, by API; `platform` for records
// without one.
template <typename Records>
void AddRecords(const Records& records, wire::Metric metric, const wire::Platform* platform,
                const std::string& file,
                std::map<std::pair<std::string, std::string>, LocalCost>* local) {
  for (const wire::Record& r : records) {
    if (r.key().metric() != metric) continue;
    LocalCost& l = (*local)[{r.key().module(), r.key().symbol()}];
    if (l.runs == 0) {
      l.module = r.key().module();
      l.symbol = r.key().symbol();
      l.platform = r.key().has_platform() || platform == nullptr ? r.key().platform() : *platform;
      l.file = file;
    }
    l.histogram.Merge(HistogramFromWire(r.histogram()));
    l.runs += std::max<uint64_t>(r.runs(), 1);
    l.resolution_ns = std::max(l.resolution_ns, r.resolution_ns());
  }
}

// GET /v1/api: the field's histogram (per-bucket counts and exact sums) and
// runs for the query; 404 leaves `h` empty.
Status FetchField(HttpsClient& http, const std::string& target, Histogram* h, uint64_t* runs,
                  uint64_t* resolution_ns, std::string* suspect) {
  FP_ASSIGN_OR_RETURN(HttpReply r, http.Get(target));
  if (r.status == 404) return Status::Ok();
  if (r.status != 200) {
    return Internal("GET " + target + " answered " + std::to_string(r.status) + ": " + r.body);
  }
  const nlohmann::json j = nlohmann::json::parse(r.body, nullptr, /*allow_exceptions=*/false);
  try {
    if (j.is_discarded()) throw std::runtime_error("not JSON");
    StatusOr<Histogram> hist = HistogramFromJson(j.at("histogram"));
    if (!hist.ok()) throw std::runtime_error(hist.status().message());
    *h = std::move(*hist);
    *runs = j.at("runs").get<uint64_t>();
    if (j.contains("resolution_ns")) {
      *resolution_ns = std::max(*resolution_ns, j.at("resolution_ns").get<uint64_t>());
    }
    if (j.value("suspect", false)) *suspect = j.value("suspect_reason", std::string("suspect"));
  } catch (const std::exception& e) {
    return DataLoss("the aggregator's answer to " + target + " does not read: " + e.what());
  }
  return Status::Ok();
}

}  // namespace

namespace {

// Runs this binary with `args` (args[0] is replaced by its path). Its exit
// code (128 + N for signal N), or -1, said on stderr, when it could not
// start.
int RunSelf(std::vector<std::string> args, const SpawnOptions& o) {
  args[0] = "/proc/self/exe";
  std::string error;
  const int code = SpawnAndWait(args, o, &error);
  if (code < 0) {
    std::fprintf(stderr, "fieldprof check: cannot run fieldprof %s: %s\n", args[1].c_str(),
                 error.c_str());
  }
  return code;
}

}  // namespace

// Runs `fieldprof run` on the command `repeat` times, measuring `apis`,
// into `spool`. The command's output is shown once, for the first run
// (stdout to `out_fd`); the later runs' goes to /dev/null. Returns the
// runs that failed to start or exited non-zero, said on stderr.
int RunCommandMeasured(const std::vector<std::string>& cmd, const std::string& apis, int repeat,
                       const std::string& spool, int out_fd) {
  int apis_count = 1;
  for (char c : apis) apis_count += c == ',';
  int failed = 0;
  for (int i = 0; i < repeat; ++i) {
    std::vector<std::string> args = {"fieldprof",  "run",
                                     "--force",    apis,
                                     "--apis",     std::to_string(apis_count),
                                     "--spool",    spool,
                                     "--max_load", "1000000",
                                     "--budget",   "1000",
                                     "--slots",    "1000",
                                     "--seed",     std::to_string(i + 1),
                                     "--"};
    args.insert(args.end(), cmd.begin(), cmd.end());
    SpawnOptions so;
    so.out_fd = i == 0 ? out_fd : kDevNull;  // the output once, for the first run
    so.err_fd = i == 0 ? STDERR_FILENO : kDevNull;
    const int code = RunSelf(args, so);
    if (code < 0) return repeat;
    if (code != 0) {
      ++failed;
      std::fprintf(stderr, "fieldprof check: run %d of %s: %s %d (its record, if any, is used)\n",
                   i + 1, cmd[0].c_str(), code > 128 ? "signal" : "exit",
                   code > 128 ? code - 128 : code);
    }
  }
  return failed;
}

int ProfileCommandInLab(const std::vector<std::string>& cmd, int repeat, const std::string& profile,
                        int out_fd) {
  std::vector<std::string> args = {"fieldprof", "lab",   "--repeat", std::to_string(repeat),
                                   "-o",        profile, "--"};
  args.insert(args.end(), cmd.begin(), cmd.end());
  SpawnOptions so;
  so.out_fd = out_fd;
  const int code = RunSelf(args, so);
  return code < 0 ? 3 : code;
}

LocalInputs ReadLocalCosts(const std::vector<std::string>& files, wire::Metric metric) {
  LocalInputs in;
  in.files = files.size();
  std::map<std::pair<std::string, std::string>, LocalCost> local;
  for (const std::string& f : files) {
    if (IsLabProfileFile(f)) {
      StatusOr<wire::LabProfile> p = ReadLabProfile(f);
      if (!p.ok()) {
        std::fprintf(stderr, "fieldprof check: skipped %s\n", p.status().message().c_str());
        ++in.bad_files;
        continue;
      }
      AddRecords(p->records(), metric, nullptr, f, &local);
      in.profiles.push_back(std::move(*p));
      continue;
    }
    StatusOr<wire::RunRecord> run = ReadRunRecord(f);
    if (!run.ok()) {
      std::fprintf(stderr, "fieldprof check: skipped %s\n", run.status().message().c_str());
      ++in.bad_files;
      continue;
    }
    AddRecords(run->records(), metric, &run->platform(), f, &local);
  }
  for (auto& [name, l] : local) in.apis.push_back(std::move(l));
  return in;
}

StatusOr<std::unique_ptr<FieldSource>> FieldSource::Open(const CheckOptions& o) {
  std::unique_ptr<FieldSource> f(new FieldSource(o));
  if (o.remote()) {
    f->http_.emplace(o.client.Resolve());
    return f;
  }
  FP_ASSIGN_OR_RETURN(SnapshotIndex opened, SnapshotIndex::Open(SnapshotCache(o.cache_dir)));
  f->index_.emplace(std::move(opened));
  return f;
}

Status FieldSource::Lookup(const LocalCost& local, FieldCost* out) {
  return o_.remote() ? LookupRemote(local, out) : LookupCache(local, out);
}

// One request per level, the closest first, until one has data.
Status FieldSource::LookupRemote(const LocalCost& l, FieldCost* out) {
  for (int lv = kPlatformLevels - 1; lv >= 0; --lv) {
    std::string q = "/v1/api?module=" + UrlEncode(l.module) + "&symbol=" + UrlEncode(l.symbol) +
                    "&metric=" + o_.metric_name;
    if (lv >= 1) q += "&arch=" + std::string(ArchName(l.platform.arch()));
    if (lv >= 2) q += "&vendor=" + std::string(CpuVendorName(l.platform.cpu_vendor()));
    if (lv >= 3) q += "&family=" + std::to_string(l.platform.cpu_family());
    if (!o_.from.empty()) q += "&from=" + UrlEncode(o_.from);
    if (!o_.to.empty()) q += "&to=" + UrlEncode(o_.to);
    FP_RETURN_IF_ERROR(FetchField(*http_, q, &out->by_level[lv], &out->runs_by_level[lv],
                                  &out->resolution_ns, &out->suspect));
    if (!out->by_level[lv].empty()) break;
  }
  return Status::Ok();
}

// Every record of the symbol in the index; a series counts at each level
// up to its closeness to the local platform.
Status FieldSource::LookupCache(const LocalCost& l, FieldCost* out) {
  return index_->ForEachRecordOf(l.symbol, [&](const wire::Record& r) {
    if (r.key().module() != l.module || r.key().metric() != o_.metric) return true;
    const int c = PlatformCloseness(l.platform, r.key().platform());
    for (int lv = 0; lv <= c; ++lv) {
      out->by_level[lv].Merge(HistogramFromWire(r.histogram()));
      out->runs_by_level[lv] += r.runs();
    }
    out->resolution_ns = std::max(out->resolution_ns, r.resolution_ns());
    if (out->suspect.empty()) out->suspect = r.suspect();
    return true;
  });
}

}  // namespace fieldprof::tools
