// The ClickHouse store's tables (docs/scale-out.md has the why):
//
//   fp_rows      every record of every batch as it came, partitioned by
//                day, sorted by key then batch id; plus one marker row per
//                batch (module '') in the same block, so "this batch's rows
//                are stored" is one index lookup.
//   fp_days      day nodes of the days folded (ReplacingMergeTree by key, day)
//   fp_months    month nodes of the months folded (by key, month)
//   fp_batch_ids the ids of folded batches, for retries after their raw
//                rows are gone (kept batch_id_retention_days)
//   fp_state     the roll-up pointers and the schema version (append only)
//   fp_snapshot_fragments, fp_snapshot_manifests, fp_snapshot_replaced
//                the published snapshot (snapshot_storage.h)
//   fp_lab_profiles  uploaded lab profiles (lab_storage.h)
//
// On a cluster the first four are sharded: Replicated*MergeTree under
// <zookeeper_path>/{shard}/..., read through Distributed tables named
// <table>_all. The last three are global: every server is a replica
// (<zookeeper_path>/global/...), read locally. On one server (no cluster
// name) all are plain MergeTree tables and <table>_all is the table itself.
#ifndef FIELDPROF_AGGREGATOR_CLICKHOUSE_SCHEMA_H_
#define FIELDPROF_AGGREGATOR_CLICKHOUSE_SCHEMA_H_

#include <string>
#include <vector>

#include "aggregator/clickhouse/client.h"
#include "aggregator/clickhouse/rows.h"
#include "common/base/status.h"

namespace fieldprof::aggregator {

// The schema this binary writes and reads; recorded in fp_state ("schema").
inline constexpr int kChSchemaVersion = 1;

class ChTables {
 public:
  // `cluster`: the name in ClickHouse's <remote_servers>, or "" for one
  // server. `zookeeper_path`: prefix of the replicated tables' paths.
  ChTables(std::string database, std::string cluster, std::string zookeeper_path)
      : db_(std::move(database)), cluster_(std::move(cluster)), zk_(std::move(zookeeper_path)) {}

  bool clustered() const { return !cluster_.empty(); }
  const std::string& database() const { return db_; }
  const std::string& cluster() const { return cluster_; }
  // "db.table": the table on this server.
  std::string Local(const std::string& table) const { return db_ + "." + table; }
  // What to read a sharded table through: its Distributed table, or the
  // table itself on one server.
  std::string All(const std::string& table) const {
    return clustered() ? db_ + "." + table + "_all" : Local(table);
  }

  // The statements that create every table and database, idempotent (IF
  // NOT EXISTS; ON CLUSTER on a cluster), in order.
  std::vector<std::string> CreateStatements() const;
  // Developer mode's tables (fp_dev_users, fp_dev_points, fp_dev_events),
  // made only by an aggregator that has developers (dev_store_clickhouse.h).
  std::vector<std::string> DevCreateStatements() const;
  // CREATE TABLE IF NOT EXISTS `table` (`columns`) with engine `kind`
  // (replicated on a cluster: every server when `global`), then `rest`.
  std::string CreateTable(const std::string& table, const std::string& columns,
                          const std::string& kind, bool global, const std::string& rest) const;
  // The tables CreateStatements makes, as system.tables names them.
  std::vector<std::string> TableNames() const;

 private:
  std::string Engine(const std::string& kind, const std::string& table, bool global) const;
  std::string OnCluster() const { return clustered() ? " ON CLUSTER " + cluster_ : ""; }

  std::string db_, cluster_, zk_;
};

// Creates what is missing on the servers of `shards` (all of them, or on a
// cluster through ON CLUSTER, waiting at most `ddl_timeout_s` for servers
// that are down: they apply the DDL when they return), then checks the
// schema version: a newer one than this binary's is refused, an older one
// migrated. On a cluster, also checks that ClickHouse's <remote_servers>
// has the shards and replicas the aggregator was given.
[[nodiscard]] Status EnsureChSchema(const ChTables& tables,
                                    const std::vector<std::vector<HttpsClientOptions>>& shards,
                                    int ddl_timeout_s);

}  // namespace fieldprof::aggregator

#endif  // FIELDPROF_AGGREGATOR_CLICKHOUSE_SCHEMA_H_
