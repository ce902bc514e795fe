#include "common/snapshot/snapshot_index.h"

#include <fcntl.h>
#include <google/protobuf/io/coded_stream.h>
#include <google/protobuf/wire_format_lite.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cstring>
#include <filesystem>
#include <map>

#include "common/base/durable_file.h"

namespace fieldprof {

namespace {

namespace fs = std::filesystem;
using google::protobuf::internal::WireFormatLite;

constexpr char kMagic[] = "FPSIDX02";
// Entries of modules sort before every symbol: "\x01" + the module name
// (key rules keep control characters out of names).
constexpr char kModuleMark = '\x01';
constexpr size_t kSampleEvery = 64;
constexpr uint32_t kRecordsField = 4;  // Fragment.records

template <typename T>
void Put(std::string* out, T v) {
  char b[sizeof(T)];
  std::memcpy(b, &v, sizeof(T));
  out->append(b, sizeof(T));
}
void PutString16(std::string* out, std::string_view s) {
  Put<uint16_t>(out, static_cast<uint16_t>(s.size()));
  out->append(s);
}

// Reads from data_ with bounds checks; `ok` turns false past the end.
struct Reader {
  std::string_view d;
  size_t at;
  bool ok = true;
  template <typename T>
  T Get() {
    T v{};
    if (at + sizeof(T) > d.size()) {
      ok = false;
      return v;
    }
    std::memcpy(&v, d.data() + at, sizeof(T));
    at += sizeof(T);
    return v;
  }
  std::string_view String16() {
    const uint16_t n = Get<uint16_t>();
    if (!ok || at + n > d.size()) {
      ok = false;
      return {};
    }
    std::string_view s(d.data() + at, n);
    at += n;
    return s;
  }
};

struct Ref {
  uint32_t file;
  uint64_t offset;
  uint32_t length;
};

// One pass over the fragments: each record's place, by symbol.
StatusOr<std::string> Build(const SnapshotCache& cache, const std::string& signature) {
  const std::vector<CachedFragment> frags = cache.Fragments();
  std::map<std::string, std::vector<Ref>> refs;
  for (uint32_t i = 0; i < frags.size(); ++i) {
    FP_ASSIGN_OR_RETURN(std::string bytes, ReadWholeFile(frags[i].path));
    google::protobuf::io::CodedInputStream in(reinterpret_cast<const uint8_t*>(bytes.data()),
                                              static_cast<int>(bytes.size()));
    in.SetTotalBytesLimit(INT32_MAX);
    const std::string damaged =
        frags[i].path + " is damaged (run fieldprof pull --all to fetch it again)";
    while (true) {
      const uint32_t tag = in.ReadTag();
      if (tag == 0) break;
      if (WireFormatLite::GetTagFieldNumber(tag) != kRecordsField ||
          WireFormatLite::GetTagWireType(tag) != WireFormatLite::WIRETYPE_LENGTH_DELIMITED) {
        if (!WireFormatLite::SkipField(&in, tag)) return DataLoss(damaged);
        continue;
      }
      uint32_t len = 0;
      if (!in.ReadVarint32(&len)) return DataLoss(damaged);
      const uint64_t offset = static_cast<uint64_t>(in.CurrentPosition());
      if (offset + len > bytes.size()) return DataLoss(damaged);
      wire::Record r;
      if (!r.ParseFromArray(bytes.data() + offset, static_cast<int>(len))) {
        return DataLoss(damaged);
      }
      if (!in.Skip(static_cast<int>(len))) return DataLoss(damaged);
      const std::string& sym = r.key().symbol();
      if (sym.empty() || sym.size() > UINT16_MAX) continue;
      refs[sym].push_back({i, offset, len});
      const std::string& module = r.key().module();
      if (!module.empty() && module.size() < UINT16_MAX) {
        refs[kModuleMark + module].push_back({i, offset, len});
      }
    }
  }
  std::string out(kMagic, 8);
  Put<uint32_t>(&out, static_cast<uint32_t>(signature.size()));
  out += signature;
  Put<uint32_t>(&out, static_cast<uint32_t>(frags.size()));
  for (const CachedFragment& f : frags) PutString16(&out, fs::path(f.path).filename().string());
  Put<uint64_t>(&out, refs.size());
  uint64_t modules = 0;
  for (auto it = refs.begin(); it != refs.end() && it->first[0] == kModuleMark; ++it) ++modules;
  Put<uint64_t>(&out, modules);
  const size_t sample_offset_at = out.size();
  Put<uint64_t>(&out, 0);  // filled below
  std::vector<uint64_t> samples;
  size_t n = 0;
  for (const auto& [sym, rs] : refs) {
    if (n++ % kSampleEvery == 0) samples.push_back(out.size());
    PutString16(&out, sym);
    Put<uint32_t>(&out, static_cast<uint32_t>(rs.size()));
    for (const Ref& r : rs) {
      Put<uint32_t>(&out, r.file);
      Put<uint64_t>(&out, r.offset);
      Put<uint32_t>(&out, r.length);
    }
  }
  const uint64_t table = out.size();
  std::memcpy(out.data() + sample_offset_at, &table, sizeof table);
  Put<uint64_t>(&out, samples.size());
  for (uint64_t s : samples) Put<uint64_t>(&out, s);
  return out;
}

}  // namespace

std::string SnapshotIndex::CacheSignature(const std::string& dir) {
  std::string sig;
  struct stat st {};
  if (stat((dir + "/manifest.signed").c_str(), &st) == 0) {
    sig += std::to_string(st.st_size) + "@" + std::to_string(st.st_mtim.tv_sec) + "." +
           std::to_string(st.st_mtim.tv_nsec) + ";";
  }
  std::vector<std::string> names;
  std::error_code ec;
  for (const auto& e : fs::directory_iterator(dir + "/fragments", ec)) {
    names.push_back(e.path().filename().string());
  }
  std::sort(names.begin(), names.end());
  for (const std::string& n : names) sig += n + ";";
  return sig;
}

StatusOr<SnapshotIndex> SnapshotIndex::Open(const SnapshotCache& cache, bool* rebuilt) {
  if (rebuilt != nullptr) *rebuilt = false;
  FP_ASSIGN_OR_RETURN(wire::Manifest manifest, cache.Manifest());
  SnapshotIndex ix;
  ix.dir_ = cache.dir();
  const std::string sig = CacheSignature(cache.dir());
  const std::string path = cache.dir() + "/symbols.idx";
  // Mapped, not read: a lookup touches the few pages it needs.
  const int fd = open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd >= 0) {
    struct stat st {};
    if (fstat(fd, &st) == 0 && st.st_size > 0) {
      const size_t size = static_cast<size_t>(st.st_size);
      void* p = mmap(nullptr, size, PROT_READ, MAP_PRIVATE, fd, 0);
      if (p != MAP_FAILED) {
        ix.hold_ = std::shared_ptr<const void>(
            p, [size](const void* q) { munmap(const_cast<void*>(q), size); });
        ix.data_ = std::string_view(static_cast<const char*>(p), size);
      }
    }
    close(fd);
    if (!ix.data_.empty() && ix.Parse().ok() && ix.signature_ == sig) return ix;
  }
  // Missing, damaged or out of date: built again.
  FP_ASSIGN_OR_RETURN(std::string built, Build(cache, sig));
  auto bytes = std::make_shared<const std::string>(std::move(built));
  ix.hold_ = bytes;
  ix.data_ = *bytes;
  FP_RETURN_IF_ERROR(ix.Parse());
  if (rebuilt != nullptr) *rebuilt = true;
  // A cache this user cannot write keeps the index in memory only.
  (void)WriteFileDurably(path, *bytes);
  return ix;
}

Status SnapshotIndex::Parse() {
  const Status bad = DataLoss(dir_ + "/symbols.idx is damaged");
  if (data_.size() < 8 || data_.compare(0, 8, kMagic, 8) != 0) return bad;
  Reader r{data_, 8};
  const uint32_t siglen = r.Get<uint32_t>();
  if (!r.ok || r.at + siglen > data_.size()) return bad;
  signature_ = std::string(data_.substr(r.at, siglen));
  r.at += siglen;
  const uint32_t nfiles = r.Get<uint32_t>();
  files_.clear();
  for (uint32_t i = 0; i < nfiles && r.ok; ++i) {
    files_.push_back(dir_ + "/fragments/" + std::string(r.String16()));
  }
  symbols_ = r.Get<uint64_t>();
  modules_ = r.Get<uint64_t>();
  const uint64_t table = r.Get<uint64_t>();
  if (modules_ > symbols_) return bad;
  entries_at_ = r.at;
  if (!r.ok || table < entries_at_ || table > data_.size()) return bad;
  table_at_ = static_cast<size_t>(table);
  Reader t{data_, static_cast<size_t>(table)};
  const uint64_t nsamples = t.Get<uint64_t>();
  if (!t.ok || nsamples > data_.size() / 8) return bad;
  samples_.clear();
  for (uint64_t i = 0; i < nsamples && t.ok; ++i) {
    const uint64_t s = t.Get<uint64_t>();
    if (s < entries_at_ || s >= table) return bad;
    samples_.push_back(s);
  }
  if (!t.ok) return bad;
  return Status::Ok();
}

std::string_view SnapshotIndex::SymbolAt(size_t at, size_t* refs_at) const {
  Reader r{data_, at};
  std::string_view s = r.String16();
  *refs_at = r.ok ? r.at : data_.size();
  return s;
}

Status SnapshotIndex::ForEachRecordOf(const std::string& symbol,
                                      const std::function<bool(const wire::Record&)>& fn) const {
  if (symbol.empty() || symbol[0] == kModuleMark) return Status::Ok();
  return ForEachRecordAt(symbol, false, fn);
}

Status SnapshotIndex::ForEachRecordOfModule(
    const std::string& module, const std::function<bool(const wire::Record&)>& fn) const {
  if (module.empty()) return Status::Ok();
  return ForEachRecordAt(kModuleMark + module, false, fn);
}

Status SnapshotIndex::ForEachRecordWithPrefix(
    const std::string& prefix, const std::function<bool(const wire::Record&)>& fn) const {
  if (prefix.empty() || prefix[0] == kModuleMark) return Status::Ok();
  return ForEachRecordAt(prefix, true, fn);
}

Status SnapshotIndex::ForEachRecordAt(const std::string& key, bool prefix,
                                      const std::function<bool(const wire::Record&)>& fn) const {
  const bool by_module = key[0] == kModuleMark;
  if (samples_.empty()) return Status::Ok();
  // The last sample at or before the key; entries are sorted, so the
  // matching ones follow it in a row (at most one for an exact key).
  size_t lo = 0, hi = samples_.size();
  while (hi - lo > 1) {
    const size_t mid = (lo + hi) / 2;
    size_t ignored;
    if (SymbolAt(samples_[mid], &ignored) <= key) {
      lo = mid;
    } else {
      hi = mid;
    }
  }
  Reader r{data_, static_cast<size_t>(samples_[lo])};
  int fd = -1;
  uint32_t open_file = UINT32_MAX;
  Status status = Status::Ok();
  bool more = true;
  while (more && status.ok() && r.ok && r.at < table_at_) {
    const std::string_view s = r.String16();
    const uint32_t nrefs = r.Get<uint32_t>();
    if (!r.ok) break;
    if (s < key) {
      r.at += static_cast<size_t>(nrefs) * 16;
      continue;
    }
    if (prefix ? s.substr(0, key.size()) != key : s != key) break;
    for (uint32_t i = 0; i < nrefs && r.ok && more; ++i) {
      const uint32_t file = r.Get<uint32_t>();
      const uint64_t offset = r.Get<uint64_t>();
      const uint32_t length = r.Get<uint32_t>();
      if (!r.ok || file >= files_.size()) {
        status = DataLoss(dir_ + "/symbols.idx is damaged");
        break;
      }
      if (file != open_file) {
        if (fd >= 0) close(fd);
        fd = open(files_[file].c_str(), O_RDONLY | O_CLOEXEC);
        open_file = file;
        if (fd < 0) {
          status = NotFound(files_[file] + ": " + std::strerror(errno) +
                            " (the cache changed while it was read: try again)");
          break;
        }
      }
      std::string bytes(length, '\0');
      wire::Record rec;
      if (pread(fd, bytes.data(), length, static_cast<off_t>(offset)) !=
              static_cast<ssize_t>(length) ||
          !rec.ParseFromString(bytes) ||
          (by_module ? kModuleMark + rec.key().module() : rec.key().symbol()) != s) {
        // The index is wrong for this cache (damaged in a way Parse cannot
        // see): removed, so the next reader builds it afresh.
        unlink((dir_ + "/symbols.idx").c_str());
        status = DataLoss(files_[file] +
                          " does not hold what symbols.idx says; the index is "
                          "removed and rebuilt on the next call");
        break;
      }
      more = fn(rec);
    }
    if (!prefix) break;
  }
  if (fd >= 0) close(fd);
  return status;
}

void SnapshotIndex::ForEachSymbol(const std::function<void(std::string_view)>& fn) const {
  Reader r{data_, entries_at_};
  for (uint64_t i = 0; i < symbols_ && r.ok; ++i) {
    const std::string_view s = r.String16();
    const uint32_t nrefs = r.Get<uint32_t>();
    if (!r.ok) break;
    if (i >= modules_) fn(s);  // modules' entries come first
    r.at += static_cast<size_t>(nrefs) * 16;
  }
}

}  // namespace fieldprof
