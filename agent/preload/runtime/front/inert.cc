// libfieldprof-inert.so: no code, no dependency. Preloaded, it changes
// nothing (see agent/preload/runtime/CMakeLists.txt for where it is used).
extern "C" __attribute__((visibility("default"))) int fieldprof_inert;
int fieldprof_inert;
