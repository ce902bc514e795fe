#include "aggregator/lab_storage.h"

#include <algorithm>
#include <atomic>
#include <cstring>
#include <filesystem>
#include <sstream>

#include "aggregator/clickhouse.h"
#include "aggregator/clickhouse_schema.h"
#include "common/durable_file.h"

namespace fieldprof::aggregator {
namespace {

class Local : public LabStorage {
 public:
  explicit Local(std::string dir) : dir_(std::move(dir)) {}

  Status Put(const std::string& id, const std::string& bytes, bool* duplicate) override {
    std::error_code ec;
    *duplicate = std::filesystem::exists(Path(id), ec);
    if (*duplicate) return Status::Ok();
    std::filesystem::create_directories(dir_, ec);
    return WriteFileDurably(Path(id), bytes);
  }

  StatusOr<std::string> Get(const std::string& id) override { return ReadWholeFile(Path(id)); }

  StatusOr<std::vector<std::string>> List() override {
    std::vector<std::string> ids;
    std::error_code ec;
    for (const auto& e : std::filesystem::directory_iterator(dir_, ec)) {
      if (e.path().extension() == ".labprofile") ids.push_back(e.path().stem().string());
    }
    std::sort(ids.begin(), ids.end());
    return ids;
  }

 private:
  std::string Path(const std::string& id) const { return dir_ + "/" + id + ".labprofile"; }
  const std::string dir_;
};

class InClickHouse : public LabStorage {
 public:
  InClickHouse(const ClickHouseStoreOptions& o, std::vector<HttpsClientOptions> servers)
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
    auto str = [&row](std::string_view s) {
      uint64_t n = s.size();
      while (n >= 0x80) {
        row.push_back(static_cast<char>(n | 0x80));
        n >>= 7;
      }
      row.push_back(static_cast<char>(n));
      row.append(s.data(), s.size());
    };
    str(id);
    const uint32_t now =
        static_cast<uint32_t>(std::chrono::duration_cast<std::chrono::seconds>(
                                  std::chrono::system_clock::now().time_since_epoch())
                                  .count());
    row.append(reinterpret_cast<const char*>(&now), 4);
    str(bytes);
    // Every server holds the table; two must have it before it counts.
    const std::string quorum = servers_.size() > 1 ? "2" : "0";
    return OnAny([&](ClickHouseClient& ch) {
      return ch.InsertRowBinary(tables_.Local("fp_lab_profiles"), row, {{"insert_quorum", quorum}});
    });
  }

  StatusOr<std::string> Get(const std::string& id) override {
    // A replica may not have fetched a new profile yet: ask the others.
    Status last = NotFound("no lab profile " + id);
    for (const HttpsClientOptions& server : servers_) {
      ClickHouseClient ch(server);
      StatusOr<std::string> r =
          ch.Query("SELECT bytes FROM " + tables_.Local("fp_lab_profiles") +
                   " WHERE id = " + SqlString(id) + " LIMIT 1 FORMAT RowBinary");
      if (!r.ok()) {
        last = r.status();
        continue;
      }
      if (r->empty()) continue;
      uint64_t n = 0;
      size_t at = 0;
      for (int shift = 0; at < r->size() && shift < 64; shift += 7) {
        const uint8_t b = static_cast<uint8_t>((*r)[at++]);
        n |= static_cast<uint64_t>(b & 0x7f) << shift;
        if ((b & 0x80) == 0) break;
      }
      if (r->size() - at != n) return DataLoss("a lab profile row in ClickHouse does not read");
      return r->substr(at);
    }
    return last;
  }

  StatusOr<std::vector<std::string>> List() override {
    std::string body;
    Status s = OnAny([&](ClickHouseClient& ch) {
      StatusOr<std::string> r =
          ch.Query("SELECT DISTINCT id FROM " + tables_.Local("fp_lab_profiles") +
                   " ORDER BY id FORMAT TSV");
      if (!r.ok()) return r.status();
      body = std::move(*r);
      return Status::Ok();
    });
    if (!s.ok()) return s;
    std::vector<std::string> ids;
    std::istringstream lines(body);
    for (std::string line; std::getline(lines, line);) ids.push_back(line);
    return ids;
  }

 private:
  Status OnAny(const std::function<Status(ClickHouseClient&)>& fn) {
    const size_t start = next_++;
    Status last = Unavailable("no ClickHouse server");
    for (size_t i = 0; i < servers_.size(); ++i) {
      ClickHouseClient ch(servers_[(start + i) % servers_.size()]);
      last = fn(ch);
      if (last.ok() || ch.last_error_code() != 0) return last;
    }
    return last;
  }

  const ChTables tables_;
  const std::vector<HttpsClientOptions> servers_;
  std::atomic<size_t> next_{0};
};

}  // namespace

std::unique_ptr<LabStorage> LocalLabStorage(std::string dir) {
  return std::make_unique<Local>(std::move(dir));
}

StatusOr<std::unique_ptr<LabStorage>> ClickHouseLabStorage(const ClickHouseStoreOptions& options) {
  StatusOr<std::vector<std::vector<HttpsClientOptions>>> shards =
      ParseClickHouseShards(options.url, std::chrono::seconds(30));
  if (!shards.ok()) return shards.status();
  std::vector<HttpsClientOptions> servers;
  for (const auto& shard : *shards) servers.insert(servers.end(), shard.begin(), shard.end());
  return std::unique_ptr<LabStorage>(std::make_unique<InClickHouse>(options, std::move(servers)));
}

}  // namespace fieldprof::aggregator
