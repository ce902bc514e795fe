#include "aggregator/clickhouse/schema.h"

#include <cstdlib>
#include <set>
#include <sstream>

namespace fieldprof::aggregator {
namespace {

// The sharded tables and the global ones (every server a replica).
const char* const kSharded[] = {"fp_rows", "fp_days", "fp_months", "fp_batch_ids"};
const char* const kGlobal[] = {"fp_state", "fp_snapshot_fragments", "fp_snapshot_manifests",
                               "fp_snapshot_replaced", "fp_lab_profiles"};

}  // namespace

std::string ChTables::Engine(const std::string& kind, const std::string& table, bool global) const {
  if (!clustered()) return kind + "()";
  return "Replicated" + kind + "('" + zk_ + (global ? "/global/" : "/{shard}/") + db_ + "." +
         table + "', '{replica}')";
}

std::string ChTables::CreateTable(const std::string& table, const std::string& columns,
                                  const std::string& kind, bool global,
                                  const std::string& rest) const {
  return "CREATE TABLE IF NOT EXISTS " + Local(table) + OnCluster() + " (" + columns +
         ") ENGINE = " + Engine(kind, table, global) + " " + rest;
}

std::vector<std::string> ChTables::CreateStatements() const {
  const std::string key = ChKeyColumnsDdl();
  auto create = [&](const std::string& table, const std::string& columns, const std::string& kind,
                    bool global, const std::string& rest) {
    return CreateTable(table, columns, kind, global, rest);
  };
  std::vector<std::string> s = {"CREATE DATABASE IF NOT EXISTS " + db_ + OnCluster()};
  s.push_back(
      create("fp_rows", "batch_id FixedString(16), seq UInt32, day Date, " + key + ", value String",
             "MergeTree", false,
             "PARTITION BY day ORDER BY (" + std::string(kChKeyColumns) + ", batch_id, seq)"));
  s.push_back(
      create("fp_days", "day Date, " + key + ", value String", "ReplacingMergeTree", false,
             "PARTITION BY toYYYYMM(day) ORDER BY (" + std::string(kChKeyColumns) + ", day)"));
  s.push_back(create(
      "fp_months", "month UInt32, " + key + ", value String", "ReplacingMergeTree", false,
      "PARTITION BY intDiv(month, 12) ORDER BY (" + std::string(kChKeyColumns) + ", month)"));
  s.push_back(create("fp_batch_ids", "batch_id FixedString(16), day Date", "ReplacingMergeTree",
                     false, "PARTITION BY toYYYYMM(day) ORDER BY batch_id"));
  s.push_back(create("fp_state", "name String, value Int64, at DateTime", "MergeTree", true,
                     "PARTITION BY tuple() ORDER BY (name, value)"));
  s.push_back(create("fp_snapshot_fragments",
                     "idx UInt32, version UInt64, created DateTime, bytes String",
                     "ReplacingMergeTree", true, "PARTITION BY tuple() ORDER BY (idx, version)"));
  s.push_back(create("fp_snapshot_manifests", "version UInt64, created DateTime, signed String",
                     "ReplacingMergeTree", true, "PARTITION BY tuple() ORDER BY version"));
  s.push_back(create("fp_snapshot_replaced", "idx UInt32, version UInt64, at DateTime", "MergeTree",
                     true, "PARTITION BY tuple() ORDER BY (idx, version)"));
  s.push_back(create("fp_lab_profiles", "id String, created DateTime, bytes String",
                     "ReplacingMergeTree", true, "PARTITION BY tuple() ORDER BY id"));
  if (clustered()) {
    for (const char* t : kSharded) {
      s.push_back("CREATE TABLE IF NOT EXISTS " + All(t) + OnCluster() + " AS " + Local(t) +
                  " ENGINE = Distributed(" + cluster_ + ", " + db_ + ", " + t + ")");
    }
  }
  return s;
}

std::vector<std::string> ChTables::DevCreateStatements() const {
  auto create = [&](const std::string& table, const std::string& columns, const std::string& kind,
                    bool global, const std::string& rest) {
    return CreateTable(table, columns, kind, global, rest);
  };
  std::vector<std::string> s;
  // Developer mode (store/dev_store.h): per developer and program its
  // counts, summed; a row per run and tag (the run as listed, a DevRun
  // without its file); the runs with their files.
  s.push_back(create("fp_dev_users",
                     "user String, program String, runs UInt64, events UInt64, bytes UInt64",
                     "SummingMergeTree", true, "PARTITION BY tuple() ORDER BY (user, program)"));
  s.push_back(create("fp_dev_points",
                     "user String, tag String, started Int64, id String, program String, "
                     "listed String",
                     "ReplacingMergeTree", true,
                     "PARTITION BY tuple() ORDER BY (user, tag, started, id)"));
  s.push_back(create("fp_dev_events", "user String, id String, run String", "ReplacingMergeTree",
                     true, "PARTITION BY tuple() ORDER BY (user, id)"));
  return s;
}

std::vector<std::string> ChTables::TableNames() const {
  std::vector<std::string> names;
  for (const char* t : kSharded) {
    names.push_back(t);
    if (clustered()) names.push_back(std::string(t) + "_all");
  }
  for (const char* t : kGlobal) names.push_back(t);
  return names;
}

namespace {

// Which servers answer, and whether every table is already on them.
struct ServerProbe {
  std::vector<const HttpsClientOptions*> up;
  bool complete = true;
  std::string first_error;
};

ServerProbe ProbeServers(const ChTables& tables,
                         const std::vector<std::vector<HttpsClientOptions>>& shards) {
  ServerProbe p;
  for (const auto& shard : shards) {
    for (const HttpsClientOptions& server : shard) {
      ClickHouseClient ch(server);
      StatusOr<std::string> have = ch.Query("SELECT name FROM system.tables WHERE database = " +
                                            SqlString(tables.database()) + " FORMAT TSV");
      if (!have.ok()) {
        p.complete = false;
        if (p.first_error.empty()) p.first_error = have.status().message();
        continue;
      }
      p.up.push_back(&server);
      std::set<std::string> names;
      std::istringstream lines(*have);
      for (std::string line; std::getline(lines, line);) names.insert(line);
      for (const std::string& t : tables.TableNames()) p.complete = p.complete && names.count(t);
    }
  }
  return p;
}

// ClickHouse's own idea of the cluster must match the servers given: the
// Distributed reads go where <remote_servers> says.
Status CheckClusterLayout(const ChTables& tables,
                          const std::vector<std::vector<HttpsClientOptions>>& shards,
                          const HttpsClientOptions& server) {
  ClickHouseClient ch(server);
  StatusOr<std::string> layout =
      ch.Query("SELECT shard_num, count() FROM system.clusters WHERE cluster = " +
               SqlString(tables.cluster()) + " GROUP BY shard_num ORDER BY shard_num FORMAT TSV");
  if (!layout.ok()) return layout.status().WithContext("reading system.clusters");
  std::string want, got;
  for (size_t i = 0; i < shards.size(); ++i) {
    want += (i ? "," : "") + std::to_string(shards[i].size());
  }
  std::istringstream lines(*layout);
  for (std::string line; std::getline(lines, line);) {
    const size_t tab = line.find('\t');
    if (tab == std::string::npos) continue;
    got += (got.empty() ? "" : ",") + line.substr(tab + 1);
  }
  if (got.empty()) {
    return InvalidArgument("ClickHouse has no cluster named '" + tables.cluster() +
                           "' in its <remote_servers>");
  }
  if (got != want) {
    return InvalidArgument("ClickHouse's cluster '" + tables.cluster() +
                           "' has replicas per shard " + got + ", but clickhouse_url lists " +
                           want);
  }
  return Status::Ok();
}

Status CreateTables(const ChTables& tables, const std::vector<const HttpsClientOptions*>& up,
                    int ddl_timeout_s) {
  for (const std::string& sql : tables.CreateStatements()) {
    if (!tables.clustered()) {
      for (const auto* server : up) {
        ClickHouseClient ch(*server);
        FP_RETURN_IF_ERROR(ch.Execute(sql).WithContext("creating the ClickHouse tables"));
      }
      continue;
    }
    // ON CLUSTER: any server queues it for all; servers that are down run
    // it when they return. A timeout (code 159) is not an error then.
    ClickHouseClient ch(*up.front());
    Status s = ch.Execute(sql, {{"distributed_ddl_task_timeout", std::to_string(ddl_timeout_s)}});
    if (!s.ok() && ch.last_error_code() != 159) {
      return s.WithContext("creating the ClickHouse tables");
    }
  }
  return Status::Ok();
}

// The schema version, from the state table every server holds: a newer
// one than this aggregator's is refused; an older one (none yet) is
// brought up to date.
Status CheckSchemaVersion(const ChTables& tables, const HttpsClientOptions& server) {
  ClickHouseClient ch(server);
  StatusOr<std::string> v = ch.Query("SELECT max(value), count() FROM " + tables.Local("fp_state") +
                                     " WHERE name = 'schema' FORMAT TSV");
  if (!v.ok()) return v.status().WithContext("reading the schema version");
  const long have = std::strtol(v->c_str(), nullptr, 10);
  const bool recorded = v->find('\t') != std::string::npos &&
                        std::strtol(v->c_str() + v->find('\t') + 1, nullptr, 10) > 0;
  if (recorded && have > kChSchemaVersion) {
    return InvalidArgument("the ClickHouse tables in '" + tables.database() +
                           "' have schema version " + std::to_string(have) +
                           ", newer than this fieldprof-aggregator's " +
                           std::to_string(kChSchemaVersion) + ": upgrade it");
  }
  // Migrations from older versions go here, one step per version; version
  // 1 is the first, so there is nothing to migrate yet.
  if (!recorded || have < kChSchemaVersion) {
    FP_RETURN_IF_ERROR(ch.Execute("INSERT INTO " + tables.Local("fp_state") +
                                  " VALUES ('schema', " + std::to_string(kChSchemaVersion) +
                                  ", now())"));
  }
  return Status::Ok();
}

}  // namespace

Status EnsureChSchema(const ChTables& tables,
                      const std::vector<std::vector<HttpsClientOptions>>& shards,
                      int ddl_timeout_s) {
  const ServerProbe p = ProbeServers(tables, shards);
  if (p.up.empty()) return Unavailable("no ClickHouse server answers: " + p.first_error);
  if (tables.clustered()) FP_RETURN_IF_ERROR(CheckClusterLayout(tables, shards, *p.up.front()));
  if (!p.complete) FP_RETURN_IF_ERROR(CreateTables(tables, p.up, ddl_timeout_s));
  return CheckSchemaVersion(tables, *p.up.front());
}

}  // namespace fieldprof::aggregator
