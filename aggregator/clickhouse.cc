#include "aggregator/clickhouse.h"

#include <cstring>
#include <map>

#include "common/key_rules.h"
#include "common/options.h"
#include "common/validate.h"
#include "common/wire.h"

namespace fieldprof::aggregator {
namespace {

// "Code: 286, e.displayText() = ..." -> 286; 0 when absent.
int ErrorCodeOf(std::string_view body) {
  const size_t at = body.find("Code: ");
  if (at == std::string_view::npos) return 0;
  int code = 0;
  for (size_t i = at + 6; i < body.size() && body[i] >= '0' && body[i] <= '9'; ++i) {
    code = code * 10 + (body[i] - '0');
    if (code > 100000) return 0;
  }
  return code;
}

std::string Target(const std::string& query, const ClickHouseSettings& settings) {
  std::string t = "/?";
  for (const auto& [name, value] : settings) t += name + "=" + UrlEncode(value) + "&";
  if (!query.empty()) t += "query=" + UrlEncode(query);
  return t;
}

}  // namespace

Status ClickHouseClient::Check(const StatusOr<HttpReply>& r) {
  last_code_ = 0;
  if (!r.ok()) return Unavailable("ClickHouse: " + r.status().message());
  if (r->status != 200) {
    last_code_ = ErrorCodeOf(r->body);
    return Unavailable("ClickHouse answered " + std::to_string(r->status) + ": " +
                       r->body.substr(0, 500));
  }
  return Status::Ok();
}

Status ClickHouseClient::Execute(const std::string& sql, const ClickHouseSettings& settings) {
  return Query(sql, settings).status();
}

StatusOr<std::string> ClickHouseClient::Query(const std::string& sql,
                                              const ClickHouseSettings& settings) {
  StatusOr<HttpReply> r = http_.Post(Target("", settings), "text/plain; charset=utf-8", sql);
  FP_RETURN_IF_ERROR(Check(r));
  return std::move(r->body);
}

Status ClickHouseClient::QueryStream(const std::string& sql, const ClickHouseSettings& settings,
                                     const std::function<bool(std::string_view)>& on_data) {
  return Check(http_.RequestStreaming("POST", Target("", settings), "text/plain; charset=utf-8",
                                      sql, on_data));
}

Status ClickHouseClient::InsertRowBinary(const std::string& table, const std::string& data,
                                         const ClickHouseSettings& settings) {
  StatusOr<HttpReply> r = http_.Post(Target("INSERT INTO " + table + " FORMAT RowBinary", settings),
                                     "application/octet-stream", data);
  return Check(r);
}

StatusOr<std::vector<std::vector<HttpsClientOptions>>> ParseClickHouseShards(
    std::string_view urls, std::chrono::milliseconds timeout) {
  std::vector<std::vector<HttpsClientOptions>> shards;
  auto bad = [&](std::string_view why) {
    return InvalidArgument("clickhouse_url: " + std::string(why) + " in '" + std::string(urls) +
                           "' (want http://HOST:PORT, replicas joined by ',', shards by ';')");
  };
  size_t at = 0;
  while (at <= urls.size()) {
    const size_t semi = urls.find(';', at);
    std::string_view shard = urls.substr(at, semi == std::string_view::npos ? semi : semi - at);
    std::vector<HttpsClientOptions>& replicas = shards.emplace_back();
    size_t r = 0;
    while (r <= shard.size()) {
      const size_t comma = shard.find(',', r);
      std::string_view url =
          TrimSpace(shard.substr(r, comma == std::string_view::npos ? comma : comma - r));
      if (!url.starts_with("http://")) return bad("a server without http://");
      url.remove_prefix(7);
      while (!url.empty() && url.back() == '/') url.remove_suffix(1);
      const size_t colon = url.rfind(':');
      HttpsClientOptions o;
      o.tls = false;
      o.timeout = timeout;
      o.host = std::string(colon == std::string_view::npos ? url : url.substr(0, colon));
      long port = 8123;
      if (colon != std::string_view::npos) {
        const std::string digits(url.substr(colon + 1));
        char* end = nullptr;
        port = std::strtol(digits.c_str(), &end, 10);
        if (digits.empty() || *end != '\0') port = -1;
      }
      if (o.host.empty() || port <= 0 || port > 65535) return bad("a bad host or port");
      o.port = static_cast<uint16_t>(port);
      replicas.push_back(std::move(o));
      if (comma == std::string_view::npos) break;
      r = comma + 1;
    }
    if (semi == std::string_view::npos) break;
    at = semi + 1;
  }
  return shards;
}

std::array<uint64_t, 4> Limbs(uint128 v) {
  return {static_cast<uint64_t>(v & 0xffffffffu), static_cast<uint64_t>((v >> 32) & 0xffffffffu),
          static_cast<uint64_t>((v >> 64) & 0xffffffffu),
          static_cast<uint64_t>((v >> 96) & 0xffffffffu)};
}

bool JoinLimbSums(const std::array<uint64_t, 4>& sums, uint128* out) {
  // sum = s0 + s1 * 2^32 + s2 * 2^64 + s3 * 2^96, each s up to 2^64 - 1.
  uint128 v = sums[0];
  for (int i = 1; i < 4; ++i) {
    const uint128 part = static_cast<uint128>(sums[i]);
    const int shift = 32 * i;
    if (shift >= 64 && (part >> (128 - shift)) != 0) return false;  // past 2^128
    const uint128 add = part << shift;
    if (kUint128Max - v < add) return false;
    v += add;
  }
  *out = v;
  return true;
}

std::string SqlString(std::string_view s) {
  std::string out = "'";
  for (char c : s) {
    if (c == '\\' || c == '\'') out += '\\';
    out += c;
  }
  return out + "'";
}

namespace {

// RowBinary writers.
void U8(std::string* o, uint8_t v) { o->push_back(static_cast<char>(v)); }
void U16(std::string* o, uint16_t v) { o->append(reinterpret_cast<const char*>(&v), 2); }
void U32(std::string* o, uint32_t v) { o->append(reinterpret_cast<const char*>(&v), 4); }
void U64(std::string* o, uint64_t v) { o->append(reinterpret_cast<const char*>(&v), 8); }
void VarUInt(std::string* o, uint64_t n) {
  while (n >= 0x80) {
    U8(o, static_cast<uint8_t>(n | 0x80));
    n >>= 7;
  }
  U8(o, static_cast<uint8_t>(n));
}
void Str(std::string* o, std::string_view s) {
  VarUInt(o, s.size());
  o->append(s.data(), s.size());
}
void Id16(std::string* o, std::string_view id) {
  char b[16] = {};
  std::memcpy(b, id.data(), std::min<size_t>(16, id.size()));
  o->append(b, 16);
}

// The key-string rules (common/key_rules.h) that every stored key met.
bool KeyStringsOk(const ApiKey& k) {
  namespace kr = key_rules;
  const std::string& m = k.module;
  const std::string& v = k.module_version;
  const std::string& s = k.symbol;
  return !m.empty() && kr::FirstBadModuleChar(m.data(), m.size()) == m.size() &&
         !kr::IsDotName(m.data(), m.size()) &&
         kr::FirstBadVersionChar(v.data(), v.size()) == v.size() && !s.empty() &&
         kr::FirstBadSymbolChar(s.data(), s.size()) == s.size();
}

uint128 Join(uint64_t lo, uint64_t hi) { return (static_cast<uint128>(hi) << 64) | lo; }

// The value columns: scalars, then maps (a bucket-index array and a value
// array each) of the bucket counts and the limbs of the sums and squares.
const char* const kScalars[] = {"runs", "truncated", "resolution_ns",   "zero_count",
                                "min",  "max",       "sum_sq_saturated"};
const char* const kMaps[] = {"count", "sum0", "sum1", "sum2", "sum3", "sq0", "sq1", "sq2", "sq3"};
constexpr int kNumMaps = 9;

}  // namespace

std::string ChKeyColumnsDdl() {
  return "module String, symbol String, module_version String, metric UInt8, os UInt8,"
         " arch UInt8, cpu_vendor UInt8, cpu_family UInt8";
}

std::string ChValueColumnsDdl(bool raw) {
  std::string d =
      "runs UInt64, truncated UInt8, resolution_ns UInt64, zero_count UInt64, min UInt64,"
      " max UInt64, sum_sq_saturated UInt8";
  for (const char* m : kMaps) {
    // A raw row's limbs are 32-bit values; sums of them need 64 bits.
    const bool limb = raw && std::string_view(m) != "count";
    d += std::string(", ") + m + "_k Array(UInt8), " + m + "_v Array(" +
         (limb ? "UInt32" : "UInt64") + ")";
  }
  return d;
}

std::string ChValueColumnNames() {
  std::string n;
  for (const char* c : kScalars) n += std::string(n.empty() ? "" : ", ") + c;
  for (const char* m : kMaps) n += std::string(", ") + m + "_k, " + m + "_v";
  return n;
}

std::string ChValuesFromPartialsSql() {
  std::string v = "p_runs, p_truncated, p_resolution_ns, p_zero_count, p_min, p_max, p_sat";
  for (const char* m : kMaps) v += std::string(", p_") + m + ".1, p_" + m + ".2";
  return v;
}

std::string BatchRows(const BatchView& batch, int32_t day, std::vector<size_t>* day_offsets) {
  std::string o;
  auto day_here = [&] {
    if (day_offsets != nullptr) day_offsets->push_back(o.size());
    U16(&o, static_cast<uint16_t>(day));  // Date: days since 1970-01-01
  };
  // The marker row: module '' (no real module is empty), zero values. It is
  // in the same block as the records, so it is stored exactly when they are.
  Id16(&o, batch.batch_id());
  U32(&o, 0);  // seq
  day_here();
  for (int i = 0; i < 3; ++i) Str(&o, "");
  for (int i = 0; i < 5; ++i) U8(&o, 0);  // metric, os, arch, cpu_vendor, cpu_family
  U64(&o, 0);                             // runs
  U8(&o, 0);                              // truncated
  U64(&o, 0);                             // resolution_ns
  U64(&o, 0);                             // zero_count
  U64(&o, 0);                             // min
  U64(&o, 0);                             // max
  U8(&o, 0);                              // sum_sq_saturated
  for (int i = 0; i < 2 * kNumMaps; ++i) VarUInt(&o, 0);  // empty arrays
  const PlatformView& bp = batch.client_platform();
  uint32_t seq = 0;
  for (const RecordView& r : batch.records()) {
    const ApiKeyView& k = r.key();
    const PlatformView& p = k.has_platform() ? k.platform() : bp;
    const HistogramView& h = r.histogram();
    Id16(&o, batch.batch_id());
    U32(&o, seq++);  // a batch may hold one key twice: both count
    day_here();
    Str(&o, k.module());
    Str(&o, k.symbol());
    Str(&o, k.module_version());
    U8(&o, static_cast<uint8_t>(k.metric()));
    U8(&o, static_cast<uint8_t>(p.os()));
    U8(&o, static_cast<uint8_t>(p.arch()));
    U8(&o, static_cast<uint8_t>(p.cpu_vendor()));
    U8(&o, static_cast<uint8_t>(p.cpu_family()));
    U64(&o, r.runs());
    U8(&o, r.truncated() ? 1 : 0);
    U64(&o, r.resolution_ns());
    U64(&o, h.zero_count());
    U64(&o, h.min());
    U64(&o, h.max());
    U8(&o, h.sum_sq_saturated() ? 1 : 0);
    // Each map: the bucket indexes, then the values (arrays: a varint
    // length, then the elements).
    const uint64_t n = static_cast<uint64_t>(h.buckets_size());
    auto indexes = [&] {
      VarUInt(&o, n);
      for (const BucketView& b : h.buckets()) U8(&o, static_cast<uint8_t>(b.index()));
      VarUInt(&o, n);
    };
    indexes();
    for (const BucketView& b : h.buckets()) U64(&o, b.count());
    for (int i = 0; i < 4; ++i) {
      indexes();
      for (const BucketView& b : h.buckets()) {
        U32(&o, static_cast<uint32_t>(Limbs(Join(b.sum_lo(), b.sum_hi()))[i]));
      }
    }
    for (int i = 0; i < 4; ++i) {
      indexes();
      for (const BucketView& b : h.buckets()) {
        U32(&o, static_cast<uint32_t>(Limbs(Join(b.sum_sq_lo(), b.sum_sq_hi()))[i]));
      }
    }
  }
  return o;
}

void SetRowsDay(std::string* rows, const std::vector<size_t>& day_offsets, int32_t day) {
  const uint16_t d = static_cast<uint16_t>(day);
  for (size_t at : day_offsets) std::memcpy(rows->data() + at, &d, 2);
}

std::string ChDedupSumsSql(const std::string& source, const std::string& dedup,
                           const std::string& where, const std::string& first_by,
                           const std::string& keep_if) {
  // Inner: one row per `dedup` value, whatever number of copies (they are
  // equal but for where and when they were stored): LIMIT BY keeps the
  // first in `first_by` order. (Copies picked with any() in a GROUP BY
  // read ten times slower on 18.16: its array states go through Fields.)
  std::string inner = "SELECT * FROM " + source + (where.empty() ? "" : " WHERE " + where) +
                      (first_by.empty() ? "" : " ORDER BY " + first_by) + " LIMIT 1 BY " + dedup;
  if (!keep_if.empty()) inner = "SELECT * FROM (" + inner + ") WHERE " + keep_if;
  // Outer: the partial sums per key; each map summed per bucket index
  // (sumMap, in 64 bits: a raw row's limbs are UInt32, and sumMap sums in
  // its input's type).
  std::string sql = "SELECT " + std::string(kChKeyColumns) +
                    ", sum(runs) AS p_runs, max(truncated) AS p_truncated,"
                    " max(resolution_ns) AS p_resolution_ns, sum(zero_count) AS p_zero_count,"
                    " min(min) AS p_min, max(max) AS p_max, max(sum_sq_saturated) AS p_sat";
  for (const char* m : kMaps) {
    sql += std::string(", sumMap(") + m + "_k, CAST(" + m + "_v AS Array(UInt64))) AS p_" + m;
  }
  return sql + " FROM (" + inner + ") GROUP BY " + kChKeyColumns;
}

std::string ChFinalSumsSql(const std::string& parts) {
  std::string sql = "SELECT " + std::string(kChKeyColumns) +
                    ", sum(p_runs), max(p_truncated), max(p_resolution_ns), sum(p_zero_count),"
                    " min(p_min), max(p_max), max(p_sat)";
  for (const char* m : kMaps) sql += std::string(", sumMap(p_") + m + ".1, p_" + m + ".2)";
  return sql + " FROM (" + parts + ") GROUP BY " + kChKeyColumns + " ORDER BY " + kChKeyColumns +
         " FORMAT RowBinary";
}

namespace {

// Bounds-checked RowBinary reading of one row; `more` turns true when the
// row goes past the bytes at hand.
class RowCursor {
 public:
  RowCursor(std::string_view data) : d_(data) {}
  bool more = false;
  size_t pos() const { return p_; }

  bool U8(uint8_t* v) {
    if (!Need(1)) return false;
    *v = static_cast<uint8_t>(d_[p_++]);
    return true;
  }
  bool U64(uint64_t* v) {
    if (!Need(8)) return false;
    std::memcpy(v, d_.data() + p_, 8);
    p_ += 8;
    return true;
  }
  bool VarUInt(uint64_t* v) {
    *v = 0;
    for (int shift = 0; shift < 64; shift += 7) {
      uint8_t b;
      if (!U8(&b)) return false;
      *v |= static_cast<uint64_t>(b & 0x7f) << shift;
      if ((b & 0x80) == 0) return true;
    }
    return false;
  }
  bool Str(std::string* s, size_t max) {
    uint64_t n;
    if (!VarUInt(&n)) return false;
    if (n > max) return false;
    if (!Need(n)) return false;
    s->assign(d_.data() + p_, n);
    p_ += n;
    return true;
  }
  // An Array(UInt8) and an Array(UInt64) (a sumMap's tuple).
  bool Map(std::vector<uint8_t>* keys, std::vector<uint64_t>* values) {
    uint64_t n;
    if (!VarUInt(&n) || n > 64) return false;
    keys->resize(n);
    for (uint64_t i = 0; i < n; ++i) {
      if (!U8(&(*keys)[i])) return false;
    }
    uint64_t m;
    if (!VarUInt(&m) || m != n) return false;
    values->resize(n);
    for (uint64_t i = 0; i < n; ++i) {
      if (!U64(&(*values)[i])) return false;
    }
    return true;
  }

 private:
  bool Need(uint64_t n) {
    if (d_.size() - p_ < n) {
      more = true;
      return false;
    }
    return true;
  }
  std::string_view d_;
  size_t p_ = 0;
};

}  // namespace

int SumsReader::ReadRow() {
  RowCursor c(std::string_view(buffer_).substr(pos_));
  ApiAggregate a;
  uint8_t metric, os, arch, vendor, family, truncated, sat;
  uint64_t zero_count, min, max;
  bool ok = c.Str(&a.key.module, kMaxModuleBytes) && c.Str(&a.key.symbol, kMaxSymbolBytes) &&
            c.Str(&a.key.module_version, kMaxVersionBytes) && c.U8(&metric) && c.U8(&os) &&
            c.U8(&arch) && c.U8(&vendor) && c.U8(&family) && c.U64(&a.runs) && c.U8(&truncated) &&
            c.U64(&a.resolution_ns) && c.U64(&zero_count) && c.U64(&min) && c.U64(&max) &&
            c.U8(&sat);
  std::vector<uint8_t> keys[kNumMaps];
  std::vector<uint64_t> values[kNumMaps];
  for (int i = 0; ok && i < kNumMaps; ++i) ok = c.Map(&keys[i], &values[i]);
  if (!ok) return c.more ? 0 : -1;
  // What ClickHouse holds was checked on the way in; a row that breaks the
  // key rules is not a row (an error message appended to the answer).
  if (!wire::Metric_IsValid(metric) || !wire::Os_IsValid(os) || !wire::Arch_IsValid(arch) ||
      !wire::CpuVendor_IsValid(vendor) || truncated > 1 || sat > 1 || !KeyStringsOk(a.key)) {
    return -1;
  }
  a.key.metric = static_cast<wire::Metric>(metric);
  a.key.platform = {static_cast<wire::Os>(os), static_cast<wire::Arch>(arch),
                    static_cast<wire::CpuVendor>(vendor), family};
  a.truncated = truncated != 0;
  Histogram h;
  h.SetZeroCount(zero_count);
  bool saturated = sat != 0;
  std::map<int, HistogramBucket> buckets;
  std::map<int, std::array<uint64_t, 4>> sums, sqs;
  for (size_t i = 0; i < keys[0].size(); ++i) {
    if (keys[0][i] >= kNumBuckets) return -1;
    buckets[keys[0][i]].count = values[0][i];
  }
  for (int part = 1; part < kNumMaps; ++part) {
    for (size_t i = 0; i < keys[part].size(); ++i) {
      // sumMap leaves out sums of 0: absent limbs are 0.
      (part <= 4 ? sums : sqs)[keys[part][i]][(part - 1) % 4] = values[part][i];
    }
  }
  for (auto& [i, b] : buckets) {
    if (!JoinLimbSums(sums[i], &b.sum)) {
      status_ = DataLoss("a bucket sum past 128 bits in ClickHouse's answer");
      return -1;
    }
    if (!JoinLimbSums(sqs[i], &b.sum_sq)) {
      b.sum_sq = kUint128Max;  // saturates, as the merge operator does
      saturated = true;
    }
    h.SetBucket(i, b);
  }
  if (saturated) h.MarkSumSqSaturated();
  h.SetMinMax(min, max);
  a.histogram = h;
  pos_ += c.pos();
  ++rows_;
  if (!visit_(std::move(a))) stopped_ = true;
  return 1;
}

bool SumsReader::Feed(std::string_view piece) {
  if (stopped_ || !status_.ok()) return false;
  buffer_.append(piece);
  for (;;) {
    const int r = ReadRow();
    if (r == 1) {
      if (stopped_) return false;
      continue;
    }
    if (r == -1) {
      if (status_.ok()) {
        std::string_view rest = std::string_view(buffer_).substr(pos_);
        const size_t e = rest.find("DB::Exception");
        status_ = e != std::string_view::npos
                      ? Unavailable("ClickHouse failed while answering: " +
                                    std::string(rest.substr(e, 400)))
                      : DataLoss("ClickHouse's answer does not read as rows (at byte " +
                                 std::to_string(pos_) + " of the last piece)");
      }
      return false;
    }
    break;  // r == 0: wait for more bytes
  }
  buffer_.erase(0, pos_);
  pos_ = 0;
  return true;
}

Status SumsReader::Finish() {
  if (!status_.ok()) return status_;
  if (stopped_) return Status::Ok();
  if (pos_ != buffer_.size()) {
    std::string_view rest = std::string_view(buffer_).substr(pos_);
    const size_t e = rest.find("Code:");
    if (e != std::string_view::npos) {
      return Unavailable("ClickHouse failed while answering: " + std::string(rest.substr(e, 400)));
    }
    return DataLoss("ClickHouse's answer ends in the middle of a row");
  }
  return Status::Ok();
}

}  // namespace fieldprof::aggregator
