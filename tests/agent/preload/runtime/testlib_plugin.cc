// A plugin: opened with dlopen, it brings its dependency (the RELRO test
// library) with it and calls that library's export through its own PLT,
// as a plugin calls the library it was built against. Both are unloaded
// with it (HazardTest.AReopenedLibraryOverItsOldPlaceIsMeasured).
extern "C" long fp_relro_len(const char* s);

extern "C" __attribute__((visibility("default"))) long fp_plugin_len(const char* s) {
  return fp_relro_len(s);
}
