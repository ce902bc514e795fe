// A decimal number as settings, flags and query strings give it: the whole
// text a number ("0.05", "+1", "1e-3"; no blank, no hex), within [lo, hi].
// The same reading in every locale (std::from_chars), and the runtime's
// own (agent/preload/runtime/text.h: ScanDecimal takes a sign too).
#ifndef FIELDPROF_COMMON_BASE_DECIMAL_H_
#define FIELDPROF_COMMON_BASE_DECIMAL_H_

#include <charconv>
#include <optional>
#include <string_view>
#include <system_error>

namespace fieldprof {

inline std::optional<double> ParseDecimalIn(std::string_view v, double lo, double hi) {
  if (v.size() > 1 && v[0] == '+' && v[1] != '-') v.remove_prefix(1);
  double x = 0;
  const auto [ptr, ec] = std::from_chars(v.data(), v.data() + v.size(), x);
  if (v.empty() || ec != std::errc() || ptr != v.data() + v.size() || !(x >= lo && x <= hi)) {
    return std::nullopt;
  }
  return x;
}

}  // namespace fieldprof

#endif  // FIELDPROF_COMMON_BASE_DECIMAL_H_
