#include "tools/shared/command_line.h"

#include <cstring>
#include <iostream>

namespace fieldprof::tools {

bool ParseOrShowHelp(OptionTable& t, int argc, const char* const* argv, Status* s) {
  *s = t.Parse(argc, argv);
  if (!t.help_requested()) return false;
  std::cout << t.Help();
  return true;
}

int UsageError(const OptionTable& t, const Status& s) {
  std::cerr << t.program() << ": " << s.message() << " (see --help)\n";
  return 2;
}

namespace {

const Verb* VerbOf(std::span<const Verb> verbs, int argc, char** argv) {
  for (const Verb& v : verbs) {
    if (argc >= 2 && std::strcmp(argv[1], v.name) == 0) return &v;
  }
  return nullptr;
}

}  // namespace

int RunVerb(std::span<const Verb> verbs, int argc, char** argv,
            int (*without_verb)(int argc, char** argv)) {
  const Verb* v = VerbOf(verbs, argc, argv);
  return v != nullptr ? v->run(argc - 1, argv + 1) : without_verb(argc, argv);
}

int RunVerb(const std::string& command, std::span<const Verb> verbs, OptionTable& help, int argc,
            char** argv) {
  if (const Verb* v = VerbOf(verbs, argc, argv)) return v->run(argc - 1, argv + 1);
  const std::string word = argc >= 2 ? argv[1] : "";
  Status s;
  if (word.empty() || word.rfind("-", 0) == 0) {  // --help, or a flag before any verb
    if (ParseOrShowHelp(help, argc, argv, &s)) return 0;
    if (word.empty()) {
      std::cout << help.Help();
      return 2;
    }
  }
  std::string names;
  for (const Verb& v : verbs) names += std::string(names.empty() ? "" : ", ") + v.name;
  std::cerr << command << ": ";
  if (!s.ok()) {
    std::cerr << s.message();
  } else {
    std::cerr << "\"" << word << "\" is not a verb: " << names;
  }
  std::cerr << " (see --help)\n";
  return 2;
}

}  // namespace fieldprof::tools
