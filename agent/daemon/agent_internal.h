// What the agent's files (agent.cc, agent_tokens.cc, agent_upload.cc,
// dev_uploader.cc) share beyond their own headers.
#ifndef FIELDPROF_AGENT_DAEMON_AGENT_INTERNAL_H_
#define FIELDPROF_AGENT_DAEMON_AGENT_INTERNAL_H_

#include <cstdint>
#include <string>

namespace fieldprof::agent {

// The wall clock, in ms since the epoch.
int64_t NowMs();

// A batch id: kBatchIdBytes from the OS entropy source.
std::string RandomBatchId();

}  // namespace fieldprof::agent

#endif  // FIELDPROF_AGENT_DAEMON_AGENT_INTERNAL_H_
