#include "aggregator/clickhouse/client.h"

#include "common/settings/options.h"

namespace fieldprof::aggregator {
namespace {

// "Code: 286, e.displayText() = ..." -> 286; 0 when absent.
int ErrorCodeOf(std::string_view body) {
  const size_t at = body.find("Code: ");
  if (at == std::string_view::npos) return 0;
  int code = 0;
  for (size_t i = at + 6; i < body.size() && body[i] >= '0' && body[i] <= '9'; ++i) {
    code = code * 10 + (body[i] - '0');
    if (code > 100000) return 0;
  }
  return code;
}

std::string Target(const std::string& query, const ClickHouseSettings& settings) {
  std::string t = "/?";
  for (const auto& [name, value] : settings) t += name + "=" + UrlEncode(value) + "&";
  if (!query.empty()) t += "query=" + UrlEncode(query);
  return t;
}

}  // namespace

Status ClickHouseClient::Check(const StatusOr<HttpReply>& r) {
  last_code_ = 0;
  if (!r.ok()) return Unavailable("ClickHouse: " + r.status().message());
  if (r->status != 200) {
    last_code_ = ErrorCodeOf(r->body);
    return Unavailable("ClickHouse answered " + std::to_string(r->status) + ": " +
                       r->body.substr(0, 500));
  }
  return Status::Ok();
}

Status ClickHouseClient::Execute(const std::string& sql, const ClickHouseSettings& settings) {
  return Query(sql, settings).status();
}

StatusOr<std::string> ClickHouseClient::Query(const std::string& sql,
                                              const ClickHouseSettings& settings) {
  StatusOr<HttpReply> r = http_.Post(Target("", settings), "text/plain; charset=utf-8", sql);
  FP_RETURN_IF_ERROR(Check(r));
  return std::move(r->body);
}

Status ClickHouseClient::QueryStream(const std::string& sql, const ClickHouseSettings& settings,
                                     const std::function<bool(std::string_view)>& on_data) {
  return Check(http_.RequestStreaming("POST", Target("", settings), "text/plain; charset=utf-8",
                                      sql, on_data));
}

Status ClickHouseClient::InsertRowBinary(const std::string& table, const std::string& data,
                                         const ClickHouseSettings& settings) {
  StatusOr<HttpReply> r = http_.Post(Target("INSERT INTO " + table + " FORMAT RowBinary", settings),
                                     "application/octet-stream", data);
  return Check(r);
}

std::string SqlString(std::string_view s) {
  std::string out = "'";
  for (char c : s) {
    if (c == '\\' || c == '\'') out += '\\';
    out += c;
  }
  return out + "'";
}

}  // namespace fieldprof::aggregator
