#include "tools/shared/format.h"

#include <unistd.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstdlib>

#include "common/statistics/resolution.h"

namespace fieldprof::tools {

std::string FormatNanos(double ns) {
  char b[32];
  if (ns < 1e3) {
    std::snprintf(b, sizeof b, "%.0f ns", ns);
  } else if (ns < 1e6) {
    std::snprintf(b, sizeof b, "%.2f us", ns / 1e3);
  } else if (ns < 1e9) {
    std::snprintf(b, sizeof b, "%.2f ms", ns / 1e6);
  } else {
    std::snprintf(b, sizeof b, "%.2f s", ns / 1e9);
  }
  return b;
}

std::string FormatBytes(double v) {
  char b[32];
  if (v < 1024) {
    std::snprintf(b, sizeof b, "%.0f B", v);
  } else if (v < 1024.0 * 1024) {
    std::snprintf(b, sizeof b, "%.2f KiB", v / 1024);
  } else if (v < 1024.0 * 1024 * 1024) {
    std::snprintf(b, sizeof b, "%.2f MiB", v / 1048576);
  } else {
    std::snprintf(b, sizeof b, "%.2f GiB", v / 1073741824);
  }
  return b;
}

std::string FormatMetricValue(wire::Metric m, double v, uint64_t resolution_ns) {
  switch (m) {
    case wire::METRIC_WALL_TIME_NS:
      if (BelowResolution(v, resolution_ns)) {
        return "< " + FormatNanos(static_cast<double>(resolution_ns));
      }
      return FormatNanos(v);
    case wire::METRIC_POINT_NS:
    case wire::METRIC_STACK_CPU_NS:
      return FormatNanos(v);
    case wire::METRIC_ALLOC_COUNT: {
      char b[32];
      std::snprintf(b, sizeof b, "%.1f", v);
      return b;
    }
    default:
      return FormatBytes(v);
  }
}

std::string ZeroBucketLabel(wire::Metric m, uint64_t resolution_ns) {
  if (m != wire::METRIC_WALL_TIME_NS || resolution_ns == 0) return "0";
  return "< " + FormatNanos(static_cast<double>(resolution_ns));
}

std::string FormatCount(uint64_t n) {
  const std::string digits = std::to_string(n);
  std::string out;
  for (size_t i = 0; i < digits.size(); ++i) {
    if (i > 0 && (digits.size() - i) % 3 == 0) out += ',';
    out += digits[i];
  }
  return out;
}

// Heat colour of a histogram row: hue from the bucket's place in the range
// shown (cheap blue .. expensive red), brightness from its count.
std::string Heat(double position, double intensity, bool truecolor) {
  // Blue -> cyan -> green -> yellow -> red.
  const double hue = 240.0 * (1.0 - std::clamp(position, 0.0, 1.0));
  const double v = 0.35 + 0.65 * std::clamp(intensity, 0.0, 1.0);
  const double c = v, x = c * (1 - std::fabs(std::fmod(hue / 60.0, 2) - 1));
  double r = 0, g = 0, b = 0;
  if (hue < 60) {
    r = c, g = x;
  } else if (hue < 120) {
    r = x, g = c;
  } else if (hue < 180) {
    g = c, b = x;
  } else {
    g = x, b = c;
  }
  char out[32];
  if (truecolor) {
    std::snprintf(out, sizeof out, "\033[38;2;%d;%d;%dm", static_cast<int>(r * 255),
                  static_cast<int>(g * 255), static_cast<int>(b * 255));
  } else {
    auto q = [](double u) { return static_cast<int>(std::lround(u * 5)); };
    std::snprintf(out, sizeof out, "\033[38;5;%dm", 16 + 36 * q(r) + 6 * q(g) + q(b));
  }
  return out;
}

std::string HeatText(const std::string& text, double position, bool color, bool truecolor) {
  if (!color) return text;
  return Heat(position, 1.0, truecolor) + text + "\033[0m";
}

bool ColorWanted(const std::string& flag) {
  return flag == "always" ||
         (flag == "auto" && isatty(STDOUT_FILENO) && std::getenv("NO_COLOR") == nullptr);
}

bool TrueColor() {
  const char* ct = std::getenv("COLORTERM");
  return ct != nullptr && (std::string(ct) == "truecolor" || std::string(ct) == "24bit");
}

std::string WithheldText(int64_t k, int64_t series, int64_t modules, int64_t machines) {
  if (series <= 0) return "";
  auto n = [](int64_t v, const char* one, const char* many) {
    return FormatCount(static_cast<uint64_t>(std::max<int64_t>(v, 0))) + " " +
           (v == 1 ? one : many);
  };
  std::string text = n(series, "series", "series");
  if (modules > 0) text += " (" + n(modules, "module", "modules") + " not shown at all)";
  text += ", sent from " + n(machines, "machine", "machines") +
          " so far: a series is published once " + std::to_string(k) +
          " machines have sent it (the aggregator's k_anonymity setting; 1 publishes "
          "everything, for a trial on one machine)";
  return text;
}

}  // namespace fieldprof::tools
