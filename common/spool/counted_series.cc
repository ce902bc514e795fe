#include "common/spool/counted_series.h"

#include <algorithm>
#include <cstring>

#include "common/base/durable_file.h"

namespace fieldprof {

namespace {

constexpr char kMagic[8] = {'F', 'P', 'C', 'O', 'U', 'N', 'T', '1'};

void Fnv(uint64_t* h, std::string_view s) {
  for (unsigned char c : s) *h = (*h ^ c) * 1099511628211ull;
  *h = (*h ^ 0xffu) * 1099511628211ull;  // a separator no string holds
}

void Fnv(uint64_t* h, uint64_t v) {
  for (int i = 0; i < 8; ++i) *h = (*h ^ ((v >> (8 * i)) & 0xff)) * 1099511628211ull;
}

}  // namespace

uint64_t SeriesHash(const wire::ApiKey& key, const Platform& batch_platform) {
  uint64_t h = 14695981039346656037ull;
  Fnv(&h, key.module());
  Fnv(&h, key.module_version());
  Fnv(&h, key.symbol());
  Fnv(&h, static_cast<uint64_t>(key.metric()));
  const bool own = key.has_platform();
  Fnv(&h, static_cast<uint64_t>(own ? key.platform().os() : batch_platform.os));
  Fnv(&h, static_cast<uint64_t>(own ? key.platform().arch() : batch_platform.arch));
  Fnv(&h, static_cast<uint64_t>(own ? key.platform().cpu_vendor() : batch_platform.cpu_vendor));
  Fnv(&h, static_cast<uint64_t>(own ? key.platform().cpu_family() : batch_platform.cpu_family));
  return h;
}

Status CountedSeries::Load() {
  hashes_.clear();
  reset_.clear();
  StatusOr<std::string> bytes = ReadWholeFile(path_);
  if (!bytes.ok()) {
    if (bytes.status().code() == StatusCode::kNotFound) return Status::Ok();
    return bytes.status();
  }
  const std::string& b = *bytes;
  if (b.size() < sizeof kMagic || std::memcmp(b.data(), kMagic, sizeof kMagic) != 0 ||
      (b.size() - sizeof kMagic) % 8 != 0) {
    reset_ = path_ + " did not read (" + std::to_string(b.size()) + " bytes): started afresh";
    return Status::Ok();
  }
  hashes_.resize((b.size() - sizeof kMagic) / 8);
  std::memcpy(hashes_.data(), b.data() + sizeof kMagic, hashes_.size() * 8);
  if (!std::is_sorted(hashes_.begin(), hashes_.end())) {
    std::sort(hashes_.begin(), hashes_.end());
  }
  hashes_.erase(std::unique(hashes_.begin(), hashes_.end()), hashes_.end());
  return Status::Ok();
}

bool CountedSeries::MarkFirst(uint64_t hash, std::vector<uint64_t>* fresh) const {
  if (std::binary_search(hashes_.begin(), hashes_.end(), hash)) return false;
  if (std::find(fresh->begin(), fresh->end(), hash) != fresh->end()) return false;
  fresh->push_back(hash);
  return true;
}

Status CountedSeries::Commit(const std::vector<uint64_t>& fresh) {
  if (fresh.empty()) return Status::Ok();
  std::vector<uint64_t> next = hashes_;
  next.insert(next.end(), fresh.begin(), fresh.end());
  std::sort(next.begin(), next.end());
  next.erase(std::unique(next.begin(), next.end()), next.end());
  std::string out(kMagic, sizeof kMagic);
  out.append(reinterpret_cast<const char*>(next.data()), next.size() * 8);
  FP_RETURN_IF_ERROR(WriteFileDurably(path_, out, FileAccess::kPrivate));
  hashes_ = std::move(next);
  return Status::Ok();
}

}  // namespace fieldprof
