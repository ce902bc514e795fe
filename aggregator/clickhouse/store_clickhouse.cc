#include "aggregator/clickhouse/store_clickhouse.h"

#include <algorithm>
#include <atomic>
#include <condition_variable>
#include <deque>
#include <future>
#include <map>
#include <mutex>
#include <random>
#include <set>
#include <sstream>
#include <thread>

#include "aggregator/clickhouse/client.h"
#include "aggregator/clickhouse/rows.h"
#include "aggregator/clickhouse/schema.h"
#include "aggregator/clickhouse/servers.h"
#include "aggregator/store/calendar_tree.h"
#include "common/wire.h"

namespace fieldprof::aggregator {
namespace {

using Clock = std::chrono::steady_clock;

// The highest day a ClickHouse Date holds comfortably (2104).
constexpr int32_t kLastChDay = 49000;

std::string DateSql(int32_t day) {
  return "toDate('" + FormatDay(std::clamp(day, 0, kLastChDay)) + "')";
}

// The SQL conditions of a filter on the key columns (all levels have them).
std::string KeyWhere(const ApiFilter& f) {
  std::string w;
  auto add = [&w](const std::string& c) { w += (w.empty() ? "" : " AND ") + c; };
  if (!f.module.empty()) add("module = " + SqlString(f.module));
  if (!f.symbol_prefix.empty()) {
    add(f.symbol_exact ? "symbol = " + SqlString(f.symbol_prefix)
                       : "startsWith(symbol, " + SqlString(f.symbol_prefix) + ")");
  }
  if (!f.module_version.empty()) add("module_version = " + SqlString(f.module_version));
  if (f.metric) add("metric = " + std::to_string(static_cast<int>(*f.metric)));
  if (f.os) add("os = " + std::to_string(static_cast<int>(*f.os)));
  if (f.arch) add("arch = " + std::to_string(static_cast<int>(*f.arch)));
  if (f.cpu_vendor) add("cpu_vendor = " + std::to_string(static_cast<int>(*f.cpu_vendor)));
  return w;
}

std::string And(const std::string& a, const std::string& b) {
  if (a.empty()) return b;
  if (b.empty()) return a;
  return a + " AND " + b;
}

// Batch ids given in hex, as SQL FixedString(16) values for IN (...).
std::string IdList(const std::vector<std::string>& hex_ids) {
  std::string l;
  for (const std::string& id : hex_ids) {
    l += (l.empty() ? "" : ", ") + std::string("toFixedString(unhex(") + SqlString(id) + "), 16)";
  }
  return l;
}

// A batch waiting for its INSERT, and the ApplyBatch call waiting for it.
struct Pending {
  std::string id;
  std::string rows;  // BatchRows: marker + records
  int32_t day = 0;
  std::vector<size_t> day_offsets;  // of each row's day in `rows`
  size_t records = 0;
  std::promise<StatusOr<ApplyResult>> done;
  std::shared_future<StatusOr<ApplyResult>> result = done.get_future().share();
};

// The roll-up pointers: every day <= rolled_day is in the day nodes, every
// month <= rolled_month in the month nodes; -1 when none yet.
struct Pointers {
  int32_t rolled_day = -1;
  int32_t rolled_month = -1;
};

class ClickHouseStore : public Store {
 public:
  ClickHouseStore(const ClickHouseStoreOptions& o,
                  std::vector<std::vector<HttpsClientOptions>> shards)
      : o_(o),
        tables_(o.database, o.cluster, o.zookeeper_path),
        shards_(std::move(shards)),
        shard_skip_until_(shards_.size()) {
    for (const auto& shard : shards_) {
      for (const HttpsClientOptions& s : shard) servers_.push_back(s);
    }
  }

  ~ClickHouseStore() override { IgnoreError(Close()); }

  Status Init() {
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

  // ---- ingest ----

  StatusOr<ApplyResult> ApplyBatch(const BatchView& batch, std::string_view, int32_t day) override {
    if (closed_) return Unavailable("the store is closed");
    // The rows are made before taking mu_, which every ingest thread and
    // committer needs.
    auto p = std::make_shared<Pending>();
    p->id = std::string(batch.batch_id());
    p->day = day;
    p->rows = BatchRows(batch, day, &p->day_offsets);
    p->records = static_cast<size_t>(batch.records_size());
    const std::string id = p->id;
    std::shared_future<StatusOr<ApplyResult>> result;
    bool twin = false;
    {
      std::lock_guard<std::mutex> lock(mu_);
      if (auto it = inflight_.find(id); it != inflight_.end()) {
        // The same batch on another connection of this aggregator: it is
        // stored once, by the first; this one waits for that and is the
        // duplicate.
        result = it->second->result;
        twin = true;
      } else {
        if (queue_.size() >= static_cast<size_t>(o_.max_pending_batches)) {
          return ResourceExhausted(std::to_string(queue_.size()) +
                                   " batches wait for ClickHouse; retry later");
        }
        result = p->result;
        inflight_[id] = p;
        queue_.push_back(std::move(p));
        cv_.notify_one();
      }
    }
    const auto wait = o_.insert_quorum_timeout * (2 * shards_.size() + 1) + o_.query_timeout;
    if (result.wait_for(wait) != std::future_status::ready) {
      return Unavailable(
          "ClickHouse did not answer in time; the batch may be stored, and a "
          "retry of it is recognised");
    }
    StatusOr<ApplyResult> r = result.get();
    if (twin && r.ok()) return ApplyResult{true, 0};
    return r;
  }

  StatusOr<bool> BatchAccepted(std::string_view batch_id) override {
    if (closed_) return Unavailable("the store is closed");
    {
      // Being stored by this aggregator now: not yet known to be counted.
      std::lock_guard<std::mutex> lock(mu_);
      if (inflight_.count(std::string(batch_id)) > 0) return false;
    }
    const std::string hex = HexEncode(std::string(batch_id));
    FP_ASSIGN_OR_RETURN(std::set<std::string> stored, StoredIds({hex}));
    return stored.count(hex) > 0;
  }

  // ---- reads ----

  // Every series matching `where` summed over days [first, last], in key
  // order, one at a time.
  Status ReadSums(int32_t first, int32_t last, const std::string& where,
                  const std::function<bool(ApiAggregate&&)>& visit) {
    if (closed_) return Unavailable("the store is closed");
    FP_ASSIGN_OR_RETURN(Pointers p, ReadPointers());
    const int32_t a = first == kUnboundedFirst ? 0 : std::max(first, 0);
    const int32_t b = last == kUnboundedLast ? kLastChDay : std::min(last, kLastChDay);
    if (a > b) return Status::Ok();
    const int32_t R = p.rolled_day;
    std::vector<std::string> parts;
    // Whole months inside [a, min(b, R)] that are folded.
    int32_t covered_first = 1, covered_last = 0;
    if (p.rolled_month >= 0 && R >= a) {
      int32_t m_lo = MonthOfDay(a);
      if (FirstDayOfMonth(m_lo) < a) ++m_lo;
      int32_t m_hi = std::min(p.rolled_month, MonthOfDay(std::min(b, R)));
      if (LastDayOfMonth(m_hi) > std::min(b, R)) --m_hi;
      if (m_lo <= m_hi) {
        parts.push_back(ChDedupRowsSql(
            tables_.All("fp_months"), std::string(kChKeyColumns) + ", month",
            And("month BETWEEN " + std::to_string(m_lo) + " AND " + std::to_string(m_hi), where)));
        covered_first = FirstDayOfMonth(m_lo);
        covered_last = LastDayOfMonth(m_hi);
      }
    }
    // Folded days outside those months.
    if (R >= a) {
      std::string cond = "day BETWEEN " + DateSql(a) + " AND " + DateSql(std::min(b, R));
      if (covered_first <= covered_last) {
        cond += " AND NOT (day BETWEEN " + DateSql(covered_first) + " AND " +
                DateSql(covered_last) + ")";
      }
      parts.push_back(ChDedupRowsSql(tables_.All("fp_days"), std::string(kChKeyColumns) + ", day",
                                     And(cond, where)));
    }
    // Raw rows after the rolled day: each batch once, at the first day it
    // was stored (the day before is read too, for a retry that crossed
    // midnight; its partition is kept until the next day is folded).
    const int32_t lo = std::max(a, R + 1);
    if (lo <= b) parts.push_back(RawSumsSql(lo, b, where));
    if (parts.empty()) return Status::Ok();
    std::string all;
    for (const std::string& part : parts) all += (all.empty() ? "" : " UNION ALL ") + part;
    // Through replicas that are not behind, where a shard has one.
    return StreamSums(ChOrderedRowsSql(all), visit, /*caught_up=*/true);
  }

  Status ForEachApi(const ApiFilter& filter,
                    const std::function<bool(ApiAggregate&&)>& visit) override {
    return ForEachApiInRange(filter, kUnboundedFirst, kUnboundedLast, visit);
  }

  Status ForEachApiInRange(const ApiFilter& filter, int32_t first_day, int32_t last_day,
                           const std::function<bool(ApiAggregate&&)>& visit) override {
    return ReadSums(first_day, last_day, KeyWhere(filter), [&](ApiAggregate&& a) {
      if (!filter.Matches(a.key)) return true;
      return visit(std::move(a));
    });
  }

  StatusOr<std::vector<ApiAggregate>> ListApis(const ApiFilter& filter, size_t limit) override {
    std::vector<ApiAggregate> out;
    Status s = ForEachApi(filter, [&](ApiAggregate&& a) {
      if (out.size() == limit) return false;
      out.push_back(std::move(a));
      return true;
    });
    if (!s.ok()) return s;
    return out;
  }

  StatusOr<ApiAggregate> QueryRange(const ApiKey& key, int32_t first_day,
                                    int32_t last_day) override {
    ApiFilter f;
    f.module = key.module;
    f.symbol_prefix = key.symbol;
    f.symbol_exact = true;
    f.module_version = key.module_version;
    f.metric = key.metric;
    f.os = key.platform.os;
    f.arch = key.platform.arch;
    f.cpu_vendor = key.platform.cpu_vendor;
    ApiAggregate found;
    found.key = key;
    Status s = ReadSums(first_day, last_day,
                        And(KeyWhere(f), "cpu_family = " + std::to_string(key.platform.cpu_family)),
                        [&](ApiAggregate&& a) {
                          if (a.key == key) found = std::move(a);
                          return true;
                        });
    if (!s.ok()) return s;
    return found;
  }

  // ---- state ----

  // Inserts of acknowledged rows that some replica has not fetched yet (a
  // lagging replica of a shard), and parts a replica back from a crash has
  // still to check (and fetch again when it lost them); servers that do
  // not answer are left out.
  uint64_t pending_batches() override {
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

  Status WaitApplied(std::chrono::milliseconds timeout) override {
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

  // Healthy while every shard has a server that answers (reads need them
  // all) and ingest is not refusing: checked at most once a second.
  Status Health() override {
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

  void AppendMetrics(std::string* out) override {
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

  Status Close() override {
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

 private:
  // A server's client options with a short deadline (health, lag).
  static HttpsClientOptions Short(HttpsClientOptions o) {
    o.timeout = std::chrono::milliseconds(2000);
    return o;
  }
  int64_t NowMs() const {
    return std::chrono::duration_cast<std::chrono::milliseconds>(Clock::now().time_since_epoch())
        .count();
  }
  int32_t Today() const {
    if (o_.today) return o_.today();
    return DayFromUnixSeconds(std::chrono::duration_cast<std::chrono::seconds>(
                                  std::chrono::system_clock::now().time_since_epoch())
                                  .count());
  }
  ClickHouseSettings ReadSettings() const {
    return {{"max_execution_time", std::to_string(o_.query_timeout.count() / 1000)}};
  }
  // insert_quorum for shard `s`: all its replicas (none for one replica).
  std::string Quorum(size_t s) const {
    return shards_[s].size() > 1 ? std::to_string(shards_[s].size()) : "0";
  }

  // ChOnAnyServer from a rotating server: any server, or the replicas of
  // shard `s`.
  Status OnAnyServer(const std::function<Status(ClickHouseClient&)>& fn,
                     const bool* final = nullptr) {
    return ChOnAnyServer(servers_, next_server_++, fn, final);
  }
  Status OnShard(size_t s, const std::function<Status(ClickHouseClient&)>& fn) {
    return ChOnAnyServer(shards_[s], next_server_++, fn);
  }
  StatusOr<std::string> QueryAny(const std::string& sql, const ClickHouseSettings& settings = {}) {
    return ChQueryAny(servers_, next_server_++, sql, settings);
  }
  StatusOr<std::string> QueryShard(size_t s, const std::string& sql) {
    return ChQueryAny(shards_[s], next_server_++, sql);
  }

  // Of the batch ids (hex) `ids`, those whose marker row every replica of
  // some shard holds, each asked directly. A replica that does not answer
  // confirms nothing on its shard.
  std::set<std::string> OnEveryReplica(const std::vector<std::string>& ids) {
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

  // Reads through replicas that have fetched what their shard holds: a
  // replica back from an outage is passed over until it catches up (the
  // copies of a batch whose quorum failed may be on the others only).
  ClickHouseSettings CaughtUpReplicas() const {
    ClickHouseSettings s = ReadSettings();
    s.emplace_back("max_replica_delay_for_distributed_queries", "1");
    return s;
  }

  Status StreamSums(const std::string& sql, const std::function<bool(ApiAggregate&&)>& visit,
                    bool caught_up = false) {
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

  // The raw rows of batches first stored on a day in [lo, b], each record
  // once. `where` may add key conditions.
  std::string RawSumsSql(int32_t lo, int32_t b, const std::string& where) const {
    return ChDedupRowsSql(
        tables_.All("fp_rows"), "batch_id, seq",
        And("module != '' AND day BETWEEN " + DateSql(lo - 1) + " AND " + DateSql(b), where), "day",
        "day >= " + DateSql(lo));
  }

  // The pointers, kept for a moment: a reader with an older pointer reads
  // raw rows for a day folded since, which are kept drop_grace longer.
  StatusOr<Pointers> ReadPointers(bool fresh = false) {
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

  // ---- the committers ----

  // Committer `index` tries shard (index + n) % shards first for its n-th
  // group: committers start apart and each visits every shard in turn.
  void CommitLoop(size_t index) {
    std::mt19937_64 rng(std::random_device{}() ^ index);
    size_t home_shard = index % shards_.size();
    for (;; home_shard = (home_shard + 1) % shards_.size()) {
      std::vector<std::shared_ptr<Pending>> group;
      {
        std::unique_lock<std::mutex> lock(mu_);
        cv_.wait(lock, [&] { return closed_ || !queue_.empty(); });
        if (closed_) return;
        size_t bytes = 0;
        while (!queue_.empty() && group.size() < static_cast<size_t>(o_.max_group_batches) &&
               bytes < (size_t{256} << 20)) {
          bytes += queue_.front()->rows.size();
          group.push_back(std::move(queue_.front()));
          queue_.pop_front();
        }
      }
      Commit(group, home_shard, rng);
      std::lock_guard<std::mutex> lock(mu_);
      for (const auto& p : group) inflight_.erase(p->id);
    }
  }

  // Of the batch ids (hex) `ids`, those stored: a marker row in the raw
  // rows on every replica of its shard, or the id of a folded batch (folds
  // write with quorum, once every replica caught up).
  StatusOr<std::set<std::string>> StoredIds(const std::vector<std::string>& ids) {
    const std::string in = IdList(ids);
    FP_ASSIGN_OR_RETURN(
        std::string found,
        QueryAny("SELECT 'r', lower(hex(batch_id)) FROM " + tables_.All("fp_rows") +
                     " WHERE module = '' AND batch_id IN (" + in +
                     ") UNION ALL SELECT 'f', lower(hex(batch_id)) FROM " +
                     tables_.All("fp_batch_ids") + " WHERE batch_id IN (" + in + ") FORMAT TSV",
                 CaughtUpReplicas()));
    std::set<std::string> known;        // stored: folded, or on every replica
    std::vector<std::string> raw_only;  // raw rows found, not folded
    std::set<std::string> raw;
    std::istringstream lines(found);
    for (std::string line; std::getline(lines, line);) {
      if (line.size() < 3) continue;
      (line[0] == 'f' ? known : raw).insert(line.substr(2));
    }
    for (const std::string& id : raw) {
      if (known.count(id) == 0) raw_only.push_back(id);
    }
    // Raw rows count as stored only where every replica of a shard holds
    // them: an INSERT whose quorum failed (a replica died under it) leaves
    // its part on the replica that wrote it, and its batch is stored again.
    if (!tables_.clustered()) {
      known.insert(raw_only.begin(), raw_only.end());
    } else if (!raw_only.empty()) {
      const std::set<std::string> everywhere = OnEveryReplica(raw_only);
      known.insert(everywhere.begin(), everywhere.end());
      unconfirmed_copies_ += raw_only.size() - everywhere.size();
    }
    return known;
  }

  void Commit(const std::vector<std::shared_ptr<Pending>>& group, size_t home_shard,
              std::mt19937_64& rng) {
    std::vector<std::string> ids;  // hex
    for (const auto& p : group) ids.push_back(HexEncode(p->id));
    StatusOr<std::set<std::string>> stored = StoredIds(ids);
    Status s = stored.status();
    const std::set<std::string> known = stored.ok() ? std::move(*stored) : std::set<std::string>();
    // Records of a day that may already be folded would never be read:
    // they go to today, which no fold touches for horizon_days more days
    // (the router's day is today; only a caller with an older day, or a
    // clock set back, gets here).
    const int32_t today = Today();
    for (const auto& p : group) {
      if (p->day <= today - o_.horizon_days - 1) {
        p->day = today;
        SetRowsDay(&p->rows, p->day_offsets, p->day);
      }
    }
    std::string rows;
    size_t fresh = 0;
    if (s.ok()) {
      for (size_t i = 0; i < group.size(); ++i) {
        if (known.count(ids[i]) == 0) {
          rows += group[i]->rows;
          ++fresh;
        }
      }
      if (fresh > 0) s = InsertRows(rows, home_shard, rng);
    }
    if (!s.ok()) ++group_failures_;
    for (size_t i = 0; i < group.size(); ++i) {
      const auto& p = group[i];
      if (!s.ok()) {
        p->done.set_value(s);
      } else if (known.count(ids[i]) > 0) {
        ++known_batches_;
        p->done.set_value(ApplyResult{true, 0});
      } else {
        p->done.set_value(ApplyResult{false, p->records});
      }
    }
    if (s.ok() && fresh > 0) {
      ++inserts_;
      inserted_batches_ += fresh;
    }
  }

  // One INSERT of `rows` into a shard that reaches its quorum: the home
  // shard first, then the others; shards that failed lately last. Quorum
  // inserts into one table take turns (ClickHouse 18.16): one that finds
  // another in progress (286) is no failure of the shard, and is tried
  // again after the other shards, with a growing pause, until
  // insert_quorum_timeout. Any other failure (a replica down, ZooKeeper
  // away, the quorum timed out) passes the shard over for shard_backoff.
  Status InsertRows(const std::string& rows, size_t home_shard, std::mt19937_64& rng) {
    const auto deadline = Clock::now() + o_.insert_quorum_timeout;
    auto pause = std::chrono::milliseconds(10);
    Status last = Unavailable("no shard tried");
    for (;;) {
      std::vector<size_t> order, later;
      for (size_t k = 0; k < shards_.size(); ++k) {
        const size_t s = (home_shard + k) % shards_.size();
        (shard_skip_until_[s].load() > NowMs() ? later : order).push_back(s);
      }
      order.insert(order.end(), later.begin(), later.end());
      bool busy = false;
      for (size_t s : order) {
        int code = 0;
        Status st = InsertIntoShard(s, rows, &code);
        if (st.ok()) return st;
        last = st;
        if (code == kChQuorumBusy) {
          ++quorum_busy_;
          busy = true;
          continue;
        }
        ++shard_failures_;
        shard_skip_until_[s] = NowMs() + o_.shard_backoff.count();
      }
      if (!busy || Clock::now() >= deadline) break;
      std::this_thread::sleep_for(pause + std::chrono::milliseconds(rng() % (pause.count() + 1)));
      pause = std::min(pause * 2, std::chrono::milliseconds(200));
    }
    return Unavailable("no ClickHouse shard took the batch: " + last.message());
  }

  // One INSERT into shard `s` (the next replica on a network error);
  // `code` gets ClickHouse's error code.
  Status InsertIntoShard(size_t s, const std::string& rows, int* code) {
    const ClickHouseSettings settings = {
        {"insert_quorum", Quorum(s)},
        {"insert_quorum_timeout", std::to_string(o_.insert_quorum_timeout.count())},
        // One block, so a batch's rows and its marker are one part.
        {"max_insert_block_size", "100000000"},
        // Exactness does not rest on ClickHouse's block deduplication (reads
        // count each record once), which costs a hash and a ZooKeeper node
        // per insert.
        {"insert_deduplicate", "0"},
    };
    return OnShard(s, [&](ClickHouseClient& ch) {
      Status r = ch.InsertRowBinary(tables_.Local("fp_rows"), rows, settings);
      *code = ch.last_error_code();
      return r;
    });
  }

  // ---- the roll-up ----

  void RollupLoop() {
    for (;;) {
      {
        std::unique_lock<std::mutex> lock(rollup_mu_);
        if (rollup_cv_.wait_for(lock,
                                first_pass_ ? std::chrono::milliseconds(0) : o_.rollup_interval,
                                [&] { return closed_.load(); })) {
          return;
        }
        first_pass_ = false;
      }
      if (o_.may_roll_up && !o_.may_roll_up()) continue;
      Status s = RollUpOnce();
      if (!s.ok() && !closed_) {
        std::fprintf(stderr, "fieldprof-aggregator: roll-up: %s\n", s.ToString().c_str());
      }
    }
  }

  // Whether every replica of every table is up and has fetched every
  // insert: a fold reads through whichever replica Distributed picks, so
  // only then does it see every stored batch.
  bool AllReplicasCaughtUp() {
    if (!tables_.clustered()) return true;
    for (const HttpsClientOptions& server : servers_) {
      ClickHouseClient ch(Short(server));
      StatusOr<std::string> n = ch.Query(
          "SELECT count() FROM system.replicas WHERE database = " + SqlString(tables_.database()) +
          " AND (is_readonly OR is_session_expired OR active_replicas < total_replicas OR "
          "inserts_in_queue > 0 OR parts_to_check > 0 OR log_pointer < log_max_index) FORMAT TSV");
      if (!n.ok() || std::strtoull(n->c_str(), nullptr, 10) != 0) return false;
    }
    return true;
  }

  Status Record(const std::string& name, int64_t value) {
    // Global table: every server a replica.
    return OnAnyServer([&](ClickHouseClient& ch) {
      return ch.Execute("INSERT INTO " + tables_.Local("fp_state") + " VALUES (" + SqlString(name) +
                            ", " + std::to_string(value) + ", now())",
                        {{"insert_quorum", ChGlobalQuorum(servers_.size())}});
    });
  }

  // The first day >= `from` with raw rows, or -1.
  StatusOr<int32_t> NextRawDay(int32_t from) {
    FP_ASSIGN_OR_RETURN(
        std::string first,
        QueryAny("SELECT toUInt16(min(day)), count() FROM " + tables_.All("fp_rows") +
                 " WHERE module = '' AND day >= " + DateSql(from) + " FORMAT TSV"));
    const size_t tab = first.find('\t');
    if (tab == std::string::npos || std::strtoull(first.c_str() + tab + 1, nullptr, 10) == 0) {
      return -1;
    }
    return static_cast<int32_t>(std::strtol(first.c_str(), nullptr, 10));
  }

  Status RollUpOnce() {
    FP_ASSIGN_OR_RETURN(Pointers p, ReadPointers(/*fresh=*/true));
    const int32_t today = Today();
    const int32_t last_foldable = today - o_.horizon_days - 1;
    int32_t R = p.rolled_day;
    int32_t RM = p.rolled_month;
    if (R < 0) {
      // Nothing folded yet: start before the first day with raw rows.
      FP_ASSIGN_OR_RETURN(int32_t first, NextRawDay(0));
      if (first < 0) {
        next_fold_day_ = today;
        return Status::Ok();
      }
      R = first - 1;
    }
    next_fold_day_ = R + 1;
    if (R + 1 <= last_foldable && !AllReplicasCaughtUp()) {
      ++rollup_deferred_;
      return Status::Ok();  // the next pass tries again
    }
    while (R + 1 <= last_foldable && !closed_) {
      // Days without raw rows fold to nothing: skip to the next with some.
      FP_ASSIGN_OR_RETURN(int32_t next, NextRawDay(R + 1));
      if (next < 0 || next > last_foldable) {
        if (RM < 0) break;  // nothing was ever folded
        R = last_foldable;
        FP_RETURN_IF_ERROR(Record("rolled_day", R));
        next_fold_day_ = R + 1;
        break;
      }
      if (RM < 0) {
        RM = MonthOfDay(next) - 1;
        FP_RETURN_IF_ERROR(Record("rolled_month", RM));
      }
      FP_RETURN_IF_ERROR(FoldDay(next).WithContext("folding " + FormatDay(next)));
      FP_RETURN_IF_ERROR(Record("rolled_day", next));
      R = next;
      next_fold_day_ = R + 1;
      ++rollup_days_;
    }
    while (RM >= 0 && LastDayOfMonth(RM + 1) <= R && !closed_) {
      FP_RETURN_IF_ERROR(FoldMonth(RM + 1).WithContext("folding a month"));
      FP_RETURN_IF_ERROR(Record("rolled_month", RM + 1));
      ++RM;
      ++rollup_months_;
    }
    return DropFolded(R, today);
  }

  // Day d's batches (those first stored on d) into day nodes, shard by
  // shard (each the keys that hash to it); then their ids. The aggregator
  // adds the rows up as they stream in key order and inserts the sums in
  // chunks. Repeating it stores the same rows again, which the day nodes'
  // reads count once.
  Status FoldDay(int32_t d) {
    const std::string n = std::to_string(shards_.size());
    const ClickHouseSettings settings = {
        {"insert_quorum", "0"},  // set per shard below
        {"insert_quorum_timeout", std::to_string(o_.query_timeout.count())},
        {"max_execution_time", std::to_string(o_.query_timeout.count() / 1000)}};
    for (size_t s = 0; s < shards_.size(); ++s) {
      const std::string rows = ChOrderedRowsSql(
          ChDedupRowsSql(tables_.All("fp_rows"), "batch_id, seq",
                         "module != '' AND day BETWEEN " + DateSql(d - 1) + " AND " + DateSql(d) +
                             " AND cityHash64(module, symbol) % " + n + " = " + std::to_string(s),
                         "day", "day = " + DateSql(d)));
      FP_RETURN_IF_ERROR(
          FoldInto(s, rows, "fp_days", [this, d](std::string* out, const ApiAggregate& a) {
            ++rollup_series_;
            AppendDayRow(out, d, a.key, EncodeValue(a));
          }));
      ClickHouseSettings q = settings;
      q[0].second = Quorum(s);
      FP_RETURN_IF_ERROR(OnShard(s, [&](ClickHouseClient& ch) {
        return ch.Execute("INSERT INTO " + tables_.Local("fp_batch_ids") + " SELECT batch_id, " +
                              DateSql(d) + " FROM " + tables_.All("fp_rows") +
                              " WHERE module = '' AND day BETWEEN " + DateSql(d - 1) + " AND " +
                              DateSql(d) + " GROUP BY batch_id HAVING min(day) = " + DateSql(d) +
                              " AND cityHash64(batch_id) % " + n + " = " + std::to_string(s),
                          q);
      }));
    }
    return Status::Ok();
  }

  // Month m's day nodes into month nodes.
  Status FoldMonth(int32_t m) {
    const std::string n = std::to_string(shards_.size());
    for (size_t s = 0; s < shards_.size(); ++s) {
      const std::string rows = ChOrderedRowsSql(ChDedupRowsSql(
          tables_.All("fp_days"), std::string(kChKeyColumns) + ", day",
          "day BETWEEN " + DateSql(FirstDayOfMonth(m)) + " AND " + DateSql(LastDayOfMonth(m)) +
              " AND cityHash64(module, symbol) % " + n + " = " + std::to_string(s)));
      FP_RETURN_IF_ERROR(
          FoldInto(s, rows, "fp_months", [m](std::string* out, const ApiAggregate& a) {
            AppendMonthRow(out, m, a.key, EncodeValue(a));
          }));
    }
    return Status::Ok();
  }

  // Streams the key-ordered rows of `sql`, adds each key's up, and inserts
  // a row per key (made by `row`) into `table` on shard `s`, with its
  // quorum, in chunks.
  Status FoldInto(size_t s, const std::string& sql, const std::string& table,
                  const std::function<void(std::string*, const ApiAggregate&)>& row) {
    constexpr size_t kChunkRows = 50000;
    std::string chunk;
    size_t in_chunk = 0;
    Status insert_error = Status::Ok();
    auto flush = [&]() -> Status {
      if (in_chunk == 0) return Status::Ok();
      const ClickHouseSettings settings = {
          {"insert_quorum", Quorum(s)},
          {"insert_quorum_timeout", std::to_string(o_.query_timeout.count())},
          {"insert_deduplicate", "0"}};
      Status st = OnShard(s, [&](ClickHouseClient& ch) {
        return ch.InsertRowBinary(tables_.Local(table), chunk, settings);
      });
      chunk.clear();
      in_chunk = 0;
      return st;
    };
    Status read = StreamSums(
        sql,
        [&](ApiAggregate&& a) {
          row(&chunk, a);
          if (++in_chunk == kChunkRows) {
            insert_error = flush();
            if (!insert_error.ok()) return false;
          }
          return true;
        },
        /*caught_up=*/true);
    FP_RETURN_IF_ERROR(insert_error);
    FP_RETURN_IF_ERROR(read);
    return flush();
  }

  // Drops raw partitions of days d with d + 1 folded at least drop_grace
  // ago (a query that read the older pointer has finished by then), and the
  // batch id partitions past their retention.
  Status DropFolded(int32_t R, int32_t today) {
    for (size_t s = 0; s < shards_.size(); ++s) {
      FP_ASSIGN_OR_RETURN(
          std::string days,
          QueryShard(
              s,
              "SELECT DISTINCT toUInt16(min_date) FROM system.parts WHERE active AND database = " +
                  SqlString(tables_.database()) + " AND table = 'fp_rows' FORMAT TSV"));
      std::istringstream lines(days);
      for (std::string line; std::getline(lines, line);) {
        const int32_t d = static_cast<int32_t>(std::strtol(line.c_str(), nullptr, 10));
        if (line.empty() || d + 1 > R) continue;
        FP_ASSIGN_OR_RETURN(
            std::string old_enough,
            QueryAny("SELECT count() > 0 AND min(at) <= now() - " +
                     std::to_string(o_.drop_grace.count()) + " FROM " + tables_.Local("fp_state") +
                     " WHERE name = 'rolled_day' AND value >= " + std::to_string(d + 1) +
                     " FORMAT TSV"));
        if (old_enough.rfind("1", 0) != 0) continue;
        FP_RETURN_IF_ERROR(OnShard(s, [&](ClickHouseClient& ch) {
          return ch.Execute("ALTER TABLE " + tables_.Local("fp_rows") + " DROP PARTITION '" +
                            FormatDay(d) + "'");
        }));
        ++partitions_dropped_;
      }
      // Batch ids: whole months past the retention.
      const int32_t keep_from = today - o_.batch_id_retention_days;
      const int32_t last_month = MonthOfDay(keep_from) - 1;
      FP_ASSIGN_OR_RETURN(
          std::string months,
          QueryShard(s, "SELECT DISTINCT partition FROM system.parts WHERE active AND database = " +
                            SqlString(tables_.database()) +
                            " AND table = 'fp_batch_ids' FORMAT TSV"));
      std::istringstream mlines(months);
      for (std::string line; std::getline(mlines, line);) {
        const long yyyymm = std::strtol(line.c_str(), nullptr, 10);
        if (yyyymm <= 0) continue;
        const int32_t m = static_cast<int32_t>((yyyymm / 100) * 12 + (yyyymm % 100) - 1);
        if (m > last_month) continue;
        FP_RETURN_IF_ERROR(OnShard(s, [&](ClickHouseClient& ch) {
          return ch.Execute("ALTER TABLE " + tables_.Local("fp_batch_ids") + " DROP PARTITION " +
                            std::to_string(yyyymm));
        }));
      }
    }
    return Status::Ok();
  }

  const ClickHouseStoreOptions o_;
  const ChTables tables_;
  const std::vector<std::vector<HttpsClientOptions>> shards_;
  std::vector<HttpsClientOptions> servers_;  // every shard's replicas
  std::atomic<size_t> next_server_{0};
  std::vector<std::atomic<int64_t>> shard_skip_until_;  // steady ms: passed over until then

  std::mutex mu_;  // guards queue_ and inflight_
  std::condition_variable cv_;
  std::deque<std::shared_ptr<Pending>> queue_;
  std::map<std::string, std::shared_ptr<Pending>> inflight_;  // by batch id, queued or inserting
  std::atomic<bool> closed_{false};
  std::vector<std::thread> committers_;

  std::mutex rollup_mu_;
  std::condition_variable rollup_cv_;
  bool first_pass_ = true;  // guarded by rollup_mu_
  std::thread rollup_;

  std::mutex pointers_mu_;
  Pointers pointers_;  // guarded by pointers_mu_, as read at pointers_at_
  Clock::time_point pointers_at_{};
  bool pointers_valid_ = false;

  std::mutex health_mu_;
  Status health_;  // guarded by health_mu_
  Clock::time_point health_at_{};

  std::atomic<uint64_t> inserts_{0}, inserted_batches_{0}, known_batches_{0}, quorum_busy_{0},
      shard_failures_{0}, group_failures_{0}, rollup_series_{0}, rollup_days_{0}, rollup_months_{0},
      rollup_deferred_{0}, partitions_dropped_{0}, unconfirmed_copies_{0};
  std::atomic<int32_t> next_fold_day_{0};
};

bool IsIdentifier(const std::string& s) {
  if (s.empty() || std::isdigit(static_cast<unsigned char>(s[0]))) return false;
  return std::all_of(s.begin(), s.end(), [](char c) {
    return std::isalnum(static_cast<unsigned char>(c)) || c == '_';
  });
}

}  // namespace

StatusOr<std::unique_ptr<Store>> OpenClickHouseStore(const ClickHouseStoreOptions& options) {
  FP_ASSIGN_OR_RETURN(std::vector<std::vector<HttpsClientOptions>> shards,
                      ParseClickHouseShards(options.url, options.query_timeout));
  size_t servers = 0;
  for (const auto& s : shards) servers += s.size();
  if (servers > 1 && options.cluster.empty()) {
    return InvalidArgument("clickhouse_url lists " + std::to_string(servers) +
                           " servers: name their cluster with clickhouse_cluster");
  }
  if (!IsIdentifier(options.database)) {
    return InvalidArgument("clickhouse_database '" + options.database +
                           "' is not a plain name (letters, digits, _)");
  }
  if (!options.cluster.empty() && !IsIdentifier(options.cluster)) {
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
  auto store = std::make_unique<ClickHouseStore>(options, std::move(shards));
  FP_RETURN_IF_ERROR(store->Init());
  return std::unique_ptr<Store>(std::move(store));
}

}  // namespace fieldprof::aggregator
