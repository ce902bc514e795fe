#include "tools/cli/debug_names.h"

#include <glob.h>

#include "common/module_version.h"
#include "tools/cli/symbolizer.h"

namespace fieldprof::tools {
namespace {

// The debug file of the build whose id begins with `id_prefix` (at least
// 16 hex digits: what a field version keeps), under DIR/.build-id.
std::string DebugFileOf(const std::string& dir, const std::string& id_prefix) {
  if (id_prefix.size() < 16) return "";
  const std::string pattern =
      dir + "/.build-id/" + id_prefix.substr(0, 2) + "/" + id_prefix.substr(2) + "*.debug";
  glob_t g{};
  std::string found;
  if (glob(pattern.c_str(), 0, nullptr, &g) == 0 && g.gl_pathc == 1) found = g.gl_pathv[0];
  globfree(&g);
  return found;
}

}  // namespace

Status NameOffsets(const std::string& debug_dir, FieldStacks* s) {
  if (s->versions.size() != 1) {
    return InvalidArgument("--debug_dir names the frames of one build: give --version (" +
                           std::to_string(s->versions.size()) + " versions here)");
  }
  const std::string id(SplitModuleVersion(s->versions[0]).build_id);
  const std::string file = DebugFileOf(debug_dir, id);
  if (file.empty()) {
    return NotFound("no debug file for build " + id + " under " + debug_dir + "/.build-id");
  }
  local::Symbolizer names({{file, 0, 0, ~uint64_t{0}}});
  for (FieldStack& st : s->stacks) {
    for (std::string& f : st.frames) {
      if (f.size() < 2 || f[0] != '+') continue;
      const uint64_t offset = std::stoull(f.substr(1), nullptr, 16);
      std::string name = names.Name(offset, false);
      if (!name.empty() && name.find("0x") != 0 && name.find('+') == std::string::npos) f = name;
    }
  }
  return Status::Ok();
}

}  // namespace fieldprof::tools
