#include "tools/shared/client_flags.h"

namespace fieldprof::tools {

StatusOr<nlohmann::json> GetJson(HttpsClient& client, const std::string& target, int* http_status,
                                 std::string* raw_body) {
  FP_ASSIGN_OR_RETURN(HttpReply r, client.Get(target));
  *http_status = r.status;
  *raw_body = r.body;
  if (r.status != 200) {
    return Unavailable("aggregator answered " + std::to_string(r.status) + ": " + r.body);
  }
  nlohmann::json j = nlohmann::json::parse(r.body, nullptr, /*allow_exceptions=*/false);
  if (j.is_discarded() || !j.is_object()) {
    return DataLoss("bad answer from the aggregator: not a JSON object");
  }
  return j;
}

}  // namespace fieldprof::tools
