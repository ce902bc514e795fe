#include "common/base/crash_point.h"

#include <signal.h>

#include <cstdlib>
#include <cstring>
#include <string>

namespace fieldprof {

namespace {

// One NAME[:N] point read from the environment; Reached counts the visits.
class Point {
 public:
  explicit Point(const char* variable) {
    const char* spec = std::getenv(variable);
    if (spec == nullptr || *spec == '\0') return;
    armed_ = true;
    const char* colon = std::strchr(spec, ':');
    name_.assign(spec, colon != nullptr ? colon - spec : std::strlen(spec));
    nth_ = colon != nullptr ? std::atol(colon + 1) : 1;
  }
  bool Reached(const char* name) { return armed_ && name_ == name && ++seen_ == nth_; }

 private:
  bool armed_ = false;
  std::string name_;
  long nth_ = 1;
  long seen_ = 0;
};

}  // namespace

void CrashPoint(const char* name) {
  static Point crash("FIELDPROF_AGENT_CRASH_AT");
  static Point pause("FIELDPROF_AGENT_PAUSE_AT");
  if (crash.Reached(name)) ::raise(SIGKILL);
  if (pause.Reached(name)) ::raise(SIGSTOP);
}

}  // namespace fieldprof
