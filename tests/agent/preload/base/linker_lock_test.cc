// The dynamic linker's lock as the samplers see it before they unwind
// (agent/preload/base/linker_lock.h), against glibc's real lock: found at
// start, free outside the linker's calls, the thread's own (held once,
// whole) inside a dl_iterate_phdr callback, and another thread's while
// that thread is inside one.
#include "agent/preload/base/linker_lock.h"

#include <link.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <atomic>
#include <thread>

#include "gtest/gtest.h"
#include "tests/support/test_util.h"

namespace fieldprof::preload {
namespace {

int Tid() { return static_cast<int>(syscall(SYS_gettid)); }

class LinkerLockTest : public ::testing::Test {
 protected:
  static void SetUpTestSuite() { found_ = FindLinkerLock(dl_iterate_phdr); }
  void SetUp() override {
    if (!found_) GTEST_SKIP() << "this C library's linker lock was not found";
  }
  static bool found_;
};
bool LinkerLockTest::found_ = false;

TEST_F(LinkerLockTest, FreeOutsideTheLinkersCalls) {
  EXPECT_TRUE(LinkerLockKnown());
  EXPECT_FALSE(LinkerLockUnsafe(Tid(), 0));
  EXPECT_FALSE(LinkerLockHeldByAnother(Tid()));
}

TEST_F(LinkerLockTest, InsideACallbackItIsTheThreadsOwnAndWholeOnce) {
  struct Seen {
    bool unsafe_whole_once, unsafe_whole_none, by_another;
  } seen{};
  dl_iterate_phdr(
      [](dl_phdr_info*, size_t, void* arg) {
        auto* s = static_cast<Seen*>(arg);
        const int tid = Tid();
        s->unsafe_whole_once = LinkerLockUnsafe(tid, 1);  // held once, as a callback holds it
        s->unsafe_whole_none = LinkerLockUnsafe(tid, 0);  // held where it should not be
        s->by_another = LinkerLockHeldByAnother(tid);
        return 1;
      },
      &seen);
  EXPECT_FALSE(seen.unsafe_whole_once);
  EXPECT_TRUE(seen.unsafe_whole_none);
  EXPECT_FALSE(seen.by_another);
  // Taken again inside (a nested walk, as libunwind's in a handler): the
  // count says twice, which a handler expecting once must not trust.
  bool nested_unsafe = false;
  dl_iterate_phdr(
      [](dl_phdr_info*, size_t, void* arg) {
        dl_iterate_phdr(
            [](dl_phdr_info*, size_t, void* inner) {
              *static_cast<bool*>(inner) = LinkerLockUnsafe(Tid(), 1);
              return 1;
            },
            arg);
        return 1;
      },
      &nested_unsafe);
  EXPECT_TRUE(nested_unsafe);
}

TEST_F(LinkerLockTest, AnotherThreadInsideACallbackHoldsIt) {
  std::atomic<int> state{0};  // 1: the other thread is inside; 2: let it go
  std::thread other([&] {
    dl_iterate_phdr(
        [](dl_phdr_info*, size_t, void* arg) {
          auto* st = static_cast<std::atomic<int>*>(arg);
          st->store(1);
          while (st->load() != 2) std::this_thread::yield();
          return 1;
        },
        &state);
  });
  ASSERT_TRUE(testing::WaitUntil([&] { return state.load() == 1; }));
  const int tid = Tid();
  // Held by another thread: a fork child would find it held for good; this
  // thread's own unwinding would only wait its turn, so it is not unsafe.
  EXPECT_TRUE(LinkerLockHeldByAnother(tid));
  EXPECT_FALSE(LinkerLockUnsafe(tid, 0));
  state.store(2);
  other.join();
  EXPECT_FALSE(LinkerLockHeldByAnother(tid));
}

// Each moment of glibc's taking and giving back a recursive mutex, as the
// three words read then (the word; the count, then the owner, on taking;
// the count to 0, then the owner cleared, then the word, on giving back).
TEST(LinkerLockLookTest, EveryMomentOfTakingAndGivingReadsAsItShould) {
  constexpr int kMe = 100, kOther = 200;
  using L = LinkerLockLook;
  // Free.
  EXPECT_EQ(LinkerLockLookOf(0, 0, 0, kMe, 0), L::kSafe);
  // Someone's taking it: word set, count maybe set, no owner yet. Whose
  // is unknown: a moment.
  EXPECT_EQ(LinkerLockLookOf(1, 0, 0, kMe, 0), L::kMoment);
  EXPECT_EQ(LinkerLockLookOf(1, 0, 1, kMe, 0), L::kMoment);
  EXPECT_EQ(LinkerLockLookOf(2, 0, 1, kMe, 1), L::kMoment);  // with waiters
  // Another thread's: a walk waits its turn.
  EXPECT_EQ(LinkerLockLookOf(1, kOther, 1, kMe, 0), L::kSafe);
  EXPECT_EQ(LinkerLockLookOf(2, kOther, 3, kMe, 1), L::kSafe);
  // This thread's, outside any callback: never safe, the last unlock's
  // count already 0 included (a walk would give the lock back under it).
  EXPECT_EQ(LinkerLockLookOf(1, kMe, 1, kMe, 0), L::kUnsafe);
  EXPECT_EQ(LinkerLockLookOf(1, kMe, 0, kMe, 0), L::kUnsafe);
  // This thread's, inside `whole` callbacks: safe only when held exactly so.
  EXPECT_EQ(LinkerLockLookOf(1, kMe, 1, kMe, 1), L::kSafe);
  EXPECT_EQ(LinkerLockLookOf(1, kMe, 2, kMe, 1), L::kUnsafe);
  EXPECT_EQ(LinkerLockLookOf(1, kMe, 2, kMe, 2), L::kSafe);
}

}  // namespace
}  // namespace fieldprof::preload
