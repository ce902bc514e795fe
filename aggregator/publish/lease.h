// The lease that lets one aggregator of several do what must be done once:
// publish the snapshot (so its fragments stay deterministic and its
// versions count up) and fold ClickHouse's raw rows. docs/scale-out.md.
//
// ZooKeeperLease is the standard election recipe: each aggregator keeps an
// ephemeral sequential node under `path`; the one whose node sorts first
// holds the lease. The node lives as long as the aggregator's ZooKeeper
// session, so a crashed aggregator gives the lease up when its session
// times out. An aggregator that loses its connection stops holding at once
// (its node may outlive it by the session timeout, during which nobody
// holds the lease): two never hold it together.
//
//   auto lease = OpenZooKeeperLease("zk1:2181,zk2:2181", "/fieldprof/lease", 10s);
//   if ((*lease)->Held()) publish();
#ifndef FIELDPROF_AGGREGATOR_PUBLISH_LEASE_H_
#define FIELDPROF_AGGREGATOR_PUBLISH_LEASE_H_

#include <chrono>
#include <memory>
#include <string>

#include "common/base/status.h"

namespace fieldprof::aggregator {

class Lease {
 public:
  virtual ~Lease() = default;
  // Whether this aggregator holds the lease now. Cheap and thread-safe.
  virtual bool Held() = 0;
  // One line for logs and metrics: who holds it, or why not.
  virtual std::string Describe() = 0;
};

// A lease that is always held: one aggregator alone.
std::unique_ptr<Lease> SoleLease();

// Connects to ZooKeeper (`servers`: host:port,...) and takes part in the
// election under `path` (created if missing) from a thread of its own;
// gives its node up when destroyed. Waits up to `session_timeout` for a
// first session, then returns anyway (not held, still trying).
// InvalidArgument for a bad path.
[[nodiscard]] StatusOr<std::unique_ptr<Lease>> OpenZooKeeperLease(
    const std::string& servers, const std::string& path, std::chrono::milliseconds session_timeout);

}  // namespace fieldprof::aggregator

#endif  // FIELDPROF_AGGREGATOR_PUBLISH_LEASE_H_
