// Anonymous upload tokens (common/crypto/upload_tokens.h):
//   GET  /v1/tokens   {"epoch","epoch_seconds","public_key","max_per_request"}:
//                     the issuer's key of the current epoch, which agents
//                     check the issuer's proofs against
//   POST /v1/tokens   a wire::TokenRequest (application/x-protobuf): the
//                     blinded inputs evaluated, with one proof, as a
//                     wire::TokenResponse. Limited per source network by
//                     the server (ServerOptions::token_limits).
// Without tokens (no --token_secret_file) both answer 404, which agents
// read as "batches need no token".
#ifndef FIELDPROF_AGGREGATOR_INGEST_TOKEN_HANDLER_H_
#define FIELDPROF_AGGREGATOR_INGEST_TOKEN_HANDLER_H_

#include <string_view>

#include "aggregator/http/http_types.h"
#include "aggregator/ingest/ingest_handler.h"
#include "common/crypto/upload_tokens.h"

namespace fieldprof::aggregator {

class TokenHandler {
 public:
  // `issuer` (null: no tokens) must outlive the handler.
  TokenHandler(const TokenIssuer* issuer, WallClock clock)
      : issuer_(issuer), clock_(std::move(clock)) {}

  HttpResponse Info();
  HttpResponse Issue(std::string_view content_type, std::string_view body);

 private:
  int64_t NowSeconds() const;

  const TokenIssuer* const issuer_;
  const WallClock clock_;
};

}  // namespace fieldprof::aggregator

#endif  // FIELDPROF_AGGREGATOR_INGEST_TOKEN_HANDLER_H_
