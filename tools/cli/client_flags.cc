#include "tools/cli/client_flags.h"

#include <boost/property_tree/json_parser.hpp>
#include <sstream>

namespace fieldprof::tools {

StatusOr<boost::property_tree::ptree> GetJson(HttpsClient& client, const std::string& target,
                                              int* http_status, std::string* raw_body) {
  StatusOr<HttpReply> r = client.Get(target);
  if (!r.ok()) return r.status();
  *http_status = r->status;
  *raw_body = r->body;
  if (r->status != 200) {
    return Unavailable("aggregator answered " + std::to_string(r->status) + ": " + r->body);
  }
  boost::property_tree::ptree pt;
  try {
    std::istringstream in(r->body);
    boost::property_tree::read_json(in, pt);
  } catch (const std::exception& e) {
    return DataLoss(std::string("bad answer from the aggregator: ") + e.what());
  }
  return pt;
}

}  // namespace fieldprof::tools
