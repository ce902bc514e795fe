// An unpackaged library whose functions' names are secrets: the field
// stack tests check that none of them, nor their addresses, leaves the
// machine (tests/agent/stacks/field_stacks_test.cc).
#include <zlib.h>

#include <cstdint>
#include <vector>

namespace {

__attribute__((noinline)) uint64_t fp_zz_secret_lib_inner_mix(const unsigned char* p, size_t n) {
  uint64_t h = 1469598103934665603ull;
  for (int round = 0; round < 8; ++round) {
    for (size_t i = 0; i < n; ++i) h = (h ^ p[i]) * 1099511628211ull;
  }
  return h;
}

}  // namespace

// Squeezes `n` bytes with zlib from inside the library's own functions.
extern "C" __attribute__((noinline)) uint64_t fp_zz_secret_lib_squeeze(const unsigned char* p,
                                                                       size_t n) {
  std::vector<unsigned char> out(compressBound(n));
  uLongf len = out.size();
  compress2(out.data(), &len, p, n, 9);
  return len + fp_zz_secret_lib_inner_mix(out.data(), len);
}
