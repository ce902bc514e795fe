// Fault injection for the crash tests: with FIELDPROF_AGENT_CRASH_AT=NAME
// (or NAME:N for the N-th time, counting from 1) in the environment, the
// agent kills itself with SIGKILL when it reaches the point called NAME,
// exactly as a power cut or the OOM killer would stop it there. Unset,
// a point costs one comparison.
#ifndef FIELDPROF_AGENT_CRASH_POINT_H_
#define FIELDPROF_AGENT_CRASH_POINT_H_

namespace fieldprof::agent {

void CrashPoint(const char* name);

}  // namespace fieldprof::agent

#endif  // FIELDPROF_AGENT_CRASH_POINT_H_
