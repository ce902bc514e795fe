#include "aggregator/http/router.h"

#include "common/net/gzip.h"

namespace fieldprof::aggregator {

enum class Router::Endpoint {
  kIngest,
  kTokens,
  kApis,
  kApi,
  kModule,
  kReport,
  kDiff,
  kStacks,
  kUiRoot,
  kUiFile,
  kModules,
  kRecent,
  kLabProfiles,
  kLabProfile,
  kDevRuns,
  kDevRun,
  kDevTags,
  kDevReport,
  kDevCompare,
  kConfig,
  kManifest,
  kFragment,
  kHealth,
  kMetrics,
  kPublish,
};

namespace {

struct RouteEntry {
  Router::Route route;
  Router::Endpoint endpoint;
};

// In the order docs/aggregator.md lists them.
constexpr RouteEntry kRoutes[] = {
    {{"POST", "/v1/batches", "ingest"}, Router::Endpoint::kIngest},
    {{"GET, POST", "/v1/tokens", "tokens"}, Router::Endpoint::kTokens},
    {{"GET", "/v1/apis", "query"}, Router::Endpoint::kApis},
    {{"GET", "/v1/api", "query"}, Router::Endpoint::kApi},
    {{"GET", "/v1/module", "vendor"}, Router::Endpoint::kModule},
    {{"GET", "/v1/report", "vendor"}, Router::Endpoint::kReport},
    {{"GET", "/v1/diff", "vendor"}, Router::Endpoint::kDiff},
    {{"GET", "/v1/stacks", "vendor"}, Router::Endpoint::kStacks},
    {{"GET", "/ui", "dashboard"}, Router::Endpoint::kUiRoot},
    {{"GET", "/ui/{file}", "dashboard"}, Router::Endpoint::kUiFile},
    {{"GET", "/v1/modules", "dashboard"}, Router::Endpoint::kModules},
    {{"GET", "/v1/recent", "dashboard"}, Router::Endpoint::kRecent},
    {{"GET, POST", "/v1/lab/profiles", "lab"}, Router::Endpoint::kLabProfiles},
    {{"GET", "/v1/lab/profiles/{id}", "lab"}, Router::Endpoint::kLabProfile},
    {{"GET, POST", "/v1/dev/runs", "dev"}, Router::Endpoint::kDevRuns},
    {{"GET", "/v1/dev/runs/{id}", "dev"}, Router::Endpoint::kDevRun},
    {{"GET", "/v1/dev/tags", "dev"}, Router::Endpoint::kDevTags},
    {{"GET", "/v1/dev/report", "dev"}, Router::Endpoint::kDevReport},
    {{"GET", "/v1/dev/compare", "dev"}, Router::Endpoint::kDevCompare},
    {{"GET", "/v1/config", "snapshot"}, Router::Endpoint::kConfig},
    {{"GET", "/v1/snapshot/manifest", "snapshot"}, Router::Endpoint::kManifest},
    {{"GET", "/v1/snapshot/fragments/{index}", "snapshot"}, Router::Endpoint::kFragment},
    {{"GET", "/healthz", "admin"}, Router::Endpoint::kHealth},
    {{"GET", "/metrics", "admin"}, Router::Endpoint::kMetrics},
    {{"POST", "/v1/admin/publish", "admin"}, Router::Endpoint::kPublish},
};

// Whether `path` is the route's: equal, or for a pattern ending in
// "{name}" the part before it and then (in *param) the rest: one segment,
// empty only for "/ui/{file}".
bool PathMatches(std::string_view pattern, std::string_view path, std::string_view* param) {
  const size_t brace = pattern.find('{');
  if (brace == std::string_view::npos) return pattern == path;
  const std::string_view prefix = pattern.substr(0, brace);
  if (!path.starts_with(prefix)) return false;
  *param = path.substr(prefix.size());
  if (param->find('/') != std::string_view::npos) return false;
  return !param->empty() || prefix == "/ui/";
}

// Whether `methods` ("GET, POST") lists `method`; HEAD counts as GET.
bool MethodAllowed(std::string_view methods, std::string_view method) {
  if (method == "HEAD") method = "GET";
  while (!methods.empty()) {
    const size_t comma = methods.find(',');
    std::string_view m = methods.substr(0, comma);
    while (m.starts_with(' ')) m.remove_prefix(1);
    if (m == method) return true;
    methods = comma == std::string_view::npos ? std::string_view() : methods.substr(comma + 1);
  }
  return false;
}

}  // namespace

std::span<const Router::Route> Router::Routes() {
  static const std::vector<Route> routes = [] {
    std::vector<Route> r;
    for (const RouteEntry& e : kRoutes) r.push_back(e.route);
    return r;
  }();
  return routes;
}

Router::Router(RouterParts p)
    : store_(p.store),
      vendors_(std::move(p.vendors)),
      ingest_(p.store, p.metrics, &recent_, p.clock, p.tokens, p.plausible),
      tokens_(p.tokens, p.clock),
      query_(p.store, p.metrics, p.clock),
      vendor_(p.store, &vendors_, p.metrics, p.answer_max_stale, p.answer_warm_stacks),
      dashboard_(p.store, &vendors_, &recent_),
      lab_(p.lab),
      dev_(p.dev, std::move(p.developers), p.clock),
      snapshot_(p.publish, std::move(p.fleet), p.metrics),
      admin_(p.store, p.metrics, p.publish, std::move(p.admin_token), p.lease,
             std::move(p.source_limits)) {}

HttpResponse Router::Handle(const HttpRequest& req) {
  std::string_view path = req.target, query;
  if (const size_t q = path.find('?'); q != std::string_view::npos) {
    query = path.substr(q + 1);
    path = path.substr(0, q);
  }
  for (const RouteEntry& e : kRoutes) {
    std::string_view param;
    if (!PathMatches(e.route.path, path, &param)) continue;
    if (!MethodAllowed(e.route.methods, req.method)) {
      return MethodNotAllowed(req.method, path, e.route.methods);
    }
    return Call(e.endpoint, req, query, param);
  }
  return ErrorResponse(
      NotFound("no such endpoint: " + std::string(req.method) + " " + std::string(path)));
}

HttpResponse Router::Call(Endpoint e, const HttpRequest& req, std::string_view query,
                          std::string_view param) {
  switch (e) {
    case Endpoint::kIngest:
      return ingest_.Ingest(req.content_type, req.body, req.body_storage);
    case Endpoint::kTokens:
      return req.method == "POST" ? tokens_.Issue(req.content_type, req.body) : tokens_.Info();
    case Endpoint::kApis:
      return query_.ListApis(query);
    case Endpoint::kApi:
      return query_.GetApi(query);
    case Endpoint::kModule:
      return vendor_.GetModule(query, req.authorization);
    case Endpoint::kReport:
      return vendor_.GetReport(query, req.authorization);
    case Endpoint::kDiff:
      return vendor_.GetDiff(query, req.authorization);
    case Endpoint::kStacks:
      return vendor_.GetStacks(query, req.authorization, AcceptsGzip(req.accept_encoding));
    case Endpoint::kUiRoot:
      return dashboard_.UiAsset("/ui");
    case Endpoint::kUiFile:
      return dashboard_.UiAsset(std::string("/ui/") + std::string(param));
    case Endpoint::kModules:
      return dashboard_.ListModules(req.authorization);
    case Endpoint::kRecent:
      return dashboard_.Recent(query);
    case Endpoint::kLabProfiles:
      return req.method == "POST" ? lab_.Upload(req.body) : lab_.List();
    case Endpoint::kLabProfile:
      return lab_.Get(param);
    case Endpoint::kDevRuns:
      return req.method == "POST" ? dev_.Upload(req.authorization, req.body)
                                  : dev_.Runs(req.authorization, query);
    case Endpoint::kDevRun:
      return dev_.Run(req.authorization, param);
    case Endpoint::kDevTags:
      return dev_.Tags(req.authorization);
    case Endpoint::kDevReport:
      return dev_.Report(req.authorization, query);
    case Endpoint::kDevCompare:
      return dev_.Compare(req.authorization, query);
    case Endpoint::kConfig:
      return snapshot_.Config();
    case Endpoint::kManifest:
      return snapshot_.Manifest(req.if_none_match);
    case Endpoint::kFragment:
      return snapshot_.Fragment(param, query, req.if_none_match);
    case Endpoint::kHealth:
      return admin_.Health();
    case Endpoint::kMetrics:
      return admin_.MetricsText();
    case Endpoint::kPublish:
      return admin_.Publish(req.authorization, query);
  }
  return ErrorResponse(Internal("unrouted endpoint"));
}

}  // namespace fieldprof::aggregator
