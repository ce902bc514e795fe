// One table of named options read from a config file and from command-line
// flags, so both use the same names and the same checks.
//
//   int64_t threads = 2;            // defaults live in the caller's struct
//   OptionTable t("fieldprof-aggregator", "Ingests batches over HTTPS.");
//   t.AddInt("threads", &threads, "I/O threads", 1, 256);
//   Status s = t.Parse(argc, argv);  // --config=FILE is read first, flags override it
//   if (t.help_requested()) { std::cout << t.Help(); return 0; }
//
// Config file: one "name = value" per line, '#' starts a comment, blank lines
// ignored. Flags: --name=value or --name value; booleans also as --name.
// Unknown names, malformed numbers and out-of-range values are errors that
// say which line or flag was wrong.
#ifndef FIELDPROF_COMMON_SETTINGS_OPTIONS_H_
#define FIELDPROF_COMMON_SETTINGS_OPTIONS_H_

#include <cstdint>
#include <functional>
#include <set>
#include <string>
#include <string_view>
#include <vector>

#include "common/base/status.h"

namespace fieldprof {

// `s` without leading and trailing blanks (space, tab, CR, LF): for the
// "name = value" files read here and in agent_state/runtime_settings.
std::string_view TrimSpace(std::string_view s);

class OptionTable {
 public:
  OptionTable(std::string program, std::string summary);
  OptionTable(const OptionTable&) = delete;
  OptionTable& operator=(const OptionTable&) = delete;

  // Targets must outlive the table; their current values are the defaults.
  void AddString(std::string name, std::string* target, std::string help);
  void AddInt(std::string name, int64_t* target, std::string help, int64_t min, int64_t max);
  void AddDouble(std::string name, double* target, std::string help, double min, double max);
  void AddBool(std::string name, bool* target, std::string help);
  // "-X" stands for "--name" (added with one of the above first): -o FILE.
  void AddShort(char letter, const std::string& name);
  // What the help says an option's default is, when its initial value
  // does not say it (a default decided later, from what is given).
  void SayDefault(const std::string& name, std::string text);
  // A flag that was renamed: given (flag or config file), it is refused
  // with `says` (what to write instead), not as an unknown one.
  void AddRenamed(std::string old_name, std::string says);

  // Runs after every value is read (file and flags), in the order added:
  // for what one option means given another (--host h:1 with --port 2).
  void AddCheck(std::function<Status(const OptionTable&)> check);

  // Reads "--config FILE" (if given) first, then applies the flags over it,
  // then runs the checks. Positional arguments are collected into
  // positional().
  [[nodiscard]] Status Parse(int argc, const char* const* argv);
  [[nodiscard]] Status ParseFile(const std::string& path);
  [[nodiscard]] Status Set(std::string_view name, std::string_view value);

  const std::string& program() const { return program_; }
  bool help_requested() const { return help_requested_; }
  // Whether `name` was given (config file or flag), not left at its default.
  bool given(const std::string& name) const { return given_.count(name) != 0; }
  const std::vector<std::string>& positional() const { return positional_; }
  std::string Help() const;

 private:
  struct Option {
    std::string name;
    std::string help;
    std::string default_text;
    bool is_bool = false;
    std::function<Status(std::string_view)> set;
  };
  const Option* Find(std::string_view name) const;
  Status Unknown(std::string_view name, bool flag) const;
  Status ParseFlags(int argc, const char* const* argv);
  Status ParseConfigThenFlags(int argc, const char* const* argv);
  Status ParseFileThenFlags(int argc, const char* const* argv, const std::string& file);

  std::string program_;
  std::string summary_;
  std::vector<Option> options_;
  std::vector<std::string> positional_;
  bool help_requested_ = false;
  std::vector<std::pair<char, std::string>> shorts_;
  std::vector<std::pair<std::string, std::string>> renamed_;
  std::set<std::string> given_;
  std::vector<std::function<Status(const OptionTable&)>> checks_;
};

}  // namespace fieldprof

#endif  // FIELDPROF_COMMON_SETTINGS_OPTIONS_H_
