// A Batch read straight from its wire bytes, without protobuf messages.
//
// The aggregator's ingest path used to parse every upload into protobuf
// messages (one per record, key, platform, histogram and bucket) only to
// validate them and add them up once. BatchView decodes the same bytes in
// one pass into flat structs whose strings point into the body, with the
// accessor names of the generated messages, so ValidateBatch and the store
// take either (validate.h, api_key.h).
//
//   BatchView v;
//   Status s = DecodeBatchView(body, &v);  // size limit, parse, ValidateBatch
//   // v points into `body`: keep body alive while v is used.
//
// The fast decoder takes the common shape of a batch and leaves anything
// unusual — malformed or truncated wire data, wrong wire types, a singular
// message field given twice (protobuf merges those), groups, invalid UTF-8 —
// to the protobuf parser, whose result is then viewed the same way. So every
// input gets exactly the answer (and error message) DecodeBatch gives; the
// differential test and the fuzz target check that.
#ifndef FIELDPROF_COMMON_WIRE_BATCH_VIEW_H_
#define FIELDPROF_COMMON_WIRE_BATCH_VIEW_H_

#include <google/protobuf/arena.h>

#include <cstdint>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "common/base/status.h"
#include "common/proto/fieldprof.pb.h"

namespace fieldprof {

struct BucketView {
  uint32_t index_ = 0;
  uint64_t count_ = 0, sum_lo_ = 0, sum_hi_ = 0, sum_sq_lo_ = 0, sum_sq_hi_ = 0;

  uint32_t index() const { return index_; }
  uint64_t count() const { return count_; }
  uint64_t sum_lo() const { return sum_lo_; }
  uint64_t sum_hi() const { return sum_hi_; }
  uint64_t sum_sq_lo() const { return sum_sq_lo_; }
  uint64_t sum_sq_hi() const { return sum_sq_hi_; }
};

struct PlatformView {
  int32_t os_ = 0, arch_ = 0, cpu_vendor_ = 0;
  uint32_t cpu_family_ = 0;

  int32_t os() const { return os_; }
  int32_t arch() const { return arch_; }
  int32_t cpu_vendor() const { return cpu_vendor_; }
  uint32_t cpu_family() const { return cpu_family_; }
};

struct HistogramView {
  uint64_t zero_count_ = 0, count_ = 0, sum_lo_ = 0, sum_hi_ = 0, sum_sq_lo_ = 0, sum_sq_hi_ = 0;
  uint64_t min_ = 0, max_ = 0;
  bool sum_sq_saturated_ = false;
  const BucketView* buckets_ = nullptr;  // into the owning BatchView
  int buckets_size_ = 0;

  uint64_t zero_count() const { return zero_count_; }
  uint64_t count() const { return count_; }
  uint64_t sum_lo() const { return sum_lo_; }
  uint64_t sum_hi() const { return sum_hi_; }
  uint64_t sum_sq_lo() const { return sum_sq_lo_; }
  uint64_t sum_sq_hi() const { return sum_sq_hi_; }
  uint64_t min() const { return min_; }
  uint64_t max() const { return max_; }
  bool sum_sq_saturated() const { return sum_sq_saturated_; }
  int buckets_size() const { return buckets_size_; }
  const BucketView& buckets(int i) const { return buckets_[i]; }
  // For range-for, like the messages' repeated field.
  struct Range {
    const BucketView* b;
    const BucketView* e;
    const BucketView* begin() const { return b; }
    const BucketView* end() const { return e; }
  };
  Range buckets() const { return {buckets_, buckets_ + buckets_size_}; }
};

struct ApiKeyView {
  std::string_view module_, module_version_, symbol_;
  int32_t metric_ = 0;
  bool has_platform_ = false;
  PlatformView platform_;

  std::string_view module() const { return module_; }
  std::string_view module_version() const { return module_version_; }
  std::string_view symbol() const { return symbol_; }
  int32_t metric() const { return metric_; }
  bool has_platform() const { return has_platform_; }
  const PlatformView& platform() const { return platform_; }
};

struct RecordView {
  bool has_key_ = false, has_histogram_ = false;
  ApiKeyView key_;
  HistogramView histogram_;
  uint64_t runs_ = 0;
  bool truncated_ = false;
  uint64_t resolution_ns_ = 0;
  std::string_view machines_;
  uint64_t machine_count_ = 0;
  std::string_view suspect_;
  bool first_from_machine_ = false;
  std::string_view day_machines_;
  int32_t first_day_ = 0;

  bool has_key() const { return has_key_; }
  const ApiKeyView& key() const { return key_; }
  bool has_histogram() const { return has_histogram_; }
  const HistogramView& histogram() const { return histogram_; }
  uint64_t runs() const { return runs_; }
  bool truncated() const { return truncated_; }
  uint64_t resolution_ns() const { return resolution_ns_; }
  std::string_view machines() const { return machines_; }
  uint64_t machine_count() const { return machine_count_; }
  std::string_view suspect() const { return suspect_; }
  bool first_from_machine() const { return first_from_machine_; }
  std::string_view day_machines() const { return day_machines_; }
  int32_t first_day() const { return first_day_; }
};

class BatchView {
 public:
  BatchView() = default;
  BatchView(const BatchView&) = delete;  // histograms point into buckets_
  BatchView& operator=(const BatchView&) = delete;

  uint32_t schema_version() const { return schema_version_; }
  std::string_view batch_id() const { return batch_id_; }
  int64_t created_unix_ms() const { return created_unix_ms_; }
  std::string_view machine_key() const { return machine_key_; }
  std::string_view token() const { return token_; }
  int64_t token_epoch() const { return token_epoch_; }
  int64_t window_start_unix_ms() const { return window_start_unix_ms_; }
  const PlatformView& client_platform() const { return client_platform_; }
  int records_size() const { return static_cast<int>(records_.size()); }
  const RecordView& records(int i) const { return records_[static_cast<size_t>(i)]; }
  const std::vector<RecordView>& records() const { return records_; }

  void Clear();

 private:
  friend bool ParseBatchViewFast(std::string_view bytes, BatchView* out);
  friend void ViewBatchMessage(const wire::Batch& batch, BatchView* out);
  friend Status DecodeBatchView(std::string_view bytes, BatchView* out);
  void LinkBuckets();

  uint32_t schema_version_ = 0;
  std::string_view batch_id_;
  int64_t created_unix_ms_ = 0;
  std::string_view machine_key_;
  std::string_view token_;
  int64_t token_epoch_ = 0;
  int64_t window_start_unix_ms_ = 0;
  PlatformView client_platform_;
  std::vector<RecordView> records_;
  std::vector<BucketView> buckets_;   // every record's, in order
  std::vector<int> bucket_first_;     // per record, into buckets_
  std::shared_ptr<void> keep_alive_;  // the protobuf fallback's arena, if used
};

// `body` (a batch that decoded) less what no store keeps: the machine
// key, the token and its epoch. `body` itself when it has none of them,
// else a copy in *scratch. Empty only if `body` does not parse at all.
std::string_view StorableBatchBody(std::string_view body, std::string* scratch);

// One pass over `bytes` into `out` (not validated). False when the bytes are
// not in the shape the fast path takes; the caller then parses with protobuf.
[[nodiscard]] bool ParseBatchViewFast(std::string_view bytes, BatchView* out);

// One record's wire bytes (a wire::Record on its own, as the aggregator
// stores its sums) in one pass into `out`, its histogram's buckets in
// *buckets (cleared first; `out` points into it and into `bytes`). Not
// validated; false in the same cases as ParseBatchViewFast.
[[nodiscard]] bool ParseRecordViewFast(std::string_view bytes, RecordView* out,
                                       std::vector<BucketView>* buckets);

// Views a parsed message; `batch` must outlive `out`.
void ViewBatchMessage(const wire::Batch& batch, BatchView* out);

// Size limit, parse (fast path, else protobuf) and ValidateBatch: the same
// errors as DecodeBatch (wire.h). `out` points into `bytes`, which must
// outlive it.
[[nodiscard]] Status DecodeBatchView(std::string_view bytes, BatchView* out);

// How many DecodeBatchView calls took the protobuf fallback (process-wide).
uint64_t BatchViewFallbacks();

}  // namespace fieldprof

#endif  // FIELDPROF_COMMON_WIRE_BATCH_VIEW_H_
