// Any file a tree command takes, as a call tree: a .fptree, a recording
// (.fprec, tools/record/record_tree.h), Chrome trace JSON or collapsed
// stacks (tree_formats.h), told apart by their first bytes.
#ifndef FIELDPROF_TOOLS_TREE_TREE_LOAD_H_
#define FIELDPROF_TOOLS_TREE_TREE_LOAD_H_

#include <cstdint>
#include <string>

#include "common/base/status.h"
#include "tools/tree/call_tree.h"
#include "tools/tree/tree_formats.h"

namespace fieldprof::tools {

struct TreeLoadOptions {
  // For a recording: the range and thread.
  uint64_t from_ns = 0, to_ns = UINT64_MAX;
  uint32_t tid = 0;
  bool off_cpu = false;  // the waits and their off-CPU time instead of the samples
  bool merge = false;    // its traced scopes with its samples (MergedTreeFromRecording)
  // Its samples as the field folds this module's stacks
  // (FieldTreeFromRecording); other files are read as they are.
  std::string field_module;
  std::string dpkg_dir = "/var/lib/dpkg";  // which builds a package holds
  // Names its "+offset" frames from the builds' debug files under this
  // directory (.build-id layout: tools/shared/debug_names.h); empty: not named.
  std::string debug_dir;
  // For collapsed stacks: what the counts are.
  Metric collapsed_metric = Metric::kSamples;
  ChromeTraceOptions chrome;
};

// Errors name the file.
[[nodiscard]] StatusOr<CallTree> LoadCallTree(const std::string& path, const TreeLoadOptions& o);

}  // namespace fieldprof::tools

#endif  // FIELDPROF_TOOLS_TREE_TREE_LOAD_H_
