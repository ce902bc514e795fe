// DevStore on RocksDB (dev_store.h): one column family per table. Keys
// begin with the developer's name and a 0 byte, so that every scan is
// one developer's.
//   users   NAME                                   -> wire::DevUser
//   points  NAME \0 TAG \0 START(8, big-endian) ID -> wire::DevRun without its file
//   events  NAME \0 ID                             -> wire::DevRun
#include <rocksdb/db.h>
#include <rocksdb/write_batch.h>

#include <algorithm>
#include <filesystem>
#include <map>
#include <mutex>

#include "aggregator/store/dev_store.h"
#include "aggregator/store/rocks_status.h"
#include "common/base/encoding.h"
#include "common/wire/wire.h"

namespace fieldprof::aggregator {
namespace {

std::string Prefix(const std::string& user) { return user + std::string(1, '\0'); }

// Signed times ordered as unsigned bytes (common/base/encoding.h).
std::string BigEndian(int64_t v) {
  std::string out;
  PutOrdered64(&out, v);
  return out;
}

DevRunInfo InfoOf(const wire::DevRun& r) {
  DevRunInfo i;
  i.id = HexEncode(r.id());
  i.program = r.program();
  i.started_unix_ns = r.started_unix_ns();
  i.events = r.events();
  i.bytes = r.file().empty() ? r.file_bytes() : r.file().size();
  i.id_bytes = r.id_bytes();
  i.open = r.open();
  i.tags.assign(r.tags().begin(), r.tags().end());
  return i;
}

class RocksDevStore final : public DevStore {
 public:
  ~RocksDevStore() override {
    for (auto* h : {users_, points_, events_}) {
      if (h != nullptr) db_->DestroyColumnFamilyHandle(h);
    }
  }

  Status Open(const std::string& path) {
    std::error_code ec;
    std::filesystem::create_directories(path, ec);
    rocksdb::DBOptions options;
    options.create_if_missing = true;
    options.create_missing_column_families = true;
    options.keep_log_file_num = 4;
    std::vector<rocksdb::ColumnFamilyDescriptor> cfs = {
        {rocksdb::kDefaultColumnFamilyName, {}}, {"users", {}}, {"points", {}}, {"events", {}}};
    std::vector<rocksdb::ColumnFamilyHandle*> handles;
    rocksdb::DB* db = nullptr;
    FP_RETURN_IF_ERROR(
        FromRocks(rocksdb::DB::Open(options, path, cfs, &handles, &db), "opening the dev store"));
    db_.reset(db);
    db_->DestroyColumnFamilyHandle(handles[0]);
    users_ = handles[1];
    points_ = handles[2];
    events_ = handles[3];
    return Status::Ok();
  }

  Status Put(const std::string& user, const wire::DevRun& run, int64_t now_unix_ms,
             bool* duplicate) override {
    std::lock_guard lock(mu_);  // the user's row is read, changed and written
    const std::string event_key = Prefix(user) + run.id();
    std::string ignored;
    rocksdb::Status g = db_->Get(rocksdb::ReadOptions(), events_, event_key, &ignored);
    if (g.ok()) {
      *duplicate = true;
      return Status::Ok();
    }
    if (!g.IsNotFound()) return FromRocks(g, "reading the events table");
    *duplicate = false;
    FP_ASSIGN_OR_RETURN(wire::DevUser row, UserLocked(user));
    row.set_runs(row.runs() + 1);
    row.set_events(row.events() + run.events());
    row.set_bytes(row.bytes() + run.file().size());
    row.set_last_upload_unix_ms(now_unix_ms);
    if (std::find(row.programs().begin(), row.programs().end(), run.program()) ==
        row.programs().end()) {
      row.add_programs(run.program());
    }
    wire::DevRun listed = run;
    listed.set_file_bytes(run.file().size());
    listed.clear_file();
    const std::string listed_bytes = listed.SerializeAsString();
    rocksdb::WriteBatch wb;
    for (const std::string& tag : run.tags()) {
      wb.Put(
          points_,
          Prefix(user) + tag + std::string(1, '\0') + BigEndian(run.started_unix_ns()) + run.id(),
          listed_bytes);
    }
    wb.Put(events_, event_key, run.SerializeAsString());
    wb.Put(users_, user, row.SerializeAsString());
    rocksdb::WriteOptions w;
    w.sync = true;  // acknowledged only when durable
    return FromRocks(db_->Write(w, &wb), "writing a developer's run");
  }

  Status Extend(const std::string& user, const wire::DevRun& part, int64_t now_unix_ms,
                bool* duplicate) override {
    std::lock_guard lock(mu_);
    const std::string event_key = Prefix(user) + part.id();
    std::string bytes;
    rocksdb::Status g = db_->Get(rocksdb::ReadOptions(), events_, event_key, &bytes);
    if (g.IsNotFound()) {
      return InvalidArgument("no run " + HexEncode(part.id()) + " to add to: send its first part");
    }
    if (!g.ok()) return FromRocks(g, "reading the events table");
    wire::DevRun have;
    if (!have.ParseFromString(bytes)) return DataLoss("a damaged row in the events table");
    FP_ASSIGN_OR_RETURN(std::optional<wire::DevRun> grown, GrowRun(have, part));
    *duplicate = !grown.has_value();
    if (*duplicate) return Status::Ok();
    FP_ASSIGN_OR_RETURN(wire::DevUser row, UserLocked(user));
    row.set_events(row.events() + grown->events() - std::min(grown->events(), have.events()));
    row.set_bytes(row.bytes() + grown->file().size() - have.file().size());
    row.set_last_upload_unix_ms(now_unix_ms);
    wire::DevRun listed = *grown;
    listed.set_file_bytes(grown->file().size());
    listed.clear_file();
    const std::string listed_bytes = listed.SerializeAsString();
    rocksdb::WriteBatch wb;
    for (const std::string& tag : grown->tags()) {
      wb.Put(points_,
             Prefix(user) + tag + std::string(1, '\0') + BigEndian(grown->started_unix_ns()) +
                 grown->id(),
             listed_bytes);
    }
    wb.Put(events_, event_key, grown->SerializeAsString());
    wb.Put(users_, user, row.SerializeAsString());
    rocksdb::WriteOptions w;
    w.sync = true;  // acknowledged only when durable
    return FromRocks(db_->Write(w, &wb), "writing a developer's run");
  }

  StatusOr<std::vector<DevTag>> Tags(const std::string& user) override {
    std::map<std::pair<std::string, std::string>, DevTag> tags;  // by (tag, program)
    const std::string prefix = Prefix(user);
    std::unique_ptr<rocksdb::Iterator> it(db_->NewIterator(rocksdb::ReadOptions(), points_));
    for (it->Seek(prefix); it->Valid() && it->key().starts_with(prefix); it->Next()) {
      const std::string_view rest(it->key().data() + prefix.size(),
                                  it->key().size() - prefix.size());
      const std::string tag(rest.substr(0, rest.find('\0')));
      wire::DevRun r;
      if (!r.ParseFromArray(it->value().data(), static_cast<int>(it->value().size()))) {
        return DataLoss("a damaged row in the points table");
      }
      DevTag& t = tags[{tag, r.program()}];
      t.tag = tag;
      t.program = r.program();
      ++t.runs;
      t.last_started_unix_ns = std::max(t.last_started_unix_ns, r.started_unix_ns());
    }
    if (!it->status().ok()) return FromRocks(it->status(), "reading the points table");
    std::vector<DevTag> out;
    for (auto& [key, t] : tags) out.push_back(std::move(t));
    std::stable_sort(out.begin(), out.end(), [](const DevTag& a, const DevTag& b) {
      return a.last_started_unix_ns > b.last_started_unix_ns;
    });
    return out;
  }

  StatusOr<std::vector<DevRunInfo>> Runs(const std::string& user, const std::string& tag,
                                         const std::string& program, int64_t from_ns,
                                         int64_t to_ns) override {
    const std::string prefix = Prefix(user) + tag + std::string(1, '\0');
    const std::string end = prefix + BigEndian(to_ns);
    std::vector<DevRunInfo> out;
    std::unique_ptr<rocksdb::Iterator> it(db_->NewIterator(rocksdb::ReadOptions(), points_));
    for (it->Seek(prefix + BigEndian(from_ns)); it->Valid() && it->key().compare(end) < 0;
         it->Next()) {
      wire::DevRun r;
      if (!r.ParseFromArray(it->value().data(), static_cast<int>(it->value().size()))) {
        return DataLoss("a damaged row in the points table");
      }
      if (!program.empty() && r.program() != program) continue;
      out.push_back(InfoOf(r));
    }
    if (!it->status().ok()) return FromRocks(it->status(), "reading the points table");
    return out;
  }

  StatusOr<wire::DevRun> Get(const std::string& user, const std::string& id) override {
    std::string raw;
    if (!HexDecode(id, &raw) || raw.size() != 16) return NotFound("no such run");
    std::string bytes;
    rocksdb::Status g = db_->Get(rocksdb::ReadOptions(), events_, Prefix(user) + raw, &bytes);
    if (g.IsNotFound()) return NotFound("no such run");
    if (!g.ok()) return FromRocks(g, "reading the events table");
    wire::DevRun r;
    if (!r.ParseFromString(bytes)) return DataLoss("a damaged row in the events table");
    return r;
  }

  StatusOr<wire::DevUser> User(const std::string& user) override {
    std::lock_guard lock(mu_);
    return UserLocked(user);
  }

 private:
  StatusOr<wire::DevUser> UserLocked(const std::string& user) {
    std::string bytes;
    rocksdb::Status g = db_->Get(rocksdb::ReadOptions(), users_, user, &bytes);
    wire::DevUser row;
    if (g.IsNotFound()) return row;
    if (!g.ok()) return FromRocks(g, "reading the users table");
    if (!row.ParseFromString(bytes)) return DataLoss("a damaged row in the users table");
    return row;
  }

  std::unique_ptr<rocksdb::DB> db_;
  rocksdb::ColumnFamilyHandle *users_ = nullptr, *points_ = nullptr, *events_ = nullptr;
  std::mutex mu_;
};

}  // namespace

StatusOr<std::optional<wire::DevRun>> GrowRun(const wire::DevRun& have, const wire::DevRun& part) {
  const std::string& kept = have.file();
  const std::string& bytes = part.file();
  if (part.offset() > kept.size()) {
    return InvalidArgument("a part at byte " + std::to_string(part.offset()) + " of run " +
                           HexEncode(part.id()) + ", which has " + std::to_string(kept.size()) +
                           ": a part before it is missing");
  }
  const size_t overlap = std::min<size_t>(bytes.size(), kept.size() - part.offset());
  if (kept.compare(part.offset(), overlap, bytes, 0, overlap) != 0) {
    return InvalidArgument("a part of run " + HexEncode(part.id()) +
                           " differs from the bytes kept at its offset");
  }
  if (overlap == bytes.size() && !(have.open() && !part.open())) {
    return std::optional<wire::DevRun>();  // all of it kept already
  }
  wire::DevRun grown = have;
  grown.mutable_file()->append(bytes, overlap, std::string::npos);
  for (const std::string& t : part.tags()) {
    if (std::find(grown.tags().begin(), grown.tags().end(), t) == grown.tags().end()) {
      grown.add_tags(t);
    }
  }
  grown.set_events(std::max(have.events(), part.events()));
  grown.set_open(part.open());
  grown.set_offset(0);
  return std::optional<wire::DevRun>(std::move(grown));
}

StatusOr<std::unique_ptr<DevStore>> OpenRocksDevStore(const std::string& path) {
  auto store = std::make_unique<RocksDevStore>();
  FP_RETURN_IF_ERROR(store->Open(path));
  return std::unique_ptr<DevStore>(std::move(store));
}

}  // namespace fieldprof::aggregator
