#include "common/wire/validate.h"

#include <gtest/gtest.h>

#include <functional>

#include "common/wire/wire.h"
#include "tests/support/malformed_corpus.h"
#include "tests/support/test_util.h"

namespace fieldprof {
namespace {

using testing::IdOf;
using testing::SimpleBatch;

// A valid batch with zeros, two buckets and all fields set.
wire::Batch GoodBatch() {
  wire::Batch b = SimpleBatch(IdOf(9), "libsqlite3.so.0", "sqlite3_step", 1500, 1);
  Histogram h;
  for (uint64_t v : {0, 3, 1500, 1600, 1700}) h.Record(v);
  HistogramToWire(h, b.mutable_records(0)->mutable_histogram());
  b.mutable_records(0)->set_runs(2);
  return b;
}

struct RuleCase {
  std::string rule;
  std::function<void(wire::Batch*)> mutate;
};

wire::Histogram* H(wire::Batch* b) { return b->mutable_records(0)->mutable_histogram(); }
wire::Bucket* B(wire::Batch* b, int i) { return H(b)->mutable_buckets(i); }

TEST(ValidateTest, GoodBatchPasses) {
  wire::Batch b = GoodBatch();
  Status s = ValidateBatch(b);
  EXPECT_TRUE(s.ok()) << s.ToString();
  StatusOr<wire::Batch> d = DecodeBatch(b.SerializeAsString());
  EXPECT_TRUE(d.ok()) << d.status().ToString();
}

TEST(ValidateTest, EveryRuleRejectsItsCase) {
  const std::vector<RuleCase> cases = {
      {"schema_version", [](wire::Batch* b) { b->set_schema_version(7); }},
      {"batch_id_length", [](wire::Batch* b) { b->set_batch_id("abc"); }},
      {"record_count", [](wire::Batch* b) { b->clear_records(); }},
      {"platform_enum",
       [](wire::Batch* b) { b->mutable_client_platform()->set_arch(static_cast<wire::Arch>(40)); }},
      {"platform_enum",
       [](wire::Batch* b) {
         b->mutable_records(0)->mutable_key()->mutable_platform()->set_cpu_family(300);
       }},
      {"key_missing", [](wire::Batch* b) { b->mutable_records(0)->clear_key(); }},
      {"string_empty",
       [](wire::Batch* b) { b->mutable_records(0)->mutable_key()->set_module(""); }},
      {"string_too_long",
       [](wire::Batch* b) {
         b->mutable_records(0)->mutable_key()->set_symbol(std::string(1025, 'a'));
       }},
      {"string_utf8",
       [](wire::Batch* b) { b->mutable_records(0)->mutable_key()->set_symbol("bad\xc3\x28"); }},
      {"string_control",
       [](wire::Batch* b) {
         b->mutable_records(0)->mutable_key()->set_module(std::string("li\0b", 4));
       }},
      {"module_name",
       [](wire::Batch* b) {
         b->mutable_records(0)->mutable_key()->set_module("/home/alice/libsecret.so");
       }},
      {"module_name",
       [](wire::Batch* b) { b->mutable_records(0)->mutable_key()->set_module("my lib.so"); }},
      {"module_name",
       [](wire::Batch* b) { b->mutable_records(0)->mutable_key()->set_module(".."); }},
      {"module_name",
       [](wire::Batch* b) { b->mutable_records(0)->mutable_key()->set_module("libm\xc3\xa9.so"); }},
      {"module_version_token",
       [](wire::Batch* b) {
         b->mutable_records(0)->mutable_key()->set_module_version("alice's build");
       }},
      {"module_version_token",
       [](wire::Batch* b) { b->mutable_records(0)->mutable_key()->set_module_version("-1"); }},
      {"string_too_long",
       [](wire::Batch* b) {
         b->mutable_records(0)->mutable_key()->set_module_version(std::string(65, 'a'));
       }},
      {"symbol_name",
       [](wire::Batch* b) {
         b->mutable_records(0)->mutable_key()->set_symbol("alice@example.com is here");
       }},
      {"symbol_name",
       [](wire::Batch* b) { b->mutable_records(0)->mutable_key()->set_symbol("f(int)"); }},
      {"metric_unknown",
       [](wire::Batch* b) {
         b->mutable_records(0)->mutable_key()->set_metric(wire::METRIC_UNSPECIFIED);
       }},
      {"runs_exceed_calls", [](wire::Batch* b) { b->mutable_records(0)->set_runs(6); }},
      {"resolution_not_time",
       [](wire::Batch* b) {
         b->mutable_records(0)->mutable_key()->set_metric(wire::METRIC_ALLOC_COUNT);
         b->mutable_records(0)->set_resolution_ns(10);
       }},
      {"resolution_range",
       [](wire::Batch* b) { b->mutable_records(0)->set_resolution_ns(kMaxResolutionNs + 1); }},
      {"histogram_empty", [](wire::Batch* b) { b->mutable_records(0)->clear_histogram(); }},
      {"bucket_index_range", [](wire::Batch* b) { B(b, 1)->set_index(64); }},
      {"bucket_order", [](wire::Batch* b) { B(b, 1)->set_index(1); }},
      {"bucket_count_zero", [](wire::Batch* b) { B(b, 0)->set_count(0); }},
      {"bucket_sum_range", [](wire::Batch* b) { B(b, 1)->set_sum_lo(10); }},
      {"bucket_sum_sq_range",
       [](wire::Batch* b) { B(b, 1)->set_sum_sq_lo(B(b, 1)->sum_sq_lo() + 1000000000); }},
      {"sum_sq_saturated_flag", [](wire::Batch* b) { H(b)->set_sum_sq_saturated(true); }},
      {"sum_sq_saturated_flag",
       [](wire::Batch* b) {
         B(b, 1)->set_sum_sq_lo(~uint64_t{0});
         B(b, 1)->set_sum_sq_hi(~uint64_t{0});
       }},
      {"total_count", [](wire::Batch* b) { H(b)->set_count(H(b)->count() + 1); }},
      {"total_sum", [](wire::Batch* b) { H(b)->set_sum_lo(H(b)->sum_lo() + 1); }},
      {"total_sum_sq", [](wire::Batch* b) { H(b)->set_sum_sq_lo(H(b)->sum_sq_lo() + 1); }},
      {"min_max_order",
       [](wire::Batch* b) {
         H(b)->set_min(1700);
         H(b)->set_max(1500);
       }},
      {"point_symbol",
       [](wire::Batch* b) {
         b->mutable_records(0)->mutable_key()->set_metric(wire::METRIC_POINT_NS);
         b->mutable_records(0)->mutable_key()->set_symbol("startup");  // one part
       }},
      {"point_symbol",
       [](wire::Batch* b) {
         b->mutable_records(0)->mutable_key()->set_metric(wire::METRIC_POINT_NS);
         b->mutable_records(0)->mutable_key()->set_symbol("startup$" + std::string(65, 'a'));
       }},
      // What only the aggregator sets, sent by a client.
      {"record_machines", [](wire::Batch* b) { b->mutable_records(0)->set_machine_count(40); }},
      {"record_machines", [](wire::Batch* b) { b->mutable_records(0)->set_machines("sketch"); }},
      {"record_machines", [](wire::Batch* b) { b->mutable_records(0)->set_suspect("x"); }},
      {"min_range", [](wire::Batch* b) { H(b)->set_min(3); }},  // zero_count > 0 so min must be 0
      {"max_range", [](wire::Batch* b) { H(b)->set_max(5000); }},
  };
  for (const RuleCase& c : cases) {
    wire::Batch b = GoodBatch();
    c.mutate(&b);
    Status s = ValidateBatch(b);
    ASSERT_FALSE(s.ok()) << "rule " << c.rule << " accepted its bad case";
    EXPECT_EQ(s.code(), StatusCode::kInvalidArgument);
    EXPECT_EQ(ValidationRule(s), c.rule) << s.message();
    EXPECT_GT(s.message().size(), c.rule.size() + 10) << "message too terse: " << s.message();
  }
}

// What real objects and symbol tables hold passes the key rules.
TEST(ValidateTest, RealKeyStringsPass) {
  const char* modules[] = {"libstdc++.so.6", "ld-linux-x86-64.so.2", "libgcc_s.so.1",
                           "main",           "python3.11",           "libz.so.1",
                           "unknown",        "libLLVM-14.so.1"};
  const char* versions[] = {"4f2a9c1d0e8b7a6c5d4e3f2a1b0c9d8e7f6a5b4c", "unknown", "2.36",
                            "1.2.13.dfsg-1+deb12u1", "1:2.3~rc1"};
  const char* symbols[] = {"deflate",           "_ZNSt6vectorIiSaIiEE9push_backERKi",
                           "memcpy@GLIBC_2.14", "foo.cold",
                           "_Z3fooi.isra.0",    "$x"};
  for (const char* m : modules) {
    wire::Batch b = GoodBatch();
    b.mutable_records(0)->mutable_key()->set_module(m);
    EXPECT_TRUE(ValidateBatch(b).ok()) << m << ": " << ValidateBatch(b).ToString();
  }
  for (const char* v : versions) {
    wire::Batch b = GoodBatch();
    b.mutable_records(0)->mutable_key()->set_module_version(v);
    EXPECT_TRUE(ValidateBatch(b).ok()) << v << ": " << ValidateBatch(b).ToString();
  }
  for (const char* sym : symbols) {
    wire::Batch b = GoodBatch();
    b.mutable_records(0)->mutable_key()->set_symbol(sym);
    EXPECT_TRUE(ValidateBatch(b).ok()) << sym << ": " << ValidateBatch(b).ToString();
  }
  // Instrumentation points' series (metric point_ns).
  for (const char* sym :
       {"startup$load$parsed", "startup$parse", "request_2$handle.cold$done", "_x$y"}) {
    wire::Batch b = GoodBatch();
    b.mutable_records(0)->mutable_key()->set_metric(wire::METRIC_POINT_NS);
    b.mutable_records(0)->mutable_key()->set_symbol(sym);
    b.mutable_records(0)->set_resolution_ns(0);  // wall time's only
    EXPECT_TRUE(ValidateBatch(b).ok()) << sym << ": " << ValidateBatch(b).ToString();
  }
}

TEST(ValidateTest, KeyRuleMessagesSayWhatIsWrong) {
  wire::Batch b = GoodBatch();
  b.mutable_records(0)->mutable_key()->set_module("/home/alice/libsecret.so");
  const Status s = ValidateBatch(b);
  EXPECT_NE(s.message().find("is not a file name: '/' at 0"), std::string::npos) << s.message();
}

TEST(ValidateTest, ErrorNamesTheRecord) {
  wire::Batch b = GoodBatch();
  b.mutable_records(0)->set_runs(b.records(0).histogram().count() + 1);
  Status s = ValidateBatch(b);
  EXPECT_NE(s.message().find("record 0 (libsqlite3.so.0 sqlite3_step)"), std::string::npos)
      << s.message();
}

// Three values of one bucket whose count times sum of squares is over
// 2^128 while their sum is below 2^64: the product saturates (MulSat), and
// the histogram, a real one, passes. A product that wrapped would refuse it
// (bucket_sum_sq_range).
TEST(ValidateTest, AProductOver128BitsSaturates) {
  wire::Batch b = GoodBatch();
  Histogram h;
  for (uint64_t v : {(uint64_t{1} << 63) - 1, uint64_t{1} << 62, uint64_t{1} << 62}) h.Record(v);
  HistogramToWire(h, H(&b));
  b.mutable_records(0)->set_runs(1);
  ASSERT_EQ(H(&b)->buckets_size(), 1);
  const Status s = ValidateBatch(b);
  EXPECT_TRUE(s.ok()) << s.ToString();
}

// A later part of a run reported in parts counts no run of its own.
TEST(ValidateTest, ARecordMayCountNoRun) {
  wire::Batch b = GoodBatch();
  b.mutable_records(0)->set_runs(0);
  EXPECT_TRUE(ValidateBatch(b).ok()) << ValidateBatch(b).ToString();
}

TEST(ValidateTest, TooManyRecords) {
  wire::Batch b = GoodBatch();
  for (int i = 0; i < kMaxRecordsPerBatch; ++i) *b.add_records() = b.records(0);
  EXPECT_EQ(ValidationRule(ValidateBatch(b)), "record_count");
}

TEST(ValidateTest, OversizedBodyIsTooLarge) {
  std::string body(kMaxBatchBytes + 1, 'x');
  StatusOr<wire::Batch> d = DecodeBatch(body);
  ASSERT_FALSE(d.ok());
  EXPECT_EQ(d.status().code(), StatusCode::kTooLarge);
}

TEST(ValidateTest, MalformedCorpusIsRejected) {
  for (const auto& bad : testing::MalformedCorpus()) {
    StatusOr<wire::Batch> d = DecodeBatch(bad.bytes);
    EXPECT_FALSE(d.ok()) << bad.name << " was accepted";
    if (!d.ok()) {
      EXPECT_EQ(d.status().code(), StatusCode::kInvalidArgument) << bad.name;
    }
  }
}

TEST(ValidateTest, Utf8) {
  EXPECT_TRUE(IsValidUtf8("plain"));
  EXPECT_TRUE(IsValidUtf8("caf\xc3\xa9"));
  EXPECT_TRUE(IsValidUtf8("\xf0\x9f\x98\x80"));
  EXPECT_FALSE(IsValidUtf8("\xc0\xaf"));          // overlong
  EXPECT_FALSE(IsValidUtf8("\xed\xa0\x80"));      // surrogate
  EXPECT_FALSE(IsValidUtf8("\xf4\x90\x80\x80"));  // > U+10FFFF
  EXPECT_FALSE(IsValidUtf8("\xe2\x82"));          // truncated
}

TEST(ValidateTest, SaturatedHistogramRoundTrips) {
  wire::Batch b = GoodBatch();
  Histogram h;
  h.Record(~uint64_t{0});
  h.Record(~uint64_t{0});
  HistogramToWire(h, H(&b));
  b.mutable_records(0)->set_runs(1);
  Status s = ValidateBatch(b);
  EXPECT_TRUE(s.ok()) << s.ToString();
  EXPECT_EQ(HistogramFromWire(b.records(0).histogram()), h);
}

TEST(WireTest, HistogramRoundTrip) {
  Histogram h;
  for (uint64_t v : {0ull, 1ull, 2ull, 1000ull, 1ull << 40, ~0ull}) h.Record(v);
  wire::Histogram w;
  HistogramToWire(h, &w);
  EXPECT_EQ(w.buckets_size(), 5);  // sparse: 0,1,9,40,63
  EXPECT_EQ(HistogramFromWire(w), h);
  EXPECT_TRUE(ValidateHistogram(w).ok());
}

}  // namespace
}  // namespace fieldprof
