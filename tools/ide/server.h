// fieldprof lsp: a Language Server Protocol 3.17 server over stdio that
// shows what the APIs a program calls cost in the field, beside
// the editor's usual C/C++ server.
//
//   hover          a call of an API with field data: Markdown
//                  with p50/p90/p99, mean +- sd, allocation and I/O per
//                  call, calls, runs, platforms, the snapshot's date and a
//                  histogram in text bars; nothing for other names
//   code lenses    "≈ 12 µs p50" at call sites where the data is solid
//   inlay hints    the same after the call (LSP 3.17 textDocument/inlayHint)
//
// In C++ documents the API a call is comes from Clang (cxx_calls.h): the
// exact member, overload, constructor or operator, by its mangled symbol;
// in C, and without libclang, from the name under the cursor.
//
// Answers come from a CostIndex of the snapshot cache, built on a thread of
// its own and rebuilt when the cache changes on disk. A request that comes
// before the first look at the cache (or a newly configured one) waits for
// it, at most load_wait_ms; past that it is answered without field data and
// a window/logMessage says why. When a new index is ready, clients that
// support it are asked to refresh lenses and hints. Messages are read on their own thread, so a
// $/cancelRequest for a request still queued answers it RequestCancelled.
// Nothing but protocol frames is written to `out`.
//
// Options, from initializationOptions or the "fieldprof" section of
// workspace/didChangeConfiguration's settings: cacheDir, minCalls, minRuns,
// minP50Ns (lenses and hints only for APIs at least this costly at p50),
// codeLens, inlayHints, cxx (booleans).
#ifndef FIELDPROF_TOOLS_IDE_SERVER_H_
#define FIELDPROF_TOOLS_IDE_SERVER_H_

#include <cstdint>
#include <string>

namespace fieldprof::tools {

struct LspOptions {
  std::string cache_dir;      // the snapshot cache
  uint64_t min_calls = 1000;  // lenses and hints need this many calls
  uint64_t min_runs = 10;     // ... from this many runs
  double min_p50_ns = 1000;   // ... and a p50 at least this
  bool code_lens = true;
  bool inlay_hints = true;
  // C++ calls resolved by libclang (tools/ide/cxx_calls.h); off, or when no
  // libclang loads, C++ calls are found by name as C calls are.
  bool cxx = true;
  std::string libclang;  // where libclang is; empty: Debian's newest
  // After `exit`, wait for the input to end rather than leave the reader
  // thread behind: for a server run in a process that goes on (--hover),
  // whose input is closed right after `exit`.
  bool join_reader = false;
  int refresh_ms = 5000;                 // how often the cache is looked at for changes
  int load_wait_ms = 2000;               // a request waits this long for the first load
  size_t max_message_bytes = 64u << 20;  // a bigger message is read and dropped
};

// Serves one client on the two file descriptors until `exit`. Returns the
// process's exit code: 0 after shutdown then exit, 1 on exit without
// shutdown or when the input ends.
int RunLspServer(int in_fd, int out_fd, LspOptions options);

}  // namespace fieldprof::tools

#endif  // FIELDPROF_TOOLS_IDE_SERVER_H_
