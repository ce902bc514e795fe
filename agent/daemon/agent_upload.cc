// The agent's upload (agent.h): each sealed batch sent, the aggregator's
// answer read (counted, a duplicate, refused for its token or its content,
// or busy), and the backoff before the next attempt.
#include <algorithm>
#include <chrono>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <optional>
#include <sstream>
#include <utility>

#include "agent/daemon/agent.h"
#include "agent/daemon/agent_internal.h"
#include "common/base/crash_point.h"
#include "common/net/endpoint.h"
#include "common/net/https_client.h"
#include "common/wire/wire.h"

namespace fieldprof::agent {

int64_t Agent::Backoff(int retry_after_seconds) {
  const int shift = static_cast<int>(std::min<int64_t>(state_.failures, 30));
  const double base = std::min<double>(
      static_cast<double>(config_.backoff_max_ms),
      static_cast<double>(config_.backoff_initial_ms) * static_cast<double>(int64_t{1} << shift));
  std::uniform_real_distribution<double> jitter(0.5, 1.5);
  int64_t delay = static_cast<int64_t>(base * jitter(rng_));
  delay = std::min(delay, config_.backoff_max_ms);
  if (retry_after_seconds > 0)
    delay = std::max<int64_t>(delay, int64_t{retry_after_seconds} * 1000);
  return delay;
}

namespace {

// The rule an aggregator's 400 answer names ({"rule": ...}), empty if none.
std::string RefusalRule(const std::string& body) {
  const nlohmann::json j = nlohmann::json::parse(body, nullptr, /*allow_exceptions=*/false);
  if (!j.is_object() || !j.contains("rule") || !j["rule"].is_string()) return "";
  return j["rule"].get<std::string>();
}

// A refusal of the batch's upload token, not of its content: a condition
// the agent mends itself (a fresh token, then the batch again).
bool IsTokenRule(const std::string& rule) {
  return rule == "token_missing" || rule == "token_epoch" || rule == "token_invalid";
}

}  // namespace

std::string DescribeRefusal(int http_status, const std::string& host, const std::string& body) {
  const nlohmann::json j = nlohmann::json::parse(body, nullptr, /*allow_exceptions=*/false);
  std::string what = body;
  if (j.is_object() && j.contains("message") && j["message"].is_string()) {
    what = j["message"].get<std::string>();
    if (j.contains("rule") && j["rule"].is_string()) {
      what += " (rule " + j["rule"].get<std::string>() + ")";
    }
  }
  // One line a volunteer's terminal shows as text: whatever answered may
  // send any bytes.
  for (char& c : what) {
    const auto u = static_cast<unsigned char>(c);
    if (u < 0x20 || u == 0x7f) c = u == '\n' || u == '\r' || u == '\t' ? ' ' : '?';
  }
  if (what.size() > 300) what = what.substr(0, 300) + "...";
  const std::string code = "HTTP " + std::to_string(http_status) + " from " + host;
  switch (http_status) {
    case 413:
      return code + ": the batch is larger than the aggregator takes: " + what;
    case 415:
      return code + ": the aggregator does not read this agent's format: " + what;
    default:
      return code + ": the aggregator refused what the batch holds: " + what;
  }
}

StatusOr<OutboxEntry> Agent::Restamp(const OutboxEntry& e, const std::string& bytes,
                                     const std::string& rule, HttpsClient& client) {
  wire::Batch batch;
  if (!batch.ParseFromString(bytes)) return DataLoss(e.path + " is not a batch");
  // The aggregator asks for tokens, whatever the agent believed when it
  // sealed this batch (unreachable then, or another setting).
  state_.tokens_required = 1;
  // A token its key does not take: the ones held were most likely made
  // with the same key (the operator changed the secret). Fresh ones.
  if (rule == "token_invalid" && std::remove(TokensPath().c_str()) != 0 && errno != ENOENT) {
    return IOError("cannot remove " + TokensPath() + ": " + std::strerror(errno));
  }
  StatusOr<std::optional<UploadToken>> token = TakeToken();
  if (!token.ok() || !token->has_value()) {
    RefreshTokens(client);
    token = TakeToken();
  }
  if (!token.ok()) return token.status();
  if (!token->has_value()) {
    return Unavailable("the aggregator refused the batch for its upload token (" + rule +
                       ") but issues none (" + state_.tokens_result + "); the batch waits");
  }
  const UploadToken& t = **token;
  batch.set_batch_id(t.input);
  batch.set_token(t.output);
  batch.set_token_epoch(t.epoch);
  const std::string created = e.name.substr(0, e.name.find('-'));
  return outbox_.Rewrite(e, created + "-" + HexEncode(t.input), batch.SerializeAsString());
}

Status Agent::Upload(PassResult* result) {
  FP_ASSIGN_OR_RETURN(std::vector<OutboxEntry> entries, outbox_.List());
  if (entries.empty()) return Status::Ok();
  HttpsClient& client = Client();  // one connection, kept alive across the batches
  auto fail = [&](const std::string& why, int retry_after) {
    state_.last_upload_result = why;
    ++state_.failures;
    state_.next_attempt_unix_ms = NowMs() + Backoff(retry_after);
  };
  for (OutboxEntry e : entries) {
    FP_ASSIGN_OR_RETURN(std::string bytes, outbox_.Read(e));
    // Sent once, and once more after a fresh token at most: a second
    // refusal of a token just issued is the aggregator's problem, not this
    // batch's.
    for (bool restamped = false;; restamped = true) {
      state_.last_upload_unix_ms = NowMs();
      CrashPoint("upload-sending");
      StatusOr<HttpReply> reply = client.Post("/v1/batches", std::string(kBatchContentType), bytes);
      if (!reply.ok()) {
        fail("unreachable: " + reply.status().message(), -1);
        return reply.status();
      }
      const int code = reply->status;
      if (code >= 200 && code < 300) {
        CrashPoint("upload-acked");
        FP_RETURN_IF_ERROR(outbox_.Remove(e));
        ++result->batches_uploaded;
        ++state_.batches_uploaded;
        state_.last_upload_result = "ok";
        state_.last_success_unix_ms = state_.last_upload_unix_ms;
        state_.failures = 0;
        state_.next_attempt_unix_ms = 0;
        break;
      }
      const std::string rule = code == 400 ? RefusalRule(reply->body) : "";
      if (IsTokenRule(rule)) {
        // Refused for its token alone (none: sealed while the aggregator
        // was out of reach; expired: it waited too long; not taken: a new
        // key). The aggregator applied nothing of it: it answers an id it
        // already holds as a duplicate before it looks at the token. So the
        // batch takes a fresh token and, with it, a new id, and goes again.
        StatusOr<OutboxEntry> moved =
            restamped ? StatusOr<OutboxEntry>(
                            Unavailable("the aggregator refused a fresh upload token too: " +
                                        DescribeRefusal(code, config_.server_host, reply->body)))
                      : Restamp(e, bytes, rule, client);
        if (!moved.ok()) {
          if (moved.status().code() != StatusCode::kUnavailable) return moved.status();
          fail("waiting for an upload token: " + moved.status().message(), -1);
          return moved.status();
        }
        e = std::move(*moved);
        FP_ASSIGN_OR_RETURN(bytes, outbox_.Read(e));
        ++result->batches_restamped;
        continue;
      }
      if (code == 400 || code == 413 || code == 415) {
        // The aggregator will never take this batch: keep it aside, say why.
        wire::Batch b;
        const uint64_t records = b.ParseFromString(bytes) ? b.records_size() : 0;
        const std::string why = DescribeRefusal(code, config_.server_host, reply->body);
        FP_RETURN_IF_ERROR(outbox_.Quarantine(e, why));
        ++result->batches_quarantined;
        ++state_.batches_quarantined;
        state_.records_quarantined += static_cast<int64_t>(records);
        state_.last_upload_result = "set aside: " + why;
        break;
      }
      fail("HTTP " + std::to_string(code), reply->retry_after_seconds);
      return Unavailable(
          "the aggregator answered HTTP " + std::to_string(code) +
          (reply->retry_after_seconds > 0
               ? " (Retry-After " + std::to_string(reply->retry_after_seconds) + " s)"
               : ""));
    }
  }
  return Status::Ok();
}

}  // namespace fieldprof::agent
