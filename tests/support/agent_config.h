// The agent's configuration as the tests run it: an aggregator on
// loopback with the test's own certificate, the spool and state in the
// test's directory, short timeouts and backoff (dpkg_dir: this machine's).
#ifndef FIELDPROF_TESTS_SUPPORT_AGENT_CONFIG_H_
#define FIELDPROF_TESTS_SUPPORT_AGENT_CONFIG_H_

#include <cstdint>

#include "agent/daemon/agent.h"
#include "tests/support/test_util.h"

namespace fieldprof::testing {

inline agent::AgentConfig LoopbackAgentConfig(const TempDir& dir, uint16_t port) {
  agent::AgentConfig c;
  c.server_host = "127.0.0.1";
  c.server_port = port;
  c.ca_file = dir.File("cert.pem");
  c.spool_dir = dir.File("spool");
  c.state_dir = dir.File("state");
  c.timeout_ms = 5000;
  c.backoff_initial_ms = 10;
  // The tests' synthetic module (no package holds it): shared as a
  // volunteer shares a module of their own, so its records leave.
  c.share_modules = "libtest.so.1";
  return c;
}

}  // namespace fieldprof::testing

#endif  // FIELDPROF_TESTS_SUPPORT_AGENT_CONFIG_H_
