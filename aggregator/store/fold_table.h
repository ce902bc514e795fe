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
  static uint64_t Hash(std::string_view key) { return std::hash<std::string_view>()(key); }

  // The sum for `key`, inserted empty if absent. Valid until the next insert.
  SparseAggregate& operator[](std::string_view key) { return Find(key, Hash(key)); }

  // The same, for a key whose Hash is known.
  SparseAggregate& Find(std::string_view key, uint64_t h) {
    if ((entries_.size() + 1) * 4 > slots_.size() * 3) Grow();
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

  // Hints to the cache for a Find of hash `h` a few keys later, in three
  // steps, each reading what the one before brought in: the key's first
  // slot; the entry it names; the entry's key bytes and buckets. A fold
  // larger than the caches (every series of a second of batches) otherwise
  // waits on memory three or four times a record. Only hints: a slot taken
  // or moved meanwhile costs a wasted load, never a wrong answer.
  void PrefetchSlot(uint64_t h) const { Prefetch(slots_.data() + (h & mask_)); }
  void PrefetchEntry(uint64_t h) const {
    if (const Entry* e = FirstEntry(h)) Prefetch(e);
  }
  void PrefetchKeyAndSum(uint64_t h) const {
    if (const Entry* e = FirstEntry(h)) {
      Prefetch(keys_.data() + e->key_offset);
      Prefetch(e->value.buckets_data());
    }
  }

  // GCC 12 drops a __builtin_prefetch whose address it derives from a
  // vector's size or bounds (checked with objdump): on x86-64 the
  // instruction is written out.
  static void Prefetch(const void* p) {
#if defined(__x86_64__)
    asm volatile("prefetcht0 (%0)" : : "r"(p));
#else
    __builtin_prefetch(p);
#endif
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
    mask_ = 0;
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

  // The entry in `h`'s first slot if its hash is h (nearly always the key's).
  const Entry* FirstEntry(uint64_t h) const {
    if (slots_.empty()) return nullptr;
    const Slot& s = slots_[h & mask_];
    if (s.entry == 0 || s.hash != h || s.entry > entries_.size()) return nullptr;
    return &entries_[s.entry - 1];
  }
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
    mask_ = slots_.size() - 1;
  }

  std::vector<Slot> slots_;  // size a power of two, at most 3/4 full
  size_t mask_ = 0;          // slots_.size() - 1 (0 while empty)
  std::vector<Entry> entries_;
  std::string keys_;  // every key, back to back
};

}  // namespace fieldprof::aggregator

#endif  // FIELDPROF_AGGREGATOR_STORE_FOLD_TABLE_H_
