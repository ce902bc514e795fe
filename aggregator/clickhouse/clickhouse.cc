#include "aggregator/clickhouse/clickhouse.h"

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

std::string SqlString(std::string_view s) {
  std::string out = "'";
  for (char c : s) {
    if (c == '\\' || c == '\'') out += '\\';
    out += c;
  }
  return out + "'";
}

StatusOr<std::vector<HttpsClientOptions>> ParseClickHouseServers(
    std::string_view urls, std::chrono::milliseconds timeout) {
  StatusOr<std::vector<std::vector<HttpsClientOptions>>> shards =
      ParseClickHouseShards(urls, timeout);
  if (!shards.ok()) return shards.status();
  std::vector<HttpsClientOptions> servers;
  for (const auto& shard : *shards) servers.insert(servers.end(), shard.begin(), shard.end());
  return servers;
}

Status ChOnAnyServer(const std::vector<HttpsClientOptions>& servers, size_t start,
                     const std::function<Status(ClickHouseClient&)>& fn, const bool* final) {
  Status last = Unavailable("no ClickHouse server");
  for (size_t i = 0; i < servers.size(); ++i) {
    ClickHouseClient ch(servers[(start + i) % servers.size()]);
    last = fn(ch);
    if (last.ok() || ch.last_error_code() != 0 || (final != nullptr && *final)) return last;
  }
  return last;
}

StatusOr<std::string> ChQueryAny(const std::vector<HttpsClientOptions>& servers, size_t start,
                                 const std::string& sql, const ClickHouseSettings& settings) {
  std::string answer;
  Status s = ChOnAnyServer(servers, start, [&](ClickHouseClient& ch) {
    StatusOr<std::string> r = ch.Query(sql, settings);
    if (!r.ok()) return r.status();
    answer = std::move(*r);
    return Status::Ok();
  });
  if (!s.ok()) return s;
  return answer;
}

std::string ChGlobalQuorum(size_t servers) { return servers > 1 ? "2" : "0"; }

namespace {

// RowBinary writers.
void U8(std::string* o, uint8_t v) { o->push_back(static_cast<char>(v)); }
void U16(std::string* o, uint16_t v) { o->append(reinterpret_cast<const char*>(&v), 2); }
void U32(std::string* o, uint32_t v) { o->append(reinterpret_cast<const char*>(&v), 4); }
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
template <typename K, typename P>
void Key(std::string* o, const K& k, const P& p) {
  Str(o, k.module());
  Str(o, k.symbol());
  Str(o, k.module_version());
  U8(o, static_cast<uint8_t>(k.metric()));
  U8(o, static_cast<uint8_t>(p.os()));
  U8(o, static_cast<uint8_t>(p.arch()));
  U8(o, static_cast<uint8_t>(p.cpu_vendor()));
  U8(o, static_cast<uint8_t>(p.cpu_family()));
}
void Key(std::string* o, const ApiKey& k) {
  Str(o, k.module);
  Str(o, k.symbol);
  Str(o, k.module_version);
  U8(o, static_cast<uint8_t>(k.metric));
  U8(o, static_cast<uint8_t>(k.platform.os));
  U8(o, static_cast<uint8_t>(k.platform.arch));
  U8(o, static_cast<uint8_t>(k.platform.cpu_vendor));
  U8(o, k.platform.cpu_family);
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

}  // namespace

std::string ChKeyColumnsDdl() {
  return "module String, symbol String, module_version String, metric UInt8, os UInt8,"
         " arch UInt8, cpu_vendor UInt8, cpu_family UInt8";
}

std::string BatchRows(const BatchView& batch, int32_t day, std::vector<size_t>* day_offsets) {
  std::string o;
  auto day_here = [&] {
    if (day_offsets != nullptr) day_offsets->push_back(o.size());
    U16(&o, static_cast<uint16_t>(day));  // Date: days since 1970-01-01
  };
  // The marker row: module '' (no real module is empty), no value. It is in
  // the same block as the records, so it is stored exactly when they are.
  Id16(&o, batch.batch_id());
  U32(&o, 0);  // seq
  day_here();
  for (int i = 0; i < 3; ++i) Str(&o, "");
  for (int i = 0; i < 5; ++i) U8(&o, 0);  // metric, os, arch, cpu_vendor, cpu_family
  Str(&o, "");                            // value
  const PlatformView& bp = batch.client_platform();
  uint32_t seq = 0;
  std::string value;
  for (const RecordView& r : batch.records()) {
    const ApiKeyView& k = r.key();
    Id16(&o, batch.batch_id());
    U32(&o, seq++);
    day_here();
    Key(&o, k, k.has_platform() ? k.platform() : bp);
    SparseAggregate one;
    one.AddRecord(r);
    value.clear();
    one.Encode(&value);
    Str(&o, value);
  }
  return o;
}

void SetRowsDay(std::string* rows, const std::vector<size_t>& day_offsets, int32_t day) {
  const uint16_t d = static_cast<uint16_t>(day);
  for (size_t at : day_offsets) std::memcpy(rows->data() + at, &d, 2);
}

void AppendDayRow(std::string* out, int32_t day, const ApiKey& key, std::string_view value) {
  U16(out, static_cast<uint16_t>(day));
  Key(out, key);
  Str(out, value);
}

void AppendMonthRow(std::string* out, int32_t month, const ApiKey& key, std::string_view value) {
  U32(out, static_cast<uint32_t>(month));
  Key(out, key);
  Str(out, value);
}

std::string EncodeValue(const ApiAggregate& a) {
  wire::Record r;
  HistogramToWire(a.histogram, r.mutable_histogram());
  r.set_runs(a.runs);
  if (a.truncated) r.set_truncated(true);
  if (a.resolution_ns != 0) r.set_resolution_ns(a.resolution_ns);
  SparseAggregate sum;
  sum.AddRecord(r);
  std::string out;
  sum.Encode(&out);
  return out;
}

std::string ChDedupRowsSql(const std::string& source, const std::string& dedup,
                           const std::string& where, const std::string& first_by,
                           const std::string& keep_if) {
  // LIMIT BY keeps one row of each copy's set (they are equal but for where
  // and when they were stored), the first in `first_by` order.
  const std::string cols = std::string(kChKeyColumns) + ", value";
  std::string inner = "SELECT " + cols + (keep_if.empty() ? "" : ", day") + " FROM " + source +
                      (where.empty() ? "" : " WHERE " + where) +
                      (first_by.empty() ? "" : " ORDER BY " + first_by) + " LIMIT 1 BY " + dedup;
  if (keep_if.empty()) return inner;
  return "SELECT " + cols + " FROM (" + inner + ") WHERE " + keep_if;
}

std::string ChOrderedRowsSql(const std::string& parts) {
  return "SELECT " + std::string(kChKeyColumns) + ", value FROM (" + parts + ") ORDER BY " +
         kChKeyColumns + " FORMAT RowBinary";
}

namespace {

// Bounds-checked RowBinary reading of one row; `more` turns true when the
// row goes past the bytes at hand.
class RowCursor {
 public:
  explicit RowCursor(std::string_view data) : d_(data) {}
  bool more = false;
  size_t pos() const { return p_; }

  bool U8(uint8_t* v) {
    if (!Need(1)) return false;
    *v = static_cast<uint8_t>(d_[p_++]);
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
  bool Str(std::string_view* s, size_t max) {
    uint64_t n;
    if (!VarUInt(&n) || n > max || !Need(n)) return false;
    *s = d_.substr(p_, n);
    p_ += n;
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

// A value is a record without its key: a few hundred bytes; far more is
// not a value.
constexpr size_t kMaxValueBytes = 1 << 20;

}  // namespace

int SumsReader::ReadRow() {
  RowCursor c(std::string_view(buffer_).substr(pos_));
  std::string_view module, symbol, version, value;
  uint8_t metric = 0, os = 0, arch = 0, vendor = 0, family = 0;
  const bool ok = c.Str(&module, kMaxModuleBytes) && c.Str(&symbol, kMaxSymbolBytes) &&
                  c.Str(&version, kMaxVersionBytes) && c.U8(&metric) && c.U8(&os) && c.U8(&arch) &&
                  c.U8(&vendor) && c.U8(&family) && c.Str(&value, kMaxValueBytes);
  if (!ok) return c.more ? 0 : -1;
  ApiKey k;
  k.module = module;
  k.symbol = symbol;
  k.module_version = version;
  // What ClickHouse holds was checked on the way in; a row that breaks the
  // key rules is not a row (an error message appended to the answer).
  if (!wire::Metric_IsValid(metric) || !wire::Os_IsValid(os) || !wire::Arch_IsValid(arch) ||
      !wire::CpuVendor_IsValid(vendor) || !KeyStringsOk(k)) {
    return -1;
  }
  k.metric = static_cast<wire::Metric>(metric);
  k.platform = {static_cast<wire::Os>(os), static_cast<wire::Arch>(arch),
                static_cast<wire::CpuVendor>(vendor), family};
  if (have_ && !(k == key_)) {
    Flush();
    if (stopped_) return 1;
  }
  if (!have_) {
    key_ = std::move(k);
    sum_ = SparseAggregate();
    have_ = true;
  }
  if (!sum_.AddEncoded(value)) return -1;
  pos_ += c.pos();
  ++rows_;
  return 1;
}

void SumsReader::Flush() {
  if (!have_) return;
  have_ = false;
  ApiAggregate a;
  a.key = std::move(key_);
  a.histogram = sum_.ToHistogram();
  a.runs = sum_.runs();
  a.truncated = sum_.truncated();
  a.resolution_ns = sum_.resolution_ns();
  if (!visit_(std::move(a))) stopped_ = true;
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
      status_ = Failure("ClickHouse's answer does not read as rows (" + std::to_string(rows_) +
                        " rows read)");
      return false;
    }
    break;  // r == 0: wait for more bytes
  }
  // The end of what was read stays at hand: an error message may begin in
  // bytes that still read as (the end of) a row.
  const size_t keep = std::min<size_t>(pos_, 512);
  buffer_.erase(0, pos_ - keep);
  pos_ = keep;
  return true;
}

Status SumsReader::Failure(const std::string& otherwise) const {
  std::string_view seen = buffer_;
  const size_t e = seen.find("DB::Exception");
  if (e != std::string_view::npos) {
    const size_t code = seen.rfind("Code:", e);
    return Unavailable("ClickHouse failed while answering: " +
                       std::string(seen.substr(code == std::string_view::npos ? e : code, 400)));
  }
  return DataLoss(otherwise);
}

Status SumsReader::Finish() {
  if (!status_.ok()) return status_;
  if (stopped_) return Status::Ok();
  if (pos_ != buffer_.size()) return Failure("ClickHouse's answer ends in the middle of a row");
  // An error message that happened to read as whole rows is still one.
  if (std::string_view(buffer_).find("DB::Exception") != std::string_view::npos) {
    return Failure("");
  }
  Flush();
  return Status::Ok();
}

void ChPutString(std::string* out, std::string_view s) { Str(out, s); }

bool ChReadString(std::string_view data, size_t* at, std::string* out) {
  if (*at > data.size()) return false;
  RowCursor c(data.substr(*at));
  std::string_view s;
  if (!c.Str(&s, data.size())) return false;
  out->assign(s.data(), s.size());
  *at += c.pos();
  return true;
}

}  // namespace fieldprof::aggregator
