// How many distinct machines added to a series, without keeping who: a
// HyperLogLog of entries derived from the day keys agents send with their
// batches (a random key per machine and UTC day, unlinkable across days;
// wire.h) and the series (SeriesEntry): a machine's entries in two series
// cannot be matched without its key, which no store keeps. Two sketches
// per series: `machines`, one entry per machine ever (from the record the
// agent marks as the machine's first of the series), which k compares; and
// `day_machines`, one per machine and day, for the suspect judge.
//
// Small sets are held sparse at 25-bit precision (HLL++'s sparse form):
// one 32-bit entry per register touched, (index << 6) | rank, so counts up
// to thousands are exact in practice. Past kSparseMax entries it becomes
// 4,096 dense registers (standard error 1.6%). Adding a machine twice, or
// merging a sketch twice, changes nothing: replays cannot inflate a count.
//
// Only hashes' register indexes and ranks are kept, never a key.
//
//   const MachineSecret m = MachineSecretOf(batch.machine_key());
//   MachineSketch s;
//   s.Add(SeriesEntry(m, EntryKind::kFirst, series_key));
//   s.Merge(other);
//   uint64_t n = s.Estimate();
#ifndef FIELDPROF_AGGREGATOR_STORE_MACHINE_SKETCH_H_
#define FIELDPROF_AGGREGATOR_STORE_MACHINE_SKETCH_H_

#include <array>
#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

namespace fieldprof::aggregator {

// The 64-bit hash of a machine key (SHA-256's first 8 bytes, so every
// aggregator and ClickHouse replica agrees): counts of distinct machine-
// days over the whole store, never a series' entry.
uint64_t MachineHash(std::string_view machine_key);

// A batch's machine as a store holds it until the batch is applied (its
// pending log): SHA-256's first 16 bytes of the machine key, the key of
// its entries. Kept nowhere after that.
using MachineSecret = std::array<unsigned char, 16>;
MachineSecret MachineSecretOf(std::string_view machine_key);

// The entry a machine adds to one series' sketch: SipHash-2-4 keyed by its
// secret, over `kind` and the series' key (EncodeApiKey's bytes, platform
// included). Without the secret, two entries of one machine in two series
// (or two days: a new key each day) are unrelated numbers.
enum class EntryKind : unsigned char { kDay = 'D', kFirst = 'F' };
uint64_t SeriesEntry(const MachineSecret& secret, EntryKind kind, std::string_view series_key);

class MachineSketch {
 public:
  static constexpr int kDenseBits = 12;  // 4,096 registers
  static constexpr int kSparseBits = 25;
  static constexpr size_t kSparseMax = 1024;

  void Add(uint64_t hash);
  // The union: for sketches of one series (its days, its nodes).
  void Merge(const MachineSketch& other);
  // The larger of the two: what several series' sketches say together.
  // Their entries are derived per series, so a union would count a
  // machine once per series it sent; the largest is a count no machine is
  // in twice ("at least").
  void KeepLarger(const MachineSketch& other) {
    if (other.Estimate() > Estimate()) *this = other;
  }
  uint64_t Estimate() const;
  bool empty() const { return sparse_.empty() && dense_.empty(); }
  bool dense() const { return !dense_.empty(); }

  // A compact, canonical encoding (the same set gives the same bytes);
  // empty for an empty sketch.
  void Encode(std::string* out) const;
  // False (and the sketch left empty) when `bytes` is not an encoding. A
  // sketch of day keys (stores before per-series entries) reads as empty.
  [[nodiscard]] bool Decode(std::string_view bytes);

 private:
  void AddSparse(uint32_t entry);
  void ToDense();
  void SetDense(uint32_t index, uint8_t rank);

  std::vector<uint32_t> sparse_;  // sorted by index, one entry per index
  std::vector<uint8_t> dense_;    // 1 << kDenseBits registers once dense
};

}  // namespace fieldprof::aggregator

#endif  // FIELDPROF_AGGREGATOR_STORE_MACHINE_SKETCH_H_
