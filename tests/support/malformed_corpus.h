// Malformed batch bodies, each with the reason it is malformed. Used by the
// validation tests (DecodeBatch must reject each) and the server tests (each
// must get a 400 and leave the server serving).
#ifndef FIELDPROF_TESTS_SUPPORT_MALFORMED_CORPUS_H_
#define FIELDPROF_TESTS_SUPPORT_MALFORMED_CORPUS_H_

#include <string>
#include <utility>
#include <vector>

#include "tests/support/test_util.h"

namespace fieldprof::testing {

struct BadBody {
  std::string name;
  std::string bytes;
};

inline std::vector<BadBody> MalformedCorpus() {
  std::vector<BadBody> out;
  wire::Batch good = SimpleBatch(IdOf(1), "libz.so.1", "deflate", 1500, 3);
  const std::string g = good.SerializeAsString();
  // Truncations at many points.
  for (size_t n : {size_t{1}, size_t{2}, size_t{5}, g.size() / 2, g.size() - 1}) {
    out.push_back({"truncated_" + std::to_string(n), g.substr(0, n)});
  }
  // A varint that never ends (11 bytes with the continuation bit).
  out.push_back({"huge_varint", std::string("\x08") + std::string(11, '\xff')});
  // Length-delimited field whose length is far past the end.
  out.push_back({"length_past_end", std::string("\x2a\xff\xff\xff\x0f") + "abc"});
  // Wrong wire type: field 1 (schema_version, varint) sent as length-delimited.
  out.push_back({"wrong_wire_type", std::string("\x0a\x03xyz") + g});
  // Wrong wire type inside: records (field 5) as fixed32.
  out.push_back({"wrong_wire_type_records", std::string("\x2d\x01\x02\x03\x04")});
  // Group start without end.
  out.push_back({"unterminated_group", std::string("\x0b")});
  // Field number 0 is invalid.
  out.push_back({"field_zero", std::string("\x00\x01", 2)});
  // Garbage.
  out.push_back({"garbage", std::string("\xde\xad\xbe\xef\x00\xff\x13\x37", 8)});
  // Well-formed protobuf, invalid content.
  {
    wire::Batch b = good;
    b.mutable_records(0)->mutable_key()->set_metric(static_cast<wire::Metric>(77));
    out.push_back({"unknown_metric_enum", b.SerializeAsString()});
  }
  {
    wire::Batch b = good;
    b.mutable_client_platform()->set_os(static_cast<wire::Os>(99));
    out.push_back({"unknown_os_enum", b.SerializeAsString()});
  }
  {
    wire::Batch b = SimpleBatch(IdOf(2), "libz.so.1", "deflate", 5, 1);
    Histogram h;
    h.Record(5);
    h.Record(100);
    HistogramToWire(h, b.mutable_records(0)->mutable_histogram());
    auto* hist = b.mutable_records(0)->mutable_histogram();
    hist->mutable_buckets()->SwapElements(0, 1);
    out.push_back({"buckets_out_of_order", b.SerializeAsString()});
    *hist->add_buckets() = hist->buckets(0);
    out.push_back({"buckets_repeated", b.SerializeAsString()});
  }
  {
    wire::Batch b = good;
    b.set_schema_version(2);
    out.push_back({"future_schema_version", b.SerializeAsString()});
  }
  {
    wire::Batch b = good;
    b.set_batch_id("short");
    out.push_back({"short_batch_id", b.SerializeAsString()});
  }
  out.push_back({"empty_body", ""});
  return out;
}

}  // namespace fieldprof::testing

#endif  // FIELDPROF_TESTS_SUPPORT_MALFORMED_CORPUS_H_
