#include "aggregator/http/router.h"

#include <algorithm>
#include <charconv>
#include <cinttypes>
#include <cstdio>
#include <filesystem>
#include <map>
#include <mutex>
#include <optional>
#include <set>

#include "aggregator/store/lab_storage.h"
#include "aggregator/publish/lease.h"
#include "aggregator/publish/publisher.h"
#include "aggregator/store/time_tree.h"
#include "aggregator/ui/ui_assets.h"
#include "common/durable_file.h"
#include "common/json_writer.h"
#include "common/lab_format.h"
#include "common/model_json.h"
#include "common/module_diff.h"
#include "common/module_model.h"
#include "common/resolution.h"
#include "common/signing.h"
#include "common/validate.h"
#include "common/wire.h"

namespace fieldprof::aggregator {
namespace {

int HexValue(char c) {
  if (c >= '0' && c <= '9') return c - '0';
  if (c >= 'a' && c <= 'f') return c - 'a' + 10;
  if (c >= 'A' && c <= 'F') return c - 'A' + 10;
  return -1;
}

StatusOr<std::string> PercentDecode(std::string_view s) {
  std::string out;
  out.reserve(s.size());
  for (size_t i = 0; i < s.size(); ++i) {
    if (s[i] == '+') {
      out += ' ';
    } else if (s[i] == '%') {
      if (i + 2 >= s.size()) {
        return InvalidArgument("truncated percent escape in query");
      }
      int hi = HexValue(s[i + 1]), lo = HexValue(s[i + 2]);
      if (hi < 0 || lo < 0) return InvalidArgument("bad percent escape in query");
      out += static_cast<char>(hi * 16 + lo);
      i += 2;
    } else {
      out += s[i];
    }
  }
  return out;
}

// The whole of `v` as a decimal integer ("10abc" and "" are not numbers).
std::optional<int64_t> ParseWholeNumber(std::string_view v) {
  int64_t x = 0;
  auto [ptr, ec] = std::from_chars(v.data(), v.data() + v.size(), x);
  if (ec != std::errc() || ptr != v.data() + v.size()) return std::nullopt;
  return x;
}

void WriteStats(JsonWriter& j, const Histogram& h) {
  HistogramStats s = h.Stats();
  j.Key("stats").BeginObject();
  j.Key("count").Uint(s.count);
  j.Key("mean").DoubleExact(s.mean);
  j.Key("stddev").DoubleExact(s.stddev);
  j.Key("variance").DoubleExact(s.variance);
  j.Key("min").Uint(s.min);
  j.Key("max").Uint(s.max);
  j.Key("p50").DoubleExact(s.p50);
  j.Key("p90").DoubleExact(s.p90);
  j.Key("p99").DoubleExact(s.p99);
  j.EndObject();
}

void WriteHistogram(JsonWriter& j, const Histogram& h) {
  j.Key("histogram").BeginObject();
  j.Key("zero_count").Uint(h.zero_count());
  j.Key("count").Uint(h.count());
  j.Key("sum").String(Uint128ToString(h.sum()));
  j.Key("sum_sq").String(Uint128ToString(h.sum_sq()));
  j.Key("sum_sq_saturated").Bool(h.sum_sq_saturated());
  j.Key("min").Uint(h.empty() ? 0 : h.min());
  j.Key("max").Uint(h.max());
  j.Key("buckets").BeginArray();
  for (int i = 0; i < kNumBuckets; ++i) {
    const HistogramBucket& b = h.bucket(i);
    if (b.count == 0) continue;
    j.BeginObject();
    j.Key("index").Int(i);
    j.Key("low").Uint(BucketLow(i));
    j.Key("high").Uint(BucketHigh(i));
    j.Key("count").Uint(b.count);
    j.Key("sum").String(Uint128ToString(b.sum));
    j.Key("sum_sq").String(Uint128ToString(b.sum_sq));
    j.EndObject();
  }
  j.EndArray();
  j.EndObject();
}

void WriteKey(JsonWriter& j, const ApiKey& k) {
  j.Key("module").String(k.module);
  j.Key("module_version").String(k.module_version);
  j.Key("symbol").String(k.symbol);
  j.Key("metric").String(MetricName(k.metric));
  j.Key("platform").BeginObject();
  j.Key("os").String(OsName(k.platform.os));
  j.Key("arch").String(ArchName(k.platform.arch));
  j.Key("cpu_vendor").String(CpuVendorName(k.platform.cpu_vendor));
  j.Key("cpu_family").Uint(k.platform.cpu_family);
  j.EndObject();
}

// Reads the filter parameters shared by /v1/apis and /v1/api.
Status ParseFilter(const std::vector<std::pair<std::string, std::string>>& params, ApiFilter* f,
                   int32_t* from, int32_t* to, size_t* limit, std::optional<int>* family) {
  for (const auto& [k, v] : params) {
    if (k == "module") {
      f->module = v;
    } else if (k == "prefix" || k == "symbol") {
      f->symbol_prefix = v;
      f->symbol_exact = (k == "symbol");
    } else if (k == "version") {
      f->module_version = v;
    } else if (k == "metric") {
      StatusOr<wire::Metric> m = ParseMetric(v);
      if (!m.ok()) return m.status();
      f->metric = *m;
    } else if (k == "os") {
      auto e = ParseOs(v);
      if (!e.ok()) return e.status();
      f->os = *e;
    } else if (k == "arch") {
      auto e = ParseArch(v);
      if (!e.ok()) return e.status();
      f->arch = *e;
    } else if (k == "vendor") {
      auto e = ParseCpuVendor(v);
      if (!e.ok()) return e.status();
      f->cpu_vendor = *e;
    } else if (k == "family") {
      std::optional<int64_t> x = ParseWholeNumber(v);
      if (!x || *x < 0 || *x > 255) return InvalidArgument("family must be 0..255");
      *family = static_cast<int>(*x);
    } else if (k == "from" || k == "to") {
      StatusOr<int32_t> d = ParseDay(v);
      if (!d.ok()) return d.status().WithContext(k);
      (k == "from" ? *from : *to) = *d;
    } else if (k == "limit") {
      std::optional<int64_t> x = ParseWholeNumber(v);
      if (!x || *x < 1 || *x > 100000) return InvalidArgument("limit must be 1..100000");
      *limit = static_cast<size_t>(*x);
    } else {
      return InvalidArgument("unknown query parameter '" + k + "'");
    }
  }
  if (*from != kUnboundedFirst && *to != kUnboundedLast && *from > *to) {
    return InvalidArgument("from is after to");
  }
  return Status::Ok();
}

}  // namespace

int HttpStatusFor(const Status& s) {
  switch (s.code()) {
    case StatusCode::kOk:
      return 200;
    case StatusCode::kInvalidArgument:
      return 400;
    case StatusCode::kNotFound:
      return 404;
    case StatusCode::kTooLarge:
      return 413;
    case StatusCode::kUnsupported:
      return 415;
    case StatusCode::kResourceExhausted:
      return 503;
    case StatusCode::kUnavailable:
      return 503;
    case StatusCode::kIOError:
      return 503;  // retry later, nothing applied
    case StatusCode::kNoSpace:
      return 507;  // Insufficient Storage: retry later, nothing applied
    case StatusCode::kDataLoss:
      return 500;
    case StatusCode::kInternal:
      return 500;
  }
  return 500;
}

HttpResponse ErrorResponse(const Status& s) {
  HttpResponse r;
  r.status = HttpStatusFor(s);
  JsonWriter j;
  j.BeginObject();
  j.Key("error").String(StatusCodeName(s.code()));
  std::string_view rule = ValidationRule(s);
  if (!rule.empty()) j.Key("rule").String(rule);
  j.Key("message").String(s.message());
  j.EndObject();
  r.body = j.Take();
  r.body += '\n';
  if (r.status == 503) r.headers.emplace_back("Retry-After", "2");
  if (r.status == 507) r.headers.emplace_back("Retry-After", "10");
  return r;
}

StatusOr<std::vector<std::pair<std::string, std::string>>> ParseQuery(std::string_view q) {
  std::vector<std::pair<std::string, std::string>> out;
  while (!q.empty()) {
    size_t amp = q.find('&');
    std::string_view part = q.substr(0, amp);
    q = amp == std::string_view::npos ? std::string_view() : q.substr(amp + 1);
    if (part.empty()) continue;
    size_t eq = part.find('=');
    StatusOr<std::string> k = PercentDecode(part.substr(0, eq));
    if (!k.ok()) return k.status();
    StatusOr<std::string> v =
        PercentDecode(eq == std::string_view::npos ? std::string_view() : part.substr(eq + 1));
    if (!v.ok()) return v.status();
    out.emplace_back(std::move(*k), std::move(*v));
  }
  return out;
}

Router::Router(Store* store, class Metrics* metrics,
               std::function<std::chrono::system_clock::time_point()> clock)
    : store_(store), metrics_(metrics), clock_(std::move(clock)) {}

HttpResponse Router::Handle(const HttpRequest& req) {
  const std::string_view method = req.method, target = req.target;
  std::string_view path = target;
  std::string_view query;
  if (size_t q = target.find('?'); q != std::string_view::npos) {
    path = target.substr(0, q);
    query = target.substr(q + 1);
  }
  const bool get = method == "GET" || method == "HEAD";
  if (path == "/v1/batches") {
    if (method != "POST") {
      HttpResponse r = ErrorResponse(InvalidArgument("use POST for /v1/batches"));
      r.status = 405;
      r.headers.emplace_back("Allow", "POST");
      return r;
    }
    return Ingest(req.content_type, req.body);
  }
  if (get && path == "/healthz") {
    // 200 while batches are taken; otherwise 503 and why (a full disk, a
    // failed write being recovered), for load balancers and operators.
    const Status h = store_->Health();
    if (h.ok()) return HttpResponse{200, "text/plain", "ok\n", {}};
    return HttpResponse{
        503, "text/plain", "unhealthy: " + h.ToString() + "\n", {{"Retry-After", "10"}}};
  }
  if (get && path == "/metrics") return Metrics();
  if (get && path == "/v1/config") return Config();
  if (get && path == "/v1/apis") return ListApis(query);
  if (get && path == "/v1/api") return GetApi(query);
  if (get && path == "/v1/module") return GetModule(query, req.authorization);
  if (get && path == "/v1/modules") return ListModules(req.authorization);
  if (get && path == "/v1/report") return GetReport(query, req.authorization);
  if (get && path == "/v1/diff") return GetDiff(query, req.authorization);
  if (get && path == "/v1/recent") return Recent(query);
  if (get && (path == "/ui" || path.starts_with("/ui/"))) return UiAsset(path);
  if (get && path == "/v1/snapshot/manifest") return SnapshotManifest(req.if_none_match);
  constexpr std::string_view kFragments = "/v1/snapshot/fragments/";
  if (get && path.starts_with(kFragments)) {
    return SnapshotFragment(path.substr(kFragments.size()), query, req.if_none_match);
  }
  constexpr std::string_view kLab = "/v1/lab/profiles";
  if (path == kLab) {
    if (method == "POST") return LabUpload(req.body);
    if (get) return LabList();
    HttpResponse r = ErrorResponse(InvalidArgument("use POST or GET for /v1/lab/profiles"));
    r.status = 405;
    r.headers.emplace_back("Allow", "GET, POST");
    return r;
  }
  if (get && path.starts_with(kLab) && path.size() > kLab.size() && path[kLab.size()] == '/') {
    return LabGet(path.substr(kLab.size() + 1));
  }
  if (path == "/v1/admin/publish") {
    if (method != "POST") {
      HttpResponse r = ErrorResponse(InvalidArgument("use POST for /v1/admin/publish"));
      r.status = 405;
      r.headers.emplace_back("Allow", "POST");
      return r;
    }
    return AdminPublish(req.authorization, query);
  }
  HttpResponse r =
      ErrorResponse(NotFound("no such endpoint: " + std::string(method) + " " + std::string(path)));
  return r;
}

Status CheckBatchContentType(std::string_view content_type) {
  std::string_view media = content_type.substr(0, content_type.find(';'));
  while (!media.empty() && media.back() == ' ') media.remove_suffix(1);
  if (media == kProtobufContentType) return Status::Ok();
  return Unsupported("content type must be " + std::string(kProtobufContentType) + ", got '" +
                     std::string(content_type) + "'");
}

HttpResponse Router::Ingest(std::string_view content_type, std::string_view body) {
  if (Status s = CheckBatchContentType(content_type); !s.ok()) {
    metrics_->BatchRejected("content_type");
    return ErrorResponse(s);
  }
  // Decoded straight from the body (one pass, no protobuf messages) unless
  // the body is unusual; see common/batch_view.h.
  BatchView batch;
  if (Status s = DecodeBatchView(body, &batch); !s.ok()) {
    std::string_view rule = ValidationRule(s);
    metrics_->BatchRejected(rule.empty() ? "invalid" : std::string(rule));
    return ErrorResponse(s);
  }
  const int64_t now_s =
      std::chrono::duration_cast<std::chrono::seconds>(clock_().time_since_epoch()).count();
  const int32_t day = DayFromUnixSeconds(now_s);
  StatusOr<ApplyResult> applied = store_->ApplyBatch(batch, body, day);
  if (!applied.ok()) {
    metrics_->StoreError();
    return ErrorResponse(applied.status());
  }
  if (applied->duplicate) {
    metrics_->BatchDuplicate();
  } else {
    metrics_->BatchAccepted(applied->records, body.size());
    // The dashboard's "seen most recently": a few keys of each batch.
    const int64_t now_ms =
        std::chrono::duration_cast<std::chrono::milliseconds>(clock_().time_since_epoch()).count();
    std::lock_guard<std::mutex> lock(recent_mu_);
    const size_t n = std::min<size_t>(batch.records().size(), 8);
    for (size_t i = 0; i < n; ++i) {
      const ApiKeyView& k = batch.records(static_cast<int>(i)).key();
      Seen seen{std::string(k.module()), std::string(k.symbol()), now_ms};
      if (recent_.size() < kRecent) {
        recent_.push_back(std::move(seen));
      } else {
        recent_[recent_next_] = std::move(seen);
      }
      recent_next_ = (recent_next_ + 1) % kRecent;
    }
  }
  JsonWriter j;
  j.BeginObject();
  j.Key("batch_id").String(HexEncode(batch.batch_id()));
  j.Key("duplicate").Bool(applied->duplicate);
  j.Key("records").Uint(applied->records);
  j.Key("day").String(FormatDay(day));
  j.EndObject();
  return HttpResponse{200, "application/json", j.Take() + "\n", {}};
}

HttpResponse Router::Config() {
  HttpResponse r;
  r.status = 200;
  r.content_type = "application/json";
  r.body = FleetSettingsToJson(fleet_, /*with_version=*/true);
  return r;
}

HttpResponse Router::ListApis(std::string_view query) {
  auto params = ParseQuery(query);
  if (!params.ok()) return ErrorResponse(params.status());
  // order=key (default, cheap: stops after `limit`), order=calls or
  // order=mean (both scan up to 100000 series and return the most called,
  // or the highest mean per call, first).
  enum class Order { kKey, kCalls, kMean } order = Order::kKey;
  for (auto it = params->begin(); it != params->end(); ++it) {
    if (it->first != "order") continue;
    if (it->second == "calls") {
      order = Order::kCalls;
    } else if (it->second == "mean") {
      order = Order::kMean;
    } else if (it->second != "key") {
      return ErrorResponse(InvalidArgument("order must be key, calls or mean"));
    }
    params->erase(it);
    break;
  }
  const bool by_calls = order != Order::kKey;
  ApiFilter filter;
  int32_t from = kUnboundedFirst, to = kUnboundedLast;
  size_t limit = 100;
  std::optional<int> family;
  Status s = ParseFilter(*params, &filter, &from, &to, &limit, &family);
  if (!s.ok()) return ErrorResponse(s);
  if (from != kUnboundedFirst || to != kUnboundedLast) {
    return ErrorResponse(InvalidArgument("/v1/apis lists all-time sums; use /v1/api for ranges"));
  }
  StatusOr<std::vector<ApiAggregate>> apis =
      store_->ListApis(filter, by_calls ? 100000 : limit + 1);
  if (!apis.ok()) return ErrorResponse(apis.status());
  if (order == Order::kCalls) {
    std::stable_sort(apis->begin(), apis->end(), [](const ApiAggregate& a, const ApiAggregate& b) {
      return a.histogram.count() > b.histogram.count();
    });
  } else if (order == Order::kMean) {
    std::stable_sort(apis->begin(), apis->end(), [](const ApiAggregate& a, const ApiAggregate& b) {
      return a.histogram.Mean() > b.histogram.Mean();
    });
  }
  JsonWriter j;
  j.BeginObject();
  j.Key("apis").BeginArray();
  size_t n = 0;
  for (const ApiAggregate& a : *apis) {
    if (family && a.key.platform.cpu_family != *family) continue;
    if (n++ == limit) break;
    HistogramStats st = a.histogram.Stats();
    j.BeginObject();
    WriteKey(j, a.key);
    j.Key("calls").Uint(st.count);
    j.Key("runs").Uint(a.runs);
    j.Key("mean").Double(st.mean);
    j.Key("p50").Double(st.p50);
    j.Key("p90").Double(st.p90);
    j.Key("p99").Double(st.p99);
    WriteResolution(j, st, a.resolution_ns);
    j.EndObject();
  }
  j.EndArray();
  j.Key("truncated").Bool(apis->size() > limit);
  j.EndObject();
  return HttpResponse{200, "application/json", j.Take() + "\n", {}};
}

HttpResponse Router::GetApi(std::string_view query) {
  auto params = ParseQuery(query);
  if (!params.ok()) return ErrorResponse(params.status());
  ApiFilter filter;
  filter.metric = wire::METRIC_WALL_TIME_NS;
  int32_t from = kUnboundedFirst, to = kUnboundedLast;
  size_t limit = 100000;
  std::optional<int> family;
  Status s = ParseFilter(*params, &filter, &from, &to, &limit, &family);
  if (!s.ok()) return ErrorResponse(s);
  if (filter.module.empty() || filter.symbol_prefix.empty() || !filter.symbol_exact) {
    return ErrorResponse(InvalidArgument("/v1/api needs module= and symbol="));
  }
  // Every series of this API that matches the filters (versions,
  // platforms), summed over the range in one pass of the store.
  Histogram total;
  uint64_t runs = 0;
  size_t used = 0;
  bool truncated = false;
  uint64_t resolution_ns = 0;
  Status walk = store_->ForEachApiInRange(filter, from, to, [&](ApiAggregate&& a) {
    if (family && a.key.platform.cpu_family != *family) return true;
    total.Merge(a.histogram);
    runs += a.runs;
    truncated = truncated || a.truncated;
    resolution_ns = std::max(resolution_ns, a.resolution_ns);
    return ++used < limit;
  });
  if (!walk.ok()) return ErrorResponse(walk);
  if (used == 0 && (from != kUnboundedFirst || to != kUnboundedLast)) {
    // Known, but nothing in the range: an empty answer, not "no data".
    StatusOr<std::vector<ApiAggregate>> any = store_->ListApis(filter, 1000);
    if (!any.ok()) return ErrorResponse(any.status());
    for (const ApiAggregate& a : *any) {
      if (!family || a.key.platform.cpu_family == *family) ++used;
    }
  }
  if (used == 0) {
    return ErrorResponse(NotFound("no data for " + filter.module + " " + filter.symbol_prefix +
                                  " (" + std::string(MetricName(*filter.metric)) + ")"));
  }
  JsonWriter j;
  j.BeginObject();
  j.Key("module").String(filter.module);
  j.Key("symbol").String(filter.symbol_prefix);
  j.Key("metric").String(MetricName(*filter.metric));
  j.Key("from").String(from == kUnboundedFirst ? "" : FormatDay(from));
  j.Key("to").String(to == kUnboundedLast ? "" : FormatDay(to));
  j.Key("series").Uint(used);
  j.Key("runs").Uint(runs);
  j.Key("truncated").Bool(truncated);
  WriteStats(j, total);
  WriteResolution(j, total.Stats(), resolution_ns);
  WriteHistogram(j, total);
  j.EndObject();
  return HttpResponse{200, "application/json", j.Take() + "\n", {}};
}

namespace {

bool LabIdOk(std::string_view id) {
  return id.size() == 32 && id.find_first_not_of("0123456789abcdef") == std::string_view::npos;
}

}  // namespace

// Lab profiles are kept as the files they came as, named by the first 128
// bits of their SHA-256: the same profile uploaded twice is one file (a
// retry after a lost answer changes nothing), and nothing of it reaches
// the store of field sums.
HttpResponse Router::LabUpload(std::string_view body) {
  if (lab_ == nullptr) return ErrorResponse(NotFound("this aggregator keeps no lab profiles"));
  StatusOr<wire::LabProfile> p = ParseLabProfile(body, "the body");
  if (!p.ok()) return ErrorResponse(InvalidArgument(p.status().message()));
  if (Status v = ValidateLabProfile(*p); !v.ok()) return ErrorResponse(v);
  const std::string id = HexEncode(Sha256(body)).substr(0, 32);
  bool duplicate = false;
  if (Status w = lab_->Put(id, std::string(body), &duplicate); !w.ok()) {
    HttpResponse r = ErrorResponse(Unavailable("cannot keep the profile: " + w.message()));
    r.status = 503;
    r.headers.clear();
    r.headers.emplace_back("Retry-After", "10");
    return r;
  }
  JsonWriter j;
  j.BeginObject();
  j.Key("id").String(id).Key("duplicate").Bool(duplicate);
  j.Key("records").Uint(static_cast<uint64_t>(p->records_size()));
  j.EndObject();
  return HttpResponse{200, "application/json", j.Take() + "\n", {}};
}

HttpResponse Router::LabList() {
  if (lab_ == nullptr) return ErrorResponse(NotFound("this aggregator keeps no lab profiles"));
  StatusOr<std::vector<std::string>> ids = lab_->List();
  if (!ids.ok()) return ErrorResponse(ids.status());
  JsonWriter j;
  j.BeginObject();
  j.Key("profiles").BeginArray();
  for (const std::string& id : *ids) {
    if (!LabIdOk(id)) continue;
    StatusOr<std::string> bytes = lab_->Get(id);
    if (!bytes.ok()) continue;
    StatusOr<wire::LabProfile> p = ParseLabProfile(*bytes, id);
    if (!p.ok()) continue;
    j.BeginObject();
    j.Key("id").String(id).Key("bytes").Uint(bytes->size());
    j.Key("scenarios").BeginArray();
    for (const std::string& s : p->scenarios()) j.String(s);
    j.EndArray();
    j.Key("apis").Uint(static_cast<uint64_t>(p->apis_size()));
    j.Key("records").Uint(static_cast<uint64_t>(p->records_size()));
    j.Key("runs").Uint(static_cast<uint64_t>(p->passes_size()));
    j.EndObject();
  }
  j.EndArray();
  j.EndObject();
  return HttpResponse{200, "application/json", j.Take() + "\n", {}};
}

HttpResponse Router::LabGet(std::string_view id) {
  if (lab_ == nullptr) return ErrorResponse(NotFound("this aggregator keeps no lab profiles"));
  if (!LabIdOk(id)) return ErrorResponse(InvalidArgument("a lab profile id is 32 hex digits"));
  StatusOr<std::string> bytes = lab_->Get(std::string(id));
  if (!bytes.ok()) {
    return ErrorResponse(bytes.status().code() == StatusCode::kNotFound
                             ? NotFound("no lab profile " + std::string(id))
                             : bytes.status());
  }
  return HttpResponse{200, "application/octet-stream", std::move(*bytes), {}};
}

namespace {

HttpResponse Unauthorized() {
  HttpResponse r = ErrorResponse(InvalidArgument("this module's pages need its vendor's token"));
  r.status = 401;
  r.headers.emplace_back("WWW-Authenticate", "Bearer");
  return r;
}

// '*' matches any run of characters; everything else itself.
bool GlobMatch(std::string_view pattern, std::string_view s) {
  size_t p = 0, i = 0, star = std::string_view::npos, mark = 0;
  while (i < s.size()) {
    if (p < pattern.size() && pattern[p] == '*') {
      star = p++;
      mark = i;
    } else if (p < pattern.size() && pattern[p] == s[i]) {
      ++p;
      ++i;
    } else if (star != std::string_view::npos) {
      p = star + 1;
      i = ++mark;
    } else {
      return false;
    }
  }
  while (p < pattern.size() && pattern[p] == '*') ++p;
  return p == pattern.size();
}

}  // namespace

// A vendor's module: that vendor's token, compared in constant time (as
// digests, so the length says nothing either).
bool Router::VendorAllows(std::string_view module, std::string_view authorization,
                          bool* claimed_out) const {
  bool claimed = false, allowed = false;
  std::string given;
  if (authorization.starts_with("Bearer ")) given = Sha256(authorization.substr(7));
  for (const Vendor& v : vendors_) {
    bool match = false;
    for (const std::string& pat : v.patterns) match = match || GlobMatch(pat, module);
    if (!match) continue;
    claimed = true;
    unsigned char diff = given.size() == v.token_sha256.size() ? 0 : 1;
    for (size_t i = 0; i < v.token_sha256.size() && i < given.size(); ++i) {
      diff |= static_cast<unsigned char>(given[i] ^ v.token_sha256[i]);
    }
    allowed = allowed || diff == 0;
  }
  if (claimed_out != nullptr) *claimed_out = claimed;
  return !claimed || allowed;
}

namespace {

// Every series `filter` (and `family`) matches, summed over [from, to]
// (all time when both are unbounded; a series with no data there is
// skipped), to `visit`; at most `limit` of them, else *truncated.
Status ForEachInRange(Store* store, const ApiFilter& filter, int32_t from, int32_t to,
                      std::optional<int> family, size_t limit, bool* truncated,
                      const std::function<void(ApiAggregate&&)>& visit) {
  size_t n = 0;
  return store->ForEachApiInRange(filter, from, to, [&](ApiAggregate&& a) {
    if (family && a.key.platform.cpu_family != *family) return true;
    if (n == limit) {
      *truncated = true;
      return false;
    }
    ++n;
    visit(std::move(a));
    return true;
  });
}

// The same, as the model's series.
Status CollectSeries(Store* store, const ApiFilter& filter, int32_t from, int32_t to,
                     std::optional<int> family, size_t limit, std::vector<SeriesSum>* out,
                     bool* truncated) {
  return ForEachInRange(store, filter, from, to, family, limit, truncated, [&](ApiAggregate&& a) {
    SeriesSum x;
    ApiKeyToWire(a.key, &x.key);
    x.histogram = std::move(a.histogram);
    x.runs = a.runs;
    x.resolution_ns = a.resolution_ns;
    out->push_back(std::move(x));
  });
}

}  // namespace

HttpResponse Router::GetModule(std::string_view query, std::string_view authorization) {
  auto params = ParseQuery(query);
  if (!params.ok()) return ErrorResponse(params.status());
  ApiFilter filter;
  int32_t from = kUnboundedFirst, to = kUnboundedLast;
  size_t limit = 100000;
  std::optional<int> family;
  Status s = ParseFilter(*params, &filter, &from, &to, &limit, &family);
  if (!s.ok()) return ErrorResponse(s);
  if (filter.module.empty() || !filter.symbol_prefix.empty()) {
    return ErrorResponse(InvalidArgument("/v1/module needs module= (and takes no symbol)"));
  }
  if (!VendorAllows(filter.module, authorization)) return Unauthorized();
  JsonWriter j;
  j.BeginObject();
  j.Key("module").String(filter.module);
  j.Key("from").String(from == kUnboundedFirst ? "" : FormatDay(from));
  j.Key("to").String(to == kUnboundedLast ? "" : FormatDay(to));
  j.Key("series").BeginArray();
  bool truncated = false;
  s = ForEachInRange(store_, filter, from, to, family, limit, &truncated, [&](ApiAggregate&& a) {
    j.BeginObject();
    WriteKey(j, a.key);
    j.Key("runs").Uint(a.runs);
    if (a.resolution_ns != 0) j.Key("resolution_ns").Uint(a.resolution_ns);
    WriteHistogram(j, a.histogram);
    j.EndObject();
  });
  if (!s.ok()) return ErrorResponse(s);
  j.EndArray();
  j.Key("truncated").Bool(truncated);
  j.EndObject();
  return HttpResponse{200, "application/json", j.Take() + "\n", {}};
}

namespace {

// Takes `name` out of the query (ParseFilter refuses what it does not know).
std::string TakeParam(std::vector<std::pair<std::string, std::string>>* params,
                      const std::string& name) {
  for (auto it = params->begin(); it != params->end(); ++it) {
    if (it->first != name) continue;
    std::string v = it->second;
    params->erase(it);
    return v;
  }
  return "";
}

}  // namespace

HttpResponse Router::ListModules(std::string_view authorization) {
  std::vector<ModuleSummary> modules;
  double age_s = 0;
  {
    std::lock_guard<std::mutex> lock(modules_mu_);
    const auto now = std::chrono::steady_clock::now();
    if (!modules_valid_ || now - modules_at_ > std::chrono::seconds(60)) {
      struct Acc {
        std::set<std::string> apis, versions;
        uint64_t calls = 0, series = 0;
      };
      std::map<std::string, Acc> acc;
      ApiFilter filter;
      filter.metric = wire::METRIC_WALL_TIME_NS;
      Status s = store_->ForEachApi(filter, [&](ApiAggregate&& a) {
        Acc& m = acc[a.key.module];
        m.apis.insert(a.key.symbol);
        m.versions.insert(a.key.module_version);
        m.calls += a.histogram.count();
        ++m.series;
        return true;
      });
      if (!s.ok()) return ErrorResponse(s);
      modules_.clear();
      for (auto& [name, m] : acc) {
        modules_.push_back({name, m.apis.size(), m.calls, m.series,
                            std::vector<std::string>(m.versions.begin(), m.versions.end())});
      }
      modules_at_ = now;
      modules_valid_ = true;
    }
    modules = modules_;
    age_s = std::chrono::duration<double>(now - modules_at_).count();
  }
  JsonWriter j;
  j.BeginObject();
  j.Key("as_of_seconds_ago").Double(age_s);
  j.Key("modules").BeginArray();
  for (const ModuleSummary& m : modules) {
    bool claimed = false;
    const bool open = VendorAllows(m.module, authorization, &claimed);
    j.BeginObject();
    j.Key("module").String(m.module).Key("vendor").Bool(claimed).Key("open").Bool(open);
    j.Key("apis").Uint(m.apis).Key("series").Uint(m.series).Key("calls").Uint(m.calls);
    j.Key("versions").BeginArray();
    for (const std::string& v : m.versions) j.String(v);
    j.EndArray();
    j.EndObject();
  }
  j.EndArray();
  j.EndObject();
  return HttpResponse{200, "application/json", j.Take() + "\n", {}};
}

HttpResponse Router::GetReport(std::string_view query, std::string_view authorization) {
  auto params = ParseQuery(query);
  if (!params.ok()) return ErrorResponse(params.status());
  ModelFilter mf;
  mf.scope = TakeParam(&*params, "namespace");
  ApiFilter filter;
  int32_t from = kUnboundedFirst, to = kUnboundedLast;
  size_t limit = 100000;
  std::optional<int> family;
  Status s = ParseFilter(*params, &filter, &from, &to, &limit, &family);
  if (!s.ok()) return ErrorResponse(s);
  if (filter.module.empty()) return ErrorResponse(InvalidArgument("/v1/report needs module="));
  if (!VendorAllows(filter.module, authorization)) return Unauthorized();
  std::vector<SeriesSum> series;
  bool truncated = false;
  s = CollectSeries(store_, filter, from, to, family, limit, &series, &truncated);
  if (!s.ok()) return ErrorResponse(s);
  const ModuleModel m = BuildModuleModel(filter.module, series, mf);
  const std::string range = from == kUnboundedFirst && to == kUnboundedLast
                                ? "all time"
                                : (from == kUnboundedFirst ? std::string("...") : FormatDay(from)) +
                                      " .. " +
                                      (to == kUnboundedLast ? std::string("...") : FormatDay(to));
  std::string filters = mf.scope.empty() ? "" : "namespace " + mf.scope;
  if (!filter.module_version.empty()) {
    filters += (filters.empty() ? "" : ", ") + std::string("version ") + filter.module_version;
  }
  return HttpResponse{
      200, "application/json", ModuleModelJson(m, "aggregator", range, filters), {}};
}

HttpResponse Router::GetDiff(std::string_view query, std::string_view authorization) {
  auto params = ParseQuery(query);
  if (!params.ok()) return ErrorResponse(params.status());
  const std::string av = TakeParam(&*params, "a_version"), bv = TakeParam(&*params, "b_version");
  const std::string af = TakeParam(&*params, "a_from"), at = TakeParam(&*params, "a_to");
  const std::string bf = TakeParam(&*params, "b_from"), bt = TakeParam(&*params, "b_to");
  std::string statistic = TakeParam(&*params, "statistic");
  if (statistic.empty()) statistic = "mean";
  ApiFilter filter;
  int32_t from = kUnboundedFirst, to = kUnboundedLast;
  size_t limit = 100000;
  std::optional<int> family;
  Status s = ParseFilter(*params, &filter, &from, &to, &limit, &family);
  if (!s.ok()) return ErrorResponse(s);
  if (filter.module.empty()) return ErrorResponse(InvalidArgument("/v1/diff needs module="));
  const bool by_version = !av.empty() || !bv.empty();
  if (by_version == (!af.empty() || !at.empty() || !bf.empty() || !bt.empty()) ||
      (by_version && (av.empty() || bv.empty()))) {
    return ErrorResponse(InvalidArgument(
        "/v1/diff takes a_version= and b_version=, or a_from=, a_to=, b_from=, b_to="));
  }
  if (!VendorAllows(filter.module, authorization)) return Unauthorized();
  DiffOptions o;
  o.metric = filter.metric ? static_cast<int>(*filter.metric) - 1 : 0;
  o.test.stop_after = 20;
  if (statistic != "mean") {
    const double q =
        statistic.size() > 1 && statistic[0] == 'p' ? std::atof(statistic.c_str() + 1) / 100 : -1;
    if (q <= 0 || q >= 1) return ErrorResponse(InvalidArgument("statistic is mean or pNN"));
    o.test.statistic = PermutationOptions::kQuantile;
    o.test.quantile = q;
  }
  filter.metric.reset();
  std::vector<SeriesSum> a, b;
  bool truncated = false;
  ModelFilter fa, fb;
  std::string before, after;
  if (by_version) {
    s = CollectSeries(store_, filter, from, to, family, limit, &a, &truncated);
    b = a;
    fa.module_version = av;
    fb.module_version = bv;
    before = av;
    after = bv;
  } else {
    auto day = [](const std::string& d, int32_t unbounded) -> StatusOr<int32_t> {
      if (d.empty()) return unbounded;
      return ParseDay(d);
    };
    StatusOr<int32_t> d1 = day(af, kUnboundedFirst), d2 = day(at, kUnboundedLast),
                      d3 = day(bf, kUnboundedFirst), d4 = day(bt, kUnboundedLast);
    for (const auto* d : {&d1, &d2, &d3, &d4}) {
      if (!d->ok()) return ErrorResponse(d->status());
    }
    s = CollectSeries(store_, filter, *d1, *d2, family, limit, &a, &truncated);
    if (s.ok()) s = CollectSeries(store_, filter, *d3, *d4, family, limit, &b, &truncated);
    before = af + ".." + at;
    after = bf + ".." + bt;
  }
  if (!s.ok()) return ErrorResponse(s);
  const ModuleDiff d = DiffModules(BuildModuleModel(filter.module, a, fa),
                                   BuildModuleModel(filter.module, b, fb), o);
  return HttpResponse{200,
                      "application/json",
                      ModuleDiffJson(d, filter.module, before, after, ModelMetricName(o.metric),
                                     statistic, o, /*all=*/true),
                      {}};
}

HttpResponse Router::Recent(std::string_view query) {
  auto params = ParseQuery(query);
  if (!params.ok()) return ErrorResponse(params.status());
  size_t limit = 50;
  const std::string l = TakeParam(&*params, "limit");
  if (!l.empty()) limit = std::clamp<size_t>(std::strtoul(l.c_str(), nullptr, 10), 1, kRecent);
  std::vector<Seen> seen;  // oldest first
  {
    std::lock_guard<std::mutex> lock(recent_mu_);
    if (recent_.size() < kRecent) {
      seen = recent_;
    } else {
      seen.assign(recent_.begin() + static_cast<std::ptrdiff_t>(recent_next_), recent_.end());
      seen.insert(seen.end(), recent_.begin(),
                  recent_.begin() + static_cast<std::ptrdiff_t>(recent_next_));
    }
  }
  JsonWriter j;
  j.BeginObject();
  j.Key("apis").BeginArray();
  size_t n = 0;
  std::set<std::pair<std::string, std::string>> shown;
  for (auto it = seen.rbegin(); it != seen.rend() && n < limit; ++it) {
    if (!shown.insert({it->module, it->symbol}).second) continue;  // an older repeat
    ++n;
    j.BeginObject();
    j.Key("module").String(it->module).Key("symbol").String(it->symbol);
    j.Key("unix_ms").Int(it->unix_ms);
    j.EndObject();
  }
  j.EndArray();
  j.EndObject();
  return HttpResponse{200, "application/json", j.Take() + "\n", {}};
}

HttpResponse Router::UiAsset(std::string_view path) {
  if (path == "/ui") {
    HttpResponse r{301, "text/plain", "see /ui/\n", {}};
    r.headers.emplace_back("Location", "/ui/");
    return r;
  }
  std::string_view name = path.substr(4);  // after "/ui/"
  if (name.empty()) name = "index.html";
  const UiFile* f = FindUiFile(name);
  if (f == nullptr) return ErrorResponse(NotFound("no such dashboard file"));
  HttpResponse r{200, std::string(f->content_type), std::string(f->body), {}};
  // Nothing from elsewhere, no framing by other sites.
  r.headers.emplace_back("Content-Security-Policy",
                         "default-src 'self'; img-src 'self' data:; style-src 'self'; "
                         "script-src 'self'; frame-ancestors 'none'");
  r.headers.emplace_back("X-Content-Type-Options", "nosniff");
  return r;
}

HttpResponse Router::Metrics() {
  HttpResponse r{200, "text/plain; version=0.0.4", "", {}};
  metrics_->AppendPrometheus(&r.body);
  store_->AppendMetrics(&r.body);
  if (lease_ != nullptr) {
    r.body +=
        "# HELP fieldprof_lease_held 1 while this aggregator publishes and rolls up\n"
        "# TYPE fieldprof_lease_held gauge\nfieldprof_lease_held " +
        std::string(lease_->Held() ? "1" : "0") + "\n";
  }
  return r;
}

namespace {

std::string Hex16(uint64_t v) {
  char buf[17];
  std::snprintf(buf, sizeof buf, "%016" PRIx64, v);
  return buf;
}

// Whether an If-None-Match header lists `etag` (or is "*").
bool EtagMatches(std::string_view header, std::string_view etag) {
  while (!header.empty()) {
    const size_t comma = header.find(',');
    std::string_view t = header.substr(0, comma);
    header = comma == std::string_view::npos ? std::string_view() : header.substr(comma + 1);
    while (!t.empty() && t.front() == ' ') t.remove_prefix(1);
    while (!t.empty() && t.back() == ' ') t.remove_suffix(1);
    if (t.starts_with("W/")) t.remove_prefix(2);
    if (t == "*" || t == etag) return true;
  }
  return false;
}

HttpResponse NotPublishing() {
  return ErrorResponse(
      NotFound("this aggregator does not publish snapshots (start it with --signing_key)"));
}

// 200 with `bytes`, or 304 when the client holds `etag` already.
HttpResponse Cacheable(std::string bytes, const std::string& etag, std::string cache_control,
                       std::string_view if_none_match, class Metrics* metrics) {
  HttpResponse r;
  r.content_type = std::string(kProtobufContentType);
  r.headers.emplace_back("ETag", etag);
  r.headers.emplace_back("Cache-Control", std::move(cache_control));
  if (!if_none_match.empty() && EtagMatches(if_none_match, etag)) {
    r.status = 304;
    return r;
  }
  if (metrics != nullptr) metrics->SnapshotServed(bytes.size());
  r.body = std::move(bytes);
  return r;
}

}  // namespace

HttpResponse Router::SnapshotManifest(std::string_view if_none_match) {
  if (publish_ == nullptr) return NotPublishing();
  StatusOr<wire::Manifest> m = publish_->publisher()->CurrentManifest();
  StatusOr<std::string> bytes = publish_->publisher()->SignedManifestBytes();
  if (!m.ok() || !bytes.ok()) return ErrorResponse(NotFound("no snapshot published yet"));
  // The manifest changes with every cycle: clients revalidate each time.
  return Cacheable(std::move(*bytes), "\"m" + std::to_string(m->snapshot_version()) + "\"",
                   "no-cache", if_none_match, metrics_);
}

HttpResponse Router::SnapshotFragment(std::string_view index_text, std::string_view query,
                                      std::string_view if_none_match) {
  if (publish_ == nullptr) return NotPublishing();
  uint32_t index = 0;
  auto [end, ec] = std::from_chars(index_text.data(), index_text.data() + index_text.size(), index);
  if (ec != std::errc() || end != index_text.data() + index_text.size()) {
    return ErrorResponse(
        InvalidArgument("fragment index must be a number, got '" + std::string(index_text) + "'"));
  }
  StatusOr<std::vector<std::pair<std::string, std::string>>> params = ParseQuery(query);
  if (!params.ok()) return ErrorResponse(params.status());
  uint64_t version = 0;
  for (const auto& [k, v] : *params) {
    if (k != "version") return ErrorResponse(InvalidArgument("unknown parameter '" + k + "'"));
    auto [e, vec] = std::from_chars(v.data(), v.data() + v.size(), version, 16);
    if (vec != std::errc() || e != v.data() + v.size() || version == 0) {
      return ErrorResponse(InvalidArgument("version must be the fragment version in hex"));
    }
  }
  StatusOr<wire::Manifest> m = publish_->publisher()->CurrentManifest();
  if (!m.ok()) return ErrorResponse(NotFound("no snapshot published yet"));
  if (index >= m->fragment_count()) {
    return ErrorResponse(NotFound("no fragment " + std::to_string(index) + "; there are " +
                                  std::to_string(m->fragment_count())));
  }
  const bool pinned = version != 0;
  if (!pinned) version = m->fragments(static_cast<int>(index)).version();
  StatusOr<std::string> bytes = publish_->publisher()->FragmentBytes(index, version);
  if (!bytes.ok()) {
    return ErrorResponse(NotFound("fragment " + std::to_string(index) + " version " +
                                  Hex16(version) + " is no longer kept; fetch the manifest again"));
  }
  // A versioned fragment never changes; the current one moves with the rotation.
  return Cacheable(std::move(*bytes), "\"" + Hex16(version) + "\"",
                   pinned ? "public, max-age=31536000, immutable" : "no-cache", if_none_match,
                   metrics_);
}

HttpResponse Router::AdminPublish(std::string_view authorization, std::string_view query) {
  if (publish_ == nullptr) return NotPublishing();
  if (admin_token_.empty()) {
    HttpResponse r = ErrorResponse(
        InvalidArgument("admin calls are off (start the aggregator with --admin_token_file)"));
    r.status = 403;
    return r;
  }
  // Constant-time comparison: the token is a secret.
  const std::string expected = "Bearer " + admin_token_;
  bool same = authorization.size() == expected.size();
  unsigned char diff = 0;
  for (size_t i = 0; same && i < expected.size(); ++i) {
    diff |= static_cast<unsigned char>(authorization[i] ^ expected[i]);
  }
  if (!same || diff != 0) {
    HttpResponse r = ErrorResponse(InvalidArgument("missing or wrong admin token"));
    r.status = 401;
    r.headers.emplace_back("WWW-Authenticate", "Bearer");
    return r;
  }
  StatusOr<std::vector<std::pair<std::string, std::string>>> params = ParseQuery(query);
  if (!params.ok()) return ErrorResponse(params.status());
  bool all = false;
  for (const auto& [k, v] : *params) {
    if (k != "all" || (v != "0" && v != "1")) {
      return ErrorResponse(InvalidArgument("the only parameter is all=0|1"));
    }
    all = v == "1";
  }
  StatusOr<CycleResult> c = publish_->RunNow(all);
  if (!c.ok()) {
    // The whole reason (file names included) goes to the operator's log;
    // the client is told what kind of failure, never a server path. The
    // published snapshot stays as it was.
    std::fprintf(stderr, "fieldprof-aggregator: publish cycle failed: %s\n",
                 c.status().ToString().c_str());
    return ErrorResponse(
        Status(c.status().code(), "the publish cycle failed (" +
                                      std::string(StatusCodeName(c.status().code())) +
                                      "); the published snapshot is unchanged and the reason is in "
                                      "the aggregator's log"));
  }
  JsonWriter j;
  j.BeginObject();
  j.Key("snapshot_version").Uint(c->snapshot_version);
  j.Key("rebuilt").Uint(c->rebuilt);
  j.Key("changed").Uint(c->changed);
  j.Key("series").Uint(c->series);
  j.Key("bytes").Uint(c->bytes);
  j.EndObject();
  return HttpResponse{200, "application/json", j.Take() + "\n", {}};
}

}  // namespace fieldprof::aggregator
