// Everything fieldprof-aggregator can be told, from its config file and
// flags (same names in both; see `fieldprof-aggregator --help`).
#ifndef FIELDPROF_AGGREGATOR_CONFIG_H_
#define FIELDPROF_AGGREGATOR_CONFIG_H_

#include "aggregator/clickhouse/store_clickhouse.h"
#include "aggregator/http/server.h"
#include "aggregator/publish/publisher.h"
#include "aggregator/store/store_rocksdb.h"
#include "common/base/status.h"
#include "common/crypto/upload_tokens.h"
#include "common/settings/runtime_settings.h"
#include "common/wire/plausible.h"

namespace fieldprof::aggregator {

struct AggregatorConfig {
  ServerOptions server;
  // The per-source limit on POST /v1/batches (the server asks it).
  SourceLimitOptions batch_limits;
  // Series (and so modules) are published only once this many distinct
  // machines have added to them (aggregator/store/k_anonymous_store.h);
  // 1: everything.
  int64_t k_anonymity = 5;
  // How far behind the sums a kept GET /v1/stacks answer may be served
  // while batches keep coming (aggregator/reads/answer_cache.h); 0: every
  // answer built in its request.
  int64_t answer_max_stale_s = 10;
  // A module with at least this many stack series has its usual GET
  // /v1/stacks questions answered before anyone asks (0: none).
  int64_t answer_warm_stacks = 5000;
  // Anonymous upload tokens (common/crypto/upload_tokens.h): on when a secret file
  // is given; every batch then needs one.
  std::string token_secret_file;
  TokenIssuerOptions tokens;  // epoch_s from --token_epoch_s
  int64_t tokens_per_request = 64;
  // POST /v1/tokens a day per source (address prefix, as batch_limits).
  double token_requests_per_day = 24;
  // What one machine's batch can hold (common/wire/plausible.h).
  PlausibleLimits plausible;
  RocksDbStoreOptions store;
  // Served to agents at GET /v1/config (fleet_* options).
  FleetSettings fleet;
  // Snapshot publishing (on when signing_key is given).
  std::string signing_key;   // Ed25519 private key, PEM (deploy/make-signing-key.sh)
  PublisherOptions publish;  // publish.dir defaults to "<db>-snapshot"
  int64_t publish_interval_s = 3600;
  std::string admin_token_file;  // empty: admin calls off
  // Where the sums live: "rocksdb" (the default, one machine) or
  // "clickhouse" (several aggregators over a ClickHouse cluster,
  // docs/scale-out.md).
  std::string store_kind = "rocksdb";
  ClickHouseStoreOptions clickhouse;
  // ZooKeeper servers (host:port,...) that hold the lease for publishing
  // and the ClickHouse roll-up, so one aggregator of several does them.
  // Empty: this aggregator always holds it.
  std::string zookeeper;
  std::string lease_path = "/fieldprof/lease";
  std::string vendors_file;     // "NAME TOKEN PATTERN[,PATTERN...]" lines; empty: none
  std::string lab_dir;          // uploaded lab profiles; default "<db>-lab"
  std::string developers_file;  // "NAME TOKEN PROGRAM[,PROGRAM...]" lines; empty: no developer mode
  std::string dev_dir;          // developers' runs (RocksDB); default "<db>-dev"
};

// Parses argv (and --config FILE). Sets *help to true when --help was given,
// and fills *help_text.
[[nodiscard]] Status ParseAggregatorConfig(int argc, const char* const* argv,
                                           AggregatorConfig* config, bool* help,
                                           std::string* help_text);

}  // namespace fieldprof::aggregator

#endif  // FIELDPROF_AGGREGATOR_CONFIG_H_
