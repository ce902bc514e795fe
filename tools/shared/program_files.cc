#include "tools/shared/program_files.h"

#include <sys/stat.h>
#include <unistd.h>

#include <cstdlib>
#include <optional>
#include <sstream>

#include "tools/shared/spawn.h"

namespace fieldprof::tools {

std::string ProgramFile(const std::string& cmd) {
  if (cmd.empty() || cmd.find('/') != std::string::npos) return cmd;
  const char* env = std::getenv("PATH");
  std::stringstream dirs(env != nullptr ? env : "/bin:/usr/bin");
  for (std::string dir; std::getline(dirs, dir, ':');) {
    const std::string file = (dir.empty() ? "." : dir) + "/" + cmd;
    struct stat st {};
    if (stat(file.c_str(), &st) == 0 && S_ISREG(st.st_mode) && access(file.c_str(), X_OK) == 0) {
      return file;
    }
  }
  return "";
}

std::vector<StartLibrary> StartLibraries(const std::string& program) {
  // ldd reads the libraries; it runs none of their code.
  constexpr int kDeadlineMs = 5000;
  std::vector<StartLibrary> out;
  const std::optional<std::string> listing = OutputOf({"ldd", program}, kDeadlineMs);
  if (!listing) return out;
  // "\tlibz.so.1 => /lib/x86_64-linux-gnu/libz.so.1 (0x...)", and for the
  // dynamic linker and preloaded libraries "\t/path/libx.so (0x...)".
  std::istringstream lines(*listing);
  for (std::string line; std::getline(lines, line);) {
    const size_t start = line.find_first_not_of(" \t");
    const size_t paren = line.rfind(" (0x");
    if (start == std::string::npos || paren == std::string::npos || paren <= start) continue;
    const size_t arrow = line.find(" => ", start);
    StartLibrary lib;
    if (arrow != std::string::npos && arrow < paren) {
      lib.name = line.substr(start, arrow - start);
      lib.file = line.substr(arrow + 4, paren - arrow - 4);
    } else {
      lib.file = line.substr(start, paren - start);
      lib.name = lib.file.substr(lib.file.rfind('/') + 1);
    }
    if (!lib.file.empty() && lib.file[0] == '/') out.push_back(std::move(lib));
  }
  return out;
}

}  // namespace fieldprof::tools
