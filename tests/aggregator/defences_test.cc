// The field's defences on the real aggregator: one source
// flooding fake slow data for a module with honest data from 20 machines
// is throttled at the door, capped by its tokens and refused where its
// batches claim more than a machine makes, and the published median moves
// by less than 5%; without the defences it moves by more than 50%.
// Tokens: a spent one adds nothing, a forged one is refused, both across
// a restart; and nothing of a machine key, a token or a source address is
// stored or logged.
#include <chrono>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <functional>
#include <iostream>
#include <map>
#include <nlohmann/json.hpp>
#include <random>
#include <string>
#include <vector>

#include "common/crypto/upload_tokens.h"
#include "common/net/https_client.h"
#include "common/wire/wire.h"
#include "gtest/gtest.h"
#include "tests/support/aggregator_process.h"
#include "tests/support/clickhouse_process.h"
#include "tests/support/test_util.h"
#include "tools/loadgen/loadgen.h"

namespace fieldprof {
namespace {

namespace fs = std::filesystem;
using testing::AggregatorProcess;
using testing::FreePort;
using testing::IdOf;
using testing::SimpleBatch;
using testing::TempDir;
using tools::LoadOptions;
using tools::LoadReport;
using tools::RunLoad;

constexpr char kModule[] = "libvictim.so.1";
constexpr char kSymbol[] = "victim_call";

int64_t NowMs() {
  return std::chrono::duration_cast<std::chrono::milliseconds>(
             std::chrono::system_clock::now().time_since_epoch())
      .count();
}

// An agent-shaped batch of victim_call: `runs` runs of `calls` calls
// around `ns` (spread over +-10%), sealed now, its runs started a minute
// ago, from the machine with day key `machine`.
wire::Batch VictimBatch(const std::string& id, const std::string& machine, uint64_t ns,
                        uint64_t runs = 20, uint64_t calls = 200) {
  wire::Batch b = SimpleBatch(id, kModule, kSymbol, ns);
  Histogram h;
  for (uint64_t i = 0; i < calls; ++i) h.Record(ns - ns / 10 + (i * 37 % 201) * ns / 1000);
  HistogramToWire(h, b.mutable_records(0)->mutable_histogram());
  b.mutable_records(0)->set_runs(runs);
  b.set_created_unix_ms(NowMs());
  b.set_window_start_unix_ms(b.created_unix_ms() - 60000);
  b.set_machine_key(machine);
  b.mutable_records(0)->set_first_from_machine(true);
  return b;
}

void Spend(wire::Batch* b, const UploadToken& t) {
  b->set_batch_id(t.input);
  b->set_token(t.output);
  b->set_token_epoch(t.epoch);
}

// A client of `agg` from the loopback address `source` (127.0.N.1: each N
// another /24, another source to the aggregator's limits).
HttpsClientOptions From(const AggregatorProcess& agg, const std::string& source) {
  HttpsClientOptions o = agg.Options();
  o.local_address = source;
  return o;
}

// Up to `n` tokens from `agg` for a client at `source`, or the HTTP status
// that refused them (*status).
std::vector<UploadToken> TakeTokens(const HttpsClientOptions& o, int n, int* status) {
  HttpsClient c(o);
  StatusOr<TokenRequestState> req = MakeTokenRequest(n);
  EXPECT_TRUE(req.ok());
  if (!req.ok()) return {};
  StatusOr<HttpReply> r =
      c.Post("/v1/tokens", "application/x-protobuf", req->request.SerializeAsString());
  EXPECT_TRUE(r.ok()) << r.status().ToString();
  if (!r.ok()) return {};
  *status = r->status;
  if (r->status != 200) return {};
  wire::TokenResponse resp;
  EXPECT_TRUE(resp.ParseFromString(r->body));
  StatusOr<std::vector<UploadToken>> tokens = FinishTokenRequest(*req, resp, resp.public_key());
  EXPECT_TRUE(tokens.ok()) << tokens.status().ToString();
  return tokens.ok() ? *tokens : std::vector<UploadToken>{};
}

struct Posted {
  int status = 0;
  std::string rule;  // of a refusal
  bool duplicate = false;
};

Posted Post(HttpsClient& c, const wire::Batch& b) {
  Posted p;
  StatusOr<HttpReply> r = c.Post("/v1/batches", "application/x-protobuf", b.SerializeAsString());
  EXPECT_TRUE(r.ok()) << r.status().ToString();
  if (!r.ok()) return p;
  p.status = r->status;
  const nlohmann::json j = nlohmann::json::parse(r->body, nullptr, false);
  if (!j.is_discarded() && j.is_object()) {
    if (j.contains("rule")) p.rule = j["rule"].get<std::string>();
    if (j.contains("duplicate")) p.duplicate = j["duplicate"].get<bool>();
  }
  return p;
}

std::string MachineKeyOf(int m) {
  std::string k(16, 'm');
  k[0] = static_cast<char>(m);
  k[1] = static_cast<char>(m >> 8);
  return k;
}

// victim_call's published figures (GET /v1/apis): p50 and machines; p50
// -1 when it is not published.
struct Published {
  double p50 = -1;
  int machines = 0;
  uint64_t calls = 0;
};
Published Read(AggregatorProcess& agg) {
  agg.WaitApplied();
  HttpsClient c(agg.Options());
  StatusOr<HttpReply> r = c.Get(std::string("/v1/apis?module=") + kModule);
  Published p;
  EXPECT_TRUE(r.ok() && r->status == 200) << (r.ok() ? r->body : r.status().ToString());
  if (!r.ok()) return p;
  const nlohmann::json j = nlohmann::json::parse(r->body, nullptr, false);
  for (const auto& a : j["apis"]) {
    if (a["symbol"] != kSymbol || a["metric"] != "wall_time_ns") continue;
    p.p50 = a["p50"].get<double>();
    p.machines = a["machines"].get<int>();
    p.calls = a["calls"].get<uint64_t>();
  }
  return p;
}

class DefencesTest : public ::testing::Test {
 protected:
  void SetUp() override {
    ASSERT_TRUE(testing::MakeCert(dir_.path()));
    std::ofstream(dir_.File("token.secret")) << "defences-test-token-secret-0123456789abcdef";
  }
  std::vector<std::string> Defended() const {
    return {"--token_secret_file", dir_.File("token.secret"), "--tokens_per_request", "8",
            // One token request a day per source: 8 tokens.
            "--source_token_requests_per_day", "1", "--source_batches_per_minute", "6",
            "--source_burst", "10", "--k_anonymity", "5"};
  }
  // 20 honest machines, each from a /24 of its own, 8 batches each of
  // calls around 1 us; with tokens when `tokens`.
  void Honest(AggregatorProcess& agg, bool tokens) {
    for (int m = 1; m <= 20; ++m) {
      const HttpsClientOptions o = From(agg, "127.0." + std::to_string(m) + ".1");
      std::vector<UploadToken> t;
      if (tokens) {
        int status = 0;
        t = TakeTokens(o, 8, &status);
        ASSERT_EQ(status, 200);
        ASSERT_EQ(t.size(), 8u);
      }
      HttpsClient c(o);
      for (int i = 0; i < 8; ++i) {
        wire::Batch b = VictimBatch(IdOf(1000 * m + i), MachineKeyOf(m), 1000);
        if (tokens) Spend(&b, t[i]);
        const Posted p = Post(c, b);
        ASSERT_EQ(p.status, 200) << "machine " << m << " batch " << i << ": " << p.rule;
      }
    }
  }

  void Flood(const std::function<std::vector<std::string>()>& store_args);

  TempDir dir_;
};

// The flood, with the defences and without: each aggregator over the store
// that store_args() names (empty: RocksDB), asked once per aggregator so
// that each can have a ClickHouse database of its own.
void DefencesTest::Flood(const std::function<std::vector<std::string>()>& store_args) {
  std::vector<std::string> defended_args = Defended();
  for (const std::string& a : store_args()) defended_args.push_back(a);
  AggregatorProcess agg(dir_, FreePort(), defended_args);
  agg.Start();
  Honest(agg, /*tokens=*/true);
  const Published before = Read(agg);
  ASSERT_GT(before.p50, 0) << "20 machines are past k = 5";
  EXPECT_EQ(before.machines, 20);

  // The flooder: one network, one installation's tokens, and as many
  // batches of 50 us calls as it can send, each from a new "machine".
  const HttpsClientOptions o = From(agg, "127.0.200.1");
  int status = 0;
  std::vector<UploadToken> t = TakeTokens(o, 8, &status);
  ASSERT_EQ(t.size(), 8u);
  int again = 0;
  EXPECT_TRUE(TakeTokens(o, 8, &again).empty());
  EXPECT_EQ(again, 429) << "one token request a day per source";
  HttpsClient c(o);
  std::map<std::string, int> outcomes;  // by status and rule
  // A batch claiming more runs than a machine makes in its minute is
  // refused, and its token is not spent by it.
  wire::Batch heavy = VictimBatch("", MachineKeyOf(999), 50000, 2000000, 2000000);
  Spend(&heavy, t[0]);
  const Posted refused = Post(c, heavy);
  EXPECT_EQ(refused.status, 400);
  EXPECT_EQ(refused.rule, "runs_per_window");
  // A forged token.
  wire::Batch forged = VictimBatch(IdOf(77), MachineKeyOf(998), 50000);
  forged.set_token(std::string(64, 'f'));
  forged.set_token_epoch(t[0].epoch);
  EXPECT_EQ(Post(c, forged).rule, "token_invalid");
  for (int i = 0; i < 60; ++i) {
    wire::Batch b = VictimBatch(IdOf(500000 + i), MachineKeyOf(300 + i), 50000);
    if (i < 16) Spend(&b, t[static_cast<size_t>(i % 8)]);  // each token twice
    const Posted p = Post(c, b);
    ++outcomes[std::to_string(p.status) + (p.duplicate ? " duplicate" : "") +
               (p.rule.empty() ? "" : " " + p.rule)];
  }
  for (const auto& [k, n] : outcomes) std::cout << "flood outcome: " << k << " x" << n << "\n";
  // Eight batches in, one per token; the door then answers 429 (the
  // burst of 10 is spent by the two refused above and these eight; a
  // token refilled meanwhile may let a duplicate or a tokenless one reach
  // the token check).
  EXPECT_EQ(outcomes["200"], 8) << "one batch per token";
  EXPECT_GE(outcomes["429 source_rate"], 45);
  const Published defended = Read(agg);
  const double moved = std::abs(defended.p50 - before.p50) / before.p50;
  EXPECT_LT(moved, 0.05) << before.p50 << " -> " << defended.p50;
  EXPECT_EQ(defended.machines, 28) << "20 honest machines and the flooder's 8 keys";

  // Without them: no tokens, no door, k = 1. The same flooder sends 400
  // batches.
  TempDir open_dir;
  ASSERT_TRUE(testing::MakeCert(open_dir.path()));
  AggregatorProcess open(open_dir, FreePort(), store_args());
  open.Start();
  Honest(open, /*tokens=*/false);
  const Published open_before = Read(open);
  EXPECT_DOUBLE_EQ(open_before.p50, before.p50) << "the same honest data";
  HttpsClient oc(From(open, "127.0.200.1"));
  for (int i = 0; i < 400; ++i) {
    ASSERT_EQ(Post(oc, VictimBatch(IdOf(500000 + i), MachineKeyOf(300 + i), 50000)).status, 200);
  }
  const Published flooded = Read(open);
  const double open_moved = std::abs(flooded.p50 - open_before.p50) / open_before.p50;
  EXPECT_GT(open_moved, 0.5) << open_before.p50 << " -> " << flooded.p50;
  std::cout << "published p50 of " << kSymbol << ": honest " << before.p50 << " ns; flooded with "
            << "the defences " << defended.p50 << " ns (" << moved * 100 << "% moved), without "
            << flooded.p50 << " ns (" << open_moved * 100 << "% moved)\n";
}

TEST_F(DefencesTest, AFloodFromOneSourceMovesThePublishedMedianByLessThanFivePercent) {
  Flood([] { return std::vector<std::string>{}; });
}

TEST_F(DefencesTest, TheSameOverClickHouse) {
  testing::ClickHouseProcess* server = testing::SharedClickHouse();
  ASSERT_NE(server, nullptr) << "clickhouse-server did not start (deploy/install-deps.sh)";
  Flood([server] {
    return std::vector<std::string>{"--store",
                                    "clickhouse",
                                    "--clickhouse_url",
                                    server->Url(),
                                    "--clickhouse_database",
                                    testing::UniqueDatabase()};
  });
}

// A spent token adds nothing, a forged one or one of another issuer is
// refused, a token bound to another batch id too; a restart keeps both
// the spent set and the keys. Nothing of a machine key, a token or the
// source address is stored or logged.
TEST_F(DefencesTest, TokensAreSpentOnceAndLeaveNoTraceOfWhoSpentThem) {
  AggregatorProcess agg(dir_, FreePort(),
                        {"--token_secret_file", dir_.File("token.secret"), "--k_anonymity", "1"});
  agg.Start();
  const std::string source = "127.0.77.1";
  int status = 0;
  std::vector<UploadToken> t = TakeTokens(From(agg, source), 4, &status);
  ASSERT_EQ(t.size(), 4u);
  HttpsClient c(From(agg, source));
  const std::string machine = MachineKeyOf(4242);

  wire::Batch none = VictimBatch(IdOf(1), machine, 1000);
  EXPECT_EQ(Post(c, none).rule, "token_missing");
  wire::Batch first = VictimBatch("", machine, 1000);
  Spend(&first, t[0]);
  Posted p = Post(c, first);
  EXPECT_EQ(p.status, 200);
  EXPECT_FALSE(p.duplicate);
  // Spent again, even on other content: a duplicate, nothing added.
  wire::Batch again = VictimBatch("", machine, 90000);
  Spend(&again, t[0]);
  p = Post(c, again);
  EXPECT_EQ(p.status, 200);
  EXPECT_TRUE(p.duplicate);
  // A token's output on another batch id.
  wire::Batch moved = VictimBatch(IdOf(2), machine, 1000);
  moved.set_token(t[1].output);
  moved.set_token_epoch(t[1].epoch);
  EXPECT_EQ(Post(c, moved).rule, "token_invalid");
  // Forged: the right input, a made-up output.
  wire::Batch forged = VictimBatch("", machine, 1000);
  Spend(&forged, t[1]);
  forged.set_token(std::string(voprf::kOutputBytes, 'x'));
  EXPECT_EQ(Post(c, forged).rule, "token_invalid");
  // Issued by another secret.
  TokenIssuer other("another-operators-secret-0123456789abcdef", {});
  StatusOr<voprf::KeyPair> other_key = other.KeyFor(t[1].epoch);
  ASSERT_TRUE(other_key.ok());
  StatusOr<std::string> other_output = voprf::Evaluate(other_key->secret, t[1].input);
  ASSERT_TRUE(other_output.ok());
  forged.set_token(*other_output);
  EXPECT_EQ(Post(c, forged).rule, "token_invalid");
  // An epoch not yet begun.
  wire::Batch future = VictimBatch("", machine, 1000);
  Spend(&future, t[1]);
  future.set_token_epoch(t[1].epoch + 3);
  EXPECT_EQ(Post(c, future).rule, "token_epoch");
  EXPECT_EQ(Read(agg).calls, 200u) << "one batch of 200 calls went in";

  // A restart: the spent token is still spent, the others still good.
  agg.Term();
  agg.Start();
  HttpsClient c2(From(agg, source));
  p = Post(c2, first);
  EXPECT_EQ(p.status, 200);
  EXPECT_TRUE(p.duplicate) << "the spent set survives a restart";
  wire::Batch second = VictimBatch("", machine, 1000);
  Spend(&second, t[1]);
  p = Post(c2, second);
  EXPECT_EQ(p.status, 200);
  EXPECT_FALSE(p.duplicate);
  EXPECT_EQ(Read(agg).calls, 400u);

  // What the aggregator keeps (its database, snapshot and log files) holds
  // no machine key, no token output and no source address, raw or in hex.
  agg.Term();
  std::vector<std::string> secrets = {machine, HexEncode(machine), source};
  for (const UploadToken& u : t) {
    secrets.push_back(u.output);
    secrets.push_back(HexEncode(u.output));
  }
  size_t files = 0;
  for (const auto& e : fs::recursive_directory_iterator(dir_.path())) {
    if (!e.is_regular_file()) continue;
    const std::string name = e.path().filename().string();
    if (name == "cert.pem" || name == "key.pem" || name == "token.secret") continue;
    std::ifstream in(e.path(), std::ios::binary);
    const std::string bytes(std::istreambuf_iterator<char>(in), {});
    ++files;
    for (size_t i = 0; i < secrets.size(); ++i) {
      EXPECT_EQ(bytes.find(secrets[i]), std::string::npos)
          << e.path().string() << " holds secret " << i << " (" << HexEncode(secrets[i]) << ")";
    }
  }
  EXPECT_GT(files, 5u) << "the database, its log and the aggregator's log were read";
}

// fieldprof-loadgen's defended mode, as deploy/bench-ingest-defences.sh
// runs it: every batch spends a token and carries a machine key, all are
// taken, and the sums move by exactly what was acknowledged.
TEST_F(DefencesTest, TheLoadGeneratorSpendsATokenPerBatch) {
  AggregatorProcess agg(dir_, FreePort(),
                        {"--token_secret_file", dir_.File("token.secret"), "--tokens_per_request",
                         "16", "--source_token_requests_per_day", "0", "--k_anonymity", "1"});
  agg.Start();
  LoadOptions o;
  o.client = agg.Options();
  o.connections = 2;
  o.batches = 40;
  o.pool = 8;
  o.gen.target_bytes = 16 * 1024;
  o.machines = 5;
  o.tokens = true;
  o.verify = true;
  StatusOr<LoadReport> r = RunLoad(o, nullptr);
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  EXPECT_EQ(r->batches_ok, 40) << r->first_error;
  EXPECT_EQ(r->batches_failed, 0) << r->first_error;
  EXPECT_GT(r->keys_verified, 0);
  EXPECT_EQ(r->keys_mismatched, 0);
  // Without --batches there is no telling how many tokens to take.
  o.batches = 0;
  o.duration_s = 1;
  EXPECT_FALSE(RunLoad(o, nullptr).ok());
}

}  // namespace
}  // namespace fieldprof
