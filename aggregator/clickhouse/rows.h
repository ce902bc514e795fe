// The rows and SQL of the ClickHouse store's tables (store_clickhouse.h;
// docs/scale-out.md).
//
// A row holds a series' key in columns (the tables are sorted by them) and
// its value as one String: the RocksDB store's value format
// (store/aggregate_value.h, a wire::Record without its key). ClickHouse
// keeps, sorts, replicates and deduplicates the rows; the aggregator adds
// values up, exactly, in 128 bits (ClickHouse 18.16 has no 128-bit
// integers, and its sumMap over bucket arrays read ten times slower than
// this).
#ifndef FIELDPROF_AGGREGATOR_CLICKHOUSE_ROWS_H_
#define FIELDPROF_AGGREGATOR_CLICKHOUSE_ROWS_H_

#include <cstdint>
#include <functional>
#include <string>
#include <string_view>
#include <vector>

#include "aggregator/store/aggregate_value.h"
#include "aggregator/store/store.h"
#include "common/base/status.h"
#include "common/wire/batch_view.h"

namespace fieldprof::aggregator {

// The key columns in key order (common/wire/api_key.h EncodeApiKey's order),
// and their definitions for CREATE TABLE.
inline constexpr const char* kChKeyColumns =
    "module, symbol, module_version, metric, os, arch, cpu_vendor, cpu_family";
std::string ChKeyColumnsDdl();

// The rows of one batch for the raw rows table (batch_id, seq, day, key,
// value), in RowBinary: first the batch's marker row (module '', no
// value), then one row per record in the batch's order, seq counting them
// (a batch may hold a key twice, and both records count). The same batch
// gives the same bytes. `day_offsets` (may be null) gets where each row's
// day is, for SetRowsDay.
std::string BatchRows(const BatchView& batch, int32_t day,
                      std::vector<size_t>* day_offsets = nullptr);
void SetRowsDay(std::string* rows, const std::vector<size_t>& day_offsets, int32_t day);

// A row of a level table: (day Date | month UInt32, key, value) in RowBinary.
void AppendDayRow(std::string* out, int32_t day, const ApiKey& key, std::string_view value);
void AppendMonthRow(std::string* out, int32_t month, const ApiKey& key, std::string_view value);
// The value of a sum, as the rows hold it.
std::string EncodeValue(const ApiAggregate& a);

// SQL of one level's rows (key, value), each stored copy counted once: of
// the rows of `source` meeting `where` with equal `dedup` columns
// ("batch_id, seq" for raw rows; the key and "day" for day nodes) the first
// in `first_by` order is kept, and then only if it meets `keep_if` (which
// may name `day`).
std::string ChDedupRowsSql(const std::string& source, const std::string& dedup,
                           const std::string& where, const std::string& first_by = "",
                           const std::string& keep_if = "");
// The rows of `parts` (ChDedupRowsSql joined by UNION ALL) in key order,
// as RowBinary that SumsReader reads.
std::string ChOrderedRowsSql(const std::string& parts);

// Reads the RowBinary answer of ChOrderedRowsSql piece by piece: Feed()
// each piece as it arrives, then Finish(). The values of consecutive rows
// of one key are added up, and each key's sum goes to `visit` (false
// stops). A row that does not read (ClickHouse's appended error text, a
// cut answer, a value that does not parse) is an error that says what was
// found, never a row.
class SumsReader {
 public:
  explicit SumsReader(std::function<bool(ApiAggregate&&)> visit) : visit_(std::move(visit)) {}
  // False when reading must stop: `visit` said so, or an error (status()).
  bool Feed(std::string_view piece);
  // OK when every byte was read as whole rows (and the last key visited).
  [[nodiscard]] Status Finish();
  const Status& status() const { return status_; }
  uint64_t rows() const { return rows_; }

 private:
  // Reads one row from buffer_ at pos_: 1 read, 0 more bytes needed, -1 bad.
  int ReadRow();
  // Hands the key summed so far to visit_.
  void Flush();
  // Unavailable with ClickHouse's message when one is in the bytes at
  // hand, else DataLoss(otherwise).
  Status Failure(const std::string& otherwise) const;
  std::function<bool(ApiAggregate&&)> visit_;
  std::string buffer_;  // unread bytes from pos_, after up to 512 read ones
  size_t pos_ = 0;
  bool stopped_ = false;
  Status status_;
  uint64_t rows_ = 0;
  bool have_ = false;  // a key is being summed
  ApiKey key_;
  SparseAggregate sum_;
};

}  // namespace fieldprof::aggregator

#endif  // FIELDPROF_AGGREGATOR_CLICKHOUSE_ROWS_H_
