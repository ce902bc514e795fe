// A program that spends about the CPU time it is asked for (argv[1], ms)
// in zlib, called from functions whose names are secrets, in its own code
// and in an unpackaged library's (secret_lib.cc), and sorts with libc's
// qsort through a comparator of its own. Used by field_stacks_test.cc.
//
//   stack_prog MS            spends MS ms, prints a digit, exits
//   stack_prog MS kill       ... then kills itself (SIGKILL)
//   stack_prog MS wait FILE  ... then writes FILE.ready and exits once
//                            FILE exists
#include <signal.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>
#include <zlib.h>

#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <string>
#include <vector>

extern "C" uint64_t fp_zz_secret_lib_squeeze(const unsigned char* p, size_t n);

namespace {

uint64_t CpuMs() {
  timespec t{};
  clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &t);
  return static_cast<uint64_t>(t.tv_sec) * 1000 + static_cast<uint64_t>(t.tv_nsec) / 1000000;
}

__attribute__((noinline)) uint64_t fp_zz_secret_program_squeeze(const unsigned char* p, size_t n) {
  std::vector<unsigned char> out(compressBound(n));
  uLongf len = out.size();
  compress2(out.data(), &len, p, n, 9);
  return len;
}

__attribute__((noinline)) int fp_zz_secret_program_compare(const void* a, const void* b) {
  const uint32_t x = *static_cast<const uint32_t*>(a), y = *static_cast<const uint32_t*>(b);
  return x < y ? -1 : x > y;
}

}  // namespace

int main(int argc, char** argv) {
  const uint64_t want_ms = argc > 1 ? std::strtoull(argv[1], nullptr, 10) : 500;
  std::vector<unsigned char> data(256 * 1024);
  uint32_t x = 12345;
  for (unsigned char& c : data) {
    x = x * 1103515245u + 12345u;
    c = static_cast<unsigned char>((x >> 16) % 23);  // compressible, not trivially
  }
  std::vector<uint32_t> keys(200000);
  uint64_t sink = 0;
  const uint64_t start = CpuMs();
  for (int i = 0; CpuMs() - start < want_ms; ++i) {
    sink += i % 2 == 0 ? fp_zz_secret_program_squeeze(data.data(), data.size())
                       : fp_zz_secret_lib_squeeze(data.data(), data.size());
    for (uint32_t& k : keys) k = x = x * 1103515245u + 12345u;
    qsort(keys.data(), keys.size(), sizeof keys[0], fp_zz_secret_program_compare);
  }
  std::printf("%llu\n", static_cast<unsigned long long>(sink % 10));
  std::fflush(stdout);
  const std::string how = argc > 2 ? argv[2] : "";
  if (how == "kill") raise(SIGKILL);
  if (how == "wait" && argc > 3) {
    const std::string go = argv[3];
    if (FILE* f = std::fopen((go + ".ready").c_str(), "w")) std::fclose(f);
    struct stat st;
    while (stat(go.c_str(), &st) != 0) usleep(10000);
  }
  return 0;
}
