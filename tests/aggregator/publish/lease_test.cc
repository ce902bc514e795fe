// The aggregators' lease (aggregator/publish/lease.h) on a real ZooKeeper (Debian's
// zookeeper) on loopback: one holder among several, a new one when the
// holder leaves or its session dies, none while ZooKeeper is away, and
// never two at once.
#include "aggregator/publish/lease.h"

#include <atomic>
#include <mutex>
#include <thread>
#include <vector>

#include "gtest/gtest.h"
#include "tests/support/test_util.h"
#include "tests/support/zookeeper_process.h"

namespace fieldprof::aggregator {
namespace {

using std::chrono::milliseconds;

// Waits until `pred` holds (true) or 20 s pass (false).
template <typename Pred>
bool Eventually(Pred pred) {
  for (int i = 0; i < 400; ++i) {
    if (pred()) return true;
    std::this_thread::sleep_for(milliseconds(50));
  }
  return false;
}

int Holders(const std::vector<std::unique_ptr<Lease>>& leases) {
  int n = 0;
  for (const auto& l : leases) n += l != nullptr && l->Held() ? 1 : 0;
  return n;
}

TEST(LeaseTest, OneHolderAmongSeveralAndANewOneWhenItLeaves) {
  testing::TempDir dir;
  testing::ZooKeeperProcess zk(dir);
  ASSERT_TRUE(zk.Start()) << "ZooKeeper did not start (deploy/install-deps.sh installs it); see "
                          << dir.File("zookeeper/log");
  std::vector<std::unique_ptr<Lease>> leases;
  for (int i = 0; i < 3; ++i) {
    auto l = OpenZooKeeperLease(zk.Servers(), "/fieldprof-test/lease", milliseconds(4000));
    ASSERT_TRUE(l.ok()) << l.status().ToString();
    leases.push_back(std::move(*l));
  }
  ASSERT_TRUE(Eventually([&] { return Holders(leases) == 1; }));
  // Watched from another thread while holders come and go: never two.
  std::mutex mu;  // guards the vector's pointers against the watcher
  std::atomic<bool> stop{false};
  std::atomic<int> most{0};
  std::thread watcher([&] {
    while (!stop) {
      {
        std::lock_guard<std::mutex> lock(mu);
        most = std::max(most.load(), Holders(leases));
      }
      std::this_thread::sleep_for(milliseconds(2));
    }
  });
  for (int round = 0; round < 2; ++round) {
    size_t holder = 0;
    while (leases[holder] == nullptr || !leases[holder]->Held()) ++holder;
    EXPECT_NE(leases[holder]->Describe().find("held by this aggregator"), std::string::npos);
    {
      std::lock_guard<std::mutex> lock(mu);
      leases[holder].reset();  // leaves: its session and node go at once
    }
    ASSERT_TRUE(Eventually([&] {
      std::lock_guard<std::mutex> lock(mu);
      return Holders(leases) == 1;
    })) << "round "
        << round;
  }
  stop = true;
  watcher.join();
  EXPECT_EQ(most.load(), 1) << "two held the lease at once";
}

TEST(LeaseTest, NoneHoldsWhileZooKeeperIsAwayAndOneAgainAfter) {
  testing::TempDir dir;
  testing::ZooKeeperProcess zk(dir);
  ASSERT_TRUE(zk.Start());
  std::vector<std::unique_ptr<Lease>> leases;
  for (int i = 0; i < 2; ++i) {
    auto l = OpenZooKeeperLease(zk.Servers(), "/fieldprof-test/lease", milliseconds(4000));
    ASSERT_TRUE(l.ok());
    leases.push_back(std::move(*l));
  }
  ASSERT_TRUE(Eventually([&] { return Holders(leases) == 1; }));
  zk.Stop();  // a restart: SIGTERM, its data kept
  ASSERT_TRUE(Eventually([&] { return Holders(leases) == 0; })) << "held without ZooKeeper";
  EXPECT_NE(leases[0]->Describe().find("not"), std::string::npos) << leases[0]->Describe();
  ASSERT_TRUE(zk.Start());
  ASSERT_TRUE(Eventually([&] { return Holders(leases) == 1; }));
}

TEST(LeaseTest, ABadPathIsRefusedAndNoZooKeeperIsNotHeld) {
  EXPECT_FALSE(OpenZooKeeperLease("127.0.0.1:1", "relative", milliseconds(100)).ok());
  EXPECT_FALSE(OpenZooKeeperLease("127.0.0.1:1", "/a//b", milliseconds(100)).ok());
  EXPECT_FALSE(OpenZooKeeperLease("", "/a", milliseconds(100)).ok());
  auto l = OpenZooKeeperLease("127.0.0.1:" + std::to_string(testing::FreePort()), "/a",
                              milliseconds(300));
  ASSERT_TRUE(l.ok()) << "an aggregator starts without its ZooKeeper";
  // Once the lease has looked (it says why it is not held), it is not held.
  ASSERT_TRUE(Eventually([&] {
    return (*l)->Describe().find("not connected to ZooKeeper") != std::string::npos;
  })) << (*l)->Describe();
  EXPECT_FALSE((*l)->Held());
  EXPECT_TRUE(SoleLease()->Held());
}

}  // namespace
}  // namespace fieldprof::aggregator
