// Names for the code addresses of one process, from its modules' ELF
// symbol tables and installed debug info (elfutils), C++ names demangled.
// Shared by fieldprof record's recordings and the stacks of points.
#ifndef FIELDPROF_TOOLS_SHARED_SYMBOLIZER_H_
#define FIELDPROF_TOOLS_SHARED_SYMBOLIZER_H_

#include <cstdint>
#include <string>
#include <unordered_map>
#include <vector>

struct Dwfl;

namespace fieldprof::tools {

// A module as the process had it loaded.
struct LoadedModule {
  std::string path;
  uint64_t bias = 0;        // what its ELF addresses are relative to
  uint64_t lo = 0, hi = 0;  // its code's span
};

// The vDSO has no file: this process's own image (the kernel maps the same
// into every process), as a memory file for libdwfl, or -1.
int VdsoImageFd();
bool IsVdso(const std::string& path);

class Symbolizer {
 public:
  // `modules` as reported, in order: of two reports of one load address,
  // the later stands.
  // `pid`: the process, whose JIT code perf's /tmp/perf-PID.map names
  // (node --perf-basic-prof, Java agents, LuaJIT, CPython -X perf); 0:
  // none.
  explicit Symbolizer(const std::vector<LoadedModule>& modules, uint32_t pid = 0);
  ~Symbolizer();
  Symbolizer(const Symbolizer&) = delete;
  Symbolizer& operator=(const Symbolizer&) = delete;

  // Whether `ip` lies in a module whose file is named `file_name`.
  bool InModuleNamed(uint64_t ip, const char* file_name) const;

  // `return_address`: a caller's frame, whose call lies just before it.
  // "sqlite3_step", else "libz.so.1+0x1a2b", else "0x7f12...".
  std::string Name(uint64_t ip, bool return_address);

 private:
  struct JitSymbol {
    uint64_t lo = 0, hi = 0;
    std::string name;
  };
  const JitSymbol* FindJit(uint64_t at);

  Dwfl* dwfl_ = nullptr;
  std::vector<LoadedModule> modules_;
  uint32_t pid_ = 0;
  bool jit_read_ = false;
  std::vector<JitSymbol> jit_;  // by lo
  std::unordered_map<uint64_t, std::string> memo_;
};

}  // namespace fieldprof::tools

#endif  // FIELDPROF_TOOLS_SHARED_SYMBOLIZER_H_
