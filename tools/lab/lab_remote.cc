// fieldprof lab upload|list|fetch: lab profiles kept by an aggregator, apart
// from the field sums (POST/GET /v1/lab/profiles).
#include <cstdio>
#include <iostream>
#include <string>

#include "common/base/durable_file.h"
#include "common/model/lab_format.h"
#include "common/net/https_client.h"
#include "common/settings/options.h"
#include "common/system/field_door.h"
#include "common/system/system_code.h"
#include "tools/lab/lab_commands.h"
#include "tools/shared/client_flags.h"
#include "tools/shared/command_line.h"

namespace fieldprof::tools {

namespace {

// A profile as it may leave: the door the agent applies (the system's
// code, and the modules the user shares), its scenarios unnamed unless
// kept. What was left out is said on stderr.
StatusOr<std::string> AsItMayLeave(const std::string& file, const wire::LabProfile& profile,
                                   SystemCode& code, const std::string& share, bool keep_names) {
  FP_RETURN_IF_ERROR(code.Refresh());
  FieldDoor door(&code, share);
  wire::LabProfile p = profile;
  door.Apply(&p, keep_names);
  for (const auto& [module, d] : door.dropped()) {
    std::fprintf(stderr, "fieldprof lab upload: %s: %s left out: %s\n", file.c_str(),
                 module.c_str(), d.why.c_str());
  }
  if (p.records_size() == 0) {
    return InvalidArgument(file + ": nothing in it is the system's code (see --share)");
  }
  return EncodeLabProfile(p);
}

}  // namespace

int LabRemote(const std::string& verb, int argc, char** argv) {
  ClientFlags client;
  std::string output, share;
  bool keep_names = false;
  OptionTable t("fieldprof lab " + verb,
                "Lab profiles on an aggregator, kept apart from the field sums:\n"
                "  fieldprof lab upload PROFILE... --host H    prints each profile's id\n"
                "  fieldprof lab list --host H\n"
                "  fieldprof lab fetch ID -o FILE --host H\n"
                "An upload is exactly once: the id is the profile's content hash, and the same\n"
                "profile sent again is recognised. Only the system's code goes up (modules of\n"
                "installed Debian packages, unchanged: docs/privacy.md), and the scenarios\n"
                "unnamed; --share and --keep_scenario_names widen that.");
  client.Register(t);
  t.AddString("output", &output, "fetch: the file to write (-o)");
  t.AddString("share", &share,
              "upload: your own modules to send too (comma-separated names, e.g. libmine.so.1)");
  t.AddBool("keep_scenario_names", &keep_names,
            "upload: keep the scenarios' names (by default the command's name: scenario-1, ...)");
  t.AddShort('o', "output");
  Status s;
  if (ParseOrShowHelp(t, argc, argv, &s)) return 0;
  if (s.ok() && client.options.host.empty()) s = InvalidArgument("--host is needed");
  if (s.ok() && verb == "upload" && t.positional().empty()) s = InvalidArgument("give profiles");
  if (s.ok() && verb == "fetch" && (t.positional().size() != 1 || output.empty())) {
    s = InvalidArgument("give one id and -o FILE");
  }
  if (!s.ok()) return UsageError(t, s);
  HttpsClient http(client.Resolve());
  if (verb == "upload") {
    int failed = 0;
    SystemCode code;
    for (const std::string& f : t.positional()) {
      StatusOr<std::string> bytes = ReadWholeFile(f);
      StatusOr<wire::LabProfile> p =
          bytes.ok() ? ParseLabProfile(*bytes, f) : StatusOr<wire::LabProfile>(bytes.status());
      StatusOr<std::string> leaving =
          p.ok() ? AsItMayLeave(f, *p, code, share, keep_names) : StatusOr<std::string>(p.status());
      StatusOr<HttpReply> r =
          leaving.ok() ? http.Post("/v1/lab/profiles", "application/octet-stream", *leaving)
                       : StatusOr<HttpReply>(leaving.status());
      if (!r.ok() || r->status != 200) {
        std::fprintf(stderr, "fieldprof lab upload: %s: %s\n", f.c_str(),
                     r.ok() ? (std::to_string(r->status) + " " + r->body).c_str()
                            : r.status().message().c_str());
        ++failed;
        continue;
      }
      std::printf("%s\t%s", f.c_str(), r->body.c_str());
    }
    return failed ? 1 : 0;
  }
  const std::string target =
      verb == "list" ? "/v1/lab/profiles" : "/v1/lab/profiles/" + t.positional()[0];
  StatusOr<HttpReply> r = http.Get(target);
  if (!r.ok() || r->status != 200) {
    std::fprintf(stderr, "fieldprof lab %s: %s\n", verb.c_str(),
                 r.ok() ? (std::to_string(r->status) + " " + r->body).c_str()
                        : r.status().message().c_str());
    return 1;
  }
  if (verb == "list") {
    std::cout << r->body;
    return 0;
  }
  if (StatusOr<wire::LabProfile> p = ParseLabProfile(r->body, "the answer"); !p.ok()) {
    std::cerr << "fieldprof lab fetch: " << p.status().message() << "\n";
    return 1;
  }
  if (Status w = WriteFileDurably(output, r->body, FileAccess::kShared); !w.ok()) {
    std::cerr << "fieldprof lab fetch: " << w.message() << "\n";
    return 1;
  }
  return 0;
}

}  // namespace fieldprof::tools
