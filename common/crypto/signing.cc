#include "common/crypto/signing.h"

#include <openssl/bio.h>
#include <openssl/err.h>
#include <openssl/evp.h>
#include <openssl/pem.h>
#include <openssl/sha.h>

#include <fstream>
#include <sstream>

#include "common/wire/wire.h"

namespace fieldprof {

namespace {

// The most recent OpenSSL error, readable.
std::string OpenSslError() {
  const unsigned long e = ERR_get_error();
  ERR_clear_error();
  if (e == 0) return "unknown OpenSSL error";
  char buf[256];
  ERR_error_string_n(e, buf, sizeof buf);
  return buf;
}

struct BioFree {
  void operator()(BIO* b) const { BIO_free(b); }
};
struct PkeyFree {
  void operator()(EVP_PKEY* k) const { EVP_PKEY_free(k); }
};
struct MdCtxFree {
  void operator()(EVP_MD_CTX* c) const { EVP_MD_CTX_free(c); }
};
using PkeyPtr = std::unique_ptr<EVP_PKEY, PkeyFree>;

std::unique_ptr<BIO, BioFree> MemBio(std::string_view data) {
  return std::unique_ptr<BIO, BioFree>(BIO_new_mem_buf(data.data(), static_cast<int>(data.size())));
}

}  // namespace

struct Ed25519Signer::Key {
  PkeyPtr pkey;
};

Ed25519Signer::Ed25519Signer(std::unique_ptr<Key> key) : key_(std::move(key)) {}
Ed25519Signer::Ed25519Signer(Ed25519Signer&&) noexcept = default;
Ed25519Signer& Ed25519Signer::operator=(Ed25519Signer&&) noexcept = default;
Ed25519Signer::~Ed25519Signer() = default;

StatusOr<Ed25519Signer> Ed25519Signer::FromPem(std::string_view pem) {
  auto bio = MemBio(pem);
  PkeyPtr k(PEM_read_bio_PrivateKey(bio.get(), nullptr, nullptr, nullptr));
  if (k == nullptr) return InvalidArgument("not a PEM private key: " + OpenSslError());
  if (EVP_PKEY_id(k.get()) != EVP_PKEY_ED25519) {
    return InvalidArgument("the private key is not an Ed25519 key");
  }
  return Ed25519Signer(std::make_unique<Key>(Key{std::move(k)}));
}

StatusOr<Ed25519Signer> Ed25519Signer::FromPemFile(const std::string& path) {
  std::ifstream in(path);
  if (!in) return NotFound("cannot read signing key " + path);
  std::ostringstream buf;
  buf << in.rdbuf();
  StatusOr<Ed25519Signer> s = FromPem(buf.str());
  if (!s.ok()) return InvalidArgument(path + ": " + s.status().message());
  return s;
}

StatusOr<Ed25519Signer> Ed25519Signer::Generate() {
  PkeyPtr k(EVP_PKEY_Q_keygen(nullptr, nullptr, "ED25519"));
  if (k == nullptr) return Internal("Ed25519 key generation: " + OpenSslError());
  return Ed25519Signer(std::make_unique<Key>(Key{std::move(k)}));
}

StatusOr<std::string> Ed25519Signer::Sign(std::string_view message) const {
  std::unique_ptr<EVP_MD_CTX, MdCtxFree> ctx(EVP_MD_CTX_new());
  std::string sig(kEd25519SignatureBytes, '\0');
  size_t len = sig.size();
  if (ctx == nullptr ||
      EVP_DigestSignInit(ctx.get(), nullptr, nullptr, nullptr, key_->pkey.get()) != 1 ||
      EVP_DigestSign(ctx.get(), reinterpret_cast<unsigned char*>(sig.data()), &len,
                     reinterpret_cast<const unsigned char*>(message.data()), message.size()) != 1) {
    return Internal("Ed25519 signing: " + OpenSslError());
  }
  sig.resize(len);
  return sig;
}

std::string Ed25519Signer::PublicKeyPem() const {
  std::unique_ptr<BIO, BioFree> bio(BIO_new(BIO_s_mem()));
  PEM_write_bio_PUBKEY(bio.get(), key_->pkey.get());
  char* data = nullptr;
  const long n = BIO_get_mem_data(bio.get(), &data);
  return std::string(data, static_cast<size_t>(n));
}

std::string Ed25519Signer::KeyId() const {
  unsigned char raw[32];
  size_t len = sizeof raw;
  EVP_PKEY_get_raw_public_key(key_->pkey.get(), raw, &len);
  return HexEncode(Sha256(std::string_view(reinterpret_cast<const char*>(raw), len)).substr(0, 8));
}

Status VerifyEd25519(std::string_view public_key_pem, std::string_view message,
                     std::string_view signature) {
  auto bio = MemBio(public_key_pem);
  PkeyPtr k(PEM_read_bio_PUBKEY(bio.get(), nullptr, nullptr, nullptr));
  if (k == nullptr) return InvalidArgument("not a PEM public key: " + OpenSslError());
  if (EVP_PKEY_id(k.get()) != EVP_PKEY_ED25519) {
    return InvalidArgument("the public key is not an Ed25519 key");
  }
  if (signature.size() != kEd25519SignatureBytes) {
    return InvalidArgument("signature: " + std::to_string(signature.size()) +
                           " bytes, an Ed25519 signature has 64");
  }
  std::unique_ptr<EVP_MD_CTX, MdCtxFree> ctx(EVP_MD_CTX_new());
  if (ctx == nullptr || EVP_DigestVerifyInit(ctx.get(), nullptr, nullptr, nullptr, k.get()) != 1) {
    return Internal("Ed25519 verification: " + OpenSslError());
  }
  const int ok = EVP_DigestVerify(
      ctx.get(), reinterpret_cast<const unsigned char*>(signature.data()), signature.size(),
      reinterpret_cast<const unsigned char*>(message.data()), message.size());
  ERR_clear_error();
  if (ok != 1) return InvalidArgument("signature does not match (tampered, or another key)");
  return Status::Ok();
}

std::string Sha256(std::string_view data) {
  unsigned char out[SHA256_DIGEST_LENGTH];
  SHA256(reinterpret_cast<const unsigned char*>(data.data()), data.size(), out);
  return std::string(reinterpret_cast<const char*>(out), sizeof out);
}

}  // namespace fieldprof
