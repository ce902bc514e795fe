// fieldprof pull: fetches the published snapshot into the local cache now,
// instead of the agent's few fragments a day.
#include <unistd.h>

#include <cstdio>
#include <fstream>
#include <iostream>
#include <sstream>

#include "common/snapshot/snapshot_cache.h"
#include "common/snapshot/snapshot_index.h"
#include "tools/commands.h"
#include "tools/shared/client_flags.h"
#include "tools/shared/command_line.h"
#include "tools/shared/format.h"

namespace fieldprof::tools {

int CmdPull(int argc, char** argv) {
  ClientFlags client;
  std::string cache_dir = DefaultSnapshotCacheDir(), key_path = DefaultSnapshotKeyPath();
  bool all = false, quiet = false;
  int64_t fragments = 4;
  OptionTable t("fieldprof pull",
                "Fetches the aggregator's signed snapshot into the local cache that\n"
                "`fieldprof cost` and the other tools read offline. The manifest's signature\n"
                "and every fragment's SHA-256 are checked before anything is replaced; a\n"
                "fragment that fails keeps the old copy.\n\n"
                "  fieldprof pull --all      every fragment that is missing or out of date");
  client.Register(t);
  t.AddString("cache", &cache_dir, "the snapshot cache");
  t.AddString("key", &key_path, "the publisher's public key (PEM)");
  t.AddBool("all", &all, "fetch every fragment missing or out of date");
  t.AddInt("fragments", &fragments, "without --all: fetch at most this many", 0, 1 << 20);
  t.AddBool("quiet", &quiet, "no progress line");
  Status s;
  if (ParseOrShowHelp(t, argc, argv, &s)) return 0;
  if (s.ok() && !t.positional().empty()) s = InvalidArgument("pull takes no arguments");
  if (s.ok() && cache_dir.empty()) s = InvalidArgument("no cache directory (set --cache)");
  if (!s.ok()) return UsageError(t, s);
  std::ifstream in(key_path);
  std::stringstream key;
  key << in.rdbuf();
  if (!in || key.str().empty()) {
    std::cerr << "fieldprof pull: cannot read the publisher's public key '" << key_path
              << "' (set --key; the aggregator's operator publishes it)\n";
    return 2;
  }
  SnapshotCache cache(cache_dir);
  HttpsClient c(client.Resolve());
  const bool tty = !quiet && isatty(STDERR_FILENO);
  SnapshotRefreshOptions o{.max_fragments = all ? -1 : static_cast<int>(fragments),
                           .public_key_pem = key.str(),
                           .progress = {}};
  if (tty) {
    o.progress = [](int done, int total, uint64_t bytes) {
      std::fprintf(stderr, "\rfieldprof pull: fragment %d of %d, %s   ", done, total,
                   FormatBytes(static_cast<double>(bytes)).c_str());
      std::fflush(stderr);
    };
  }
  StatusOr<SnapshotRefreshResult> r = RefreshSnapshot(c, cache, o);
  if (tty) std::fprintf(stderr, "\r\033[K");
  if (!r.ok()) {
    std::cerr << "fieldprof pull: " << r.status().message() << "\n";
    return 1;
  }
  std::printf(
      "snapshot %llu: %d fragments fetched, %d of %u current, %d missing; %s downloaded "
      "(%s)\n",
      static_cast<unsigned long long>(r->snapshot_version), r->fetched, r->current,
      r->fragment_count, r->missing, FormatBytes(static_cast<double>(r->bytes_downloaded)).c_str(),
      cache_dir.c_str());
  for (const std::string& p : r->problems) std::fprintf(stderr, "fieldprof pull: %s\n", p.c_str());
  // The symbol index (fieldprof cost, fieldprof lsp) follows the new files.
  if (StatusOr<SnapshotIndex> ix = SnapshotIndex::Open(cache); !ix.ok()) {
    std::fprintf(stderr, "fieldprof pull: the symbol index: %s\n", ix.status().message().c_str());
  }
  return r->problems.empty() ? 0 : 1;
}

}  // namespace fieldprof::tools
