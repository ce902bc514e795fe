// fieldprof-aggregator: the HTTPS ingest and query service. main() opens
// the parts config.h describes, in order (lease, store, lab storage,
// vendors, publishing), hands them to the router through its constructor,
// serves until SIGTERM or SIGINT, and closes them in reverse.
//
// Exit: 0 a clean stop; 1 a part failed to open or close; 2 a usage or
// configuration error (said on stderr).
#include <google/protobuf/stubs/logging.h>
#include <signal.h>

#include <cstdio>
#include <fstream>
#include <iostream>
#include <memory>
#include <optional>
#include <thread>

#include "aggregator/clickhouse/dev_store_clickhouse.h"
#include "aggregator/clickhouse/lab_storage_clickhouse.h"
#include "aggregator/clickhouse/snapshot_storage_clickhouse.h"
#include "aggregator/clickhouse/store_clickhouse.h"
#include "aggregator/config.h"
#include "aggregator/http/router.h"
#include "aggregator/http/server.h"
#include "aggregator/metrics.h"
#include "aggregator/publish/lease.h"
#include "aggregator/publish/publisher.h"
#include "aggregator/publish/snapshot_storage.h"
#include "aggregator/store/k_anonymous_store.h"
#include "aggregator/store/lab_storage.h"
#include "aggregator/store/store_rocksdb.h"
#include "common/crypto/signing.h"
#include "common/settings/options.h"

namespace fieldprof::aggregator {
namespace {

// Why the service could not start, and the exit code that says so.
struct StartError {
  int exit_code;
  std::string message;
};
StartError ConfigError(const Status& s) { return {2, s.message()}; }
StartError OpenError(const Status& s) { return {1, s.ToString()}; }

// Everything a running aggregator holds, in the order it is opened (and
// so destroyed in reverse; the metrics, which all report to, last).
struct Service {
  Metrics metrics;
  std::unique_ptr<SourceLimiter> batch_limits;
  std::unique_ptr<SourceLimiter> token_limits;
  std::unique_ptr<TokenIssuer> tokens;
  std::unique_ptr<Lease> lease;
  std::unique_ptr<Store> store;
  // What readers (queries, dashboard, vendors, the snapshot) see: the
  // series on at least k machines. Null when k <= 1.
  std::unique_ptr<KAnonymousStore> published;
  Store* readers() { return published ? published.get() : store.get(); }
  std::unique_ptr<LabStorage> lab;
  std::vector<Vendor> vendors;
  std::unique_ptr<DevStore> dev;
  std::vector<Developer> developers;
  std::optional<Ed25519Signer> signer;
  std::string admin_token;
  std::unique_ptr<SnapshotStorage> snapshot_storage;
  std::optional<Publisher> publisher;
  std::optional<PublishLoop> publish_loop;
};

// With --zookeeper, one aggregator of several publishes and rolls up
// (publish/lease.h); alone, this one always does.
std::optional<StartError> OpenLease(AggregatorConfig& config, Service* s) {
  if (config.zookeeper.empty()) {
    s->lease = SoleLease();
    return std::nullopt;
  }
  StatusOr<std::unique_ptr<Lease>> zk =
      OpenZooKeeperLease(config.zookeeper, config.lease_path, std::chrono::seconds(10));
  if (!zk.ok()) return ConfigError(zk.status());
  s->lease = std::move(*zk);
  return std::nullopt;
}

std::optional<StartError> OpenStore(AggregatorConfig& config, Service* s) {
  Lease* lease = s->lease.get();
  config.clickhouse.may_roll_up = [lease] { return lease->Held(); };
  StatusOr<std::unique_ptr<Store>> store = config.store_kind == "clickhouse"
                                               ? OpenClickHouseStore(config.clickhouse)
                                               : OpenRocksDbStore(config.store);
  if (!store.ok()) return OpenError(store.status());
  s->store = std::move(*store);
  if (config.k_anonymity > 1) {
    s->published = std::make_unique<KAnonymousStore>(s->store.get(), config.k_anonymity);
  }
  return std::nullopt;
}

// Lab profiles: beside the database, or in ClickHouse for every replica.
std::optional<StartError> OpenLab(AggregatorConfig& config, Service* s) {
  if (config.store_kind == "clickhouse") {
    StatusOr<std::unique_ptr<LabStorage>> shared = ClickHouseLabStorage(config.clickhouse);
    if (!shared.ok()) return OpenError(shared.status());
    s->lab = std::move(*shared);
  } else if (!config.lab_dir.empty()) {
    s->lab = LocalLabStorage(config.lab_dir);
  }
  return std::nullopt;
}

std::optional<StartError> LoadVendors(AggregatorConfig& config, Service* s) {
  if (config.vendors_file.empty()) return std::nullopt;
  StatusOr<std::vector<Vendor>> vendors = ReadVendorsFile(config.vendors_file);
  if (!vendors.ok()) return ConfigError(vendors.status());
  s->vendors = std::move(*vendors);
  std::cerr << "fieldprof-aggregator: " << s->vendors.size()
            << " vendors with token-protected module pages\n";
  return std::nullopt;
}

// Developer mode, when a developers file is given: its tables beside the
// database, or in ClickHouse for every replica.
std::optional<StartError> OpenDev(AggregatorConfig& config, Service* s) {
  if (config.developers_file.empty()) return std::nullopt;
  StatusOr<std::vector<Developer>> devs = ReadTokenHolders(config.developers_file, "developers");
  if (!devs.ok()) return ConfigError(devs.status());
  StatusOr<std::unique_ptr<DevStore>> store = config.store_kind == "clickhouse"
                                                  ? ClickHouseDevStore(config.clickhouse)
                                                  : OpenRocksDevStore(config.dev_dir);
  if (!store.ok()) return OpenError(store.status());
  s->dev = std::move(*store);
  s->developers = std::move(*devs);
  std::cerr << "fieldprof-aggregator: " << s->developers.size()
            << " developers may upload the runs of their programs' points\n";
  return std::nullopt;
}

// Anonymous upload tokens, when a secret file is given.
std::optional<StartError> OpenTokens(AggregatorConfig& config, Service* s) {
  if (config.token_secret_file.empty()) return std::nullopt;
  std::ifstream in(config.token_secret_file, std::ios::binary);
  const std::string secret(std::istreambuf_iterator<char>(in), {});
  if (!in.good() && !in.eof()) {
    return ConfigError(
        InvalidArgument("cannot read --token_secret_file " + config.token_secret_file));
  }
  if (secret.size() < 32) {
    return ConfigError(InvalidArgument("--token_secret_file " + config.token_secret_file +
                                       " holds " + std::to_string(secret.size()) +
                                       " bytes; 32 or more are needed (head -c 32 /dev/urandom)"));
  }
  s->tokens = std::make_unique<TokenIssuer>(secret, config.tokens);
  return std::nullopt;
}

// The admin token: the first line of the file, 16 characters or more.
StatusOr<std::string> ReadAdminToken(const std::string& path) {
  std::ifstream in(path);
  std::string token;
  std::getline(in, token);
  token = std::string(TrimSpace(token));
  if (!in && token.empty()) return InvalidArgument("cannot read --admin_token_file " + path);
  if (token.size() < 16) {
    return InvalidArgument("the admin token in " + path + " is shorter than 16 characters");
  }
  return token;
}

// Snapshot publishing, when a signing key is given: the key, the admin
// token, where the snapshot is kept, the publisher and its loop.
std::optional<StartError> SetUpPublishing(AggregatorConfig& config, Service* s) {
  if (config.signing_key.empty()) return std::nullopt;
  StatusOr<Ed25519Signer> key = Ed25519Signer::FromPemFile(config.signing_key);
  if (!key.ok()) return ConfigError(key.status());
  if (!config.admin_token_file.empty()) {
    StatusOr<std::string> token = ReadAdminToken(config.admin_token_file);
    if (!token.ok()) return ConfigError(token.status());
    s->admin_token = std::move(*token);
  }
  s->signer.emplace(std::move(*key));
  if (config.store_kind == "clickhouse") {
    // Every replica serves what the lease holder keeps in ClickHouse.
    StatusOr<std::unique_ptr<SnapshotStorage>> shared =
        OpenClickHouseSnapshotStorage(config.clickhouse);
    if (!shared.ok()) return OpenError(shared.status());
    s->snapshot_storage = std::move(*shared);
  } else if (config.publish.dir.empty()) {
    return ConfigError(InvalidArgument("--snapshot_dir is needed to publish"));
  }
  Lease* lease = s->lease.get();
  config.publish.may_write = [lease] { return lease->Held(); };
  if (const TokenIssuer* tokens = s->tokens.get(); tokens != nullptr) {
    config.publish.token_keys = [tokens](int64_t now_ms) {
      std::vector<wire::TokenKey> keys;
      const int64_t epoch = tokens->EpochAt(now_ms / 1000);
      for (int64_t e : {epoch, epoch + 1}) {
        StatusOr<voprf::KeyPair> k = tokens->KeyFor(e);
        if (!k.ok()) continue;
        wire::TokenKey& key = keys.emplace_back();
        key.set_epoch(e);
        key.set_public_key(k->pub);
      }
      return keys;
    };
  }
  s->publisher.emplace(s->readers(), &*s->signer, config.publish, s->snapshot_storage.get());
  if (Status p = s->publisher->Init(); !p.ok()) return OpenError(p);
  s->publish_loop.emplace(&*s->publisher, std::chrono::seconds(config.publish_interval_s),
                          &s->metrics, lease);
  return std::nullopt;
}

// Opens the parts in order; the first that fails stops it.
std::optional<StartError> Open(AggregatorConfig& config, Service* s) {
  using Step = std::optional<StartError> (*)(AggregatorConfig&, Service*);
  for (Step step :
       {OpenLease, OpenStore, OpenLab, LoadVendors, OpenDev, OpenTokens, SetUpPublishing}) {
    if (std::optional<StartError> e = step(config, s)) return e;
  }
  return std::nullopt;
}

void SayListening(const AggregatorConfig& config, const Service& s, const Server& server) {
  std::cerr << "fieldprof-aggregator: listening on https://" << config.server.listen_address << ":"
            << server.port() << " ("
            << (config.store_kind == "clickhouse" ? "ClickHouse " + config.clickhouse.url
                                                  : "db " + config.store.path)
            << ")\n";
  if (config.k_anonymity > 1) {
    std::cerr << "fieldprof-aggregator: publishing series seen on at least " << config.k_anonymity
              << " machines (--k_anonymity)\n";
  } else {
    std::cerr << "fieldprof-aggregator: publishing every series, also those seen on one machine "
                 "(--k_anonymity "
              << config.k_anonymity << ")\n";
  }
  if (s.tokens) {
    std::cerr << "fieldprof-aggregator: every batch spends an anonymous token (POST /v1/tokens: "
              << config.tokens.max_per_request << " a request, " << config.token_requests_per_day
              << " requests a day per source; keys of " << config.tokens.epoch_s << " s)\n";
  }
  if (s.batch_limits) {
    const SourceLimitOptions& l = config.batch_limits;
    std::cerr << "fieldprof-aggregator: per source (/" << l.ipv4_prefix << " IPv4, /"
              << l.ipv6_prefix << " IPv6): " << l.per_minute << " batches a minute, " << l.burst
              << " at once; over it 429 + Retry-After\n";
  } else {
    std::cerr << "fieldprof-aggregator: no per-source limit on batches "
                 "(--source_batches_per_minute 0)\n";
  }
  if (!config.zookeeper.empty()) {
    std::cerr << "fieldprof-aggregator: lease " << config.lease_path << ": " << s.lease->Describe()
              << "\n";
  }
  if (s.publish_loop) {
    std::cerr << "fieldprof-aggregator: publishing " << config.publish.fragment_count
              << " fragments into "
              << (s.snapshot_storage ? s.snapshot_storage->Describe() : config.publish.dir) << ", "
              << config.publish.per_cycle << " every " << config.publish_interval_s << " s (key "
              << s.signer->KeyId() << ")\n";
  }
}

// Serves until SIGTERM or SIGINT (taken by a thread of its own, so
// shutdown runs as normal code), then closes the store. The exit code.
int Serve(const AggregatorConfig& config, Service& s, const sigset_t& signals) {
  RouterParts parts;
  ServerOptions server_options = config.server;
  if (config.batch_limits.per_minute > 0) {
    s.batch_limits = std::make_unique<SourceLimiter>("batches", config.batch_limits);
    server_options.batch_limits = s.batch_limits.get();
    parts.source_limits.push_back(s.batch_limits.get());
  }
  if (s.tokens) {
    parts.tokens = s.tokens.get();
    if (config.token_requests_per_day > 0) {
      SourceLimitOptions o = config.batch_limits;
      o.per_minute = config.token_requests_per_day / 1440;
      o.burst = std::max(1.0, config.token_requests_per_day / 4);
      s.token_limits = std::make_unique<SourceLimiter>("tokens", o);
      server_options.token_limits = s.token_limits.get();
      parts.source_limits.push_back(s.token_limits.get());
    }
  }
  parts.store = s.readers();
  parts.metrics = &s.metrics;
  parts.fleet = config.fleet;
  parts.plausible = config.plausible;
  parts.lab = s.lab.get();
  parts.publish = s.publish_loop ? &*s.publish_loop : nullptr;
  parts.admin_token = s.admin_token;
  parts.lease = config.zookeeper.empty() ? nullptr : s.lease.get();
  parts.vendors = s.vendors;
  parts.dev = s.dev.get();
  parts.developers = s.developers;
  parts.answer_max_stale = std::chrono::seconds(config.answer_max_stale_s);
  parts.answer_warm_stacks = static_cast<size_t>(config.answer_warm_stacks);
  Router router(std::move(parts));
  Server server(server_options, &router, &s.metrics);
  if (Status st = server.Start(); !st.ok()) {
    std::cerr << "fieldprof-aggregator: " << st.ToString() << "\n";
    return 1;
  }
  SayListening(config, s, server);
  if (s.publish_loop) s.publish_loop->Start();
  std::thread signal_thread([&server, &signals] {
    int sig = 0;
    sigwait(&signals, &sig);
    std::cerr << "fieldprof-aggregator: signal " << sig << ", shutting down\n";
    server.Shutdown();
  });
  server.Wait();
  if (s.publish_loop) s.publish_loop->Stop();
  // Wait() returns only after every handler finished: closing is safe now.
  const Status closed = s.store->Close();
  std::cerr << "fieldprof-aggregator: stopped; " << s.metrics.batches_accepted()
            << " batches accepted, " << s.metrics.batches_duplicate() << " duplicates\n";
  if (!closed.ok()) std::cerr << "fieldprof-aggregator: " << closed.ToString() << "\n";
  // Wake the signal thread if shutdown came from elsewhere.
  pthread_kill(signal_thread.native_handle(), SIGTERM);
  signal_thread.join();
  return closed.ok() ? 0 : 1;
}

}  // namespace
}  // namespace fieldprof::aggregator

int main(int argc, char** argv) {
  using namespace fieldprof;
  using namespace fieldprof::aggregator;
  // protobuf logs an ERROR line for every upload whose strings are not
  // UTF-8: any client could fill the log that way. Rejections are already
  // answered with the rule and counted in /metrics.
  google::protobuf::SetLogHandler(nullptr);
  AggregatorConfig config;
  bool help = false;
  std::string help_text;
  const Status parsed = ParseAggregatorConfig(argc, argv, &config, &help, &help_text);
  if (help) {
    std::cout << help_text;
    return 0;
  }
  if (!parsed.ok()) {
    std::cerr << "fieldprof-aggregator: " << parsed.message() << " (see --help)\n";
    return 2;
  }
  sigset_t signals;
  sigemptyset(&signals);
  sigaddset(&signals, SIGTERM);
  sigaddset(&signals, SIGINT);
  pthread_sigmask(SIG_BLOCK, &signals, nullptr);
  signal(SIGPIPE, SIG_IGN);
  Service service;
  if (std::optional<StartError> e = Open(config, &service)) {
    std::cerr << "fieldprof-aggregator: " << e->message << "\n";
    return e->exit_code;
  }
  return Serve(config, service, signals);
}
