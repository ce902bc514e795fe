#include "common/crypto/signing.h"

#include <gtest/gtest.h>

#include <cstdlib>
#include <fstream>
#include <sstream>

#include "common/wire/wire.h"
#include "tests/support/test_util.h"

namespace fieldprof {
namespace {

TEST(SigningTest, SignThenVerify) {
  auto s = Ed25519Signer::Generate();
  ASSERT_TRUE(s.ok()) << s.status().ToString();
  const std::string msg = "manifest v1: 64 fragments";
  auto sig = s->Sign(msg);
  ASSERT_TRUE(sig.ok());
  EXPECT_EQ(sig->size(), kEd25519SignatureBytes);
  EXPECT_EQ(*s->Sign(msg), *sig);  // deterministic: same bytes for the same manifest
  EXPECT_TRUE(VerifyEd25519(s->PublicKeyPem(), msg, *sig).ok());
  EXPECT_EQ(s->KeyId().size(), 16u);
}

TEST(SigningTest, TamperingOrAnotherKeyIsRefused) {
  auto s = Ed25519Signer::Generate(), other = Ed25519Signer::Generate();
  ASSERT_TRUE(s.ok() && other.ok());
  const std::string msg = "manifest v1: 64 fragments";
  const std::string sig = *s->Sign(msg);
  std::string changed = msg;
  changed[9] = '2';
  EXPECT_FALSE(VerifyEd25519(s->PublicKeyPem(), changed, sig).ok());  // tampered manifest
  std::string bad_sig = sig;
  bad_sig[0] ^= 1;
  EXPECT_FALSE(VerifyEd25519(s->PublicKeyPem(), msg, bad_sig).ok());  // tampered signature
  EXPECT_FALSE(VerifyEd25519(other->PublicKeyPem(), msg, sig).ok());  // signed by another key
  EXPECT_FALSE(VerifyEd25519(s->PublicKeyPem(), msg, sig.substr(1)).ok());
  EXPECT_FALSE(VerifyEd25519("not a key", msg, sig).ok());
  EXPECT_NE(s->KeyId(), other->KeyId());
}

TEST(SigningTest, KeysFromTheDeployScriptWork) {
  // deploy/make-signing-key.sh makes the pair with the openssl command line.
  testing::TempDir dir;
  const std::string cmd = std::string(FIELDPROF_SOURCE_DIR) + "/deploy/make-signing-key.sh " +
                          dir.path() + " > /dev/null";
  ASSERT_EQ(std::system(cmd.c_str()), 0);
  auto s = Ed25519Signer::FromPemFile(dir.File("snapshot-signing.key"));
  ASSERT_TRUE(s.ok()) << s.status().ToString();
  std::ifstream in(dir.File("snapshot-signing.pub"));
  std::stringstream pub;
  pub << in.rdbuf();
  EXPECT_EQ(pub.str(), s->PublicKeyPem());
  const std::string sig = *s->Sign("hello");
  EXPECT_TRUE(VerifyEd25519(pub.str(), "hello", sig).ok());
  // A second run keeps the key (clients trust it).
  ASSERT_EQ(std::system(cmd.c_str()), 0);
  EXPECT_EQ(Ed25519Signer::FromPemFile(dir.File("snapshot-signing.key"))->KeyId(), s->KeyId());
  // Not a key, or a key of another kind: clear errors.
  std::ofstream(dir.File("junk.pem"))
      << "-----BEGIN PRIVATE KEY-----\nxx\n-----END PRIVATE KEY-----\n";
  EXPECT_FALSE(Ed25519Signer::FromPemFile(dir.File("junk.pem")).ok());
  ASSERT_TRUE(testing::MakeCert(dir.path()));  // an EC P-256 key
  const auto ec = Ed25519Signer::FromPemFile(dir.File("key.pem"));
  ASSERT_FALSE(ec.ok());
  EXPECT_NE(ec.status().message().find("not an Ed25519 key"), std::string::npos)
      << ec.status().ToString();
}

TEST(SigningTest, Sha256KnownAnswer) {
  EXPECT_EQ(HexEncode(Sha256("abc")),
            "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad");
}

}  // namespace
}  // namespace fieldprof
