// RFC 9497's VOPRF(ristretto255, SHA-512) against the RFC's own test
// vectors (Appendix A.1.2: the key, two single evaluations and a batch of
// two, proofs included), and the ways a client must refuse an issuer.
#include "common/crypto/voprf.h"

#include <gtest/gtest.h>

#include "common/crypto/upload_tokens.h"
#include "common/wire/wire.h"

namespace fieldprof::voprf {
namespace {

std::string H(std::string_view hex) {
  std::string out;
  EXPECT_TRUE(HexDecode(hex, &out)) << hex;
  return out;
}

const std::string kSeed = H("a3a3a3a3a3a3a3a3a3a3a3a3a3a3a3a3a3a3a3a3a3a3a3a3a3a3a3a3a3a3a3a3");
const std::string kKeyInfo = H("74657374206b6579");

struct Vector {
  std::vector<std::string> input, blind, blinded, evaluated, output;
  std::string proof, proof_random;
};

// Appendix A.1.2, test vectors 1 and 2 (batch size 1) and 3 (batch size 2).
std::vector<Vector> Vectors() {
  const std::string in1 = H("00"), in2 = H("5a5a5a5a5a5a5a5a5a5a5a5a5a5a5a5a5a");
  const std::string blind1 = H("64d37aed22a27f5191de1c1d69fadb899d8862b58eb4220029e036ec4c1f6706");
  const std::string r1 = H("222a5e897cf59db8145db8d16e597e8facb80ae7d4e26d9881aa6f61d645fc0e");
  const std::string be1 = H("863f330cc1a1259ed5a5998a23acfd37fb4351a793a5b3c090b642ddc439b945");
  const std::string ee1 = H("aa8fa048764d5623868679402ff6108d2521884fa138cd7f9c7669a9a014267e");
  const std::string out1 =
      H("b58cfbe118e0cb94d79b5fd6a6dafb98764dff49c14e1770b566e42402da1a7da4d8527693914139caee5bd039"
        "03af43a491351d23b430948dd50cde10d32b3c");
  const std::string out2 =
      H("8a9a2f3c7f085b65933594309041fc1898d42d0858e59f90814ae90571a6df60356f4610bf816f27afdd84f477"
        "19e480906d27ecd994985890e5f539e7ea74b6");
  return {
      {{in1},
       {blind1},
       {be1},
       {ee1},
       {out1},
       H("ddef93772692e535d1a53903db24367355cc2cc78de93b3be5a8ffcc6985dd066d4346421d17bf5117a2a1"
         "ff0fcb2a759f58a539dfbe857a40bce4cf49ec600d"),
       r1},
      {{in2},
       {blind1},
       {H("cc0b2a350101881d8a4cba4c80241d74fb7dcbfde4a61fde2f91443c2bf9ef0c")},
       {H("60a59a57208d48aca71e9e850d22674b611f752bed48b36f7a91b372bd7ad468")},
       {out2},
       H("401a0da6264f8cf45bb2f5264bc31e109155600babb3cd4e5af7d181a2c9dc0a67154fabf031fd936051de"
         "c80b0b6ae29c9503493dde7393b722eafdf5a50b02"),
       r1},
      {{in1, in2},
       {blind1, r1},
       {be1, H("90a0145ea9da29254c3a56be4fe185465ebb3bf2a1801f7124bbbadac751e654")},
       {ee1, H("cc5ac221950a49ceaa73c8db41b82c20372a4c8d63e5dded2db920b7eee36a2a")},
       {out1, out2},
       H("cc203910175d786927eeb44ea847328047892ddf8590e723c37205cb74600b0a5ab5337c8eb4ceae0494c2"
         "cf89529dcf94572ed267473d567aeed6ab873dee08"),
       H("419c4f4f5052c53c45f3da494d2b67b220d02118e0857cdbcf037f9ea84bbe0c")},
  };
}

TEST(VoprfTest, TheKeyIsTheRfcs) {
  StatusOr<KeyPair> k = DeriveKeyPair(kSeed, kKeyInfo);
  ASSERT_TRUE(k.ok()) << k.status().ToString();
  EXPECT_EQ(HexEncode(k->secret),
            "e6f73f344b79b379f1a0dd37e07ff62e38d9f71345ce62ae3a9bc60b04ccd909");
  EXPECT_EQ(HexEncode(k->pub), "c803e2cc6b05fc15064549b5920659ca4a77b2cca6f04f6b357009335476ad4e");
}

TEST(VoprfTest, EveryStepMatchesTheRfcsVectors) {
  StatusOr<KeyPair> k = DeriveKeyPair(kSeed, kKeyInfo);
  ASSERT_TRUE(k.ok());
  int n = 0;
  for (const Vector& v : Vectors()) {
    SCOPED_TRACE("vector " + std::to_string(++n));
    std::vector<std::string> blinded;
    for (size_t i = 0; i < v.input.size(); ++i) {
      StatusOr<std::string> b = Blind(v.input[i], v.blind[i]);
      ASSERT_TRUE(b.ok());
      EXPECT_EQ(HexEncode(*b), HexEncode(v.blinded[i]));
      blinded.push_back(*b);
    }
    StatusOr<Evaluation> e = BlindEvaluate(*k, blinded, v.proof_random);
    ASSERT_TRUE(e.ok()) << e.status().ToString();
    ASSERT_EQ(e->evaluated.size(), v.evaluated.size());
    for (size_t i = 0; i < v.evaluated.size(); ++i) {
      EXPECT_EQ(HexEncode(e->evaluated[i]), HexEncode(v.evaluated[i]));
    }
    EXPECT_EQ(HexEncode(e->proof), HexEncode(v.proof));
    EXPECT_TRUE(VerifyProof(k->pub, blinded, *e).ok());
    for (size_t i = 0; i < v.input.size(); ++i) {
      StatusOr<std::string> out = Finalize(v.input[i], v.blind[i], e->evaluated[i]);
      ASSERT_TRUE(out.ok());
      EXPECT_EQ(HexEncode(*out), HexEncode(v.output[i]));
      // The server reaches the same output from the input alone.
      StatusOr<std::string> direct = Evaluate(k->secret, v.input[i]);
      ASSERT_TRUE(direct.ok());
      EXPECT_EQ(*direct, v.output[i]);
    }
  }
}

TEST(VoprfTest, ExpandMessageXmdMatchesRfc9380) {
  // RFC 9380 Appendix K.3 (expand_message_xmd, SHA-512), msg "" and "abc",
  // len_in_bytes 0x20.
  const std::string dst = "QUUX-V01-CS02-with-expander-SHA512-256";
  EXPECT_EQ(HexEncode(ExpandMessageXmd("", dst, 32)),
            "6b9a7312411d92f921c6f68ca0b6380730a1a4d982c507211a90964c394179ba");
  EXPECT_EQ(HexEncode(ExpandMessageXmd("abc", dst, 32)),
            "0da749f12fbe5483eb066a5f595055679b976e93abe9be6f0f6318bce7aca8dc");
}

// What a client refuses: a proof made with another key (an issuer tagging
// this client), an answer altered on the way, malformed bytes.
TEST(VoprfTest, AClientRefusesAnotherKeyAndDamage) {
  StatusOr<KeyPair> k = DeriveKeyPair(kSeed, kKeyInfo);
  StatusOr<KeyPair> other = DeriveKeyPair(kSeed, "another key");
  ASSERT_TRUE(k.ok() && other.ok());
  std::vector<std::string> blinded;
  for (int i = 0; i < 4; ++i) {
    StatusOr<std::string> b = Blind("token " + std::to_string(i), RandomScalar());
    ASSERT_TRUE(b.ok());
    blinded.push_back(*b);
  }
  StatusOr<Evaluation> good = BlindEvaluate(*k, blinded);
  ASSERT_TRUE(good.ok());
  EXPECT_TRUE(VerifyProof(k->pub, blinded, *good).ok());
  StatusOr<Evaluation> tagged = BlindEvaluate(*other, blinded);
  ASSERT_TRUE(tagged.ok());
  EXPECT_FALSE(VerifyProof(k->pub, blinded, *tagged).ok()) << "evaluated with another key";
  // One element from another key among the right ones.
  Evaluation mixed = *good;
  mixed.evaluated[2] = tagged->evaluated[2];
  EXPECT_FALSE(VerifyProof(k->pub, blinded, mixed).ok());
  Evaluation short_answer = *good;
  short_answer.evaluated.pop_back();
  EXPECT_FALSE(VerifyProof(k->pub, blinded, short_answer).ok());
  Evaluation bad_proof = *good;
  bad_proof.proof[5] ^= 1;
  EXPECT_FALSE(VerifyProof(k->pub, blinded, bad_proof).ok());
  EXPECT_FALSE(VerifyProof(std::string(32, '\x01'), blinded, *good).ok());
  EXPECT_FALSE(BlindEvaluate(*k, {std::string(32, '\xff')}).ok());
  EXPECT_FALSE(Blind("x", std::string(32, '\0')).ok()) << "a zero blind";
  EXPECT_FALSE(Finalize("x", RandomScalar(), "short").ok());
}

// The key an agent checks an issuer's answer against: the signed
// manifest's for the epoch when it lists one.
TEST(VoprfTest, TheSignedManifestsKeyWinsOverTheServedOne) {
  wire::Manifest m;
  wire::TokenKey* k = m.add_token_keys();
  k->set_epoch(5);
  k->set_public_key("K1");
  EXPECT_EQ(*TokenKeyToTrust(&m, 5, "K1"), "K1");
  EXPECT_FALSE(TokenKeyToTrust(&m, 5, "K2").ok()) << "a key of its own for one agent";
  EXPECT_EQ(*TokenKeyToTrust(&m, 6, "K3"), "K3") << "an epoch the manifest does not list";
  EXPECT_EQ(*TokenKeyToTrust(nullptr, 5, "K2"), "K2") << "no snapshot kept";
}

// The issuer's whole view of its issuances (the blinded elements it got,
// the evaluated ones it sent) against the tokens later spent. Holding its
// key, the issuer tries what it can to tie a spend to a request: an
// element equal to the input's hash, or an evaluation equal to its own
// evaluation of the input. Blinded, nothing matches; the same search
// finds every link when the client does not blind (a blind of 1), so it
// can see one.
TEST(VoprfTest, TheIssuerCannotLinkASpentTokenToItsIssuance) {
  TokenIssuer issuer("linking-test-secret-0123456789abcdef", {});
  const int64_t now = 1700000000;
  StatusOr<KeyPair> key = issuer.KeyFor(issuer.EpochAt(now));
  ASSERT_TRUE(key.ok());
  struct View {
    std::vector<std::string> blinded, evaluated;
  };
  std::vector<View> views;
  std::vector<std::vector<UploadToken>> spent;  // per request
  for (int c = 0; c < 10; ++c) {
    StatusOr<TokenRequestState> req = MakeTokenRequest(4);
    ASSERT_TRUE(req.ok());
    StatusOr<wire::TokenResponse> resp = issuer.Issue(req->request, now);
    ASSERT_TRUE(resp.ok());
    views.push_back({{req->request.blinded().begin(), req->request.blinded().end()},
                     {resp->evaluated().begin(), resp->evaluated().end()}});
    StatusOr<std::vector<UploadToken>> t = FinishTokenRequest(*req, *resp, resp->public_key());
    ASSERT_TRUE(t.ok());
    for (const UploadToken& u : *t) {
      EXPECT_TRUE(issuer.Check(u.input, u.output, u.epoch, now).ok()) << "a good token";
    }
    spent.push_back(*t);
  }
  std::string one(kScalarBytes, '\0');
  one[0] = 1;
  // Spends tied to a request, searched as the issuer can.
  auto links = [&](const std::vector<View>& seen) {
    int n = 0;
    for (const auto& tokens : spent) {
      for (const UploadToken& u : tokens) {
        StatusOr<std::string> hashed = Blind(u.input, one);  // HashToGroup(input)
        EXPECT_TRUE(hashed.ok());
        StatusOr<Evaluation> mine = BlindEvaluate(*key, {*hashed});
        EXPECT_TRUE(mine.ok());
        for (const View& v : seen) {
          for (size_t i = 0; i < v.blinded.size(); ++i) {
            if (v.blinded[i] == *hashed || v.evaluated[i] == mine->evaluated[0]) ++n;
          }
        }
      }
    }
    return n;
  };
  EXPECT_EQ(links(views), 0);
  // The same inputs sent unblinded: every spend is found in its request.
  std::vector<View> unblinded;
  for (const auto& tokens : spent) {
    View v;
    for (const UploadToken& u : tokens) v.blinded.push_back(*Blind(u.input, one));
    StatusOr<Evaluation> e = BlindEvaluate(*key, v.blinded);
    ASSERT_TRUE(e.ok());
    v.evaluated = e->evaluated;
    unblinded.push_back(v);
  }
  EXPECT_EQ(links(unblinded), 40);
  // And one input blinded twice looks unrelated.
  EXPECT_NE(*Blind("x", RandomScalar()), *Blind("x", RandomScalar()));
}

}  // namespace
}  // namespace fieldprof::voprf
