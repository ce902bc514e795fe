#include "aggregator/reads/dashboard_handler.h"

#include <algorithm>
#include <cstdlib>
#include <map>
#include <set>

#include "aggregator/http/http_status.h"
#include "aggregator/http/query_params.h"
#include "aggregator/reads/series_json.h"
#include "aggregator/store/k_anonymous_store.h"
#include "aggregator/ui/ui_assets.h"
#include "common/base/json_writer.h"

namespace fieldprof::aggregator {

StatusOr<std::vector<DashboardHandler::ModuleSummary>> DashboardHandler::Modules(double* age_s) {
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
    FP_RETURN_IF_ERROR(store_->ForEachApi(filter, [&](ApiAggregate&& a) {
      Acc& m = acc[a.key.module];
      m.apis.insert(a.key.symbol);
      m.versions.insert(a.key.module_version);
      m.calls += a.histogram.count();
      ++m.series;
      return true;
    }));
    modules_.clear();
    for (auto& [name, m] : acc) {
      modules_.push_back({name, m.apis.size(), m.calls, m.series,
                          std::vector<std::string>(m.versions.begin(), m.versions.end())});
    }
    modules_at_ = now;
    modules_valid_ = true;
  }
  *age_s = std::chrono::duration<double>(now - modules_at_).count();
  return modules_;
}

HttpResponse DashboardHandler::ListModules(std::string_view authorization) {
  double age_s = 0;
  StatusOr<std::vector<ModuleSummary>> modules = Modules(&age_s);
  if (!modules.ok()) return ErrorResponse(modules.status());
  JsonWriter j;
  j.BeginObject();
  j.Key("as_of_seconds_ago").Double(age_s);
  j.Key("modules").BeginArray();
  for (const ModuleSummary& m : *modules) {
    bool claimed = false;
    const bool open = vendors_->Allows(m.module, authorization, &claimed);
    j.BeginObject();
    j.Key("module").String(m.module).Key("vendor").Bool(claimed).Key("open").Bool(open);
    j.Key("apis").Uint(m.apis).Key("series").Uint(m.series).Key("calls").Uint(m.calls);
    j.Key("versions").BeginArray();
    for (const std::string& v : m.versions) j.String(v);
    j.EndArray();
    j.EndObject();
  }
  j.EndArray();
  if (Status s = WriteWithheld(j, store_); !s.ok()) return ErrorResponse(s);
  j.EndObject();
  return JsonResponse(j.Take());
}

HttpResponse DashboardHandler::Recent(std::string_view query) {
  StatusOr<QueryParams> params = ParseQuery(query);
  if (!params.ok()) return ErrorResponse(params.status());
  size_t limit = 50;
  const std::string l = TakeParam(&*params, "limit");
  if (!l.empty()) {
    limit = std::clamp<size_t>(std::strtoul(l.c_str(), nullptr, 10), 1, RecentApis::kCapacity);
  }
  // Behind k-anonymity, an API is shown once a series of it is published
  // (k_anonymous_store.h), however recently it came in.
  auto* published = dynamic_cast<KAnonymousStore*>(store_);
  JsonWriter j;
  j.BeginObject();
  j.Key("apis").BeginArray();
  for (const RecentApis::Seen& s : recent_->Latest(limit)) {
    if (published != nullptr) {
      ApiFilter f;
      f.module = s.module;
      f.symbol_prefix = s.symbol;
      f.symbol_exact = true;
      StatusOr<std::vector<ApiAggregate>> any = published->ListApis(f, 1);
      if (!any.ok()) return ErrorResponse(any.status());
      if (any->empty()) continue;
    }
    j.BeginObject();
    j.Key("module").String(s.module).Key("symbol").String(s.symbol);
    j.Key("unix_ms").Int(s.unix_ms);
    j.EndObject();
  }
  j.EndArray();
  j.EndObject();
  return JsonResponse(j.Take());
}

HttpResponse DashboardHandler::UiAsset(std::string_view path) {
  if (path == "/ui") {
    HttpResponse r{301, "text/plain", "see /ui/\n", {}};
    r.headers.emplace_back("Location", "/ui/");
    return r;
  }
  std::string_view name = path.substr(4);  // after "/ui/"
  if (name.empty()) name = "index.html";
  const EmbeddedFile* f = FindUiFile(name);
  if (f == nullptr) return ErrorResponse(NotFound("no such dashboard file"));
  HttpResponse r{200, std::string(f->content_type), std::string(f->body), {}};
  // Nothing from elsewhere, no framing by other sites.
  r.headers.emplace_back("Content-Security-Policy",
                         "default-src 'self'; img-src 'self' data:; style-src 'self'; "
                         "script-src 'self'; frame-ancestors 'none'");
  r.headers.emplace_back("X-Content-Type-Options", "nosniff");
  return r;
}

}  // namespace fieldprof::aggregator
