#include "tools/shared/debug_names.h"

#include <glob.h>

#include <vector>

#include "common/wire/module_version.h"
#include "tools/shared/symbolizer.h"

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

DebugNames::DebugNames(std::string debug_dir) : dir_(std::move(debug_dir)) {}
DebugNames::~DebugNames() = default;

StatusOr<std::string> DebugNames::Name(const std::string& build_id, std::string_view frame) {
  if (frame.size() < 2 || frame[0] != '+' ||
      frame.find_first_not_of("0123456789abcdef", 1) != std::string_view::npos ||
      frame.size() > 17) {
    return std::string(frame);
  }
  std::unique_ptr<tools::Symbolizer>& names = files_[build_id];
  if (names == nullptr) {
    const std::string file = DebugFileOf(dir_, build_id);
    if (file.empty()) {
      files_.erase(build_id);
      return NotFound("no debug file for build " + build_id + " under " + dir_ + "/.build-id");
    }
    names = std::make_unique<tools::Symbolizer>(
        std::vector<tools::LoadedModule>{{file, 0, 0, ~uint64_t{0}}});
  }
  const uint64_t offset = std::stoull(std::string(frame.substr(1)), nullptr, 16);
  std::string name = names->Name(offset, false);
  if (!name.empty() && name.find("0x") != 0 && name.find('+') == std::string::npos) return name;
  return std::string(frame);
}

Status NameOffsets(const std::string& debug_dir, FieldStacks* s) {
  if (s->versions.size() != 1) {
    return InvalidArgument("--debug_dir names the frames of one build: give --version (" +
                           std::to_string(s->versions.size()) + " versions here)");
  }
  const std::string id(SplitModuleVersion(s->versions[0]).build_id);
  DebugNames names(debug_dir);
  for (FieldStack& st : s->stacks) {
    for (std::string& f : st.frames) {
      FP_ASSIGN_OR_RETURN(f, names.Name(id, f));
    }
  }
  return Status::Ok();
}

}  // namespace fieldprof::tools
