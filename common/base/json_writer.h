// A minimal streaming JSON writer for responses and reports. It escapes
// strings and tracks commas; it does not check nesting (callers are ours).
//
//   JsonWriter j;
//   j.BeginObject().Key("ok").Bool(true).Key("n").Uint(3).EndObject();
//   std::string body = j.Take();  // {"ok":true,"n":3}
#ifndef FIELDPROF_COMMON_BASE_JSON_WRITER_H_
#define FIELDPROF_COMMON_BASE_JSON_WRITER_H_

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

namespace fieldprof {

class JsonWriter {
 public:
  JsonWriter& BeginObject();
  JsonWriter& EndObject();
  JsonWriter& BeginArray();
  JsonWriter& EndArray();
  JsonWriter& Key(std::string_view k);
  JsonWriter& String(std::string_view v);
  JsonWriter& Uint(uint64_t v);
  JsonWriter& Int(int64_t v);
  // Non-finite numbers are written as null.
  JsonWriter& Double(double v);
  // All 17 significant digits: reads back as the same double.
  JsonWriter& DoubleExact(double v);
  JsonWriter& Bool(bool v);
  JsonWriter& Null();
  // Already-formatted JSON (e.g. a 128-bit integer's digits).
  JsonWriter& Raw(std::string_view json);

  const std::string& str() const { return out_; }
  std::string Take() { return std::move(out_); }
  // Room for `bytes` of output (a large document written without regrowing).
  void Reserve(size_t bytes) { out_.reserve(bytes); }

 private:
  void Separate();
  std::string out_;
  std::vector<bool> first_;  // per open container: nothing written yet
  bool after_key_ = false;
};

// Appends `s` as a quoted, escaped JSON string.
void AppendJsonString(std::string* out, std::string_view s);

}  // namespace fieldprof

#endif  // FIELDPROF_COMMON_BASE_JSON_WRITER_H_
