// A small blocking HTTPS/1.1 client (Boost.Beast + OpenSSL) with keep-alive,
// certificate and host name verification, and TLS session resumption. Used by
// the load generator and the tests; one client per thread.
//
//   HttpsClient c({.host = "127.0.0.1", .port = 8443, .ca_file = "cert.pem"});
//   StatusOr<HttpReply> r = c.Post("/v1/batches", "application/x-protobuf", body);
#ifndef FIELDPROF_COMMON_NET_HTTPS_CLIENT_H_
#define FIELDPROF_COMMON_NET_HTTPS_CLIENT_H_

#include <chrono>
#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "common/base/status.h"

namespace fieldprof {

// Where the fieldprof-aggregator package puts the certificate it makes at
// install (deploy/debian/fieldprof-aggregator/postinst).
inline constexpr char kPackagedAggregatorCert[] = "/etc/fieldprof/tls/cert.pem";

// Whether `host` names this machine's loopback interface: localhost, an
// address in 127.0.0.0/8, or ::1.
bool IsLoopbackHost(const std::string& host);

struct HttpsClientOptions {
  std::string host = "127.0.0.1";
  uint16_t port = 8443;
  // CA bundle to verify the server with; empty = the system store.
  std::string ca_file;
  // Skip certificate verification (only for ad-hoc testing).
  bool insecure = false;
  // Deadline for connecting and for each request/response. Default: 30 s.
  std::chrono::milliseconds timeout{30000};
  // false: plain HTTP (a ClickHouse on loopback); ca_file and
  // insecure then do not apply.
  bool tls = true;
  // Connect from this local address (e.g. 127.0.3.1 on loopback, to be
  // another source to the aggregator's per-source limits); empty: any.
  std::string local_address;
  // Trusted besides the system store when ca_file is empty, `host` is a
  // loopback name or address (localhost, 127.0.0.0/8, ::1) and this file
  // exists: the self-signed certificate the aggregator package makes at
  // install (kPackagedAggregatorCert), so that the packaged agent and
  // commands reach the packaged aggregator on the same machine unset.
  std::string loopback_ca_file;
};

// Extra request headers (name, value).
using HttpHeaders = std::vector<std::pair<std::string, std::string>>;

struct HttpReply {
  int status = 0;
  std::string etag;  // the ETag header, if any
  std::string body;
  std::string content_type;
  int retry_after_seconds = -1;  // -1 when absent
  bool keep_alive = true;
};

class HttpsClient {
 public:
  explicit HttpsClient(HttpsClientOptions options);
  ~HttpsClient();
  HttpsClient(const HttpsClient&) = delete;
  HttpsClient& operator=(const HttpsClient&) = delete;

  // Connects (or reuses the open connection) and sends one request. A
  // connection the server closed is reopened once. Network and TLS failures
  // are Unavailable; the reply's HTTP status is in HttpReply.
  [[nodiscard]] StatusOr<HttpReply> Request(const std::string& method, const std::string& target,
                                            const std::string& content_type,
                                            const std::string& body,
                                            const HttpHeaders& headers = {});
  // Like Request, but a 2xx answer's body goes to `on_data` as it arrives
  // (pieces of up to 64 KiB) instead of into HttpReply::body, which stays
  // empty: for answers too large to hold, such as a ClickHouse scan. Any
  // other answer's body (an error) is kept in HttpReply::body, up to 64 KiB.
  // The timeout applies to each piece. `on_data` returns false to stop reading
  // (the connection is then closed, and the reply is returned as it stands).
  [[nodiscard]] StatusOr<HttpReply> RequestStreaming(
      const std::string& method, const std::string& target, const std::string& content_type,
      const std::string& body, const std::function<bool(std::string_view)>& on_data,
      const HttpHeaders& headers = {});
  [[nodiscard]] StatusOr<HttpReply> Get(const std::string& target,
                                        const HttpHeaders& headers = {}) {
    return Request("GET", target, "", "", headers);
  }
  [[nodiscard]] StatusOr<HttpReply> Post(const std::string& target, const std::string& content_type,
                                         const std::string& body) {
    return Request("POST", target, content_type, body);
  }
  // Closes the connection (keeps the TLS session for resumption).
  void Close();
  // Whether the last connection resumed an earlier TLS session.
  bool session_reused() const;
  int connections_opened() const;
  // The negotiated protocol of the open connection ("TLSv1.3"), or "".
  std::string tls_version() const;

 private:
  class Impl;
  std::unique_ptr<Impl> impl_;
};

// Percent-encodes a query parameter value.
std::string UrlEncode(const std::string& s);

}  // namespace fieldprof

#endif  // FIELDPROF_COMMON_NET_HTTPS_CLIENT_H_
