// The ClickHouse store (store_clickhouse_impl.h): opening, the servers and
// the quorum, health and metrics.
#include "aggregator/clickhouse/store_clickhouse.h"

#include "aggregator/clickhouse/store_clickhouse_impl.h"

namespace fieldprof::aggregator::ch {

namespace {

bool IsIdentifier(const std::string& s) {
  if (s.empty() || std::isdigit(static_cast<unsigned char>(s[0]))) return false;
  return std::all_of(s.begin(), s.end(), [](char c) {
    return std::isalnum(static_cast<unsigned char>(c)) || c == '_';
  });
}

}  // namespace

Status ClickHouseStore::Init() {
  FP_RETURN_IF_ERROR(EnsureChSchema(tables_, shards_, o_.ddl_timeout_s));
  // While an insert waits for its quorum the next group gathers
  // (store_clickhouse.h: inserts_in_flight).
  const size_t committers =
      o_.inserts_in_flight > 0 ? static_cast<size_t>(o_.inserts_in_flight) : shards_.size();
  for (size_t s = 0; s < committers; ++s) {
    committers_.emplace_back([this, s] { CommitLoop(s); });
  }
  rollup_ = std::thread([this] { RollupLoop(); });
  return Status::Ok();
}

uint64_t ClickHouseStore::pending_batches() {
  if (!tables_.clustered()) return 0;
  uint64_t pending = 0;
  for (const HttpsClientOptions& server : servers_) {
    ClickHouseClient ch(Short(server));
    StatusOr<std::string> n = ch.Query(
        "SELECT sum(inserts_in_queue + parts_to_check) FROM system.replicas WHERE database = " +
        SqlString(tables_.database()) + " FORMAT TSV");
    if (n.ok()) pending += std::strtoull(n->c_str(), nullptr, 10);
  }
  return pending;
}

Status ClickHouseStore::WaitApplied(std::chrono::milliseconds timeout) {
  const auto deadline = Clock::now() + timeout;
  for (;;) {
    bool idle;
    {
      std::lock_guard<std::mutex> lock(mu_);
      idle = queue_.empty() && inflight_.empty();
    }
    // Asked outside mu_: it queries every server, and ingest needs mu_.
    if (idle && pending_batches() == 0) return Status::Ok();
    if (Clock::now() >= deadline) return Unavailable("ClickHouse replicas are still behind");
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
  }
}

Status ClickHouseStore::Health() {
  if (closed_) return Unavailable("the store is closed");
  std::lock_guard<std::mutex> lock(health_mu_);
  if (Clock::now() - health_at_ < std::chrono::seconds(1)) return health_;
  Status h = Status::Ok();
  for (size_t s = 0; s < shards_.size() && h.ok(); ++s) {
    Status any = Unavailable("no replica");
    for (const HttpsClientOptions& server : shards_[s]) {
      ClickHouseClient ch(Short(server));
      any = ch.Execute("SELECT 1");
      if (any.ok()) break;
    }
    if (!any.ok()) {
      h = Unavailable("ClickHouse shard " + std::to_string(s + 1) +
                      " does not answer: " + any.message());
    }
  }
  health_ = h;
  health_at_ = Clock::now();
  return h;
}

void ClickHouseStore::AppendMetrics(std::string* out) {
  auto line = [out](const char* name, const char* type, uint64_t v) {
    *out +=
        std::string("# TYPE ") + name + " " + type + "\n" + name + " " + std::to_string(v) + "\n";
  };
  line("fieldprof_store_clickhouse", "gauge", 1);
  // Acknowledged inserts some replica has not fetched yet.
  line("fieldprof_pending_batches", "gauge", pending_batches());
  line("fieldprof_clickhouse_inserts_total", "counter", inserts_.load());
  line("fieldprof_clickhouse_inserted_batches_total", "counter", inserted_batches_.load());
  line("fieldprof_clickhouse_known_batches_total", "counter", known_batches_.load());
  line("fieldprof_clickhouse_unconfirmed_copies_total", "counter", unconfirmed_copies_.load());
  line("fieldprof_clickhouse_quorum_busy_total", "counter", quorum_busy_.load());
  line("fieldprof_clickhouse_shard_failures_total", "counter", shard_failures_.load());
  line("fieldprof_clickhouse_group_failures_total", "counter", group_failures_.load());
  {
    std::lock_guard<std::mutex> lock(mu_);
    line("fieldprof_clickhouse_queued_batches", "gauge", queue_.size());
  }
  line("fieldprof_rollup_next_day", "gauge", static_cast<uint64_t>(next_fold_day_.load()));
  line("fieldprof_rollup_series_total", "counter", rollup_series_.load());
  line("fieldprof_rollup_days_total", "counter", rollup_days_.load());
  line("fieldprof_rollup_months_total", "counter", rollup_months_.load());
  line("fieldprof_rollup_deferred_total", "counter", rollup_deferred_.load());
  line("fieldprof_rollup_partitions_dropped_total", "counter", partitions_dropped_.load());
}

Status ClickHouseStore::Close() {
  {
    std::lock_guard<std::mutex> lock(mu_);
    if (closed_.exchange(true)) return Status::Ok();
    cv_.notify_all();
  }
  for (std::thread& t : committers_) t.join();
  committers_.clear();
  {
    std::lock_guard<std::mutex> lock(rollup_mu_);
    rollup_cv_.notify_all();
  }
  if (rollup_.joinable()) rollup_.join();
  // Batches still queued were never inserted: their callers hear so.
  std::lock_guard<std::mutex> lock(mu_);
  for (auto& p : queue_) p->done.set_value(Unavailable("the store is closing"));
  queue_.clear();
  inflight_.clear();
  return Status::Ok();
}

HttpsClientOptions ClickHouseStore::Short(HttpsClientOptions o) {
  o.timeout = std::chrono::milliseconds(2000);
  return o;
}

int64_t ClickHouseStore::NowMs() const {
  return std::chrono::duration_cast<std::chrono::milliseconds>(Clock::now().time_since_epoch())
      .count();
}

int32_t ClickHouseStore::Today() const {
  if (o_.today) return o_.today();
  return DayFromUnixSeconds(std::chrono::duration_cast<std::chrono::seconds>(
                                std::chrono::system_clock::now().time_since_epoch())
                                .count());
}

ClickHouseSettings ClickHouseStore::ReadSettings() const {
  return {{"max_execution_time", std::to_string(o_.query_timeout.count() / 1000)}};
}

std::string ClickHouseStore::Quorum(size_t s) const {
  return shards_[s].size() > 1 ? std::to_string(shards_[s].size()) : "0";
}

Status ClickHouseStore::OnAnyServer(const std::function<Status(ClickHouseClient&)>& fn,
                                    const bool* final) {
  return ChOnAnyServer(servers_, next_server_++, fn, final);
}

Status ClickHouseStore::OnShard(size_t s, const std::function<Status(ClickHouseClient&)>& fn) {
  return ChOnAnyServer(shards_[s], next_server_++, fn);
}

StatusOr<std::string> ClickHouseStore::QueryAny(const std::string& sql,
                                                const ClickHouseSettings& settings) {
  return ChQueryAny(servers_, next_server_++, sql, settings);
}

StatusOr<std::string> ClickHouseStore::QueryShard(size_t s, const std::string& sql) {
  return ChQueryAny(shards_[s], next_server_++, sql);
}

std::set<std::string> ClickHouseStore::OnEveryReplica(const std::vector<std::string>& ids) {
  std::set<std::string> confirmed;
  if (ids.empty()) return confirmed;
  const std::string sql = "SELECT lower(hex(batch_id)) FROM " + tables_.Local("fp_rows") +
                          " WHERE module = '' AND batch_id IN (" + IdList(ids) + ") FORMAT TSV";
  for (const auto& replicas : shards_) {
    std::map<std::string, size_t> held;
    bool all_answered = true;
    for (const HttpsClientOptions& replica : replicas) {
      ClickHouseClient ch(Short(replica));
      StatusOr<std::string> r = ch.Query(sql, ReadSettings());
      if (!r.ok()) {
        all_answered = false;
        break;
      }
      std::set<std::string> here;
      std::istringstream lines(*r);
      for (std::string line; std::getline(lines, line);) here.insert(line);
      for (const std::string& id : here) ++held[id];
    }
    if (!all_answered) continue;
    for (const auto& [id, n] : held) {
      if (n == replicas.size()) confirmed.insert(id);
    }
  }
  return confirmed;
}

ClickHouseSettings ClickHouseStore::CaughtUpReplicas() const {
  ClickHouseSettings s = ReadSettings();
  s.emplace_back("max_replica_delay_for_distributed_queries", "1");
  return s;
}

Status ClickHouseStore::StreamSums(const std::string& sql,
                                   const std::function<bool(ApiAggregate&&)>& visit,
                                   bool caught_up) {
  // Another server is asked only when nothing was handed on yet: a walk
  // that failed half way is an error, never a second walk from the start.
  bool delivered = false;
  return OnAnyServer(
      [&](ClickHouseClient& ch) {
        SumsReader reader([&](ApiAggregate&& a) {
          delivered = true;
          return visit(std::move(a));
        });
        Status q = ch.QueryStream(sql, caught_up ? CaughtUpReplicas() : ReadSettings(),
                                  [&](std::string_view piece) { return reader.Feed(piece); });
        if (!reader.status().ok()) return reader.status();
        if (!q.ok()) return q;
        return reader.Finish();
      },
      &delivered);
}

std::string ClickHouseStore::RawSumsSql(int32_t lo, int32_t b, const std::string& where) const {
  return ChDedupRowsSql(
      tables_.All("fp_rows"), "batch_id, seq",
      And("module != '' AND day BETWEEN " + DateSql(lo - 1) + " AND " + DateSql(b), where), "day",
      "day >= " + DateSql(lo));
}

StatusOr<Pointers> ClickHouseStore::ReadPointers(bool fresh) {
  const auto keep = std::min<Clock::duration>(std::chrono::seconds(1), o_.drop_grace / 2);
  {
    std::lock_guard<std::mutex> lock(pointers_mu_);
    if (!fresh && pointers_valid_ && Clock::now() - pointers_at_ < keep) return pointers_;
  }
  const auto asked = Clock::now();
  Pointers p;
  FP_ASSIGN_OR_RETURN(
      std::string body,
      QueryAny("SELECT name, max(value) FROM " + tables_.Local("fp_state") +
                   " WHERE name IN ('rolled_day', 'rolled_month') GROUP BY name FORMAT TSV",
               ReadSettings()));
  std::istringstream lines(body);
  for (std::string line; std::getline(lines, line);) {
    const size_t tab = line.find('\t');
    if (tab == std::string::npos) continue;
    const int32_t v = static_cast<int32_t>(std::strtol(line.c_str() + tab + 1, nullptr, 10));
    if (line.compare(0, tab, "rolled_day") == 0) p.rolled_day = v;
    if (line.compare(0, tab, "rolled_month") == 0) p.rolled_month = v;
  }
  std::lock_guard<std::mutex> lock(pointers_mu_);
  pointers_ = p;
  pointers_at_ = asked;
  pointers_valid_ = true;
  return p;
}

}  // namespace fieldprof::aggregator::ch

namespace fieldprof::aggregator {

StatusOr<std::unique_ptr<Store>> OpenClickHouseStore(const ClickHouseStoreOptions& options) {
  FP_ASSIGN_OR_RETURN(std::vector<std::vector<HttpsClientOptions>> shards,
                      ParseClickHouseShards(options.url, options.query_timeout));
  size_t servers = 0;
  for (const auto& s : shards) servers += s.size();
  if (servers > 1 && options.cluster.empty()) {
    return InvalidArgument("clickhouse_url lists " + std::to_string(servers) +
                           " servers: name their cluster with clickhouse_cluster");
  }
  if (!ch::IsIdentifier(options.database)) {
    return InvalidArgument("clickhouse_database '" + options.database +
                           "' is not a plain name (letters, digits, _)");
  }
  if (!options.cluster.empty() && !ch::IsIdentifier(options.cluster)) {
    return InvalidArgument("clickhouse_cluster '" + options.cluster +
                           "' is not a plain name (letters, digits, _)");
  }
  if (options.zookeeper_path.empty() || options.zookeeper_path[0] != '/' ||
      options.zookeeper_path.find_first_not_of(
          "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789_-./") !=
          std::string::npos) {
    return InvalidArgument("clickhouse_zookeeper_path '" + options.zookeeper_path +
                           "' must start with / and hold letters, digits and _ - . / only");
  }
  auto store = std::make_unique<ch::ClickHouseStore>(options, std::move(shards));
  FP_RETURN_IF_ERROR(store->Init());
  return std::unique_ptr<Store>(std::move(store));
}

}  // namespace fieldprof::aggregator
