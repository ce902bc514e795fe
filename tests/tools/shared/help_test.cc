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
