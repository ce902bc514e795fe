// fieldprof check's analysis on made-up costs: which APIs are compared at
// which platform level, and which count as evidence.
#include "tools/check/check_analysis.h"

#include <gtest/gtest.h>

namespace fieldprof::tools {
namespace {

wire::Platform Platform(wire::Arch arch, wire::CpuVendor vendor, uint32_t family) {
  wire::Platform p;
  p.set_os(wire::OS_LINUX);
  p.set_arch(arch);
  p.set_cpu_vendor(vendor);
  p.set_cpu_family(family);
  return p;
}

// `n` values spread evenly over [lo, hi] (ns).
Histogram Spread(uint64_t lo, uint64_t hi, int n) {
  Histogram h;
  for (int i = 0; i < n; ++i) h.Record(lo + (hi - lo) * static_cast<uint64_t>(i) / (n - 1));
  return h;
}

ApiCosts Api(const std::string& symbol, Histogram local, Histogram field, int level = 3) {
  ApiCosts a;
  a.local.module = "libx.so.1";
  a.local.symbol = symbol;
  a.local.histogram = std::move(local);
  a.local.runs = 5;
  a.local.platform = Platform(wire::ARCH_X86_64, wire::CPU_VENDOR_AMD, 25);
  for (int lv = 0; lv <= level; ++lv) {
    a.field.by_level[lv] = field;
    a.field.runs_by_level[lv] = 100;
  }
  return a;
}

AnalysisOptions Options() {
  AnalysisOptions o;
  o.test.resamples = 999;
  o.test.stop_after = 0;
  return o;
}

TEST(CheckAnalysisTest, PlatformClosenessWidensByArchitectureVendorAndFamily) {
  const wire::Platform p = Platform(wire::ARCH_X86_64, wire::CPU_VENDOR_AMD, 25);
  EXPECT_EQ(PlatformCloseness(p, p), 3);
  EXPECT_EQ(PlatformCloseness(p, Platform(wire::ARCH_X86_64, wire::CPU_VENDOR_AMD, 23)), 2);
  EXPECT_EQ(PlatformCloseness(p, Platform(wire::ARCH_X86_64, wire::CPU_VENDOR_INTEL, 25)), 1);
  EXPECT_EQ(PlatformCloseness(p, Platform(wire::ARCH_AARCH64, wire::CPU_VENDOR_AMD, 25)), 0);
}

TEST(CheckAnalysisTest, ASlowerApiIsEvidenceAndAnEqualOneIsNot) {
  const Histogram field = Spread(1000, 1200, 4000);
  const CheckResult r = AnalyzeCosts(
      {Api("same", Spread(1000, 1200, 300), field), Api("slow", Spread(3000, 3600, 300), field)},
      Options());
  ASSERT_EQ(r.findings.size(), 2u);
  // By excess, largest first.
  EXPECT_EQ(r.findings[0].symbol, "slow");
  EXPECT_TRUE(r.findings[0].evidence);
  EXPECT_NEAR(r.findings[0].excess, (3300.0 - 1100.0) * 300, 1100 * 300 * 0.05);
  EXPECT_LE(r.findings[0].adjusted, 0.05);
  EXPECT_EQ(r.findings[1].symbol, "same");
  EXPECT_FALSE(r.findings[1].evidence);
  // Benjamini-Hochberg never lowers a p-value.
  for (const Finding& f : r.findings) EXPECT_GE(f.adjusted, f.test.p_value);
  EXPECT_FALSE(r.fail);  // no --fail_on_* given
}

TEST(CheckAnalysisTest, TheFailThresholdsNeedEvidence) {
  const Histogram field = Spread(1000, 1200, 4000);
  AnalysisOptions o = Options();
  o.fail_excess = 1e5;
  EXPECT_TRUE(AnalyzeCosts({Api("slow", Spread(3000, 3600, 300), field)}, o).fail);
  o.fail_excess = 1e12;  // more excess than there is
  EXPECT_FALSE(AnalyzeCosts({Api("slow", Spread(3000, 3600, 300), field)}, o).fail);
  o.fail_excess = -1;
  o.fail_p = 0.05;
  EXPECT_TRUE(AnalyzeCosts({Api("slow", Spread(3000, 3600, 300), field)}, o).fail);
  EXPECT_FALSE(AnalyzeCosts({Api("same", Spread(1000, 1200, 300), field)}, o).fail);
}

TEST(CheckAnalysisTest, FewCallsAndNoFieldAreCountedNotCompared) {
  AnalysisOptions o = Options();
  o.min_calls = 50;
  const CheckResult r = AnalyzeCosts({Api("rare", Spread(5000, 6000, 10), Spread(10, 20, 500)),
                                      Api("unknown", Spread(5000, 6000, 100), Histogram())},
                                     o);
  EXPECT_EQ(r.few_calls, 1);
  EXPECT_EQ(r.no_field, 1);
  EXPECT_TRUE(r.findings.empty());
}

TEST(CheckAnalysisTest, TheFieldIsWidenedOnlyAsFarAsItHasData) {
  const CheckResult r = AnalyzeCosts(
      {Api("f", Spread(3000, 3600, 300), Spread(1000, 1200, 4000), /*level=*/1)}, Options());
  ASSERT_EQ(r.findings.size(), 1u);
  EXPECT_EQ(r.findings[0].match, 1);
  EXPECT_STREQ(kWidened[r.findings[0].match], "the same architecture");
}

TEST(CheckAnalysisTest, SignificantDifferencesUnderTheFloorsAreNotEvidence) {
  // 4 ns more a call, on 30,000 calls: significant, but under --min_diff_ns.
  const CheckResult tiny =
      AnalyzeCosts({Api("tiny", Spread(104, 124, 30000), Spread(100, 120, 30000))}, Options());
  ASSERT_EQ(tiny.findings.size(), 1u);
  EXPECT_LE(tiny.findings[0].adjusted, 0.05);
  EXPECT_FALSE(tiny.findings[0].evidence);
  EXPECT_EQ(tiny.under_resolution, 1);
  // 2% more on 10 us: past the ns floor, under --min_effect (5%).
  const CheckResult small = AnalyzeCosts(
      {Api("small", Spread(10200, 10600, 30000), Spread(10000, 10400, 30000))}, Options());
  ASSERT_EQ(small.findings.size(), 1u);
  EXPECT_LE(small.findings[0].adjusted, 0.05);
  EXPECT_FALSE(small.findings[0].evidence);
  EXPECT_EQ(small.under_effect, 1);
  // The same with --min_effect 0.01: evidence.
  AnalysisOptions o = Options();
  o.min_effect = 0.01;
  EXPECT_TRUE(
      AnalyzeCosts({Api("small", Spread(10200, 10600, 30000), Spread(10000, 10400, 30000))}, o)
          .findings[0]
          .evidence);
}

}  // namespace
}  // namespace fieldprof::tools
