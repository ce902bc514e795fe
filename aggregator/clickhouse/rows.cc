#include "aggregator/clickhouse/rows.h"

#include <cstring>
#include <optional>

#include "aggregator/clickhouse/row_binary.h"
#include "common/wire/api_key.h"
#include "common/wire/key_rules.h"
#include "common/wire/validate.h"
#include "common/wire/wire.h"

namespace fieldprof::aggregator {
namespace {

using rowbinary::PutFixed;
using rowbinary::PutId16;
using rowbinary::PutString;

template <typename K, typename P>
void PutKey(std::string* o, const K& k, const P& p) {
  PutString(o, k.module());
  PutString(o, k.symbol());
  PutString(o, k.module_version());
  PutFixed<uint8_t>(o, static_cast<uint8_t>(k.metric()));
  PutFixed<uint8_t>(o, static_cast<uint8_t>(p.os()));
  PutFixed<uint8_t>(o, static_cast<uint8_t>(p.arch()));
  PutFixed<uint8_t>(o, static_cast<uint8_t>(p.cpu_vendor()));
  PutFixed<uint8_t>(o, static_cast<uint8_t>(p.cpu_family()));
}
void PutKey(std::string* o, const ApiKey& k) {
  PutString(o, k.module);
  PutString(o, k.symbol);
  PutString(o, k.module_version);
  PutFixed<uint8_t>(o, static_cast<uint8_t>(k.metric));
  PutFixed<uint8_t>(o, static_cast<uint8_t>(k.platform.os));
  PutFixed<uint8_t>(o, static_cast<uint8_t>(k.platform.arch));
  PutFixed<uint8_t>(o, static_cast<uint8_t>(k.platform.cpu_vendor));
  PutFixed<uint8_t>(o, k.platform.cpu_family);
}

// The key-string rules (common/wire/key_rules.h) that every stored key met.
// `metric` as read (the key's is set after): a stack series' symbol is
// frames (key_rules.h StackSymbolOk).
bool KeyStringsOk(const ApiKey& k, uint8_t metric) {
  namespace kr = key_rules;
  const std::string& m = k.module;
  const std::string& v = k.module_version;
  const std::string& s = k.symbol;
  return !m.empty() && kr::FirstBadModuleChar(m.data(), m.size()) == m.size() &&
         !kr::IsDotName(m.data(), m.size()) &&
         kr::FirstBadVersionChar(v.data(), v.size()) == v.size() && !s.empty() &&
         (metric == wire::METRIC_STACK_CPU_NS
              ? kr::StackSymbolOk(s.data(), s.size())
              : kr::FirstBadSymbolChar(s.data(), s.size()) == s.size());
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
    PutFixed<uint16_t>(&o, static_cast<uint16_t>(day));  // Date: days since 1970-01-01
  };
  // The marker row: module '' (no real module is empty), no value. It is in
  // the same block as the records, so it is stored exactly when they are.
  PutId16(&o, batch.batch_id());
  PutFixed<uint32_t>(&o, 0);  // seq
  day_here();
  for (int i = 0; i < 3; ++i) PutString(&o, "");
  for (int i = 0; i < 5; ++i) PutFixed<uint8_t>(&o, 0);  // metric, os, arch, cpu_vendor, cpu_family
  PutString(&o, "");                                     // value
  const PlatformView& bp = batch.client_platform();
  uint32_t seq = 0;
  std::string value;
  std::optional<MachineSecret> machine;
  if (!batch.machine_key().empty()) machine = MachineSecretOf(batch.machine_key());
  std::string series;
  for (const RecordView& r : batch.records()) {
    const ApiKeyView& k = r.key();
    PutId16(&o, batch.batch_id());
    PutFixed<uint32_t>(&o, seq++);
    day_here();
    PutKey(&o, k, k.has_platform() ? k.platform() : bp);
    SparseAggregate one;
    one.AddRecord(r);
    if (machine) {
      series.clear();
      AppendWireApiKey(k, bp, &series);
      one.AddMachineOf(&*machine, r, series);
    }
    value.clear();
    one.Encode(&value);
    PutString(&o, value);
  }
  return o;
}

void SetRowsDay(std::string* rows, const std::vector<size_t>& day_offsets, int32_t day) {
  const uint16_t d = static_cast<uint16_t>(day);
  for (size_t at : day_offsets) std::memcpy(rows->data() + at, &d, 2);
}

void AppendDayRow(std::string* out, int32_t day, const ApiKey& key, std::string_view value) {
  PutFixed<uint16_t>(out, static_cast<uint16_t>(day));
  PutKey(out, key);
  PutString(out, value);
}

void AppendMonthRow(std::string* out, int32_t month, const ApiKey& key, std::string_view value) {
  PutFixed<uint32_t>(out, static_cast<uint32_t>(month));
  PutKey(out, key);
  PutString(out, value);
}

std::string EncodeValue(const ApiAggregate& a) {
  wire::Record r;
  HistogramToWire(a.histogram, r.mutable_histogram());
  r.set_runs(a.runs);
  if (a.truncated) r.set_truncated(true);
  if (a.resolution_ns != 0) r.set_resolution_ns(a.resolution_ns);
  SparseAggregate sum;
  sum.AddRecord(r);
  sum.AddMachines(a.machines);
  sum.AddDayMachines(a.day_machines);
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

// A value is a record without its key: a few hundred bytes; far more is
// not a value.
constexpr size_t kMaxValueBytes = 1 << 20;

}  // namespace

int SumsReader::ReadRow() {
  rowbinary::Reader c(std::string_view(buffer_).substr(pos_));
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
      !wire::CpuVendor_IsValid(vendor) || !KeyStringsOk(k, metric)) {
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
  a.machines = sum_.machines();
  a.day_machines = sum_.day_machines();
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

}  // namespace fieldprof::aggregator
