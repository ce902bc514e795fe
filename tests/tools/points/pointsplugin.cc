// A plugin with points of its own, for a program that has none and opens
// it with dlopen (tests/tools/points/points_record_test.cc):
//   fieldprof_inmodule --dlopen libfieldprof_pointsplugin.so N
// opens it, calls fp_test2_outer(N), closes it, and does all that twice.
// Each call passes N `plugin` points, each inside a `work` scope, and
// returns N. The plugin is closed right after: the recorder must have
// read its points' names by then.
#include <fieldprof/points.h>

extern "C" __attribute__((visibility("default"))) long fp_test2_outer(long n) {
  for (long i = 0; i < n; ++i) {
    FP_SCOPE("plugin", "work");
    FP_POINT_V("plugin", "tick", i);
  }
  return n;
}
