// An aggregator's address as people write it: copied from a browser, a
// config file or a colleague's message. One reader for every --host flag
// and the agent's `server` setting.
//
//   agg.example                 host, the port from --port
//   agg.example:9443            host and port
//   10.0.0.7:9443  ::1  [::1]:9443
//   https://agg.example[:9443][/]
//
// http:// is refused: the aggregator speaks HTTPS only.
#ifndef FIELDPROF_COMMON_NET_ENDPOINT_H_
#define FIELDPROF_COMMON_NET_ENDPOINT_H_

#include <cstdint>
#include <string>
#include <string_view>

#include "common/base/status.h"
#include "common/settings/options.h"

namespace fieldprof {

struct Endpoint {
  std::string host;   // a name, an IPv4 address or a bare IPv6 address
  uint16_t port = 0;  // 0: the text named none
};

[[nodiscard]] StatusOr<Endpoint> ParseEndpoint(std::string_view text);

// "host:port", with brackets around an IPv6 address: "[::1]:8443".
std::string FormatHostPort(const std::string& host, uint16_t port);

// True for an IPv4 or IPv6 address literal (no name to resolve or send as
// TLS SNI).
bool IsAddressLiteral(const std::string& host);

// Makes `host_flag` read addresses as above once `t` has parsed: `*host`
// becomes the bare host and a port in it goes to `*port`. A port given in
// both places, differently, is an error that names both.
void AddEndpointCheck(OptionTable& t, const std::string& host_flag, std::string* host,
                      const std::string& port_flag, int64_t* port);

}  // namespace fieldprof

#endif  // FIELDPROF_COMMON_NET_ENDPOINT_H_
