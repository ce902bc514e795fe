#include "aggregator/store/machine_sketch.h"

#include <openssl/sha.h>
#include <sodium.h>

#include <algorithm>
#include <bit>
#include <cmath>

#include "common/base/encoding.h"

namespace fieldprof::aggregator {
namespace {

// Sketches of entries derived per series (SeriesEntry). Tags 1 and 2 were
// sketches of day keys' hashes, the same in every series a machine sent
// that day: they counted machine-days, and joined a machine's series. A
// store written before reads them as empty (the agents, upgraded, count
// their machine in each series once more, from scratch).
constexpr uint8_t kSparseTag = 3;
constexpr uint8_t kDenseTag = 4;
constexpr uint8_t kDayKeySparseTag = 1;
constexpr uint8_t kDayKeyDenseTag = 2;
constexpr uint32_t kDenseRegisters = 1u << MachineSketch::kDenseBits;
constexpr int kSparseMaxRank = 64 - MachineSketch::kSparseBits + 1;  // 40
constexpr int kDenseMaxRank = 64 - MachineSketch::kDenseBits + 1;    // 53

uint32_t IndexOf(uint32_t entry) { return entry >> 6; }
uint8_t RankOf(uint32_t entry) { return static_cast<uint8_t>(entry & 63); }

// A sparse entry's register and rank at the dense precision: the dense
// index is the top 12 of its 25 index bits; the rank counts on into the
// other 13, and past them into the sparse rank.
void DenseOf(uint32_t entry, uint32_t* index, uint8_t* rank) {
  constexpr int kExtra = MachineSketch::kSparseBits - MachineSketch::kDenseBits;  // 13
  const uint32_t low = IndexOf(entry) & ((1u << kExtra) - 1);
  *index = IndexOf(entry) >> kExtra;
  *rank = low != 0 ? static_cast<uint8_t>(kExtra - std::bit_width(low) + 1)
                   : static_cast<uint8_t>(kExtra + RankOf(entry));
}

}  // namespace

MachineSecret MachineSecretOf(std::string_view machine_key) {
  unsigned char digest[SHA256_DIGEST_LENGTH];
  SHA256(reinterpret_cast<const unsigned char*>(machine_key.data()), machine_key.size(), digest);
  MachineSecret s;
  std::copy(digest, digest + s.size(), s.begin());
  return s;
}

uint64_t SeriesEntry(const MachineSecret& secret, EntryKind kind, std::string_view series_key) {
  static_assert(crypto_shorthash_siphash24_KEYBYTES == sizeof(MachineSecret));
  // One call over kind and key, without copying a long key: SipHash's
  // state is not exposed, so the kind goes in front in a small buffer.
  unsigned char buf[512];
  std::string big;
  const unsigned char* in = buf;
  const size_t n = series_key.size() + 1;
  if (n <= sizeof buf) {
    buf[0] = static_cast<unsigned char>(kind);
    std::copy(series_key.begin(), series_key.end(), buf + 1);
  } else {
    big.reserve(n);
    big.push_back(static_cast<char>(kind));
    big.append(series_key);
    in = reinterpret_cast<const unsigned char*>(big.data());
  }
  unsigned char out[crypto_shorthash_siphash24_BYTES];
  crypto_shorthash_siphash24(out, in, n, secret.data());
  uint64_t h = 0;
  for (unsigned char b : out) h = h << 8 | b;
  return h;
}

uint64_t MachineHash(std::string_view machine_key) {
  unsigned char digest[SHA256_DIGEST_LENGTH];
  SHA256(reinterpret_cast<const unsigned char*>(machine_key.data()), machine_key.size(), digest);
  uint64_t h = 0;
  for (int i = 0; i < 8; ++i) h = h << 8 | digest[i];
  return h;
}

void MachineSketch::Add(uint64_t hash) {
  if (dense()) {
    const uint64_t w = hash << kDenseBits;
    SetDense(static_cast<uint32_t>(hash >> (64 - kDenseBits)),
             static_cast<uint8_t>(w != 0 ? std::countl_zero(w) + 1 : kDenseMaxRank));
    return;
  }
  const uint64_t w = hash << kSparseBits;
  const uint32_t index = static_cast<uint32_t>(hash >> (64 - kSparseBits));
  const uint32_t rank = w != 0 ? static_cast<uint32_t>(std::countl_zero(w) + 1) : kSparseMaxRank;
  AddSparse(index << 6 | rank);
}

void MachineSketch::AddSparse(uint32_t entry) {
  auto it = std::lower_bound(sparse_.begin(), sparse_.end(), entry & ~63u);
  if (it != sparse_.end() && IndexOf(*it) == IndexOf(entry)) {
    if (RankOf(entry) > RankOf(*it)) *it = entry;
    return;
  }
  sparse_.insert(it, entry);
  if (sparse_.size() > kSparseMax) ToDense();
}

void MachineSketch::SetDense(uint32_t index, uint8_t rank) {
  dense_[index] = std::max(dense_[index], rank);
}

void MachineSketch::ToDense() {
  if (dense()) return;
  dense_.assign(kDenseRegisters, 0);
  for (uint32_t e : sparse_) {
    uint32_t index;
    uint8_t rank;
    DenseOf(e, &index, &rank);
    SetDense(index, rank);
  }
  sparse_.clear();
  sparse_.shrink_to_fit();
}

void MachineSketch::Merge(const MachineSketch& other) {
  if (other.empty()) return;
  if (!dense() && !other.dense()) {
    // Nothing new (a fold merging the stacks of the same few machines): no
    // allocation.
    size_t at = 0;
    bool adds = false;
    for (uint32_t e : other.sparse_) {
      while (at < sparse_.size() && IndexOf(sparse_[at]) < IndexOf(e)) ++at;
      if (at == sparse_.size() || IndexOf(sparse_[at]) != IndexOf(e) || sparse_[at] < e) {
        adds = true;
        break;
      }
    }
    if (!adds) return;
    std::vector<uint32_t> merged;
    merged.reserve(sparse_.size() + other.sparse_.size());
    size_t i = 0, j = 0;
    while (i < sparse_.size() || j < other.sparse_.size()) {
      if (j == other.sparse_.size() ||
          (i < sparse_.size() && IndexOf(sparse_[i]) < IndexOf(other.sparse_[j]))) {
        merged.push_back(sparse_[i++]);
      } else if (i == sparse_.size() || IndexOf(other.sparse_[j]) < IndexOf(sparse_[i])) {
        merged.push_back(other.sparse_[j++]);
      } else {
        merged.push_back(std::max(sparse_[i++], other.sparse_[j++]));  // same index: higher rank
      }
    }
    sparse_.swap(merged);
    if (sparse_.size() > kSparseMax) ToDense();
    return;
  }
  ToDense();
  if (other.dense()) {
    for (uint32_t i = 0; i < kDenseRegisters; ++i) SetDense(i, other.dense_[i]);
    return;
  }
  for (uint32_t e : other.sparse_) {
    uint32_t index;
    uint8_t rank;
    DenseOf(e, &index, &rank);
    SetDense(index, rank);
  }
}

uint64_t MachineSketch::Estimate() const {
  if (!dense()) {
    // Linear counting over 2^25 registers: the number of entries, give or
    // take the rare two machines in one register.
    const double m = static_cast<double>(uint64_t{1} << kSparseBits);
    const double n = static_cast<double>(sparse_.size());
    return static_cast<uint64_t>(std::llround(m * std::log(m / (m - n))));
  }
  const double m = kDenseRegisters;
  double sum = 0;
  int zeros = 0;
  for (uint8_t r : dense_) {
    sum += std::ldexp(1.0, -r);
    zeros += r == 0;
  }
  const double alpha = 0.7213 / (1 + 1.079 / m);
  double e = alpha * m * m / sum;
  if (e <= 2.5 * m && zeros > 0) e = m * std::log(m / zeros);
  return static_cast<uint64_t>(std::llround(e));
}

void MachineSketch::Encode(std::string* out) const {
  out->clear();
  if (empty()) return;
  if (dense()) {
    out->reserve(1 + kDenseRegisters);
    out->push_back(static_cast<char>(kDenseTag));
    out->append(reinterpret_cast<const char*>(dense_.data()), dense_.size());
    return;
  }
  out->push_back(static_cast<char>(kSparseTag));
  PutVarint(out, sparse_.size());
  uint32_t previous = 0;
  for (uint32_t e : sparse_) {
    PutVarint(out, e - previous);  // sorted: deltas are small
    previous = e;
  }
}

bool MachineSketch::Decode(std::string_view bytes) {
  sparse_.clear();
  dense_.clear();
  if (bytes.empty()) return true;
  const uint8_t tag = static_cast<uint8_t>(bytes.front());
  bytes.remove_prefix(1);
  if (tag == kDayKeySparseTag || tag == kDayKeyDenseTag) return true;  // dropped (above)
  if (tag == kDenseTag) {
    if (bytes.size() != kDenseRegisters) return false;
    for (char c : bytes) {
      if (static_cast<uint8_t>(c) > kDenseMaxRank) return false;
    }
    dense_.assign(bytes.begin(), bytes.end());
    return true;
  }
  uint64_t n = 0;
  if (tag != kSparseTag || !GetVarint(&bytes, &n) || n == 0 || n > kSparseMax) return false;
  sparse_.reserve(n);
  uint64_t e = 0;
  for (uint64_t i = 0; i < n; ++i) {
    uint64_t delta;
    if (!GetVarint(&bytes, &delta)) break;
    e += delta;
    const bool ordered =
        sparse_.empty() || IndexOf(static_cast<uint32_t>(e)) > IndexOf(sparse_.back());
    if (e >= (uint64_t{1} << (kSparseBits + 6)) || !ordered || (e & 63) == 0 ||
        (e & 63) > kSparseMaxRank) {
      break;
    }
    sparse_.push_back(static_cast<uint32_t>(e));
  }
  if (sparse_.size() != n || !bytes.empty()) {
    sparse_.clear();
    return false;
  }
  return true;
}

}  // namespace fieldprof::aggregator
