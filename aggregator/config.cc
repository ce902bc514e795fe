#include "aggregator/config.h"

#include "common/settings/options.h"

namespace fieldprof::aggregator {
namespace {

constexpr const char* kAbout =
    "Receives fieldprof batches over HTTPS (POST /v1/batches), sums them exactly\n"
    "once into an embedded RocksDB (or, with --store clickhouse, a ClickHouse\n"
    "cluster shared by several aggregators), and answers queries (GET /v1/apis, /v1/api,\n"
    "/v1/module, the dashboard at /ui/, /healthz, /metrics; docs/aggregator.md lists\n"
    "every endpoint). With --signing_key it publishes the sums as signed, rotating\n"
    "snapshot fragments (GET /v1/snapshot/manifest, /v1/snapshot/fragments/N).\n"
    "Stops gracefully on SIGTERM or SIGINT.";

// Each section's flags hold the numbers an OptionTable reads (int64_t),
// registered against the table and then applied to the options' own types
// and units.

struct ServerFlags {
  int64_t port, io_threads, workers, queue, conns, body, header, handshake_ms, header_ms, body_ms,
      write_ms, grace_ms, retry_after;

  explicit ServerFlags(const ServerOptions& s)
      : port(s.port),
        io_threads(s.io_threads),
        workers(s.worker_threads),
        queue(s.max_queued_requests),
        conns(s.max_connections),
        body(static_cast<int64_t>(s.max_body_bytes)),
        header(s.max_header_bytes),
        handshake_ms(s.handshake_timeout.count()),
        header_ms(s.header_timeout.count()),
        body_ms(s.body_timeout.count()),
        write_ms(s.write_timeout.count()),
        grace_ms(s.shutdown_grace.count()),
        retry_after(s.retry_after_seconds) {}

  void Register(OptionTable& t, ServerOptions* s) {
    t.AddString("listen", &s->listen_address, "address to listen on");
    t.AddInt("port", &port, "TCP port (0 = any free port)", 0, 65535);
    t.AddString("tls_cert", &s->tls_cert_file, "PEM certificate chain (RSA or ECDSA) [required]");
    t.AddString("tls_key", &s->tls_key_file, "PEM private key [required]");
    t.AddInt("io_threads", &io_threads, "threads for TLS/HTTP I/O", 1, 256);
    t.AddInt("workers", &workers, "threads for request handlers (blocking store writes)", 1, 1024);
    t.AddInt("max_queue", &queue, "requests queued before 503 + Retry-After", 1, 1 << 20);
    t.AddInt("max_connections", &conns, "open connections before new ones are closed", 1, 1 << 20);
    t.AddInt("max_body_bytes", &body, "request body limit (413 above)", 1024, 1 << 20);
    t.AddInt("max_header_bytes", &header, "request header limit", 1024, 1 << 20);
    t.AddInt("handshake_timeout_ms", &handshake_ms, "TLS handshake deadline", 100, 3600000);
    t.AddInt("header_timeout_ms", &header_ms, "deadline for a request header; keep-alive idle time",
             100, 3600000);
    t.AddInt("body_timeout_ms", &body_ms, "deadline for a request body", 100, 3600000);
    t.AddInt("write_timeout_ms", &write_ms, "deadline for writing a response", 100, 3600000);
    t.AddInt("shutdown_grace_ms", &grace_ms, "how long shutdown waits for requests in flight", 0,
             3600000);
    t.AddInt("retry_after_s", &retry_after, "Retry-After seconds sent with 503", 1, 3600);
  }

  void ApplyTo(ServerOptions* s) const {
    s->port = static_cast<uint16_t>(port);
    s->io_threads = static_cast<int>(io_threads);
    s->worker_threads = static_cast<int>(workers);
    s->max_queued_requests = static_cast<int>(queue);
    s->max_connections = static_cast<int>(conns);
    s->max_body_bytes = static_cast<size_t>(body);
    s->max_header_bytes = static_cast<uint32_t>(header);
    s->handshake_timeout = std::chrono::milliseconds(handshake_ms);
    s->header_timeout = std::chrono::milliseconds(header_ms);
    s->body_timeout = std::chrono::milliseconds(body_ms);
    s->write_timeout = std::chrono::milliseconds(write_ms);
    s->shutdown_grace = std::chrono::milliseconds(grace_ms);
    s->retry_after_seconds = static_cast<int>(retry_after);
  }
};

struct RocksDbFlags {
  int64_t retention_days, merges, max_pending, fold_ms, memtable_mib, pending_mib, cache_mib,
      min_free_mib, unpublished_days;
  bool sync;

  explicit RocksDbFlags(const RocksDbStoreOptions& st)
      : retention_days(st.batch_id_retention.count() / 86400),
        merges(st.max_successive_merges),
        max_pending(st.max_pending_batches),
        fold_ms(st.fold_interval.count()),
        memtable_mib(static_cast<int64_t>(st.write_buffer_bytes >> 20)),
        pending_mib(static_cast<int64_t>(st.pending_write_buffer_bytes >> 20)),
        cache_mib(static_cast<int64_t>(st.block_cache_bytes >> 20)),
        min_free_mib(static_cast<int64_t>(st.min_free_bytes >> 20)),
        unpublished_days(st.unpublished_retention_days),
        sync(st.sync) {}

  void Register(OptionTable& t, RocksDbStoreOptions* st) {
    t.AddString("db", &st->path, "RocksDB directory, created if missing [required]");
    t.AddBool("sync", &sync, "fsync the WAL before answering 200 (turn off only to benchmark)");
    t.AddInt("batch_id_retention_days", &retention_days, "days a batch id is remembered for dedupe",
             1, 3650);
    t.AddInt("max_successive_merges", &merges,
             "merge operands per key in the memtable before folding at write (0 = no limit)", 0,
             100000);
    t.AddInt("max_pending_batches", &max_pending,
             "accepted batches waiting to be folded into the sums before 503", 1, 1 << 20);
    t.AddInt("fold_interval_ms", &fold_ms,
             "longest time accepted batches wait to be folded into the sums", 0, 60000);
    t.AddInt("memtable_mib", &memtable_mib, "memtable size of the sums in MiB", 1, 4096);
    t.AddInt("pending_memtable_mib", &pending_mib,
             "memtable size of accepted batches' bodies in MiB: bodies applied before it is "
             "full are never written to a table (less CPU and disk under load, more memory)",
             8, 16384);
    t.AddInt("block_cache_mib", &cache_mib, "RocksDB block cache size in MiB", 1, 1 << 20);
    t.AddInt("min_free_mib", &min_free_mib,
             "free MiB under the database below which uploads get 507 + Retry-After instead of "
             "being written (0: none)",
             0, int64_t{1} << 30);
    t.AddInt("unpublished_days", &unpublished_days,
             "a series still below --k_anonymity this many days after its first record is "
             "deleted, its sketches with it (0: kept for ever; docs/privacy.md)",
             0, 36500);
  }

  void ApplyTo(RocksDbStoreOptions* st) const {
    st->sync = sync;
    st->batch_id_retention = std::chrono::hours(24 * retention_days);
    st->max_successive_merges = static_cast<int>(merges);
    st->max_pending_batches = static_cast<int>(max_pending);
    st->fold_interval = std::chrono::milliseconds(fold_ms);
    st->write_buffer_bytes = static_cast<size_t>(memtable_mib) << 20;
    st->pending_write_buffer_bytes = static_cast<size_t>(pending_mib) << 20;
    st->block_cache_bytes = static_cast<size_t>(cache_mib) << 20;
    st->min_free_bytes = static_cast<uint64_t>(min_free_mib) << 20;
    st->unpublished_retention_days = static_cast<int>(unpublished_days);
  }
};

struct SourceLimitFlags {
  int64_t v4, v6;
  explicit SourceLimitFlags(const SourceLimitOptions& o) : v4(o.ipv4_prefix), v6(o.ipv6_prefix) {}

  void Register(OptionTable& t, SourceLimitOptions* o) {
    t.AddDouble("source_batches_per_minute", &o->per_minute,
                "batches a minute one source (address prefix) may send; over it, 429 + "
                "Retry-After (0: no limit, e.g. behind haproxy's own)",
                0, 1e9);
    t.AddDouble("source_burst", &o->burst, "batches a quiet source may send at once", 1, 1e9);
    t.AddInt("source_prefix_v4", &v4, "leading bits of an IPv4 address that make a source", 8, 32);
    t.AddInt("source_prefix_v6", &v6, "leading bits of an IPv6 address that make a source", 16,
             128);
  }
  void ApplyTo(SourceLimitOptions* o) const {
    o->ipv4_prefix = static_cast<int>(v4);
    o->ipv6_prefix = static_cast<int>(v6);
  }
};

struct PlausibleFlags {
  int64_t window_h;
  explicit PlausibleFlags(const PlausibleLimits& p) : window_h(p.max_window_ms / 3600000) {}

  void Register(OptionTable& t, PlausibleLimits* p) {
    t.AddDouble("plausible_runs_per_minute", &p->runs_per_minute,
                "measured runs a minute one machine can make: a batch claiming more runs for "
                "its window is refused (runs_per_window; 0: no plausibility rules)",
                0, 1e9);
    t.AddInt("plausible_cpus", &p->cpus,
             "CPUs of the largest machine taking part: bounds the calls a batch can hold for its "
             "window (calls_per_window)",
             1, 1 << 20);
    t.AddInt("plausible_window_h", &window_h,
             "hours of a batch's window the rates are granted at most (older runs count as if "
             "they fit in it)",
             1, 24 * 365);
  }
  void ApplyTo(PlausibleLimits* p) const { p->max_window_ms = window_h * 3600000; }
};

void RegisterFleet(OptionTable& t, FleetSettings* f) {
  t.AddInt("fleet_k", &f->k, "agents: APIs each program run measures", 1, 8);
  t.AddInt("fleet_slots", &f->slots, "agents: programs measured at once per machine", 1, 1024);
  t.AddDouble("fleet_max_load_per_cpu", &f->max_load_per_cpu,
              "agents: no measuring above this 1-min load average per CPU", 0, 1e6);
  t.AddDouble("fleet_overhead_budget", &f->overhead_budget,
              "agents: fraction of a run's time measuring may cost", 0, 1);
  t.AddDouble("fleet_sample_fraction", &f->sample_fraction,
              "agents: share of program runs measured at all", 0, 1);
  t.AddInt("fleet_max_runs_per_minute", &f->max_runs_per_minute,
           "agents: measured program runs a minute per machine at most (0: no cap)", 0, 1000000);
  t.AddInt("fleet_stack_hz", &f->stack_hz,
           "agents: stack samples a CPU second of a measured run (0: none)", 0, 1000);
  t.AddString("fleet_allow_modules", &f->allow_modules,
              "agents: only these sonames are measured (comma-separated; empty: all)");
  t.AddString("fleet_deny_modules", &f->deny_modules, "agents: these sonames are never measured");
  t.AddInt("fleet_batch_bytes", &f->batch_bytes, "agents: batch size to seal at", 4096, 1 << 20);
  t.AddInt("fleet_max_age_s", &f->max_age_s, "agents: seal a smaller batch at this age", 1,
           int64_t{365} * 86400);
}

struct PublishFlags {
  int64_t fragments, per_cycle, keep_old_h;

  explicit PublishFlags(const PublisherOptions& p)
      : fragments(p.fragment_count),
        per_cycle(p.per_cycle),
        keep_old_h(std::chrono::duration_cast<std::chrono::hours>(p.keep_old).count()) {}

  void Register(OptionTable& t, AggregatorConfig* c) {
    t.AddString("signing_key", &c->signing_key,
                "Ed25519 private key (PEM) that signs snapshot manifests; publishing is off "
                "without it (deploy/make-signing-key.sh)");
    t.AddString("snapshot_dir", &c->publish.dir,
                "where fragments and the manifest are kept (default: <db>-snapshot)");
    t.AddInt("fragment_count", &fragments, "fragments the snapshot is split into", 1, 4096);
    t.AddInt("fragments_per_cycle", &per_cycle, "fragments rebuilt per publish cycle", 1, 4096);
    t.AddInt("publish_interval_s", &c->publish_interval_s, "seconds between publish cycles", 1,
             int64_t{30} * 86400);
    t.AddInt("keep_old_fragments_h", &keep_old_h,
             "hours a replaced fragment version stays downloadable", 0, 24 * 365);
  }

  void ApplyTo(PublisherOptions* p) const {
    p->fragment_count = static_cast<uint32_t>(fragments);
    p->per_cycle = static_cast<uint32_t>(per_cycle);
    p->keep_old = std::chrono::hours(keep_old_h);
  }
};

struct ClickHouseFlags {
  int64_t quorum_ms, query_s, horizon, grace_s, rollup_s, pending, group, inflight;

  explicit ClickHouseFlags(const ClickHouseStoreOptions& ch)
      : quorum_ms(ch.insert_quorum_timeout.count()),
        query_s(ch.query_timeout.count() / 1000),
        horizon(ch.horizon_days),
        grace_s(ch.drop_grace.count()),
        rollup_s(ch.rollup_interval.count() / 1000),
        pending(ch.max_pending_batches),
        group(ch.max_group_batches),
        inflight(ch.inserts_in_flight) {}

  void Register(OptionTable& t, ClickHouseStoreOptions* ch) {
    t.AddString("clickhouse_url", &ch->url,
                "with --store clickhouse: ClickHouse's HTTP interfaces, http://HOST:PORT; "
                "replicas of a shard joined by ',', shards by ';'");
    t.AddString("clickhouse_cluster", &ch->cluster,
                "the cluster's name in ClickHouse's <remote_servers> (replicated tables read "
                "through Distributed ones); empty for one server");
    t.AddString("clickhouse_database", &ch->database, "database of the tables, created if missing");
    t.AddString("clickhouse_zookeeper_path", &ch->zookeeper_path,
                "ZooKeeper path of the replicated tables");
    t.AddInt("clickhouse_quorum_timeout_ms", &quorum_ms,
             "how long an insert waits for every replica of its shard before another shard is "
             "tried",
             100, 3600000);
    t.AddInt("clickhouse_query_timeout_s", &query_s, "deadline of reads and roll-ups", 1, 86400);
    t.AddInt("clickhouse_horizon_days", &horizon,
             "days raw rows are kept before they are folded into day nodes", 0, 30);
    t.AddInt("clickhouse_drop_grace_s", &grace_s,
             "seconds between a day's fold and dropping the raw rows before it", 0, 86400);
    t.AddInt("clickhouse_rollup_interval_s", &rollup_s, "seconds between roll-up passes", 1, 86400);
    t.AddInt("clickhouse_max_pending_batches", &pending,
             "batches waiting for their ClickHouse insert before 503", 1, 1 << 20);
    t.AddInt("clickhouse_max_group_batches", &group, "batches in one ClickHouse insert at most", 1,
             1 << 16);
    t.AddInt("clickhouse_inserts_in_flight", &inflight,
             "ClickHouse inserts this aggregator has in flight at once, each trying the shards "
             "in turn (0: one per shard)",
             0, 256);
  }

  void ApplyTo(ClickHouseStoreOptions* ch, int64_t retention_days) const {
    ch->insert_quorum_timeout = std::chrono::milliseconds(quorum_ms);
    ch->query_timeout = std::chrono::seconds(query_s);
    ch->horizon_days = static_cast<int>(horizon);
    ch->drop_grace = std::chrono::seconds(grace_s);
    ch->rollup_interval = std::chrono::seconds(rollup_s);
    ch->max_pending_batches = static_cast<int>(pending);
    ch->max_group_batches = static_cast<int>(group);
    ch->inserts_in_flight = static_cast<int>(inflight);
    ch->batch_id_retention_days = static_cast<int>(retention_days);
  }
};

// The store, the lease, vendors, lab profiles and the admin token.
void RegisterOthers(OptionTable& t, AggregatorConfig* c) {
  t.AddString("store", &c->store_kind,
              "rocksdb (the default: --db holds the sums) or clickhouse (--clickhouse_url; "
              "several aggregators over one ClickHouse cluster, docs/scale-out.md)");
  t.AddString("zookeeper", &c->zookeeper,
              "ZooKeeper servers (host:port,...) holding the lease that lets one aggregator of "
              "several publish the snapshot and roll up ClickHouse; empty: always this one");
  t.AddString("lease_path", &c->lease_path, "ZooKeeper path of that lease");
  t.AddString("vendors_file", &c->vendors_file,
              "vendor pages: a file of 'NAME TOKEN PATTERN[,PATTERN...]' lines; a module matching "
              "a vendor's patterns (e.g. libsqlite3.so*) is served by GET /v1/module only with "
              "that vendor's bearer token");
  t.AddString("lab_dir", &c->lab_dir,
              "where uploaded lab profiles are kept, apart from the field sums (default: "
              "<db>-lab)");
  t.AddString("developers_file", &c->developers_file,
              "developer mode: a file of 'NAME TOKEN PROGRAM[,PROGRAM...]' lines; a developer "
              "uploads the per-run points of those programs (POST /v1/dev/runs) and reads back "
              "only its own (default: developer mode off)");
  t.AddString("dev_dir", &c->dev_dir,
              "where developers' runs are kept, apart from the field sums (default: <db>-dev; "
              "with --store clickhouse, in ClickHouse)");
  t.AddString("admin_token_file", &c->admin_token_file,
              "file with the bearer token for POST /v1/admin/publish (default: admin calls off)");
  t.AddString("token_secret_file", &c->token_secret_file,
              "anonymous upload tokens: a file of 32 or more secret bytes (head -c 32 "
              "/dev/urandom); every batch then spends a token from POST /v1/tokens (default: "
              "off, as for a closed fleet)");
  t.AddInt("token_epoch_s", &c->tokens.epoch_s,
           "seconds a token key lasts; tokens of this and the previous epoch are taken", 60,
           int64_t{365} * 86400);
  t.AddInt("tokens_per_request", &c->tokens_per_request,
           "most tokens one POST /v1/tokens may ask for", 1, 4096);
  t.AddDouble("source_token_requests_per_day", &c->token_requests_per_day,
              "POST /v1/tokens a day one source (address prefix) may make; over it 429 + "
              "Retry-After (0: no limit)",
              0, 1e9);
}

// What the options say together, and the defaults next to the database.
Status Settle(AggregatorConfig* c) {
  c->tokens.max_per_request = static_cast<int>(c->tokens_per_request);
  if (!c->token_secret_file.empty() &&
      c->store.batch_id_retention < std::chrono::seconds(2 * c->tokens.epoch_s)) {
    // A spent token is a batch id seen: ids must be remembered as long as
    // a token is taken (two epochs), or a token could be spent again.
    return InvalidArgument("--batch_id_retention_days must cover two --token_epoch_s (" +
                           std::to_string(2 * c->tokens.epoch_s / 86400 + 1) + " days)");
  }
  if (c->server.tls_cert_file.empty() || c->server.tls_key_file.empty()) {
    return InvalidArgument("--tls_cert and --tls_key are required (see deploy/make-cert.sh)");
  }
  if (c->store_kind != "rocksdb" && c->store_kind != "clickhouse") {
    return InvalidArgument("--store is rocksdb or clickhouse");
  }
  if (c->store.path.empty() && c->store_kind == "rocksdb") {
    return InvalidArgument("--db is required");
  }
  if (Status v = c->fleet.Validate(); !v.ok()) return v.WithContext("fleet settings");
  if (!c->store.path.empty()) {
    std::string db = c->store.path;
    while (db.size() > 1 && db.back() == '/') db.pop_back();
    if (c->publish.dir.empty()) c->publish.dir = db + "-snapshot";
    if (c->lab_dir.empty()) c->lab_dir = db + "-lab";
    if (c->dev_dir.empty()) c->dev_dir = db + "-dev";
  }
  return Status::Ok();
}

}  // namespace

Status ParseAggregatorConfig(int argc, const char* const* argv, AggregatorConfig* config,
                             bool* help, std::string* help_text) {
  ServerFlags server(config->server);
  RocksDbFlags rocksdb(config->store);
  PublishFlags publish(config->publish);
  ClickHouseFlags clickhouse(config->clickhouse);
  SourceLimitFlags limits(config->batch_limits);
  PlausibleFlags plausible(config->plausible);
  OptionTable t("fieldprof-aggregator", kAbout);
  server.Register(t, &config->server);
  limits.Register(t, &config->batch_limits);
  plausible.Register(t, &config->plausible);
  t.AddInt("k_anonymity", &config->k_anonymity,
           "publish a series (snapshot, /v1 reads, dashboard, reports) only once this many "
           "distinct machines added to it (1: everything, e.g. one machine trying it out)",
           1, 1000000);
  t.AddInt("answer_max_stale_s", &config->answer_max_stale_s,
           "GET /v1/stacks answers are kept; while batches keep coming, a kept answer is served "
           "this many seconds at most after it was built, a new one summed meanwhile (0: every "
           "answer summed in its request)",
           0, 3600);
  t.AddInt("answer_warm_stacks", &config->answer_warm_stacks,
           "a module with at least this many field stacks has its usual GET /v1/stacks "
           "questions (every version: the default limit, and the dashboard's) answered before "
           "anyone asks and kept current, so that none waits for a walk of its stacks (0: none)",
           0, 100000000);
  rocksdb.Register(t, &config->store);
  RegisterFleet(t, &config->fleet);
  publish.Register(t, config);
  RegisterOthers(t, config);
  clickhouse.Register(t, &config->clickhouse);
  FP_RETURN_IF_ERROR(t.Parse(argc, argv));
  *help = t.help_requested();
  *help_text = t.Help();
  if (*help) return Status::Ok();
  if (!t.positional().empty()) {
    return InvalidArgument("unexpected argument '" + t.positional()[0] + "'");
  }
  server.ApplyTo(&config->server);
  limits.ApplyTo(&config->batch_limits);
  plausible.ApplyTo(&config->plausible);
  rocksdb.ApplyTo(&config->store);
  config->store.unpublished_k = static_cast<int>(config->k_anonymity);
  publish.ApplyTo(&config->publish);
  clickhouse.ApplyTo(&config->clickhouse, rocksdb.retention_days);
  return Settle(config);
}

}  // namespace fieldprof::aggregator
