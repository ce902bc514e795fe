// How many distinct machines added to a series, without keeping who: a
// HyperLogLog of the day keys agents send with their batches (a random key
// per machine and UTC day, unlinkable across days; wire.h).
//
// Small sets are held sparse at 25-bit precision (HLL++'s sparse form):
// one 32-bit entry per register touched, (index << 6) | rank, so counts up
// to thousands are exact in practice. Past kSparseMax entries it becomes
// 4,096 dense registers (standard error 1.6%). Adding a machine twice, or
// merging a sketch twice, changes nothing: replays cannot inflate a count.
//
// Only hashes' register indexes and ranks are kept, never a key.
//
//   MachineSketch s;
//   s.Add(MachineHash(batch.machine_key()));
//   s.Merge(other);
//   uint64_t n = s.Estimate();
#ifndef FIELDPROF_AGGREGATOR_STORE_MACHINE_SKETCH_H_
#define FIELDPROF_AGGREGATOR_STORE_MACHINE_SKETCH_H_

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

namespace fieldprof::aggregator {

// The 64-bit hash of a machine key the sketches take (SHA-256's first 8
// bytes, so every aggregator and ClickHouse replica agrees).
uint64_t MachineHash(std::string_view machine_key);

class MachineSketch {
 public:
  static constexpr int kDenseBits = 12;  // 4,096 registers
  static constexpr int kSparseBits = 25;
  static constexpr size_t kSparseMax = 1024;

  void Add(uint64_t hash);
  void Merge(const MachineSketch& other);
  uint64_t Estimate() const;
  bool empty() const { return sparse_.empty() && dense_.empty(); }
  bool dense() const { return !dense_.empty(); }

  // A compact, canonical encoding (the same set gives the same bytes);
  // empty for an empty sketch.
  void Encode(std::string* out) const;
  // False (and the sketch left empty) when `bytes` is not an encoding.
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
