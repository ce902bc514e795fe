// RocksDB's status as the project's (store_rocksdb.cc): the kind of
// failure and what was being done, without the file names RocksDB's
// messages carry, since these messages reach clients.
#ifndef FIELDPROF_AGGREGATOR_STORE_ROCKS_STATUS_H_
#define FIELDPROF_AGGREGATOR_STORE_ROCKS_STATUS_H_

#include <rocksdb/status.h>

#include <string>
#include <string_view>

#include "common/base/status.h"

namespace fieldprof::aggregator {

std::string Describe(const rocksdb::Status& s);
Status FromRocks(const rocksdb::Status& s, std::string_view what);

}  // namespace fieldprof::aggregator

#endif  // FIELDPROF_AGGREGATOR_STORE_ROCKS_STATUS_H_
