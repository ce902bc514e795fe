// The files a command runs: its program as execvp finds it, and the
// libraries the dynamic linker loads with it at start, as ldd lists them.
// record (whether a command has points) and points record --at (the file
// of a module named) read them.
#ifndef FIELDPROF_TOOLS_SHARED_PROGRAM_FILES_H_
#define FIELDPROF_TOOLS_SHARED_PROGRAM_FILES_H_

#include <string>
#include <vector>

namespace fieldprof::tools {

// `cmd` itself when it holds a '/', else the first executable regular file
// of that name in PATH (execvp's search; PATH unset: /bin:/usr/bin); ""
// when none.
std::string ProgramFile(const std::string& cmd);

struct StartLibrary {
  std::string name;  // as the program (or LD_PRELOAD) names it: libz.so.1
  std::string file;  // where the dynamic linker finds it, absolute
};

// The libraries `program` loads at start, as ldd lists them: the system's
// dynamic linker reads them without running the program's code (nor the
// interpreter it names); the user's LD_PRELOAD and LD_LIBRARY_PATH count.
// Empty for a static program or a script, or when ldd takes over 5 s.
std::vector<StartLibrary> StartLibraries(const std::string& program);

}  // namespace fieldprof::tools

#endif  // FIELDPROF_TOOLS_SHARED_PROGRAM_FILES_H_
