#include "common/model/lab_format.h"

#include <cstring>

#include "common/wire/key_rules.h"
#include "common/wire/validate.h"

namespace fieldprof {

StatusOr<wire::LabProfile> ParseLabProfile(std::string_view bytes, const std::string& what) {
  const size_t n = std::strlen(kLabProfileMagic);
  if (bytes.size() < n || bytes.compare(0, n, kLabProfileMagic) != 0) {
    return InvalidArgument(what + " is not a lab profile");
  }
  wire::LabProfile p;
  if (!p.ParseFromArray(bytes.data() + n, static_cast<int>(bytes.size() - n))) {
    return DataLoss(what + ": a lab profile that does not parse (damaged or cut short)");
  }
  if (p.schema_version() != 1) {
    return InvalidArgument(what + ": a lab profile of schema version " +
                           std::to_string(p.schema_version()) + " (this fieldprof reads 1)");
  }
  return p;
}

std::string EncodeLabProfile(const wire::LabProfile& p) {
  std::string bytes = kLabProfileMagic;
  p.AppendToString(&bytes);
  return bytes;
}

Status ValidateLabProfile(const wire::LabProfile& p) {
  if (p.schema_version() != 1) return InvalidArgument("lab profile schema_version must be 1");
  if (p.scenarios_size() == 0) return InvalidArgument("a lab profile names its scenarios");
  for (const std::string& s : p.scenarios()) {
    if (s.empty() || s.size() > 255) return InvalidArgument("a scenario name is 1..255 bytes");
    for (unsigned char c : s) {
      if (c < 0x20 || c == 0x7f) return InvalidArgument("a scenario name holds a control byte");
    }
  }
  for (int i = 0; i < p.records_size(); ++i) {
    if (Status s = ValidateRecord(p.records(i)); !s.ok()) {
      return s.WithContext("lab profile record " + std::to_string(i));
    }
  }
  for (int i = 0; i < p.apis_size(); ++i) {
    const wire::ApiKey& k = p.apis(i);
    if (!key_rules::ModuleOk(k.module().data(), k.module().size()) ||
        !key_rules::ModuleVersionOk(k.module_version().data(), k.module_version().size()) ||
        !key_rules::SymbolOk(k.symbol().data(), k.symbol().size())) {
      return InvalidArgument("lab profile API " + std::to_string(i) +
                             " breaks the key rules (a module is a file name, never a path)");
    }
  }
  for (const wire::LabEdge& e : p.edges()) {
    if (e.outer() >= static_cast<uint32_t>(p.apis_size()) ||
        e.inner() >= static_cast<uint32_t>(p.apis_size())) {
      return InvalidArgument("a lab profile edge names an API it does not list");
    }
  }
  return Status::Ok();
}

}  // namespace fieldprof
