// The overhead budget (companion.h): an API past it stops measuring.
#include <algorithm>

#include "agent/preload/runtime/binder/binder.h"
#include "agent/preload/runtime/companion.h"
#include "agent/preload/runtime/records/live_file.h"

namespace fieldprof::rt {

// Called each time an API's count in a slab crosses a multiple of 1024:
// past the overhead budget (estimated from every slab's calls so far and
// the calibrated cost of a call), the API with the most calls stops
// measuring and its record is marked truncated.
void CheckBudget() {
  if (!g.calibrated) return;
  const uint64_t elapsed = Ticks() - g.tsc0;
  // Every call counted in any slab, and the API with the most among those
  // still measuring.
  uint64_t total = 0;
  int worst = -1;
  uint64_t worst_calls = 0;
  const int slabs = std::min(g.next_slab.load(), kSlabs);
  for (int a = 0; a < FP_MAX_SLOTS; ++a) {
    uint64_t calls = 0;
    for (int s = 0; s < slabs; ++s) {
      if (g.slabs_ready[s]) calls += __atomic_load_n(&SlabAt(s).calls[a], __ATOMIC_RELAXED);
    }
    total += calls;
    if (fp_measuring[a] && calls >= worst_calls) {
      worst = a;
      worst_calls = calls;
    }
  }
  const double cost = static_cast<double>(total) * static_cast<double>(g.call_cost_ticks + 1);
  if (cost <= g.config.overhead_budget * static_cast<double>(elapsed)) return;
  if (worst >= 0) {
    fp_measuring[worst] = 0;
    g.truncated[worst] = 1;
    LiveNoteTruncated(worst);
    const int rebound = BinderRebindSlot(worst);
    DebugLog(
        "overhead budget reached: %s stops measuring; %d of its call sites now call it "
        "directly",
        g.apis[worst].symbol, rebound);
  }
}

}  // namespace fieldprof::rt
