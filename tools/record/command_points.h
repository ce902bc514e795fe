// Whether a command has instrumentation points (<fieldprof/points.h>) to
// record: fieldprof record preloads the points recorder into every
// process the command starts only when it does, or when asked (--points).
// Loaded, the recorder costs each process 0.04–0.08 ms, where perf pays
// nothing in the process: most of what record cost a build's short
// processes over perf (docs/benchmarks.md, fieldprof record).
//
// A module with points has fieldprof_point_hit among its undefined
// dynamic symbols: the weak reference the header leaves in it (the
// recorder and the runtime define it, and have none). The command's
// program is read so, and the libraries the dynamic linker loads with it
// (as ldd lists them: tools/shared/program_files.h). Modules loaded later (dlopen) and programs
// the command starts (through sh -c, env, time, make) are not known
// before they run: the recording's own module list tells afterwards
// (ModulesWithPoints), and record says so.
#ifndef FIELDPROF_TOOLS_RECORD_COMMAND_POINTS_H_
#define FIELDPROF_TOOLS_RECORD_COMMAND_POINTS_H_

#include <string>
#include <vector>

namespace fieldprof::tools {

// Whether the ELF file at `path` has points (ElfFacts::imports_point_hit).
// False for anything else (a script, a missing or unreadable file, a FIFO).
bool ModuleHasPoints(const std::string& path);

// The first of the command's program and the libraries it loads at start
// that has points ("" when none): `argv[0]` as execvp finds it.
std::string CommandModuleWithPoints(const std::vector<std::string>& argv);

// The files among `paths` that have points, by file name, each once;
// relative paths are passed over (not files to look for from here).
std::vector<std::string> ModulesWithPoints(const std::vector<std::string>& paths);

}  // namespace fieldprof::tools

#endif  // FIELDPROF_TOOLS_RECORD_COMMAND_POINTS_H_
