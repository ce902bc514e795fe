#include "common/wire/batch_view.h"

#include <algorithm>
#include <atomic>
#include <bit>
#include <cstring>
#include <limits>

#include "common/wire/validate.h"
#include "common/wire/wire.h"

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
  // A reader of the whole of `s`.
  explicit Reader(std::string_view s)
      : p_(reinterpret_cast<const uint8_t*>(s.data())), end_(p_ + s.size()), buffer_end_(end_) {}

  // A reader of `sub`, a message inside this reader's buffer: a varint
  // near its end may be read as a word from the buffer's bytes after it.
  Reader Sub(std::string_view sub) const {
    Reader r(sub);
    r.buffer_end_ = buffer_end_;
    return r;
  }

  bool done() const { return p_ == end_; }
  const char* pos() const { return reinterpret_cast<const char*>(p_); }

  // The readers below are inlined into each message's field loop: called,
  // they were a third of a batch's decoding (perf of BM_DecodeBatchView).
  [[gnu::always_inline]] bool Varint(uint64_t* v) {
    // One byte is the common case (small counts, indexes, tags).
    if (p_ < end_ && *p_ < 0x80) {
      *v = *p_++;
      return true;
    }
    return LongVarint(v);
  }

  [[gnu::noinline]] bool LongVarint(uint64_t* v) {
    // Sums take five to ten bytes, of lengths the branch predictor cannot
    // guess: with ten bytes left in the buffer, the first eight are read as
    // one word, the end found by its first clear top bit, and the 7-bit
    // groups packed together in three steps, without a branch per byte.
    // The buffer's bytes, not the message's: a bucket's last sums lie
    // within ten bytes of its end. A varint that ends past the message
    // is refused, as the byte loop below refuses one it does not end.
    if (buffer_end_ - p_ >= 10) {
      const size_t room = static_cast<size_t>(end_ - p_);
      uint64_t w;
      std::memcpy(&w, p_, 8);
      const uint64_t ends = ~w & 0x8080808080808080ull;
      if (ends != 0) {
        const int bits = __builtin_ctzll(ends) + 1;  // through the last byte's top bit
        if (static_cast<size_t>(bits / 8) > room) return false;
        if (bits < 64) w &= (uint64_t{1} << bits) - 1;
        p_ += bits / 8;
        *v = Pack7(w);
        return true;
      }
      // Nine or ten bytes: the eighth carries bits 49..55, then one or two.
      uint64_t result = Pack7(w);
      const uint64_t b8 = p_[8];
      result |= (b8 & 0x7f) << 56;
      if (b8 < 0x80) {
        if (room < 9) return false;
        p_ += 9;
        *v = result;
        return true;
      }
      const uint64_t b9 = p_[9];
      if (room < 10 || b9 > 1) return false;  // the tenth byte may only carry bit 63
      p_ += 10;
      *v = result | (b9 << 63);
      return true;
    }
    const size_t limit = static_cast<size_t>(end_ - p_);
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

  // The low seven bits of each byte of `w`, packed: byte i's at bit 7i
  // (`w` read from memory in a little-endian machine's order).
  static_assert(std::endian::native == std::endian::little, "LongVarint reads words little-endian");
  static uint64_t Pack7(uint64_t w) {
    w &= 0x7f7f7f7f7f7f7f7full;
    w = (w & 0x007f007f007f007full) | ((w & 0x7f007f007f007f00ull) >> 1);
    w = (w & 0x00003fff00003fffull) | ((w & 0x3fff00003fff0000ull) >> 2);
    return (w & 0x000000000fffffffull) | ((w & 0x0fffffff00000000ull) >> 4);
  }

  // The next tag; false at a malformed tag, field 0, or a group (wire types
  // 3 and 4: the fast path takes none).
  [[gnu::always_inline]] bool Tag(uint32_t* field, int* wire_type) {
    uint64_t t;
    const uint8_t* start = p_;
    // protobuf reads a tag in at most 5 bytes and refuses a longer one, even
    // an overlong encoding of a small number (found by the fuzzer).
    if (!Varint(&t) || p_ - start > 5 || t > std::numeric_limits<uint32_t>::max()) return false;
    *field = static_cast<uint32_t>(t >> 3);
    *wire_type = static_cast<int>(t & 7);
    if (*field == 0) return false;
    return *wire_type == kVarint || *wire_type == kFixed64 || *wire_type == kLengthDelimited ||
           *wire_type == kFixed32;
  }

  [[gnu::always_inline]] bool Bytes(std::string_view* out) {
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
  const uint8_t* end_;         // of the message
  const uint8_t* buffer_end_;  // of the buffer it lies in
};

// Reads a varint field into `*out` (truncated to T like protobuf does), or
// refuses a known varint field sent with another wire type.
template <typename T>
[[gnu::always_inline]] inline bool ReadVarintField(Reader& r, int wire_type, T* out) {
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

[[gnu::always_inline]] inline bool ReadMessage(Reader& r, int wire_type, std::string_view* out) {
  return wire_type == kLengthDelimited && r.Bytes(out);
}

// proto3 strings must be UTF-8; protobuf refuses the parse otherwise, so the
// fast path leaves those to it for the same answer.
bool ReadString(Reader& r, int wire_type, std::string_view* out) {
  return ReadMessage(r, wire_type, out) && IsValidUtf8(*out);
}

// A singular message field: protobuf merges one given twice, which is not
// the fast path's shape.
bool ReadMessageOnce(Reader& r, int wire_type, bool* seen, std::string_view* out) {
  if (*seen) return false;
  *seen = true;
  return ReadMessage(r, wire_type, out);
}

// Calls field(reader, number, wire_type) for every field of the message
// `r` reads; `field` reads (or skips) the field's value and says whether the
// fast path takes it.
template <typename F>
bool ForEachField(Reader r, F&& field) {
  while (!r.done()) {
    uint32_t number;
    int wire_type;
    if (!r.Tag(&number, &wire_type) || !field(r, number, wire_type)) return false;
  }
  return true;
}

bool ParseBucket(Reader in, BucketView* b) {
  return ForEachField(in, [b](Reader& r, uint32_t f, int wt) {
    switch (f) {
      case 1:
        return ReadVarintField(r, wt, &b->index_);
      case 2:
        return ReadVarintField(r, wt, &b->count_);
      case 3:
        return ReadVarintField(r, wt, &b->sum_lo_);
      case 4:
        return ReadVarintField(r, wt, &b->sum_hi_);
      case 5:
        return ReadVarintField(r, wt, &b->sum_sq_lo_);
      case 6:
        return ReadVarintField(r, wt, &b->sum_sq_hi_);
      default:
        return r.Skip(wt);
    }
  });
}

bool ParsePlatform(Reader in, PlatformView* p) {
  return ForEachField(in, [p](Reader& r, uint32_t f, int wt) {
    switch (f) {
      case 1:
        return ReadVarintField(r, wt, &p->os_);
      case 2:
        return ReadVarintField(r, wt, &p->arch_);
      case 3:
        return ReadVarintField(r, wt, &p->cpu_vendor_);
      case 4:
        return ReadVarintField(r, wt, &p->cpu_family_);
      default:
        return r.Skip(wt);
    }
  });
}

bool ParseHistogram(Reader in, HistogramView* h, std::vector<BucketView>* buckets) {
  return ForEachField(in, [h, buckets](Reader& r, uint32_t f, int wt) {
    std::string_view sub;
    switch (f) {
      case 1:
        return ReadVarintField(r, wt, &h->zero_count_);
      case 2:
        if (!ReadMessage(r, wt, &sub)) return false;
        ++h->buckets_size_;
        return ParseBucket(r.Sub(sub), &buckets->emplace_back());
      case 3:
        return ReadVarintField(r, wt, &h->count_);
      case 4:
        return ReadVarintField(r, wt, &h->sum_lo_);
      case 5:
        return ReadVarintField(r, wt, &h->sum_hi_);
      case 6:
        return ReadVarintField(r, wt, &h->sum_sq_lo_);
      case 7:
        return ReadVarintField(r, wt, &h->sum_sq_hi_);
      case 8:
        return ReadVarintField(r, wt, &h->sum_sq_saturated_);
      case 9:
        return ReadVarintField(r, wt, &h->min_);
      case 10:
        return ReadVarintField(r, wt, &h->max_);
      default:
        return r.Skip(wt);
    }
  });
}

bool ParseApiKey(Reader in, ApiKeyView* k) {
  return ForEachField(in, [k](Reader& r, uint32_t f, int wt) {
    std::string_view sub;
    switch (f) {
      case 1:
        return ReadString(r, wt, &k->module_);
      case 2:
        return ReadString(r, wt, &k->module_version_);
      case 3:
        return ReadString(r, wt, &k->symbol_);
      case 4:
        return ReadVarintField(r, wt, &k->metric_);
      case 5:
        return ReadMessageOnce(r, wt, &k->has_platform_, &sub) &&
               ParsePlatform(r.Sub(sub), &k->platform_);
      default:
        return r.Skip(wt);
    }
  });
}

bool ParseRecord(Reader in, RecordView* rec, std::vector<BucketView>* buckets) {
  return ForEachField(in, [rec, buckets](Reader& r, uint32_t f, int wt) {
    std::string_view sub;
    switch (f) {
      case 1:
        return ReadMessageOnce(r, wt, &rec->has_key_, &sub) && ParseApiKey(r.Sub(sub), &rec->key_);
      case 2:
        return ReadMessageOnce(r, wt, &rec->has_histogram_, &sub) &&
               ParseHistogram(r.Sub(sub), &rec->histogram_, buckets);
      case 3:
        return ReadVarintField(r, wt, &rec->runs_);
      case 4:
        return ReadVarintField(r, wt, &rec->truncated_);
      case 5:
        return ReadVarintField(r, wt, &rec->resolution_ns_);
      case 6:
        return ReadMessage(r, wt, &rec->machines_);
      case 7:
        return ReadVarintField(r, wt, &rec->machine_count_);
      case 8:
        return ReadString(r, wt, &rec->suspect_);
      case 9:
        return ReadVarintField(r, wt, &rec->first_from_machine_);
      case 10:
        return ReadMessage(r, wt, &rec->day_machines_);
      case 11:
        return ReadVarintField(r, wt, &rec->first_day_);
      default:
        return r.Skip(wt);
    }
  });
}

// AgentCounters: nothing of it is used on ingest, but a known field with the
// wrong wire type is a rejection (wire_type), left to the fallback.
bool CheckCounters(Reader in) {
  return ForEachField(in, [](Reader& r, uint32_t f, int wt) {
    uint64_t ignored;
    return (f >= 1 && f <= 6) ? ReadVarintField(r, wt, &ignored) : r.Skip(wt);
  });
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
  machine_key_ = {};
  token_ = {};
  token_epoch_ = 0;
  window_start_unix_ms_ = 0;
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
  bool has_platform = false, has_counters = false;
  const bool ok = ForEachField(Reader(bytes), [&](Reader& r, uint32_t f, int wt) {
    std::string_view sub;
    switch (f) {
      case 1:
        return ReadVarintField(r, wt, &out->schema_version_);
      case 2:
        return ReadMessage(r, wt, &out->batch_id_);
      case 3:
        return ReadVarintField(r, wt, &out->created_unix_ms_);
      case 4:
        return ReadMessageOnce(r, wt, &has_platform, &sub) &&
               ParsePlatform(r.Sub(sub), &out->client_platform_);
      case 5:
        if (!ReadMessage(r, wt, &sub)) return false;
        out->bucket_first_.push_back(static_cast<int>(out->buckets_.size()));
        return ParseRecord(r.Sub(sub), &out->records_.emplace_back(), &out->buckets_);
      case 6:
        return ReadMessageOnce(r, wt, &has_counters, &sub) && CheckCounters(r.Sub(sub));
      case 7:
        return ReadMessage(r, wt, &out->machine_key_);
      case 8:
        return ReadMessage(r, wt, &out->token_);
      case 9:
        return ReadVarintField(r, wt, &out->token_epoch_);
      case 10:
        return ReadVarintField(r, wt, &out->window_start_unix_ms_);
      default:
        return r.Skip(wt);
    }
  });
  if (!ok) return false;
  out->LinkBuckets();
  return true;
}

bool ParseRecordViewFast(std::string_view bytes, RecordView* out,
                         std::vector<BucketView>* buckets) {
  *out = RecordView();
  buckets->clear();
  if (!ParseRecord(Reader(bytes), out, buckets)) return false;
  out->histogram_.buckets_ = buckets->data();
  return true;
}

void ViewBatchMessage(const wire::Batch& batch, BatchView* out) {
  out->Clear();
  out->schema_version_ = batch.schema_version();
  out->batch_id_ = batch.batch_id();
  out->created_unix_ms_ = batch.created_unix_ms();
  out->machine_key_ = batch.machine_key();
  out->token_ = batch.token();
  out->token_epoch_ = batch.token_epoch();
  out->window_start_unix_ms_ = batch.window_start_unix_ms();
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
    v.resolution_ns_ = r.resolution_ns();
    v.machines_ = r.machines();
    v.machine_count_ = r.machine_count();
    v.suspect_ = r.suspect();
    v.first_from_machine_ = r.first_from_machine();
    v.day_machines_ = r.day_machines();
    v.first_day_ = r.first_day();
    out->records_.push_back(v);
  }
  out->LinkBuckets();
}

std::string_view StorableBatchBody(std::string_view body, std::string* scratch) {
  // The kept fields are copied in runs, between the dropped ones.
  const auto dropped = [](uint32_t f) { return f == 7 || f == 8 || f == 9; };
  scratch->clear();
  const char* kept = body.data();
  Reader r(body);
  bool any = false;
  while (!r.done()) {
    const char* start = r.pos();
    uint32_t f;
    int wt;
    if (!r.Tag(&f, &wt) || !r.Skip(wt)) {
      // Not the fast path's shape: protobuf's answer.
      wire::Batch b;
      if (!b.ParseFromArray(body.data(), static_cast<int>(body.size()))) return {};
      b.clear_machine_key();
      b.clear_token();
      b.clear_token_epoch();
      *scratch = b.SerializeAsString();
      return *scratch;
    }
    if (dropped(f)) {
      scratch->append(kept, static_cast<size_t>(start - kept));
      kept = r.pos();
      any = true;
    }
  }
  if (!any) return body;
  scratch->append(kept, static_cast<size_t>(body.data() + body.size() - kept));
  return *scratch;
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
