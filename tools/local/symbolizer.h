// Names for the code addresses of one process, from its modules' ELF
// symbol tables and installed debug info (elfutils), C++ names demangled.
// Shared by fieldprof record's recordings and the stacks of points.
#ifndef FIELDPROF_TOOLS_LOCAL_SYMBOLIZER_H_
#define FIELDPROF_TOOLS_LOCAL_SYMBOLIZER_H_

#include <cstdint>
#include <string>
#include <unordered_map>
#include <vector>

struct Dwfl;

namespace fieldprof::local {

// A module as the process had it loaded.
struct LoadedModule {
  std::string path;
  uint64_t bias = 0;        // what its ELF addresses are relative to
  uint64_t lo = 0, hi = 0;  // its code's span
};

class Symbolizer {
 public:
  // `modules` as reported, in order: of two reports of one load address,
  // the later stands.
  explicit Symbolizer(const std::vector<LoadedModule>& modules);
  ~Symbolizer();
  Symbolizer(const Symbolizer&) = delete;
  Symbolizer& operator=(const Symbolizer&) = delete;

  // Whether `ip` lies in a module whose file is named `file_name`.
  bool InModuleNamed(uint64_t ip, const char* file_name) const;

  // `return_address`: a caller's frame, whose call lies just before it.
  // "sqlite3_step", else "libz.so.1+0x1a2b", else "0x7f12...".
  std::string Name(uint64_t ip, bool return_address);

 private:
  Dwfl* dwfl_ = nullptr;
  std::vector<LoadedModule> modules_;
  std::unordered_map<uint64_t, std::string> memo_;
};

}  // namespace fieldprof::local

#endif  // FIELDPROF_TOOLS_LOCAL_SYMBOLIZER_H_
