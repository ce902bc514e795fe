// What the drain writes into a process's points file
// (common/points/points_format.h): each ring's whole events as packed batches,
// each site named the first time it is seen, the stacks before the events
// that name them (stacks.h). Drain only: one drain at a time.
#ifndef FIELDPROF_AGENT_PRELOAD_POINTS_DRAIN_H_
#define FIELDPROF_AGENT_PRELOAD_POINTS_DRAIN_H_

#include <errno.h>
#include <time.h>
#include <unistd.h>
#include <x86intrin.h>

#include <cstdint>
#include <cstring>
#include <vector>

#include "agent/preload/points/ring.h"
#include "common/points/points_format.h"

namespace fieldprof::points {

uint64_t ClockNs(clockid_t clock);
uint64_t MonoNs();

// What the drain writes, gathered and written in one go.
class Out {
 public:
  void Put(const void* p, size_t n) {
    const char* c = static_cast<const char*>(p);
    buf_.insert(buf_.end(), c, c + n);  // no zero fill first, as resize would
  }
  template <typename T>
  void Put(T v) {
    Put(&v, sizeof v);
  }
  void Str(const char* s) {
    const size_t n = s == nullptr ? 0 : strnlen(s, kMaxString);
    Put(static_cast<uint16_t>(n));
    Put(s, n);
  }
  void Clock() {
    Put(kClock);
    Put(static_cast<uint64_t>(__rdtsc()));
    Put(MonoNs());
  }
  void Flush(int fd) {
    size_t off = 0;
    while (off < buf_.size() && fd >= 0) {
      const ssize_t w = write(fd, buf_.data() + off, buf_.size() - off);
      if (w < 0 && errno == EINTR) continue;
      if (w <= 0) break;  // a full disk: the rest of this batch is gone
      off += static_cast<size_t>(w);
    }
    buf_.clear();
  }

 private:
  std::vector<char> buf_;
};

// Sites by their address, numbered in the file as they are first seen.
// StartSites at load (and the drain's buffer: DrainInto); ForgetSites
// before a module is closed (its memory
// goes, and another module may come to the same addresses: their numbers
// are not used again in the file, whose reader keeps the first name of
// each), and with `renumber` in a fork child, whose file starts afresh.
void StartSites();
void ForgetSites(bool renumber = false);

// Takes every ring's whole events into `o` as batches, the sites they name
// first, then frees their slots; true when there were any. `fullest`: the
// most events one ring held. `last`: the drain at exit or before an exec,
// which counts the slots not yet whole as lost.
bool DrainInto(Out& o, uint64_t* fullest = nullptr, bool last = false);

}  // namespace fieldprof::points

#endif  // FIELDPROF_AGENT_PRELOAD_POINTS_DRAIN_H_
