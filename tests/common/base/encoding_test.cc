// The shared small encodings (common/base/encoding.h): varints and strings
// round-trip and refuse a cut; ordered integers compare as bytes the way
// the numbers compare, which the aggregator's keys rely on.
#include "common/base/encoding.h"

#include <limits>
#include <random>
#include <string>
#include <vector>

#include "gtest/gtest.h"

namespace fieldprof {
namespace {

TEST(EncodingTest, VarintsAndStringsRoundTripAndACutIsRefused) {
  const std::vector<uint64_t> values = {
      0, 1, 127, 128, 300, 1ull << 35, std::numeric_limits<uint64_t>::max()};
  std::string bytes;
  for (uint64_t v : values) PutVarint(&bytes, v);
  PutString(&bytes, "a;b\0c");
  EXPECT_EQ(bytes.substr(0, 4), std::string("\x00\x01\x7f\x80", 4));
  std::string_view in(bytes);
  for (uint64_t v : values) {
    uint64_t got = 0;
    ASSERT_TRUE(GetVarint(&in, &got));
    EXPECT_EQ(got, v);
  }
  std::string s;
  ASSERT_TRUE(GetString(&in, &s));
  EXPECT_EQ(s, "a;b");
  EXPECT_TRUE(in.empty());
  // Cut inside a varint, or a string longer than what is left.
  std::string_view cut("\x80\x80", 2);
  uint64_t v = 7;
  EXPECT_FALSE(GetVarint(&cut, &v));
  std::string_view short_string(
      "\x05"
      "ab",
      3);
  EXPECT_FALSE(GetString(&short_string, &s));
}

TEST(EncodingTest, OrderedIntegersSortAsBytesAsTheNumbersDo) {
  std::mt19937_64 rng(5);
  std::vector<int64_t> v64 = {std::numeric_limits<int64_t>::min(), -1, 0, 1,
                              std::numeric_limits<int64_t>::max()};
  std::vector<int32_t> v32 = {std::numeric_limits<int32_t>::min(), -20000, -1, 0, 1, 19000,
                              std::numeric_limits<int32_t>::max()};
  for (int i = 0; i < 200; ++i) {
    v64.push_back(static_cast<int64_t>(rng()));
    v32.push_back(static_cast<int32_t>(rng()));
  }
  for (size_t i = 0; i < v32.size(); ++i) {
    std::string a;
    PutOrdered32(&a, v32[i]);
    ASSERT_EQ(a.size(), 4u);
    EXPECT_EQ(GetOrdered32(a.data()), v32[i]);
    for (size_t j = 0; j < v32.size(); ++j) {
      std::string b;
      PutOrdered32(&b, v32[j]);
      EXPECT_EQ(a < b, v32[i] < v32[j]) << v32[i] << " " << v32[j];
    }
  }
  for (size_t i = 0; i < v64.size(); ++i) {
    std::string a, plain;
    PutOrdered64(&a, v64[i]);
    PutBigEndian64(&plain, static_cast<uint64_t>(v64[i]));
    EXPECT_EQ(GetBigEndian64(plain.data()), static_cast<uint64_t>(v64[i]));
    for (size_t j = 0; j < v64.size(); ++j) {
      std::string b;
      PutOrdered64(&b, v64[j]);
      EXPECT_EQ(a < b, v64[i] < v64[j]) << v64[i] << " " << v64[j];
    }
  }
}

}  // namespace
}  // namespace fieldprof
