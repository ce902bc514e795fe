// The ClickHouse store (store_clickhouse_impl.h): a batch accepted, and the
// committers that insert the pending batches on every shard.
#include "aggregator/clickhouse/store_clickhouse_impl.h"

namespace fieldprof::aggregator::ch {

StatusOr<ApplyResult> ClickHouseStore::ApplyBatch(const BatchView& batch, std::string_view,
                                                  int32_t day) {
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

StatusOr<bool> ClickHouseStore::BatchAccepted(std::string_view batch_id) {
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

void ClickHouseStore::CommitLoop(size_t index) {
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

StatusOr<std::set<std::string>> ClickHouseStore::StoredIds(const std::vector<std::string>& ids) {
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

void ClickHouseStore::Commit(const std::vector<std::shared_ptr<Pending>>& group, size_t home_shard,
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

Status ClickHouseStore::InsertRows(const std::string& rows, size_t home_shard,
                                   std::mt19937_64& rng) {
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

Status ClickHouseStore::InsertIntoShard(size_t s, const std::string& rows, int* code) {
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

}  // namespace fieldprof::aggregator::ch
