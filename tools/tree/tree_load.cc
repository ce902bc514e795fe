#include "tools/tree/tree_load.h"

#include <string_view>

#include "common/base/durable_file.h"
#include "common/system/system_code.h"
#include "tools/record/record_tree.h"
#include "tools/shared/debug_names.h"

namespace fieldprof::tools {

StatusOr<CallTree> LoadCallTree(const std::string& path, const TreeLoadOptions& o) {
  StatusOr<std::string> bytes = ReadWholeFile(path);
  if (!bytes.ok()) return Status(bytes.status().code(), path + ": " + bytes.status().message());
  auto named = [&](StatusOr<CallTree> t) -> StatusOr<CallTree> {
    if (!t.ok()) return Status(t.status().code(), path + ": " + t.status().message());
    return t;
  };
  const std::string_view b = *bytes;
  if (b.substr(0, 6) == "FPTREE") return named(DecodeCallTree(b));
  if (o.merge && b.substr(0, 11) != "FPRECORDING") {
    return Status(StatusCode::kInvalidArgument,
                  path +
                      ": tree merge takes a recording (fieldprof record) of a program with "
                      "points: its traced scopes and its samples");
  }
  if (b.substr(0, 11) == "FPRECORDING") {
    StatusOr<Recording> r = DecodeRecording(b);
    if (!r.ok()) return named(r.status());
    if (o.off_cpu && !r->idle) {
      return Status(StatusCode::kInvalidArgument,
                    path + ": recorded without idle transitions (record --idle)");
    }
    if (o.merge && r->spans.empty()) {
      return Status(StatusCode::kInvalidArgument,
                    path +
                        ": the program passed no points (<fieldprof/points.h>): nothing "
                        "traced to merge with its samples");
    }
    if (!o.field_module.empty()) {
      if (o.merge || o.off_cpu) {
        return Status(StatusCode::kInvalidArgument,
                      "--field_module reads a recording's samples, not its scopes or waits");
      }
      // Which builds a package holds, as the agent asks it (without an
      // answer, every build keeps its build id).
      SystemCodeOptions options;
      options.dpkg_dir = o.dpkg_dir;
      SystemCode versions(options);
      IgnoreError(versions.Refresh());
      tools::DebugNames debug(o.debug_dir);
      FrameNamer name_frame;
      if (!o.debug_dir.empty()) {
        name_frame = [&](const std::string& id, std::string_view f) { return debug.Name(id, f); };
      }
      StatusOr<CallTree> f = FieldTreeFromRecording(
          *r, o.field_module, o.from_ns, o.to_ns, o.tid,
          [&](const std::string& m, const std::string& id) { return versions.KeyVersion(m, id); },
          name_frame);
      if (!f.ok()) return named(f.status());
      f->description = path + ": " + f->description;
      return f;
    }
    CallTree t = o.merge     ? MergedTreeFromRecording(*r, o.from_ns, o.to_ns, o.tid)
                 : o.off_cpu ? OffCpuTreeFromRecording(*r, o.from_ns, o.to_ns, o.tid)
                             : CallTreeFromRecording(*r, o.from_ns, o.to_ns, o.tid);
    t.description = path + ": " + t.description;
    return t;
  }
  const size_t first = b.find_first_not_of(" \t\r\n");
  if (first != std::string_view::npos && (b[first] == '{' || b[first] == '[')) {
    return named(CallTreeFromChromeTrace(b, o.chrome));
  }
  return named(CallTreeFromCollapsed(b, o.collapsed_metric));
}

}  // namespace fieldprof::tools
