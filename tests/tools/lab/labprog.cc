// The lab scenario (tests/tools/lab_test.cc):
//   fieldprof_labprog N [COUNTER_FILE FAIL_AT]
// calls each API of the two lab libraries N times and prints one result
// line. With COUNTER_FILE, the run adds one to the number in it and exits
// 5 when that makes FAIL_AT (a run that fails in one pass of several).
#include <cstdio>
#include <cstdlib>

extern "C" long lab_parse(long x);
extern "C" long lab_render(const char* s);
extern "C" long lab_pipeline(long n);
extern "C" long labb_checksum();

int main(int argc, char** argv) {
  if (argc < 2) return 2;
  if (argc == 4) {
    long n = 0;
    if (FILE* f = std::fopen(argv[2], "r")) {
      if (std::fscanf(f, "%ld", &n) != 1) n = 0;
      std::fclose(f);
    }
    if (FILE* f = std::fopen(argv[2], "w")) {
      std::fprintf(f, "%ld\n", n + 1);
      std::fclose(f);
    }
    if (n + 1 == std::atol(argv[3])) return 5;
  }
  const long n = std::atol(argv[1]);
  long sum = 0;
  for (long i = 0; i < n; ++i) {
    sum += lab_parse(i);
    sum += lab_render("fieldprof");
    sum += lab_pipeline(i);
    sum += labb_checksum();
  }
  std::printf("result %ld\n", sum);
  return 0;
}
