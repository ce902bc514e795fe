// gzip in memory: what zlib's own reader (gunzip's) takes back whole, and
// which Accept-Encoding values take it.
#include "common/net/gzip.h"

#include <gtest/gtest.h>

#include <random>
#include <string>

#include "tests/support/gunzip.h"

namespace fieldprof {
namespace {

using testing::Gunzip;

TEST(GzipTest, WhatGunzipReadsBackWhole) {
  std::mt19937 rng(7);
  std::string json = "{\"stacks\":[";
  for (int i = 0; i < 20000; ++i)
    json += "{\"frames\":[\"api\",\"fn_" + std::to_string(rng() % 500) + "\"]},";
  json += "]}";
  std::string noise(100000, '\0');
  for (char& c : noise) c = static_cast<char>(rng());
  for (const std::string& in : {json, noise, std::string()}) {
    StatusOr<std::string> z = Gzip(in);
    ASSERT_TRUE(z.ok()) << z.status().ToString();
    ASSERT_GE(z->size(), 2u);
    EXPECT_EQ(static_cast<unsigned char>((*z)[0]), 0x1f);  // gzip's magic
    EXPECT_EQ(static_cast<unsigned char>((*z)[1]), 0x8b);
    EXPECT_EQ(Gunzip(*z, in.size()), in);
  }
  EXPECT_LT(Gzip(json)->size() * 5, json.size());  // JSON of frames packs well
}

TEST(GzipTest, AcceptEncodingValues) {
  for (const char* yes : {"gzip", "gzip, deflate, br", "br;q=1.0, GZIP;q=0.5", " x-gzip ", "*",
                          "deflate, *;q=0.1", "gzip;q=1, *;q=0"}) {
    EXPECT_TRUE(AcceptsGzip(yes)) << yes;
  }
  for (const char* no : {"", "identity", "deflate, br", "gzip;q=0", "gzip;q=0.000, *", "*;q=0",
                         "gzipx", "br, gzip ; q=0"}) {
    EXPECT_FALSE(AcceptsGzip(no)) << no;
  }
}

}  // namespace
}  // namespace fieldprof
