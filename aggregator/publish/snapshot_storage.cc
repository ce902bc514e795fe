#include "aggregator/publish/snapshot_storage.h"

#include <fcntl.h>
#include <sys/stat.h>

#include <cinttypes>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <sstream>

#include "common/base/durable_file.h"

namespace fieldprof::aggregator {
namespace {

namespace fs = std::filesystem;

class LocalStorage : public SnapshotStorage {
 public:
  explicit LocalStorage(std::string dir) : dir_(std::move(dir)) {}

  StatusOr<std::string> ReadManifest() override { return ReadWholeFile(dir_ + "/manifest.signed"); }

  StatusOr<std::string> ReadFragment(uint32_t index, uint64_t version) override {
    return ReadWholeFile(Path(index, version));
  }

  Status WriteFragment(uint32_t index, uint64_t version, const std::string& bytes) override {
    const std::string path = Path(index, version);
    if (fs::exists(path)) return Status::Ok();
    return WriteFileDurably(path, bytes);
  }

  Status WriteManifest(uint64_t, const std::string& signed_manifest,
                       const std::set<std::pair<uint32_t, uint64_t>>& replaced) override {
    // A replaced version is kept for keep_old from now: its mtime says when
    // (it was written, maybe long ago).
    for (const auto& [index, version] : replaced) {
      const timespec times[2] = {{0, UTIME_NOW}, {0, UTIME_NOW}};
      ::utimensat(AT_FDCWD, Path(index, version).c_str(), times, 0);
    }
    return WriteFileDurably(dir_ + "/manifest.signed", signed_manifest);
  }

  void RemoveOld(const std::set<std::pair<uint32_t, uint64_t>>& current,
                 std::chrono::milliseconds keep_old) override {
    std::set<std::string> keep;
    for (const auto& [index, version] : current) keep.insert(Path(index, version));
    const auto now = std::chrono::system_clock::now().time_since_epoch();
    const int64_t now_ms = std::chrono::duration_cast<std::chrono::milliseconds>(now).count();
    std::error_code ec;
    for (const auto& e : fs::directory_iterator(dir_ + "/fragments", ec)) {
      const std::string path = e.path().string();
      if (keep.count(path) != 0) continue;
      struct stat st;
      if (::stat(path.c_str(), &st) != 0) continue;
      const int64_t mtime_ms = int64_t{st.st_mtim.tv_sec} * 1000 + st.st_mtim.tv_nsec / 1000000;
      if (now_ms - mtime_ms > keep_old.count()) fs::remove(path, ec);
    }
  }

  std::string Describe() const override { return dir_; }

 private:
  std::string Path(uint32_t index, uint64_t version) const {
    char name[64];
    std::snprintf(name, sizeof name, "/fragments/%u-%016" PRIx64 ".frag", index, version);
    return dir_ + name;
  }

  const std::string dir_;
};

}  // namespace

StatusOr<std::unique_ptr<SnapshotStorage>> OpenLocalSnapshotStorage(const std::string& dir) {
  if (dir.empty()) return InvalidArgument("no snapshot directory");
  FP_RETURN_IF_ERROR(MakeDirs(dir + "/fragments"));
  return std::unique_ptr<SnapshotStorage>(std::make_unique<LocalStorage>(dir));
}

}  // namespace fieldprof::aggregator
