#include "aggregator/clickhouse/dev_store_clickhouse.h"

#include <atomic>
#include <optional>
#include <set>
#include <sstream>

#include "aggregator/clickhouse/client.h"
#include "aggregator/clickhouse/row_binary.h"
#include "aggregator/clickhouse/schema.h"
#include "aggregator/clickhouse/servers.h"
#include "common/wire/wire.h"

namespace fieldprof::aggregator {
namespace {

// A RowBinary answer of one String column: each row's bytes.
StatusOr<std::vector<std::string>> Strings(const std::string& body) {
  std::vector<std::string> out;
  for (size_t at = 0; at < body.size();) {
    std::string s;
    if (!rowbinary::ReadString(body, &at, &s)) return DataLoss("a developer row does not read");
    out.push_back(std::move(s));
  }
  return out;
}

class DevStoreInClickHouse final : public DevStore {
 public:
  DevStoreInClickHouse(const ClickHouseStoreOptions& o, std::vector<HttpsClientOptions> servers)
      : tables_(o.database, o.cluster, o.zookeeper_path), servers_(std::move(servers)) {}

  Status Put(const std::string& user, const wire::DevRun& run, int64_t, bool* duplicate) override {
    const std::string id = HexEncode(run.id());
    StatusOr<wire::DevRun> have = Get(user, id);
    if (have.ok()) {
      *duplicate = true;
      return Status::Ok();
    }
    if (have.status().code() != StatusCode::kNotFound) return have.status();
    *duplicate = false;
    return Insert(user, run, 1, run.events(), run.file().size());
  }

  // A run's later part: the grown run's rows replace the run's (the
  // tables' keys are the same; readers take a run's longest row).
  Status Extend(const std::string& user, const wire::DevRun& part, int64_t,
                bool* duplicate) override {
    StatusOr<wire::DevRun> have = Get(user, HexEncode(part.id()));
    if (have.status().code() == StatusCode::kNotFound) {
      return InvalidArgument("no run " + HexEncode(part.id()) + " to add to: send its first part");
    }
    if (!have.ok()) return have.status();
    FP_ASSIGN_OR_RETURN(std::optional<wire::DevRun> grown, GrowRun(*have, part));
    *duplicate = !grown.has_value();
    if (*duplicate) return Status::Ok();
    return Insert(user, *grown, 0, grown->events() - std::min(grown->events(), have->events()),
                  grown->file().size() - have->file().size());
  }

  StatusOr<std::vector<DevTag>> Tags(const std::string& user) override {
    FP_ASSIGN_OR_RETURN(
        std::string body,
        ChQueryAny(servers_, next_++,
                   "SELECT tag, program, count(), max(started) FROM " +
                       tables_.Local("fp_dev_points") + " FINAL WHERE user = " + SqlString(user) +
                       " GROUP BY tag, program ORDER BY max(started) DESC, tag FORMAT TSV"));
    std::vector<DevTag> out;
    std::istringstream lines(body);
    for (std::string line; std::getline(lines, line);) {
      std::istringstream f(line);
      DevTag t;
      if (!(f >> t.tag >> t.program >> t.runs >> t.last_started_unix_ns)) {
        return DataLoss("a developer tag row does not read");
      }
      out.push_back(std::move(t));
    }
    return out;
  }

  StatusOr<std::vector<DevRunInfo>> Runs(const std::string& user, const std::string& tag,
                                         const std::string& program, int64_t from_ns,
                                         int64_t to_ns) override {
    std::string where = " AND tag = " + SqlString(tag) +
                        " AND started >= " + std::to_string(from_ns) + " AND started < " +
                        std::to_string(to_ns);
    if (!program.empty()) where += " AND program = " + SqlString(program);
    FP_ASSIGN_OR_RETURN(std::vector<wire::DevRun> listed, Listed(user, where));
    std::vector<DevRunInfo> out;
    for (const wire::DevRun& r : listed) {
      DevRunInfo i;
      i.id = HexEncode(r.id());
      i.program = r.program();
      i.started_unix_ns = r.started_unix_ns();
      i.events = r.events();
      i.bytes = r.file_bytes();
      i.id_bytes = r.id_bytes();
      i.open = r.open();
      i.tags.assign(r.tags().begin(), r.tags().end());
      out.push_back(std::move(i));
    }
    return out;
  }

  StatusOr<wire::DevRun> Get(const std::string& user, const std::string& id) override {
    // A replica may not have fetched a new run yet: ask the others. A run
    // kept is on two servers (one, when there is one). A run still being
    // written has a row per part kept, and a replica may lag a part
    // behind: its longest row of any server that answers, a closed one
    // at once.
    Status last = Status::Ok();
    size_t unanswered = 0;
    std::optional<wire::DevRun> best;
    for (const HttpsClientOptions& server : servers_) {
      ClickHouseClient ch(server);
      StatusOr<std::string> r = ch.Query("SELECT run FROM " + tables_.Local("fp_dev_events") +
                                         " WHERE user = " + SqlString(user) +
                                         " AND id = " + SqlString(id) + " FORMAT RowBinary");
      if (!r.ok()) {
        last = r.status();
        ++unanswered;
        continue;
      }
      FP_ASSIGN_OR_RETURN(std::vector<std::string> rows, Strings(*r));
      for (const std::string& row : rows) {
        wire::DevRun run;
        if (!run.ParseFromString(row)) return DataLoss("a developer run row does not read");
        if (!run.open()) return run;
        if (!best.has_value() || run.file().size() > best->file().size()) best = std::move(run);
      }
    }
    if (best.has_value()) return *std::move(best);
    if (unanswered < std::min<size_t>(2, servers_.size())) return NotFound("no such run");
    return last;
  }

  // From the runs as listed, once per run: the users table's rows are
  // each upload's counts as it came, and two replicas that take the same
  // run at the same moment both pass Put's check and both add theirs.
  StatusOr<wire::DevUser> User(const std::string& user) override {
    FP_ASSIGN_OR_RETURN(std::vector<wire::DevRun> listed, Listed(user, ""));
    wire::DevUser row;
    std::set<std::string> programs;
    for (const wire::DevRun& r : listed) {
      programs.insert(r.program());
      row.set_runs(row.runs() + 1);
      row.set_events(row.events() + r.events());
      row.set_bytes(row.bytes() + r.file_bytes());
    }
    for (const std::string& p : programs) row.add_programs(p);
    return row;
  }

 private:
  // The run's rows: a points row per tag, its events row, and a users row
  // adding `runs`, `events` and `bytes` (an upload's counts as it came).
  Status Insert(const std::string& user, const wire::DevRun& run, uint64_t runs, uint64_t events,
                uint64_t bytes) {
    const std::string id = HexEncode(run.id());
    wire::DevRun listed = run;
    listed.set_file_bytes(run.file().size());
    listed.clear_file();
    const std::string listed_bytes = listed.SerializeAsString();
    std::string points, event, users;
    for (const std::string& tag : run.tags()) {
      rowbinary::PutString(&points, user);
      rowbinary::PutString(&points, tag);
      rowbinary::PutFixed<int64_t>(&points, run.started_unix_ns());
      rowbinary::PutString(&points, id);
      rowbinary::PutString(&points, run.program());
      rowbinary::PutString(&points, listed_bytes);
    }
    rowbinary::PutString(&event, user);
    rowbinary::PutString(&event, id);
    rowbinary::PutString(&event, run.SerializeAsString());
    rowbinary::PutString(&users, user);
    rowbinary::PutString(&users, run.program());
    rowbinary::PutFixed<uint64_t>(&users, runs);
    rowbinary::PutFixed<uint64_t>(&users, events);
    rowbinary::PutFixed<uint64_t>(&users, bytes);
    // The listing first and the run last: a run is a duplicate only once
    // all of it is there. Every server holds the tables; two must have
    // each row before it counts.
    const ClickHouseSettings quorum = {{"insert_quorum", ChGlobalQuorum(servers_.size())}};
    for (const auto& [table, rows] :
         {std::pair{"fp_dev_points", &points}, std::pair{"fp_dev_users", &users},
          std::pair{"fp_dev_events", &event}}) {
      FP_RETURN_IF_ERROR(ChOnAnyServer(servers_, next_++, [&](ClickHouseClient& ch) {
        return ch.InsertRowBinary(tables_.Local(table), *rows, quorum);
      }));
    }
    return Status::Ok();
  }

  // Rows of the points table (`where` after the user's), a run's longest
  // row only (a run still being written has one per part kept), ordered by
  // start and id.
  StatusOr<std::vector<wire::DevRun>> Listed(const std::string& user, const std::string& where) {
    FP_ASSIGN_OR_RETURN(std::string body,
                        ChQueryAny(servers_, next_++,
                                   "SELECT listed FROM " + tables_.Local("fp_dev_points") +
                                       " WHERE user = " + SqlString(user) + where +
                                       " ORDER BY started, id FORMAT RowBinary"));
    FP_ASSIGN_OR_RETURN(std::vector<std::string> rows, Strings(body));
    std::vector<wire::DevRun> out;
    for (const std::string& row : rows) {
      wire::DevRun r;
      if (!r.ParseFromString(row)) return DataLoss("a developer run row does not read");
      if (!out.empty() && out.back().id() == r.id()) {
        if (r.file_bytes() > out.back().file_bytes()) out.back() = std::move(r);
        continue;
      }
      out.push_back(std::move(r));
    }
    return out;
  }

  const ChTables tables_;
  const std::vector<HttpsClientOptions> servers_;
  std::atomic<size_t> next_{0};
};

}  // namespace

StatusOr<std::unique_ptr<DevStore>> ClickHouseDevStore(const ClickHouseStoreOptions& options) {
  FP_ASSIGN_OR_RETURN(std::vector<HttpsClientOptions> servers,
                      ParseClickHouseServers(options.url, options.query_timeout));
  // Its tables, made here: only an aggregator with developers has them.
  // ON CLUSTER, any server queues the statement for all (one that is down
  // runs it when it returns: a timeout, code 159, is no error then).
  const ChTables tables(options.database, options.cluster, options.zookeeper_path);
  for (const std::string& sql : tables.DevCreateStatements()) {
    for (size_t i = 0; i < servers.size(); ++i) {
      ClickHouseClient ch(servers[i]);
      Status s = ch.Execute(sql, {{"distributed_ddl_task_timeout", "30"}});
      if (!s.ok() && !(tables.clustered() && ch.last_error_code() == 159)) {
        return s.WithContext("creating developer mode's ClickHouse tables");
      }
      if (tables.clustered()) break;
    }
  }
  return std::unique_ptr<DevStore>(
      std::make_unique<DevStoreInClickHouse>(options, std::move(servers)));
}

}  // namespace fieldprof::aggregator
