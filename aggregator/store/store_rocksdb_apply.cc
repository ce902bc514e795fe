// The RocksDB store (store_rocksdb_impl.h): a batch accepted (its id and
// body in one synced write), added to the open fold by series, and the
// applier that writes each fold into the day nodes and rolls finished days
// into their months and all time.
#include "aggregator/store/store_rocksdb_impl.h"

namespace fieldprof::aggregator {

StatusOr<ApplyResult> RocksDbStore::ApplyBatch(const BatchView& batch, std::string_view body,
                                               int32_t day) {
  std::function<void()> fold;
  StatusOr<ApplyResult> r = ApplyBatchFoldLater(batch, body, day, &fold);
  if (fold) fold();
  return r;
}

StatusOr<ApplyResult> RocksDbStore::ApplyBatchFoldLater(const BatchView& batch,
                                                        std::string_view body, int32_t day,
                                                        std::function<void()>* fold) {
  *fold = nullptr;
  // Held until the batch is in the fold: a reopening (TryReopen) folds the
  // pending log afresh and must not see a batch that is about to be added.
  auto open_lock = std::make_shared<std::shared_lock<std::shared_mutex>>(close_mutex_);
  if (Status h = Health(); !h.ok()) {
    if (h.code() == StatusCode::kNoSpace) refused_no_space_.fetch_add(1);
    return h;
  }
  if (!db_) return Unavailable("store is closed");
  if (pending_count_.load() >= static_cast<uint64_t>(options_.max_pending_batches)) {
    return ResourceExhausted(std::to_string(pending_count_.load()) +
                             " accepted batches are waiting to be applied");
  }
  const std::string id(batch.batch_id());
  // Check-then-write must be atomic per id: two concurrent uploads of one id
  // serialize on the id's stripe, and the second sees the first's write.
  std::mutex& stripe = stripes_[std::hash<std::string>()(id) % stripes_.size()];
  std::lock_guard lock(stripe);
  std::string seen;
  rocksdb::Status gs = db_->Get(rocksdb::ReadOptions(), ids_cf_, id, &seen);
  if (gs.ok()) return ApplyResult{.duplicate = true, .records = 0};
  if (!gs.IsNotFound()) return FromRocks(gs, "looking up batch id");

  // One synced write makes the batch durable: its id (dedupe) and its body
  // in the pending log. The applier folds pending batches into the sums
  // and deletes them from the log in one atomic write, so every accepted
  // batch is counted exactly once whatever crashes in between.
  const int64_t now = std::chrono::duration_cast<std::chrono::seconds>(
                          std::chrono::system_clock::now().time_since_epoch())
                          .count();
  char tbuf[8];
  std::memcpy(tbuf, &now, 8);
  // The pending value is day [+ machine] + body, given in two parts so
  // the 128 KiB body is not copied once more just to prepend a few
  // bytes. The body is kept without the machine key and the token (no
  // store keeps them); the machine is kept as its secret, all its series'
  // entries need, until the batch is applied and this value deleted.
  std::string prefix;
  PutOrdered32(&prefix, day);
  const std::optional<MachineSecret> machine = MachineOf(batch);
  if (machine) {
    prefix.append(kPendingMachineMark, 2);
    prefix.append(reinterpret_cast<const char*>(machine->data()), machine->size());
  }
  std::string scratch;
  const std::string_view kept = StorableBatchBody(body, &scratch);
  // A body that decoded always parses; never store one that would not
  // recover (or one still holding its key).
  if (kept.empty()) return Internal("a decoded batch does not parse again");
  const rocksdb::Slice value_parts[2] = {prefix, rocksdb::Slice(kept.data(), kept.size())};
  const rocksdb::Slice key_part(id);
  rocksdb::WriteBatch wb;
  rocksdb::Status s = wb.Put(ids_cf_, id, rocksdb::Slice(tbuf, 8));
  if (s.ok()) {
    s = wb.Put(pending_cf_, rocksdb::SliceParts(&key_part, 1), rocksdb::SliceParts(value_parts, 2));
  }
  if (!s.ok()) return FromRocks(s, "building write batch");
  rocksdb::WriteOptions wo;
  wo.sync = options_.sync;
  s = db_->Write(wo, &wb);
  if (!s.ok()) {
    MarkBroken(s, "writing a batch");
    return FromRocks(s, "writing the batch");
  }
  // Pending from here (WaitApplied waits for its fold too).
  pending_count_.fetch_add(1);
  *fold = [this, id, day, &batch, machine, open_lock = std::move(open_lock)] {
    AddToFold(id, day, batch, machine);
  };
  return ApplyResult{.duplicate = false, .records = static_cast<size_t>(batch.records_size())};
}

std::optional<MachineSecret> RocksDbStore::MachineOf(const BatchView& batch) {
  if (batch.machine_key().empty()) return std::nullopt;
  return MachineSecretOf(batch.machine_key());
}

void RocksDbStore::AddToFold(const std::string& id, int32_t day, const BatchView& batch,
                             const std::optional<MachineSecret>& machine) {
  // The records' series keys (day, then the wire API key) and their
  // hashes first, outside the lock, each key written once, in place.
  const std::vector<RecordView>& records = batch.records();
  const size_t n = records.size();
  std::string day_prefix;
  PutOrdered32(&day_prefix, day);
  std::string keys;
  keys.reserve(n * 80);            // about a key's size; grows if not
  std::vector<size_t> key_end(n);  // record i's key is keys[key_end[i - 1], key_end[i])
  std::vector<uint64_t> hashes(n);
  for (size_t i = 0; i < n; ++i) {
    const size_t begin = keys.size();
    keys.append(day_prefix);
    AppendWireApiKey(records[i].key(), batch.client_platform(), &keys);
    key_end[i] = keys.size();
    hashes[i] = FoldTable::Hash(std::string_view(keys.data() + begin, key_end[i] - begin));
  }
  // Then straight into the open fold: one lookup and one in-place add per
  // record (and a SipHash or two of its key for its machine's entries),
  // the memory each lookup reads asked for a few records ahead, in the
  // order it is read (FoldTable::PrefetchSlot). The lock is held for the
  // batch (~0.2 ms), far less than the synced write before it.
  constexpr size_t kAhead = 4;  // records between prefetch steps
  bool wake_applier;
  {
    std::lock_guard lock(fold_mutex_);
    for (size_t i = 0; i < n; ++i) {
      if (i + 3 * kAhead < n) fold_.sums.PrefetchSlot(hashes[i + 3 * kAhead]);
      if (i + 2 * kAhead < n) fold_.sums.PrefetchEntry(hashes[i + 2 * kAhead]);
      if (i + kAhead < n) fold_.sums.PrefetchKeyAndSum(hashes[i + kAhead]);
      const size_t begin = i == 0 ? 0 : key_end[i - 1];
      const std::string_view series(keys.data() + begin, key_end[i] - begin);
      SparseAggregate& sum = fold_.sums.Find(series, hashes[i]);
      sum.AddRecord(records[i]);
      sum.NoteDay(day);
      if (machine) sum.AddMachineOf(&*machine, records[i], series.substr(4));
    }
    fold_.ids.push_back(id);
    const uint64_t pending = pending_count_.load();
    // The applier waits for a fold's first batch, then for its interval
    // unless half the pending budget fills first (ApplierLoop): woken for
    // every batch, it would only go back to sleep (0.9 voluntary context
    // switches a batch at 16 connections).
    wake_applier =
        fold_.ids.size() == 1 || pending * 2 >= static_cast<uint64_t>(options_.max_pending_batches);
  }
  if (wake_applier) fold_cv_.notify_one();
}

int32_t RocksDbStore::Today() const {
  if (options_.today) return options_.today();
  return DayFromUnixSeconds(std::chrono::duration_cast<std::chrono::seconds>(
                                std::chrono::system_clock::now().time_since_epoch())
                                .count());
}

Status RocksDbStore::LoadRollupPoint() {
  std::string v;
  const rocksdb::Slice key(kRollupKey.data(), kRollupKey.size());
  rocksdb::Status s = db_->Get(rocksdb::ReadOptions(), data_cf_, key, &v);
  if (s.ok()) {
    std::optional<RollupPoint> p = RollupPoint::Decode(v);
    if (!p) return DataLoss("roll-up point in " + options_.path + " is corrupt");
    rollup_ = std::move(*p);
  } else if (s.IsNotFound()) {
    std::unique_ptr<rocksdb::Iterator> it(db_->NewIterator(rocksdb::ReadOptions(), data_cf_));
    it->SeekToFirst();
    if (it->Valid()) {
      return Unsupported("database " + options_.path +
                         " holds sums but no roll-up point: it was written by an older "
                         "fieldprof; start with an empty --db");
    }
    FP_RETURN_IF_ERROR(FromRocks(it->status(), "checking for sums"));
    rollup_ = RollupPoint{};
    rocksdb::WriteOptions wo;
    wo.sync = options_.sync;
    FP_RETURN_IF_ERROR(
        FromRocks(db_->Put(wo, data_cf_, key, rollup_.Encode()), "writing the roll-up point"));
  } else {
    return FromRocks(s, "reading the roll-up point");
  }
  rollup_next_day_.store(rollup_.next_day);
  return Status::Ok();
}

StatusOr<bool> RocksDbStore::RollupStep() {
  const int32_t today = Today();
  if (rollup_.cursor.empty() && rollup_.next_day >= today) return false;
  std::shared_lock open_lock(close_mutex_);
  if (!db_) return Unavailable("store is closed");
  if (broken_.load()) return Unavailable("the store is being reopened");
  RollupPoint next = rollup_;
  std::unique_ptr<rocksdb::Iterator> it(db_->NewIterator(rocksdb::ReadOptions(), data_cf_));
  if (next.cursor.empty()) {
    // Skip the days without data up to the next day that has some.
    it->Seek(DayPrefix(next.next_day));
    int32_t day = today;
    if (it->Valid() && it->key().size() >= 5 &&
        it->key()[0] == static_cast<char>(TimeLevel::kDay)) {
      day = std::min(today, GetOrdered32(it->key().data() + 1));
    }
    FP_RETURN_IF_ERROR(FromRocks(it->status(), "finding the next day to roll up"));
    next.next_day = day;
  } else {
    const std::string from = DayPrefix(next.next_day) + next.cursor;
    it->Seek(from);
    if (it->Valid() && it->key() == rocksdb::Slice(from)) it->Next();
  }
  rocksdb::WriteBatch wb;
  size_t n = 0;
  if (next.next_day < today) {
    const std::string prefix = DayPrefix(next.next_day);
    const std::string month = NodeKey({TimeLevel::kMonth, MonthOfDay(next.next_day)}, "");
    const std::string all = NodeKey({TimeLevel::kAllTime, 0}, "");
    std::string k;
    for (; it->Valid() && it->key().starts_with(prefix) &&
           n < static_cast<size_t>(options_.rollup_chunk_series);
         it->Next(), ++n) {
      const rocksdb::Slice api(it->key().data() + 5, it->key().size() - 5);
      for (const std::string* level : {&month, &all}) {
        k.assign(*level);
        k.append(api.data(), api.size());
        FP_RETURN_IF_ERROR(FromRocks(wb.Merge(data_cf_, k, it->value()), "building roll-up"));
      }
      next.cursor.assign(api.data(), api.size());
    }
    FP_RETURN_IF_ERROR(FromRocks(it->status(), "reading a day to roll up"));
    if (!it->Valid() || !it->key().starts_with(prefix)) next = {next.next_day + 1, ""};
  }
  FP_RETURN_IF_ERROR(FromRocks(
      wb.Put(data_cf_, rocksdb::Slice(kRollupKey.data(), kRollupKey.size()), next.Encode()),
      "building roll-up"));
  // Not synced, like folds: lost together with everything after it.
  if (rocksdb::Status ws = db_->Write(rocksdb::WriteOptions(), &wb); !ws.ok()) {
    MarkBroken(ws, "writing a roll-up");
    return FromRocks(ws, "writing roll-up");
  }
  rollup_ = std::move(next);
  rollup_next_day_.store(rollup_.next_day);
  rolled_series_.fetch_add(n);
  return !rollup_.cursor.empty() || rollup_.next_day < today;
}

Status RocksDbStore::RecoverPending() {
  std::unique_ptr<rocksdb::Iterator> it(db_->NewIterator(rocksdb::ReadOptions(), pending_cf_));
  for (it->SeekToFirst(); it->Valid(); it->Next()) {
    rocksdb::Slice v = it->value();
    if (v.size() < 4) return DataLoss("pending batch entry too short");
    const int32_t day = GetOrdered32(v.data());
    std::string_view body(v.data() + 4, v.size() - 4);
    std::optional<MachineSecret> machine;
    if (body.size() >= 18 && body.substr(0, 2) == std::string_view(kPendingMachineMark, 2)) {
      machine.emplace();
      std::copy(body.data() + 2, body.data() + 18, machine->begin());
      body.remove_prefix(18);
    } else if (body.size() >= 10 &&
               body.substr(0, 2) == std::string_view(kPendingMachineHashMark, 2)) {
      machine.emplace();  // the hash as the secret: this batch's entries are its own
      machine->fill(0);
      std::copy(body.data() + 2, body.data() + 10, machine->begin());
      body.remove_prefix(10);
    }
    BatchView batch;
    if (Status s = DecodeBatchView(body, &batch); !s.ok()) {
      return DataLoss("pending batch " + HexEncode(it->key().ToString()) +
                      " does not decode: " + s.message());
    }
    // A value from before the mark may still hold the key itself.
    if (!machine) machine = MachineOf(batch);
    pending_count_.fetch_add(1);
    AddToFold(it->key().ToString(), day, batch, machine);
  }
  return FromRocks(it->status(), "reading pending batches");
}

void RocksDbStore::ApplierLoop() {
  bool rollup_left = true;  // check once at start
  for (;;) {
    if (broken_.load()) {
      // Nothing is written until the database is reopened, tried once a
      // second while the reserve is free.
      if (TryReopen()) continue;
      std::unique_lock lock(fold_mutex_);
      if (stop_) return;
      fold_cv_.wait_for(lock, std::chrono::seconds(1), [this] { return stop_; });
      continue;
    }
    Fold work;
    {
      std::unique_lock lock(fold_mutex_);
      // Idle: wake for batches, to stop, or once a second to see whether
      // a day has ended (at once while a roll-up is under way).
      fold_cv_.wait_for(lock, rollup_left ? std::chrono::milliseconds(0) : kRollupPoll,
                        [this] { return stop_ || !fold_.ids.empty(); });
      if (stop_ && fold_.ids.empty()) return;
      if (!fold_.ids.empty()) {
        // Let the fold grow for up to fold_interval since the last write
        // started: more batches per fold, fewer merges per batch. Cut short
        // when stopping or when half the pending budget is used.
        const auto due = last_fold_start_ + options_.fold_interval;
        fold_cv_.wait_until(lock, due, [this] {
          return stop_ ||
                 pending_count_.load() * 2 >= static_cast<uint64_t>(options_.max_pending_batches);
        });
        last_fold_start_ = std::chrono::steady_clock::now();
        std::swap(work, fold_);
      }
    }
    if (!work.ids.empty()) {
      Status s = WriteFold(work);
      std::unique_lock lock(fold_mutex_);
      if (!s.ok()) {
        // E.g. disk full. The batches stay durable in the pending log; put
        // the sums back in front of what arrived meanwhile and retry.
        apply_errors_.fetch_add(1);
        fold_.sums.ForEach(
            [&work](std::string_view k, const SparseAggregate& v) { work.sums[k].Merge(v); });
        work.ids.insert(work.ids.end(), fold_.ids.begin(), fold_.ids.end());
        std::swap(work, fold_);
        if (stop_) return;  // applied on the next start
        fold_cv_.wait_for(lock, std::chrono::milliseconds(200));
        continue;
      }
      pending_count_.fetch_sub(work.ids.size());
      applied_batches_.fetch_add(work.ids.size());
      data_version_.fetch_add(1);
      folds_.fetch_add(1);
      applied_cv_.notify_all();
    }
    // One roll-up chunk between folds keeps ingest going during a roll-up.
    StatusOr<bool> more = RollupStep();
    if (!more.ok()) {
      apply_errors_.fetch_add(1);
      rollup_left = false;  // retried at the next poll
    } else {
      rollup_left = *more;
    }
    // Once a day, when the roll-up has reached it: what stayed below k
    // past the retention goes.
    if (!rollup_left && options_.unpublished_retention_days > 0 && options_.unpublished_k > 1 &&
        expired_through_ < Today()) {
      const int32_t today = Today();
      StatusOr<size_t> n = ExpireUnpublished(today);
      if (n.ok()) {
        expired_through_ = today;
        series_expired_.fetch_add(*n);
        if (*n > 0) data_version_.fetch_add(1);
      } else {
        apply_errors_.fetch_add(1);
      }
    }
  }
}

StatusOr<size_t> RocksDbStore::ExpireUnpublished(int32_t today) {
  std::shared_lock open_lock(close_mutex_);
  if (!db_) return Unavailable("store is closed");
  if (broken_.load()) return Unavailable("the store is being reopened");
  const int32_t oldest = today - options_.unpublished_retention_days;
  struct Expired {
    std::string api;
    int32_t first_day;
  };
  std::vector<Expired> expired;
  {
    SnapshotReader view(db_.get());
    std::unique_ptr<rocksdb::Iterator> it = view.NewIterator(data_cf_);
    SparseAggregate v;
    std::string today_value;
    for (it->Seek("A"); it->Valid() && it->key().starts_with("A"); it->Next()) {
      v.Clear();
      if (!v.AddEncoded(std::string_view(it->value().data(), it->value().size()))) {
        return DataLoss("corrupt stored value while expiring");
      }
      if (v.first_day() == 0 || v.first_day() >= oldest) continue;
      const std::string api(it->key().data() + 1, it->key().size() - 1);
      // Today's machines, not rolled up yet, count too.
      rocksdb::Status g =
          db_->Get(view.options(), data_cf_, NodeKey({TimeLevel::kDay, today}, api), &today_value);
      if (g.ok() && !v.AddEncoded(today_value)) return DataLoss("corrupt stored value");
      if (!g.ok() && !g.IsNotFound()) return FromRocks(g, "reading today's node");
      if (v.machines().Estimate() >= static_cast<uint64_t>(options_.unpublished_k)) continue;
      expired.push_back({api, v.first_day()});
    }
    FP_RETURN_IF_ERROR(FromRocks(it->status(), "walking series to expire"));
  }
  // Every node of each: all time, its months, its days (a delete of a
  // node that holds nothing is a tombstone, no harm).
  rocksdb::WriteBatch wb;
  for (const Expired& e : expired) {
    wb.Delete(data_cf_, NodeKey({TimeLevel::kAllTime, 0}, e.api));
    for (int32_t m = MonthOfDay(e.first_day); m <= MonthOfDay(today); ++m) {
      wb.Delete(data_cf_, NodeKey({TimeLevel::kMonth, m}, e.api));
    }
    for (int32_t d = e.first_day; d <= today; ++d) {
      wb.Delete(data_cf_, NodeKey({TimeLevel::kDay, d}, e.api));
    }
    if (wb.Count() > 100000) {
      rocksdb::WriteOptions wo;
      wo.sync = options_.sync;
      FP_RETURN_IF_ERROR(FromRocks(db_->Write(wo, &wb), "deleting expired series"));
      wb.Clear();
    }
  }
  if (wb.Count() > 0) {
    rocksdb::WriteOptions wo;
    wo.sync = options_.sync;
    FP_RETURN_IF_ERROR(FromRocks(db_->Write(wo, &wb), "deleting expired series"));
  }
  return expired.size();
}

Status RocksDbStore::WriteFold(const Fold& work) {
  std::shared_lock open_lock(close_mutex_);
  if (!db_) return Unavailable("store is closed");
  if (broken_.load()) return Unavailable("the store is being reopened");
  // Merges go in key order: the memtable's skip list then finds each
  // insert position next to the previous one instead of from the top.
  // Every merge's key is in one buffer and every series' encoded sum in
  // another, the merges sorted as offsets into them: no allocation for a
  // series of a day not rolled up yet (a fold holds ~40,000 at 1,500
  // batches/s; a rolled day's series, rare, adds its month's and all
  // time's merges). Equal keys (two rolled days' month) keep the fold's
  // order.
  struct Merge {
    size_t key_at;
    size_t key_size;
    size_t value;  // index into value_end
  };
  std::string keys, values;
  std::vector<size_t> value_end;  // series i's value is values[value_end[i - 1], value_end[i])
  std::vector<Merge> merges;
  value_end.reserve(work.sums.size());
  merges.reserve(work.sums.size());
  const auto add_merge = [&](const TimeNode& node, std::string_view api) {
    const size_t at = keys.size();
    AppendNodeKey(node, api, &keys);
    merges.push_back({at, keys.size() - at, value_end.size() - 1});
  };
  work.sums.ForEach([&](std::string_view dk, const SparseAggregate& sum) {
    const int32_t day = GetOrdered32(dk.data());
    const std::string_view api(dk.data() + 4, dk.size() - 4);
    sum.AppendEncoded(&values);
    value_end.push_back(values.size());
    if (rollup_.Rolled(day, api)) {
      for (const TimeNode& n : NodesForDay(day)) add_merge(n, api);
    } else {
      add_merge({TimeLevel::kDay, day}, api);
    }
  });
  const auto key_of = [&keys](const Merge& m) {
    return std::string_view(keys.data() + m.key_at, m.key_size);
  };
  std::sort(merges.begin(), merges.end(), [&key_of](const Merge& a, const Merge& b) {
    const int c = key_of(a).compare(key_of(b));
    return c < 0 || (c == 0 && a.value < b.value);
  });
  // Room for about the whole write (a rolled series' value goes in more
  // than once): the batch's buffer is not copied over and over as it grows.
  rocksdb::WriteBatch wb(keys.size() + values.size() + 16 * merges.size() + 64 * work.ids.size() +
                         64);
  rocksdb::Status s;
  for (const Merge& m : merges) {
    const size_t begin = m.value == 0 ? 0 : value_end[m.value - 1];
    const std::string_view k = key_of(m);
    s = wb.Merge(data_cf_, rocksdb::Slice(k.data(), k.size()),
                 rocksdb::Slice(values.data() + begin, value_end[m.value] - begin));
    if (!s.ok()) return FromRocks(s, "building fold");
  }
  for (const std::string& id : work.ids) {
    s = wb.Delete(pending_cf_, id);
    if (!s.ok()) return FromRocks(s, "building fold");
  }
  // Not synced on purpose: the merges and the pending deletes are one
  // atomic WAL record. If it is lost, both are lost and the batches are
  // applied again from the pending log; the next synced ingest write also
  // makes it durable.
  rocksdb::WriteOptions wo;
  // The same hint when the fold's inserts run beside ingest writes' (the
  // memtable's prefix hints serve only a write inserting alone).
  wo.memtable_insert_hint_per_batch = true;
  s = db_->Write(wo, &wb);
  if (!s.ok()) {
    MarkBroken(s, "writing sums");
    return FromRocks(s, "writing fold");
  }
  series_written_.fetch_add(work.sums.size());
  FlushFoldedBodies();
  return Status::Ok();
}

void RocksDbStore::FlushFoldedBodies() {
  // Now the pending memtable holds this fold's bodies beside their
  // deletes, and the few that came while it was written: flushed now, the
  // deleted bodies are dropped on the way, and a table gets only the
  // deletes and those few. Left until it is full, it is flushed at
  // whatever moment that is, with up to a fold's worth of bodies not yet
  // deleted: each written to a table and compacted away later (at 1,500
  // batches/s, 37-112 MB of tables in 8 s; docs/benchmarks-history.md).
  //
  // Only when the flush can neither stall nor wait: no memtable of the
  // pending log is being flushed (a second one waiting would stall
  // ingest's writes) and its level 0 is below the compaction trigger
  // (RocksDB's write-stall limits are far above). And not after a failed
  // write: switching the memtable writes the WAL's buffer, which RocksDB
  // 7.8 aborts on once a write to it failed (CloseDb). A failed write
  // marks the store broken as it returns, and RocksDB's count of background
  // errors is asked too; a write failing after these checks and before the
  // switch (the fold's own write succeeded, an ingest write beside it did
  // not) is not caught.
  uint64_t active = 0, flushing = 1, errors = 1;
  std::string level0;  // a string property
  if (broken_.load() || !db_->GetIntProperty("rocksdb.background-errors", &errors) || errors != 0 ||
      !db_->GetIntProperty(pending_cf_, "rocksdb.cur-size-active-mem-table", &active) ||
      !db_->GetIntProperty(pending_cf_, "rocksdb.num-immutable-mem-table", &flushing) ||
      !db_->GetProperty(pending_cf_, "rocksdb.num-files-at-level0", &level0) ||
      active < options_.pending_write_buffer_bytes / 2 || flushing != 0 ||
      std::strtoull(level0.c_str(), nullptr, 10) >= 4) {
    return;
  }
  rocksdb::FlushOptions fo;
  fo.wait = false;
  fo.allow_write_stall = true;  // checked above, without waiting
  const rocksdb::Status s = db_->Flush(fo, pending_cf_);
  // A failed flush loses nothing (the memtable stays, its WAL too) and
  // RocksDB flushes it when it is full, as before; a failure that matters
  // shows in the next write.
  if (!s.ok()) {
    std::cerr << "fieldprof-aggregator: flushing the pending log: " << s.ToString() << "\n";
  }
}

}  // namespace fieldprof::aggregator
