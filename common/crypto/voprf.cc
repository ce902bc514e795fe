#include "common/crypto/voprf.h"

#include <openssl/sha.h>
#include <sodium.h>

#include <cstring>

namespace fieldprof::voprf {
namespace {

// "OPRFV1-" || I2OSP(0x01, 1) || "-" || "ristretto255-SHA512"
const std::string& ContextString() {
  static const std::string s = std::string("OPRFV1-") + '\x01' + "-ristretto255-SHA512";
  return s;
}

const unsigned char* U(std::string_view s) {
  return reinterpret_cast<const unsigned char*>(s.data());
}
unsigned char* U(std::string& s) { return reinterpret_cast<unsigned char*>(s.data()); }

std::string Sha512(std::string_view data) {
  std::string out(SHA512_DIGEST_LENGTH, '\0');
  SHA512(U(data), data.size(), U(out));
  return out;
}

std::string I2OSP2(size_t n) {
  return std::string{static_cast<char>((n >> 8) & 0xff), static_cast<char>(n & 0xff)};
}

// I2OSP(len(x), 2) || x
std::string Framed(std::string_view x) { return I2OSP2(x.size()) + std::string(x); }

bool Ready() {
  static const bool ok = sodium_init() >= 0;
  return ok;
}

std::string HashToGroup(std::string_view msg) {
  const std::string uniform = ExpandMessageXmd(msg, "HashToGroup-" + ContextString(), 64);
  std::string p(kElementBytes, '\0');
  crypto_core_ristretto255_from_hash(U(p), U(uniform));
  return p;
}

std::string HashToScalar(std::string_view msg, std::string_view dst) {
  std::string uniform = ExpandMessageXmd(msg, dst, 64);
  std::string s(kScalarBytes, '\0');
  crypto_core_ristretto255_scalar_reduce(U(s), U(uniform));
  return s;
}

std::string HashToScalar(std::string_view msg) {
  return HashToScalar(msg, "HashToScalar-" + ContextString());
}

bool IsZero(std::string_view s) { return sodium_is_zero(U(s), s.size()) == 1; }

// q = n * p; false when p is not an element or the product is the identity.
bool Mult(std::string_view n, std::string_view p, std::string* q) {
  q->assign(kElementBytes, '\0');
  return crypto_scalarmult_ristretto255(U(*q), U(n), U(p)) == 0;
}

// (`sum` may be `a` or `b`.)
bool Add(std::string_view a, std::string_view b, std::string* sum) {
  std::string out(kElementBytes, '\0');
  if (crypto_core_ristretto255_add(U(out), U(a), U(b)) != 0) return false;
  *sum = std::move(out);
  return true;
}

bool Element(std::string_view e) {
  return e.size() == kElementBytes && crypto_core_ristretto255_is_valid_point(U(e)) == 1;
}

bool Scalar(std::string_view s) {
  // Canonical: below the group order (its reduction is itself).
  if (s.size() != kScalarBytes) return false;
  unsigned char wide[64] = {};
  std::memcpy(wide, s.data(), kScalarBytes);
  unsigned char reduced[kScalarBytes];
  crypto_core_ristretto255_scalar_reduce(reduced, wide);
  return std::memcmp(reduced, s.data(), kScalarBytes) == 0;
}

// ComputeComposites: M = sum d_i C_i and Z = sum d_i D_i, or, with a
// secret key, Z = k M (ComputeCompositesFast).
bool Composites(std::string_view b, const std::vector<std::string>& c,
                const std::vector<std::string>& d, std::string_view k, std::string* m,
                std::string* z) {
  const std::string seed = Sha512(Framed(b) + Framed("Seed-" + ContextString()));
  m->clear();
  z->clear();
  for (size_t i = 0; i < c.size(); ++i) {
    const std::string transcript =
        Framed(seed) + I2OSP2(i) + Framed(c[i]) + Framed(d[i]) + "Composite";
    const std::string di = HashToScalar(transcript);
    std::string mi, zi;
    if (!Mult(di, c[i], &mi)) return false;
    if (m->empty()) {
      *m = mi;
    } else if (!Add(*m, mi, m)) {
      return false;
    }
    if (!k.empty()) continue;
    if (!Mult(di, d[i], &zi)) return false;
    if (z->empty()) {
      *z = zi;
    } else if (!Add(*z, zi, z)) {
      return false;
    }
  }
  return k.empty() || Mult(k, *m, z);
}

std::string Challenge(std::string_view b, std::string_view m, std::string_view z,
                      std::string_view t2, std::string_view t3) {
  return HashToScalar(Framed(b) + Framed(m) + Framed(z) + Framed(t2) + Framed(t3) + "Challenge");
}

std::string FinalHash(std::string_view input, std::string_view element) {
  return Sha512(Framed(input) + Framed(element) + "Finalize");
}

}  // namespace

std::string ExpandMessageXmd(std::string_view msg, std::string_view dst, size_t len) {
  // RFC 9380 section 5.3.1, H = SHA-512: b_in_bytes 64, s_in_bytes 128.
  const std::string dst_prime = std::string(dst) + static_cast<char>(dst.size());
  const size_t ell = (len + 63) / 64;
  const std::string msg_prime =
      std::string(128, '\0') + std::string(msg) + I2OSP2(len) + std::string(1, '\0') + dst_prime;
  const std::string b0 = Sha512(msg_prime);
  std::string bi = Sha512(b0 + '\x01' + dst_prime);
  std::string out = bi;
  for (size_t i = 2; i <= ell; ++i) {
    std::string x = b0;
    for (size_t j = 0; j < x.size(); ++j) x[j] = static_cast<char>(x[j] ^ bi[j]);
    bi = Sha512(x + static_cast<char>(i) + dst_prime);
    out += bi;
  }
  out.resize(len);
  return out;
}

StatusOr<KeyPair> DeriveKeyPair(std::string_view seed, std::string_view info) {
  if (!Ready()) return Internal("libsodium did not initialise");
  const std::string derive_input = std::string(seed) + Framed(info);
  for (int counter = 0; counter < 256; ++counter) {
    KeyPair k;
    k.secret =
        HashToScalar(derive_input + static_cast<char>(counter), "DeriveKeyPair" + ContextString());
    if (IsZero(k.secret)) continue;
    k.pub.assign(kElementBytes, '\0');
    if (crypto_scalarmult_ristretto255_base(U(k.pub), U(k.secret)) != 0) continue;
    return k;
  }
  return InvalidArgument("DeriveKeyPair: no key from this seed");
}

std::string RandomScalar() {
  (void)Ready();
  std::string s(kScalarBytes, '\0');
  do {
    crypto_core_ristretto255_scalar_random(U(s));
  } while (IsZero(s));
  return s;
}

StatusOr<std::string> Blind(std::string_view input, std::string_view blind) {
  if (!Ready()) return Internal("libsodium did not initialise");
  if (!Scalar(blind) || IsZero(blind)) return InvalidArgument("blind is not a nonzero scalar");
  std::string blinded;
  if (!Mult(blind, HashToGroup(input), &blinded)) {
    return InvalidArgument("the input hashes to the identity");
  }
  return blinded;
}

StatusOr<Evaluation> BlindEvaluate(const KeyPair& key, const std::vector<std::string>& blinded,
                                   std::string_view proof_random) {
  if (!Ready()) return Internal("libsodium did not initialise");
  if (blinded.empty()) return InvalidArgument("nothing to evaluate");
  Evaluation e;
  for (const std::string& b : blinded) {
    if (!Element(b)) return InvalidArgument("a blinded element is not a ristretto255 element");
    std::string ev;
    if (!Mult(key.secret, b, &ev)) return InvalidArgument("a blinded element evaluates to nothing");
    e.evaluated.push_back(std::move(ev));
  }
  const std::string r = proof_random.empty() ? RandomScalar() : std::string(proof_random);
  std::string m, z, t2(kElementBytes, '\0'), t3;
  if (!Composites(key.pub, blinded, e.evaluated, key.secret, &m, &z) ||
      crypto_scalarmult_ristretto255_base(U(t2), U(r)) != 0 || !Mult(r, m, &t3)) {
    return InvalidArgument("the proof could not be made");
  }
  const std::string c = Challenge(key.pub, m, z, t2, t3);
  std::string ck(kScalarBytes, '\0'), s(kScalarBytes, '\0');
  crypto_core_ristretto255_scalar_mul(U(ck), U(c), U(key.secret));
  crypto_core_ristretto255_scalar_sub(U(s), U(r), U(ck));
  e.proof = c + s;
  return e;
}

Status VerifyProof(std::string_view pub, const std::vector<std::string>& blinded,
                   const Evaluation& evaluation) {
  if (!Ready()) return Internal("libsodium did not initialise");
  if (!Element(pub)) return InvalidArgument("the issuer's key is not a ristretto255 element");
  if (blinded.empty() || blinded.size() != evaluation.evaluated.size()) {
    return InvalidArgument("the evaluation does not answer every blinded element");
  }
  for (const std::string& e : evaluation.evaluated) {
    if (!Element(e)) return InvalidArgument("an evaluated element is not a ristretto255 element");
  }
  if (evaluation.proof.size() != kProofBytes) return InvalidArgument("the proof is not 64 bytes");
  const std::string_view c = std::string_view(evaluation.proof).substr(0, kScalarBytes);
  const std::string_view s = std::string_view(evaluation.proof).substr(kScalarBytes);
  if (!Scalar(c) || !Scalar(s)) return InvalidArgument("the proof's scalars are not canonical");
  std::string m, z, sa(kElementBytes, '\0'), cb, t2, sm, cz, t3;
  if (!Composites(pub, blinded, evaluation.evaluated, {}, &m, &z) ||
      crypto_scalarmult_ristretto255_base(U(sa), U(s)) != 0 || !Mult(c, pub, &cb) ||
      !Add(sa, cb, &t2) || !Mult(s, m, &sm) || !Mult(c, z, &cz) || !Add(sm, cz, &t3)) {
    return InvalidArgument("the proof does not verify");
  }
  if (sodium_memcmp(U(Challenge(pub, m, z, t2, t3)), U(c), kScalarBytes) != 0) {
    return InvalidArgument("the proof does not verify: not the issuer's key");
  }
  return Status::Ok();
}

StatusOr<std::string> Finalize(std::string_view input, std::string_view blind,
                               std::string_view evaluated) {
  if (!Ready()) return Internal("libsodium did not initialise");
  if (!Scalar(blind) || IsZero(blind)) return InvalidArgument("blind is not a nonzero scalar");
  if (!Element(evaluated)) return InvalidArgument("the evaluated element is not an element");
  std::string inverse(kScalarBytes, '\0'), n;
  if (crypto_core_ristretto255_scalar_invert(U(inverse), U(blind)) != 0 ||
      !Mult(inverse, evaluated, &n)) {
    return InvalidArgument("cannot unblind");
  }
  return FinalHash(input, n);
}

StatusOr<std::string> Evaluate(std::string_view secret, std::string_view input) {
  if (!Ready()) return Internal("libsodium did not initialise");
  if (!Scalar(secret) || IsZero(secret)) return InvalidArgument("not a secret key");
  std::string issued;
  if (!Mult(secret, HashToGroup(input), &issued)) {
    return InvalidArgument("the input hashes to the identity");
  }
  return FinalHash(input, issued);
}

}  // namespace fieldprof::voprf
