#include "common/spool/outbox.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <random>
#include <sstream>
#include <string_view>

#include "common/base/crash_point.h"
#include "common/base/durable_file.h"
#include "common/wire/wire.h"

namespace fieldprof {

namespace fs = std::filesystem;

namespace {

Status Errno(const std::string& what) { return IOError(what + ": " + std::strerror(errno)); }

bool EndsWith(const std::string& s, const std::string& suffix) {
  return s.size() >= suffix.size() &&
         s.compare(s.size() - suffix.size(), suffix.size(), suffix) == 0;
}

StatusOr<std::string> ReadWhole(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) return NotFound(path + ": " + std::strerror(errno));
  std::ostringstream buf;
  buf << in.rdbuf();
  if (in.bad()) return IOError(path + ": read failed");
  return buf.str();
}

// Removes `path`; a file already gone is fine (recovery repeats steps).
Status RemoveFile(const std::string& path) {
  if (::unlink(path.c_str()) != 0 && errno != ENOENT) return Errno("cannot remove " + path);
  return Status::Ok();
}

}  // namespace

std::string OutboxName(int64_t created_unix_ms, const std::string& batch_id) {
  std::string ms = std::to_string(std::max<int64_t>(created_unix_ms, 0));
  if (ms.size() < 13) ms.insert(0, 13 - ms.size(), '0');
  return ms + "-" + HexEncode(batch_id);
}

Outbox::Outbox(std::string dir, std::string quarantine_dir, std::string held_dir)
    : dir_(std::move(dir)),
      quarantine_dir_(std::move(quarantine_dir)),
      held_dir_(std::move(held_dir)) {}

Status Outbox::Init() {
  FP_RETURN_IF_ERROR(MakeDirs(dir_));
  if (!held_dir_.empty()) FP_RETURN_IF_ERROR(MakeDirs(held_dir_));
  return MakeDirs(quarantine_dir_);
}

namespace {

// A .consumed file's lines: spool names, then "held-taken NAME" and
// "held-made NAME" (spool and held names have no spaces or slashes).
constexpr std::string_view kHeldTaken = "held-taken ";
constexpr std::string_view kHeldMade = "held-made ";

bool PlainName(std::string_view n) {
  return !n.empty() && n.find('/') == std::string_view::npos && n != "." && n != "..";
}

}  // namespace

Status Outbox::Recover(const std::string& spool_dir) {
  std::error_code ec;
  std::vector<std::string> consumed_files;
  for (const auto& e : fs::directory_iterator(dir_, ec)) {
    const std::string name = e.path().filename().string();
    if (name.find(".tmp-") != std::string::npos) {
      // A write cut short: never renamed, so never part of a seal.
      FP_RETURN_IF_ERROR(RemoveFile(e.path().string()));
    } else if (EndsWith(name, ".consumed")) {
      consumed_files.push_back(name.substr(0, name.size() - 9));
    }
  }
  if (ec) return IOError("cannot read outbox " + dir_ + ": " + ec.message());
  if (!held_dir_.empty()) {
    for (const auto& e : fs::directory_iterator(held_dir_, ec)) {
      if (e.path().filename().string().find(".tmp-") != std::string::npos) {
        FP_RETURN_IF_ERROR(RemoveFile(e.path().string()));
      }
    }
    ec.clear();
  }
  for (const std::string& name : consumed_files) {
    const std::string list_path = dir_ + "/" + name + ".consumed";
    const bool sealed = fs::exists(dir_ + "/" + name + ".batch", ec);
    FP_ASSIGN_OR_RETURN(std::string list, ReadWhole(list_path));
    std::istringstream lines(list);
    std::string line;
    bool held_changed = false;
    while (std::getline(lines, line)) {
      std::string_view l = line;
      const bool made = l.substr(0, kHeldMade.size()) == kHeldMade;
      if (made || l.substr(0, kHeldTaken.size()) == kHeldTaken) {
        l.remove_prefix(made ? kHeldMade.size() : kHeldTaken.size());
        // Sealed: the taken files are in the batch or the made one. Not
        // sealed: the made file goes, the taken ones stay.
        if (PlainName(l) && !held_dir_.empty() && made != sealed) {
          FP_RETURN_IF_ERROR(RemoveFile(held_dir_ + "/" + std::string(l)));
          held_changed = true;
        }
      } else if (sealed && PlainName(l)) {
        // Sealed, but the spool files were not all deleted yet.
        FP_RETURN_IF_ERROR(RemoveFile(spool_dir + "/" + line));
      }
    }
    if (sealed) FP_RETURN_IF_ERROR(SyncDir(spool_dir));
    if (held_changed) FP_RETURN_IF_ERROR(SyncDir(held_dir_));
    FP_RETURN_IF_ERROR(RemoveFile(list_path));
  }
  if (!consumed_files.empty()) FP_RETURN_IF_ERROR(SyncDir(dir_));
  return Status::Ok();
}

Status Outbox::Seal(const std::string& name, const std::string& batch_bytes,
                    const std::string& spool_dir, const std::vector<std::string>& consumed,
                    const HeldChange& held) {
  const bool holds = !held.taken.empty() || !held.made_name.empty();
  if (holds && held_dir_.empty()) return InvalidArgument("this outbox holds no records");
  std::string list;
  for (const std::string& c : consumed) list += c + "\n";
  for (const std::string& t : held.taken) list += std::string(kHeldTaken) + t + "\n";
  if (!held.made_name.empty()) list += std::string(kHeldMade) + held.made_name + "\n";
  const std::string list_path = dir_ + "/" + name + ".consumed";
  FP_RETURN_IF_ERROR(WriteFileDurably(list_path, list));
  CrashPoint("seal-listed");
  if (!held.made_name.empty()) {
    FP_RETURN_IF_ERROR(WriteFileDurably(held_dir_ + "/" + held.made_name, held.made_bytes));
    CrashPoint("seal-held");
  }
  FP_RETURN_IF_ERROR(WriteFileDurably(dir_ + "/" + name + ".batch", batch_bytes));
  CrashPoint("seal-batched");
  for (const std::string& c : consumed) {
    FP_RETURN_IF_ERROR(RemoveFile(spool_dir + "/" + c));
    CrashPoint("seal-spool-removing");
  }
  FP_RETURN_IF_ERROR(SyncDir(spool_dir));
  for (const std::string& t : held.taken) FP_RETURN_IF_ERROR(RemoveFile(held_dir_ + "/" + t));
  if (!held.taken.empty()) {
    CrashPoint("seal-held-removed");
    FP_RETURN_IF_ERROR(SyncDir(held_dir_));
  }
  FP_RETURN_IF_ERROR(RemoveFile(list_path));
  return Status::Ok();
}

StatusOr<std::vector<OutboxEntry>> Outbox::List() const {
  std::vector<OutboxEntry> out;
  std::error_code ec;
  for (const auto& e : fs::directory_iterator(dir_, ec)) {
    const std::string name = e.path().filename().string();
    if (!EndsWith(name, ".batch")) continue;
    struct stat st;
    if (::stat(e.path().c_str(), &st) != 0 || !S_ISREG(st.st_mode)) continue;
    out.push_back(
        {name.substr(0, name.size() - 6), e.path().string(), static_cast<uint64_t>(st.st_size)});
  }
  if (ec && ec != std::errc::no_such_file_or_directory) {
    return IOError("cannot read outbox " + dir_ + ": " + ec.message());
  }
  std::sort(out.begin(), out.end(),
            [](const OutboxEntry& a, const OutboxEntry& b) { return a.name < b.name; });
  return out;
}

StatusOr<std::string> Outbox::Read(const OutboxEntry& e) const { return ReadWhole(e.path); }

Status Outbox::Remove(const OutboxEntry& e) {
  FP_RETURN_IF_ERROR(RemoveFile(e.path));
  return SyncDir(dir_);
}

Status Outbox::Quarantine(const OutboxEntry& e, const std::string& reason) {
  FP_RETURN_IF_ERROR(WriteFileDurably(quarantine_dir_ + "/" + e.name + ".reason", reason + "\n"));
  const std::string to = quarantine_dir_ + "/" + e.name + ".batch";
  if (::rename(e.path.c_str(), to.c_str()) != 0) return Errno("cannot move " + e.path);
  FP_RETURN_IF_ERROR(SyncDir(quarantine_dir_));
  return SyncDir(dir_);
}

StatusOr<OutboxEntry> Outbox::Rewrite(const OutboxEntry& e, const std::string& new_name,
                                      const std::string& batch_bytes) {
  // The content first, under the old name (a rename over it): a crash
  // leaves a whole batch with the old or the new bytes, and the temporary
  // file, if any, goes in Recover.
  FP_RETURN_IF_ERROR(WriteFileDurably(e.path, batch_bytes));
  CrashPoint("rewrite-written");
  OutboxEntry moved{new_name, dir_ + "/" + new_name + ".batch", batch_bytes.size()};
  if (new_name != e.name) {
    if (::rename(e.path.c_str(), moved.path.c_str()) != 0) return Errno("cannot rename " + e.path);
    FP_RETURN_IF_ERROR(SyncDir(dir_));
  }
  return moved;
}

}  // namespace fieldprof
