// The ClickHouse store's class, whose parts live in four files:
// store_clickhouse.cc (opening, the servers and quorum, health and
// metrics), store_clickhouse_apply.cc (a batch accepted, and the
// committers that insert the pending batches on every shard),
// store_clickhouse_read.cc (the queries) and store_clickhouse_rollup.cc
// (days and months folded). Only those files include it.
#ifndef FIELDPROF_AGGREGATOR_CLICKHOUSE_STORE_CLICKHOUSE_IMPL_H_
#define FIELDPROF_AGGREGATOR_CLICKHOUSE_STORE_CLICKHOUSE_IMPL_H_

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
#include "aggregator/clickhouse/store_clickhouse.h"
#include "aggregator/store/calendar_tree.h"
#include "common/wire/wire.h"

namespace fieldprof::aggregator::ch {

using Clock = std::chrono::steady_clock;

// The highest day a ClickHouse Date holds comfortably (2104).
inline constexpr int32_t kLastChDay = 49000;

inline std::string DateSql(int32_t day) {
  return "toDate('" + FormatDay(std::clamp(day, 0, kLastChDay)) + "')";
}

// The SQL conditions of a filter on the key columns (all levels have them).
inline std::string KeyWhere(const ApiFilter& f) {
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

inline std::string And(const std::string& a, const std::string& b) {
  if (a.empty()) return b;
  if (b.empty()) return a;
  return a + " AND " + b;
}

// Batch ids given in hex, as SQL FixedString(16) values for IN (...).
inline std::string IdList(const std::vector<std::string>& hex_ids) {
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

  Status Init();

  // ---- ingest ----

  StatusOr<ApplyResult> ApplyBatch(const BatchView& batch, std::string_view, int32_t day) override;

  StatusOr<bool> BatchAccepted(std::string_view batch_id) override;

  // ---- reads ----

  // Every series matching `where` summed over days [first, last], in key
  // order, one at a time.
  Status ReadSums(int32_t first, int32_t last, const std::string& where,
                  const std::function<bool(ApiAggregate&&)>& visit);

  Status ForEachApi(const ApiFilter& filter,
                    const std::function<bool(ApiAggregate&&)>& visit) override;

  Status ForEachApiInRange(const ApiFilter& filter, int32_t first_day, int32_t last_day,
                           const std::function<bool(ApiAggregate&&)>& visit) override;

  StatusOr<std::vector<ApiAggregate>> ListApis(const ApiFilter& filter, size_t limit) override;

  StatusOr<ApiAggregate> QueryRange(const ApiKey& key, int32_t first_day,
                                    int32_t last_day) override;

  // ---- state ----

  // Inserts of acknowledged rows that some replica has not fetched yet (a
  // lagging replica of a shard), and parts a replica back from a crash has
  // still to check (and fetch again when it lost them); servers that do
  // not answer are left out.
  uint64_t pending_batches() override;

  Status WaitApplied(std::chrono::milliseconds timeout) override;

  // Healthy while every shard has a server that answers (reads need them
  // all) and ingest is not refusing: checked at most once a second.
  Status Health() override;

  void AppendMetrics(std::string* out) override;

  Status Close() override;

 private:
  // A server's client options with a short deadline (health, lag).
  static HttpsClientOptions Short(HttpsClientOptions o);
  int64_t NowMs() const;
  int32_t Today() const;
  ClickHouseSettings ReadSettings() const;
  // insert_quorum for shard `s`: all its replicas (none for one replica).
  std::string Quorum(size_t s) const;

  // ChOnAnyServer from a rotating server: any server, or the replicas of
  // shard `s`.
  Status OnAnyServer(const std::function<Status(ClickHouseClient&)>& fn,
                     const bool* final = nullptr);
  Status OnShard(size_t s, const std::function<Status(ClickHouseClient&)>& fn);
  StatusOr<std::string> QueryAny(const std::string& sql, const ClickHouseSettings& settings = {});
  StatusOr<std::string> QueryShard(size_t s, const std::string& sql);

  // Of the batch ids (hex) `ids`, those whose marker row every replica of
  // some shard holds, each asked directly. A replica that does not answer
  // confirms nothing on its shard.
  std::set<std::string> OnEveryReplica(const std::vector<std::string>& ids);

  // Reads through replicas that have fetched what their shard holds: a
  // replica back from an outage is passed over until it catches up (the
  // copies of a batch whose quorum failed may be on the others only).
  ClickHouseSettings CaughtUpReplicas() const;

  Status StreamSums(const std::string& sql, const std::function<bool(ApiAggregate&&)>& visit,
                    bool caught_up = false);

  // The raw rows of batches first stored on a day in [lo, b], each record
  // once. `where` may add key conditions.
  std::string RawSumsSql(int32_t lo, int32_t b, const std::string& where) const;

  // The pointers, kept for a moment: a reader with an older pointer reads
  // raw rows for a day folded since, which are kept drop_grace longer.
  StatusOr<Pointers> ReadPointers(bool fresh = false);

  // ---- the committers ----

  // Committer `index` tries shard (index + n) % shards first for its n-th
  // group: committers start apart and each visits every shard in turn.
  void CommitLoop(size_t index);

  // Of the batch ids (hex) `ids`, those stored: a marker row in the raw
  // rows on every replica of its shard, or the id of a folded batch (folds
  // write with quorum, once every replica caught up).
  StatusOr<std::set<std::string>> StoredIds(const std::vector<std::string>& ids);

  void Commit(const std::vector<std::shared_ptr<Pending>>& group, size_t home_shard,
              std::mt19937_64& rng);

  // One INSERT of `rows` into a shard that reaches its quorum: the home
  // shard first, then the others; shards that failed lately last. Quorum
  // inserts into one table take turns (ClickHouse 18.16): one that finds
  // another in progress (286) is no failure of the shard, and is tried
  // again after the other shards, with a growing pause, until
  // insert_quorum_timeout. Any other failure (a replica down, ZooKeeper
  // away, the quorum timed out) passes the shard over for shard_backoff.
  Status InsertRows(const std::string& rows, size_t home_shard, std::mt19937_64& rng);

  // One INSERT into shard `s` (the next replica on a network error);
  // `code` gets ClickHouse's error code.
  Status InsertIntoShard(size_t s, const std::string& rows, int* code);

  // ---- the roll-up ----

  void RollupLoop();

  // Whether every replica of every table is up and has fetched every
  // insert: a fold reads through whichever replica Distributed picks, so
  // only then does it see every stored batch.
  bool AllReplicasCaughtUp();

  Status Record(const std::string& name, int64_t value);

  // The first day >= `from` with raw rows, or -1.
  StatusOr<int32_t> NextRawDay(int32_t from);

  Status RollUpOnce();

  // Day d's batches (those first stored on d) into day nodes, shard by
  // shard (each the keys that hash to it); then their ids. The aggregator
  // adds the rows up as they stream in key order and inserts the sums in
  // chunks. Repeating it stores the same rows again, which the day nodes'
  // reads count once.
  Status FoldDay(int32_t d);

  // Month m's day nodes into month nodes.
  Status FoldMonth(int32_t m);

  // Streams the key-ordered rows of `sql`, adds each key's up, and inserts
  // a row per key (made by `row`) into `table` on shard `s`, with its
  // quorum, in chunks.
  Status FoldInto(size_t s, const std::string& sql, const std::string& table,
                  const std::function<void(std::string*, const ApiAggregate&)>& row);

  // Drops raw partitions of days d with d + 1 folded at least drop_grace
  // ago (a query that read the older pointer has finished by then), and the
  // batch id partitions past their retention.
  Status DropFolded(int32_t R, int32_t today);

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

}  // namespace fieldprof::aggregator::ch

#endif  // FIELDPROF_AGGREGATOR_CLICKHOUSE_STORE_CLICKHOUSE_IMPL_H_
