// The aggregator over real TLS on loopback, with a real RocksDB in a temp dir.
#include "aggregator/http/server.h"

#include <gtest/gtest.h>
#include <openssl/ssl.h>

#include <algorithm>
#include <atomic>
#include <boost/asio.hpp>
#include <boost/asio/ssl.hpp>
#include <boost/beast/core.hpp>
#include <boost/beast/http.hpp>
#include <boost/beast/ssl.hpp>
#include <condition_variable>
#include <fstream>
#include <future>
#include <map>
#include <thread>
#include <vector>

#include "aggregator/http/router.h"
#include "aggregator/store/calendar_tree.h"
#include "aggregator/store/rocks_crc32c.h"
#include "aggregator/store/store_rocksdb.h"
#include "common/net/https_client.h"
#include "tests/support/malformed_corpus.h"
#include "tests/support/test_util.h"
#include "tools/loadgen/loadgen.h"

namespace fieldprof::aggregator {
namespace {

namespace net = boost::asio;
namespace ssl = boost::asio::ssl;
namespace beast = boost::beast;
namespace http = boost::beast::http;
using fieldprof::testing::IdOf;
using fieldprof::testing::SimpleBatch;
using fieldprof::testing::TempDir;
using fieldprof::testing::WaitUntil;

// A seam around the real store: ApplyBatch can be held at a gate, to make
// requests slow on purpose (overload, shutdown with requests in flight).
class GatedStore : public Store {
 public:
  explicit GatedStore(std::unique_ptr<Store> real) : real_(std::move(real)) {}
  void Close_gate() {
    std::lock_guard l(m_);
    open_ = false;
  }
  void Open_gate() {
    {
      std::lock_guard l(m_);
      open_ = true;
    }
    cv_.notify_all();
  }
  int waiting() {
    std::lock_guard l(m_);
    return waiting_;
  }
  StatusOr<ApplyResult> ApplyBatch(const BatchView& b, std::string_view body,
                                   int32_t day) override {
    Pass(open_, &waiting_);
    return real_->ApplyBatch(b, body, day);
  }
  // Gated as ApplyBatch; the fold it leaves waits at its own gate.
  StatusOr<ApplyResult> ApplyBatchFoldLater(const BatchView& b, std::string_view body, int32_t day,
                                            std::function<void()>* fold) override {
    Pass(open_, &waiting_);
    StatusOr<ApplyResult> r = real_->ApplyBatchFoldLater(b, body, day, fold);
    if (*fold) {
      *fold = [this, real = std::move(*fold)] {
        Pass(folds_open_, &folds_waiting_);
        real();
      };
    }
    return r;
  }
  void HoldFolds(bool hold) {
    {
      std::lock_guard l(m_);
      folds_open_ = !hold;
    }
    cv_.notify_all();
  }
  int folds_waiting() {
    std::lock_guard l(m_);
    return folds_waiting_;
  }
  StatusOr<std::vector<ApiAggregate>> ListApis(const ApiFilter& f, size_t limit) override {
    return real_->ListApis(f, limit);
  }
  Status ForEachApi(const ApiFilter& f, const std::function<bool(ApiAggregate&&)>& visit) override {
    return real_->ForEachApi(f, visit);
  }
  StatusOr<ApiAggregate> QueryRange(const ApiKey& k, int32_t a, int32_t b) override {
    return real_->QueryRange(k, a, b);
  }
  StatusOr<bool> BatchAccepted(std::string_view id) override { return real_->BatchAccepted(id); }
  uint64_t pending_batches() override { return real_->pending_batches(); }
  Status WaitApplied(std::chrono::milliseconds t) override { return real_->WaitApplied(t); }
  Status Health() override { return real_->Health(); }
  void AppendMetrics(std::string* out) override { real_->AppendMetrics(out); }
  Status Close() override { return real_->Close(); }

 private:
  // Waits until `open` (a gate of this class's) is, counted in *waiting.
  void Pass(const bool& open, int* waiting) {
    std::unique_lock l(m_);
    ++*waiting;
    cv_.wait(l, [&open] { return open; });
    --*waiting;
  }

  std::unique_ptr<Store> real_;
  std::mutex m_;
  std::condition_variable cv_;
  bool open_ = true;
  int waiting_ = 0;
  bool folds_open_ = true;
  int folds_waiting_ = 0;
};

class ServerTest : public ::testing::Test {
 protected:
  void StartServer(ServerOptions o = {}, const std::string& cert_kind = "ec") {
    ASSERT_TRUE(fieldprof::testing::MakeCert(dir_.path(), cert_kind));
    auto real = OpenRocksDbStore({.path = dir_.File("db")});
    ASSERT_TRUE(real.ok()) << real.status().ToString();
    store_ = std::make_unique<GatedStore>(std::move(*real));
    RouterParts parts;
    parts.store = store_.get();
    parts.metrics = &metrics_;
    router_ = std::make_unique<Router>(std::move(parts));
    o.port = 0;
    o.tls_cert_file = dir_.File("cert.pem");
    o.tls_key_file = dir_.File("key.pem");
    server_ = std::make_unique<Server>(o, router_.get(), &metrics_);
    Status s = server_->Start();
    ASSERT_TRUE(s.ok()) << s.ToString();
  }
  void TearDown() override {
    if (store_) store_->Open_gate();
    if (store_) store_->HoldFolds(false);
    if (server_) {
      server_->Shutdown();
      server_->Wait();
    }
    if (store_) IgnoreError(store_->Close());
  }
  HttpsClientOptions ClientOptions() {
    return {.host = "127.0.0.1",
            .port = server_->port(),
            .ca_file = dir_.File("cert.pem"),
            .local_address = {},
            .loopback_ca_file = {}};
  }
  StatusOr<HttpReply> Post(HttpsClient& c, const std::string& body,
                           const std::string& type = "application/x-protobuf") {
    return c.Post("/v1/batches", type, body);
  }

  TempDir dir_;
  Metrics metrics_;
  std::unique_ptr<GatedStore> store_;
  std::unique_ptr<Router> router_;
  std::unique_ptr<Server> server_;
};

// A raw TLS connection, for requests the HTTPS client would not send.
template <typename Socket = net::ip::tcp::socket>
class RawTlsOver {
 public:
  explicit RawTlsOver(uint16_t port, int max_version = 0)
      : ctx_(ssl::context::tls_client), s_(ioc_, ctx_) {
    if (max_version != 0) {  // on the SSL object: the context was copied into it already
      SSL_set_security_level(s_.native_handle(), 0);
      SSL_set_min_proto_version(s_.native_handle(), TLS1_VERSION);
      SSL_set_max_proto_version(s_.native_handle(), max_version);
    }
    ctx_.set_verify_mode(ssl::verify_none);
    s_.next_layer().connect({net::ip::make_address("127.0.0.1"), port});
  }
  beast::error_code Handshake() {
    beast::error_code ec;
    s_.handshake(ssl::stream_base::client, ec);
    return ec;
  }
  beast::error_code Write(const std::string& data) {
    beast::error_code ec;
    net::write(s_, net::buffer(data), ec);
    return ec;
  }
  // Sends `bytes` one every 200 ms; true if the server closed the
  // connection before answering (a write failed, or the answer's read).
  bool TrickleUntilCut(const std::string& bytes) {
    for (char ch : bytes) {
      if (Write(std::string(1, ch))) return true;
      std::this_thread::sleep_for(std::chrono::milliseconds(200));
    }
    beast::error_code ec;
    Read(ec);
    return static_cast<bool>(ec);
  }
  // Reads one response; ec set if the server closed instead.
  http::response<http::string_body> Read(beast::error_code& ec) {
    http::response<http::string_body> res;
    http::read(s_, buf_, res, ec);
    return res;
  }

 private:
  net::io_context ioc_;
  ssl::context ctx_;
  beast::ssl_stream<Socket> s_;
  beast::flat_buffer buf_;
};
using RawTls = RawTlsOver<>;

// A TCP socket whose writes leave in pieces of at most 1,000 bytes, a
// millisecond apart: TLS records arrive cut anywhere.
class TricklingSocket : public net::ip::tcp::socket {
 public:
  using net::ip::tcp::socket::socket;
  template <typename ConstBuffers>
  size_t write_some(const ConstBuffers& buffers, beast::error_code& ec) {
    std::this_thread::sleep_for(std::chrono::milliseconds(1));
    return net::ip::tcp::socket::write_some(beast::buffers_prefix(1000, buffers), ec);
  }
};

TEST_F(ServerTest, HealthAndMetrics) {
  StartServer();
  HttpsClient c(ClientOptions());
  auto h = c.Get("/healthz");
  ASSERT_TRUE(h.ok()) << h.status().ToString();
  EXPECT_EQ(h->status, 200);
  auto m = c.Get("/metrics");
  ASSERT_TRUE(m.ok());
  EXPECT_EQ(m->status, 200);
  EXPECT_NE(m->body.find("fieldprof_batches_accepted_total 0"), std::string::npos);
  EXPECT_NE(m->body.find("fieldprof_rocksdb_estimate_num_keys"), std::string::npos);
  EXPECT_NE(m->body.find("fieldprof_rocksdb_crc32c_info{code=\"" + std::string(RocksCrc32cCode()) +
                         "\"} 1"),
            std::string::npos);
  auto nf = c.Get("/nope");
  EXPECT_EQ(nf->status, 404);
}

TEST_F(ServerTest, IngestIsExactlyOnceAndQueryable) {
  StartServer();
  HttpsClient c(ClientOptions());
  wire::Batch b = SimpleBatch(IdOf(1), "libsqlite3.so.0", "sqlite3_step", 3000, 4);
  auto r1 = Post(c, b.SerializeAsString());
  ASSERT_TRUE(r1.ok()) << r1.status().ToString();
  EXPECT_EQ(r1->status, 200) << r1->body;
  EXPECT_NE(r1->body.find("\"duplicate\":false"), std::string::npos) << r1->body;
  auto r2 = Post(c, b.SerializeAsString());
  EXPECT_EQ(r2->status, 200);
  EXPECT_NE(r2->body.find("\"duplicate\":true"), std::string::npos) << r2->body;
  ASSERT_TRUE(store_->WaitApplied(std::chrono::seconds(10)).ok());
  auto q = c.Get("/v1/api?module=libsqlite3.so.0&symbol=sqlite3_step");
  ASSERT_EQ(q->status, 200) << q->body;
  EXPECT_NE(q->body.find("\"count\":4"), std::string::npos) << q->body;
  EXPECT_NE(q->body.find("\"sum\":\"12000\""), std::string::npos) << q->body;
  auto l = c.Get("/v1/apis?module=libsqlite3.so.0");
  EXPECT_NE(l->body.find("sqlite3_step"), std::string::npos) << l->body;
  auto bad = c.Get("/v1/api?module=libsqlite3.so.0&symbol=sqlite3_step&from=2026-13-01");
  EXPECT_EQ(bad->status, 400);
  EXPECT_EQ(c.Get("/v1/apis?limit=10abc")->status, 400);
  EXPECT_EQ(c.Get("/v1/apis?limit=2")->status, 200);
  EXPECT_EQ(metrics_.batches_accepted(), 1u);
  EXPECT_EQ(metrics_.batches_duplicate(), 1u);
}

// /metrics says where a batch's time went: each stage of the request
// (the body after the header, the wait for a worker, the handler, the hop
// back) and of the batch's handling (decoding and checks, the synced
// write, the fold after the answer), as Prometheus histograms.
TEST_F(ServerTest, MetricsTellWhereABatchsTimeWent) {
  StartServer();
  HttpsClient c(ClientOptions());
  const std::string fold_count = "fieldprof_ingest_stage_seconds_count{stage=\"fold\"}";
  auto before = c.Get("/metrics");
  ASSERT_TRUE(before.ok()) << before.status().ToString();
  EXPECT_EQ(fieldprof::testing::MetricValue(before->body, fold_count), 0.0) << before->body;
  const std::string batch =
      SimpleBatch(IdOf(7), "libz.so.1", "deflate", 900, 3).SerializeAsString();
  auto r = Post(c, batch);
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  ASSERT_EQ(r->status, 200) << r->body;
  // A duplicate is decoded but not written; a refused batch is neither.
  auto dup = Post(c, batch);
  ASSERT_TRUE(dup.ok()) << dup.status().ToString();
  ASSERT_NE(dup->body.find("\"duplicate\":true"), std::string::npos) << dup->body;
  auto refused = Post(c, "not a batch");
  ASSERT_TRUE(refused.ok()) << refused.status().ToString();
  ASSERT_EQ(refused->status, 400) << refused->body;
  // The fold runs after the answer: its time is counted once it is done.
  std::string text;
  ASSERT_TRUE(WaitUntil([&] {
    auto m = c.Get("/metrics");
    if (!m.ok()) return false;
    text = m->body;
    return fieldprof::testing::MetricValue(text, fold_count) == 1.0;
  })) << text;
  for (const auto& [stage, count] : {std::pair{"decode", 2.0}, {"write", 1.0}, {"fold", 1.0}}) {
    const std::string labels = std::string("{stage=\"") + stage + "\"}";
    EXPECT_EQ(
        fieldprof::testing::MetricValue(text, "fieldprof_ingest_stage_seconds_count" + labels),
        count)
        << stage;
    const std::optional<double> sum =
        fieldprof::testing::MetricValue(text, "fieldprof_ingest_stage_seconds_sum" + labels);
    ASSERT_TRUE(sum.has_value()) << stage;
    EXPECT_GT(*sum, 0) << stage;
    EXPECT_EQ(fieldprof::testing::MetricValue(
                  text, std::string("fieldprof_ingest_stage_seconds_bucket{stage=\"") + stage +
                            "\",le=\"+Inf\"}"),
              count)
        << stage;
  }
  // Every request handed to a worker counts each of its stages: the POSTs
  // and the /metrics requests before this one; this one, still in its
  // handler, has counted its body and its wait for a worker.
  const std::optional<double> handled = fieldprof::testing::MetricValue(
      text, "fieldprof_request_stage_seconds_count{stage=\"handler\"}");
  ASSERT_TRUE(handled.has_value()) << text;
  EXPECT_GE(*handled, 4.0);
  auto request_stage = [&](const char* stage) {
    return fieldprof::testing::MetricValue(
        text, std::string("fieldprof_request_stage_seconds_count{stage=\"") + stage + "\"}");
  };
  EXPECT_EQ(request_stage("body"), *handled + 1);
  EXPECT_EQ(request_stage("queue"), *handled + 1);
  EXPECT_EQ(request_stage("answer"), *handled);
  // The write's one sample in its buckets: 27 of them (~1 us .. ~69 s),
  // cumulative, ending at 1 before +Inf.
  const std::string write_bucket = "fieldprof_ingest_stage_seconds_bucket{stage=\"write\",le=\"";
  std::vector<double> cumulative;
  for (size_t at = text.find(write_bucket); at != std::string::npos;
       at = text.find(write_bucket, at + 1)) {
    const size_t value = text.find("} ", at);
    ASSERT_NE(value, std::string::npos);
    if (text.compare(at + write_bucket.size(), 4, "+Inf") == 0) continue;
    cumulative.push_back(std::strtod(text.c_str() + value + 2, nullptr));
  }
  ASSERT_EQ(cumulative.size(), 27u) << text;
  EXPECT_TRUE(std::is_sorted(cumulative.begin(), cumulative.end())) << text;
  EXPECT_EQ(cumulative.back(), 1.0) << text;
}

TEST_F(ServerTest, ListingOrdersByCallsOrByMean) {
  StartServer();
  HttpsClient c(ClientOptions());
  // "many": 5 calls of 10 ns; "costly": 2 calls of 9000 ns; "cheap": 1 of 1 ns.
  ASSERT_EQ(Post(c, SimpleBatch(IdOf(1), "libo.so.1", "many", 10, 5).SerializeAsString())->status,
            200);
  ASSERT_EQ(
      Post(c, SimpleBatch(IdOf(2), "libo.so.1", "costly", 9000, 2).SerializeAsString())->status,
      200);
  ASSERT_EQ(Post(c, SimpleBatch(IdOf(3), "libo.so.1", "cheap", 1, 1).SerializeAsString())->status,
            200);
  ASSERT_TRUE(store_->WaitApplied(std::chrono::seconds(10)).ok());
  auto order = [&](const std::string& by) {
    return c.Get("/v1/apis?module=libo.so.1&order=" + by)->body;
  };
  const std::string by_calls = order("calls"), by_mean = order("mean");
  EXPECT_LT(by_calls.find("\"many\""), by_calls.find("\"costly\"")) << by_calls;
  EXPECT_LT(by_calls.find("\"costly\""), by_calls.find("\"cheap\"")) << by_calls;
  EXPECT_LT(by_mean.find("\"costly\""), by_mean.find("\"many\"")) << by_mean;
  EXPECT_LT(by_mean.find("\"many\""), by_mean.find("\"cheap\"")) << by_mean;
  EXPECT_EQ(c.Get("/v1/apis?order=price")->status, 400);
}

TEST_F(ServerTest, MalformedBodiesGet400AndNothingIsApplied) {
  StartServer();
  HttpsClient c(ClientOptions());
  for (const auto& bad : fieldprof::testing::MalformedCorpus()) {
    auto r = Post(c, bad.bytes);
    ASSERT_TRUE(r.ok()) << bad.name << ": " << r.status().ToString();
    EXPECT_EQ(r->status, 400) << bad.name << ": " << r->body;
    EXPECT_NE(r->body.find("\"error\":\"InvalidArgument\""), std::string::npos) << r->body;
    EXPECT_EQ(r->content_type, "application/json");
  }
  // The rule is named in the answer.
  wire::Batch b = SimpleBatch(IdOf(3), "libz.so.1", "deflate", 100);
  b.mutable_records(0)->set_runs(b.records(0).histogram().count() + 1);
  auto r = Post(c, b.SerializeAsString());
  EXPECT_NE(r->body.find("\"rule\":\"runs_exceed_calls\""), std::string::npos) << r->body;
  EXPECT_EQ(metrics_.rejected("runs_exceed_calls"), 1u);
  // Still serving, and nothing was stored.
  EXPECT_EQ(c.Get("/healthz")->status, 200);
  ASSERT_TRUE(store_->WaitApplied(std::chrono::seconds(10)).ok());
  EXPECT_TRUE(store_->ListApis({}, 10)->empty());
}

// Key strings that could carry personal data are refused with 400 naming
// the rule, for each of a key's strings, and nothing of them is stored.
TEST_F(ServerTest, KeyStringsThatCouldIdentifySomeoneGet400) {
  StartServer();
  HttpsClient c(ClientOptions());
  struct Case {
    std::string module, version, symbol, rule;
    wire::Metric metric = wire::METRIC_WALL_TIME_NS;
  };
  const Case cases[] = {
      {"/home/alice/libsecret.so", "1.0", "deflate", "module_name"},
      {"libz.so.1", "alice's laptop", "deflate", "module_version_token"},
      {"libz.so.1", "1.0", "alice@example.com wrote this", "symbol_name"},
      // Instrumentation points' series: a tag holding a path, a name of
      // free text, a part that is no identifier.
      {"main", "1.0", "/home/alice/notes$load", "symbol_name", wire::METRIC_POINT_NS},
      {"main", "1.0", "startup$alice wrote this", "symbol_name", wire::METRIC_POINT_NS},
      {"main", "1.0", "startup$load$parsed$more", "point_symbol", wire::METRIC_POINT_NS},
      {"main", "1.0", "startup$4f2a9c.alice", "point_symbol", wire::METRIC_POINT_NS},
  };
  int id = 40;
  std::map<std::string, uint64_t> refused;  // by rule, so far
  for (const Case& k : cases) {
    wire::Batch b = SimpleBatch(IdOf(++id), k.module, k.symbol, 100);
    b.mutable_records(0)->mutable_key()->set_module_version(k.version);
    b.mutable_records(0)->mutable_key()->set_metric(k.metric);
    auto r = Post(c, b.SerializeAsString());
    ASSERT_TRUE(r.ok()) << r.status().ToString();
    EXPECT_EQ(r->status, 400) << k.rule << ": " << r->body;
    EXPECT_NE(r->body.find("\"rule\":\"" + k.rule + "\""), std::string::npos) << r->body;
    EXPECT_EQ(metrics_.rejected(k.rule), ++refused[k.rule]);
  }
  ASSERT_TRUE(store_->WaitApplied(std::chrono::seconds(10)).ok());
  EXPECT_TRUE(store_->ListApis({}, 10)->empty());
}

TEST_F(ServerTest, WrongContentTypeIs415) {
  StartServer();
  HttpsClient c(ClientOptions());
  wire::Batch b = SimpleBatch(IdOf(1), "libz.so.1", "deflate", 100);
  auto r = Post(c, b.SerializeAsString(), "application/json");
  ASSERT_TRUE(r.ok());
  EXPECT_EQ(r->status, 415) << r->body;
  EXPECT_EQ(
      Post(c, b.SerializeAsString(), "application/x-protobuf; proto=fieldprof.wire.Batch")->status,
      200);
}

TEST_F(ServerTest, OversizeBodyIs413WithoutReadingIt) {
  StartServer();
  RawTls raw(server_->port());
  ASSERT_FALSE(raw.Handshake());
  // Declare 50 MiB, send only the header: the answer must come anyway.
  ASSERT_FALSE(
      raw.Write("POST /v1/batches HTTP/1.1\r\nHost: x\r\n"
                "Content-Type: application/x-protobuf\r\n"
                "Content-Length: 52428800\r\n\r\n"));
  beast::error_code ec;
  auto res = raw.Read(ec);
  ASSERT_FALSE(ec) << ec.message();
  EXPECT_EQ(res.result_int(), 413u);
  EXPECT_FALSE(res.keep_alive());
  // Chunked bodies past the limit are cut too.
  HttpsClient c(ClientOptions());
  auto r = Post(c, std::string((1 << 20) + 10, 'x'));
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  EXPECT_EQ(r->status, 413);
}

TEST_F(ServerTest, SlowClientIsCutOff) {
  ServerOptions o;
  o.header_timeout = std::chrono::milliseconds(1000);
  StartServer(o);
  RawTls raw(server_->port());
  ASSERT_FALSE(raw.Handshake());
  const std::string req =
      "GET /healthz HTTP/1.1\r\nHost: localhost\r\nX-Padding: " + std::string(40, 'a') + "\r\n\r\n";
  EXPECT_TRUE(raw.TrickleUntilCut(req));  // the whole header would take > 12 s
  // The timeout is counted; the server serves others.
  EXPECT_TRUE(WaitUntil([&] { return metrics_.connections() == 0; }));
  HttpsClient c(ClientOptions());
  EXPECT_EQ(c.Get("/healthz")->status, 200);
  auto m = c.Get("/metrics");
  ASSERT_TRUE(m.ok());
  const std::optional<double> timeouts =
      fieldprof::testing::MetricValue(m->body, "fieldprof_timeouts_total");
  ASSERT_TRUE(timeouts.has_value()) << "no fieldprof_timeouts_total in /metrics";
  EXPECT_GE(*timeouts, 1) << "no timeout counted";
}

// A body of many TLS records that arrives in pieces cut anywhere, with
// pauses between them, is read whole and counted, and the connection then
// serves the next request: the server reads what the socket holds, parses
// what it got, and waits for more.
TEST_F(ServerTest, ABodyInPiecesIsReadWhole) {
  StartServer();
  wire::Batch b = SimpleBatch(IdOf(11), "libz.so.1", "deflate", 9);
  const wire::Record first = b.records(0);
  for (int i = 1; i < 2000; ++i) {
    wire::Record* r = b.add_records();
    *r = first;
    r->mutable_key()->set_symbol("deflate_" + std::to_string(i));
  }
  const std::string body = b.SerializeAsString();
  ASSERT_GT(body.size(), 64u * 1024);
  RawTlsOver<TricklingSocket> raw(server_->port());
  ASSERT_FALSE(raw.Handshake());
  auto post = [](const std::string& body) {
    return "POST /v1/batches HTTP/1.1\r\nHost: localhost\r\n"
           "Content-Type: application/x-protobuf\r\nContent-Length: " +
           std::to_string(body.size()) + "\r\n\r\n";
  };
  ASSERT_FALSE(raw.Write(post(body) + body));  // in pieces of 1,000 bytes
  beast::error_code ec;
  auto res = raw.Read(ec);
  ASSERT_FALSE(ec) << ec.message();
  EXPECT_EQ(res.result_int(), 200) << res.body();
  EXPECT_NE(res.body().find("\"records\":2000"), std::string::npos) << res.body();
  const std::string second = SimpleBatch(IdOf(12), "libz.so.1", "inflate", 9).SerializeAsString();
  ASSERT_FALSE(raw.Write(post(second) + second));
  res = raw.Read(ec);
  ASSERT_FALSE(ec) << ec.message();
  EXPECT_EQ(res.result_int(), 200) << res.body();
  ASSERT_TRUE(store_->WaitApplied(std::chrono::seconds(10)).ok());
  EXPECT_EQ(metrics_.batches_accepted(), 2u);
  HttpsClient c(ClientOptions());
  auto q = c.Get("/v1/api?module=libz.so.1&symbol=deflate_1999");
  ASSERT_TRUE(q.ok());
  EXPECT_EQ(q->status, 200) << q->body;
}

// A body sent slower than the body's time limit allows is cut off too, and
// the timeout counted.
TEST_F(ServerTest, SlowBodyIsCutOff) {
  ServerOptions o;
  o.header_timeout = std::chrono::seconds(120);  // longer than the whole trickle
  o.body_timeout = std::chrono::milliseconds(1000);
  StartServer(o);
  RawTls raw(server_->port());
  ASSERT_FALSE(raw.Handshake());
  const std::string body = SimpleBatch(IdOf(7), "libz.so.1", "deflate", 9).SerializeAsString();
  ASSERT_FALSE(
      raw.Write("POST /v1/batches HTTP/1.1\r\nHost: localhost\r\n"
                "Content-Type: application/x-protobuf\r\nContent-Length: " +
                std::to_string(body.size()) + "\r\n\r\n"));
  EXPECT_TRUE(raw.TrickleUntilCut(body));  // the whole body would take > 10 s
  EXPECT_TRUE(WaitUntil([&] { return metrics_.connections() == 0; }));
  HttpsClient c(ClientOptions());
  auto m = c.Get("/metrics");
  ASSERT_TRUE(m.ok());
  EXPECT_GE(fieldprof::testing::MetricValue(m->body, "fieldprof_timeouts_total").value_or(0), 1);
  EXPECT_EQ(store_->pending_batches(), 0u);
}

// The time limits are the client's: a handler slower than the body's (and
// the header's) limit still gets its answer to the client, and no timeout
// is counted.
TEST_F(ServerTest, AHandlersTimeIsNotTheClients) {
  ServerOptions o;
  o.header_timeout = std::chrono::milliseconds(300);
  o.body_timeout = std::chrono::milliseconds(300);
  StartServer(o);
  store_->Close_gate();
  auto held = std::async(std::launch::async, [&] {
    HttpsClient c(ClientOptions());
    return Post(c, SimpleBatch(IdOf(3), "libz.so.1", "deflate", 9).SerializeAsString());
  });
  ASSERT_TRUE(WaitUntil([&] { return store_->waiting() > 0; }));
  // Held for three times the limits (the time is what is tested): a limit
  // still running would close the socket meanwhile, and the answer would
  // not arrive.
  std::this_thread::sleep_for(3 * o.body_timeout);
  store_->Open_gate();
  auto r = held.get();
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  EXPECT_EQ(r->status, 200);
  HttpsClient c(ClientOptions());
  auto m = c.Get("/metrics");
  ASSERT_TRUE(m.ok());
  EXPECT_EQ(fieldprof::testing::MetricValue(m->body, "fieldprof_timeouts_total").value_or(-1), 0);
}

TEST_F(ServerTest, ConcurrentUploadsMatchGroundTruth) {
  StartServer();
  tools::LoadOptions lo;
  lo.client = ClientOptions();
  lo.gen = {.seed = 3, .modules = 40, .symbols_per_module = 25, .target_bytes = 32 * 1024};
  lo.connections = 8;
  lo.batches = 64;
  lo.pool = 16;
  lo.verify = true;
  lo.resend_duplicates = true;  // every batch twice under its id
  auto r = tools::RunLoad(lo, nullptr);
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  EXPECT_EQ(r->batches_ok, 64);
  EXPECT_EQ(r->batches_duplicate, 64);
  EXPECT_EQ(r->batches_failed, 0) << r->first_error;
  EXPECT_GT(r->keys_verified, 100);
  EXPECT_EQ(r->keys_mismatched, 0) << r->first_mismatch;
}

// A load stops when its caller says so (the cluster tests end their
// streams a while after a fault), long before its time is up; what it sent
// until then is acknowledged and verified as usual.
TEST_F(ServerTest, ALoadStopsWhenItsCallerSaysSo) {
  StartServer();
  std::atomic<bool> stop{false};
  tools::LoadOptions lo;
  lo.client = ClientOptions();
  lo.gen = {.seed = 4, .modules = 20, .symbols_per_module = 10, .target_bytes = 16 * 1024};
  lo.connections = 4;
  // Only so that a load that ignored the flag ends at all (and the test
  // fails instead of hanging): a count, far above what the few requests in
  // flight at the stop add to the 16 awaited, on a machine of any speed.
  constexpr int64_t kBackstopBatches = 20000;
  lo.batches = kBackstopBatches;
  lo.duration_s = 0;
  lo.pool = 8;
  lo.verify = true;
  lo.stop = &stop;
  auto run = std::async(std::launch::async, [&] { return tools::RunLoad(lo, nullptr); });
  HttpsClient c(ClientOptions());
  EXPECT_TRUE(fieldprof::testing::WaitUntil([&] {
    auto m = c.Get("/metrics");
    return m.ok() && fieldprof::testing::MetricValue(m->body, "fieldprof_batches_accepted_total")
                             .value_or(0) >= 16;
  })) << "the load sent nothing";
  stop = true;
  auto r = run.get();
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  // Its sending ended with the flag (the requests in flight answered), not
  // at the backstop.
  EXPECT_LT(r->batches_ok, kBackstopBatches) << "the load did not stop when told";
  EXPECT_GE(r->batches_ok, 16);
  EXPECT_EQ(r->batches_failed, 0) << r->first_error;
  EXPECT_GT(r->keys_verified, 10);
  EXPECT_EQ(r->keys_mismatched, 0) << r->first_mismatch;
}

TEST_F(ServerTest, ConcurrentSameIdCountsOnce) {
  StartServer();
  wire::Batch b = SimpleBatch(IdOf(77), "libc.so.6", "getaddrinfo", 50000, 2);
  const std::string body = b.SerializeAsString();
  std::vector<std::future<std::string>> answers;
  for (int i = 0; i < 8; ++i) {
    answers.push_back(std::async(std::launch::async, [&] {
      HttpsClient c(ClientOptions());
      auto r = Post(c, body);
      return r.ok() && r->status == 200 ? r->body : std::string("error");
    }));
  }
  int fresh = 0, dup = 0;
  for (auto& a : answers) {
    std::string s = a.get();
    if (s.find("\"duplicate\":false") != std::string::npos) ++fresh;
    if (s.find("\"duplicate\":true") != std::string::npos) ++dup;
  }
  EXPECT_EQ(fresh, 1);
  EXPECT_EQ(dup, 7);
  ASSERT_TRUE(store_->WaitApplied(std::chrono::seconds(10)).ok());
  auto got = store_->QueryRange(ApiKeyFromWire(b.records(0).key(), b.client_platform()),
                                kUnboundedFirst, kUnboundedLast);
  EXPECT_EQ(got->histogram.count(), 2u);
}

TEST_F(ServerTest, OverloadAnswers503WithRetryAfter) {
  ServerOptions o;
  o.worker_threads = 1;
  o.max_queued_requests = 1;
  StartServer(o);
  store_->Close_gate();
  auto first = std::async(std::launch::async, [&] {
    HttpsClient c(ClientOptions());
    return Post(c, SimpleBatch(IdOf(1), "libz.so.1", "deflate", 9).SerializeAsString());
  });
  ASSERT_TRUE(WaitUntil([&] { return store_->waiting() > 0; }));
  HttpsClient c(ClientOptions());
  auto second = Post(c, SimpleBatch(IdOf(2), "libz.so.1", "deflate", 9).SerializeAsString());
  ASSERT_TRUE(second.ok());
  EXPECT_EQ(second->status, 503);
  EXPECT_EQ(second->retry_after_seconds, 2);
  store_->Open_gate();
  auto r1 = first.get();
  ASSERT_TRUE(r1.ok());
  EXPECT_EQ(r1->status, 200);
  // After the queue drained, the retry succeeds.
  EXPECT_EQ(Post(c, SimpleBatch(IdOf(2), "libz.so.1", "deflate", 9).SerializeAsString())->status,
            200);
}

// The answer goes out once the batch is durable; its fold into the sums
// runs after it (on the worker), so the client does not wait for it. Held
// here: the client has its 200 while the batch is still pending.
TEST_F(ServerTest, TheAnswerDoesNotWaitForTheFold) {
  StartServer();
  store_->HoldFolds(true);
  auto answered = std::async(std::launch::async, [&] {
    HttpsClient c(ClientOptions());
    return Post(c, SimpleBatch(IdOf(1), "libz.so.1", "deflate", 9).SerializeAsString());
  });
  ASSERT_TRUE(WaitUntil([&] {
    return answered.wait_for(std::chrono::seconds(0)) == std::future_status::ready;
  })) << "no answer while the fold is held";
  auto r = answered.get();
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  EXPECT_EQ(r->status, 200) << r->body;
  EXPECT_TRUE(WaitUntil([&] { return store_->folds_waiting() == 1; }));
  EXPECT_EQ(store_->pending_batches(), 1u);
  store_->HoldFolds(false);
  ASSERT_TRUE(store_->WaitApplied(std::chrono::seconds(30)).ok());
  auto apis = store_->ListApis({}, 10);
  ASSERT_TRUE(apis.ok());
  ASSERT_EQ(apis->size(), 1u);
  EXPECT_EQ((*apis)[0].key.symbol, "deflate");
}

// Over its source's rate a batch gets 429 with the Retry-After of its
// bucket, before the body is read, and nothing is applied; another /24
// (curl from 127.0.1.2) is another source.
TEST_F(ServerTest, ASourceOverItsRateGets429WithRetryAfter) {
  SourceLimiter limits("batches", {.per_minute = 6, .burst = 3});
  ServerOptions o;
  o.batch_limits = &limits;
  StartServer(o);
  HttpsClient c(ClientOptions());
  for (int i = 1; i <= 3; ++i) {
    auto r = Post(c, SimpleBatch(IdOf(i), "libz.so.1", "deflate", 9).SerializeAsString());
    ASSERT_TRUE(r.ok());
    EXPECT_EQ(r->status, 200) << r->body;
  }
  auto over = Post(c, SimpleBatch(IdOf(4), "libz.so.1", "deflate", 9).SerializeAsString());
  ASSERT_TRUE(over.ok()) << over.status().ToString();
  EXPECT_EQ(over->status, 429);
  EXPECT_GE(over->retry_after_seconds, 1);
  EXPECT_LE(over->retry_after_seconds, 10);
  EXPECT_NE(over->body.find("\"rule\":\"source_rate\""), std::string::npos) << over->body;
  EXPECT_EQ(metrics_.batches_accepted(), 3u);
  EXPECT_EQ(metrics_.rejected("source_rate"), 1u);
  EXPECT_EQ(limits.limited(), 1u);
  // From another /24 the same batch goes in.
  const std::string body = dir_.File("batch4.pb");
  {
    std::ofstream(body, std::ios::binary)
        << SimpleBatch(IdOf(4), "libz.so.1", "deflate", 9).SerializeAsString();
  }
  std::string out;
  fieldprof::testing::RunCommand(
      "curl -s -o /dev/null -w '%{http_code}' --interface 127.0.1.2 --cacert '" +
          dir_.File("cert.pem") + "' -H 'Content-Type: application/x-protobuf' --data-binary @'" +
          body + "' https://127.0.0.1:" + std::to_string(server_->port()) + "/v1/batches",
      &out);
  EXPECT_EQ(out, "200");
  EXPECT_EQ(metrics_.batches_accepted(), 4u);
  // /metrics says it, per outcome, without addresses.
  std::string text;
  AppendSourceLimitMetrics({&limits}, &text);
  EXPECT_NE(text.find("fieldprof_source_limit_total{limit=\"batches\",outcome=\"limited\"} 1"),
            std::string::npos)
      << text;
  EXPECT_NE(text.find("fieldprof_source_buckets{limit=\"batches\"} 2"), std::string::npos) << text;
  EXPECT_EQ(text.find("127.0."), std::string::npos);
}

TEST_F(ServerTest, GracefulShutdownFinishesRequestsInFlight) {
  StartServer();
  store_->Close_gate();
  auto inflight = std::async(std::launch::async, [&] {
    HttpsClient c(ClientOptions());
    return Post(c, SimpleBatch(IdOf(5), "libz.so.1", "inflate", 9).SerializeAsString());
  });
  // An idle keep-alive connection, which shutdown closes.
  HttpsClient idle(ClientOptions());
  ASSERT_EQ(idle.Get("/healthz")->status, 200);
  ASSERT_TRUE(WaitUntil([&] { return store_->waiting() > 0; }));
  ASSERT_EQ(metrics_.connections(), 2);
  server_->Shutdown();
  // Shutdown closes the idle connection at once and keeps the one whose
  // request is in flight.
  EXPECT_TRUE(WaitUntil([&] { return metrics_.connections() == 1; }))
      << metrics_.connections() << " connections open";
  store_->Open_gate();
  auto r = inflight.get();
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  EXPECT_EQ(r->status, 200);
  EXPECT_FALSE(r->keep_alive);
  server_->Wait();
  ASSERT_TRUE(store_->WaitApplied(std::chrono::seconds(10)).ok());
  EXPECT_EQ(store_->ListApis({}, 10)->size(), 1u);
  // No longer accepting.
  HttpsClient late(ClientOptions());
  EXPECT_FALSE(late.Get("/healthz").ok());
}

TEST_F(ServerTest, RefusesTls11AndResumesSessions) {
  StartServer();
  RawTls old(server_->port(), TLS1_1_VERSION);
  EXPECT_TRUE(old.Handshake()) << "TLS 1.1 handshake should fail";
  HttpsClient c(ClientOptions());
  ASSERT_EQ(c.Get("/healthz")->status, 200);
  EXPECT_FALSE(c.session_reused());
  c.Close();
  ASSERT_EQ(c.Get("/healthz")->status, 200);
  EXPECT_TRUE(c.session_reused()) << c.tls_version();
  EXPECT_EQ(c.connections_opened(), 2);
}

TEST_F(ServerTest, RsaCertificateWorksAndWrongCaIsRefused) {
  StartServer({}, "rsa");
  HttpsClient c(ClientOptions());
  EXPECT_EQ(c.Get("/healthz")->status, 200);
  TempDir other;
  ASSERT_TRUE(fieldprof::testing::MakeCert(other.path()));
  auto o = ClientOptions();
  o.ca_file = other.File("cert.pem");
  HttpsClient wrong(o);
  auto r = wrong.Get("/healthz");
  ASSERT_FALSE(r.ok());
  EXPECT_NE(r.status().message().find("certificate verify failed"), std::string::npos)
      << r.status().message();
}

TEST_F(ServerTest, ConnectionCap) {
  ServerOptions o;
  o.max_connections = 2;
  StartServer(o);
  HttpsClient a(ClientOptions()), b(ClientOptions()), c(ClientOptions());
  ASSERT_EQ(a.Get("/healthz")->status, 200);
  ASSERT_EQ(b.Get("/healthz")->status, 200);
  EXPECT_FALSE(c.Get("/healthz").ok());
  a.Close();
  ASSERT_TRUE(WaitUntil([&] { return metrics_.connections() < 2; }));
  HttpsClient d(ClientOptions());
  EXPECT_EQ(d.Get("/healthz")->status, 200);
}

}  // namespace
}  // namespace fieldprof::aggregator
