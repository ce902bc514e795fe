// The embedded store: RocksDB in a local directory. The only code in the
// project that includes RocksDB headers is store_rocksdb.cc.
//
// Layout (column families):
//   default    level byte + [4-byte big-endian period] + EncodeApiKey(key)
//              -> aggregate value (aggregate_value.h), summed by a merge
//              operator (FullMergeV2 + PartialMergeMulti).
//   batch_ids  16-byte batch id -> 8-byte receive time (unix seconds),
//              dropped by a compaction filter after `batch_id_retention`.
//   pending    16-byte batch id -> 4-byte day + the batch as received: the
//              log of accepted batches not yet folded into `default`.
//
//              One meta key, "\x01rollup", holds the roll-up point.
//
// Ingest writes the batch id and the pending entry in one synced write,
// adds the batch's records to the open in-memory fold (summed by series and
// day) and answers. A background applier writes the fold's merges and the
// deletes of its pending entries in one atomic write. Restart re-folds what
// is pending.
//
// Roll-up: while a day is current its series are written to their day node
// only. Once the day is over, the applier adds each day node to its month
// and all-time nodes, in chunks; every chunk and the new roll-up point
// (next day to roll, last series rolled of it) are one atomic write. A series
// of a day at or before the roll-up point is written to all three nodes
// directly. Queries and listings read the roll-up point from the same
// snapshot as the sums and add the day nodes after it, so every answer is
// exact at any moment of a roll-up.
//
//   auto store = OpenRocksDbStore({.path = "/var/lib/fieldprof/db"});
//   if (!store.ok()) ...;
//   (*store)->ApplyBatch(batch, DayFromUnixSeconds(now));
#ifndef FIELDPROF_AGGREGATOR_STORE_STORE_ROCKSDB_H_
#define FIELDPROF_AGGREGATOR_STORE_STORE_ROCKSDB_H_

#include <chrono>
#include <functional>
#include <memory>
#include <string>

#include "aggregator/store/store.h"

namespace fieldprof::aggregator {

struct RocksDbStoreOptions {
  // Directory of the database; created if missing. Required.
  std::string path;
  // fsync the WAL before ApplyBatch returns. Only tests and benchmarks that
  // measure the cost of durability turn this off. Default: true.
  bool sync = true;
  // How long a batch id is remembered (duplicates older than this would be
  // applied again). Default: 60 days.
  std::chrono::seconds batch_id_retention = std::chrono::hours(24 * 60);
  // Merge operands kept per key in the memtable before they are folded at
  // write time (0 = no limit). Folding already sums each series once per
  // fold and memtable flushes merge operands, so the limit costs more (a
  // memtable scan per merge) than it saves. Default: 0.
  int max_successive_merges = 0;
  // Memtable size of the sums; also bounds how many merge operands a read
  // of a hot series may have to add up before a flush merges them. Default: 32 MiB.
  size_t write_buffer_bytes = 32 << 20;
  // Accepted batches waiting to be folded into the sums before ApplyBatch
  // answers ResourceExhausted (the server then says 503). Pending batches
  // cost no memory beyond their ids (bodies are on disk, sums in the fold).
  // Default: 2048.
  int max_pending_batches = 2048;
  // Longest time the applier lets a fold grow before writing it; also how
  // long an accepted batch may take to become visible to queries.
  // Default: 1 s.
  std::chrono::milliseconds fold_interval{1000};
  // Free space on the database's filesystem below which ingest refuses
  // with NoSpace (HTTP 507, Retry-After) instead of writing: RocksDB's
  // flushes and compactions need room, and RocksDB 7.8 aborts the process
  // on the next write to a WAL whose last write failed. While under it,
  // Health() says so; ingest resumes by itself once space returns.
  // Default: 256 MiB.
  uint64_t min_free_bytes = uint64_t{256} << 20;
  // Block cache size. Default: 64 MiB.
  size_t block_cache_bytes = 64 << 20;
  // Memtable size of the pending log. A body deleted (applied) before its
  // memtable is flushed is never written to a table; one flushed is
  // written, then compacted away. At ~1,400 batches a second of 128 KiB a
  // fold's second of bodies is ~180 MB, so at 64 MiB most were flushed
  // (docs/benchmarks-history.md). Used as bodies arrive, up to twice this
  // while a full one is flushed. Default: 256 MiB.
  size_t pending_write_buffer_bytes = size_t{256} << 20;
  // Series rolled up per atomic write. Default: 20000.
  int rollup_chunk_series = 20000;
  // Today's day number; days before it are rolled up. Default: the UTC day
  // of the system clock. Tests move it.
  std::function<int32_t()> today = nullptr;
  // Series sent from fewer than `unpublished_k` machines (the aggregator's
  // k) whose first record is more than this many days old are deleted,
  // every node of them, once a day after the roll-up: what no reader ever
  // saw is not kept for ever (docs/privacy.md). The machines that sent
  // them are not counted in them again. 0: kept for ever. Default: 90.
  int unpublished_retention_days = 90;
  int unpublished_k = 1;  // <= 1: every series is published, none expires
};

[[nodiscard]] StatusOr<std::unique_ptr<Store>> OpenRocksDbStore(const RocksDbStoreOptions& options);

}  // namespace fieldprof::aggregator

#endif  // FIELDPROF_AGGREGATOR_STORE_STORE_ROCKSDB_H_
