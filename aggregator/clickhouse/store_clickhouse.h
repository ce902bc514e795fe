// The aggregator's sums in ClickHouse (docs/scale-out.md has the
// design and the argument for exactness): a second Store (store.h), chosen
// with --store clickhouse, for several stateless aggregators over one
// ClickHouse cluster (or one ClickHouse server).
//
// Ingest. Concurrent ApplyBatch calls are gathered into groups, one INSERT
// each (ClickHouse wants few large inserts). A group first asks which of
// its batches are stored already (their marker rows in fp_rows, or their ids
// in fp_batch_ids once folded): those answer duplicate. The rest go into a
// shard's fp_rows as one RowBinary INSERT, with insert_quorum = the shard's
// replicas, so an acknowledged batch is on every replica of its shard. A
// shard that cannot take it (a replica down, ZooKeeper away) is skipped for
// a while and the group goes to the next; a batch may so end up stored on
// two shards, which reads count once. Nothing is acknowledged that did not
// reach its quorum.
//
// Reads add three levels: month nodes up to the rolled month, day nodes up
// to the rolled day, and the raw rows after it, each copy of a batch
// counted once (GROUP BY batch id and key), at the earliest day it was
// stored.
//
// Roll-up. The aggregator holding the lease (may_roll_up) folds each day
// older than the horizon from raw rows into day nodes, each finished month
// into month nodes, records the ids of the folded batches, moves the
// pointers, and later drops the folded raw partitions.
//
//   ClickHouseStoreOptions o;
//   o.url = "http://ch1:8123,http://ch2:8123;http://ch3:8123,http://ch4:8123";
//   o.cluster = "fieldprof";
//   auto store = OpenClickHouseStore(o);
#ifndef FIELDPROF_AGGREGATOR_CLICKHOUSE_STORE_CLICKHOUSE_H_
#define FIELDPROF_AGGREGATOR_CLICKHOUSE_STORE_CLICKHOUSE_H_

#include <chrono>
#include <functional>
#include <memory>
#include <string>

#include "aggregator/store/store.h"

namespace fieldprof::aggregator {

struct ClickHouseStoreOptions {
  // ClickHouse's HTTP interfaces: http://HOST:PORT, replicas of a shard
  // joined by ',', shards by ';'. Default: one server on loopback.
  std::string url = "http://127.0.0.1:8123";
  // The cluster's name in ClickHouse's <remote_servers>: tables become
  // Replicated*MergeTree (each server needs the macros {shard} and
  // {replica}) read through Distributed tables. Empty: one server, plain
  // MergeTree tables. Required with more than one server.
  std::string cluster;
  // Database of the tables; created if missing. Default: fieldprof.
  std::string database = "fieldprof";
  // ZooKeeper path under which the replicated tables live.
  std::string zookeeper_path = "/clickhouse/fieldprof";
  // How long an INSERT waits for its quorum before the group moves to
  // another shard. Default: 10 s.
  std::chrono::milliseconds insert_quorum_timeout{10000};
  // How long a shard that failed is passed over. Default: 5 s.
  std::chrono::milliseconds shard_backoff{5000};
  // Deadline of a query (reads, folds). Default: 5 min.
  std::chrono::milliseconds query_timeout{300000};
  // INSERTs one aggregator has in flight at once; each tries the shards in
  // turn. Fewer, larger inserts cost ClickHouse less per batch (on 18.16
  // a shard's quorum inserts take turns anyway): one, unless a few
  // aggregators write to many shards. 0: one per shard. Default: 1.
  int inserts_in_flight = 1;
  // Batches in one INSERT at most. Default: 512.
  int max_group_batches = 512;
  // Accepted batches waiting for their INSERT before ApplyBatch answers
  // ResourceExhausted (503). Default: 4096.
  int max_pending_batches = 4096;
  // Days the raw rows of a day are kept before the day is folded into day
  // nodes: retries of one upload, however they race, arrive within it.
  // Default: 2.
  int horizon_days = 2;
  // Days the ids of folded batches are kept (a batch retried later than
  // that is counted again). Default: 60.
  int batch_id_retention_days = 60;
  // Time between a day's fold and the drop of the raw rows before it
  // (longer than any query). Default: 10 min.
  std::chrono::seconds drop_grace{600};
  // Time between roll-up passes. Default: 60 s.
  std::chrono::milliseconds rollup_interval{60000};
  // Whether this aggregator may fold now (it holds the lease; lease.h).
  // Null: always.
  std::function<bool()> may_roll_up;
  // Today's day number. Null: the UTC day of the system clock. Tests move it.
  std::function<int32_t()> today;
  // How long table creation waits for servers that are down. Default: 30 s.
  int ddl_timeout_s = 30;
};

// Connects, creates or migrates the tables (idempotent) and starts the
// inserting and roll-up threads.
[[nodiscard]] StatusOr<std::unique_ptr<Store>> OpenClickHouseStore(
    const ClickHouseStoreOptions& options);

}  // namespace fieldprof::aggregator

#endif  // FIELDPROF_AGGREGATOR_CLICKHOUSE_STORE_CLICKHOUSE_H_
