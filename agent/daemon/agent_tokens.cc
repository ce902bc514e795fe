// The agent's upload tokens (agent.h): fetched and kept in stock, one
// taken for each batch sealed, and the machine key of each day's batches.
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
#include "common/snapshot/snapshot_cache.h"
#include "common/wire/wire.h"

namespace fieldprof::agent {

namespace {

StatusOr<std::vector<UploadToken>> ReadTokens(const std::string& path) {
  std::ifstream in(path);
  if (!in) return std::vector<UploadToken>{};
  const std::string text(std::istreambuf_iterator<char>(in), {});
  return ParseTokens(text);
}

// What GET /v1/tokens says: this epoch, its length, how many tokens one
// request may ask for, and the key they are signed with.
struct TokenTerms {
  int64_t epoch = 0, epoch_seconds = 0, max_per_request = 0;
  std::string public_key;
};

// Any other shape, from whatever answers there, is refused, never thrown.
std::optional<TokenTerms> ParseTokenTerms(const std::string& body) {
  const nlohmann::json j = nlohmann::json::parse(body, nullptr, false);
  TokenTerms t;
  if (!j.is_object() || !j.contains("epoch") || !j.contains("public_key") ||
      !j.contains("epoch_seconds") || !j.contains("max_per_request") ||
      !j["epoch"].is_number_integer() || !j["epoch_seconds"].is_number_integer() ||
      !j["max_per_request"].is_number_integer() || !j["public_key"].is_string() ||
      !HexDecode(j["public_key"].get<std::string>(), &t.public_key)) {
    return std::nullopt;
  }
  t.epoch = j["epoch"].get<int64_t>();
  t.epoch_seconds = j["epoch_seconds"].get<int64_t>();
  t.max_per_request = j["max_per_request"].get<int64_t>();
  return t;
}

// `want` new tokens of `epoch`, blinded, signed by the server and proven
// signed with `public_key`. An error's message is what the agent's state
// says of it.
StatusOr<std::vector<UploadToken>> IssueTokens(HttpsClient& client, int want, int64_t epoch,
                                               const std::string& public_key) {
  StatusOr<TokenRequestState> request = MakeTokenRequest(want);
  if (!request.ok()) return Unavailable("cannot blind: " + request.status().message());
  StatusOr<HttpReply> reply = client.Post("/v1/tokens", std::string(kBatchContentType),
                                          request->request.SerializeAsString());
  if (!reply.ok()) return Unavailable("unreachable: " + reply.status().message());
  if (reply->status != 200) return Unavailable("HTTP " + std::to_string(reply->status));
  wire::TokenResponse response;
  if (!response.ParseFromString(reply->body) || response.epoch() != epoch) {
    return DataLoss("refused: the token answer is not for epoch " + std::to_string(epoch));
  }
  StatusOr<std::vector<UploadToken>> fresh = FinishTokenRequest(*request, response, public_key);
  // Another key than the published one, or a proof that does not hold:
  // tokens that could tell this agent apart. None is kept.
  if (!fresh.ok()) return DataLoss("refused: " + fresh.status().message());
  return fresh;
}

}  // namespace

void Agent::RefreshTokens(HttpsClient& client) {
  StatusOr<HttpReply> info = client.Get("/v1/tokens");
  if (!info.ok()) {
    state_.tokens_result = "unreachable: " + info.status().message();
    return;
  }
  if (info->status == 404) {
    state_.tokens_required = 0;
    state_.tokens_result = "not asked for";
    return;
  }
  if (info->status != 200) {
    state_.tokens_result = "HTTP " + std::to_string(info->status);
    return;
  }
  const std::optional<TokenTerms> terms = ParseTokenTerms(info->body);
  if (!terms) {
    state_.tokens_result = "refused: GET /v1/tokens answered no key";
    return;
  }
  const int64_t epoch = terms->epoch;
  const std::string& public_key = terms->public_key;
  // The signed snapshot, when this agent keeps one, says which key every
  // agent must see for this epoch.
  std::optional<wire::Manifest> manifest;
  if (!config_.snapshot_cache.empty()) {
    StatusOr<wire::Manifest> m = SnapshotCache(config_.snapshot_cache).Manifest();
    if (m.ok()) manifest = std::move(*m);
  }
  StatusOr<std::string> trusted =
      TokenKeyToTrust(manifest ? &*manifest : nullptr, epoch, public_key);
  if (!trusted.ok()) {
    state_.tokens_result = "refused: " + trusted.status().message();
    return;
  }
  const int want = static_cast<int>(std::clamp<int64_t>(terms->max_per_request, 1, 4096));
  state_.tokens_required = 1;
  state_.token_epoch_s = std::max<int64_t>(60, terms->epoch_seconds);
  StatusOr<std::vector<UploadToken>> held = ReadTokens(TokensPath());
  std::vector<UploadToken> tokens = held.ok() ? *held : std::vector<UploadToken>{};
  std::erase_if(tokens, [&](const UploadToken& t) { return t.epoch < epoch - 1; });
  const size_t usable = tokens.size();
  if (usable * 4 >= static_cast<size_t>(want)) {
    if (!held.ok() || usable != held->size()) {
      IgnoreError(WriteFileDurably(TokensPath(), FormatTokens(tokens)));
    }
    state_.tokens_result = "ok: " + std::to_string(usable) + " tokens";
    return;
  }
  StatusOr<std::vector<UploadToken>> fresh = IssueTokens(client, want, epoch, public_key);
  if (!fresh.ok()) {
    state_.tokens_result = fresh.status().message();
    return;
  }
  tokens.insert(tokens.end(), fresh->begin(), fresh->end());
  if (Status w = WriteFileDurably(TokensPath(), FormatTokens(tokens)); !w.ok()) {
    state_.tokens_result = "not written: " + w.message();
    return;
  }
  state_.tokens_result = "ok: " + std::to_string(tokens.size()) + " tokens";
}

StatusOr<std::optional<UploadToken>> Agent::TakeToken() {
  if (state_.tokens_required == 0) return std::optional<UploadToken>();
  StatusOr<std::vector<UploadToken>> held = ReadTokens(TokensPath());
  if (!held.ok()) {
    // Tokens can be got again; a damaged file must not stop every pass.
    std::remove(TokensPath().c_str());
    state_.tokens_result = "the token file was damaged and removed: " + held.status().message();
    return Unavailable(state_.tokens_result + "; the records wait in the spool");
  }
  std::vector<UploadToken> tokens = std::move(*held);
  const int64_t current = NowMs() / 1000 / std::max<int64_t>(60, state_.token_epoch_s);
  std::erase_if(tokens, [&](const UploadToken& t) { return t.epoch < current - 1; });
  if (tokens.empty()) {
    return Unavailable("no upload token left (the aggregator asks one per batch; " +
                       state_.tokens_result + "): the records wait in the spool");
  }
  UploadToken t = tokens.front();
  tokens.erase(tokens.begin());
  // Out of the file before it is spent: a crash after this wastes a token
  // rather than spending it twice.
  FP_RETURN_IF_ERROR(WriteFileDurably(TokensPath(), FormatTokens(tokens)));
  return std::optional<UploadToken>(std::move(t));
}

std::string Agent::MachineKeyFor(int64_t now_ms) {
  const int64_t day = now_ms / 86400000;
  std::string key;
  if (state_.machine_key_day != day || !HexDecode(state_.machine_key, &key) ||
      key.size() != kMachineKeyBytes) {
    key = RandomBatchId();  // 16 bytes from the OS entropy source, as an id
    state_.machine_key = HexEncode(key);
    state_.machine_key_day = day;
  }
  return key;
}

}  // namespace fieldprof::agent
