#include "common/crypto/upload_tokens.h"

#include <openssl/crypto.h>

#include <sstream>

#include "common/wire/wire.h"

namespace fieldprof {
namespace {

Status Rule(std::string_view rule, const std::string& detail) {
  return InvalidArgument(std::string(rule) + ": " + detail);
}

std::string RandomBytes(size_t n) {
  std::string s = voprf::RandomScalar();  // libsodium's randombytes underneath
  while (s.size() < n) s += voprf::RandomScalar();
  s.resize(n);
  return s;
}

}  // namespace

TokenIssuer::TokenIssuer(std::string secret, TokenIssuerOptions options)
    : secret_(std::move(secret)), options_(options) {}

StatusOr<voprf::KeyPair> TokenIssuer::KeyFor(int64_t epoch) const {
  std::lock_guard lock(mutex_);
  if (auto it = keys_.find(epoch); it != keys_.end()) return it->second;
  FP_ASSIGN_OR_RETURN(voprf::KeyPair k, voprf::DeriveKeyPair(secret_,
                                                             "fieldprof upload tokens, "
                                                             "epoch " +
                                                                 std::to_string(epoch)));
  if (keys_.size() >= 8) keys_.erase(keys_.begin());
  keys_.emplace(epoch, k);
  return k;
}

StatusOr<wire::TokenResponse> TokenIssuer::Issue(const wire::TokenRequest& request,
                                                 int64_t now_s) const {
  if (request.blinded_size() == 0) return InvalidArgument("no blinded elements");
  if (request.blinded_size() > options_.max_per_request) {
    return InvalidArgument(std::to_string(request.blinded_size()) + " blinded elements; at most " +
                           std::to_string(options_.max_per_request) + " a request");
  }
  const int64_t epoch = EpochAt(now_s);
  FP_ASSIGN_OR_RETURN(voprf::KeyPair key, KeyFor(epoch));
  std::vector<std::string> blinded(request.blinded().begin(), request.blinded().end());
  FP_ASSIGN_OR_RETURN(voprf::Evaluation e, voprf::BlindEvaluate(key, blinded));
  wire::TokenResponse r;
  r.set_epoch(epoch);
  r.set_public_key(key.pub);
  for (std::string& ev : e.evaluated) r.add_evaluated(std::move(ev));
  r.set_proof(e.proof);
  return r;
}

Status TokenIssuer::Check(std::string_view batch_id, std::string_view token, int64_t epoch,
                          int64_t now_s) const {
  if (token.empty()) return Rule("token_missing", "this aggregator takes batches with a token");
  const int64_t current = EpochAt(now_s);
  if (epoch != current && epoch != current - 1) {
    return Rule("token_epoch", "the token is of epoch " + std::to_string(epoch) +
                                   "; this aggregator takes " + std::to_string(current - 1) +
                                   " and " + std::to_string(current));
  }
  if (token.size() != voprf::kOutputBytes) {
    return Rule("token_invalid", "the token is " + std::to_string(token.size()) + " bytes, not 64");
  }
  FP_ASSIGN_OR_RETURN(voprf::KeyPair key, KeyFor(epoch));
  FP_ASSIGN_OR_RETURN(std::string expected, voprf::Evaluate(key.secret, batch_id));
  if (CRYPTO_memcmp(expected.data(), token.data(), expected.size()) != 0) {
    return Rule("token_invalid", "the token was not issued for this batch id");
  }
  return Status::Ok();
}

StatusOr<TokenRequestState> MakeTokenRequest(int n) {
  TokenRequestState s;
  for (int i = 0; i < n; ++i) {
    std::string input = RandomBytes(kBatchIdBytes);
    std::string blind = voprf::RandomScalar();
    FP_ASSIGN_OR_RETURN(std::string blinded, voprf::Blind(input, blind));
    s.request.add_blinded(std::move(blinded));
    s.inputs.push_back(std::move(input));
    s.blinds.push_back(std::move(blind));
  }
  return s;
}

StatusOr<std::vector<UploadToken>> FinishTokenRequest(const TokenRequestState& state,
                                                      const wire::TokenResponse& response,
                                                      std::string_view public_key) {
  if (response.public_key() != public_key) {
    return InvalidArgument("the issuer answered with another key than it publishes");
  }
  voprf::Evaluation e;
  e.evaluated.assign(response.evaluated().begin(), response.evaluated().end());
  e.proof = response.proof();
  const std::vector<std::string> blinded(state.request.blinded().begin(),
                                         state.request.blinded().end());
  FP_RETURN_IF_ERROR(voprf::VerifyProof(public_key, blinded, e));
  std::vector<UploadToken> tokens;
  for (size_t i = 0; i < state.inputs.size(); ++i) {
    FP_ASSIGN_OR_RETURN(std::string out,
                        voprf::Finalize(state.inputs[i], state.blinds[i], e.evaluated[i]));
    tokens.push_back({response.epoch(), state.inputs[i], std::move(out)});
  }
  return tokens;
}

StatusOr<std::string> TokenKeyToTrust(const wire::Manifest* manifest, int64_t epoch,
                                      std::string_view served) {
  if (manifest != nullptr) {
    for (const wire::TokenKey& k : manifest->token_keys()) {
      if (k.epoch() != epoch) continue;
      if (k.public_key() != served) {
        return InvalidArgument("the issuer serves another key for epoch " + std::to_string(epoch) +
                               " than its signed snapshot lists");
      }
      return k.public_key();
    }
  }
  return std::string(served);
}

std::string FormatTokens(const std::vector<UploadToken>& tokens) {
  std::string out;
  for (const UploadToken& t : tokens) {
    out += std::to_string(t.epoch) + " " + HexEncode(t.input) + " " + HexEncode(t.output) + "\n";
  }
  return out;
}

StatusOr<std::vector<UploadToken>> ParseTokens(std::string_view text) {
  std::vector<UploadToken> tokens;
  std::istringstream in{std::string(text)};
  int line = 0;
  for (std::string epoch, input, output; in >> epoch >> input >> output;) {
    ++line;
    UploadToken t;
    char* end = nullptr;
    t.epoch = std::strtoll(epoch.c_str(), &end, 10);
    if (*end != '\0' || !HexDecode(input, &t.input) || !HexDecode(output, &t.output) ||
        t.input.size() != kBatchIdBytes || t.output.size() != voprf::kOutputBytes) {
      return DataLoss("token file line " + std::to_string(line) + " is damaged");
    }
    tokens.push_back(std::move(t));
  }
  return tokens;
}

}  // namespace fieldprof
