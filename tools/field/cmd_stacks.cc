// fieldprof stacks: a library's field stacks (docs/field-stacks.md) from
// the snapshot cache or an aggregator, as a tree, folded stacks (for
// `fieldprof tree`, flamegraph.pl, speedscope), JSON or a flame graph page;
// `+offset` frames named from the vendor's debug files.
#include <cstdio>
#include <iostream>
#include <string>

#include "common/settings/options.h"
#include "common/stacks/field_stacks.h"
#include "common/wire/module_version.h"
#include "tools/commands.h"
#include "tools/page/page_kit.h"
#include "tools/shared/command_line.h"
#include "tools/shared/debug_names.h"
#include "tools/shared/module_source.h"
#include "tools/shared/output.h"

namespace fieldprof::tools {
namespace {

constexpr const char* kAbout =
    "Where a library's CPU time goes inside it on real machines: its field stacks,\n"
    "sampled in volunteers' measured runs and folded to the library's own frames\n"
    "(exported symbols, +offset for the rest; [program], [libc.so.6], ... where\n"
    "the time went on). From the local snapshot cache or an aggregator (--host).\n\n"
    "  fieldprof stacks --module libsqlite3.so.0\n"
    "  fieldprof stacks --module libsqlite3.so.0 --api sqlite3_step --top 20\n"
    "  fieldprof stacks --module libz.so.1 -o zlib.html          # a flame graph page\n"
    "  fieldprof stacks --module libz.so.1 --format folded > z.folded\n"
    "  fieldprof tree show z.folded                            # like any other tree\n"
    "  fieldprof stacks --module libfoo.so.2 --version 2.1-1_0123456789abcdef \\\n"
    "      --debug_dir /usr/lib/debug                          # name the +offsets\n\n"
    "Formats: text (default), folded, json, html; -o FILE picks by its extension.";

struct StacksOptions {
  std::string module, version, platform, api, format, output, debug_dir;
  int64_t top = 60;
  double min_share = 0.005;
  ModuleSource source;
  ModelFilter filter;
  ModuleQuery query;
};

// Reads the arguments: nothing to go on, else the exit code (ExitCode).
ExitCode ParseStacksOptions(int argc, char** argv, StacksOptions* o) {
  OptionTable t("fieldprof stacks", kAbout);
  t.AddString("module", &o->module, "the module (soname), e.g. libsqlite3.so.0");
  t.AddString("version", &o->version, "only this module version (default: every version)");
  t.AddString("platform", &o->platform,
              "only this platform: ARCH[/VENDOR[/FAMILY]], e.g. x86_64/amd/25");
  t.AddString("api", &o->api, "only the stacks under this API (its outermost frame)");
  t.AddString("format", &o->format, "text, folded, json or html");
  t.AddString("output", &o->output, "write to this file (-o) instead of stdout");
  t.AddString("debug_dir", &o->debug_dir,
              "name +offset frames from the debug files under DIR/.build-id (one version)");
  t.AddInt("top", &o->top, "text: lines at most (0: all)", 0, 100000000);
  t.AddDouble("min_share", &o->min_share, "text: frames under this share of the whole left out", 0,
              1);
  o->source.Register(t);
  t.AddShort('o', "output");
  Status s;
  if (ParseOrShowHelp(t, argc, argv, &s)) return 0;
  if (o->format.empty() && o->output.ends_with(".folded")) o->format = "folded";
  o->format = OutputFormat(o->format, o->output);
  const std::string& f = o->format;
  if (s.ok() && o->module.empty()) s = InvalidArgument("--module is needed");
  if (s.ok() && f != "text" && f != "folded" && f != "json" && f != "html") {
    s = InvalidArgument("--format is text, folded, json or html");
  }
  o->filter.module_version = o->version;
  o->query.module = o->module;
  o->query.version = o->version;
  if (s.ok()) s = ParsePlatform(o->platform, &o->filter, &o->query);
  if (!s.ok()) return UsageError(t, s);
  return std::nullopt;
}

std::string Render(const FieldStacks& s, const StacksOptions& o) {
  if (o.format == "folded") return FieldStacksFolded(s);
  if (o.format == "json") return FieldStacksJson(s, s.stacks.size());
  nlohmann::json stacks = nlohmann::json::array();
  for (const FieldStack& st : s.stacks) stacks.push_back({{"frames", st.frames}, {"ns", st.ns}});
  if (o.format == "html") {
    const std::string title = o.module + (o.api.empty() ? "" : " " + o.api) + ": field stacks";
    const std::string body = "<p id=\"about\"></p><svg class=\"flame\" id=\"flame\"></svg>";
    const std::string js =
        "const d = JSON.parse(document.getElementById('fp-data').textContent);\n"
        "document.getElementById('about').textContent = d.stacks.length + ' stacks, ' +\n"
        "  fieldprofKit.duration(d.total_ns) + ' of sampled CPU time; click a frame to zoom.';\n"
        "fieldprofKit.fieldFlame(document.getElementById('flame'), d.stacks, d.module);\n"
        "document.body.dataset.ready = '1';\n";
    return page::RenderPage("fieldprof stacks", title, body, "", js,
                            {{"module", o.module}, {"total_ns", s.total_ns}, {"stacks", stacks}});
  }
  std::string out = o.module + (o.api.empty() ? "" : " under " + o.api) + ": " +
                    std::to_string(s.stacks.size()) + " stacks, " +
                    std::to_string(static_cast<double>(s.total_ns) / 1e9).substr(0, 6) +
                    " s of sampled CPU time, up to " + std::to_string(s.machines) + " machines";
  for (const std::string& v : s.versions) out += (&v == &s.versions[0] ? "; " : ", ") + v;
  out +=
      "\n\n" + FieldStacksText(s, o.top == 0 ? SIZE_MAX : static_cast<size_t>(o.top), o.min_share);
  return out;
}

}  // namespace

int CmdStacks(int argc, char** argv) {
  StacksOptions o;
  if (const ExitCode done = ParseStacksOptions(argc, argv, &o)) return *done;
  const StatusOr<std::vector<SeriesSum>> series = o.source.Load(o.query);
  if (!series.ok()) {
    std::cerr << "fieldprof stacks: " << series.status().message() << "\n";
    return 1;
  }
  FieldStacks s = BuildFieldStacks(o.module, *series, o.filter);
  if (!o.api.empty()) s = StacksUnder(s, o.api);
  if (s.stacks.empty()) {
    std::cerr << "fieldprof stacks: no field stacks of " << o.module
              << (o.api.empty() ? "" : " under " + o.api) << " in the " << o.source.Name() << "\n";
    return 3;
  }
  if (!o.debug_dir.empty()) {
    if (Status named = NameOffsets(o.debug_dir, &s); !named.ok()) {
      std::cerr << "fieldprof stacks: " << named.message() << "\n";
      return 1;
    }
  }
  if (int code = EmitOutput("fieldprof stacks", Render(s, o), o.output); code != 0) return code;
  if (!o.output.empty()) {
    std::fprintf(stderr, "fieldprof stacks: %s: %zu stacks -> %s\n", o.module.c_str(),
                 s.stacks.size(), o.output.c_str());
  }
  return 0;
}

}  // namespace fieldprof::tools
