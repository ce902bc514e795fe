// fieldprof spool ls|show: what the runtime has recorded on this machine and
// not yet uploaded, readably.
#include <google/protobuf/util/json_util.h>

#include <algorithm>
#include <cstdio>
#include <ctime>
#include <filesystem>
#include <iostream>

#include "common/settings/options.h"
#include "common/spool/spool.h"
#include "common/statistics/histogram.h"
#include "common/wire/api_key.h"
#include "common/wire/wire.h"
#include "tools/commands.h"
#include "tools/shared/command_line.h"
#include "tools/shared/format.h"
#include "tools/shared/run_record_text.h"

namespace fieldprof::tools {
namespace {

// "libz.so.1:deflate, libc.so.6:malloc" — each API once, in record order.
std::string ApiList(const wire::RunRecord& r) {
  std::vector<std::string> seen;
  for (const wire::Record& rec : r.records()) {
    std::string a = rec.key().module() + ":" + rec.key().symbol();
    if (std::find(seen.begin(), seen.end(), a) == seen.end()) seen.push_back(a);
  }
  std::string out;
  for (const std::string& a : seen) out += (out.empty() ? "" : ", ") + a;
  return out.empty() ? "-" : out;
}

struct SpoolOptions {
  std::string dir;
  bool json = false, histograms = false;
  bool ls = false;                 // else show
  std::vector<std::string> files;  // show: the records (or spools) named
};

// Reads the arguments: nothing to go on, else the exit code (ExitCode).
ExitCode ParseSpoolOptions(int argc, char** argv, SpoolOptions* o) {
  o->dir = DefaultSpoolDir();
  OptionTable t("fieldprof spool",
                "Shows the run records the runtime left in the spool, not yet uploaded.\n\n"
                "  fieldprof spool ls [options]              one line per record\n"
                "  fieldprof spool show [options] [FILE...]  records in full (default: all)");
  t.AddString("spool", &o->dir, "spool directory");
  t.AddBool("json", &o->json, "show: print each record as JSON");
  t.AddBool("histograms", &o->histograms, "show: draw each metric's log2 histogram");
  Status s;
  if (ParseOrShowHelp(t, argc, argv, &s)) return 0;
  const std::vector<std::string>& pos = t.positional();
  if (s.ok() && (pos.empty() || (pos[0] != "ls" && pos[0] != "show"))) {
    s = InvalidArgument("expected 'ls' or 'show'");
  }
  if (s.ok() && pos[0] == "ls" && pos.size() > 1) s = InvalidArgument("ls takes no files");
  if (s.ok() && o->dir.empty() && (pos[0] == "ls" || pos.size() == 1)) {
    s = InvalidArgument("no spool directory: set --spool, XDG_STATE_HOME or HOME");
  }
  if (!s.ok()) return UsageError(t, s);
  o->ls = pos[0] == "ls";
  o->files.assign(pos.begin() + 1, pos.end());
  return std::nullopt;
}

// The records to read: the spool's, or the files named (a directory among
// them is a spool: its records, in order).
StatusOr<std::vector<SpoolEntry>> Entries(const SpoolOptions& o) {
  if (o.files.empty()) return ListSpool(o.dir);
  std::vector<SpoolEntry> entries;
  for (const std::string& f : o.files) {
    std::error_code ec;
    if (std::filesystem::is_directory(f, ec)) {
      FP_ASSIGN_OR_RETURN(std::vector<SpoolEntry> listed, ListSpool(f));
      entries.insert(entries.end(), listed.begin(), listed.end());
      continue;
    }
    const size_t slash = f.rfind('/');
    entries.push_back({f, slash == std::string::npos ? f : f.substr(slash + 1)});
  }
  return entries;
}

void PrintRecord(const SpoolEntry& e, const wire::RunRecord& r, const SpoolOptions& o) {
  if (o.ls) {
    std::printf("%-36s %-19s %7s %-24s %8llu  %s\n", e.name.c_str(),
                LocalTime(r.ended_unix_ms()).c_str(),
                FormatBytes(static_cast<double>(e.bytes)).c_str(),
                RefusedText(r.counters().refused()).c_str(),
                static_cast<unsigned long long>(r.counters().calls_measured()), ApiList(r).c_str());
  } else if (o.json) {
    std::string out;
    google::protobuf::util::JsonPrintOptions jo;
    jo.add_whitespace = true;
    jo.always_print_primitive_fields = true;
    // A record that parsed always prints; were it not to, {} says so.
    if (!google::protobuf::util::MessageToJsonString(r, &out, jo).ok()) out = "{}\n";
    std::printf("%s", out.c_str());
  } else {
    PrintRunRecord(stdout, e.name, r, o.histograms);
    std::printf("\n");
  }
}

}  // namespace

int CmdSpool(int argc, char** argv) {
  SpoolOptions o;
  if (const ExitCode done = ParseSpoolOptions(argc, argv, &o)) return *done;
  StatusOr<std::vector<SpoolEntry>> entries = Entries(o);
  if (!entries.ok()) {
    std::cerr << "fieldprof spool: " << entries.status().message() << "\n";
    return 1;
  }
  if (o.ls && !entries->empty()) {
    std::printf("%-36s %-19s %7s %-24s %8s  %s\n", "RECORD", "ENDED", "SIZE", "STATUS", "CALLS",
                "APIS");
  }
  size_t bad = 0;
  uint64_t total_bytes = 0;
  for (const SpoolEntry& e : *entries) {
    StatusOr<wire::RunRecord> r = ReadRunRecord(e.path);
    if (!r.ok()) {
      std::cerr << "fieldprof spool: " << r.status().message() << "\n";
      ++bad;
      continue;
    }
    total_bytes += e.bytes;
    PrintRecord(e, *r, o);
  }
  if (o.ls) {
    const size_t good = entries->size() - bad;
    std::printf("%zu record%s, %s in %s\n", good, good == 1 ? "" : "s",
                FormatBytes(static_cast<double>(total_bytes)).c_str(), o.dir.c_str());
  }
  return bad > 0 ? 1 : 0;
}

}  // namespace fieldprof::tools
