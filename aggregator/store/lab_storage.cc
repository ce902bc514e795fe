#include "aggregator/store/lab_storage.h"

#include <algorithm>
#include <atomic>
#include <cstring>
#include <filesystem>
#include <sstream>

#include "common/base/durable_file.h"

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

}  // namespace

std::unique_ptr<LabStorage> LocalLabStorage(std::string dir) {
  return std::make_unique<Local>(std::move(dir));
}

}  // namespace fieldprof::aggregator
