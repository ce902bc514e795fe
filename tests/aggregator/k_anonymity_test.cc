// k-anonymous publication on the real aggregator: a series is
// published only once k distinct machines added to it (each counted from
// the record its agent marks as the machine's first of the series);
// until then no read shows it or its module; the k-th machine brings its
// whole history in, exactly; replays and the same machine again count
// once; /metrics counts what is withheld.
#include <cstdlib>
#include <fstream>
#include <nlohmann/json.hpp>
#include <string>

#include "common/net/https_client.h"
#include "common/snapshot/snapshot.h"
#include "common/wire/api_key.h"
#include "gtest/gtest.h"
#include "tests/support/aggregator_process.h"
#include "tests/support/test_util.h"

namespace fieldprof {
namespace {

using testing::AggregatorProcess;
using testing::FreePort;
using testing::IdOf;
using testing::SimpleBatch;
using testing::TempDir;

std::string MachineKey(int machine) {
  std::string k(16, 'k');
  k[0] = static_cast<char>(machine);
  return k;
}

class KAnonymityTest : public ::testing::Test {
 protected:
  void SetUp() override { ASSERT_TRUE(testing::MakeCert(dir_.path())); }

  // One batch of one call of `symbol` in libacme-internal.so.1 from
  // `machine` (0: no machine key, as agents before the key sent), marked
  // as that machine's first of the series unless `again`, as the agent
  // marks it (common/spool/counted_series.h).
  void Send(AggregatorProcess& agg, uint64_t id, const std::string& symbol, int machine,
            uint64_t value = 1000, bool again = false) {
    wire::Batch b = SimpleBatch(IdOf(id), "libacme-internal.so.1", symbol, value);
    if (machine != 0) b.set_machine_key(MachineKey(machine));
    for (wire::Record& r : *b.mutable_records()) r.set_first_from_machine(!again);
    HttpsClient c(agg.Options());
    StatusOr<HttpReply> r = c.Post("/v1/batches", "application/x-protobuf", b.SerializeAsString());
    ASSERT_TRUE(r.ok()) << r.status().ToString();
    ASSERT_EQ(r->status, 200) << r->body;
  }
  nlohmann::json Get(AggregatorProcess& agg, const std::string& target, int* status = nullptr) {
    HttpsClient c(agg.Options());
    StatusOr<HttpReply> r = c.Get(target);
    EXPECT_TRUE(r.ok());
    if (!r.ok()) return {};
    if (status != nullptr) *status = r->status;
    return nlohmann::json::parse(r->body, nullptr, false);
  }
  // Publishes the snapshot (POST /v1/admin/publish?all=1), then the record
  // of `symbol`'s series in its fragment; false when it is in none.
  bool Published(AggregatorProcess& agg, const std::string& symbol, wire::Record* out) {
    HttpsClient c(agg.Options());
    StatusOr<HttpReply> p = c.Request("POST", "/v1/admin/publish?all=1", "", "",
                                      {{"Authorization", "Bearer " + kAdminToken}});
    EXPECT_TRUE(p.ok() && p->status == 200) << (p.ok() ? p->body : p.status().ToString());
    StatusOr<HttpReply> m = c.Get("/v1/snapshot/manifest");
    wire::SignedManifest signed_manifest;
    wire::Manifest manifest;
    EXPECT_TRUE(m.ok() && signed_manifest.ParseFromString(m->body) &&
                manifest.ParseFromString(signed_manifest.manifest()));
    const wire::Batch b = SimpleBatch(IdOf(1), "libacme-internal.so.1", symbol, 1);
    const ApiKey key = ApiKeyFromWire(b.records(0).key(), b.client_platform());
    const uint32_t f = FragmentOf(key, manifest.fragment_count());
    StatusOr<HttpReply> got = c.Get("/v1/snapshot/fragments/" + std::to_string(f));
    wire::Fragment fragment;
    EXPECT_TRUE(got.ok() && got->status == 200 && fragment.ParseFromString(got->body));
    for (const wire::Record& r : fragment.records()) {
      if (r.key().symbol() == symbol) {
        *out = r;
        return true;
      }
    }
    return false;
  }
  // The manifest of the snapshot last published.
  wire::Manifest LastManifest(AggregatorProcess& agg) {
    HttpsClient c(agg.Options());
    StatusOr<HttpReply> m = c.Get("/v1/snapshot/manifest");
    wire::SignedManifest signed_manifest;
    wire::Manifest manifest;
    EXPECT_TRUE(m.ok() && signed_manifest.ParseFromString(m->body) &&
                manifest.ParseFromString(signed_manifest.manifest()));
    return manifest;
  }
  std::string Metrics(AggregatorProcess& agg) {
    HttpsClient c(agg.Options());
    StatusOr<HttpReply> r = c.Get("/metrics");
    return r.ok() ? r->body : "";
  }

  const std::string kAdminToken = "k-anonymity-test-admin-token-0123456789";
  TempDir dir_;
};

TEST_F(KAnonymityTest, ASeriesIsPublishedOnceKMachinesAddedToIt) {
  { std::ofstream(dir_.File("admin.token")) << kAdminToken << "\n"; }
  ASSERT_EQ(std::system(("'" FIELDPROF_SOURCE_DIR "/deploy/make-signing-key.sh' '" + dir_.path() +
                         "' >/dev/null 2>&1")
                            .c_str()),
            0);
  AggregatorProcess agg(dir_, FreePort(),
                        {"--k_anonymity", "5", "--signing_key", dir_.File("snapshot-signing.key"),
                         "--admin_token_file", dir_.File("admin.token")});
  agg.Start();
  // "rare": machines 1 to 4 (machine 1 twice), one batch replayed, and one
  // batch without a key. "common": machines 1 to 5.
  Send(agg, 1, "rare", 1);
  Send(agg, 2, "rare", 1, 1000, /*again=*/true);
  Send(agg, 3, "rare", 2);
  Send(agg, 3, "rare", 2);  // the same batch again: a duplicate
  Send(agg, 4, "rare", 0);
  Send(agg, 6, "rare", 3);
  Send(agg, 7, "rare", 4);
  for (int m = 1; m <= 5; ++m) Send(agg, 10 + m, "common", m);
  agg.WaitApplied();

  const nlohmann::json apis = Get(agg, "/v1/apis?module=libacme-internal.so.1");
  ASSERT_FALSE(apis.is_discarded());
  ASSERT_EQ(apis["apis"].size(), 1u) << apis.dump();
  EXPECT_EQ(apis["apis"][0]["symbol"], "common");
  EXPECT_EQ(apis["apis"][0]["machines"], 5);
  EXPECT_EQ(apis["apis"][0]["runs"], 5);
  int status = 0;
  Get(agg, "/v1/api?module=libacme-internal.so.1&symbol=rare", &status);
  EXPECT_EQ(status, 404) << "a series on 4 machines is not published at k 5";
  const nlohmann::json common = Get(agg, "/v1/api?module=libacme-internal.so.1&symbol=common");
  EXPECT_EQ(common["machines"], 5);
  // The vendor pages: only the published series, with its machines.
  const nlohmann::json module = Get(agg, "/v1/module?module=libacme-internal.so.1");
  ASSERT_EQ(module["series"].size(), 1u) << module.dump();
  EXPECT_EQ(module["series"][0]["symbol"], "common");
  EXPECT_EQ(module["series"][0]["machines"], 5);
  const nlohmann::json report = Get(agg, "/v1/report?module=libacme-internal.so.1");
  EXPECT_EQ(report["machines"], 5) << report.dump().substr(0, 300);
  ASSERT_EQ(report["apis"].size(), 1u);
  // The dashboard's recent list shows only what is published.
  const nlohmann::json recent = Get(agg, "/v1/recent");
  for (const auto& a : recent["apis"]) EXPECT_NE(a["symbol"], "rare") << recent.dump();
  // The snapshot has "common", with its machines, and not "rare"; the
  // publish cycle's walk counts what it withheld.
  wire::Record r;
  EXPECT_FALSE(Published(agg, "rare", &r));
  ASSERT_TRUE(Published(agg, "common", &r));
  EXPECT_EQ(r.machine_count(), 5u);
  EXPECT_TRUE(r.machines().empty()) << "no sketch leaves the aggregator";
  // The manifest says what it holds and holds back, as counts.
  const wire::Manifest manifest = LastManifest(agg);
  EXPECT_EQ(manifest.k_anonymity(), 5u);
  EXPECT_EQ(manifest.series_published(), 1u);
  EXPECT_EQ(manifest.series_withheld(), 1u);
  EXPECT_EQ(manifest.modules_withheld(), 0u);
  EXPECT_EQ(manifest.machines_withheld(), 4u) << "rare: machines 1 to 4, the most of any";
  // So does /v1/apis (of the whole store, whatever the filter), and
  // `fieldprof top` says it in words.
  const nlohmann::json listed = Get(agg, "/v1/apis?module=libacme-internal.so.1");
  EXPECT_EQ(listed["withheld"]["series"], 1) << listed.dump();
  EXPECT_EQ(listed["withheld"]["machines"], 4) << listed.dump();
  EXPECT_EQ(listed["withheld"]["k"], 5) << listed.dump();
  std::string top;
  ASSERT_EQ(testing::RunCommand(std::string(FIELDPROF_CLI_BIN) + " top --port " +
                                    std::to_string(agg.port()) + " --ca " + dir_.File("cert.pem"),
                                &top),
            0)
      << top;
  EXPECT_NE(top.find("held back: 1 series, sent from 4 machines so far: a series is published "
                     "once 5 machines have sent it (the aggregator's k_anonymity setting"),
            std::string::npos)
      << top;
  // A volunteer's side: the snapshot pulled into a cache, fieldprof
  // status says what it holds and holds back.
  std::string pulled, status_text;
  ASSERT_EQ(testing::RunCommand(std::string(FIELDPROF_CLI_BIN) + " pull --all --quiet --port " +
                                    std::to_string(agg.port()) + " --ca " + dir_.File("cert.pem") +
                                    " --key " + dir_.File("snapshot-signing.pub") + " --cache " +
                                    dir_.File("cache") + " 2>&1",
                                &pulled),
            0)
      << pulled;
  ASSERT_EQ(testing::RunCommand(std::string(FIELDPROF_CLI_BIN) + " status --cache " +
                                    dir_.File("cache") + " --state_dir " + dir_.File("state") +
                                    " --spool " + dir_.File("spool") + " --runtime_settings " +
                                    dir_.File("none.conf") + " 2>&1",
                                &status_text),
            0)
      << status_text;
  EXPECT_NE(status_text.find("published:      1 series in the snapshot"), std::string::npos)
      << status_text;
  EXPECT_NE(status_text.find("held back:      1 series, sent from 4 machines so far: a series is "
                             "published once 5 machines have sent it"),
            std::string::npos)
      << status_text;
  const std::string m = Metrics(agg);
  EXPECT_EQ(testing::MetricValue(m, "fieldprof_series_withheld").value_or(-2), 1) << m;
  EXPECT_EQ(testing::MetricValue(m, "fieldprof_machines_withheld").value_or(-2), 4) << m;
  EXPECT_EQ(testing::MetricValue(m, "fieldprof_modules_withheld").value_or(-2), 0) << m;
  EXPECT_EQ(testing::MetricValue(m, "fieldprof_k_anonymity").value_or(-2), 5) << m;

  // The fifth machine: "rare" appears with its whole history, exactly.
  Send(agg, 5, "rare", 5, 2000);
  agg.WaitApplied();
  const nlohmann::json rare = Get(agg, "/v1/api?module=libacme-internal.so.1&symbol=rare", &status);
  ASSERT_EQ(status, 200) << rare.dump();
  EXPECT_EQ(rare["machines"], 5);
  EXPECT_EQ(rare["runs"], 7) << "batches 1 to 7: the replay counted once";
  EXPECT_EQ(rare["stats"]["count"], 7);
  EXPECT_EQ(rare["histogram"]["sum"], "8000");
  ASSERT_TRUE(Published(agg, "rare", &r));
  EXPECT_EQ(r.runs(), 7u);
  EXPECT_EQ(r.machine_count(), 5u);
  EXPECT_EQ(testing::MetricValue(Metrics(agg), "fieldprof_series_withheld").value_or(-2), 0);
  EXPECT_EQ(LastManifest(agg).series_published(), 2u);
  EXPECT_EQ(LastManifest(agg).series_withheld(), 0u);
  EXPECT_EQ(Get(agg, "/v1/apis")["withheld"]["series"], 0);
}

// A module seen on fewer than k machines is nowhere: not in the module list,
// not in /v1/apis, not in the recent list. (Without a machine key, as from
// agents before it, a batch is on no machine: also withheld.)
TEST_F(KAnonymityTest, AModuleOnOneMachineIsNowhere) {
  AggregatorProcess agg(dir_, FreePort(), {"--k_anonymity", "2"});
  agg.Start();
  for (int i = 1; i <= 5; ++i) Send(agg, i, "fn" + std::to_string(i), 7);
  Send(agg, 6, "fn6", 0);
  agg.WaitApplied();
  const nlohmann::json modules = Get(agg, "/v1/modules");
  ASSERT_FALSE(modules.is_discarded());
  EXPECT_EQ(modules.dump().find("libacme-internal"), std::string::npos) << modules.dump();
  EXPECT_EQ(Get(agg, "/v1/apis").dump().find("libacme-internal"), std::string::npos);
  EXPECT_EQ(Get(agg, "/v1/recent").dump().find("libacme-internal"), std::string::npos);
  // With k 1 (one machine trying it out) the same data is all there.
  agg.Term();
  AggregatorProcess one(dir_, FreePort(), {"--k_anonymity", "1"});
  one.Start();
  EXPECT_NE(Get(one, "/v1/modules").dump().find("libacme-internal"), std::string::npos);
}

}  // namespace
}  // namespace fieldprof
