#include "common/batch_view.h"

#include <algorithm>
#include <atomic>
#include <cstring>
#include <limits>

#include "common/validate.h"
#include "common/wire.h"

namespace fieldprof {
namespace {

constexpr int kVarint = 0;
constexpr int kFixed64 = 1;
constexpr int kLengthDelimited = 2;
constexpr int kFixed32 = 5;

std::atomic<uint64_t> g_fallbacks{0};

// A cursor over protobuf wire data. Every method returns false on anything
// the fast path does not take; the caller then gives up on the fast path.
class Reader {
 public:
  explicit Reader(std::string_view s)
      : p_(reinterpret_cast<const uint8_t*>(s.data())), end_(p_ + s.size()) {}

  bool done() const { return p_ == end_; }

  bool Varint(uint64_t* v) {
    // One byte is the common case (small counts, indexes, tags).
    if (p_ < end_ && *p_ < 0x80) {
      *v = *p_++;
      return true;
    }
    // With ten bytes left no bounds check is needed per byte.
    const size_t limit = std::min<size_t>(10, static_cast<size_t>(end_ - p_));
    uint64_t result = 0;
    for (size_t i = 0; i < limit; ++i) {
      const uint64_t b = p_[i];
      result |= (b & 0x7f) << (7 * i);
      if (b < 0x80) {
        // The tenth byte may only carry bit 63.
        if (i == 9 && b > 1) return false;
        p_ += i + 1;
        *v = result;
        return true;
      }
    }
    return false;
  }

  // The next tag; false at a malformed tag, field 0, or a group (wire types
  // 3 and 4: the fast path takes none).
  bool Tag(uint32_t* field, int* wire_type) {
    uint64_t t;
    if (!Varint(&t) || t > std::numeric_limits<uint32_t>::max()) return false;
    *field = static_cast<uint32_t>(t >> 3);
    *wire_type = static_cast<int>(t & 7);
    if (*field == 0) return false;
    return *wire_type == kVarint || *wire_type == kFixed64 || *wire_type == kLengthDelimited ||
           *wire_type == kFixed32;
  }

  bool Bytes(std::string_view* out) {
    uint64_t n;
    if (!Varint(&n) || n > static_cast<uint64_t>(end_ - p_)) return false;
    *out = std::string_view(reinterpret_cast<const char*>(p_), static_cast<size_t>(n));
    p_ += n;
    return true;
  }

  // Skips a field of an unknown number (newer senders may add fields).
  bool Skip(int wire_type) {
    uint64_t ignored;
    std::string_view ignored_bytes;
    switch (wire_type) {
      case kVarint:
        return Varint(&ignored);
      case kFixed64:
        return Advance(8);
      case kFixed32:
        return Advance(4);
      case kLengthDelimited:
        return Bytes(&ignored_bytes);
      default:
        return false;
    }
  }

 private:
  bool Advance(size_t n) {
    if (static_cast<size_t>(end_ - p_) < n) return false;
    p_ += n;
    return true;
  }

  const uint8_t* p_;
  const uint8_t* end_;
};

// Reads a varint field into `*out` (truncated to T like protobuf does), or
// refuses a known varint field sent with another wire type.
template <typename T>
bool ReadVarintField(Reader& r, int wire_type, T* out) {
  if (wire_type != kVarint) return false;
  uint64_t v;
  if (!r.Varint(&v)) return false;
  if constexpr (std::is_same_v<T, bool>) {
    *out = v != 0;
  } else {
    *out = static_cast<T>(v);
  }
  return true;
}

bool ReadMessage(Reader& r, int wire_type, std::string_view* out) {
  return wire_type == kLengthDelimited && r.Bytes(out);
}

// proto3 strings must be UTF-8; protobuf refuses the parse otherwise, so the
// fast path leaves those to it for the same answer.
bool ReadString(Reader& r, int wire_type, std::string_view* out) {
  return ReadMessage(r, wire_type, out) && IsValidUtf8(*out);
}

bool ParseBucket(std::string_view bytes, BucketView* b) {
  Reader r(bytes);
  while (!r.done()) {
    uint32_t f;
    int wt;
    if (!r.Tag(&f, &wt)) return false;
    bool ok;
    switch (f) {
      case 1:
        ok = ReadVarintField(r, wt, &b->index_);
        break;
      case 2:
        ok = ReadVarintField(r, wt, &b->count_);
        break;
      case 3:
        ok = ReadVarintField(r, wt, &b->sum_lo_);
        break;
      case 4:
        ok = ReadVarintField(r, wt, &b->sum_hi_);
        break;
      case 5:
        ok = ReadVarintField(r, wt, &b->sum_sq_lo_);
        break;
      case 6:
        ok = ReadVarintField(r, wt, &b->sum_sq_hi_);
        break;
      default:
        ok = r.Skip(wt);
    }
    if (!ok) return false;
  }
  return true;
}

bool ParsePlatform(std::string_view bytes, PlatformView* p) {
  Reader r(bytes);
  while (!r.done()) {
    uint32_t f;
    int wt;
    if (!r.Tag(&f, &wt)) return false;
    bool ok;
    switch (f) {
      case 1:
        ok = ReadVarintField(r, wt, &p->os_);
        break;
      case 2:
        ok = ReadVarintField(r, wt, &p->arch_);
        break;
      case 3:
        ok = ReadVarintField(r, wt, &p->cpu_vendor_);
        break;
      case 4:
        ok = ReadVarintField(r, wt, &p->cpu_family_);
        break;
      default:
        ok = r.Skip(wt);
    }
    if (!ok) return false;
  }
  return true;
}

bool ParseHistogram(std::string_view bytes, HistogramView* h, std::vector<BucketView>* buckets) {
  Reader r(bytes);
  while (!r.done()) {
    uint32_t f;
    int wt;
    if (!r.Tag(&f, &wt)) return false;
    bool ok;
    std::string_view sub;
    switch (f) {
      case 1:
        ok = ReadVarintField(r, wt, &h->zero_count_);
        break;
      case 2:
        ok = ReadMessage(r, wt, &sub);
        if (ok) {
          buckets->emplace_back();
          ok = ParseBucket(sub, &buckets->back());
          ++h->buckets_size_;
        }
        break;
      case 3:
        ok = ReadVarintField(r, wt, &h->count_);
        break;
      case 4:
        ok = ReadVarintField(r, wt, &h->sum_lo_);
        break;
      case 5:
        ok = ReadVarintField(r, wt, &h->sum_hi_);
        break;
      case 6:
        ok = ReadVarintField(r, wt, &h->sum_sq_lo_);
        break;
      case 7:
        ok = ReadVarintField(r, wt, &h->sum_sq_hi_);
        break;
      case 8:
        ok = ReadVarintField(r, wt, &h->sum_sq_saturated_);
        break;
      case 9:
        ok = ReadVarintField(r, wt, &h->min_);
        break;
      case 10:
        ok = ReadVarintField(r, wt, &h->max_);
        break;
      default:
        ok = r.Skip(wt);
    }
    if (!ok) return false;
  }
  return true;
}

bool ParseApiKey(std::string_view bytes, ApiKeyView* k) {
  Reader r(bytes);
  while (!r.done()) {
    uint32_t f;
    int wt;
    if (!r.Tag(&f, &wt)) return false;
    bool ok;
    std::string_view sub;
    switch (f) {
      case 1:
        ok = ReadString(r, wt, &k->module_);
        break;
      case 2:
        ok = ReadString(r, wt, &k->module_version_);
        break;
      case 3:
        ok = ReadString(r, wt, &k->symbol_);
        break;
      case 4:
        ok = ReadVarintField(r, wt, &k->metric_);
        break;
      case 5:
        // Given twice, protobuf merges the two: not the fast path's shape.
        ok = !k->has_platform_ && ReadMessage(r, wt, &sub) && ParsePlatform(sub, &k->platform_);
        k->has_platform_ = true;
        break;
      default:
        ok = r.Skip(wt);
    }
    if (!ok) return false;
  }
  return true;
}

bool ParseRecord(std::string_view bytes, RecordView* rec, std::vector<BucketView>* buckets) {
  Reader r(bytes);
  while (!r.done()) {
    uint32_t f;
    int wt;
    if (!r.Tag(&f, &wt)) return false;
    bool ok;
    std::string_view sub;
    switch (f) {
      case 1:
        ok = !rec->has_key_ && ReadMessage(r, wt, &sub) && ParseApiKey(sub, &rec->key_);
        rec->has_key_ = true;
        break;
      case 2:
        ok = !rec->has_histogram_ && ReadMessage(r, wt, &sub) &&
             ParseHistogram(sub, &rec->histogram_, buckets);
        rec->has_histogram_ = true;
        break;
      case 3:
        ok = ReadVarintField(r, wt, &rec->runs_);
        break;
      case 4:
        ok = ReadVarintField(r, wt, &rec->truncated_);
        break;
      default:
        ok = r.Skip(wt);
    }
    if (!ok) return false;
  }
  return true;
}

// AgentCounters: nothing of it is used on ingest, but a known field with the
// wrong wire type is a rejection (wire_type), left to the fallback.
bool CheckCounters(std::string_view bytes) {
  Reader r(bytes);
  while (!r.done()) {
    uint32_t f;
    int wt;
    if (!r.Tag(&f, &wt)) return false;
    uint64_t ignored;
    const bool ok = (f >= 1 && f <= 4) ? ReadVarintField(r, wt, &ignored) : r.Skip(wt);
    if (!ok) return false;
  }
  return true;
}

PlatformView ViewPlatform(const wire::Platform& p) {
  return PlatformView{p.os(), p.arch(), p.cpu_vendor(), p.cpu_family()};
}

// The protobuf fallback's message, kept alive by the view that points into it.
struct ParsedBatch {
  explicit ParsedBatch(const google::protobuf::ArenaOptions& o) : arena(o) {}
  google::protobuf::Arena arena;
};

}  // namespace

void BatchView::Clear() {
  schema_version_ = 0;
  batch_id_ = {};
  created_unix_ms_ = 0;
  client_platform_ = {};
  records_.clear();
  buckets_.clear();
  bucket_first_.clear();
  keep_alive_.reset();
}

void BatchView::LinkBuckets() {
  for (size_t i = 0; i < records_.size(); ++i) {
    records_[i].histogram_.buckets_ = buckets_.data() + bucket_first_[i];
  }
}

bool ParseBatchViewFast(std::string_view bytes, BatchView* out) {
  out->Clear();
  // ~150 bytes per record in typical batches; grows as needed.
  out->records_.reserve(bytes.size() / 128 + 1);
  out->bucket_first_.reserve(bytes.size() / 128 + 1);
  out->buckets_.reserve(bytes.size() / 16 + 1);
  Reader r(bytes);
  bool has_platform = false, has_counters = false;
  while (!r.done()) {
    uint32_t f;
    int wt;
    if (!r.Tag(&f, &wt)) return false;
    bool ok;
    std::string_view sub;
    switch (f) {
      case 1:
        ok = ReadVarintField(r, wt, &out->schema_version_);
        break;
      case 2:
        ok = ReadMessage(r, wt, &out->batch_id_);
        break;
      case 3:
        ok = ReadVarintField(r, wt, &out->created_unix_ms_);
        break;
      case 4:
        ok =
            !has_platform && ReadMessage(r, wt, &sub) && ParsePlatform(sub, &out->client_platform_);
        has_platform = true;
        break;
      case 5:
        ok = ReadMessage(r, wt, &sub);
        if (ok) {
          out->bucket_first_.push_back(static_cast<int>(out->buckets_.size()));
          out->records_.emplace_back();
          ok = ParseRecord(sub, &out->records_.back(), &out->buckets_);
        }
        break;
      case 6:
        ok = !has_counters && ReadMessage(r, wt, &sub) && CheckCounters(sub);
        has_counters = true;
        break;
      default:
        ok = r.Skip(wt);
    }
    if (!ok) return false;
  }
  out->LinkBuckets();
  return true;
}

void ViewBatchMessage(const wire::Batch& batch, BatchView* out) {
  out->Clear();
  out->schema_version_ = batch.schema_version();
  out->batch_id_ = batch.batch_id();
  out->created_unix_ms_ = batch.created_unix_ms();
  out->client_platform_ = ViewPlatform(batch.client_platform());
  out->records_.reserve(static_cast<size_t>(batch.records_size()));
  for (const wire::Record& r : batch.records()) {
    RecordView v;
    v.has_key_ = r.has_key();
    v.key_.module_ = r.key().module();
    v.key_.module_version_ = r.key().module_version();
    v.key_.symbol_ = r.key().symbol();
    v.key_.metric_ = r.key().metric();
    v.key_.has_platform_ = r.key().has_platform();
    v.key_.platform_ = ViewPlatform(r.key().platform());
    v.has_histogram_ = r.has_histogram();
    const wire::Histogram& h = r.histogram();
    HistogramView& hv = v.histogram_;
    hv.zero_count_ = h.zero_count();
    hv.count_ = h.count();
    hv.sum_lo_ = h.sum_lo();
    hv.sum_hi_ = h.sum_hi();
    hv.sum_sq_lo_ = h.sum_sq_lo();
    hv.sum_sq_hi_ = h.sum_sq_hi();
    hv.min_ = h.min();
    hv.max_ = h.max();
    hv.sum_sq_saturated_ = h.sum_sq_saturated();
    hv.buckets_size_ = h.buckets_size();
    out->bucket_first_.push_back(static_cast<int>(out->buckets_.size()));
    for (const wire::Bucket& b : h.buckets()) {
      out->buckets_.push_back(
          BucketView{b.index(), b.count(), b.sum_lo(), b.sum_hi(), b.sum_sq_lo(), b.sum_sq_hi()});
    }
    v.runs_ = r.runs();
    v.truncated_ = r.truncated();
    out->records_.push_back(v);
  }
  out->LinkBuckets();
}

Status DecodeBatchView(std::string_view bytes, BatchView* out) {
  if (bytes.size() <= kMaxBatchBytes && !bytes.empty() && ParseBatchViewFast(bytes, out)) {
    return ValidateBatch(*out);
  }
  g_fallbacks.fetch_add(1, std::memory_order_relaxed);
  google::protobuf::ArenaOptions arena_options;
  arena_options.start_block_size = std::min<size_t>(4 * bytes.size() + 4096, 8 << 20);
  arena_options.max_block_size = 8 << 20;
  auto parsed = std::make_shared<ParsedBatch>(arena_options);
  StatusOr<wire::Batch*> batch = DecodeBatch(bytes, &parsed->arena);
  if (!batch.ok()) {
    out->Clear();
    return batch.status();
  }
  ViewBatchMessage(**batch, out);
  out->keep_alive_ = std::move(parsed);
  return Status::Ok();
}

uint64_t BatchViewFallbacks() { return g_fallbacks.load(std::memory_order_relaxed); }

}  // namespace fieldprof
