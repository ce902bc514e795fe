// fieldprof check: do these runs pay more for an API than the field does?
// In stages: options (check_options.h) -> inputs: the local
// costs and the field's (check_inputs.h) -> the analysis, a pure function
// (check_analysis.h) -> outputs (check_render.h).
#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <iostream>
#include <memory>

#include "common/base/durable_file.h"
#include "common/spool/spool.h"
#include "tools/check/check_analysis.h"
#include "tools/check/check_inputs.h"
#include "tools/check/check_options.h"
#include "tools/check/check_render.h"
#include "tools/commands.h"

namespace fieldprof::tools {
namespace {

// A directory removed with everything in it when this goes out of scope.
struct TempDir {
  std::string path;
  ~TempDir() {
    std::error_code ec;
    if (!path.empty()) std::filesystem::remove_all(path, ec);
  }
};

// The record files to read: those named; else the spool, or with
// -- COMMAND the spool of its runs made here (in `measured`). An exit code
// when there are none to read, else 0.
int RecordFiles(CheckOptions& o, TempDir* measured, std::vector<std::string>* files) {
  if (!o.command.empty()) {
    std::string tmpl = (std::filesystem::temp_directory_path() / "fieldprof-check-XXXXXX").string();
    if (mkdtemp(tmpl.data()) == nullptr) {
      std::cerr << "fieldprof check: cannot make a temporary spool: " << std::strerror(errno)
                << "\n";
      return 3;
    }
    measured->path = tmpl;
    // With --json, the command's own output goes to stderr: stdout is ours.
    const int out_fd = o.json ? STDERR_FILENO : STDOUT_FILENO;
    if (o.apis.empty()) {
      // Which APIs the program calls is the lab's to find: its profile is
      // checked as a profile named on the command line would be.
      std::fprintf(stderr, "fieldprof check: profiling %s with the lab (each timing set x%lld)\n",
                   o.command[0].c_str(), static_cast<long long>(o.repeat));
      const std::string profile = tmpl + "/scenario.labprofile";
      const int code = ProfileCommandInLab(o.command, static_cast<int>(o.repeat), profile, out_fd);
      if (code != 0 && code != 1) return 3;  // lab said why (nothing observed, ...)
      files->push_back(profile);
      return 0;
    }
    std::fprintf(stderr, "fieldprof check: %lld runs of %s, measuring %s\n",
                 static_cast<long long>(o.repeat), o.command[0].c_str(), o.apis.c_str());
    RunCommandMeasured(o.command, o.apis, static_cast<int>(o.repeat), measured->path, out_fd);
    o.spool_dir = measured->path;
  }
  *files = o.files;
  if (!files->empty()) return 0;
  StatusOr<std::vector<SpoolEntry>> spool = ListSpool(o.spool_dir);
  if (!spool.ok()) {
    std::cerr << "fieldprof check: " << spool.status().message() << "\n";
    return 3;
  }
  for (const SpoolEntry& e : *spool) files->push_back(e.path);
  return 0;
}

// The field's costs of the APIs with enough local calls.
int FieldCosts(const CheckOptions& o, const LocalInputs& local, std::vector<ApiCosts>* apis) {
  StatusOr<std::unique_ptr<FieldSource>> field = FieldSource::Open(o);
  if (!field.ok()) {
    std::cerr << "fieldprof check: no field data: " << field.status().message()
              << " (fieldprof pull --all fetches the snapshot, or use --host)\n";
    return 3;
  }
  for (const LocalCost& l : local.apis) {
    ApiCosts api{l, {}};
    if (static_cast<double>(l.histogram.count()) >= o.analysis.min_calls) {
      if (Status s = (*field)->Lookup(l, &api.field); !s.ok()) {
        std::cerr << "fieldprof check: " << s.message() << "\n";
        return 1;
      }
    }
    apis->push_back(std::move(api));
  }
  return 0;
}

// --sarif and --junit files; 2 when one cannot be written.
int WriteReports(const CheckResult& r, const CheckOptions& o) {
  if (!o.sarif_path.empty()) {
    if (Status w = WriteFileDurably(o.sarif_path, CheckSarif(r, o), FileAccess::kShared); !w.ok()) {
      std::cerr << "fieldprof check: " << w.message() << "\n";
      return 2;
    }
  }
  if (!o.junit_path.empty()) {
    if (Status w = WriteFileDurably(o.junit_path, CheckJunit(r, o), FileAccess::kShared); !w.ok()) {
      std::cerr << "fieldprof check: " << w.message() << "\n";
      return 2;
    }
  }
  return 0;
}

}  // namespace

int CmdCheck(int argc, char** argv) {
  CheckOptions o;
  if (const ExitCode done = ParseCheckOptions(argc, argv, &o)) return *done;
  TempDir measured;
  std::vector<std::string> files;
  if (int code = RecordFiles(o, &measured, &files); code != 0) return code;
  const LocalInputs local = ReadLocalCosts(files, o.metric);
  if (local.apis.empty()) {
    std::cerr << "fieldprof check: no " << o.metric_name << " data in " << files.size()
              << " record file(s)"
              << (files.empty() ? " (the spool " + o.spool_dir + " is empty)" : "") << ".\n";
    return 3;
  }
  std::vector<ApiCosts> apis;
  if (int code = FieldCosts(o, local, &apis); code != 0) return code;
  const CheckResult r = AnalyzeCosts(apis, o.analysis);
  if (int code = WriteReports(r, o); code != 0) return code;
  if (o.json) {
    std::cout << CheckJson(r, o, local.profiles) << "\n";
  } else {
    const bool tty = isatty(STDOUT_FILENO) && std::getenv("NO_COLOR") == nullptr;
    PrintCheckText(stdout, r, o, local.profiles, local.bad_files, tty);
  }
  return r.fail ? 1 : 0;
}

}  // namespace fieldprof::tools
