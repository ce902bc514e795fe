// Fault injection for the crash tests: with FIELDPROF_AGENT_CRASH_AT=NAME
// (or NAME:N for the N-th time, counting from 1) in the environment, the
// agent kills itself with SIGKILL when it reaches the point called NAME,
// exactly as a power cut or the OOM killer would stop it there. With
// FIELDPROF_AGENT_PAUSE_AT=NAME[:N] it stops itself there (SIGSTOP) instead,
// so a test can act while the agent is held mid-step and then let it go on
// with SIGCONT. Unset, a point costs two comparisons.
#ifndef FIELDPROF_COMMON_BASE_CRASH_POINT_H_
#define FIELDPROF_COMMON_BASE_CRASH_POINT_H_

namespace fieldprof {

void CrashPoint(const char* name);

}  // namespace fieldprof

#endif  // FIELDPROF_COMMON_BASE_CRASH_POINT_H_
