// The registry of interposers' next definitions (agent/preload/base/next_slots.h): one
// fill finds every empty cache of this binary's section, leaves a full one
// alone, and counts those it could not fill; a second fill has nothing to
// look up.
#include "agent/preload/base/next_slots.h"

#include <algorithm>
#include <cstring>
#include <string>
#include <vector>

#include "gtest/gtest.h"

namespace {

int Strlen(const char* s) { return static_cast<int>(std::strlen(s)); }
int Kept(const char*) { return -1; }

int (*next_one)(const char*) = nullptr;
int (*next_two)(const char*) = nullptr;
int (*next_kept)(const char*) = Kept;
int (*next_missing)(const char*) = nullptr;
FP_NEXT_SLOT(next_one, "one");
FP_NEXT_SLOT(next_two, "two");
FP_NEXT_SLOT(next_kept, "kept");
FP_NEXT_SLOT(next_missing, "missing");

TEST(NextSlotsTest, OneFillFindsEveryEmptyCache) {
  std::vector<std::string> asked;
  auto resolve = [&](const char* const* names, uintptr_t* out, int n) {
    for (int i = 0; i < n; ++i) {
      asked.push_back(names[i]);
      if (std::strcmp(names[i], "missing") != 0) out[i] = reinterpret_cast<uintptr_t>(&Strlen);
    }
  };
  EXPECT_EQ(fieldprof::preload::FillNextSlots(resolve), 1) << "\"missing\" stays empty";
  std::sort(asked.begin(), asked.end());  // in the section's order, which the linker picks
  EXPECT_EQ(asked, (std::vector<std::string>{"missing", "one", "two"}));
  EXPECT_EQ(next_one, &Strlen);
  EXPECT_EQ(next_two, &Strlen);
  EXPECT_EQ(next_kept, &Kept) << "a full cache is left alone";
  EXPECT_EQ(next_missing, nullptr);
  EXPECT_EQ(next_one("four"), 4);
  asked.clear();
  EXPECT_EQ(fieldprof::preload::FillNextSlots(resolve), 1);
  EXPECT_EQ(asked, (std::vector<std::string>{"missing"})) << "only what is still empty";
}

}  // namespace
