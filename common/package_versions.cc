#include "common/package_versions.h"

#include <dirent.h>
#include <elfutils/libdwelf.h>
#include <fcntl.h>
#include <libelf.h>
#include <sys/stat.h>
#include <unistd.h>

#include <fstream>
#include <string_view>

#include "common/module_version.h"

namespace fieldprof {

namespace {

// Files a key can name: shared objects and programs. The rest of the
// lists (documentation, data, headers) is most of their lines.
bool MayBeModule(std::string_view path) {
  if (path.find(".so") != std::string_view::npos) return true;
  for (std::string_view dir : {"/bin/", "/sbin/", "/usr/bin/", "/usr/sbin/", "/usr/libexec/",
                               "/usr/games/", "/usr/lib/"}) {
    if (path.starts_with(dir)) return true;
  }
  return false;
}

}  // namespace

std::string FileBuildId(const std::string& path) {
  const int fd = open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) return {};
  elf_version(EV_CURRENT);
  std::string out;
  if (Elf* elf = elf_begin(fd, ELF_C_READ_MMAP, nullptr); elf != nullptr) {
    const void* id = nullptr;
    const ssize_t n = dwelf_elf_gnu_build_id(elf, &id);
    static const char kHex[] = "0123456789abcdef";
    for (ssize_t i = 0; i < n; ++i) {
      const auto b = static_cast<const unsigned char*>(id)[i];
      out += kHex[b >> 4];
      out += kHex[b & 15];
    }
    elf_end(elf);
  }
  close(fd);
  return out;
}

PackageVersions::PackageVersions(std::string dpkg_dir) : dir_(std::move(dpkg_dir)) {}

bool PackageVersions::DatabaseChanged() {
  struct stat st {};
  const std::string status = dir_ + "/status";
  const int64_t stamp = stat(status.c_str(), &st) == 0
                            ? static_cast<int64_t>(st.st_mtim.tv_sec) * 1000000000 +
                                  st.st_mtim.tv_nsec + static_cast<int64_t>(st.st_size)
                            : -1;
  if (loaded_ && stamp == stamp_) return false;
  stamp_ = stamp;
  return true;
}

void PackageVersions::Load() {
  loaded_ = true;
  files_.clear();
  version_of_.clear();
  // Which package installed which file: info/NAME[:ARCH].list.
  const std::string info = dir_ + "/info";
  if (DIR* d = opendir(info.c_str()); d != nullptr) {
    while (const dirent* e = readdir(d)) {
      const std::string_view name = e->d_name;
      if (!name.ends_with(".list")) continue;
      const std::string package(name.substr(0, name.size() - 5));
      std::ifstream in(info + "/" + std::string(name));
      for (std::string line; std::getline(in, line);) {
        if (!MayBeModule(line)) continue;
        const size_t slash = line.rfind('/');
        if (slash == std::string::npos || slash + 1 == line.size()) continue;
        files_[line.substr(slash + 1)].emplace_back(line, package);
      }
    }
    closedir(d);
  }
  // Each installed package's version: status, paragraphs of "Field: value".
  std::ifstream status(dir_ + "/status");
  std::string package, arch, version, state;
  auto flush = [&] {
    if (!package.empty() && !version.empty() && state.ends_with(" installed")) {
      version_of_[package] = version;
      if (!arch.empty()) version_of_[package + ":" + arch] = version;
    }
    package.clear(), arch.clear(), version.clear(), state.clear();
  };
  for (std::string line; std::getline(status, line);) {
    if (line.empty()) {
      flush();
    } else if (line.starts_with("Package: ")) {
      package = line.substr(9);
    } else if (line.starts_with("Architecture: ")) {
      arch = line.substr(14);
    } else if (line.starts_with("Version: ")) {
      version = line.substr(9);
    } else if (line.starts_with("Status: ")) {
      state = line.substr(8);
    }
  }
  flush();
}

std::string PackageVersions::KeyVersion(const std::string& module, const std::string& build_id) {
  if (!IsBuildId(build_id)) return build_id;  // already a version, or "unknown"
  const auto key = std::make_pair(module, build_id);
  if (auto it = memo_.find(key); it != memo_.end()) return it->second;
  // A module not seen before: read the database again if dpkg changed it
  // since (an upgrade installs a new build under a new version). What was
  // answered stays right: a build id names one build.
  if (DatabaseChanged()) Load();
  std::string result = build_id;
  if (auto f = files_.find(module); f != files_.end()) {
    for (const auto& [path, package] : f->second) {
      if (FileBuildId(path) != build_id) continue;
      auto v = version_of_.find(package);
      if (v == version_of_.end()) continue;
      const std::string joined = JoinModuleVersion(v->second, build_id);
      if (joined.empty()) continue;
      result = joined;
      break;
    }
  }
  ++(result == build_id ? not_found_ : found_);
  memo_.emplace(key, result);
  return result;
}

void PackageVersions::ApplyToKey(wire::ApiKey* k) {
  const std::string v = KeyVersion(k->module(), k->module_version());
  if (v != k->module_version()) k->set_module_version(v);
}

void PackageVersions::Apply(wire::RunRecord* run) {
  auto* records = run->mutable_records();
  for (int i = 0; i < records->size();) {
    wire::ApiKey* k = records->Mutable(i)->mutable_key();
    const std::string before = k->module_version();
    ApplyToKey(k);
    // A stack's frames are kept only for a module a package holds.
    if (k->metric() == wire::METRIC_STACK_CPU_NS && k->module_version() == before) {
      records->DeleteSubrange(i, 1);
      continue;
    }
    ++i;
  }
}

void DropStackRecords(wire::RunRecord* run) {
  auto* records = run->mutable_records();
  for (int i = 0; i < records->size();) {
    if (records->Get(i).key().metric() == wire::METRIC_STACK_CPU_NS) {
      records->DeleteSubrange(i, 1);
    } else {
      ++i;
    }
  }
}

void PackageVersions::Apply(wire::LabProfile* profile) {
  for (wire::Record& r : *profile->mutable_records()) ApplyToKey(r.mutable_key());
  for (wire::ApiKey& k : *profile->mutable_apis()) ApplyToKey(&k);
}

}  // namespace fieldprof
