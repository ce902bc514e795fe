#include "aggregator/http/query_params.h"

#include <charconv>

#include "common/wire/api_key.h"

namespace fieldprof::aggregator {
namespace {

int HexValue(char c) {
  if (c >= '0' && c <= '9') return c - '0';
  if (c >= 'a' && c <= 'f') return c - 'a' + 10;
  if (c >= 'A' && c <= 'F') return c - 'A' + 10;
  return -1;
}

StatusOr<std::string> PercentDecode(std::string_view s) {
  std::string out;
  out.reserve(s.size());
  for (size_t i = 0; i < s.size(); ++i) {
    if (s[i] == '+') {
      out += ' ';
    } else if (s[i] == '%') {
      if (i + 2 >= s.size()) return InvalidArgument("truncated percent escape in query");
      const int hi = HexValue(s[i + 1]), lo = HexValue(s[i + 2]);
      if (hi < 0 || lo < 0) return InvalidArgument("bad percent escape in query");
      out += static_cast<char>(hi * 16 + lo);
      i += 2;
    } else {
      out += s[i];
    }
  }
  return out;
}

// One parameter of the platform filter: os=, arch=, vendor=, family=.
Status ParsePlatformParam(const std::string& k, const std::string& v, SeriesQuery* q) {
  ApiFilter& f = q->filter;
  if (k == "os") {
    FP_ASSIGN_OR_RETURN(f.os, ParseOs(v));
  } else if (k == "arch") {
    FP_ASSIGN_OR_RETURN(f.arch, ParseArch(v));
  } else if (k == "vendor") {
    FP_ASSIGN_OR_RETURN(f.cpu_vendor, ParseCpuVendor(v));
  } else {
    const std::optional<int64_t> x = ParseWholeNumber(v);
    if (!x || *x < 0 || *x > 255) return InvalidArgument("family must be 0..255");
    q->family = static_cast<int>(*x);
  }
  return Status::Ok();
}

}  // namespace

StatusOr<QueryParams> ParseQuery(std::string_view q) {
  QueryParams out;
  while (!q.empty()) {
    const size_t amp = q.find('&');
    const std::string_view part = q.substr(0, amp);
    q = amp == std::string_view::npos ? std::string_view() : q.substr(amp + 1);
    if (part.empty()) continue;
    const size_t eq = part.find('=');
    FP_ASSIGN_OR_RETURN(std::string k, PercentDecode(part.substr(0, eq)));
    FP_ASSIGN_OR_RETURN(
        std::string v,
        PercentDecode(eq == std::string_view::npos ? std::string_view() : part.substr(eq + 1)));
    out.emplace_back(std::move(k), std::move(v));
  }
  return out;
}

std::string TakeParam(QueryParams* params, std::string_view name) {
  for (auto it = params->begin(); it != params->end(); ++it) {
    if (it->first != name) continue;
    std::string v = std::move(it->second);
    params->erase(it);
    return v;
  }
  return "";
}

std::optional<int64_t> ParseWholeNumber(std::string_view v) {
  int64_t x = 0;
  auto [ptr, ec] = std::from_chars(v.data(), v.data() + v.size(), x);
  if (ec != std::errc() || ptr != v.data() + v.size()) return std::nullopt;
  return x;
}

Status ParseSeriesQuery(const QueryParams& params, SeriesQuery* q) {
  ApiFilter& f = q->filter;
  for (const auto& [k, v] : params) {
    if (k == "module") {
      f.module = v;
    } else if (k == "prefix" || k == "symbol") {
      f.symbol_prefix = v;
      f.symbol_exact = (k == "symbol");
    } else if (k == "version") {
      f.module_version = v;
    } else if (k == "metric") {
      FP_ASSIGN_OR_RETURN(f.metric, ParseMetric(v));
    } else if (k == "os" || k == "arch" || k == "vendor" || k == "family") {
      FP_RETURN_IF_ERROR(ParsePlatformParam(k, v, q));
    } else if (k == "from" || k == "to") {
      StatusOr<int32_t> d = ParseDay(v);
      if (!d.ok()) return d.status().WithContext(k);
      (k == "from" ? q->from : q->to) = *d;
    } else if (k == "limit") {
      const std::optional<int64_t> x = ParseWholeNumber(v);
      if (!x || *x < 1 || *x > 100000) return InvalidArgument("limit must be 1..100000");
      q->limit = static_cast<size_t>(*x);
    } else {
      return InvalidArgument("unknown query parameter '" + k + "'");
    }
  }
  if (q->from != kUnboundedFirst && q->to != kUnboundedLast && q->from > q->to) {
    return InvalidArgument("from is after to");
  }
  return Status::Ok();
}

}  // namespace fieldprof::aggregator
