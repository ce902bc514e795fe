#include "tools/commands.h"

namespace fieldprof::tools {

std::span<const Command> Commands() {
  static constexpr Command kCommands[] = {
      {"run", "run a command with the runtime: measure a few random library APIs", CmdRun},
      {"spool", "the run records on this machine not yet uploaded (ls, show)", CmdSpool},
      {"status",
       "consent, spool, outbox, last upload, settings on this machine\n"
       "(--pending: exactly what would be sent next)",
       CmdStatus},
      {"optin", "take part: measure your programs and upload the sums", CmdOptin},
      {"optout", "stop taking part and delete your local data", CmdOptout},
      {"top", "the most called APIs an aggregator holds, with their costs", CmdTop},
      {"api", "one API's field cost from an aggregator: statistics and a histogram", CmdApi},
      {"pull", "fetch the signed field snapshot into the local cache", CmdPull},
      {"cost", "one API's field cost from the local cache, offline", CmdCost},
      {"check", "do your runs pay more for an API than the field? (per-API test)", CmdCheck},
      {"lab", "profile one scenario completely (every API it calls); show, merge", CmdLab},
      {"report", "one module's field cost: APIs by share, namespaces (text, html, ...)", CmdReport},
      {"stacks", "where a library's CPU time goes inside it in the field: flame graphs", CmdStacks},
      {"diff", "which APIs of a module got slower or faster: two versions or ranges", CmdDiff},
      {"docs", "per-API cost snippets (Markdown, HTML) for generated API references", CmdDocs},
      {"lsp", "a language server: field costs on hover and at call sites in editors", CmdLsp},
      {"record", "sample a command's call stacks into a time tree; show any time range", CmdRecord},
      {"tree", "call trees with several metrics; add, mean, sub and min runs", CmdTree},
      {"points", "instrumentation points per run: record, show, tags, compare", CmdPoints},
  };
  return kCommands;
}

}  // namespace fieldprof::tools
