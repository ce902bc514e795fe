#include "tools/shared/module_source.h"

#include "common/settings/options.h"
#include "common/snapshot/snapshot_cache.h"
#include "common/snapshot/snapshot_index.h"
#include "common/wire/api_key.h"
#include "common/wire/wire.h"

namespace fieldprof::tools {

StatusOr<std::vector<SeriesSum>> SeriesFromCache(const std::string& cache_dir,
                                                 const std::string& module) {
  std::vector<SeriesSum> out;
  SnapshotCache cache(cache_dir);
  if (cache.Fragments().empty()) {
    return NotFound("the snapshot cache " + cache_dir +
                    " holds no fragments (fieldprof pull --all fetches them, or use --host)");
  }
  // Through the index: the module's records only.
  FP_ASSIGN_OR_RETURN(SnapshotIndex index, SnapshotIndex::Open(cache));
  Status s = index.ForEachRecordOfModule(module, [&](const wire::Record& r) {
    SeriesSum x;
    x.key = r.key();
    x.histogram = HistogramFromWire(r.histogram());
    x.runs = r.runs();
    x.resolution_ns = r.resolution_ns();
    x.machines = r.machine_count();
    out.push_back(std::move(x));
    return true;
  });
  if (!s.ok()) return s;
  return out;
}

StatusOr<Histogram> HistogramFromJson(const nlohmann::json& h) {
  try {
    Histogram out;
    out.SetZeroCount(h.at("zero_count").get<uint64_t>());
    for (const nlohmann::json& b : h.at("buckets")) {
      const int i = b.at("index").get<int>();
      if (i < 0 || i >= kNumBuckets) return DataLoss("a bucket index out of range");
      HistogramBucket bucket;
      bucket.count = b.at("count").get<uint64_t>();
      if (!ParseUint128(b.at("sum").get<std::string>(), &bucket.sum)) {
        return DataLoss("a bucket sum that is not a decimal number");
      }
      if (b.contains("sum_sq") &&
          !ParseUint128(b.at("sum_sq").get<std::string>(), &bucket.sum_sq)) {
        return DataLoss("a bucket's sum of squares that is not a decimal number");
      }
      out.SetBucket(i, bucket);
    }
    if (h.value("sum_sq_saturated", false)) out.MarkSumSqSaturated();
    out.SetMinMax(h.at("min").get<uint64_t>(), h.at("max").get<uint64_t>());
    return out;
  } catch (const std::exception& e) {
    return DataLoss(std::string("a histogram that does not read: ") + e.what());
  }
}

StatusOr<std::vector<SeriesSum>> SeriesFromAggregator(HttpsClient& http, const ModuleQuery& q) {
  std::string target = "/v1/module?module=" + UrlEncode(q.module);
  if (!q.version.empty()) target += "&version=" + UrlEncode(q.version);
  if (!q.from.empty()) target += "&from=" + UrlEncode(q.from);
  if (!q.to.empty()) target += "&to=" + UrlEncode(q.to);
  if (!q.arch.empty()) target += "&arch=" + UrlEncode(q.arch);
  if (!q.vendor.empty()) target += "&vendor=" + UrlEncode(q.vendor);
  if (q.family >= 0) target += "&family=" + std::to_string(q.family);
  HttpHeaders headers;
  if (!q.token.empty()) headers.emplace_back("Authorization", "Bearer " + q.token);
  FP_ASSIGN_OR_RETURN(HttpReply r, http.Get(target, headers));
  if (r.status == 401)
    return InvalidArgument("401: this module's pages need its vendor's token (--token)");
  if (r.status != 200) {
    return Internal("GET " + target + " answered " + std::to_string(r.status) + ": " + r.body);
  }
  const nlohmann::json j = nlohmann::json::parse(r.body, nullptr, false);
  if (j.is_discarded() || !j.contains("series"))
    return DataLoss("the aggregator's answer is not JSON");
  std::vector<SeriesSum> out;
  try {
    for (const nlohmann::json& s : j.at("series")) {
      SeriesSum x;
      x.key.set_module(s.at("module").get<std::string>());
      x.key.set_module_version(s.at("module_version").get<std::string>());
      x.key.set_symbol(s.at("symbol").get<std::string>());
      FP_ASSIGN_OR_RETURN(wire::Metric m, ParseMetric(s.at("metric").get<std::string>()));
      x.key.set_metric(m);
      const nlohmann::json& p = s.at("platform");
      StatusOr<wire::Arch> arch = ParseArch(p.at("arch").get<std::string>());
      if (arch.ok()) x.key.mutable_platform()->set_arch(*arch);
      StatusOr<wire::CpuVendor> vendor = ParseCpuVendor(p.at("cpu_vendor").get<std::string>());
      if (vendor.ok()) x.key.mutable_platform()->set_cpu_vendor(*vendor);
      x.key.mutable_platform()->set_cpu_family(p.at("cpu_family").get<uint32_t>());
      x.runs = s.at("runs").get<uint64_t>();
      x.machines = s.value("machines", uint64_t{0});
      x.resolution_ns = s.value("resolution_ns", uint64_t{0});
      FP_ASSIGN_OR_RETURN(Histogram h, HistogramFromJson(s.at("histogram")));
      x.histogram = std::move(h);
      out.push_back(std::move(x));
    }
  } catch (const std::exception& e) {
    return DataLoss(std::string("the aggregator's answer does not read: ") + e.what());
  }
  return out;
}

// "x86_64[/amd[/25]]" -> the filter's fields and the query's names.
Status ParsePlatform(const std::string& spec, ModelFilter* f, ModuleQuery* q) {
  if (spec.empty()) return Status::Ok();
  std::vector<std::string> parts;
  for (size_t at = 0; at <= spec.size();) {
    const size_t slash = spec.find('/', at);
    parts.push_back(spec.substr(at, slash - at));
    if (slash == std::string::npos) break;
    at = slash + 1;
  }
  if (parts.size() > 3) return InvalidArgument("--platform is ARCH[/VENDOR[/FAMILY]]");
  StatusOr<wire::Arch> arch = ParseArch(parts[0]);
  if (!arch.ok()) return InvalidArgument(arch.status().message() + " (e.g. x86_64)");
  f->arch = *arch;
  q->arch = parts[0];
  if (parts.size() >= 2) {
    StatusOr<wire::CpuVendor> vendor = ParseCpuVendor(parts[1]);
    if (!vendor.ok()) return InvalidArgument(vendor.status().message() + " (e.g. amd, intel)");
    f->cpu_vendor = *vendor;
    q->vendor = parts[1];
  }
  if (parts.size() == 3) {
    char* end = nullptr;
    const long fam = std::strtol(parts[2].c_str(), &end, 10);
    if (parts[2].empty() || *end != 0 || fam < 0 || fam > 255) {
      return InvalidArgument("a CPU family is 0..255");
    }
    f->cpu_family = static_cast<int>(fam);
    q->family = f->cpu_family;
  }
  return Status::Ok();
}

std::string OutputFormat(const std::string& format, const std::string& output) {
  if (!format.empty()) return format;
  for (const char* ext : {"html", "csv", "json", "md"}) {
    const std::string dot = std::string(".") + ext;
    if (output.size() > dot.size() &&
        output.compare(output.size() - dot.size(), dot.size(), dot) == 0)
      return ext;
  }
  return "text";
}

ModuleSource::ModuleSource() : cache_dir(DefaultSnapshotCacheDir()) { client.options.host = ""; }

void ModuleSource::Register(OptionTable& t) {
  t.AddString("cache", &cache_dir, "the snapshot cache (without --host)");
  client.Register(t);
  t.AddString("token", &token, "with --host: the vendor's bearer token for its modules");
}

std::string ModuleSource::Name() const {
  return remote() ? "aggregator " +
                        FormatHostPort(client.options.host, static_cast<uint16_t>(client.port))
                  : "snapshot cache";
}

StatusOr<std::vector<SeriesSum>> ModuleSource::Load(ModuleQuery q) const {
  if (!remote()) return SeriesFromCache(cache_dir, q.module);
  HttpsClient http(client.Resolve());
  q.token = token;
  return SeriesFromAggregator(http, q);
}

}  // namespace fieldprof::tools
