// GET /v1/stacks summed in its request (no kept answer) over a module of N
// distinct field stacks (stack_gen.h) in a real RocksDB store, as the
// aggregator answers a first ask: through the router, with and without the
// k-anonymity wrapper, just after ingest and once compacted. Beside it, in
// the same run, the floor: a bare RocksDB scan of the same stored values,
// and the ratio to it.
//
//   stacks_answer [STACKS] [ROUNDS]   (defaults 100000, 10)
#include <rocksdb/db.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <memory>
#include <string>
#include <vector>

#include "aggregator/http/router.h"
#include "aggregator/metrics.h"
#include "aggregator/store/k_anonymous_store.h"
#include "aggregator/store/rocks_merge.h"
#include "aggregator/store/rocks_status.h"
#include "aggregator/store/store_rocksdb.h"
#include "common/stacks/field_stacks.h"
#include "common/wire/wire.h"
#include "tests/benchmarks/stack_gen.h"

namespace fieldprof::aggregator {
namespace {

using Clock = std::chrono::steady_clock;

double Ms(Clock::duration d) { return std::chrono::duration<double, std::milli>(d).count(); }

struct Figures {
  double median = 0, worst = 0;
};

Figures Summarize(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  return {v[v.size() / 2], v.back()};
}

// Posts every stack once from each of `machines` machines, or (`mixed`)
// stack i from 1 + i % machines of them, a different few for each: the
// rarer ones under k, folded where their prefixes reach it.
bool Fill(Router* router, Store* store, const std::string& module, long n, int machines,
          bool mixed) {
  std::vector<wire::Record> records;
  StackGen gen(module);
  while (static_cast<long>(gen.made()) < n) records.push_back(gen.Next());
  const int64_t now_ms = std::chrono::duration_cast<std::chrono::milliseconds>(
                             std::chrono::system_clock::now().time_since_epoch())
                             .count();
  long batches = 0;
  for (int m = 0; m < machines; ++m) {
    for (size_t first = 0; first < records.size(); first += 4000) {
      wire::Batch b;
      b.set_schema_version(kSchemaVersion);
      b.set_batch_id(std::string(8, 'S') + std::to_string(10000000 + batches++));
      b.set_created_unix_ms(now_ms);
      b.set_machine_key(std::string(15, 'M') + static_cast<char>('a' + m));
      b.mutable_client_platform()->set_os(wire::OS_LINUX);
      b.mutable_client_platform()->set_arch(wire::ARCH_X86_64);
      for (size_t i = first; i < std::min(records.size(), first + 4000); ++i) {
        // Stack i from machines i * 7, i * 7 + 1, ... (mod machines).
        const size_t from = 1 + i % static_cast<size_t>(machines);
        const size_t first_machine = i * 7 % static_cast<size_t>(machines);
        const size_t offset =
            (static_cast<size_t>(m) + static_cast<size_t>(machines) - first_machine) %
            static_cast<size_t>(machines);
        if (mixed && offset >= from) continue;
        *b.add_records() = records[i];
      }
      if (b.records_size() == 0) continue;
      // Each machine's first of each stack, as its agent marks it.
      for (wire::Record& r : *b.mutable_records()) r.set_first_from_machine(true);
      HttpResponse r =
          router->Handle("POST", "/v1/batches", kProtobufContentType, b.SerializeAsString());
      if (r.status == 503) {
        IgnoreError(store->WaitApplied(std::chrono::seconds(120)));
        r = router->Handle("POST", "/v1/batches", kProtobufContentType, b.SerializeAsString());
      }
      if (r.status != 200) {
        std::fprintf(stderr, "stacks_answer: batch refused: %d %s\n", r.status, r.body.c_str());
        return false;
      }
    }
  }
  return store->WaitApplied(std::chrono::seconds(300)).ok();
}

// Opens the store's database directly, with the store's merge operator.
// `compact`: every value merged into one (what RocksDB's own compactions
// reach in time); else read only.
std::unique_ptr<rocksdb::DB> OpenRaw(const std::string& path, bool compact,
                                     std::vector<rocksdb::ColumnFamilyHandle*>* handles) {
  std::vector<std::string> names;
  if (!rocksdb::DB::ListColumnFamilies(rocksdb::DBOptions(), path, &names).ok()) return nullptr;
  std::vector<rocksdb::ColumnFamilyDescriptor> cfs;
  for (const std::string& name : names) {
    rocksdb::ColumnFamilyOptions o;
    if (name == rocksdb::kDefaultColumnFamilyName) {
      o.merge_operator = std::make_shared<HistogramMergeOperator>();
    }
    cfs.push_back({name, o});
  }
  rocksdb::DB* raw = nullptr;
  rocksdb::Status s =
      compact ? rocksdb::DB::Open(rocksdb::DBOptions(), path, cfs, handles, &raw)
              : rocksdb::DB::OpenForReadOnly(rocksdb::DBOptions(), path, cfs, handles, &raw);
  if (!s.ok()) {
    std::fprintf(stderr, "stacks_answer: %s\n", s.ToString().c_str());
    return nullptr;
  }
  std::unique_ptr<rocksdb::DB> db(raw);
  if (compact) {
    rocksdb::CompactRangeOptions o;
    o.bottommost_level_compaction = rocksdb::BottommostLevelCompaction::kForce;
    if (!db->CompactRange(o, (*handles)[0], nullptr, nullptr).ok()) return nullptr;
  }
  return db;
}

void Close(rocksdb::DB* db, const std::vector<rocksdb::ColumnFamilyHandle*>& handles) {
  for (auto* h : handles) IgnoreError(FromRocks(db->DestroyColumnFamilyHandle(h), ""));
}

// The floor: every stored value of the store (the module's series, merged
// into one each) read, keys and bytes touched, nothing decoded.
double ScanMs(const std::string& path) {
  std::vector<rocksdb::ColumnFamilyHandle*> handles;
  std::unique_ptr<rocksdb::DB> db = OpenRaw(path, /*compact=*/false, &handles);
  if (!db) return -1;
  std::vector<double> ms;
  size_t bytes = 0, values = 0;
  for (int round = 0; round < 5; ++round) {
    const auto t0 = Clock::now();
    std::unique_ptr<rocksdb::Iterator> it(db->NewIterator(rocksdb::ReadOptions(), handles[0]));
    bytes = values = 0;
    for (it->SeekToFirst(); it->Valid(); it->Next()) {
      bytes += it->key().size() + it->value().size();
      ++values;
    }
    ms.push_back(Ms(Clock::now() - t0));
  }
  Close(db.get(), handles);
  std::printf("   floor (a bare RocksDB scan of the store's %zu values, %zu bytes): %.1f ms\n",
              values, bytes, Summarize(ms).median);
  return Summarize(ms).median;
}

// GET /v1/stacks `rounds` times each, as the dashboard asks (every stack)
// and by default; the median of the first.
double Answer(Store* store, const std::string& module, int rounds) {
  Metrics metrics;
  RouterParts parts;
  parts.store = store;
  parts.metrics = &metrics;
  parts.answer_max_stale = std::chrono::milliseconds(0);  // every answer summed
  Router router(std::move(parts));
  double whole_ms = -1;
  for (const std::string limit : {"&limit=100000", ""}) {
    const std::string target = "/v1/stacks?module=" + module + limit;
    std::vector<double> ms;
    size_t bytes = 0;
    for (int round = 0; round < rounds; ++round) {
      const auto t = Clock::now();
      HttpResponse r = router.Handle("GET", target, "", "");
      ms.push_back(Ms(Clock::now() - t));
      if (r.status != 200) {
        std::fprintf(stderr, "stacks_answer: %d %s\n", r.status, r.body.c_str());
        return -1;
      }
      bytes = r.body.size();
    }
    const Figures f = Summarize(ms);
    std::printf("     %s: %.1f ms median, %.1f ms slowest, %zu bytes\n",
                limit.empty() ? "the default limit (10,000)" : "every stack (limit=100000)",
                f.median, f.worst, bytes);
    if (!limit.empty()) whole_ms = f.median;
  }
  return whole_ms;
}

// Where an answer's time goes, step by step as the handler takes them:
// the store's walk alone, the walk summing into the builder, the sort,
// the JSON, freeing the stacks (medians of `rounds`).
void Steps(Store* store, const std::string& module, int rounds) {
  ApiFilter filter;
  filter.module = module;
  filter.metric = wire::METRIC_STACK_CPU_NS;
  std::vector<double> walk, sum, sort, json, freed;
  for (int round = 0; round < rounds; ++round) {
    auto t = Clock::now();
    size_t series = 0;
    IgnoreError(store->ForEachApi(filter, [&](ApiAggregate&&) { return ++series > 0; }));
    walk.push_back(Ms(Clock::now() - t));
    t = Clock::now();
    FieldStacksBuilder builder(module, /*keep_per_run=*/false, /*split_frames=*/false);
    IgnoreError(store->ForEachApi(filter, [&](ApiAggregate&& a) {
      builder.Add(std::move(a.key.symbol), a.key.module_version, a.histogram, a.runs,
                  a.machines.Estimate());
      return true;
    }));
    sum.push_back(Ms(Clock::now() - t));
    t = Clock::now();
    auto stacks = std::make_unique<FieldStacks>(builder.Finish());
    sort.push_back(Ms(Clock::now() - t));
    t = Clock::now();
    const std::string body = FieldStacksJson(*stacks, 100000);
    json.push_back(Ms(Clock::now() - t));
    t = Clock::now();
    stacks.reset();
    freed.push_back(Ms(Clock::now() - t));
  }
  std::printf(
      "     steps: the walk %.1f ms, the walk summing %.1f ms, the sort %.1f ms,"
      " the JSON %.1f ms, freeing the stacks %.1f ms\n",
      Summarize(walk).median, Summarize(sum).median, Summarize(sort).median, Summarize(json).median,
      Summarize(freed).median);
}

// Opens the store at `dir`, behind the k-anonymity wrapper when k > 1, and
// answers.
double AnswerFrom(const std::string& dir, int k, const std::string& module, int rounds) {
  auto store = OpenRocksDbStore({.path = dir, .sync = false});
  if (!store.ok()) {
    std::fprintf(stderr, "stacks_answer: %s\n", store.status().ToString().c_str());
    return -1;
  }
  std::unique_ptr<KAnonymousStore> published;
  Store* answering = store->get();
  if (k > 1) {
    published = std::make_unique<KAnonymousStore>(store->get(), k);
    answering = published.get();
  }
  const double ms = Answer(answering, module, rounds);
  if (k == 1) Steps(answering, module, rounds);
  IgnoreError((*store)->Close());
  return ms;
}

int Run(long n, int rounds) {
  const std::string module = "libbench.so.1";
  std::printf("== GET /v1/stacks summed in its request, %ld distinct stacks, %d rounds\n", n,
              rounds);
  struct Case {
    int k, machines;
    bool mixed;
    const char* what;
  };
  for (const Case& c : {Case{1, 1, false, "every stack from 1 machine"},
                        Case{5, 5, false, "every stack from 5 machines"},
                        Case{5, 9, true, "stack i from 1 + i % 9 of 9 machines: 4 in 9 under k"}}) {
    const int k = c.k;
    const std::string dir = std::filesystem::temp_directory_path() /
                            ("fieldprof-stacks-answer-" + std::to_string(getpid()));
    std::filesystem::remove_all(dir);
    {
      auto store = OpenRocksDbStore({.path = dir, .sync = false});
      if (!store.ok()) return 1;
      Metrics metrics;
      RouterParts parts;
      parts.store = store->get();
      parts.metrics = &metrics;
      Router ingest(std::move(parts));
      const auto t0 = Clock::now();
      if (!Fill(&ingest, store->get(), module, n, c.machines, c.mixed)) return 1;
      std::printf("-- k = %d (%s; %.1f s to ingest)\n", k, c.what, Ms(Clock::now() - t0) / 1e3);
      IgnoreError((*store)->Close());
    }
    std::printf("   just ingested (each value a merge to do when read):\n");
    if (AnswerFrom(dir, k, module, rounds) < 0) return 1;
    {
      std::vector<rocksdb::ColumnFamilyHandle*> handles;
      std::unique_ptr<rocksdb::DB> db = OpenRaw(dir, /*compact=*/true, &handles);
      if (!db) return 1;
      Close(db.get(), handles);
    }
    std::printf("   compacted (each value merged into one):\n");
    const double whole_ms = AnswerFrom(dir, k, module, rounds);
    if (whole_ms < 0) return 1;
    if (k == 1) {
      const double floor_ms = ScanMs(dir);
      if (floor_ms > 0) std::printf("   every stack / floor: %.1f\n", whole_ms / floor_ms);
    }
    std::filesystem::remove_all(dir);
  }
  return 0;
}

}  // namespace
}  // namespace fieldprof::aggregator

int main(int argc, char** argv) {
  const long n = argc > 1 ? std::atol(argv[1]) : 100000;
  const int rounds = argc > 2 ? std::atoi(argv[2]) : 10;
  if (n <= 0 || rounds <= 0) {
    std::fprintf(stderr, "usage: stacks_answer [STACKS] [ROUNDS]\n");
    return 2;
  }
  return fieldprof::aggregator::Run(n, rounds);
}
