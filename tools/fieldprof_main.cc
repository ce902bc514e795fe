// fieldprof: the command line. One file per subcommand (cmd_*.cc); this file
// only dispatches.
#include <cstring>
#include <iostream>

#include "tools/commands.h"

int main(int argc, char** argv) {
  using namespace fieldprof::tools;
  if (argc < 2 || std::strcmp(argv[1], "--help") == 0 || std::strcmp(argv[1], "-h") == 0) {
    std::cout << "Usage: fieldprof COMMAND [options]\n\n"
                 "Commands:\n"
                 "  run    run a command with the runtime: measure a few random library APIs\n"
                 "  spool  the run records on this machine not yet uploaded (ls, show)\n"
                 "  status consent, spool, outbox, last upload, settings on this machine\n"
                 "         (--pending: exactly what would be sent next)\n"
                 "  optin  take part: measure your programs and upload the sums\n"
                 "  optout stop taking part and delete your local data\n"
                 "  top    the most called APIs an aggregator holds, with their costs\n"
                 "  api    one API's field cost from an aggregator: statistics and a histogram\n"
                 "  pull   fetch the signed field snapshot into the local cache\n"
                 "  cost   one API's field cost from the local cache, offline\n"
                 "  check  do your runs pay more for an API than the field? (per-API test)\n"
                 "  lab    profile one scenario completely (every API it calls); show, merge\n"
                 "  report one module's field cost: APIs by share, namespaces (text, html, ...)\n"
                 "  diff   which APIs of a module got slower or faster: two versions or ranges\n"
                 "  docs   per-API cost snippets (Markdown, HTML) for generated API references\n"
                 "  lsp    a language server: field costs on hover and at call sites in editors\n\n"
                 "'fieldprof COMMAND --help' describes each command.\n";
    return argc < 2 ? 2 : 0;
  }
  const std::string cmd = argv[1];
  if (cmd == "top") return CmdTop(argc - 1, argv + 1);
  if (cmd == "api") return CmdApi(argc - 1, argv + 1);
  if (cmd == "run") return CmdRun(argc - 1, argv + 1);
  if (cmd == "spool") return CmdSpool(argc - 1, argv + 1);
  if (cmd == "status") return CmdStatus(argc - 1, argv + 1);
  if (cmd == "pull") return CmdPull(argc - 1, argv + 1);
  if (cmd == "cost") return CmdCost(argc - 1, argv + 1);
  if (cmd == "optin") return CmdOptin(argc - 1, argv + 1);
  if (cmd == "optout") return CmdOptout(argc - 1, argv + 1);
  if (cmd == "lsp") return CmdLsp(argc - 1, argv + 1);
  if (cmd == "check") return CmdCheck(argc - 1, argv + 1);
  if (cmd == "lab") return CmdLab(argc - 1, argv + 1);
  if (cmd == "report") return CmdReport(argc - 1, argv + 1);
  if (cmd == "diff") return CmdDiff(argc - 1, argv + 1);
  if (cmd == "docs") return CmdDocs(argc - 1, argv + 1);
  std::cerr << "fieldprof: unknown command '" << cmd << "' (see fieldprof --help)\n";
  return 2;
}
