// What fieldprof reads of a module's ELF file to name its frames as the
// field names them (docs/field-stacks.md): its exported symbols as the
// dynamic linker's dladdr searches them, its soname, whether it is a
// program. Used by the agent (a killed run's stacks, agent/daemon/live_stacks.h)
// and by recordings' field view (tools/record/field_view.h).
#ifndef FIELDPROF_COMMON_SYSTEM_EXPORTED_SYMBOLS_H_
#define FIELDPROF_COMMON_SYSTEM_EXPORTED_SYMBOLS_H_

#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

namespace fieldprof {

// An ELF file's exported symbols (.dynsym) as the dynamic linker's dladdr
// searches them: the one it answers with for an address is the highest at
// or below it whose extent holds it, the first in the table of equals.
class ExportedSymbols {
 public:
  // Those of the file at `path`, if its build id is `build_id` (hex);
  // false (and none) otherwise.
  bool Load(const std::string& path, const std::string& build_id);
  // The symbol the runtime names a frame at `offset` (from the load bias)
  // by: dladdr's answer, with an extent that holds it; nullptr if none.
  const std::string* At(uint64_t offset) const;

 private:
  struct Sym {
    uint64_t value, size;
    size_t index;
    std::string name;
  };
  std::vector<Sym> syms_;  // by value, then index
  uint64_t max_size_ = 0;
};

// What the field asks of a module's file.
struct ElfFacts {
  bool read = false;     // an ELF file that could be read
  std::string soname;    // DT_SONAME ("" when none)
  bool program = false;  // a program: no soname, and an interpreter or ET_EXEC
  std::string build_id;  // the GNU build id, hex ("" when none)
  // Functions it defines for other objects (.dynsym: global or weak,
  // defined): the APIs another object can import from it.
  size_t exported_functions = 0;
  std::string interpreter;  // PT_INTERP, the program's dynamic linker ("" when none)
  // Whether it refers to fieldprof_point_hit without defining it (.dynsym:
  // an undefined symbol of that name): the weak reference
  // <fieldprof/points.h> leaves in every module with points. The points
  // recorder and the runtime define it, and have none.
  bool imports_point_hit = false;
};
ElfFacts ReadElfFacts(const std::string& path);

// The GNU build id of the ELF file at `path`, in hex; empty when it has
// none or cannot be read.
std::string FileBuildId(const std::string& path);

}  // namespace fieldprof

#endif  // FIELDPROF_COMMON_SYSTEM_EXPORTED_SYMBOLS_H_
