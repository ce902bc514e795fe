// RFC 9497's VOPRF, ciphersuite ristretto255-SHA512 (mode 0x01), over
// libsodium's ristretto255 group and scalar operations. No curve
// arithmetic of our own: this file frames the transcripts the RFC
// defines (expand_message_xmd of RFC 9380, HashToGroup, HashToScalar,
// the batched DLEQ proof) and calls libsodium for the rest.
//
// fieldprof's anonymous upload tokens (common/crypto/upload_tokens.h) use it the
// Privacy Pass way: the client blinds random inputs, the issuer evaluates
// them and proves it used its published key; the client unblinds, and
// later spends (input, output) pairs that the server checks with its
// private key alone, unable to link them to their issuance.
//
// All byte strings are the RFC's encodings: elements and scalars 32
// bytes, outputs 64 bytes, proofs 64 bytes (c || s). Errors are
// InvalidArgument (bad encodings, a proof that does not verify, an input
// that hashes to the identity).
#ifndef FIELDPROF_COMMON_CRYPTO_VOPRF_H_
#define FIELDPROF_COMMON_CRYPTO_VOPRF_H_

#include <string>
#include <string_view>
#include <vector>

#include "common/base/status.h"

namespace fieldprof::voprf {

inline constexpr size_t kElementBytes = 32;
inline constexpr size_t kScalarBytes = 32;
inline constexpr size_t kOutputBytes = 64;
inline constexpr size_t kProofBytes = 64;

struct KeyPair {
  std::string secret;  // skS, a scalar
  std::string pub;     // pkS = skS * G
};

// DeriveKeyPair(seed, info) of RFC 9497 section 3.2.1.
[[nodiscard]] StatusOr<KeyPair> DeriveKeyPair(std::string_view seed, std::string_view info);

// A random nonzero scalar.
std::string RandomScalar();

// The client's Blind: blinded = blind * HashToGroup(input). `blind` is a
// scalar (RandomScalar(), or the RFC's test value).
[[nodiscard]] StatusOr<std::string> Blind(std::string_view input, std::string_view blind);

// The issuer's BlindEvaluate over a batch: evaluated[i] = skS * blinded[i],
// and one proof for all of them. `proof_random` is a scalar (empty: a
// fresh RandomScalar()).
struct Evaluation {
  std::vector<std::string> evaluated;
  std::string proof;
};
[[nodiscard]] StatusOr<Evaluation> BlindEvaluate(const KeyPair& key,
                                                 const std::vector<std::string>& blinded,
                                                 std::string_view proof_random = {});

// The client's check that `evaluation` is `pub`'s key applied to `blinded`.
[[nodiscard]] Status VerifyProof(std::string_view pub, const std::vector<std::string>& blinded,
                                 const Evaluation& evaluation);

// The client's Finalize for one input, after VerifyProof: the PRF output.
[[nodiscard]] StatusOr<std::string> Finalize(std::string_view input, std::string_view blind,
                                             std::string_view evaluated);

// The server's own evaluation of an input (no blinding): the output the
// client's Finalize gave, for checking a spent token.
[[nodiscard]] StatusOr<std::string> Evaluate(std::string_view secret, std::string_view input);

// RFC 9380's expand_message_xmd with SHA-512 (exposed for its tests).
std::string ExpandMessageXmd(std::string_view msg, std::string_view dst, size_t len);

}  // namespace fieldprof::voprf

#endif  // FIELDPROF_COMMON_CRYPTO_VOPRF_H_
