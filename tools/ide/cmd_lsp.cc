// fieldprof lsp: the language server (tools/ide/server.h) on stdin/stdout.
#include <unistd.h>

#include <iostream>

#include "common/options.h"
#include "common/snapshot_cache.h"
#include "tools/cli/command_line.h"
#include "tools/commands.h"
#include "tools/ide/server.h"

namespace fieldprof::tools {

int CmdLsp(int argc, char** argv) {
  LspOptions o;
  o.cache_dir = DefaultSnapshotCacheDir();
  int64_t min_calls = static_cast<int64_t>(o.min_calls),
          min_runs = static_cast<int64_t>(o.min_runs);
  bool stdio = true;
  int64_t refresh_ms = o.refresh_ms, load_wait_ms = o.load_wait_ms;
  OptionTable t("fieldprof lsp",
                "A language server (LSP 3.17, JSON-RPC on stdin/stdout) that shows what library\n"
                "APIs cost in the field: hovers, code lenses and inlay hints at call sites, from\n"
                "the local snapshot cache. Editors start it beside their C/C++ server; see\n"
                "docs/ide.md for Neovim and VS Code. Editor settings (initializationOptions or\n"
                "the \"fieldprof\" settings section) override these flags: cacheDir, minCalls,\n"
                "minRuns, minP50Ns, codeLens, inlayHints, cxx. In C++ files a call's API is\n"
                "the function Clang resolves it to, with the project's compile_commands.json.");
  t.AddString("cache", &o.cache_dir, "the snapshot cache");
  t.AddInt("min_calls", &min_calls, "lenses and hints only for APIs with this many calls", 0,
           int64_t{1} << 62);
  t.AddInt("min_runs", &min_runs, "... from this many runs", 0, int64_t{1} << 62);
  t.AddDouble("min_p50_ns", &o.min_p50_ns, "... whose p50 is at least this (ns)", 0, 1e15);
  t.AddInt("refresh_ms", &refresh_ms, "how often the cache is looked at for a new snapshot (ms)",
           50, 3600 * 1000);
  t.AddInt("load_wait_ms", &load_wait_ms,
           "a request that comes before the cache is first loaded waits this long for it (ms)", 0,
           60 * 1000);
  t.AddBool("cxx", &o.cxx,
            "resolve C++ calls with libclang (the exact member, overload, constructor or "
            "operator); off: by name, as in C");
  t.AddString("libclang", &o.libclang, "libclang to load (default: Debian's newest)");
  t.AddBool("stdio", &stdio, "talk on stdin/stdout (the only transport; editors pass it)");
  Status s;
  if (ParseOrShowHelp(t, argc, argv, &s)) return 0;
  if (!s.ok()) return UsageError(t, s);
  o.min_calls = static_cast<uint64_t>(min_calls);
  o.min_runs = static_cast<uint64_t>(min_runs);
  o.refresh_ms = static_cast<int>(refresh_ms);
  o.load_wait_ms = static_cast<int>(load_wait_ms);
  return RunLspServer(STDIN_FILENO, STDOUT_FILENO, o);
}

}  // namespace fieldprof::tools
