#include "common/snapshot/snapshot.h"

#include <google/protobuf/io/coded_stream.h>
#include <google/protobuf/io/zero_copy_stream_impl_lite.h>

#include <algorithm>
#include <cstring>
#include <utility>

#include "common/wire/wire.h"

namespace fieldprof {

namespace {

// Protobuf bytes with deterministic serialization (stable field and map
// order), so equal messages always encode to equal bytes.
std::string Deterministic(const google::protobuf::MessageLite& m) {
  std::string out;
  {
    google::protobuf::io::StringOutputStream stream(&out);
    google::protobuf::io::CodedOutputStream coded(&stream);
    coded.SetSerializationDeterministic(true);
    m.SerializeToCodedStream(&coded);
  }
  return out;
}

uint64_t Fnv1a64(std::string_view s) {
  uint64_t h = 1469598103934665603ull;
  for (unsigned char c : s) {
    h ^= c;
    h *= 1099511628211ull;
  }
  return h;
}

}  // namespace

uint32_t FragmentOf(const ApiKey& key, uint32_t count) {
  if (count == 0) return 0;
  return static_cast<uint32_t>(Fnv1a64(EncodeApiKey(key)) % count);
}

EncodedRecord EncodeRecord(const wire::Record& record) {
  if (!record.key().has_platform()) {
    wire::Record with = record;
    with.mutable_key()->mutable_platform();
    return EncodeRecord(with);
  }
  EncodedRecord e;
  e.key = EncodeApiKey(ApiKeyFromWire(record.key(), wire::Platform()));
  e.bytes = Deterministic(record);
  return e;
}

std::string EncodeFragmentFromEncoded(uint32_t index, uint32_t count,
                                      std::vector<EncodedRecord> records) {
  std::sort(records.begin(), records.end(),
            [](const EncodedRecord& a, const EncodedRecord& b) { return a.key < b.key; });
  // A Fragment's encoding by hand, field by field in number order as
  // protobuf writes it (proto3: zero scalars are left out).
  wire::Fragment header;
  header.set_schema_version(kFragmentSchemaVersion);
  header.set_index(index);
  header.set_fragment_count(count);
  std::string out = Deterministic(header);
  size_t total = out.size();
  for (const EncodedRecord& r : records) total += r.bytes.size() + 6;
  out.reserve(total);
  for (const EncodedRecord& r : records) {
    out += static_cast<char>((wire::Fragment::kRecordsFieldNumber << 3) | 2);  // length-delimited
    for (uint64_t n = r.bytes.size();; n >>= 7) {
      if (n < 0x80) {
        out += static_cast<char>(n);
        break;
      }
      out += static_cast<char>((n & 0x7f) | 0x80);
    }
    out += r.bytes;
  }
  return out;
}

std::string EncodeFragment(uint32_t index, uint32_t count, std::vector<wire::Record> records) {
  std::vector<EncodedRecord> encoded;
  encoded.reserve(records.size());
  for (const wire::Record& r : records) encoded.push_back(EncodeRecord(r));
  return EncodeFragmentFromEncoded(index, count, std::move(encoded));
}

wire::FragmentInfo DescribeFragment(uint32_t index, const std::string& bytes) {
  wire::FragmentInfo info;
  info.set_index(index);
  const std::string digest = Sha256(bytes);
  uint64_t v = 0;
  std::memcpy(&v, digest.data(), sizeof v);
  info.set_version(v);
  info.set_size(bytes.size());
  info.set_sha256(digest);
  return info;
}

StatusOr<std::string> SignManifest(const wire::Manifest& manifest, const Ed25519Signer& signer) {
  wire::SignedManifest s;
  s.set_manifest(Deterministic(manifest));
  FP_ASSIGN_OR_RETURN(std::string sig, signer.Sign(s.manifest()));
  s.set_signature(sig);
  s.set_key_id(signer.KeyId());
  return Deterministic(s);
}

StatusOr<wire::Manifest> OpenSignedManifest(std::string_view signed_bytes,
                                            std::string_view public_key_pem) {
  wire::SignedManifest s;
  if (!s.ParseFromArray(signed_bytes.data(), static_cast<int>(signed_bytes.size()))) {
    return InvalidArgument("manifest: not a signed manifest");
  }
  if (Status v = VerifyEd25519(public_key_pem, s.manifest(), s.signature()); !v.ok()) {
    return InvalidArgument("manifest signature (key " + s.key_id() + "): " + v.message());
  }
  wire::Manifest m;
  if (!m.ParseFromString(s.manifest())) return InvalidArgument("manifest: does not parse");
  if (m.schema_version() != kManifestSchemaVersion) {
    return Unsupported("manifest: schema version " + std::to_string(m.schema_version()));
  }
  if (m.fragment_schema_version() != kFragmentSchemaVersion) {
    return Unsupported("manifest: fragment schema version " +
                       std::to_string(m.fragment_schema_version()));
  }
  if (m.fragment_count() == 0 || m.fragments_size() != static_cast<int>(m.fragment_count())) {
    return InvalidArgument("manifest: lists " + std::to_string(m.fragments_size()) +
                           " fragments for a count of " + std::to_string(m.fragment_count()));
  }
  for (int i = 0; i < m.fragments_size(); ++i) {
    const wire::FragmentInfo& f = m.fragments(i);
    if (f.index() != static_cast<uint32_t>(i) || f.sha256().size() != 32) {
      return InvalidArgument("manifest: entry " + std::to_string(i) + " is malformed");
    }
  }
  return m;
}

Status CheckFragment(const wire::Manifest& manifest, uint32_t index, std::string_view bytes) {
  if (index >= static_cast<uint32_t>(manifest.fragments_size())) {
    return InvalidArgument("fragment " + std::to_string(index) + ": not in the manifest");
  }
  const wire::FragmentInfo& info = manifest.fragments(static_cast<int>(index));
  if (bytes.size() != info.size()) {
    return InvalidArgument("fragment " + std::to_string(index) + ": " +
                           std::to_string(bytes.size()) + " bytes, the manifest says " +
                           std::to_string(info.size()));
  }
  if (Sha256(bytes) != info.sha256()) {
    return InvalidArgument("fragment " + std::to_string(index) +
                           ": SHA-256 differs from the manifest's");
  }
  wire::Fragment f;
  if (!f.ParseFromArray(bytes.data(), static_cast<int>(bytes.size())) || f.index() != index ||
      f.fragment_count() != manifest.fragment_count()) {
    return InvalidArgument("fragment " + std::to_string(index) + ": not the fragment listed");
  }
  return Status::Ok();
}

}  // namespace fieldprof
