#include "agent/crash_point.h"

#include <signal.h>

#include <cstdlib>
#include <cstring>
#include <string>

namespace fieldprof::agent {

void CrashPoint(const char* name) {
  static const char* const spec = std::getenv("FIELDPROF_AGENT_CRASH_AT");
  if (spec == nullptr || *spec == '\0') return;
  static const std::string point = std::string(spec).substr(0, std::string(spec).find(':'));
  static const long nth = std::strchr(spec, ':') ? std::atol(std::strchr(spec, ':') + 1) : 1;
  static long seen = 0;
  if (point != name || ++seen < nth) return;
  ::raise(SIGKILL);
}

}  // namespace fieldprof::agent
