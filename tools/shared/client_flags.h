// The flags every command that talks to an aggregator shares.
#ifndef FIELDPROF_TOOLS_SHARED_CLIENT_FLAGS_H_
#define FIELDPROF_TOOLS_SHARED_CLIENT_FLAGS_H_

#include <cstdint>
#include <nlohmann/json.hpp>
#include <string>

#include "common/net/endpoint.h"
#include "common/net/https_client.h"
#include "common/settings/options.h"

namespace fieldprof::tools {

struct ClientFlags {
  ClientFlags() { options.loopback_ca_file = kPackagedAggregatorCert; }

  HttpsClientOptions options;
  int64_t port = 8443;
  int64_t timeout_ms = 30000;

  void Register(OptionTable& t) {
    t.AddString("host", &options.host,
                "aggregator: HOST, HOST:PORT, [IPv6]:PORT or https://HOST[:PORT] (checked "
                "against its certificate)");
    t.AddInt("port", &port, "aggregator port, when --host names none", 1, 65535);
    AddEndpointCheck(t, "host", &options.host, "port", &port);
    t.AddString("ca", &options.ca_file,
                "CA file to verify the aggregator (default: the system store and, for an "
                "aggregator on loopback, the fieldprof-aggregator package's certificate " +
                    std::string(kPackagedAggregatorCert) + " if there)");
    t.AddBool("insecure", &options.insecure, "do not verify the certificate");
    t.AddInt("timeout_ms", &timeout_ms, "per-request deadline", 100, 3600000);
  }
  HttpsClientOptions Resolve() const {
    HttpsClientOptions o = options;
    o.port = static_cast<uint16_t>(port);
    o.timeout = std::chrono::milliseconds(timeout_ms);
    return o;
  }
};

// GETs `target` and parses the JSON answer. A non-200 answer is an error
// carrying the status and body; `*http_status` and `*raw_body` get the
// status and the body either way.
[[nodiscard]] StatusOr<nlohmann::json> GetJson(HttpsClient& client, const std::string& target,
                                               int* http_status, std::string* raw_body);

}  // namespace fieldprof::tools

#endif  // FIELDPROF_TOOLS_SHARED_CLIENT_FLAGS_H_
