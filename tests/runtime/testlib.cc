// A library with known per-call costs, measured by the runtime in tests.
#include <time.h>
#include <unistd.h>

#include <cstdlib>
#include <stdexcept>

extern "C" {

// Allocates exactly n bytes in one malloc (and frees them).
__attribute__((visibility("default"))) void fp_test_alloc(size_t n) {
  void* p = malloc(n);
  __asm__ __volatile__("" : : "r"(p) : "memory");
  free(p);
}

// Sleeps about `us` microseconds.
__attribute__((visibility("default"))) void fp_test_sleep_us(long us) {
  timespec ts{us / 1000000, (us % 1000000) * 1000};
  nanosleep(&ts, nullptr);
}

// Writes n bytes to fd.
__attribute__((visibility("default"))) long fp_test_write(int fd, long n) {
  static char buf[65536];
  return write(fd, buf, static_cast<size_t>(n));
}

// Returns the sum of its double arguments (floating point through the stub).
__attribute__((visibility("default"))) double fp_test_fsum(double a, double b, double c, double d,
                                                           double e, double f, double g2, double h,
                                                           double i) {
  return a + b + c + d + e + f + g2 + h + i;
}

}  // extern "C"

// Throws through the measured call.
__attribute__((visibility("default"))) void fp_test_throw(int v) {
  if (v > 0) throw std::runtime_error("thrown through a measured call");
}
