#include "common/wire/platform.h"

#include <sys/utsname.h>

#include <fstream>
#include <sstream>
#include <string>

namespace fieldprof {
namespace {

// Value of the first "key<tabs>: value" line of cpuinfo, or "".
std::string_view Field(std::string_view text, std::string_view key) {
  size_t pos = 0;
  while (pos < text.size()) {
    size_t end = text.find('\n', pos);
    if (end == std::string_view::npos) end = text.size();
    std::string_view line = text.substr(pos, end - pos);
    pos = end + 1;
    if (!line.starts_with(key)) continue;
    size_t colon = line.find(':');
    if (colon == std::string_view::npos) continue;
    std::string_view name = line.substr(0, colon);
    while (!name.empty() && (name.back() == ' ' || name.back() == '\t')) name.remove_suffix(1);
    if (name != key) continue;
    std::string_view v = line.substr(colon + 1);
    while (!v.empty() && v.front() == ' ') v.remove_prefix(1);
    return v;
  }
  return {};
}

}  // namespace

Platform PlatformFromCpuinfo(std::string_view machine, std::string_view cpuinfo) {
  Platform p;
  p.os = wire::OS_LINUX;
  if (machine == "x86_64") {
    p.arch = wire::ARCH_X86_64;
    std::string_view vendor = Field(cpuinfo, "vendor_id");
    if (vendor == "GenuineIntel") {
      p.cpu_vendor = wire::CPU_VENDOR_INTEL;
    } else if (vendor == "AuthenticAMD") {
      p.cpu_vendor = wire::CPU_VENDOR_AMD;
    } else if (!vendor.empty()) {
      p.cpu_vendor = wire::CPU_VENDOR_OTHER;
    }
    std::string family(Field(cpuinfo, "cpu family"));
    if (!family.empty()) {
      try {
        int f = std::stoi(family);
        if (f >= 0 && f <= 255) p.cpu_family = static_cast<uint8_t>(f);
      } catch (...) {
        // Unreadable family: leave it 0 (unspecified).
      }
    }
  } else if (machine == "aarch64") {
    p.arch = wire::ARCH_AARCH64;
    std::string_view impl = Field(cpuinfo, "CPU implementer");
    if (impl == "0x41") {
      p.cpu_vendor = wire::CPU_VENDOR_ARM;
    } else if (impl == "0x61") {
      p.cpu_vendor = wire::CPU_VENDOR_APPLE;
    } else if (!impl.empty()) {
      p.cpu_vendor = wire::CPU_VENDOR_OTHER;
    }
    std::string_view arch = Field(cpuinfo, "CPU architecture");
    if (arch == "8") p.cpu_family = 8;
  } else if (machine == "riscv64") {
    p.arch = wire::ARCH_RISCV64;
  } else if (!machine.empty()) {
    p.arch = wire::ARCH_OTHER;
  }
  return p;
}

Platform DetectPlatform() {
  struct utsname u {};
  std::string machine = uname(&u) == 0 ? u.machine : "";
  std::ifstream in("/proc/cpuinfo");
  std::stringstream ss;
  // Only the first CPU's block is needed.
  std::string line;
  int lines = 0;
  while (std::getline(in, line) && lines++ < 64) ss << line << '\n';
  return PlatformFromCpuinfo(machine, ss.str());
}

}  // namespace fieldprof
