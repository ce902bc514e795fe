// A plugin that does its own work as it is opened and closed, for points
// record and record (tests/tools/points/points_record_test.cc,
// record_test.cc):
//   fieldprof_inmodule --dlopen libfieldprof_ctorplugin.so N
// opens it, calls fp_test2_outer(N), closes it, and does all that twice.
// Opening it runs its constructor: a `load` scope around plugin_load,
// which spins FIELDPROF_TEST_LOAD_MS ms (none when unset). Closing it
// runs a static object's destructor, which passes an `unload` point.
// fp_test2_outer passes N `tick` points and returns N. With
// FIELDPROF_TEST_OLD_HEADER=1 the plugin stands for one built with a
// points.h that did not yet tell the recorder of its going: its count of
// files (fieldprof_point_units) is raised once more, so that its last
// destructor never calls.
#include <fieldprof/points.h>
#include <time.h>

#include <cstdlib>

namespace {

double NowSeconds() {
  timespec t;
  clock_gettime(CLOCK_MONOTONIC, &t);
  return static_cast<double>(t.tv_sec) + static_cast<double>(t.tv_nsec) * 1e-9;
}

struct Registry {
  ~Registry() { FP_POINT("plugin", "unload"); }
} registry;

}  // namespace

extern "C" {
volatile long plugin_sink;
// Out of line: a frame of its own in the stacks.
__attribute__((noinline)) void plugin_load() {
  const char* ms = std::getenv("FIELDPROF_TEST_LOAD_MS");
  const double end = NowSeconds() + (ms != nullptr ? std::atof(ms) : 0) / 1000;
  while (NowSeconds() < end) {
    for (int i = 0; i < 1000; ++i) plugin_sink = plugin_sink + i;
  }
  __asm__ __volatile__("");
}

__attribute__((constructor)) void plugin_start() {
  if (const char* old = std::getenv("FIELDPROF_TEST_OLD_HEADER"); old != nullptr && old[0] == '1') {
    ++fieldprof_point_units;
  }
  FP_SCOPE("plugin", "load");
  plugin_load();
}

__attribute__((visibility("default"))) long fp_test2_outer(long n) {
  for (long i = 0; i < n; ++i) FP_POINT_V("plugin", "tick", i);
  return n;
}
}
