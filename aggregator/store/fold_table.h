// The in-memory fold: series key -> running sum, for the batches accepted
// since the last write (store_rocksdb.cc).
//
// Every record of every accepted batch is added here under the ingest lock,
// so this is on the ingest hot path. An open-addressing table with keys
// packed into one buffer: a lookup hashes the key once and compares it only
// against slots with the same hash; a new series costs no node or key
// allocation (std::unordered_map<std::string, ...> spent two per series).
#ifndef FIELDPROF_AGGREGATOR_STORE_FOLD_TABLE_H_
#define FIELDPROF_AGGREGATOR_STORE_FOLD_TABLE_H_

#include <cstdint>
#include <functional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "aggregator/store/aggregate_value.h"

namespace fieldprof::aggregator {

class FoldTable {
 public:
  // The sum for `key`, inserted empty if absent. Valid until the next insert.
  SparseAggregate& operator[](std::string_view key) {
    if ((entries_.size() + 1) * 4 > slots_.size() * 3) Grow();
    const uint64_t h = Hash(key);
    const size_t mask = slots_.size() - 1;
    for (size_t i = h & mask;; i = (i + 1) & mask) {
      Slot& s = slots_[i];
      if (s.entry == 0) {
        entries_.push_back({keys_.size(), key.size(), SparseAggregate()});
        keys_.append(key);
        s = {h, static_cast<uint32_t>(entries_.size())};
        return entries_.back().value;
      }
      if (s.hash == h && KeyOf(entries_[s.entry - 1]) == key) return entries_[s.entry - 1].value;
    }
  }

  size_t size() const { return entries_.size(); }
  bool empty() const { return entries_.empty(); }

  // f(std::string_view key, const SparseAggregate& sum) for every series, in
  // insertion order.
  template <typename F>
  void ForEach(F&& f) const {
    for (const Entry& e : entries_) f(KeyOf(e), e.value);
  }
  template <typename F>
  void ForEachMutable(F&& f) {
    for (Entry& e : entries_) f(KeyOf(e), e.value);
  }

  void clear() {
    slots_.clear();
    entries_.clear();
    keys_.clear();
  }

 private:
  struct Slot {
    uint64_t hash = 0;
    uint32_t entry = 0;  // index + 1 into entries_; 0 = empty
  };
  struct Entry {
    size_t key_offset;
    size_t key_size;
    SparseAggregate value;
  };

  static uint64_t Hash(std::string_view key) { return std::hash<std::string_view>()(key); }
  std::string_view KeyOf(const Entry& e) const {
    return std::string_view(keys_.data() + e.key_offset, e.key_size);
  }

  void Grow() {
    std::vector<Slot> bigger(slots_.empty() ? 1024 : slots_.size() * 2);
    const size_t mask = bigger.size() - 1;
    for (const Slot& s : slots_) {
      if (s.entry == 0) continue;
      size_t i = s.hash & mask;
      while (bigger[i].entry != 0) i = (i + 1) & mask;
      bigger[i] = s;
    }
    slots_ = std::move(bigger);
  }

  std::vector<Slot> slots_;  // size a power of two, at most 3/4 full
  std::vector<Entry> entries_;
  std::string keys_;  // every key, back to back
};

}  // namespace fieldprof::aggregator

#endif  // FIELDPROF_AGGREGATOR_STORE_FOLD_TABLE_H_
