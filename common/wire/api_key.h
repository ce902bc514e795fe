// ApiKey: what one measured series is keyed by, and its canonical byte
// encoding used as a storage key and for hashing into snapshot fragments.
//
// Encoding (order matters: it makes "all versions of module M" and "symbols
// of M starting with P" contiguous ranges):
//   module '\0' symbol '\0' module_version '\0' metric os arch vendor family
// where the five trailing fields are one byte each. Validated strings never
// contain NUL, so the encoding is unambiguous.
#ifndef FIELDPROF_COMMON_WIRE_API_KEY_H_
#define FIELDPROF_COMMON_WIRE_API_KEY_H_

#include <cstdint>
#include <string>
#include <string_view>

#include "common/base/status.h"
#include "common/proto/fieldprof.pb.h"
#include "common/wire/batch_view.h"

namespace fieldprof {

struct Platform {
  wire::Os os = wire::OS_UNSPECIFIED;
  wire::Arch arch = wire::ARCH_UNSPECIFIED;
  wire::CpuVendor cpu_vendor = wire::CPU_VENDOR_UNSPECIFIED;
  uint8_t cpu_family = 0;

  bool operator==(const Platform&) const = default;
};

struct ApiKey {
  std::string module;
  std::string module_version;
  std::string symbol;
  wire::Metric metric = wire::METRIC_UNSPECIFIED;
  Platform platform;

  bool operator==(const ApiKey&) const = default;
};

Platform PlatformFromWire(const wire::Platform& p);
void PlatformToWire(const Platform& p, wire::Platform* out);

// The key of a wire record; `batch_platform` applies when the record has none.
ApiKey ApiKeyFromWire(const wire::ApiKey& k, const wire::Platform& batch_platform);
void ApiKeyToWire(const ApiKey& k, wire::ApiKey* out);

std::string EncodeApiKey(const ApiKey& key);
// Appends the encoding of a wire key (with `batch_platform` when it has
// none) to *out, without building an ApiKey first. Same bytes as
// EncodeApiKey(ApiKeyFromWire(k, batch_platform)).
void AppendWireApiKey(const wire::ApiKey& k, const wire::Platform& batch_platform,
                      std::string* out);
void AppendWireApiKey(const ApiKeyView& k, const PlatformView& batch_platform, std::string* out);
[[nodiscard]] StatusOr<ApiKey> DecodeApiKey(std::string_view bytes);

// Short names for display and query parameters: "wall_time_ns", "linux", ...
std::string_view MetricName(wire::Metric m);
[[nodiscard]] StatusOr<wire::Metric> ParseMetric(std::string_view name);
std::string_view OsName(wire::Os os);
std::string_view ArchName(wire::Arch a);
std::string_view CpuVendorName(wire::CpuVendor v);
// The reverse of the three above ("unspecified" is refused).
[[nodiscard]] StatusOr<wire::Os> ParseOs(std::string_view name);
[[nodiscard]] StatusOr<wire::Arch> ParseArch(std::string_view name);
[[nodiscard]] StatusOr<wire::CpuVendor> ParseCpuVendor(std::string_view name);

}  // namespace fieldprof

#endif  // FIELDPROF_COMMON_WIRE_API_KEY_H_
