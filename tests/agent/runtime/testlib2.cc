// A second test library, opened with dlopen and closed again while the
// runtime measures it.
#include <cstdlib>

extern "C" __attribute__((visibility("default"))) long fp_test2_work(long n) {
  char* p = static_cast<char*>(malloc(static_cast<size_t>(n)));
  for (long i = 0; i < n; ++i) p[i] = static_cast<char>(i);
  long s = 0;
  for (long i = 0; i < n; ++i) s += p[i];
  free(p);
  return s;
}

// Calls back into the program that opened it (the program's own export,
// as a Python extension calls into python3).
extern "C" long fp_test_main_export(long n);

extern "C" __attribute__((visibility("default"))) long fp_test2_call_main(long n) {
  long s = 0;
  for (long i = 0; i < n; ++i) s += fp_test_main_export(i);
  return s;
}
