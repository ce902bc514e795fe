// The file in which SystemCode (common/system/system_code.h) hands the runtime
// its answer: the build ids of the system's code, sorted, so that a
// measured run maps it and finds a module's build id by binary search.
//
//   "FPSC0001"                      8 bytes
//   count                           uint32, little-endian
//   entry width (kEntryBytes)       uint32
//   entries                         count * kEntryBytes, sorted (memcmp)
//
// An entry is a GNU build id's bytes, cut or zero-padded to kEntryBytes
// (SHA-1's 20, what every Debian build id is).
//
// Header only and allocation-free: the runtime is built without the C++
// library.
#ifndef FIELDPROF_COMMON_SYSTEM_SYSTEM_CODE_LIST_H_
#define FIELDPROF_COMMON_SYSTEM_SYSTEM_CODE_LIST_H_

#include <stddef.h>
#include <stdint.h>
#include <string.h>

namespace fieldprof::system_code_list {

inline constexpr char kMagic[8] = {'F', 'P', 'S', 'C', '0', '0', '0', '1'};
inline constexpr size_t kHeaderBytes = 16;
inline constexpr size_t kEntryBytes = 20;
// A list larger than this is not one SystemCode wrote (a machine has a few
// thousand packaged modules).
inline constexpr uint32_t kMaxEntries = 1u << 22;

// A build id's entry from its bytes.
inline void EntryOf(const unsigned char* id, size_t n, unsigned char out[kEntryBytes]) {
  memset(out, 0, kEntryBytes);
  memcpy(out, id, n < kEntryBytes ? n : kEntryBytes);
}

// The entries of a list file's `bytes` (`size` of them), or nullptr when
// they are not a whole list; `count` gets their number.
inline const unsigned char* Entries(const void* bytes, size_t size, uint32_t* count) {
  const auto* p = static_cast<const unsigned char*>(bytes);
  if (size < kHeaderBytes || memcmp(p, kMagic, sizeof kMagic) != 0) return nullptr;
  uint32_t n, width;
  memcpy(&n, p + 8, 4);
  memcpy(&width, p + 12, 4);
  if (width != kEntryBytes || n > kMaxEntries || size != kHeaderBytes + size_t{n} * kEntryBytes) {
    return nullptr;
  }
  *count = n;
  return p + kHeaderBytes;
}

// Whether `entry` is among `count` sorted entries.
inline bool Contains(const unsigned char* entries, uint32_t count,
                     const unsigned char entry[kEntryBytes]) {
  uint32_t lo = 0, hi = count;
  while (lo < hi) {
    const uint32_t mid = lo + (hi - lo) / 2;
    const int c = memcmp(entries + size_t{mid} * kEntryBytes, entry, kEntryBytes);
    if (c == 0) return true;
    if (c < 0) {
      lo = mid + 1;
    } else {
      hi = mid;
    }
  }
  return false;
}

}  // namespace fieldprof::system_code_list

#endif  // FIELDPROF_COMMON_SYSTEM_SYSTEM_CODE_LIST_H_
