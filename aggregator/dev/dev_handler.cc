#include "aggregator/dev/dev_handler.h"

#include <algorithm>
#include <array>
#include <limits>
#include <nlohmann/json.hpp>

#include "aggregator/http/http_status.h"
#include "aggregator/http/query_params.h"
#include "aggregator/store/calendar_tree.h"
#include "common/base/json_writer.h"
#include "common/crypto/signing.h"
#include "common/points/points_analysis.h"
#include "common/points/points_stacks.h"
#include "common/wire/key_rules.h"
#include "common/wire/wire.h"

namespace fieldprof::aggregator {
namespace {

constexpr size_t kMaxTags = 256;

HttpResponse NoDevStore() {
  return ErrorResponse(NotFound("this aggregator keeps no developer runs"));
}

HttpResponse Forbidden(std::string why) {
  HttpResponse r = ErrorResponse(InvalidArgument(std::move(why)));
  r.status = 403;
  return r;
}

// What a run must be to be kept: its id the start of its file's SHA-256
// (so a retry is the same run, and no run can stand in for another), a
// program named as a file name, and tags that are point names.
// A run, or a later part of one (offset > 0: its id names the run its
// first part made, so no hash to check).
Status CheckRun(const wire::DevRun& r) {
  if (r.file().empty()) return InvalidArgument("a run without its file");
  if (r.offset() == 0 && r.id() != Sha256(r.file()).substr(0, 16)) {
    return InvalidArgument("a run's id is the first 16 bytes of its file's SHA-256");
  }
  if (r.offset() > 0 && r.id().size() != 16) return InvalidArgument("a part's id is 16 bytes");
  if (!key_rules::ModuleOk(r.program().data(), r.program().size())) {
    return InvalidArgument("a run's program is a file name (letters, digits, . _ + -), not \"" +
                           r.program() + "\"");
  }
  if (r.tags_size() == 0 || static_cast<size_t>(r.tags_size()) > kMaxTags) {
    return InvalidArgument("a run has 1 to 256 tags");
  }
  for (const std::string& t : r.tags()) {
    if (!key_rules::PointNameOk(t.data(), t.size())) {
      return InvalidArgument("a tag is a point name (letters, digits, _ and ., at most 64 bytes)");
    }
  }
  return Status::Ok();
}

// The first ns of `day` + `add` days (UTC); `absent` for no day. ParseDay
// ends at 2200, so this cannot overflow.
StatusOr<int64_t> DayEdgeNs(const std::string& day, const char* name, int add, int64_t absent) {
  if (day.empty()) return absent;
  StatusOr<int32_t> d = ParseDay(day);
  if (!d.ok()) return d.status().WithContext(name);
  return (static_cast<int64_t>(*d) + add) * 86400LL * 1000000000LL;
}

// A group's chosen runs, `runs=ID,ID,...` (ids as the listing gives them,
// 32 hex digits): the ids, sorted and distinct. Empty for none given.
StatusOr<std::vector<std::string>> ChosenRuns(const std::string& list, const char* name) {
  std::vector<std::string> ids;
  if (list.empty()) return ids;
  size_t at = 0;
  while (at <= list.size()) {
    size_t comma = list.find(',', at);
    if (comma == std::string::npos) comma = list.size();
    std::string id = list.substr(at, comma - at);
    const bool hex =
        id.size() == 32 && id.find_first_not_of("0123456789abcdef") == std::string::npos;
    if (!hex) {
      return InvalidArgument(std::string(name) + " lists run ids (32 hex digits, as the runs' " +
                             "listing gives them), comma-separated; not \"" + id.substr(0, 40) +
                             "\"");
    }
    ids.push_back(std::move(id));
    at = comma + 1;
  }
  std::sort(ids.begin(), ids.end());
  ids.erase(std::unique(ids.begin(), ids.end()), ids.end());
  return ids;
}

void RunJson(const DevRunInfo& r, JsonWriter* j) {
  j->BeginObject();
  j->Key("id").String(r.id).Key("program").String(r.program);
  j->Key("started_unix_ns").Int(r.started_unix_ns);
  j->Key("events").Uint(r.events).Key("bytes").Uint(r.bytes);
  if (r.id_bytes > 0) j->Key("id_bytes").Uint(r.id_bytes);
  j->Key("open").Bool(r.open);
  j->Key("tags").BeginArray();
  for (const std::string& t : r.tags) j->String(t);
  j->EndArray();
  j->EndObject();
}

}  // namespace

const Developer* DevHandler::Who(std::string_view authorization) const {
  const std::string given = BearerDigest(authorization);
  const Developer* found = nullptr;
  for (const Developer& d : developers_) {
    if (DigestsEqual(given, d.token_sha256) && found == nullptr) found = &d;
  }
  return given.empty() ? nullptr : found;
}

HttpResponse DevHandler::Upload(std::string_view authorization, std::string_view body) {
  if (store_ == nullptr) return NoDevStore();
  const Developer* who = Who(authorization);
  if (who == nullptr) return BearerRequired("developer runs need a developer's token");
  wire::DevUpload up;
  if (!up.ParseFromArray(body.data(), static_cast<int>(body.size()))) {
    return ErrorResponse(InvalidArgument("the body is not a fieldprof.wire.DevUpload"));
  }
  if (up.schema_version() != 1) {
    return ErrorResponse(InvalidArgument("DevUpload schema_version " +
                                         std::to_string(up.schema_version()) + " (want 1)"));
  }
  for (int i = 0; i < up.runs_size(); ++i) {
    if (Status s = CheckRun(up.runs(i)); !s.ok()) {
      return ErrorResponse(s.WithContext("run " + std::to_string(i)));
    }
    bool mine = false;
    for (const std::string& p : who->patterns) mine = mine || GlobMatch(p, up.runs(i).program());
    if (!mine) {
      return Forbidden("developer " + who->name + " has no program " + up.runs(i).program());
    }
  }
  const int64_t now_ms =
      std::chrono::duration_cast<std::chrono::milliseconds>(clock_().time_since_epoch()).count();
  uint64_t kept = 0, duplicates = 0;
  for (const wire::DevRun& r : up.runs()) {
    bool duplicate = false;
    wire::DevRun first;
    if (r.offset() == 0 && r.open()) {  // its id hashes this first part only
      first = r;
      first.set_id_bytes(r.file().size());
    }
    Status s = r.offset() > 0 ? store_->Extend(who->name, r, now_ms, &duplicate)
                              : store_->Put(who->name, r.open() ? first : r, now_ms, &duplicate);
    if (s.code() == StatusCode::kInvalidArgument) return ErrorResponse(s);  // a part out of order
    if (!s.ok()) return ErrorResponse(Unavailable("cannot keep the runs: " + s.message()));
    ++(duplicate ? duplicates : kept);
  }
  JsonWriter j;
  j.BeginObject();
  j.Key("runs").Uint(kept).Key("duplicates").Uint(duplicates);
  j.EndObject();
  return JsonResponse(j.Take());
}

HttpResponse DevHandler::Tags(std::string_view authorization) {
  if (store_ == nullptr) return NoDevStore();
  const Developer* who = Who(authorization);
  if (who == nullptr) return BearerRequired("developer runs need a developer's token");
  StatusOr<std::vector<DevTag>> tags = store_->Tags(who->name);
  if (!tags.ok()) return ErrorResponse(tags.status());
  JsonWriter j;
  j.BeginObject();
  j.Key("developer").String(who->name);
  j.Key("tags").BeginArray();
  for (const DevTag& t : *tags) {
    j.BeginObject();
    j.Key("tag").String(t.tag).Key("program").String(t.program).Key("runs").Uint(t.runs);
    j.Key("last_started_unix_ns").Int(t.last_started_unix_ns);
    j.EndObject();
  }
  j.EndArray();
  j.EndObject();
  return JsonResponse(j.Take());
}

StatusOr<std::vector<DevRunInfo>> DevHandler::Query(const Developer& who, std::string_view query,
                                                    std::string* tag, bool* stacks) {
  StatusOr<QueryParams> params = ParseQuery(query);
  if (!params.ok()) return params.status();
  *tag = TakeParam(&*params, "tag");
  const std::string program = TakeParam(&*params, "program");
  const std::string from = TakeParam(&*params, "from"), to = TakeParam(&*params, "to");
  if (stacks != nullptr) {
    const std::string s = TakeParam(&*params, "stacks");
    if (s != "" && s != "0" && s != "1") return InvalidArgument("stacks is 0 or 1");
    *stacks = s == "1";
  }
  if (!params->empty()) {
    return InvalidArgument(
        "unknown parameter " + params->front().first +
        (stacks != nullptr ? " (tag, program, from, to, stacks)" : " (tag, program, from, to)"));
  }
  if (tag->empty()) return InvalidArgument("give the tag: tag=NAME");
  return Select(who, *tag, program, from, to);
}

StatusOr<std::vector<DevRunInfo>> DevHandler::Select(const Developer& who, const std::string& tag,
                                                     const std::string& program,
                                                     const std::string& from,
                                                     const std::string& to) {
  // [from's first ns, the first ns after to) in UTC; unbounded when absent.
  StatusOr<int64_t> from_ns = DayEdgeNs(from, "from", 0, std::numeric_limits<int64_t>::min());
  StatusOr<int64_t> to_ns = DayEdgeNs(to, "to", 1, std::numeric_limits<int64_t>::max());
  if (!from_ns.ok()) return from_ns.status();
  if (!to_ns.ok()) return to_ns.status();
  return store_->Runs(who.name, tag, program, *from_ns, *to_ns);
}

StatusOr<std::vector<fieldprof::PointsRun>> DevHandler::Load(
    const Developer& who, const std::vector<DevRunInfo>& listed) {
  // Every run is read into memory: bounded in runs and in bytes.
  constexpr size_t kMaxReportRuns = 5000;
  constexpr uint64_t kMaxReportBytes = uint64_t{256} << 20;
  uint64_t bytes = 0;
  for (const DevRunInfo& info : listed) bytes += info.bytes;
  if (listed.size() > kMaxReportRuns || bytes > kMaxReportBytes) {
    return InvalidArgument(std::to_string(listed.size()) + " runs, " + std::to_string(bytes >> 20) +
                           " MiB: at most 5000 runs and 256 MiB in one report; narrow the days");
  }
  std::vector<fieldprof::PointsRun> runs;
  for (const DevRunInfo& info : listed) {
    StatusOr<wire::DevRun> r = store_->Get(who.name, info.id);
    if (!r.ok()) return r.status();
    StatusOr<fieldprof::PointsRun> run = fieldprof::DecodePointsRun(r->file());
    if (!run.ok()) continue;  // checked when kept; a file that no longer reads is left out
    run->file = info.id;
    runs.push_back(std::move(*run));
  }
  return runs;
}

HttpResponse DevHandler::Runs(std::string_view authorization, std::string_view query) {
  if (store_ == nullptr) return NoDevStore();
  const Developer* who = Who(authorization);
  if (who == nullptr) return BearerRequired("developer runs need a developer's token");
  std::string tag;
  StatusOr<std::vector<DevRunInfo>> runs = Query(*who, query, &tag);
  if (!runs.ok()) return ErrorResponse(runs.status());
  JsonWriter j;
  j.BeginObject();
  j.Key("tag").String(tag);
  j.Key("runs").BeginArray();
  for (const DevRunInfo& r : *runs) RunJson(r, &j);
  j.EndArray();
  j.EndObject();
  return JsonResponse(j.Take());
}

HttpResponse DevHandler::Report(std::string_view authorization, std::string_view query) {
  if (store_ == nullptr) return NoDevStore();
  const Developer* who = Who(authorization);
  if (who == nullptr) return BearerRequired("developer runs need a developer's token");
  std::string tag;
  bool stacks = false;
  StatusOr<std::vector<DevRunInfo>> listed = Query(*who, query, &tag, &stacks);
  if (!listed.ok()) return ErrorResponse(listed.status());
  StatusOr<std::vector<fieldprof::PointsRun>> runs = Load(*who, *listed);
  if (!runs.ok()) return ErrorResponse(runs.status());
  fieldprof::PointsOptions o;
  o.tag = tag;
  std::string report = fieldprof::PointsJson(*runs, fieldprof::AnalyzePoints(*runs, o));
  if (!stacks) return JsonResponse(report);
  // Where each point of the tag was passed, as `points show --stacks`:
  // by the names the runs carry (this machine's files are not theirs:
  // an unnamed frame is module+offset).
  nlohmann::json j = nlohmann::json::parse(report);
  std::vector<fieldprof::NamedStacks> named;
  for (const fieldprof::PointsRun& r : *runs) named.push_back(fieldprof::NameStacksAsRecorded(r));
  j["stacks"] = nlohmann::json::parse(fieldprof::StackedSitesJson(*runs, tag, named));
  return JsonResponse(j.dump());
}

namespace {

// The thresholds of a comparison, in the ranges `fieldprof points
// compare` takes; empty: the defaults.
StatusOr<fieldprof::CompareOptions> CompareThresholds(const std::string& fdr,
                                                      const std::string& min_effect) {
  fieldprof::CompareOptions co;
  if (!fdr.empty()) {
    const std::optional<double> x = ParseDecimalIn(fdr, 0.0001, 0.5);
    if (!x) return InvalidArgument("fdr is a false discovery rate, 0.0001 to 0.5");
    co.fdr = *x;
  }
  if (!min_effect.empty()) {
    const std::optional<double> x = ParseDecimalIn(min_effect, 0, 10);
    if (!x) {
      return InvalidArgument(
          "min_effect is the least change that counts, a fraction of A's mean, 0 to 10");
    }
    co.min_effect = *x;
  }
  return co;
}

// Only the chosen runs `ids` (sorted) of those `listed`: each must be one
// of this developer's runs of the tag, and of the group's program and days
// when `group` ("A", "B") narrowed them.
StatusOr<std::vector<DevRunInfo>> PickChosen(std::vector<DevRunInfo> listed,
                                             const std::vector<std::string>& ids,
                                             const std::string& tag, const char* group) {
  std::vector<DevRunInfo> picked;
  for (DevRunInfo& info : listed) {
    if (std::binary_search(ids.begin(), ids.end(), info.id)) picked.push_back(std::move(info));
  }
  if (picked.size() == ids.size()) return picked;
  for (const std::string& id : ids) {
    if (std::none_of(picked.begin(), picked.end(),
                     [&](const DevRunInfo& i) { return i.id == id; })) {
      return NotFound("run " + id + " is not one of your runs of tag " + tag +
                      (group == nullptr
                           ? std::string()
                           : " in group " + std::string(group) + "'s program and days"));
    }
  }
  return picked;
}

// The runs chosen for groups A (runs=) and B (b_runs=), sorted; a run in
// both is an error.
StatusOr<std::array<std::vector<std::string>, 2>> ChosenGroups(const std::string& a,
                                                               const std::string& b) {
  StatusOr<std::vector<std::string>> chosen[2] = {ChosenRuns(a, "runs"), ChosenRuns(b, "b_runs")};
  for (const auto& c : chosen) {
    if (!c.ok()) return c.status();
  }
  for (const std::string& id : *chosen[0]) {
    if (std::binary_search(chosen[1]->begin(), chosen[1]->end(), id)) {
      return InvalidArgument("run " + id + " is in both groups: a run belongs to A or to B");
    }
  }
  return std::array<std::vector<std::string>, 2>{std::move(*chosen[0]), std::move(*chosen[1])};
}

}  // namespace

HttpResponse DevHandler::Compare(std::string_view authorization, std::string_view query) {
  if (store_ == nullptr) return NoDevStore();
  const Developer* who = Who(authorization);
  if (who == nullptr) return BearerRequired("developer runs need a developer's token");
  StatusOr<QueryParams> params = ParseQuery(query);
  if (!params.ok()) return ErrorResponse(params.status());
  const std::string tag = TakeParam(&*params, "tag");
  const std::string program = TakeParam(&*params, "program");
  const std::string from = TakeParam(&*params, "from"), to = TakeParam(&*params, "to");
  std::string b_program = TakeParam(&*params, "b_program");
  const std::string b_from = TakeParam(&*params, "b_from"), b_to = TakeParam(&*params, "b_to");
  const std::string fdr = TakeParam(&*params, "fdr");
  // min_change: the parameter's name before it was min_effect, still read.
  std::string min_effect = TakeParam(&*params, "min_effect");
  if (const std::string old = TakeParam(&*params, "min_change"); min_effect.empty())
    min_effect = old;
  const std::string runs_a = TakeParam(&*params, "runs"), runs_b = TakeParam(&*params, "b_runs");
  if (!params->empty()) {
    return ErrorResponse(InvalidArgument(
        "unknown parameter " + params->front().first +
        " (tag, program, from, to, runs, b_program, b_from, b_to, b_runs, fdr, min_effect)"));
  }
  StatusOr<std::array<std::vector<std::string>, 2>> groups = ChosenGroups(runs_a, runs_b);
  if (!groups.ok()) return ErrorResponse(groups.status());
  const std::array<std::vector<std::string>, 2>& chosen = *groups;
  StatusOr<fieldprof::CompareOptions> thresholds = CompareThresholds(fdr, min_effect);
  if (!thresholds.ok()) return ErrorResponse(thresholds.status());
  const fieldprof::CompareOptions co = *thresholds;
  if (tag.empty()) return ErrorResponse(InvalidArgument("give the tag: tag=NAME"));
  if (b_program.empty()) b_program = program;
  if (b_program == program && b_from == from && b_to == to && chosen[0].empty() &&
      chosen[1].empty()) {
    return ErrorResponse(InvalidArgument(
        "groups A and B are the same runs: give B other days (b_from=, b_to=), b_program=, or "
        "choose each group's runs (runs=, b_runs=)"));
  }
  fieldprof::PointsOptions o;
  o.tag = tag;
  JsonWriter j;
  j.BeginObject();
  j.Key("tag").String(tag);
  std::vector<fieldprof::TagReport> reports[2];
  const std::string* group[2][3] = {{&program, &from, &to}, {&b_program, &b_from, &b_to}};
  for (int g = 0; g < 2; ++g) {
    StatusOr<std::vector<DevRunInfo>> listed =
        Select(*who, tag, *group[g][0], *group[g][1], *group[g][2]);
    if (!listed.ok()) return ErrorResponse(listed.status());
    const std::vector<std::string>& ids = chosen[g];
    if (!ids.empty()) {
      const bool narrowed = !group[g][0]->empty() || !group[g][1]->empty() || !group[g][2]->empty();
      StatusOr<std::vector<DevRunInfo>> picked =
          PickChosen(std::move(*listed), ids, tag, narrowed ? (g ? "B" : "A") : nullptr);
      if (!picked.ok()) return ErrorResponse(picked.status());
      *listed = std::move(*picked);
    }
    StatusOr<std::vector<fieldprof::PointsRun>> runs = Load(*who, *listed);
    if (!runs.ok()) return ErrorResponse(runs.status());
    reports[g] = fieldprof::AnalyzePoints(*runs, o);
    j.Key(g == 0 ? "a" : "b").BeginObject();
    j.Key("program").String(*group[g][0]);
    j.Key("from").String(*group[g][1]);
    j.Key("to").String(*group[g][2]);
    j.Key("chosen").Uint(ids.size());
    j.Key("runs").Uint(reports[g].empty() ? 0 : reports[g][0].runs.size());
    j.Key("removed").Uint(reports[g].empty() ? 0 : reports[g][0].removed.size());
    j.EndObject();
  }
  j.Key("fdr").Double(co.fdr);
  j.Key("min_effect").Double(co.min_effect);
  j.Key("segments")
      .Raw(fieldprof::CompareJson(fieldprof::ComparePoints(reports[0], reports[1], co)));
  j.EndObject();
  return JsonResponse(j.Take());
}

HttpResponse DevHandler::Run(std::string_view authorization, std::string_view id) {
  if (store_ == nullptr) return NoDevStore();
  const Developer* who = Who(authorization);
  if (who == nullptr) return BearerRequired("developer runs need a developer's token");
  StatusOr<wire::DevRun> r = store_->Get(who->name, std::string(id));
  if (!r.ok()) return ErrorResponse(r.status());
  return HttpResponse{200, "application/octet-stream", std::move(*r->mutable_file()), {}};
}

}  // namespace fieldprof::aggregator
