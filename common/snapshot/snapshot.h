// The published snapshot's formats: which fragment an API key
// belongs to, deterministic fragment encoding, and the checks a client runs
// before it replaces anything in its cache: the manifest's signature, then
// each fragment against the size and SHA-256 the manifest lists.
//
//   uint32_t i = FragmentOf(key, 64);
//   std::string bytes = EncodeFragment(i, 64, records);   // same records, same bytes
//   StatusOr<wire::Manifest> m = OpenSignedManifest(signed_bytes, public_key_pem);
//   Status ok = CheckFragment(*m, i, fragment_bytes);
#ifndef FIELDPROF_COMMON_SNAPSHOT_SNAPSHOT_H_
#define FIELDPROF_COMMON_SNAPSHOT_SNAPSHOT_H_

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "common/base/status.h"
#include "common/crypto/signing.h"
#include "common/proto/fieldprof.pb.h"
#include "common/wire/api_key.h"

namespace fieldprof {

inline constexpr uint32_t kFragmentSchemaVersion = 1;
inline constexpr uint32_t kManifestSchemaVersion = 1;
inline constexpr uint32_t kDefaultFragmentCount = 64;

// Stable across builds, machines and releases (FNV-1a 64 of the canonical
// key encoding, reduced modulo `count`): a key never moves to another
// fragment while the count stays the same.
uint32_t FragmentOf(const ApiKey& key, uint32_t count);

// The encoded Fragment for `records` (any order; they are sorted by key
// here, and each key gets its platform filled in). Byte-identical for the
// same content.
std::string EncodeFragment(uint32_t index, uint32_t count, std::vector<wire::Record> records);

// One record already encoded, with the key it sorts by: what a publisher
// keeps per series while it scans (a few hundred bytes, one allocation),
// instead of a message with a heap object per histogram bucket.
struct EncodedRecord {
  std::string key;    // EncodeApiKey, platform included
  std::string bytes;  // the Record, deterministically encoded, platform filled in
};
EncodedRecord EncodeRecord(const wire::Record& record);
// The same bytes as EncodeFragment for the same records.
std::string EncodeFragmentFromEncoded(uint32_t index, uint32_t count,
                                      std::vector<EncodedRecord> records);

// The manifest's entry for an encoded fragment; `version` is derived from
// the content (the first 8 bytes of its SHA-256), so an unchanged fragment
// keeps its version.
wire::FragmentInfo DescribeFragment(uint32_t index, const std::string& bytes);

// Encodes `manifest` deterministically and signs those bytes.
[[nodiscard]] StatusOr<std::string> SignManifest(const wire::Manifest& manifest,
                                                 const Ed25519Signer& signer);
// Parses a SignedManifest, verifies its signature with `public_key_pem`,
// then checks the manifest's own shape (schema versions, one entry per
// index in order, 32-byte hashes). The error says which check failed.
[[nodiscard]] StatusOr<wire::Manifest> OpenSignedManifest(std::string_view signed_bytes,
                                                          std::string_view public_key_pem);
// OK when `bytes` is fragment `index` as `manifest` describes it (size,
// SHA-256) and parses as that fragment.
[[nodiscard]] Status CheckFragment(const wire::Manifest& manifest, uint32_t index,
                                   std::string_view bytes);

}  // namespace fieldprof

#endif  // FIELDPROF_COMMON_SNAPSHOT_SNAPSHOT_H_
