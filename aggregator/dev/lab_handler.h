// Lab profiles, kept apart from the field sums:
//   POST /v1/lab/profiles        a profile (the file `fieldprof lab` wrote):
//                                200 {"id","duplicate","records"}
//   GET  /v1/lab/profiles        every profile: id, bytes, scenarios, counts
//   GET  /v1/lab/profiles/{id}   one profile's bytes
// A profile's id is the first 128 bits of its SHA-256, so the same profile
// uploaded twice is kept once (a retry after a lost answer changes
// nothing). Without lab storage every lab endpoint answers 404.
#ifndef FIELDPROF_AGGREGATOR_DEV_LAB_HANDLER_H_
#define FIELDPROF_AGGREGATOR_DEV_LAB_HANDLER_H_

#include <string_view>

#include "aggregator/http/http_types.h"
#include "aggregator/store/lab_storage.h"

namespace fieldprof::aggregator {

class LabHandler {
 public:
  // `lab` (may be null: no lab storage) must outlive the handler.
  explicit LabHandler(LabStorage* lab) : lab_(lab) {}

  HttpResponse Upload(std::string_view body);
  HttpResponse List();
  HttpResponse Get(std::string_view id);

 private:
  LabStorage* const lab_;
};

}  // namespace fieldprof::aggregator

#endif  // FIELDPROF_AGGREGATOR_DEV_LAB_HANDLER_H_
