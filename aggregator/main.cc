// fieldprof-aggregator: the HTTPS ingest and query service.
#include <google/protobuf/stubs/logging.h>
#include <signal.h>

#include <cstdio>
#include <fstream>
#include <iostream>
#include <optional>
#include <sstream>
#include <thread>

#include "aggregator/config.h"
#include "aggregator/store/lab_storage.h"
#include "aggregator/publish/lease.h"
#include "aggregator/metrics.h"
#include "aggregator/publish/publisher.h"
#include "aggregator/http/router.h"
#include "aggregator/http/server.h"
#include "aggregator/publish/snapshot_storage.h"
#include "aggregator/clickhouse/lab_storage_clickhouse.h"
#include "aggregator/clickhouse/snapshot_storage_clickhouse.h"
#include "aggregator/clickhouse/store_clickhouse.h"
#include "aggregator/store/store_rocksdb.h"
#include "common/options.h"
#include "common/signing.h"

using namespace fieldprof;
using namespace fieldprof::aggregator;

int main(int argc, char** argv) {
  // protobuf logs an ERROR line for every upload whose strings are not
  // UTF-8: any client could fill the log that way. Rejections are already
  // answered with the rule and counted in /metrics.
  google::protobuf::SetLogHandler(nullptr);
  AggregatorConfig config;
  bool help = false;
  std::string help_text;
  Status s = ParseAggregatorConfig(argc, argv, &config, &help, &help_text);
  if (help) {
    std::cout << help_text;
    return 0;
  }
  if (!s.ok()) {
    std::cerr << "fieldprof-aggregator: " << s.message() << "\n";
    return 2;
  }

  // Signals are taken by a dedicated thread so shutdown runs as normal code.
  sigset_t signals;
  sigemptyset(&signals);
  sigaddset(&signals, SIGTERM);
  sigaddset(&signals, SIGINT);
  pthread_sigmask(SIG_BLOCK, &signals, nullptr);
  signal(SIGPIPE, SIG_IGN);

  // The lease: with --zookeeper, one aggregator of several publishes and
  // rolls up (lease.h); alone, this one always does.
  std::unique_ptr<Lease> lease;
  if (config.zookeeper.empty()) {
    lease = SoleLease();
  } else {
    StatusOr<std::unique_ptr<Lease>> zk =
        OpenZooKeeperLease(config.zookeeper, config.lease_path, std::chrono::seconds(10));
    if (!zk.ok()) {
      std::cerr << "fieldprof-aggregator: " << zk.status().message() << "\n";
      return 2;
    }
    lease = std::move(*zk);
  }
  config.clickhouse.may_roll_up = [&lease] { return lease->Held(); };
  StatusOr<std::unique_ptr<Store>> store = config.store_kind == "clickhouse"
                                               ? OpenClickHouseStore(config.clickhouse)
                                               : OpenRocksDbStore(config.store);
  if (!store.ok()) {
    std::cerr << "fieldprof-aggregator: " << store.status().ToString() << "\n";
    return 1;
  }
  Metrics metrics;
  Router router(store->get(), &metrics);
  if (!config.zookeeper.empty()) router.SetLease(lease.get());
  router.SetFleetSettings(config.fleet);
  // Lab profiles: beside the database, or in ClickHouse for every replica.
  std::unique_ptr<LabStorage> lab;
  if (config.store_kind == "clickhouse") {
    StatusOr<std::unique_ptr<LabStorage>> shared = ClickHouseLabStorage(config.clickhouse);
    if (!shared.ok()) {
      std::cerr << "fieldprof-aggregator: " << shared.status().ToString() << "\n";
      return 1;
    }
    lab = std::move(*shared);
  } else if (!config.lab_dir.empty()) {
    lab = LocalLabStorage(config.lab_dir);
  }
  router.SetLabStorage(lab.get());
  if (!config.vendors_file.empty()) {
    // NAME TOKEN PATTERN[,PATTERN...] per line; '#' starts a comment. Only
    // the tokens' digests are kept, and they are never logged.
    std::ifstream in(config.vendors_file);
    if (!in) {
      std::cerr << "fieldprof-aggregator: cannot read --vendors_file " << config.vendors_file
                << "\n";
      return 2;
    }
    std::vector<Router::Vendor> vendors;
    int line_no = 0;
    for (std::string line; std::getline(in, line);) {
      ++line_no;
      if (line.empty() || line[0] == '#') continue;
      std::istringstream words(line);
      std::string name, token, patterns;
      if (!(words >> name >> token >> patterns) || token.size() < 16) {
        std::cerr << "fieldprof-aggregator: " << config.vendors_file << ":" << line_no
                  << ": want NAME TOKEN PATTERN[,PATTERN...] with a token of 16 characters or "
                     "more\n";
        return 2;
      }
      Router::Vendor v{name, Sha256(token), {}};
      for (size_t at = 0; at <= patterns.size();) {
        const size_t comma = patterns.find(',', at);
        v.patterns.push_back(patterns.substr(at, comma - at));
        if (comma == std::string::npos) break;
        at = comma + 1;
      }
      vendors.push_back(std::move(v));
    }
    std::cerr << "fieldprof-aggregator: " << vendors.size() << " vendors with token-protected "
              << "module pages\n";
    router.SetVendors(std::move(vendors));
  }

  // Snapshot publishing, when a signing key is given.
  std::optional<Ed25519Signer> signer;
  std::unique_ptr<SnapshotStorage> snapshot_storage;
  std::optional<Publisher> publisher;
  std::optional<PublishLoop> publish_loop;
  if (!config.signing_key.empty()) {
    StatusOr<Ed25519Signer> key = Ed25519Signer::FromPemFile(config.signing_key);
    if (!key.ok()) {
      std::cerr << "fieldprof-aggregator: " << key.status().message() << "\n";
      return 2;
    }
    std::string token;
    if (!config.admin_token_file.empty()) {
      std::ifstream in(config.admin_token_file);
      std::getline(in, token);
      token = std::string(TrimSpace(token));
      if (!in && token.empty()) {
        std::cerr << "fieldprof-aggregator: cannot read --admin_token_file "
                  << config.admin_token_file << "\n";
        return 2;
      }
      if (token.size() < 16) {
        std::cerr << "fieldprof-aggregator: the admin token in " << config.admin_token_file
                  << " is shorter than 16 characters\n";
        return 2;
      }
    }
    signer.emplace(std::move(*key));
    if (config.store_kind == "clickhouse") {
      // Every replica serves what the lease holder keeps in ClickHouse.
      StatusOr<std::unique_ptr<SnapshotStorage>> shared =
          OpenClickHouseSnapshotStorage(config.clickhouse);
      if (!shared.ok()) {
        std::cerr << "fieldprof-aggregator: " << shared.status().ToString() << "\n";
        return 1;
      }
      snapshot_storage = std::move(*shared);
    } else if (config.publish.dir.empty()) {
      std::cerr << "fieldprof-aggregator: --snapshot_dir is needed to publish\n";
      return 2;
    }
    config.publish.may_write = [&lease] { return lease->Held(); };
    publisher.emplace(store->get(), &*signer, config.publish, snapshot_storage.get());
    if (Status p = publisher->Init(); !p.ok()) {
      std::cerr << "fieldprof-aggregator: " << p.ToString() << "\n";
      return 1;
    }
    publish_loop.emplace(&*publisher, std::chrono::seconds(config.publish_interval_s), &metrics,
                         lease.get());
    router.SetPublisher(&*publish_loop, token);
  }
  Server server(config.server, &router, &metrics);
  s = server.Start();
  if (!s.ok()) {
    std::cerr << "fieldprof-aggregator: " << s.ToString() << "\n";
    return 1;
  }
  std::cerr << "fieldprof-aggregator: listening on https://" << config.server.listen_address << ":"
            << server.port() << " ("
            << (config.store_kind == "clickhouse" ? "ClickHouse " + config.clickhouse.url
                                                  : "db " + config.store.path)
            << ")\n";
  if (!config.zookeeper.empty()) {
    std::cerr << "fieldprof-aggregator: lease " << config.lease_path << ": " << lease->Describe()
              << "\n";
  }
  if (publish_loop) {
    std::cerr << "fieldprof-aggregator: publishing " << config.publish.fragment_count
              << " fragments into "
              << (snapshot_storage ? snapshot_storage->Describe() : config.publish.dir) << ", "
              << config.publish.per_cycle << " every " << config.publish_interval_s << " s (key "
              << signer->KeyId() << ")\n";
    publish_loop->Start();
  }

  std::thread signal_thread([&server, &signals] {
    int sig = 0;
    sigwait(&signals, &sig);
    std::cerr << "fieldprof-aggregator: signal " << sig << ", shutting down\n";
    server.Shutdown();
  });
  server.Wait();
  if (publish_loop) publish_loop->Stop();
  // Wait() returns only after every handler finished: closing is safe now.
  Status closed = (*store)->Close();
  std::cerr << "fieldprof-aggregator: stopped; " << metrics.batches_accepted()
            << " batches accepted, " << metrics.batches_duplicate() << " duplicates\n";
  if (!closed.ok()) {
    std::cerr << "fieldprof-aggregator: " << closed.ToString() << "\n";
  }
  // Wake the signal thread if shutdown came from elsewhere.
  pthread_kill(signal_thread.native_handle(), SIGTERM);
  signal_thread.join();
  return closed.ok() ? 0 : 1;
}
