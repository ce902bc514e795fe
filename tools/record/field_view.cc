#include "tools/record/field_view.h"

#include <sys/stat.h>

#include <algorithm>
#include <cstring>

#include "common/stacks/stack_folding.h"
#include "common/system/exported_symbols.h"
#include "common/system/system_path.h"
#include "common/wire/key_rules.h"

namespace fieldprof::tools {

struct FieldFolder::Module {
  int32_t kind = stack_folding::kUnpackaged;  // or kProgram, kOurs; kept: 0
  std::string name, build_id, path;           // a kept module's key name, build, file
  // Its exported symbols, read when a frame of it is first named (most
  // modules of a process never are).
  const ExportedSymbols& Symbols() const {
    if (!symbols_read) {
      symbols.Load(path, build_id);
      symbols_read = true;
    }
    return symbols;
  }
  mutable ExportedSymbols symbols;
  mutable bool symbols_read = false;
};

namespace {

std::string BaseName(const std::string& path) { return path.substr(path.rfind('/') + 1); }

// One sample's modules, as stack_folding.h's Frames.
class SampleFrames {
 public:
  SampleFrames(const std::vector<LoadedModule>& modules,
               const std::vector<const FieldFolder::Module*>& info)
      : modules_(modules), info_(info) {}

  int32_t ObjectOf(uintptr_t a) const {
    // The latest report of a range stands (a library unloaded and another
    // loaded in its place).
    for (size_t i = modules_.size(); i-- > 0;) {
      const LoadedModule& m = modules_[i];
      if (a < m.lo || a >= m.hi) continue;
      const int32_t kind = info_[i]->kind;
      return kind == 0 ? static_cast<int32_t>(i) : kind;
    }
    return stack_folding::kUnpackaged;  // no module: JIT code, or unknown
  }
  size_t FrameName(int32_t obj, uintptr_t a, char* out, size_t cap) const {
    const LoadedModule& m = modules_[static_cast<size_t>(obj)];
    const uint64_t offset = a - m.bias;
    if (const std::string* s = info_[static_cast<size_t>(obj)]->Symbols().At(offset);
        s != nullptr && s->size() <= cap) {
      std::memcpy(out, s->data(), s->size());
      return s->size();
    }
    return stack_folding::OffsetName(offset, out);
  }
  const char* ModuleOf(int32_t obj) const { return info_[static_cast<size_t>(obj)]->name.c_str(); }
  void Add(int32_t obj, const char* stack, uint64_t) {
    const FieldFolder::Module& m = *info_[static_cast<size_t>(obj)];
    out.push_back({m.name, m.build_id, stack});
  }

  std::vector<FieldStackName> out;

 private:
  const std::vector<LoadedModule>& modules_;
  const std::vector<const FieldFolder::Module*>& info_;
};

}  // namespace

FieldFolder::FieldFolder() = default;
FieldFolder::~FieldFolder() = default;

const FieldFolder::Module& FieldFolder::Of(const LoadedModule& lm) {
  std::unique_ptr<Module>& slot = modules_[lm.path];
  if (slot != nullptr) return *slot;
  slot = std::make_unique<Module>();
  Module& m = *slot;
  const std::string base = BaseName(lm.path);
  if (base.rfind("libfieldprof", 0) == 0) {  // the recorder's own
    m.kind = stack_folding::kOurs;
    return m;
  }
  if (lm.path.empty() || lm.path[0] != '/' || IsVdso(lm.path)) return m;
  const ElfFacts facts = ReadElfFacts(lm.path);
  if (!facts.read) return m;
  if (facts.program) {
    m.kind = stack_folding::kProgram;
    return m;
  }
  // The key name as the runtime gives it: the soname's, else the file's.
  std::string name = facts.soname.empty() ? base : BaseName(facts.soname);
  if (!key_rules::ModuleOk(name.data(), name.size())) name = base;
  if (!key_rules::ModuleOk(name.data(), name.size())) return m;
  const std::string build_id = FileBuildId(lm.path);
  if (build_id.empty()) return m;
  // Kept, as the runtime keeps it, when it is a system file (a package
  // can have installed it; which package, if any, is asked when the view
  // is read, as the agent asks).
  std::string path = lm.path;
  if (!SystemPath(path.data(), path.size(),
                  [](const char* p, struct stat* st) { return ::stat(p, st); })) {
    return m;
  }
  m.kind = 0;
  m.name = name;
  m.build_id = build_id;
  m.path = lm.path;
  return m;
}

void FieldFolder::Describe(const std::vector<LoadedModule>& modules,
                           std::vector<const Module*>* info) {
  for (size_t i = info->size(); i < modules.size(); ++i) info->push_back(&Of(modules[i]));
}

std::vector<FieldStackName> FieldFolder::Fold(const std::vector<LoadedModule>& modules,
                                              const std::vector<const Module*>& info,
                                              const std::vector<uint64_t>& ips) {
  if (info.size() != modules.size()) return {};
  SampleFrames frames(modules, info);
  stack_folding::FoldStack(frames, ips.data(), static_cast<uint32_t>(ips.size()), 1);
  return std::move(frames.out);
}

}  // namespace fieldprof::tools
