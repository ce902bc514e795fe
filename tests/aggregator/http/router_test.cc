// The router without a socket: dispatch by method and path, query strings,
// vendor access, and the one Status -> HTTP table. Over a real RocksDB
// store in a temp dir.
#include "aggregator/http/router.h"

#include <gtest/gtest.h>

#include <cstring>
#include <fstream>
#include <map>
#include <nlohmann/json.hpp>
#include <regex>
#include <set>
#include <tuple>

#include "aggregator/http/query_params.h"
#include "aggregator/publish/publisher.h"
#include "aggregator/reads/vendor_access.h"
#include "aggregator/store/store_rocksdb.h"
#include "common/crypto/signing.h"
#include "tests/support/test_util.h"

namespace fieldprof::aggregator {
namespace {

using fieldprof::testing::IdOf;
using fieldprof::testing::SimpleBatch;
using fieldprof::testing::TempDir;
using fieldprof::testing::WaitUntil;

std::string Header(const HttpResponse& r, const std::string& name) {
  for (const auto& [k, v] : r.headers) {
    if (k == name) return v;
  }
  return "";
}

class RouterTest : public ::testing::Test {
 protected:
  void SetUp() override {
    auto store = OpenRocksDbStore({.path = dir_.File("db")});
    ASSERT_TRUE(store.ok()) << store.status().ToString();
    store_ = std::move(*store);
  }
  void TearDown() override {
    router_.reset();
    if (store_) IgnoreError(store_->Close());
  }

  Router& MakeRouter(std::vector<Vendor> vendors = {}, size_t answer_warm_stacks = 5000) {
    RouterParts parts;
    parts.store = store_.get();
    parts.metrics = &metrics_;
    parts.vendors = std::move(vendors);
    parts.answer_warm_stacks = answer_warm_stacks;
    router_ = std::make_unique<Router>(std::move(parts));
    return *router_;
  }

  // Posts a one-record batch and waits until the sums hold it.
  void Ingest(uint64_t id, const std::string& module, const std::string& symbol) {
    const HttpResponse r =
        router_->Handle("POST", "/v1/batches", kProtobufContentType,
                        SimpleBatch(IdOf(id), module, symbol, 1500, 3).SerializeAsString());
    ASSERT_EQ(r.status, 200) << r.body;
    ASSERT_TRUE(store_->WaitApplied(std::chrono::seconds(30)).ok());
  }

  HttpResponse Get(const std::string& target, const std::string& authorization = "") {
    return router_->Handle(HttpRequest{"GET", target, "", "", "", authorization, ""});
  }

  TempDir dir_;
  Metrics metrics_;
  std::unique_ptr<Store> store_;
  std::unique_ptr<Router> router_;
};

// -------------------------------------------------------------- dispatch

// A concrete path for a route's pattern.
std::string Concrete(std::string_view pattern) {
  std::string p(pattern);
  if (const size_t brace = p.find('{'); brace != std::string::npos) {
    p = p.substr(0, brace) + (p.ends_with("{index}") ? "0" : p.ends_with("{id}") ? "ab" : "x");
  }
  return p;
}

TEST_F(RouterTest, EveryRouteIsReachedWithItsMethodsAndRefusesOthersWith405) {
  Router& router = MakeRouter();
  ASSERT_GE(Router::Routes().size(), 18u);
  std::set<std::string> paths;
  for (const Router::Route& route : Router::Routes()) {
    EXPECT_TRUE(paths.insert(std::string(route.path)).second) << "listed twice: " << route.path;
    const std::string path = Concrete(route.path);
    for (const char* method : {"GET", "POST", "HEAD", "PUT", "DELETE"}) {
      const std::string m = method;
      const bool allowed = route.methods.find(m == "HEAD" ? "GET" : m) != std::string_view::npos;
      const HttpResponse r = router.Handle(m, path, "", "");
      if (allowed) {
        EXPECT_NE(r.status, 405) << m << " " << path << ": " << r.body;
        EXPECT_EQ(r.body.find("no such endpoint"), std::string::npos) << m << " " << path;
      } else {
        EXPECT_EQ(r.status, 405) << m << " " << path << ": " << r.body;
        EXPECT_EQ(Header(r, "Allow"), route.methods) << m << " " << path;
      }
    }
  }
}

// docs/aggregator.md's endpoint table lists exactly the router's routes,
// with the same methods: rows "| GET | `/v1/apis` | query | ... |".
TEST(RouterDocsTest, TheEndpointTableInTheDocsIsTheRoutersList) {
  std::ifstream in(std::string(FIELDPROF_SOURCE_DIR) + "/docs/aggregator.md");
  ASSERT_TRUE(in) << "docs/aggregator.md";
  std::set<std::tuple<std::string, std::string, std::string>> documented, routed;
  const std::regex row(R"(^\| ([A-Z, ]+) \| `([^`]+)` \| ([a-z]+) \|)");
  for (std::string line; std::getline(in, line);) {
    std::smatch m;
    if (std::regex_search(line, m, row)) documented.insert({m[1], m[2], m[3]});
  }
  for (const Router::Route& r : Router::Routes()) {
    routed.insert({std::string(r.methods), std::string(r.path), std::string(r.area)});
  }
  EXPECT_EQ(documented, routed);
  EXPECT_EQ(routed.size(), Router::Routes().size());
}

TEST_F(RouterTest, UnknownPathsAre404WithAJsonError) {
  Router& router = MakeRouter();
  for (const char* target : {"/", "/nope", "/v1", "/v1/apis/extra", "/v1/snapshot/fragments/",
                             "/v1/lab/profiles/a/b", "/ui/a/b", "/healthz/"}) {
    const HttpResponse r = router.Handle("GET", target, "", "");
    EXPECT_EQ(r.status, 404) << target;
    const nlohmann::json j = nlohmann::json::parse(r.body, nullptr, false);
    ASSERT_FALSE(j.is_discarded()) << r.body;
    EXPECT_EQ(j.value("error", ""), "NotFound") << target;
  }
}

TEST_F(RouterTest, EachAreaAnswersItsOwnPaths) {
  Router& router = MakeRouter();
  Ingest(1, "libz.so.1", "deflate");
  EXPECT_EQ(router.Handle("GET", "/healthz", "", "").body, "ok\n");
  EXPECT_NE(
      router.Handle("GET", "/metrics", "", "").body.find("fieldprof_batches_accepted_total 1"),
      std::string::npos);
  EXPECT_NE(router.Handle("GET", "/v1/config", "", "").body.find("\"sample_fraction\""),
            std::string::npos);
  EXPECT_NE(Get("/v1/apis?module=libz.so.1").body.find("\"symbol\":\"deflate\""),
            std::string::npos);
  EXPECT_NE(Get("/v1/api?module=libz.so.1&symbol=deflate").body.find("\"count\":3"),
            std::string::npos);
  // A known API with nothing in a range is an empty answer; an unknown one 404.
  const HttpResponse empty =
      Get("/v1/api?module=libz.so.1&symbol=deflate&from=2001-01-01&to=2001-01-02");
  EXPECT_EQ(empty.status, 200) << empty.body;
  EXPECT_NE(empty.body.find("\"count\":0"), std::string::npos) << empty.body;
  EXPECT_EQ(Get("/v1/api?module=libz.so.1&symbol=inflate&from=2001-01-01&to=2001-01-02").status,
            404);
  EXPECT_EQ(Get("/v1/api?module=libz.so.1&symbol=inflate").status, 404);
  EXPECT_NE(Get("/v1/module?module=libz.so.1").body.find("\"series\":[{"), std::string::npos);
  EXPECT_NE(Get("/v1/recent").body.find("\"symbol\":\"deflate\""), std::string::npos);
  const HttpResponse ui = Get("/ui");
  EXPECT_EQ(ui.status, 301);
  EXPECT_EQ(Header(ui, "Location"), "/ui/");
  EXPECT_EQ(Get("/ui/").content_type.rfind("text/html", 0), 0u);
  EXPECT_EQ(Get("/ui/app.js").status, 200);
  EXPECT_EQ(Get("/ui/missing.js").status, 404);
  // Parts not given answer 404 and say why.
  EXPECT_NE(Get("/v1/lab/profiles").body.find("keeps no lab profiles"), std::string::npos);
  EXPECT_NE(Get("/v1/snapshot/manifest").body.find("does not publish"), std::string::npos);
  EXPECT_EQ(router.Handle("POST", "/v1/admin/publish", "", "").status, 404);
  EXPECT_EQ(Get("/v1/snapshot/fragments/x").status, 404);  // not publishing comes first
}

// -------------------------------------------------------------- queries

TEST(QueryParamsTest, DecodesPercentEscapesAndPlus) {
  StatusOr<QueryParams> p = ParseQuery("module=libstdc%2B%2B.so.6&symbol=a+b&empty=&flag&&x=%7e");
  ASSERT_TRUE(p.ok()) << p.status().ToString();
  const QueryParams want = {
      {"module", "libstdc++.so.6"}, {"symbol", "a b"}, {"empty", ""}, {"flag", ""}, {"x", "~"}};
  EXPECT_EQ(*p, want);
  for (const char* bad : {"a=%", "a=%4", "a=%zz", "%g1=b", "a=b%2"}) {
    EXPECT_EQ(ParseQuery(bad).status().code(), StatusCode::kInvalidArgument) << bad;
  }
  QueryParams q = *p;
  EXPECT_EQ(TakeParam(&q, "symbol"), "a b");
  EXPECT_EQ(TakeParam(&q, "symbol"), "");
  EXPECT_EQ(q.size(), 4u);
}

TEST(QueryParamsTest, TheSeriesFilterRefusesWhatItDoesNotKnow) {
  SeriesQuery q;
  ASSERT_TRUE(ParseSeriesQuery(*ParseQuery("module=m&symbol=s&arch=x86_64&family=25&from="
                                           "2026-01-02&to=2026-01-03&limit=7"),
                               &q)
                  .ok());
  EXPECT_EQ(q.filter.module, "m");
  EXPECT_TRUE(q.filter.symbol_exact);
  EXPECT_EQ(q.family, 25);
  EXPECT_EQ(q.limit, 7u);
  EXPECT_FALSE(q.all_time());
  for (const char* bad :
       {"moduel=m", "family=256", "family=2x", "limit=0", "limit=100001", "from=2026-13-01",
        "from=2026-01-03&to=2026-01-02", "arch=sparc", "metric=joules"}) {
    SeriesQuery x;
    const Status s = ParseSeriesQuery(*ParseQuery(bad), &x);
    EXPECT_EQ(s.code(), StatusCode::kInvalidArgument) << bad;
  }
}

TEST_F(RouterTest, QueriesArePercentDecodedBeforeTheStoreSeesThem) {
  MakeRouter();
  Ingest(1, "libstdc++.so.6", "_ZNSt6chrono3_V212system_clock3nowEv");
  const HttpResponse hit =
      Get("/v1/api?module=libstdc%2B%2B.so.6&symbol=_ZNSt6chrono3_V212system_clock3nowEv");
  EXPECT_EQ(hit.status, 200) << hit.body;
  // '+' is a space in a query: "libstdc  .so.6" is another module.
  const HttpResponse spaces =
      Get("/v1/api?module=libstdc++.so.6&symbol=_ZNSt6chrono3_V212system_clock3nowEv");
  EXPECT_EQ(spaces.status, 404) << spaces.body;
  const HttpResponse bad = Get("/v1/api?module=libstdc%2&symbol=x");
  EXPECT_EQ(bad.status, 400);
  EXPECT_NE(bad.body.find("percent escape"), std::string::npos) << bad.body;
}

// -------------------------------------------------------------- vendors

TEST(VendorAccessTest, GlobsMatchRunsOfCharacters) {
  EXPECT_TRUE(GlobMatch("libacme*.so*", "libacme-net.so.3"));
  EXPECT_TRUE(GlobMatch("libacme*.so*", "libacme.so"));
  EXPECT_TRUE(GlobMatch("*", ""));
  EXPECT_TRUE(GlobMatch("a*b*c", "aXXbYYc"));
  EXPECT_TRUE(GlobMatch("exact.so", "exact.so"));
  EXPECT_FALSE(GlobMatch("exact.so", "exact.so.1"));
  EXPECT_FALSE(GlobMatch("libacme*.so*", "libz.so.1"));
  EXPECT_FALSE(GlobMatch("a*b*c", "aXXbYY"));
  EXPECT_FALSE(GlobMatch("", "x"));
}

TEST(VendorAccessTest, AClaimedModuleNeedsItsVendorsToken) {
  const VendorAccess access({{"acme", Sha256("acme-token-0123456789"), {"libacme*"}},
                             {"zed", Sha256("zed-token-0123456789ab"), {"libz*", "libacme-z*"}}});
  bool claimed = true;
  EXPECT_TRUE(access.Allows("libc.so.6", "", &claimed));
  EXPECT_FALSE(claimed);
  EXPECT_FALSE(access.Allows("libacme.so.1", "", &claimed));
  EXPECT_TRUE(claimed);
  EXPECT_TRUE(access.Allows("libacme.so.1", "Bearer acme-token-0123456789"));
  EXPECT_FALSE(access.Allows("libacme.so.1", "Bearer zed-token-0123456789ab"));
  EXPECT_FALSE(access.Allows("libacme.so.1", "acme-token-0123456789"));  // no "Bearer "
  EXPECT_FALSE(access.Allows("libacme.so.1", "Bearer acme-token-012345678"));
  // Claimed by both: either vendor's token opens it.
  EXPECT_TRUE(access.Allows("libacme-z.so", "Bearer acme-token-0123456789"));
  EXPECT_TRUE(access.Allows("libacme-z.so", "Bearer zed-token-0123456789ab"));
}

TEST(VendorAccessTest, TheVendorsFileSaysWhichLineIsWrong) {
  TempDir dir;
  const std::string path = dir.File("vendors");
  std::ofstream(path) << "# name token patterns\n"
                      << "acme acme-token-0123456789 libacme*,libacme-extra*\n\n";
  StatusOr<std::vector<Vendor>> v = ReadVendorsFile(path);
  ASSERT_TRUE(v.ok()) << v.status().ToString();
  ASSERT_EQ(v->size(), 1u);
  EXPECT_EQ((*v)[0].patterns, (std::vector<std::string>{"libacme*", "libacme-extra*"}));
  EXPECT_EQ((*v)[0].token_sha256, Sha256("acme-token-0123456789"));
  std::ofstream(path) << "acme acme-token-0123456789 libacme*\nshort tooshort libx*\n";
  const Status bad = ReadVendorsFile(path).status();
  EXPECT_EQ(bad.code(), StatusCode::kInvalidArgument);
  EXPECT_NE(bad.message().find(path + ":2:"), std::string::npos) << bad.message();
  EXPECT_EQ(ReadVendorsFile(dir.File("missing")).status().code(), StatusCode::kIOError);
}

TEST_F(RouterTest, VendorPagesNeedTheTokenAndTheModuleListSaysWhichAreOpen) {
  MakeRouter({{"acme", Sha256("acme-token-0123456789"), {"libacme*"}}});
  Ingest(1, "libacme.so.1", "acme_run");
  Ingest(2, "libz.so.1", "deflate");
  for (const char* target : {"/v1/module?module=libacme.so.1", "/v1/report?module=libacme.so.1",
                             "/v1/diff?module=libacme.so.1&a_version=1.0&b_version=1.0"}) {
    const HttpResponse closed = Get(target);
    EXPECT_EQ(closed.status, 401) << target;
    EXPECT_EQ(Header(closed, "WWW-Authenticate"), "Bearer") << target;
    EXPECT_EQ(Get(target, "Bearer acme-token-0123456789").status, 200) << target;
  }
  EXPECT_EQ(Get("/v1/module?module=libz.so.1").status, 200);
  const nlohmann::json list = nlohmann::json::parse(Get("/v1/modules").body);
  std::map<std::string, std::pair<bool, bool>> seen;  // module -> (vendor, open)
  for (const auto& m : list.at("modules")) {
    seen[m.at("module")] = {m.at("vendor").get<bool>(), m.at("open").get<bool>()};
  }
  EXPECT_EQ(seen["libacme.so.1"], std::make_pair(true, false));
  EXPECT_EQ(seen["libz.so.1"], std::make_pair(false, true));
}

// The /v1/stacks answers of a module with at least answer_warm_stacks
// stacks (its usual questions: the default limit, and the dashboard's) are
// built before anyone asks, whatever order or spelling a request gives
// them; a module with fewer stacks, or another question, waits for its
// first ask.
TEST_F(RouterTest, ABigModulesUsualStacksQuestionsAreAnsweredAhead) {
  MakeRouter({}, /*answer_warm_stacks=*/0);
  auto post_stacks = [&](uint64_t id, const std::string& module, int stacks,
                         const std::string& version = "1.0") {
    wire::Batch b = SimpleBatch(IdOf(id), module, "api", 1000);
    b.clear_records();
    for (int i = 0; i < stacks; ++i) {
      wire::Record* r = b.add_records();
      r->mutable_key()->set_module(module);
      r->mutable_key()->set_module_version(version);
      r->mutable_key()->set_symbol("api;fn_" + std::to_string(i));
      r->mutable_key()->set_metric(wire::METRIC_STACK_CPU_NS);
      Histogram h;
      h.Record(1000 * (i + 1));
      HistogramToWire(h, r->mutable_histogram());
      r->set_runs(1);
    }
    const HttpResponse posted =
        router_->Handle("POST", "/v1/batches", kProtobufContentType, b.SerializeAsString());
    ASSERT_EQ(posted.status, 200) << posted.body;
    ASSERT_TRUE(store_->WaitApplied(std::chrono::seconds(30)).ok());
  };
  post_stacks(1, "libbig.so.1", 6);
  post_stacks(2, "libsmall.so.1", 4);
  // Two versions big enough, one not.
  post_stacks(3, "libtwo.so.1", 5, "1.0");
  post_stacks(4, "libtwo.so.1", 7, "2.0");
  post_stacks(5, "libtwo.so.1", 2, "3.0");
  // Nothing warmed without the mark.
  auto count = [&](const std::string& name) {
    std::string text;
    metrics_.AppendPrometheus(&text);
    const size_t at = text.find("\n" + name + " ");
    return at == std::string::npos ? -1 : std::stol(text.substr(at + name.size() + 2));
  };
  EXPECT_EQ(count("fieldprof_answers_warmed_total"), 0);
  // A router that warms modules of 5 stacks or more looks them up as it
  // starts.
  MakeRouter({}, /*answer_warm_stacks=*/5);
  // libbig's two questions; libtwo's two and its dashboard's of 1.0 and 2.0.
  ASSERT_TRUE(WaitUntil([&] { return count("fieldprof_answers_warmed_total") == 6; }));
  for (const char* target :
       {"/v1/stacks?module=libbig.so.1", "/v1/stacks?limit=100000&module=libbig.so.1",
        "/v1/stacks?format=json&limit=10000&module=libbig.so.1"}) {
    const HttpResponse r = Get(target);
    ASSERT_EQ(r.status, 200) << target << ": " << r.body;
    EXPECT_NE(Header(r, "Age"), "") << target;  // kept, not built for it
    const nlohmann::json j = nlohmann::json::parse(r.body);
    EXPECT_EQ(j.at("stacks_total"), 6) << target;
    EXPECT_EQ(j.at("stacks").at(0).at("frames"), nlohmann::json({"api", "fn_5"})) << target;
  }
  for (const auto& [target, total] : std::vector<std::pair<std::string, int>>{
           {"/v1/stacks?module=libtwo.so.1", 7},  // the same stacks in each version
           {"/v1/stacks?module=libtwo.so.1&version=2.0&limit=100000", 7},
           {"/v1/stacks?limit=100000&version=1.0&module=libtwo.so.1", 5}}) {
    const HttpResponse r = Get(target);
    ASSERT_EQ(r.status, 200) << target << ": " << r.body;
    EXPECT_NE(Header(r, "Age"), "") << target;
    EXPECT_EQ(nlohmann::json::parse(r.body).at("stacks_total"), total) << target;
  }
  EXPECT_EQ(count("fieldprof_answers_built_total"), 0);
  // The few-stacks module, other questions of the big ones, and a small
  // version: built in their requests.
  for (const char* target :
       {"/v1/stacks?module=libsmall.so.1", "/v1/stacks?module=libbig.so.1&limit=3",
        "/v1/stacks?module=libbig.so.1&format=folded",
        "/v1/stacks?module=libtwo.so.1&version=3.0&limit=100000",
        "/v1/stacks?module=libtwo.so.1&version=2.0"}) {
    const HttpResponse r = Get(target);
    ASSERT_EQ(r.status, 200) << target << ": " << r.body;
    EXPECT_EQ(Header(r, "Age"), "") << target;
  }
  EXPECT_EQ(count("fieldprof_answers_built_total"), 5);
  EXPECT_EQ(count("fieldprof_answers_warmed_total"), 6);
}

// -------------------------------------------------------------- Status -> HTTP

TEST(HttpStatusTest, EveryCodeMapsOnceAndErrorsAreJson) {
  const std::vector<std::pair<Status, int>> table = {{InvalidArgument("x"), 400},
                                                     {NotFound("x"), 404},
                                                     {TooLarge("x"), 413},
                                                     {Unsupported("x"), 415},
                                                     {ResourceExhausted("x"), 503},
                                                     {Unavailable("x"), 503},
                                                     {IOError("x"), 503},
                                                     {NoSpace("x"), 507},
                                                     {DataLoss("x"), 500},
                                                     {Internal("x"), 500},
                                                     {Status::Ok(), 200}};
  for (const auto& [status, code] : table) {
    EXPECT_EQ(HttpStatusFor(status), code) << status.ToString();
    if (status.ok()) continue;
    const HttpResponse r = ErrorResponse(status.WithContext("why"));
    EXPECT_EQ(r.status, code);
    const nlohmann::json j = nlohmann::json::parse(r.body);
    EXPECT_EQ(j.at("error"), std::string(StatusCodeName(status.code())));
    EXPECT_EQ(j.at("message"), "why: x");
    EXPECT_EQ(Header(r, "Retry-After"), code == 503 ? "2" : code == 507 ? "10" : "");
  }
  const HttpResponse m = MethodNotAllowed("PUT", "/v1/batches", "POST");
  EXPECT_EQ(m.status, 405);
  EXPECT_EQ(Header(m, "Allow"), "POST");
  const HttpResponse b = BearerRequired("token please");
  EXPECT_EQ(b.status, 401);
  EXPECT_EQ(Header(b, "WWW-Authenticate"), "Bearer");
}

TEST_F(RouterTest, ABatchIsAnsweredByTheTableToo) {
  Router& router = MakeRouter();
  const HttpResponse wrong_type = router.Handle("POST", "/v1/batches", "application/json", "{}");
  EXPECT_EQ(wrong_type.status, 415);
  const HttpResponse garbage =
      router.Handle("POST", "/v1/batches", kProtobufContentType, std::string("\xff\xff\x01", 3));
  EXPECT_EQ(garbage.status, 400);
  EXPECT_NE(garbage.body.find("\"rule\""), std::string::npos) << garbage.body;
  const std::string body = SimpleBatch(IdOf(9), "libz.so.1", "inflate", 100).SerializeAsString();
  EXPECT_NE(router.Handle("POST", "/v1/batches", kProtobufContentType, body)
                .body.find("\"duplicate\":false"),
            std::string::npos);
  EXPECT_NE(router.Handle("POST", "/v1/batches", kProtobufContentType, body)
                .body.find("\"duplicate\":true"),
            std::string::npos);
}

}  // namespace
}  // namespace fieldprof::aggregator

namespace fieldprof::aggregator {
namespace {

// Seeing an attack: an API's latest day against its history.
// Ten days of 5 machines, then a day whose mean triples: suspect when that
// day's runs come from one machine, not when they come from many, and not
// when one machine sends the usual figures.
class SuspectTest : public RouterTest {
 protected:
  void At(int32_t day) {
    now_ = std::chrono::system_clock::time_point(std::chrono::hours(24 * day));
  }
  void MakeClockedRouter() {
    RouterParts parts;
    parts.store = store_.get();
    parts.metrics = &metrics_;
    parts.clock = [this] { return now_; };
    router_ = std::make_unique<Router>(std::move(parts));
  }
  void Send(const std::string& symbol, int machine, uint64_t value) {
    wire::Batch b = SimpleBatch(IdOf(++id_), "libz.so.1", symbol, value, 2);
    // A machine's key changes every day, as agents draw theirs.
    std::string key(16, 'm');
    key[0] = static_cast<char>(machine);
    const int64_t day =
        std::chrono::duration_cast<std::chrono::hours>(now_.time_since_epoch()).count() / 24;
    std::memcpy(&key[4], &day, sizeof day);
    b.set_machine_key(key);
    const HttpResponse r =
        router_->Handle("POST", "/v1/batches", kProtobufContentType, b.SerializeAsString());
    ASSERT_EQ(r.status, 200) << r.body;
  }
  nlohmann::json Api(const std::string& symbol) {
    EXPECT_TRUE(store_->WaitApplied(std::chrono::seconds(30)).ok());
    const HttpResponse r = Get("/v1/api?module=libz.so.1&symbol=" + symbol);
    EXPECT_EQ(r.status, 200) << r.body;
    return nlohmann::json::parse(r.body, nullptr, false);
  }
  std::chrono::system_clock::time_point now_;
  uint64_t id_ = 0;
};

TEST_F(SuspectTest, AFarMoveFromFewMachinesIsFlagged) {
  MakeClockedRouter();
  const int32_t today = 20000;
  for (const std::string s : {"one_machine", "many_machines", "usual_figures"}) {
    for (int32_t d = today - 10; d < today; ++d) {
      At(d);
      for (int m = 1; m <= 5; ++m) Send(s, m, 1000);
    }
  }
  At(today);
  for (int i = 0; i < 20; ++i) Send("one_machine", 9, 3000);
  for (int i = 0; i < 20; ++i) Send("many_machines", 10 + i, 3000);
  for (int i = 0; i < 20; ++i) Send("usual_figures", 9, 1000);

  const nlohmann::json one = Api("one_machine");
  EXPECT_TRUE(one["suspect"].get<bool>()) << one.dump();
  EXPECT_NE(one["suspect_reason"].get<std::string>().find("+200%"), std::string::npos)
      << one.dump();
  EXPECT_NE(one["suspect_reason"].get<std::string>().find("on 1 machines"), std::string::npos)
      << one.dump();
  EXPECT_FALSE(Api("many_machines")["suspect"].get<bool>());
  EXPECT_FALSE(Api("usual_figures")["suspect"].get<bool>());
  std::string m;
  metrics_.AppendPrometheus(&m);
  EXPECT_NE(m.find("fieldprof_suspect_answers_total 1\n"), std::string::npos) << m;
  // The snapshot marks the series, with the reason, for check, cost and
  // the IDE; the others not.
  auto key = Ed25519Signer::Generate();
  ASSERT_TRUE(key.ok());
  PublisherOptions po;
  po.dir = dir_.File("snapshot");
  po.fragment_count = 4;
  Publisher publisher(store_.get(), &*key, po);
  ASSERT_TRUE(publisher.Init().ok());
  const int64_t now_ms = int64_t{today} * 86400000 + 3600000;
  StatusOr<CycleResult> cycle = publisher.Cycle(now_ms, /*all=*/true);
  ASSERT_TRUE(cycle.ok()) << cycle.status().ToString();
  EXPECT_EQ(cycle->suspect, 1u);
  std::map<std::string, std::string> marked;  // symbol -> reason
  for (uint32_t f = 0; f < po.fragment_count; ++f) {
    wire::Fragment fragment;
    ASSERT_TRUE(fragment.ParseFromString(*publisher.FragmentBytes(f)));
    for (const wire::Record& r : fragment.records()) marked[r.key().symbol()] = r.suspect();
  }
  ASSERT_EQ(marked.size(), 3u);
  EXPECT_EQ(marked["one_machine"], one["suspect_reason"].get<std::string>());
  EXPECT_EQ(marked["many_machines"], "");
  EXPECT_EQ(marked["usual_figures"], "");
  // The next day, with nothing new, yesterday is the latest: still flagged.
  At(today + 1);
  EXPECT_TRUE(Api("one_machine")["suspect"].get<bool>());
}

}  // namespace
}  // namespace fieldprof::aggregator
