#include "common/wire/validate.h"

#include <google/protobuf/unknown_field_set.h>

#include <cstring>
#include <string>

#include "common/statistics/histogram.h"
#include "common/wire/key_rules.h"
#include "common/wire/wire.h"

namespace fieldprof {
namespace {

Status Fail(std::string_view rule, const std::string& detail) {
  std::string m(rule);
  m += ": ";
  m += detail;
  return InvalidArgument(std::move(m));
}

// a * b clamped at 2^128-1.
uint128 MulSat(uint128 a, uint128 b) {
  if (a == 0 || b == 0) return 0;
  if (a > kUint128Max / b) return kUint128Max;
  return a * b;
}

std::string U(uint128 v) { return Uint128ToString(v); }

// sum^2 <= count * sum_sq, which holds for any values (Cauchy-Schwarz).
// Exact in integers while sum < 2^64 (then sum^2 fits in 128 bits; a
// saturated product only means the right side is larger still); in long
// double with a rounding allowance beyond that.
bool CauchySchwarzHolds(uint64_t count, uint128 sum, uint128 sum_sq) {
  if (sum >> 64 == 0) return sum * sum <= MulSat(count, sum_sq);
  const long double s = static_cast<long double>(sum);
  const long double cs = static_cast<long double>(count) * static_cast<long double>(sum_sq);
  return s * s <= cs * (1.0L + 1e-12L);
}

// True when the 8 bytes in `w` are all ASCII, none of them a control
// character (< 0x20 or 0x7f). SWAR: a byte b < 0x20 borrows in b - 0x20;
// b == 0x7f is b ^ 0x7f == 0.
bool PrintableAscii8(uint64_t w) {
  constexpr uint64_t kOnes = 0x0101010101010101ULL;
  constexpr uint64_t kHigh = 0x8080808080808080ULL;
  if (w & kHigh) return false;
  const uint64_t below_space = (w - 0x20 * kOnes) & ~w & kHigh;
  const uint64_t x = w ^ (0x7f * kOnes);
  const uint64_t del = (x - kOnes) & ~x & kHigh;
  return (below_space | del) == 0;
}

Status CheckString(std::string_view field, std::string_view s, size_t max_bytes) {
  if (s.empty()) return Fail("string_empty", std::string(field) + " is empty");
  if (s.size() > max_bytes) {
    return Fail("string_too_long", std::string(field) + " is " + std::to_string(s.size()) +
                                       " bytes, the limit is " + std::to_string(max_bytes));
  }
  // Module and symbol names are nearly always printable ASCII: check that
  // eight bytes at a time; anything else takes the full checks below.
  size_t i = 0;
  for (; i + 8 <= s.size(); i += 8) {
    uint64_t w;
    std::memcpy(&w, s.data() + i, 8);
    if (!PrintableAscii8(w)) break;
  }
  s.remove_prefix(i);
  if (!IsValidUtf8(s)) return Fail("string_utf8", std::string(field) + " is not valid UTF-8");
  for (unsigned char c : s) {
    if (c < 0x20 || c == 0x7f) {
      return Fail("string_control",
                  std::string(field) + " contains control character 0x" +
                      HexEncode(std::string_view(reinterpret_cast<char*>(&c), 1)));
    }
  }
  return Status::Ok();
}

// One byte of a key string for a message: itself when printable ASCII.
std::string ShowByte(char c) {
  const auto u = static_cast<unsigned char>(c);
  if (u == ' ') return "a space";
  if (u > 0x20 && u < 0x7f) return std::string("'") + c + "'";
  return "byte 0x" + HexEncode(std::string_view(&c, 1));
}

// The key-string rules (common/wire/key_rules.h), after CheckString passed.
Status CheckKeyStrings(std::string_view module, std::string_view version, std::string_view symbol,
                       bool stack = false) {
  namespace kr = key_rules;
  if (size_t i = kr::FirstBadModuleChar(module.data(), module.size()); i < module.size()) {
    return Fail("module_name", "module \"" + std::string(module) + "\" is not a file name: " +
                                   ShowByte(module[i]) + " at " + std::to_string(i) +
                                   " (letters, digits and . _ + - only, as in libz.so.1)");
  }
  if (kr::IsDotName(module.data(), module.size())) {
    return Fail("module_name", "module \"" + std::string(module) + "\" is not a file name");
  }
  if (size_t i = kr::FirstBadVersionChar(version.data(), version.size()); i < version.size()) {
    return Fail("module_version_token",
                "module_version \"" + std::string(version) +
                    "\" is neither a build id nor a version token: " + ShowByte(version[i]) +
                    " at " + std::to_string(i) +
                    " (a letter or digit first, then letters, digits and . _ + ~ - :)");
  }
  if (stack) {
    if (kr::StackSymbolOk(symbol.data(), symbol.size())) return Status::Ok();
    return Fail("stack_symbol",
                "a stack series' symbol is not frames joined by ';' (ELF symbol names or "
                "+hex offsets, then at most one [module], [program], [unpackaged] or [deeper])");
  }
  if (size_t i = kr::FirstBadSymbolChar(symbol.data(), symbol.size()); i < symbol.size()) {
    return Fail("symbol_name", "symbol \"" + std::string(symbol) +
                                   "\" is not an ELF symbol name: " + ShowByte(symbol[i]) + " at " +
                                   std::to_string(i) + " (letters, digits and _ . $ @ only)");
  }
  return Status::Ok();
}

}  // namespace

bool IsValidUtf8(std::string_view s) {
  const auto* p = reinterpret_cast<const unsigned char*>(s.data());
  const auto* end = p + s.size();
  while (p < end) {
    // Eight ASCII bytes at a time (names are nearly always ASCII).
    if (end - p >= 8) {
      uint64_t w;
      std::memcpy(&w, p, 8);
      if ((w & 0x8080808080808080ULL) == 0) {
        p += 8;
        continue;
      }
    }
    unsigned char c = *p;
    if (c < 0x80) {
      ++p;
      continue;
    }
    int len;
    uint32_t cp;
    if ((c & 0xE0) == 0xC0) {
      len = 2;
      cp = c & 0x1F;
    } else if ((c & 0xF0) == 0xE0) {
      len = 3;
      cp = c & 0x0F;
    } else if ((c & 0xF8) == 0xF0) {
      len = 4;
      cp = c & 0x07;
    } else {
      return false;
    }
    if (end - p < len) return false;
    for (int i = 1; i < len; ++i) {
      if ((p[i] & 0xC0) != 0x80) return false;
      cp = (cp << 6) | (p[i] & 0x3F);
    }
    if ((len == 2 && cp < 0x80) || (len == 3 && cp < 0x800) || (len == 4 && cp < 0x10000)) {
      return false;  // overlong
    }
    if (cp > 0x10FFFF || (cp >= 0xD800 && cp <= 0xDFFF)) return false;
    p += len;
  }
  return true;
}

std::string_view ValidationRule(const Status& status) {
  const std::string& m = status.message();
  size_t colon = m.find(':');
  if (colon == std::string::npos) return {};
  std::string_view rule(m.data(), colon);
  for (char c : rule) {
    if (!(c == '_' || (c >= 'a' && c <= 'z') || (c >= '0' && c <= '9'))) return {};
  }
  return rule;
}

namespace {

// The rules, written once for the protobuf messages and for the views of
// batch_view.h (same accessor names).
template <typename P>
Status ValidatePlatformT(const P& p) {
  if (!wire::Os_IsValid(p.os())) {
    return Fail("platform_enum", "unknown os value " + std::to_string(p.os()));
  }
  if (!wire::Arch_IsValid(p.arch())) {
    return Fail("platform_enum", "unknown arch value " + std::to_string(p.arch()));
  }
  if (!wire::CpuVendor_IsValid(p.cpu_vendor())) {
    return Fail("platform_enum", "unknown cpu_vendor value " + std::to_string(p.cpu_vendor()));
  }
  if (p.cpu_family() > 255) {
    return Fail("platform_enum", "cpu_family " + std::to_string(p.cpu_family()) + " is over 255");
  }
  return Status::Ok();
}

// What the checks of one histogram carry from bucket to bucket.
struct BucketTotals {
  uint64_t count = 0;
  uint128 sum = 0;
  uint128 sum_sq = 0;
  bool total_saturated = false;
  bool any_bucket_saturated = false;
  int prev = -1;     // the last bucket's index
  int lowest = -1;   // the lowest bucket's index, -1 before any
  int highest = -1;  // the highest's
};

// One bucket: its index, its count and sums against its edges, its sum of
// squares against the saturation flag `flag`; added to `t`.
template <typename B>
Status CheckBucket(const B& b, bool flag, BucketTotals* t) {
  // Built only when a rule fails: this runs for every bucket of every record.
  auto where = [&b] { return "bucket " + std::to_string(b.index()); };
  if (b.index() >= static_cast<uint32_t>(kNumBuckets)) {
    return Fail("bucket_index_range", where() + " is out of range 0..63");
  }
  const int i = static_cast<int>(b.index());
  if (i <= t->prev) {
    return Fail("bucket_order", where() + " follows bucket " + std::to_string(t->prev) +
                                    " (indexes must be strictly increasing, no repeats)");
  }
  t->prev = i;
  if (t->lowest < 0) t->lowest = i;
  t->highest = i;
  if (b.count() == 0) return Fail("bucket_count_zero", where() + " has count 0");
  const uint128 bsum = MakeUint128(b.sum_lo(), b.sum_hi());
  const uint128 bsq = MakeUint128(b.sum_sq_lo(), b.sum_sq_hi());
  const uint128 lo = BucketLow(i);
  const uint128 hi = BucketHigh(i);
  const uint128 min_sum = MulSat(b.count(), lo);
  const uint128 max_sum = MulSat(b.count(), hi);
  if (bsum < min_sum || bsum > max_sum) {
    return Fail("bucket_sum_range", where() + ": sum " + U(bsum) + " is outside count*[" + U(lo) +
                                        ", " + U(hi) + "] = [" + U(min_sum) + ", " + U(max_sum) +
                                        "]");
  }
  if (bsq == kUint128Max) {
    t->any_bucket_saturated = true;
    if (!flag) {
      return Fail("sum_sq_saturated_flag",
                  where() + ": sum of squares is saturated but sum_sq_saturated is false");
    }
  } else {
    // Every value v in [lo, hi] has lo*v <= v^2 <= hi*v, so lo*sum <= sum_sq <= hi*sum;
    // and by Cauchy-Schwarz sum^2 <= count * sum_sq.
    const uint128 min_sq = MulSat(bsum, lo);
    const uint128 max_sq = MulSat(bsum, hi);
    if (bsq < min_sq || bsq > max_sq || !CauchySchwarzHolds(b.count(), bsum, bsq)) {
      return Fail("bucket_sum_sq_range", where() + ": sum of squares " + U(bsq) +
                                             " is inconsistent with count " +
                                             std::to_string(b.count()) + " and sum " + U(bsum));
    }
  }
  if (t->count + b.count() < t->count) return Fail("total_count", "bucket counts overflow 64 bits");
  t->count += b.count();
  if (t->sum + bsum < t->sum) return Fail("total_sum", "bucket sums overflow 128 bits");
  t->sum += bsum;
  t->sum_sq = SaturatingAdd(t->sum_sq, bsq, &t->total_saturated);
  return Status::Ok();
}

// The histogram's totals against its buckets'.
template <typename H>
Status CheckTotals(const H& h, const BucketTotals& t) {
  if (t.count == 0) return Fail("histogram_empty", "histogram has no values");
  if (h.count() != t.count) {
    return Fail("total_count",
                "count " + std::to_string(h.count()) +
                    " differs from zero_count + bucket counts = " + std::to_string(t.count));
  }
  if (MakeUint128(h.sum_lo(), h.sum_hi()) != t.sum) {
    return Fail("total_sum", "sum " + U(MakeUint128(h.sum_lo(), h.sum_hi())) +
                                 " differs from the sum of bucket sums " + U(t.sum));
  }
  const bool flag = h.sum_sq_saturated();
  const bool should_flag = t.any_bucket_saturated || t.total_saturated;
  if (flag != should_flag) {
    return Fail("sum_sq_saturated_flag",
                std::string("sum_sq_saturated is ") + (flag ? "true" : "false") +
                    " but the sums of squares " + (should_flag ? "do" : "do not") + " saturate");
  }
  if (MakeUint128(h.sum_sq_lo(), h.sum_sq_hi()) != t.sum_sq) {
    return Fail("total_sum_sq", "sum of squares " + U(MakeUint128(h.sum_sq_lo(), h.sum_sq_hi())) +
                                    " differs from the (saturating) sum over buckets " +
                                    U(t.sum_sq));
  }
  return Status::Ok();
}

// min and max: in order, and in the lowest and highest buckets (or 0).
template <typename H>
Status CheckMinMax(const H& h, const BucketTotals& t) {
  if (h.min() > h.max()) {
    return Fail("min_max_order", "min " + std::to_string(h.min()) + " is greater than max " +
                                     std::to_string(h.max()));
  }
  if (h.zero_count() > 0) {
    if (h.min() != 0) {
      return Fail("min_range", "min " + std::to_string(h.min()) + " but zero_count is " +
                                   std::to_string(h.zero_count()));
    }
  } else if (h.min() < BucketLow(t.lowest) || h.min() > BucketHigh(t.lowest)) {
    return Fail("min_range", "min " + std::to_string(h.min()) + " is not in the lowest bucket " +
                                 std::to_string(t.lowest));
  }
  if (t.highest < 0) {
    if (h.max() != 0) {
      return Fail("max_range", "max " + std::to_string(h.max()) + " but all values are 0");
    }
  } else if (h.max() < BucketLow(t.highest) || h.max() > BucketHigh(t.highest)) {
    return Fail("max_range", "max " + std::to_string(h.max()) + " is not in the highest bucket " +
                                 std::to_string(t.highest));
  }
  return Status::Ok();
}

template <typename H>
Status ValidateHistogramT(const H& h) {
  BucketTotals t;
  t.count = h.zero_count();
  const bool flag = h.sum_sq_saturated();
  for (int k = 0; k < h.buckets_size(); ++k) {
    FP_RETURN_IF_ERROR(CheckBucket(h.buckets(k), flag, &t));
  }
  FP_RETURN_IF_ERROR(CheckTotals(h, t));
  return CheckMinMax(h, t);
}

template <typename R>
Status ValidateRecordT(const R& r) {
  if (!r.has_key()) return Fail("key_missing", "record has no key");
  if (!r.machines().empty() || r.machine_count() != 0 || !r.suspect().empty() ||
      !r.day_machines().empty() || r.first_day() != 0) {
    return Fail("record_machines",
                "machines are counted and suspects judged by the aggregator, never sent");
  }
  const auto& k = r.key();
  FP_RETURN_IF_ERROR(CheckString("module", k.module(), kMaxModuleBytes));
  FP_RETURN_IF_ERROR(CheckString("module_version", k.module_version(), kMaxVersionBytes));
  FP_RETURN_IF_ERROR(CheckString("symbol", k.symbol(), kMaxSymbolBytes));
  FP_RETURN_IF_ERROR(CheckKeyStrings(k.module(), k.module_version(), k.symbol(),
                                     k.metric() == wire::METRIC_STACK_CPU_NS));
  if (!wire::Metric_IsValid(k.metric()) || k.metric() == wire::METRIC_UNSPECIFIED) {
    return Fail("metric_unknown", "metric value " + std::to_string(k.metric()) + " is not known");
  }
  if (k.metric() == wire::METRIC_POINT_NS &&
      !key_rules::PointSymbolOk(k.symbol().data(), k.symbol().size())) {
    return Fail("point_symbol",
                "a point series' symbol is not tag$from$to or tag$name of "
                "identifiers (letters, digits, _ and ., at most 64 bytes each)");
  }
  if (k.has_platform()) FP_RETURN_IF_ERROR(ValidatePlatformT(k.platform()));
  if (!r.has_histogram()) return Fail("histogram_empty", "record has no histogram");
  FP_RETURN_IF_ERROR(ValidateHistogramT(r.histogram()));
  // runs may be 0: a later part of a long run reported in parts (its run is
  // counted in the first part its API appears in; RunRecord.part).
  if (r.runs() > r.histogram().count()) {
    return Fail("runs_exceed_calls", "runs " + std::to_string(r.runs()) + " exceeds calls " +
                                         std::to_string(r.histogram().count()));
  }
  if (r.resolution_ns() != 0) {
    if (k.metric() != wire::METRIC_WALL_TIME_NS) {
      return Fail("resolution_not_time", "resolution_ns is set on a metric that is not wall time");
    }
    if (r.resolution_ns() > kMaxResolutionNs) {
      return Fail("resolution_range", "resolution_ns " + std::to_string(r.resolution_ns()) +
                                          " is above " + std::to_string(kMaxResolutionNs));
    }
  }
  return Status::Ok();
}

// A known field number among the unknown fields means the field came with the
// wrong wire type (protobuf keeps such fields as unknown instead of failing).
// Unknown numbers are fine: newer agents may add fields.
// Reflection and descriptor are looked up once per message type: asking the
// message for them each time costs a descriptor-assignment check per call,
// which showed up in ingest profiles (one call per bucket).
template <typename M>
Status CheckWireTypes(const M& m, const char* what) {
  static const google::protobuf::Reflection* const reflection = M::GetReflection();
  static const google::protobuf::Descriptor* const descriptor = M::GetDescriptor();
  const google::protobuf::UnknownFieldSet& u = reflection->GetUnknownFields(m);
  for (int i = 0; i < u.field_count(); ++i) {
    if (descriptor->FindFieldByNumber(u.field(i).number()) != nullptr) {
      return Fail("wire_type", std::string(what) + " field " + std::to_string(u.field(i).number()) +
                                   " has the wrong wire type");
    }
  }
  return Status::Ok();
}

Status CheckBatchWireTypes(const wire::Batch& b) {
  FP_RETURN_IF_ERROR(CheckWireTypes(b, "batch"));
  FP_RETURN_IF_ERROR(CheckWireTypes(b.client_platform(), "client_platform"));
  FP_RETURN_IF_ERROR(CheckWireTypes(b.counters(), "counters"));
  for (const wire::Record& r : b.records()) {
    FP_RETURN_IF_ERROR(CheckWireTypes(r, "record"));
    FP_RETURN_IF_ERROR(CheckWireTypes(r.key(), "key"));
    FP_RETURN_IF_ERROR(CheckWireTypes(r.key().platform(), "key platform"));
    FP_RETURN_IF_ERROR(CheckWireTypes(r.histogram(), "histogram"));
    for (const wire::Bucket& bk : r.histogram().buckets()) {
      FP_RETURN_IF_ERROR(CheckWireTypes(bk, "bucket"));
    }
  }
  return Status::Ok();
}

template <typename B>
Status ValidateBatchContent(const B& batch) {
  if (batch.schema_version() != kSchemaVersion) {
    return Fail("schema_version", "schema version " + std::to_string(batch.schema_version()) +
                                      " is not supported (this server knows " +
                                      std::to_string(kSchemaVersion) + ")");
  }
  if (batch.batch_id().size() != kBatchIdBytes) {
    return Fail("batch_id_length",
                "batch id is " + std::to_string(batch.batch_id().size()) + " bytes, expected 16");
  }
  if (!batch.machine_key().empty() && batch.machine_key().size() != kMachineKeyBytes) {
    return Fail("machine_key", "machine key is " + std::to_string(batch.machine_key().size()) +
                                   " bytes, expected 16 (or none)");
  }
  if (batch.records_size() == 0) return Fail("record_count", "batch has no records");
  if (batch.records_size() > kMaxRecordsPerBatch) {
    return Fail("record_count", "batch has " + std::to_string(batch.records_size()) +
                                    " records, the limit is " +
                                    std::to_string(kMaxRecordsPerBatch));
  }
  FP_RETURN_IF_ERROR(ValidatePlatformT(batch.client_platform()));
  for (int i = 0; i < batch.records_size(); ++i) {
    Status s = ValidateRecordT(batch.records(i));
    if (!s.ok()) {
      // Keep the rule first, then say which record.
      std::string_view rule = ValidationRule(s);
      std::string rest = s.message().substr(rule.size() + 2);
      const auto& k = batch.records(i).key();
      std::string where = "record " + std::to_string(i);
      if (IsValidUtf8(k.module()) && IsValidUtf8(k.symbol()) && k.module().size() < 256 &&
          k.symbol().size() < 256) {
        where += " (" + std::string(k.module()) + " " + std::string(k.symbol()) + ")";
      }
      return Fail(rule, where + ": " + rest);
    }
  }
  return Status::Ok();
}

}  // namespace

Status ValidatePlatform(const wire::Platform& p) { return ValidatePlatformT(p); }
Status ValidatePlatform(const PlatformView& p) { return ValidatePlatformT(p); }
Status ValidateHistogram(const wire::Histogram& h) { return ValidateHistogramT(h); }
Status ValidateHistogram(const HistogramView& h) { return ValidateHistogramT(h); }
Status ValidateRecord(const wire::Record& r) { return ValidateRecordT(r); }
Status ValidateRecord(const RecordView& r) { return ValidateRecordT(r); }

Status ValidateBatch(const wire::Batch& batch) {
  FP_RETURN_IF_ERROR(CheckBatchWireTypes(batch));
  return ValidateBatchContent(batch);
}

// The fast decoder refuses wrong wire types itself (the fallback reports them).
Status ValidateBatch(const BatchView& batch) { return ValidateBatchContent(batch); }

}  // namespace fieldprof
