// The coarse platform class a volunteer machine reports: OS, CPU
// architecture, CPU vendor and family. Deliberately coarse: it separates
// populations (x86 vs ARM, Intel vs AMD) and never singles out a machine.
#ifndef FIELDPROF_COMMON_WIRE_PLATFORM_H_
#define FIELDPROF_COMMON_WIRE_PLATFORM_H_

#include <string_view>

#include "common/wire/api_key.h"

namespace fieldprof {

// Reads the platform of this machine (uname, /proc/cpuinfo). Never fails:
// what cannot be read is left unspecified.
Platform DetectPlatform();

// Platform from the text of /proc/cpuinfo and a machine name (uname -m);
// split out so it can be tested with recorded cpuinfo files.
Platform PlatformFromCpuinfo(std::string_view machine, std::string_view cpuinfo);

}  // namespace fieldprof

#endif  // FIELDPROF_COMMON_WIRE_PLATFORM_H_
