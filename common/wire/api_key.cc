#include "common/wire/api_key.h"

#include <algorithm>

namespace fieldprof {

Platform PlatformFromWire(const wire::Platform& p) {
  Platform out;
  out.os = p.os();
  out.arch = p.arch();
  out.cpu_vendor = p.cpu_vendor();
  out.cpu_family = static_cast<uint8_t>(p.cpu_family());
  return out;
}

void PlatformToWire(const Platform& p, wire::Platform* out) {
  out->set_os(p.os);
  out->set_arch(p.arch);
  out->set_cpu_vendor(p.cpu_vendor);
  out->set_cpu_family(p.cpu_family);
}

ApiKey ApiKeyFromWire(const wire::ApiKey& k, const wire::Platform& batch_platform) {
  ApiKey out;
  out.module = k.module();
  out.module_version = k.module_version();
  out.symbol = k.symbol();
  out.metric = k.metric();
  out.platform = PlatformFromWire(k.has_platform() ? k.platform() : batch_platform);
  return out;
}

void ApiKeyToWire(const ApiKey& k, wire::ApiKey* out) {
  out->set_module(k.module);
  out->set_module_version(k.module_version);
  out->set_symbol(k.symbol);
  out->set_metric(k.metric);
  PlatformToWire(k.platform, out->mutable_platform());
}

std::string EncodeApiKey(const ApiKey& key) {
  std::string s;
  s.reserve(key.module.size() + key.symbol.size() + key.module_version.size() + 8);
  s += key.module;
  s += '\0';
  s += key.symbol;
  s += '\0';
  s += key.module_version;
  s += '\0';
  s += static_cast<char>(key.metric);
  s += static_cast<char>(key.platform.os);
  s += static_cast<char>(key.platform.arch);
  s += static_cast<char>(key.platform.cpu_vendor);
  s += static_cast<char>(key.platform.cpu_family);
  return s;
}

namespace {

template <typename K, typename P>
void AppendWireApiKeyT(const K& k, const P& batch_platform, std::string* out) {
  const P& p = k.has_platform() ? k.platform() : batch_platform;
  // Sized once and written in place: the aggregator builds one key per
  // record it folds (about 900 a batch), where a push_back a byte showed.
  const std::string_view module = k.module(), symbol = k.symbol(), version = k.module_version();
  const size_t at = out->size();
  out->resize(at + module.size() + symbol.size() + version.size() + 8);
  char* o = out->data() + at;
  for (std::string_view part : {module, symbol, version}) {
    o = std::copy(part.begin(), part.end(), o);  // an empty view's data may be null
    *o++ = '\0';
  }
  *o++ = static_cast<char>(k.metric());
  *o++ = static_cast<char>(p.os());
  *o++ = static_cast<char>(p.arch());
  *o++ = static_cast<char>(p.cpu_vendor());
  *o = static_cast<char>(static_cast<uint8_t>(p.cpu_family()));
}

}  // namespace

void AppendWireApiKey(const wire::ApiKey& k, const wire::Platform& batch_platform,
                      std::string* out) {
  AppendWireApiKeyT(k, batch_platform, out);
}

void AppendWireApiKey(const ApiKeyView& k, const PlatformView& batch_platform, std::string* out) {
  AppendWireApiKeyT(k, batch_platform, out);
}

StatusOr<ApiKey> DecodeApiKey(std::string_view bytes) {
  ApiKey k;
  std::string_view rest = bytes;
  auto take = [&rest](std::string* out) {
    size_t nul = rest.find('\0');
    if (nul == std::string_view::npos) return false;
    out->assign(rest.substr(0, nul));
    rest.remove_prefix(nul + 1);
    return true;
  };
  if (!take(&k.module) || !take(&k.symbol) || !take(&k.module_version) || rest.size() != 5) {
    return DataLoss("malformed stored API key");
  }
  auto u = [&rest](int i) { return static_cast<int>(static_cast<unsigned char>(rest[i])); };
  k.metric = static_cast<wire::Metric>(u(0));
  k.platform.os = static_cast<wire::Os>(u(1));
  k.platform.arch = static_cast<wire::Arch>(u(2));
  k.platform.cpu_vendor = static_cast<wire::CpuVendor>(u(3));
  k.platform.cpu_family = static_cast<uint8_t>(u(4));
  return k;
}

std::string_view MetricName(wire::Metric m) {
  switch (m) {
    case wire::METRIC_WALL_TIME_NS:
      return "wall_time_ns";
    case wire::METRIC_ALLOC_BYTES_INCLUSIVE:
      return "alloc_bytes_inclusive";
    case wire::METRIC_ALLOC_BYTES_EXCLUSIVE:
      return "alloc_bytes_exclusive";
    case wire::METRIC_ALLOC_COUNT:
      return "alloc_count";
    case wire::METRIC_FILE_IO_BYTES:
      return "file_io_bytes";
    case wire::METRIC_SOCKET_IO_BYTES:
      return "socket_io_bytes";
    case wire::METRIC_POINT_NS:
      return "point_ns";
    case wire::METRIC_STACK_CPU_NS:
      return "stack_cpu_ns";
    default:
      return "unspecified";
  }
}

StatusOr<wire::Metric> ParseMetric(std::string_view name) {
  for (int m = wire::Metric_MIN; m <= wire::Metric_MAX; ++m) {
    if (!wire::Metric_IsValid(m) || m == wire::METRIC_UNSPECIFIED) continue;
    if (MetricName(static_cast<wire::Metric>(m)) == name) return static_cast<wire::Metric>(m);
  }
  return InvalidArgument("unknown metric '" + std::string(name) +
                         "' (wall_time_ns, alloc_bytes_inclusive, alloc_bytes_exclusive, "
                         "alloc_count, file_io_bytes, socket_io_bytes, point_ns, stack_cpu_ns)");
}

std::string_view OsName(wire::Os os) {
  switch (os) {
    case wire::OS_LINUX:
      return "linux";
    case wire::OS_FREEBSD:
      return "freebsd";
    case wire::OS_MACOS:
      return "macos";
    default:
      return "unspecified";
  }
}

std::string_view ArchName(wire::Arch a) {
  switch (a) {
    case wire::ARCH_X86_64:
      return "x86_64";
    case wire::ARCH_AARCH64:
      return "aarch64";
    case wire::ARCH_RISCV64:
      return "riscv64";
    case wire::ARCH_OTHER:
      return "other";
    default:
      return "unspecified";
  }
}

std::string_view CpuVendorName(wire::CpuVendor v) {
  switch (v) {
    case wire::CPU_VENDOR_INTEL:
      return "intel";
    case wire::CPU_VENDOR_AMD:
      return "amd";
    case wire::CPU_VENDOR_ARM:
      return "arm";
    case wire::CPU_VENDOR_APPLE:
      return "apple";
    case wire::CPU_VENDOR_OTHER:
      return "other";
    default:
      return "unspecified";
  }
}

namespace {

template <typename Enum, typename NameFn>
StatusOr<Enum> ParseEnumName(std::string_view what, std::string_view v, int min, int max,
                             NameFn name) {
  for (int i = min; i <= max; ++i) {
    if (name(static_cast<Enum>(i)) == v && v != "unspecified") return static_cast<Enum>(i);
  }
  return InvalidArgument("unknown " + std::string(what) + " '" + std::string(v) + "'");
}

}  // namespace

StatusOr<wire::Os> ParseOs(std::string_view name) {
  return ParseEnumName<wire::Os>("os", name, wire::Os_MIN, wire::Os_MAX, OsName);
}
StatusOr<wire::Arch> ParseArch(std::string_view name) {
  return ParseEnumName<wire::Arch>("architecture", name, wire::Arch_MIN, wire::Arch_MAX, ArchName);
}
StatusOr<wire::CpuVendor> ParseCpuVendor(std::string_view name) {
  return ParseEnumName<wire::CpuVendor>("CPU vendor", name, wire::CpuVendor_MIN,
                                        wire::CpuVendor_MAX, CpuVendorName);
}

}  // namespace fieldprof
