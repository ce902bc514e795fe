#include "aggregator/clickhouse/lab_storage_clickhouse.h"

#include <algorithm>
#include <atomic>
#include <cstring>
#include <sstream>

#include "aggregator/clickhouse/client.h"
#include "aggregator/clickhouse/row_binary.h"
#include "aggregator/clickhouse/schema.h"
#include "aggregator/clickhouse/servers.h"

namespace fieldprof::aggregator {
namespace {

class LabStorageInClickHouse : public LabStorage {
 public:
  LabStorageInClickHouse(const ClickHouseStoreOptions& o, std::vector<HttpsClientOptions> servers)
      : tables_(o.database, o.cluster, o.zookeeper_path), servers_(std::move(servers)) {}

  Status Put(const std::string& id, const std::string& bytes, bool* duplicate) override {
    StatusOr<std::string> have = Get(id);
    if (have.ok()) {
      *duplicate = true;
      return Status::Ok();
    }
    if (have.status().code() != StatusCode::kNotFound) return have.status();
    *duplicate = false;
    std::string row;
    rowbinary::PutString(&row, id);
    const uint32_t now =
        static_cast<uint32_t>(std::chrono::duration_cast<std::chrono::seconds>(
                                  std::chrono::system_clock::now().time_since_epoch())
                                  .count());
    row.append(reinterpret_cast<const char*>(&now), 4);
    rowbinary::PutString(&row, bytes);
    // Every server holds the table; two must have it before it counts.
    return ChOnAnyServer(servers_, next_++, [&](ClickHouseClient& ch) {
      return ch.InsertRowBinary(tables_.Local("fp_lab_profiles"), row,
                                {{"insert_quorum", ChGlobalQuorum(servers_.size())}});
    });
  }

  StatusOr<std::string> Get(const std::string& id) override {
    // A replica may not have fetched a new profile yet: ask the others. A
    // profile kept is on two servers (one, when there is one): it is not
    // there when fewer than that failed to answer.
    Status last = Status::Ok();
    size_t unanswered = 0;
    for (const HttpsClientOptions& server : servers_) {
      ClickHouseClient ch(server);
      StatusOr<std::string> r =
          ch.Query("SELECT bytes FROM " + tables_.Local("fp_lab_profiles") +
                   " WHERE id = " + SqlString(id) + " LIMIT 1 FORMAT RowBinary");
      if (!r.ok()) {
        last = r.status();
        ++unanswered;
        continue;
      }
      if (r->empty()) continue;
      size_t at = 0;
      std::string bytes;
      if (!rowbinary::ReadString(*r, &at, &bytes) || at != r->size()) {
        return DataLoss("a lab profile row in ClickHouse does not read");
      }
      return bytes;
    }
    if (unanswered < std::min<size_t>(2, servers_.size())) {
      return NotFound("no lab profile " + id);
    }
    return last;
  }

  StatusOr<std::vector<std::string>> List() override {
    FP_ASSIGN_OR_RETURN(std::string body,
                        ChQueryAny(servers_, next_++,
                                   "SELECT DISTINCT id FROM " + tables_.Local("fp_lab_profiles") +
                                       " ORDER BY id FORMAT TSV"));
    std::vector<std::string> ids;
    std::istringstream lines(body);
    for (std::string line; std::getline(lines, line);) ids.push_back(line);
    return ids;
  }

 private:
  const ChTables tables_;
  const std::vector<HttpsClientOptions> servers_;
  std::atomic<size_t> next_{0};
};

}  // namespace

StatusOr<std::unique_ptr<LabStorage>> ClickHouseLabStorage(const ClickHouseStoreOptions& options) {
  FP_ASSIGN_OR_RETURN(std::vector<HttpsClientOptions> servers,
                      ParseClickHouseServers(options.url, options.query_timeout));
  return std::unique_ptr<LabStorage>(
      std::make_unique<LabStorageInClickHouse>(options, std::move(servers)));
}

}  // namespace fieldprof::aggregator
