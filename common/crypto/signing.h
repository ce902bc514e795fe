// Ed25519 signatures and SHA-256 (OpenSSL) for the published snapshot: the
// aggregator signs each manifest with its private key; agents and tools
// verify it with the public key that ships in their configuration, and
// check each fragment against the SHA-256 the manifest lists.
//
//   StatusOr<Ed25519Signer> s = Ed25519Signer::FromPemFile("snapshot-signing.key");
//   std::string sig = s->Sign(manifest_bytes);            // 64 bytes
//   Status ok = VerifyEd25519(public_pem, manifest_bytes, sig);
//
// Keys: deploy/make-signing-key.sh (PKCS#8 private key, SPKI public key, PEM).
#ifndef FIELDPROF_COMMON_CRYPTO_SIGNING_H_
#define FIELDPROF_COMMON_CRYPTO_SIGNING_H_

#include <memory>
#include <string>
#include <string_view>

#include "common/base/status.h"

namespace fieldprof {

inline constexpr size_t kEd25519SignatureBytes = 64;

class Ed25519Signer {
 public:
  // The private key, PEM. Errors name the file and what is wrong with it.
  [[nodiscard]] static StatusOr<Ed25519Signer> FromPemFile(const std::string& path);
  [[nodiscard]] static StatusOr<Ed25519Signer> FromPem(std::string_view pem);
  // A new random key (tests).
  [[nodiscard]] static StatusOr<Ed25519Signer> Generate();

  // Ed25519 is deterministic: the same message gives the same 64 bytes.
  [[nodiscard]] StatusOr<std::string> Sign(std::string_view message) const;
  // The matching public key, PEM (SubjectPublicKeyInfo), for the clients.
  std::string PublicKeyPem() const;
  // A short stable name of the key: hex of the first 8 bytes of the
  // SHA-256 of its raw public key.
  std::string KeyId() const;

  Ed25519Signer(Ed25519Signer&&) noexcept;
  Ed25519Signer& operator=(Ed25519Signer&&) noexcept;
  ~Ed25519Signer();

 private:
  struct Key;
  explicit Ed25519Signer(std::unique_ptr<Key> key);
  std::unique_ptr<Key> key_;
};

// OK when `signature` is `message` signed by the private half of
// `public_key_pem`; otherwise InvalidArgument saying which check failed.
[[nodiscard]] Status VerifyEd25519(std::string_view public_key_pem, std::string_view message,
                                   std::string_view signature);

// SHA-256 of `data`: 32 raw bytes.
std::string Sha256(std::string_view data);

}  // namespace fieldprof

#endif  // FIELDPROF_COMMON_CRYPTO_SIGNING_H_
