#include "aggregator/clickhouse/servers.h"

#include <cstdlib>

#include "common/settings/options.h"

namespace fieldprof::aggregator {

StatusOr<std::vector<std::vector<HttpsClientOptions>>> ParseClickHouseShards(
    std::string_view urls, std::chrono::milliseconds timeout) {
  std::vector<std::vector<HttpsClientOptions>> shards;
  auto bad = [&](std::string_view why) {
    return InvalidArgument("clickhouse_url: " + std::string(why) + " in '" + std::string(urls) +
                           "' (want http://HOST:PORT, replicas joined by ',', shards by ';')");
  };
  size_t at = 0;
  while (at <= urls.size()) {
    const size_t semi = urls.find(';', at);
    std::string_view shard = urls.substr(at, semi == std::string_view::npos ? semi : semi - at);
    std::vector<HttpsClientOptions>& replicas = shards.emplace_back();
    size_t r = 0;
    while (r <= shard.size()) {
      const size_t comma = shard.find(',', r);
      std::string_view url =
          TrimSpace(shard.substr(r, comma == std::string_view::npos ? comma : comma - r));
      if (!url.starts_with("http://")) return bad("a server without http://");
      url.remove_prefix(7);
      while (!url.empty() && url.back() == '/') url.remove_suffix(1);
      const size_t colon = url.rfind(':');
      HttpsClientOptions o;
      o.tls = false;
      o.timeout = timeout;
      o.host = std::string(colon == std::string_view::npos ? url : url.substr(0, colon));
      long port = 8123;
      if (colon != std::string_view::npos) {
        const std::string digits(url.substr(colon + 1));
        char* end = nullptr;
        port = std::strtol(digits.c_str(), &end, 10);
        if (digits.empty() || *end != '\0') port = -1;
      }
      if (o.host.empty() || port <= 0 || port > 65535) return bad("a bad host or port");
      o.port = static_cast<uint16_t>(port);
      replicas.push_back(std::move(o));
      if (comma == std::string_view::npos) break;
      r = comma + 1;
    }
    if (semi == std::string_view::npos) break;
    at = semi + 1;
  }
  return shards;
}

StatusOr<std::vector<HttpsClientOptions>> ParseClickHouseServers(
    std::string_view urls, std::chrono::milliseconds timeout) {
  FP_ASSIGN_OR_RETURN(std::vector<std::vector<HttpsClientOptions>> shards,
                      ParseClickHouseShards(urls, timeout));
  std::vector<HttpsClientOptions> servers;
  for (const auto& shard : shards) servers.insert(servers.end(), shard.begin(), shard.end());
  return servers;
}

Status ChOnAnyServer(const std::vector<HttpsClientOptions>& servers, size_t start,
                     const std::function<Status(ClickHouseClient&)>& fn, const bool* final) {
  Status last = Unavailable("no ClickHouse server");
  for (size_t i = 0; i < servers.size(); ++i) {
    ClickHouseClient ch(servers[(start + i) % servers.size()]);
    last = fn(ch);
    if (last.ok() || ch.last_error_code() != 0 || (final != nullptr && *final)) return last;
  }
  return last;
}

StatusOr<std::string> ChQueryAny(const std::vector<HttpsClientOptions>& servers, size_t start,
                                 const std::string& sql, const ClickHouseSettings& settings) {
  std::string answer;
  Status s = ChOnAnyServer(servers, start, [&](ClickHouseClient& ch) {
    FP_ASSIGN_OR_RETURN(std::string r, ch.Query(sql, settings));
    answer = std::move(r);
    return Status::Ok();
  });
  if (!s.ok()) return s;
  return answer;
}

std::string ChGlobalQuorum(size_t servers) { return servers > 1 ? "2" : "0"; }

}  // namespace fieldprof::aggregator
