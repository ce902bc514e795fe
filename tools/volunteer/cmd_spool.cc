// fieldprof spool ls|show: what the runtime has recorded on this machine and
// not yet uploaded, readably.
#include <google/protobuf/util/json_util.h>

#include <algorithm>
#include <cstdio>
#include <ctime>
#include <filesystem>
#include <iostream>

#include "common/api_key.h"
#include "common/histogram.h"
#include "common/options.h"
#include "common/spool.h"
#include "common/wire.h"
#include "tools/cli/run_record_text.h"
#include "tools/commands.h"
#include "tools/cli/format.h"

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

}  // namespace

int CmdSpool(int argc, char** argv) {
  std::string dir = DefaultSpoolDir();
  bool json = false, histograms = false;
  OptionTable t("fieldprof spool",
                "Shows the run records the runtime left in the spool, not yet uploaded.\n\n"
                "  fieldprof spool ls [options]              one line per record\n"
                "  fieldprof spool show [options] [FILE...]  records in full (default: all)");
  t.AddString("spool", &dir, "spool directory");
  t.AddBool("json", &json, "show: print each record as JSON");
  t.AddBool("histograms", &histograms, "show: draw each metric's log2 histogram");
  Status s = t.Parse(argc, argv);
  if (t.help_requested()) {
    std::cout << t.Help();
    return 0;
  }
  const std::vector<std::string>& pos = t.positional();
  if (s.ok() && (pos.empty() || (pos[0] != "ls" && pos[0] != "show"))) {
    s = InvalidArgument("expected 'ls' or 'show'");
  }
  if (s.ok() && pos[0] == "ls" && pos.size() > 1) s = InvalidArgument("ls takes no files");
  if (s.ok() && dir.empty() && (pos[0] == "ls" || pos.size() == 1)) {
    s = InvalidArgument("no spool directory: set --spool, XDG_STATE_HOME or HOME");
  }
  if (!s.ok()) {
    std::cerr << "fieldprof spool: " << s.message() << " (see --help)\n";
    return 2;
  }
  std::vector<SpoolEntry> entries;
  if (pos[0] == "ls" || pos.size() == 1) {
    StatusOr<std::vector<SpoolEntry>> listed = ListSpool(dir);
    if (!listed.ok()) {
      std::cerr << "fieldprof spool: " << listed.status().message() << "\n";
      return 1;
    }
    entries = std::move(*listed);
  } else {
    // A directory among the files is a spool: its records, in order.
    for (size_t i = 1; i < pos.size(); ++i) {
      std::error_code ec;
      if (std::filesystem::is_directory(pos[i], ec)) {
        StatusOr<std::vector<SpoolEntry>> listed = ListSpool(pos[i]);
        if (!listed.ok()) {
          std::cerr << "fieldprof spool: " << listed.status().message() << "\n";
          return 1;
        }
        entries.insert(entries.end(), listed->begin(), listed->end());
        continue;
      }
      const size_t slash = pos[i].rfind('/');
      entries.push_back({pos[i], slash == std::string::npos ? pos[i] : pos[i].substr(slash + 1)});
    }
  }
  int bad = 0;
  uint64_t total_bytes = 0;
  if (pos[0] == "ls" && !entries.empty()) {
    std::printf("%-36s %-19s %7s %-24s %8s  %s\n", "RECORD", "ENDED", "SIZE", "STATUS", "CALLS",
                "APIS");
  }
  for (const SpoolEntry& e : entries) {
    StatusOr<wire::RunRecord> r = ReadRunRecord(e.path);
    if (!r.ok()) {
      std::cerr << "fieldprof spool: " << r.status().message() << "\n";
      ++bad;
      continue;
    }
    total_bytes += e.bytes;
    if (pos[0] == "ls") {
      std::printf(
          "%-36s %-19s %7s %-24s %8llu  %s\n", e.name.c_str(),
          LocalTime(r->ended_unix_ms()).c_str(), FormatBytes(static_cast<double>(e.bytes)).c_str(),
          RefusedText(r->counters().refused()).c_str(),
          static_cast<unsigned long long>(r->counters().calls_measured()), ApiList(*r).c_str());
    } else if (json) {
      std::string out;
      google::protobuf::util::JsonPrintOptions o;
      o.add_whitespace = true;
      o.always_print_primitive_fields = true;
      (void)google::protobuf::util::MessageToJsonString(*r, &out, o);
      std::printf("%s", out.c_str());
    } else {
      PrintRunRecord(stdout, e.name, *r, histograms);
      std::printf("\n");
    }
  }
  if (pos[0] == "ls") {
    std::printf("%zu record%s, %s in %s\n", entries.size() - static_cast<size_t>(bad),
                entries.size() - bad == 1 ? "" : "s",
                FormatBytes(static_cast<double>(total_bytes)).c_str(), dir.c_str());
  }
  return bad > 0 ? 1 : 0;
}

}  // namespace fieldprof::tools
