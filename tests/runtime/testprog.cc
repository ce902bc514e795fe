// Calls the test library as told by its arguments and prints what it got,
// so runs with and without the runtime can be compared byte for byte.
//   testprog alloc N CALLS | sleep US CALLS | write FILE N CALLS | fsum | throw
#include <fcntl.h>
#include <stdio.h>
#include <unistd.h>

#include <cstdlib>
#include <cstring>
#include <stdexcept>

extern "C" {
void fp_test_alloc(size_t n);
void fp_test_sleep_us(long us);
long fp_test_write(int fd, long n);
double fp_test_fsum(double, double, double, double, double, double, double, double, double);
}
void fp_test_throw(int v);

int main(int argc, char** argv) {
  if (argc < 2) return 2;
  const char* what = argv[1];
  if (!strcmp(what, "alloc") && argc == 4) {
    for (int i = 0; i < atoi(argv[3]); ++i) fp_test_alloc(strtoul(argv[2], nullptr, 10));
  } else if (!strcmp(what, "sleep") && argc == 4) {
    for (int i = 0; i < atoi(argv[3]); ++i) fp_test_sleep_us(atol(argv[2]));
  } else if (!strcmp(what, "write") && argc == 5) {
    int fd = open(argv[2], O_WRONLY | O_CREAT | O_TRUNC, 0600);
    long total = 0;
    for (int i = 0; i < atoi(argv[4]); ++i) total += fp_test_write(fd, atol(argv[3]));
    close(fd);
    printf("wrote %ld\n", total);
  } else if (!strcmp(what, "fsum")) {
    printf("%.3f\n", fp_test_fsum(1.5, 2.25, 3, 4, 5, 6, 7, 8, 9.125));
  } else if (!strcmp(what, "throw")) {
    int caught = 0;
    for (int i = 0; i < 5; ++i) {
      try {
        fp_test_throw(i % 2);
      } catch (const std::runtime_error& e) {
        ++caught;
      }
    }
    printf("caught %d\n", caught);
  } else {
    return 2;
  }
  printf("done %s\n", what);
  return 7;  // a distinctive exit code that must survive
}
