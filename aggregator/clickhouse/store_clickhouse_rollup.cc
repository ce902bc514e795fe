// The ClickHouse store (store_clickhouse_impl.h): raw rows folded into
// day nodes, and finished months into month nodes.
#include "aggregator/clickhouse/store_clickhouse_impl.h"

namespace fieldprof::aggregator::ch {

void ClickHouseStore::RollupLoop() {
  for (;;) {
    {
      std::unique_lock<std::mutex> lock(rollup_mu_);
      if (rollup_cv_.wait_for(lock, first_pass_ ? std::chrono::milliseconds(0) : o_.rollup_interval,
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

bool ClickHouseStore::AllReplicasCaughtUp() {
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

Status ClickHouseStore::Record(const std::string& name, int64_t value) {
  // Global table: every server a replica.
  return OnAnyServer([&](ClickHouseClient& ch) {
    return ch.Execute("INSERT INTO " + tables_.Local("fp_state") + " VALUES (" + SqlString(name) +
                          ", " + std::to_string(value) + ", now())",
                      {{"insert_quorum", ChGlobalQuorum(servers_.size())}});
  });
}

StatusOr<int32_t> ClickHouseStore::NextRawDay(int32_t from) {
  FP_ASSIGN_OR_RETURN(std::string first,
                      QueryAny("SELECT toUInt16(min(day)), count() FROM " + tables_.All("fp_rows") +
                               " WHERE module = '' AND day >= " + DateSql(from) + " FORMAT TSV"));
  const size_t tab = first.find('\t');
  if (tab == std::string::npos || std::strtoull(first.c_str() + tab + 1, nullptr, 10) == 0) {
    return -1;
  }
  return static_cast<int32_t>(std::strtol(first.c_str(), nullptr, 10));
}

Status ClickHouseStore::RollUpOnce() {
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

Status ClickHouseStore::FoldDay(int32_t d) {
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

Status ClickHouseStore::FoldMonth(int32_t m) {
  const std::string n = std::to_string(shards_.size());
  for (size_t s = 0; s < shards_.size(); ++s) {
    const std::string rows = ChOrderedRowsSql(ChDedupRowsSql(
        tables_.All("fp_days"), std::string(kChKeyColumns) + ", day",
        "day BETWEEN " + DateSql(FirstDayOfMonth(m)) + " AND " + DateSql(LastDayOfMonth(m)) +
            " AND cityHash64(module, symbol) % " + n + " = " + std::to_string(s)));
    FP_RETURN_IF_ERROR(FoldInto(s, rows, "fp_months", [m](std::string* out, const ApiAggregate& a) {
      AppendMonthRow(out, m, a.key, EncodeValue(a));
    }));
  }
  return Status::Ok();
}

Status ClickHouseStore::FoldInto(
    size_t s, const std::string& sql, const std::string& table,
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

Status ClickHouseStore::DropFolded(int32_t R, int32_t today) {
  for (size_t s = 0; s < shards_.size(); ++s) {
    FP_ASSIGN_OR_RETURN(
        std::string days,
        QueryShard(
            s, "SELECT DISTINCT toUInt16(min_date) FROM system.parts WHERE active AND database = " +
                   SqlString(tables_.database()) + " AND table = 'fp_rows' FORMAT TSV"));
    std::istringstream lines(days);
    for (std::string line; std::getline(lines, line);) {
      const int32_t d = static_cast<int32_t>(std::strtol(line.c_str(), nullptr, 10));
      if (line.empty() || d + 1 > R) continue;
      // A StatusOr of its own: through FP_ASSIGN_OR_RETURN, g++ 12 warned
      // that the string may be read uninitialized (it may not).
      const StatusOr<std::string> old_enough = QueryAny(
          "SELECT count() > 0 AND min(at) <= now() - " + std::to_string(o_.drop_grace.count()) +
          " FROM " + tables_.Local("fp_state") +
          " WHERE name = 'rolled_day' AND value >= " + std::to_string(d + 1) + " FORMAT TSV");
      if (!old_enough.ok()) return old_enough.status();
      if (old_enough->rfind("1", 0) != 0) continue;
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

}  // namespace fieldprof::aggregator::ch
