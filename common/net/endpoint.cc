#include "common/net/endpoint.h"

#include <arpa/inet.h>

#include <algorithm>
#include <cctype>

namespace fieldprof {

namespace {

bool IsV4(const std::string& s) {
  in_addr a{};
  return inet_pton(AF_INET, s.c_str(), &a) == 1;
}

bool IsV6(const std::string& s) {
  in6_addr a{};
  return inet_pton(AF_INET6, s.c_str(), &a) == 1;
}

// A DNS name as resolvers take it: letters, digits, '-', '_' and dots.
bool IsHostName(std::string_view s) {
  if (s.empty() || s.size() > 253) return false;
  return std::all_of(s.begin(), s.end(), [](unsigned char c) {
    return std::isalnum(c) != 0 || c == '-' || c == '.' || c == '_';
  });
}

StatusOr<uint16_t> ParsePort(std::string_view p, std::string_view whole) {
  if (p.empty() || p.size() > 5 ||
      !std::all_of(p.begin(), p.end(), [](unsigned char c) { return std::isdigit(c) != 0; })) {
    return InvalidArgument("'" + std::string(whole) + "': the port '" + std::string(p) +
                           "' is not a number from 1 to 65535");
  }
  const int v = std::stoi(std::string(p));
  if (v < 1 || v > 65535) {
    return InvalidArgument("'" + std::string(whole) + "': port " + std::string(p) +
                           " is out of range (1 to 65535)");
  }
  return static_cast<uint16_t>(v);
}

bool StartsWithNoCase(std::string_view s, std::string_view prefix) {
  if (s.size() < prefix.size()) return false;
  for (size_t i = 0; i < prefix.size(); ++i) {
    if (std::tolower(static_cast<unsigned char>(s[i])) != prefix[i]) return false;
  }
  return true;
}

}  // namespace

StatusOr<Endpoint> ParseEndpoint(std::string_view text) {
  const std::string whole(TrimSpace(text));
  std::string_view s = whole;
  const bool url = StartsWithNoCase(s, "https://");
  if (StartsWithNoCase(s, "http://")) {
    return InvalidArgument("'" + whole +
                           "': the aggregator speaks HTTPS only; give https://HOST or HOST");
  }
  if (url) {
    s.remove_prefix(8);
  } else if (s.find("://") != std::string_view::npos) {
    return InvalidArgument("'" + whole + "': only https:// addresses are understood");
  }
  if (url) {
    const size_t slash = s.find('/');
    if (slash != std::string_view::npos) {
      if (slash + 1 != s.size()) {
        return InvalidArgument("'" + whole + "': give the aggregator's address without a path");
      }
      s.remove_suffix(1);
    }
  }
  if (s.find('@') != std::string_view::npos) {
    return InvalidArgument("'" + whole + "': no user name goes in the address");
  }
  Endpoint e;
  std::string_view port;
  if (!s.empty() && s.front() == '[') {
    const size_t close = s.find(']');
    if (close == std::string_view::npos) {
      return InvalidArgument("'" + whole + "': '[' without ']'");
    }
    e.host = std::string(s.substr(1, close - 1));
    std::string_view rest = s.substr(close + 1);
    if (!rest.empty()) {
      if (rest.front() != ':') return InvalidArgument("'" + whole + "': text after ']'");
      port = rest.substr(1);
      if (port.empty()) return InvalidArgument("'" + whole + "': ':' without a port");
    }
    if (!IsV6(e.host)) {
      return InvalidArgument("'" + whole + "': '" + e.host + "' is not an IPv6 address");
    }
  } else if (std::count(s.begin(), s.end(), ':') > 1) {
    // A bare IPv6 address; a URL needs the brackets to say where a port is.
    e.host = std::string(s);
    if (url || !IsV6(e.host)) {
      return InvalidArgument("'" + whole +
                             "': write an IPv6 address with a port as [ADDRESS]:PORT");
    }
  } else {
    const size_t colon = s.find(':');
    e.host = std::string(s.substr(0, colon));
    if (colon != std::string_view::npos) {
      port = s.substr(colon + 1);
      if (port.empty()) return InvalidArgument("'" + whole + "': ':' without a port");
    }
    if (e.host.empty()) return InvalidArgument("'" + whole + "': no host name");
    if (!IsHostName(e.host)) {
      return InvalidArgument("'" + whole + "': '" + e.host + "' is not a host name or address");
    }
  }
  if (!port.empty()) {
    FP_ASSIGN_OR_RETURN(e.port, ParsePort(port, whole));
  }
  return e;
}

std::string FormatHostPort(const std::string& host, uint16_t port) {
  const std::string h = host.find(':') != std::string::npos ? "[" + host + "]" : host;
  return h + ":" + std::to_string(port);
}

bool IsAddressLiteral(const std::string& host) { return IsV4(host) || IsV6(host); }

void AddEndpointCheck(OptionTable& t, const std::string& host_flag, std::string* host,
                      const std::string& port_flag, int64_t* port) {
  t.AddCheck([=](const OptionTable& table) -> Status {
    if (host->empty()) return Status::Ok();
    StatusOr<Endpoint> e = ParseEndpoint(*host);
    if (!e.ok()) return InvalidArgument("--" + host_flag + ": " + e.status().message());
    if (e->port != 0) {
      if (table.given(port_flag) && *port != e->port) {
        return InvalidArgument("the port is given twice: " + std::to_string(e->port) + " in --" +
                               host_flag + " " + *host + " and " + std::to_string(*port) +
                               " in --" + port_flag);
      }
      *port = e->port;
    }
    *host = e->host;
    return Status::Ok();
  });
}

}  // namespace fieldprof
