// The one validation of untrusted wire data, shared by every side: the
// aggregator runs it on uploads, the agent on what it is about to send, tools
// on what they read.
//
// Every rule has a name, and a failed rule returns InvalidArgument whose
// message starts with it: "bucket_sum_range: record 3 (libz.so.1 deflate):
// bucket 4: sum 5 is outside count*[16, 31]". ValidationRule() extracts it.
//
// Rules: wire_type, schema_version, batch_id_length, record_count, platform_enum,
// key_missing, string_empty, string_too_long, string_utf8, string_control,
// metric_unknown, runs_exceed_calls, histogram_empty,
// bucket_index_range, bucket_order, bucket_count_zero, bucket_sum_range,
// module_name, module_version_token, symbol_name (common/wire/key_rules.h: key
// strings that could carry personal data), bucket_sum_sq_range,
// sum_sq_saturated_flag, total_count, total_sum, total_sum_sq,
// min_max_order, min_range, max_range, resolution_not_time,
// resolution_range.
#ifndef FIELDPROF_COMMON_WIRE_VALIDATE_H_
#define FIELDPROF_COMMON_WIRE_VALIDATE_H_

#include <cstddef>
#include <string_view>

#include "common/base/status.h"
#include "common/proto/fieldprof.pb.h"
#include "common/wire/batch_view.h"
#include "common/wire/key_rules.h"

namespace fieldprof {

inline constexpr size_t kMaxBatchBytes = 1 << 20;  // the aggregator refuses larger bodies
inline constexpr int kMaxRecordsPerBatch = 32768;
inline constexpr size_t kMaxModuleBytes = key_rules::kMaxModule;
inline constexpr size_t kMaxVersionBytes = key_rules::kMaxModuleVersion;
inline constexpr size_t kMaxSymbolBytes = key_rules::kMaxSymbol;
// A run's timing resolution (wire::Record.resolution_ns) is at most 1 ms.
inline constexpr uint64_t kMaxResolutionNs = 1000000;

[[nodiscard]] Status ValidateBatch(const wire::Batch& batch);
[[nodiscard]] Status ValidateRecord(const wire::Record& record);
[[nodiscard]] Status ValidateHistogram(const wire::Histogram& h);
[[nodiscard]] Status ValidatePlatform(const wire::Platform& p);
// The same rules on views decoded straight from the wire (batch_view.h).
[[nodiscard]] Status ValidateBatch(const BatchView& batch);
[[nodiscard]] Status ValidateRecord(const RecordView& record);
[[nodiscard]] Status ValidateHistogram(const HistogramView& h);
[[nodiscard]] Status ValidatePlatform(const PlatformView& p);

// True when `s` is well-formed UTF-8 (no overlongs, surrogates or code points
// past U+10FFFF).
bool IsValidUtf8(std::string_view s);

// The rule name at the start of a validation error message ("" if none).
std::string_view ValidationRule(const Status& status);

}  // namespace fieldprof

#endif  // FIELDPROF_COMMON_WIRE_VALIDATE_H_
