// fieldprof points upload|pull|tags --host: developer mode, the
// runs `fieldprof points record` wrote, kept by an aggregator for their
// developer (POST/GET /v1/dev/runs, GET /v1/dev/tags), who alone reads
// them back; `pull` writes them where `show` and `compare` read them.
#include "tools/points/points_remote.h"

#include <algorithm>
#include <cctype>
#include <cstdio>
#include <cstdlib>
#include <ctime>
#include <filesystem>
#include <iostream>
#include <set>
#include <string>
#include <vector>

#include "common/base/durable_file.h"
#include "common/crypto/signing.h"
#include "common/net/https_client.h"
#include "common/points/dev_run.h"
#include "common/points/points_file.h"
#include "common/proto/fieldprof.pb.h"
#include "common/settings/options.h"
#include "common/wire/key_rules.h"
#include "common/wire/wire.h"
#include "tools/shared/client_flags.h"
#include "tools/shared/command_line.h"

namespace fieldprof::tools {
namespace {

namespace fs = std::filesystem;

// An upload stays under the aggregator's 1 MiB, with room for the framing.
constexpr size_t kMaxUpload = 1000 * 1000;

constexpr const char* kDeveloperUsage =
    "Developer mode: your program's runs, kept by an aggregator for you alone.\n"
    "  fieldprof points upload startup.d --host agg.example --token $TOKEN\n"
    "  fieldprof points tags --host agg.example --token $TOKEN\n"
    "  fieldprof points pull --tag startup --from 2026-11-20 -o startup.d \\\n"
    "      --host agg.example --token $TOKEN\n"
    "  fieldprof points show startup.d\n"
    "The token is a developer's (the aggregator's --developers_file), not a\n"
    "vendor's; FIELDPROF_DEV_TOKEN may hold it instead of --token. An upload is\n"
    "exactly once: a run's id is its file's hash, and a run sent again is\n"
    "recognised. Days are UTC, both ends included.";

void Say(const std::string& verb, const std::string& what) {
  std::cerr << "fieldprof points " << verb << ": " << what << "\n";
}

// A query value, percent-encoded ('+' would be a space).
std::string Escape(const std::string& v) {
  std::string out;
  for (unsigned char c : v) {
    if (std::isalnum(c) || c == '-' || c == '_' || c == '.') {
      out += static_cast<char>(c);
    } else {
      char b[4];
      std::snprintf(b, sizeof b, "%%%02X", c);
      out += b;
    }
  }
  return out;
}

std::string Reply(const StatusOr<HttpReply>& r) {
  if (!r.ok()) return r.status().message();
  return std::to_string(r->status) + " " + r->body;
}

int Upload(const std::vector<std::string>& paths, HttpsClient& http, const HttpHeaders& auth) {
  StatusOr<std::vector<std::string>> found = fieldprof::PointsFiles(paths);
  if (!found.ok()) {
    Say("upload", found.status().message());
    return 1;
  }
  const std::vector<std::string>& files = *found;
  if (files.empty()) {
    Say("upload", "no run files (*.fppoints) in " + paths[0]);
    return 1;
  }
  uint64_t kept = 0, duplicates = 0;
  wire::DevUpload up;
  up.set_schema_version(1);
  auto send = [&]() -> bool {
    if (up.runs_size() == 0) return true;
    StatusOr<HttpReply> r = http.Request("POST", "/v1/dev/runs", "application/x-protobuf",
                                         up.SerializeAsString(), auth);
    if (!r.ok() || r->status != 200) {
      Say("upload", Reply(r));
      return false;
    }
    const nlohmann::json j = nlohmann::json::parse(r->body, nullptr, false);
    if (j.is_object()) {
      kept += j.value("runs", uint64_t{0});
      duplicates += j.value("duplicates", uint64_t{0});
    }
    up.clear_runs();
    return true;
  };
  for (size_t i = 0; i < files.size(); ++i) {
    StatusOr<wire::DevRun> run = DevRunOf(files[i]);
    if (!run.ok()) {
      Say("upload", run.status().message());
      return 1;
    }
    if (run->ByteSizeLong() > kMaxUpload) {
      Say("upload", files[i] + " is larger than an upload may be (1 MB)");
      return 1;
    }
    if (up.ByteSizeLong() + run->ByteSizeLong() + 16 > kMaxUpload && !send()) return 1;
    *up.add_runs() = std::move(*run);
    std::fprintf(stderr, "\rfieldprof points upload: %zu/%zu runs", i + 1, files.size());
  }
  if (!send()) return 1;
  std::fprintf(stderr, "\n");
  std::printf("%llu runs uploaded, %llu already there\n", static_cast<unsigned long long>(kept),
              static_cast<unsigned long long>(duplicates));
  return 0;
}

int Pull(const std::string& tag, const std::string& program, const std::string& from,
         const std::string& to, const std::string& output, HttpsClient& http,
         const HttpHeaders& auth) {
  std::string target = "/v1/dev/runs?tag=" + Escape(tag);
  if (!program.empty()) target += "&program=" + Escape(program);
  if (!from.empty()) target += "&from=" + Escape(from);
  if (!to.empty()) target += "&to=" + Escape(to);
  StatusOr<HttpReply> r = http.Get(target, auth);
  if (!r.ok() || r->status != 200) {
    Say("pull", Reply(r));
    return 1;
  }
  const nlohmann::json j = nlohmann::json::parse(r->body, nullptr, false);
  if (!j.is_object() || !j.contains("runs") || !j["runs"].is_array()) {
    Say("pull", "the aggregator's answer is not a list of runs");
    return 1;
  }
  if (Status m = MakeDirs(output, FileAccess::kShared); !m.ok()) {
    Say("pull", "cannot make " + output + ": " + m.message());
    return 1;
  }
  size_t n = 0;
  const size_t total = j["runs"].size();
  for (const nlohmann::json& run : j["runs"]) {
    const std::string id = run.value("id", "");
    if (id.size() != 32 || id.find_first_not_of("0123456789abcdef") != std::string::npos) continue;
    StatusOr<HttpReply> f = http.Get("/v1/dev/runs/" + id, auth);
    if (!f.ok() || f->status != 200) {
      Say("pull", id + ": " + Reply(f));
      return 1;
    }
    // A run that went up in parts is named by its first part's hash.
    const uint64_t id_bytes = run.value("id_bytes", uint64_t{0});
    if (id_bytes > f->body.size() ||
        HexEncode(Sha256(id_bytes > 0 ? f->body.substr(0, id_bytes) : f->body).substr(0, 16)) !=
            id) {
      Say("pull", id + ": the file does not match its id");
      return 1;
    }
    const std::string path = (fs::path(output) / (id + ".fppoints")).string();
    if (Status w = WriteFileDurably(path, f->body, FileAccess::kShared); !w.ok()) {
      Say("pull", w.message());
      return 1;
    }
    std::fprintf(stderr, "\rfieldprof points pull: %zu/%zu runs", ++n, total);
  }
  if (total > 0) std::fprintf(stderr, "\n");
  std::printf("%zu runs of tag %s in %s\n", n, tag.c_str(), output.c_str());
  return 0;
}

int RemoteTags(HttpsClient& http, const HttpHeaders& auth) {
  StatusOr<HttpReply> r = http.Get("/v1/dev/tags", auth);
  if (!r.ok() || r->status != 200) {
    Say("tags", Reply(r));
    return 1;
  }
  const nlohmann::json j = nlohmann::json::parse(r->body, nullptr, false);
  if (!j.is_object() || !j.contains("tags")) {
    Say("tags", "the aggregator's answer is not a list of tags");
    return 1;
  }
  std::printf("%-24s %-24s %8s  %s\n", "tag", "program", "runs", "last run (UTC)");
  for (const nlohmann::json& t : j["tags"]) {
    const int64_t ns = t.value("last_started_unix_ns", int64_t{0});
    const time_t secs = static_cast<time_t>(ns / 1000000000);
    char when[32] = "-";
    tm utc{};
    if (gmtime_r(&secs, &utc) != nullptr)
      std::strftime(when, sizeof when, "%Y-%m-%d %H:%M:%S", &utc);
    std::printf("%-24s %-24s %8llu  %s\n", t.value("tag", "").c_str(),
                t.value("program", "").c_str(),
                static_cast<unsigned long long>(t.value("runs", uint64_t{0})), when);
  }
  return 0;
}

}  // namespace

int PointsRemote(const std::string& verb, int argc, char** argv) {
  ClientFlags client;
  std::string token, tag, program, from, to, output;
  OptionTable t("fieldprof points " + verb, kDeveloperUsage);
  client.Register(t);
  t.AddString("token", &token, "your developer token (default: $FIELDPROF_DEV_TOKEN)");
  t.AddString("tag", &tag, "pull: the runs with this tag");
  t.AddString("program", &program, "pull: only this program's runs");
  t.AddString("from", &from, "pull: runs that began on or after this day (YYYY-MM-DD, UTC)");
  t.AddString("to", &to, "pull: runs that began on or before this day (YYYY-MM-DD, UTC)");
  t.AddString("output", &output, "pull: the directory the runs go to (-o)");
  t.AddShort('o', "output");
  Status s;
  if (ParseOrShowHelp(t, argc, argv, &s)) return 0;
  if (token.empty() && std::getenv("FIELDPROF_DEV_TOKEN") != nullptr) {
    token = std::getenv("FIELDPROF_DEV_TOKEN");
  }
  if (s.ok() && client.options.host.empty()) s = InvalidArgument("--host is needed");
  if (s.ok() && token.empty()) s = InvalidArgument("--token (or FIELDPROF_DEV_TOKEN) is needed");
  if (s.ok() && verb == "upload" && t.positional().empty()) {
    s = InvalidArgument("give the directories or files of the runs");
  }
  if (s.ok() && verb == "pull" && (tag.empty() || output.empty())) {
    s = InvalidArgument("give --tag and -o DIR");
  }
  if (!s.ok()) return UsageError(t, s);
  HttpsClient http(client.Resolve());
  const HttpHeaders auth = {{"Authorization", "Bearer " + token}};
  if (verb == "upload") return Upload(t.positional(), http, auth);
  if (verb == "pull") return Pull(tag, program, from, to, output, http, auth);
  return RemoteTags(http, auth);
}

}  // namespace fieldprof::tools
