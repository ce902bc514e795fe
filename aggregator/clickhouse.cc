#include "aggregator/clickhouse.h"

#include <cstring>
#include <map>
#include <nlohmann/json.hpp>

#include "common/https_client.h"

namespace fieldprof::aggregator {

Status ClickHouseClient::Execute(const std::string& sql) { return Query(sql).status(); }

StatusOr<std::string> ClickHouseClient::Query(const std::string& sql) {
  StatusOr<HttpReply> r = http_.Post("/", "text/plain; charset=utf-8", sql);
  if (!r.ok()) return Unavailable("ClickHouse: " + r.status().message());
  if (r->status != 200) {
    return Unavailable("ClickHouse answered " + std::to_string(r->status) + ": " +
                       r->body.substr(0, 500));
  }
  return std::move(r->body);
}

Status ClickHouseClient::InsertRowBinary(const std::string& table, const std::string& data) {
  StatusOr<HttpReply> r =
      http_.Post("/?query=" + UrlEncode("INSERT INTO " + table + " FORMAT RowBinary"),
                 "application/octet-stream", data);
  if (!r.ok()) return Unavailable("ClickHouse: " + r.status().message());
  if (r->status != 200) {
    return Unavailable("ClickHouse answered " + std::to_string(r->status) + ": " +
                       r->body.substr(0, 500));
  }
  return Status::Ok();
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

namespace {

const char* const kKeyColumns =
    "module, module_version, symbol, metric, os, arch, cpu_vendor, cpu_family";

// RowBinary writers.
void U8(std::string* o, uint8_t v) { o->push_back(static_cast<char>(v)); }
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

uint128 Join(uint64_t lo, uint64_t hi) { return (static_cast<uint128>(hi) << 64) | lo; }

}  // namespace

std::string RawRowsTableSql(const std::string& table) {
  std::string sql = "CREATE TABLE IF NOT EXISTS " + table +
                    " (batch_id FixedString(16), day UInt32, module String, module_version String,"
                    " symbol String, metric UInt8, os UInt8, arch UInt8, cpu_vendor UInt8,"
                    " cpu_family UInt8, runs UInt64, truncated UInt8, resolution_ns UInt64,"
                    " zero_count UInt64, min UInt64, max UInt64, sum_sq_saturated UInt8,"
                    " b_index Array(UInt8), b_count Array(UInt64)";
  for (int i = 0; i < 4; ++i) sql += ", b_sum" + std::to_string(i) + " Array(UInt64)";
  for (int i = 0; i < 4; ++i) sql += ", b_sq" + std::to_string(i) + " Array(UInt64)";
  sql +=
      ") ENGINE = MergeTree PARTITION BY day ORDER BY (batch_id, " + std::string(kKeyColumns) + ")";
  return sql;
}

std::string BatchRows(const BatchView& batch, int32_t day) {
  std::string o;
  const PlatformView& bp = batch.client_platform();
  char id[16] = {};
  std::memcpy(id, batch.batch_id().data(), std::min<size_t>(16, batch.batch_id().size()));
  for (const RecordView& r : batch.records()) {
    const ApiKeyView& k = r.key();
    const PlatformView& p = k.has_platform() ? k.platform() : bp;
    const HistogramView& h = r.histogram();
    o.append(id, 16);
    U32(&o, static_cast<uint32_t>(day));
    Str(&o, k.module());
    Str(&o, k.module_version());
    Str(&o, k.symbol());
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
    // Arrays: a varint length, then the elements.
    auto array = [&](auto value) {
      VarUInt(&o, static_cast<uint64_t>(h.buckets_size()));
      for (const BucketView& b : h.buckets()) value(b);
    };
    array([&](const BucketView& b) { U8(&o, static_cast<uint8_t>(b.index())); });
    array([&](const BucketView& b) { U64(&o, b.count()); });
    for (int i = 0; i < 4; ++i) {
      array([&](const BucketView& b) { U64(&o, Limbs(Join(b.sum_lo(), b.sum_hi()))[i]); });
    }
    for (int i = 0; i < 4; ++i) {
      array([&](const BucketView& b) { U64(&o, Limbs(Join(b.sum_sq_lo(), b.sum_sq_hi()))[i]); });
    }
  }
  return o;
}

std::string SqlString(std::string_view s) {
  std::string out = "'";
  for (char c : s) {
    if (c == '\\' || c == '\'') out += '\\';
    out += c;
  }
  return out + "'";
}

StatusOr<std::vector<ApiAggregate>> ReadSums(ClickHouseClient& ch, const std::string& table,
                                             int32_t first_day, int32_t last_day,
                                             const std::string& where) {
  // Inner: one row per (batch, key), whatever number of copies. Outer: the
  // sums per key; bucket columns summed per bucket index (sumMap).
  std::string inner = "SELECT batch_id, " + std::string(kKeyColumns) +
                      ", any(runs) AS runs, any(truncated) AS truncated,"
                      " any(resolution_ns) AS resolution_ns, any(zero_count) AS zero_count,"
                      " any(min) AS min, any(max) AS max, any(sum_sq_saturated) AS sat,"
                      " any(b_index) AS bi, any(b_count) AS bc";
  for (int i = 0; i < 4; ++i) {
    inner += ", any(b_sum" + std::to_string(i) + ") AS bs" + std::to_string(i);
    inner += ", any(b_sq" + std::to_string(i) + ") AS bq" + std::to_string(i);
  }
  inner += " FROM " + table + " WHERE day >= " + std::to_string(first_day) +
           " AND day <= " + std::to_string(last_day) +
           (where.empty() ? "" : " AND (" + where + ")") + " GROUP BY batch_id, " + kKeyColumns;
  std::string sql = "SELECT " + std::string(kKeyColumns) +
                    ", sum(runs), max(truncated), max(resolution_ns), sum(zero_count),"
                    " min(min), max(max), max(sat), sumMap(bi, bc)";
  for (int i = 0; i < 4; ++i) sql += ", sumMap(bi, bs" + std::to_string(i) + ")";
  for (int i = 0; i < 4; ++i) sql += ", sumMap(bi, bq" + std::to_string(i) + ")";
  sql += " FROM (" + inner + ") GROUP BY " + kKeyColumns + " ORDER BY " + kKeyColumns +
         " FORMAT JSONCompact";
  StatusOr<std::string> body = ch.Query(sql);
  if (!body.ok()) return body.status();
  // JSONCompact: {"data": [[...], ...]}, 64-bit integers as strings.
  const nlohmann::json j = nlohmann::json::parse(*body, nullptr, false);
  if (j.is_discarded() || !j.contains("data")) return DataLoss("ClickHouse's answer is not JSON");
  std::vector<ApiAggregate> out;
  try {
    auto u = [](const nlohmann::json& v) -> uint64_t {
      return v.is_string() ? std::stoull(v.get<std::string>()) : v.get<uint64_t>();
    };
    for (const nlohmann::json& row : j.at("data")) {
      ApiAggregate a;
      a.key.module = row.at(0).get<std::string>();
      a.key.module_version = row.at(1).get<std::string>();
      a.key.symbol = row.at(2).get<std::string>();
      a.key.metric = static_cast<wire::Metric>(u(row.at(3)));
      a.key.platform = {static_cast<wire::Os>(u(row.at(4))), static_cast<wire::Arch>(u(row.at(5))),
                        static_cast<wire::CpuVendor>(u(row.at(6))),
                        static_cast<uint8_t>(u(row.at(7)))};
      a.runs = u(row.at(8));
      a.truncated = u(row.at(9)) != 0;
      a.resolution_ns = u(row.at(10));
      Histogram h;
      h.SetZeroCount(u(row.at(11)));
      bool saturated = u(row.at(14)) != 0;
      // sumMap: [[indexes], [sums]], per column: counts, 4 sum limbs, 4 square limbs.
      std::map<uint64_t, HistogramBucket> buckets;
      std::map<uint64_t, std::array<uint64_t, 4>> sums, sqs;
      const nlohmann::json& counts = row.at(15);
      for (size_t i = 0; i < counts.at(0).size(); ++i) {
        buckets[u(counts.at(0).at(i))].count = u(counts.at(1).at(i));
      }
      for (int part = 0; part < 8; ++part) {
        const nlohmann::json& m = row.at(16 + static_cast<size_t>(part));
        for (size_t i = 0; i < m.at(0).size(); ++i) {
          (part < 4 ? sums : sqs)[u(m.at(0).at(i))][part % 4] = u(m.at(1).at(i));
        }
      }
      for (auto& [i, b] : buckets) {
        if (i >= static_cast<uint64_t>(kNumBuckets)) return DataLoss("a bucket index out of range");
        if (!JoinLimbSums(sums[i], &b.sum)) return DataLoss("a bucket sum past 128 bits");
        if (!JoinLimbSums(sqs[i], &b.sum_sq)) {
          b.sum_sq = kUint128Max;  // saturates, as the merge operator does
          saturated = true;
        }
        h.SetBucket(static_cast<int>(i), b);
      }
      if (saturated) h.MarkSumSqSaturated();
      h.SetMinMax(u(row.at(12)), u(row.at(13)));
      a.histogram = h;
      out.push_back(std::move(a));
    }
  } catch (const std::exception& e) {
    return DataLoss(std::string("ClickHouse's answer does not read: ") + e.what());
  }
  return out;
}

}  // namespace fieldprof::aggregator
