// Running a program for its output (tools/shared/spawn.h): what record and
// points --at ask ldd and ldconfig.
#include "tools/shared/spawn.h"

#include <gtest/gtest.h>

#include <csignal>

namespace fieldprof::tools {
namespace {

TEST(OutputOfTest, TheProgramsStandardOutput) {
  EXPECT_EQ(OutputOf({"printf", "a b\\n"}), "a b\n");  // found in PATH
  EXPECT_EQ(OutputOf({"sh", "-c", "echo out; echo err >&2"}), "out\n");
}

TEST(OutputOfTest, NothingWhenItFailsOrCannotRun) {
  EXPECT_EQ(OutputOf({"sh", "-c", "echo partial; exit 3"}), std::nullopt);
  EXPECT_EQ(OutputOf({"/nonexistent/program"}), std::nullopt);
}

TEST(OutputOfTest, ItsInputIsEmpty) {
  // Reading stdin ends at once instead of waiting on the caller's terminal.
  EXPECT_EQ(OutputOf({"cat"}, 60000), "");
}

TEST(OutputOfTest, KilledAtItsDeadline) {
  // sleep would exit 0 with no output after a minute: only the kill at
  // 50 ms makes the answer nullopt.
  EXPECT_EQ(OutputOf({"sleep", "60"}, 50), std::nullopt);
  SpawnOptions o;
  o.deadline_ms = 50;
  EXPECT_EQ(SpawnAndWait({"sleep", "60"}, o, nullptr), 128 + SIGKILL);
}

}  // namespace
}  // namespace fieldprof::tools
