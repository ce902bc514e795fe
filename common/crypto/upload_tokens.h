// Anonymous upload tokens: a bounded number of batches per token request,
// and no link from a batch to the request its token came from.
//
// The Privacy Pass architecture (RFC 9576) with a privately verifiable
// token: RFC 9497's VOPRF over ristretto255 (common/crypto/voprf.h).
//   1. The agent draws N random 16-byte inputs, blinds them and POSTs the
//      blinded elements to /v1/tokens. The issuer (the aggregator, rate
//      limited per source network) evaluates them with its key of the
//      current epoch and proves, with one DLEQ proof, that it used the
//      key it publishes at GET /v1/tokens. The agent checks the proof and
//      unblinds: N tokens (input, output).
//   2. Each batch spends one: its batch id IS the token's input, and the
//      batch carries the output and the epoch. The aggregator recomputes
//      the output from the batch id with its private key; it never saw the
//      input at issuance (blinded), so it cannot tell which request a
//      token came from.
//   3. Spent twice is sent twice: the same batch id, which the
//      exactly-once path answers as a duplicate and applies once. So no
//      extra state is kept for spent tokens, as long as batch ids are
//      remembered longer than a token lives (two epochs): the aggregator
//      checks that at start.
//
// Keys: one per epoch (default a week), derived from the operator's
// secret (RFC 9497 DeriveKeyPair with the epoch in the info), so every
// aggregator with the same secret issues and checks the same tokens, and
// nothing needs to be shared at run time. Tokens of the current and the
// previous epoch are taken.
#ifndef FIELDPROF_COMMON_CRYPTO_UPLOAD_TOKENS_H_
#define FIELDPROF_COMMON_CRYPTO_UPLOAD_TOKENS_H_

#include <cstdint>
#include <map>
#include <mutex>
#include <string>
#include <string_view>
#include <vector>

#include "common/base/status.h"
#include "common/crypto/voprf.h"
#include "common/proto/fieldprof.pb.h"

namespace fieldprof {

struct TokenIssuerOptions {
  int64_t epoch_s = 7 * 86400;
  int max_per_request = 64;
};

class TokenIssuer {
 public:
  // `secret`: at least 32 bytes, the operator's (deploy/make-token-secret).
  TokenIssuer(std::string secret, TokenIssuerOptions options);

  int64_t EpochAt(int64_t unix_s) const { return unix_s / options_.epoch_s; }
  const TokenIssuerOptions& options() const { return options_; }
  StatusOr<voprf::KeyPair> KeyFor(int64_t epoch) const;

  // Evaluates a request with the key of `now_s`'s epoch.
  [[nodiscard]] StatusOr<wire::TokenResponse> Issue(const wire::TokenRequest& request,
                                                    int64_t now_s) const;
  // OK when `token` is the output for input `batch_id` under the key of
  // `epoch`, the current or the previous one; otherwise InvalidArgument
  // naming the rule: token_missing, token_epoch, token_invalid.
  [[nodiscard]] Status Check(std::string_view batch_id, std::string_view token, int64_t epoch,
                             int64_t now_s) const;

 private:
  const std::string secret_;
  const TokenIssuerOptions options_;
  mutable std::mutex mutex_;
  mutable std::map<int64_t, voprf::KeyPair> keys_;  // GUARDED_BY(mutex_); a few epochs
};

// The agent's side.
struct UploadToken {
  int64_t epoch = 0;
  std::string input;   // 16 bytes: the batch id it will be spent on
  std::string output;  // 64 bytes
};

struct TokenRequestState {
  wire::TokenRequest request;
  std::vector<std::string> inputs, blinds;
};
// `n` fresh inputs, blinded.
[[nodiscard]] StatusOr<TokenRequestState> MakeTokenRequest(int n);
// Checks the issuer's proof against `public_key` (the one it publishes
// for `response.epoch()`) and unblinds.
[[nodiscard]] StatusOr<std::vector<UploadToken>> FinishTokenRequest(
    const TokenRequestState& state, const wire::TokenResponse& response,
    std::string_view public_key);

// The key to check an issuer's answer for `epoch` against: the one the
// signed snapshot manifest lists for that epoch, if it lists one (then a
// different `served` key is an error), else `served` (GET /v1/tokens).
[[nodiscard]] StatusOr<std::string> TokenKeyToTrust(const wire::Manifest* manifest, int64_t epoch,
                                                    std::string_view served);

// The agent's token file: one "epoch input-hex output-hex" line each.
std::string FormatTokens(const std::vector<UploadToken>& tokens);
[[nodiscard]] StatusOr<std::vector<UploadToken>> ParseTokens(std::string_view text);

}  // namespace fieldprof

#endif  // FIELDPROF_COMMON_CRYPTO_UPLOAD_TOKENS_H_
