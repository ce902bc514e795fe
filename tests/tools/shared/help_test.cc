// The command line's own list of commands against the README's, and every
// command's --help: the real binary.
#include <gtest/gtest.h>
#include <sys/wait.h>

#include <cstdio>
#include <fstream>
#include <regex>
#include <set>
#include <sstream>
#include <string>
#include <utility>
#include <vector>

namespace {

// The command's stdout (with `with_stderr`, its stderr instead) and exit
// status.
int RunCli(const std::string& cmd, std::string* out, bool with_stderr = false) {
  out->clear();
  FILE* p = popen((cmd + (with_stderr ? " 2>&1 >/dev/null" : " 2>/dev/null")).c_str(), "r");
  if (p == nullptr) return -1;
  char buf[4096];
  for (size_t n; (n = fread(buf, 1, sizeof buf, p)) > 0;) out->append(buf, n);
  const int status = pclose(p);
  return WIFEXITED(status) ? WEXITSTATUS(status) : -1;
}

// The names `fieldprof --help` lists under "Commands:".
std::set<std::string> HelpCommands() {
  std::string out;
  EXPECT_EQ(RunCli(std::string(FIELDPROF_CLI_BIN) + " --help", &out), 0);
  std::set<std::string> names;
  std::istringstream lines(out);
  bool in = false;
  const std::regex entry(R"(^  ([a-z]+) +\S)");
  for (std::string line; std::getline(lines, line);) {
    if (line == "Commands:") {
      in = true;
      continue;
    }
    if (in && line.empty()) break;
    std::smatch m;
    if (in && std::regex_search(line, m, entry)) names.insert(m[1]);
  }
  return names;
}

TEST(HelpTest, TheReadmeListsEveryCommandTheBinaryHas) {
  const std::set<std::string> help = HelpCommands();
  ASSERT_GE(help.size(), 15u);
  std::ifstream in(std::string(FIELDPROF_SOURCE_DIR) + "/README.md");
  ASSERT_TRUE(in);
  std::set<std::string> readme;
  const std::regex row(R"(^\| `fieldprof ([a-z]+)` \|)");
  for (std::string line; std::getline(in, line);) {
    std::smatch m;
    if (std::regex_search(line, m, row)) readme.insert(m[1]);
  }
  EXPECT_EQ(readme, help);
}

TEST(HelpTest, EveryCommandAnswersHelpAndAnUnknownOneIsAUsageError) {
  for (const std::string& name : HelpCommands()) {
    std::string out;
    EXPECT_EQ(RunCli(std::string(FIELDPROF_CLI_BIN) + " " + name + " --help", &out), 0) << name;
    EXPECT_NE(out.find("fieldprof"), std::string::npos) << name << ": " << out;
  }
  std::string out;
  EXPECT_EQ(RunCli(std::string(FIELDPROF_CLI_BIN) + " no-such-command", &out), 2);
  EXPECT_EQ(RunCli(std::string(FIELDPROF_CLI_BIN), &out), 2);
}

TEST(HelpTest, AnUnknownFlagIsOneUsageLineNamingTheCommand) {
  for (const std::string& name : HelpCommands()) {
    std::string err;
    EXPECT_EQ(RunCli(std::string(FIELDPROF_CLI_BIN) + " " + name + " --no-such-flag </dev/null",
                     &err, /*with_stderr=*/true),
              2)
        << name;
    EXPECT_EQ(err, "fieldprof " + name + ": unknown flag --no-such-flag (see --help)\n") << name;
  }
}

}  // namespace

// Every command with verbs finds them one way (RunVerb): each verb answers
// --help under its own name; a word that is no verb, or a flag before any
// verb, is a usage error naming the command; a command with a job of its
// own without a verb (record, lab) runs it instead.
TEST(HelpTest, EveryCommandWithVerbsAnswersTheSameWay) {
  const std::string cli = FIELDPROF_CLI_BIN;
  const std::vector<std::pair<std::string, std::vector<std::string>>> commands = {
      {"points", {"record", "show", "tags", "compare", "upload", "pull", "field"}},
      {"tree",
       {"show", "build", "top", "callers", "paths", "subtree", "leaks", "add", "mean", "min", "sub",
        "merge"}},
      {"record", {"show", "recover"}},
      {"lab", {"show", "merge", "upload", "list", "fetch"}},
  };
  std::string out;
  for (const auto& [command, verbs] : commands) {
    for (const std::string& verb : verbs) {
      EXPECT_EQ(RunCli(cli + " " + command + " " + verb + " --help", &out), 0) << command << verb;
      EXPECT_NE(out.find("Usage: fieldprof " + command + " " + verb), std::string::npos)
          << command << " " << verb << ": " << out;
    }
    const bool own_job = command == "record" || command == "lab";
    // A word that is no verb: the usage error, or (record, lab) the command
    // run without a verb, which then names what is wrong.
    EXPECT_EQ(RunCli(cli + " " + command + " frobnicate", &out, true), 2) << command;
    if (!own_job) {
      EXPECT_NE(out.find("fieldprof " + command + ": \"frobnicate\" is not a verb: " + verbs[0]),
                std::string::npos)
          << out;
    }
    EXPECT_EQ(RunCli(cli + " " + command + " --frobnicate", &out, true), 2) << command;
    EXPECT_NE(out.find("fieldprof " + command + ": unknown flag --frobnicate"), std::string::npos)
        << out;
    EXPECT_EQ(RunCli(cli + " " + command + " --help", &out), 0) << command;
    EXPECT_NE(out.find("Usage: fieldprof " + command), std::string::npos) << out;
  }
}
