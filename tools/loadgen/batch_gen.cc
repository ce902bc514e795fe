#include "tools/loadgen/batch_gen.h"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstring>

#include "common/wire/wire.h"

namespace fieldprof::tools {
namespace {

struct KnownModule {
  const char* soname;
  std::vector<const char*> symbols;
};

// Real sonames and exported symbols, so loads look like the field.
const std::vector<KnownModule>& KnownModules() {
  static const auto* m = new std::vector<KnownModule>{
      {"libc.so.6",
       {"malloc", "free", "memcpy", "strlen", "getaddrinfo", "fopen", "fread", "qsort", "strcmp",
        "pthread_mutex_lock", "printf", "open", "read"}},
      {"libsqlite3.so.0",
       {"sqlite3_prepare_v2", "sqlite3_step", "sqlite3_finalize", "sqlite3_open_v2", "sqlite3_exec",
        "sqlite3_bind_text", "sqlite3_column_text", "sqlite3_reset", "sqlite3_close"}},
      {"libz.so.1",
       {"deflate", "inflate", "deflateInit2_", "inflateInit2_", "crc32", "adler32", "compress2",
        "uncompress"}},
      {"libzstd.so.1",
       {"ZSTD_compress", "ZSTD_decompress", "ZSTD_compressStream2", "ZSTD_createCCtx",
        "ZSTD_freeCCtx"}},
      {"libcrypto.so.3",
       {"EVP_DigestUpdate", "EVP_EncryptUpdate", "RSA_sign", "SHA256", "EVP_PKEY_derive",
        "BN_mod_exp"}},
      {"libssl.so.3", {"SSL_read", "SSL_write", "SSL_do_handshake", "SSL_CTX_new"}},
      {"libstdc++.so.6",
       {"_Znwm", "_ZdlPvm", "_ZNSt6thread4joinEv",
        "_ZNSt7__cxx1112basic_stringIcSt11char_traitsIcESaIcEE9_M_createERmm",
        "_ZSt18_Rb_tree_incrementPSt18_Rb_tree_node_base"}},
      {"liblzma.so.5", {"lzma_code", "lzma_easy_encoder", "lzma_end"}},
      {"libcurl.so.4", {"curl_easy_perform", "curl_easy_setopt", "curl_easy_init"}},
      {"libxml2.so.2", {"xmlReadMemory", "xmlXPathEvalExpression", "xmlFreeDoc"}},
      {"libpng16.so.16", {"png_read_image", "png_write_row", "png_create_read_struct"}},
      {"libglib-2.0.so.0", {"g_hash_table_insert", "g_main_context_iteration", "g_strdup"}},
      {"libpcre2-8.so.0", {"pcre2_match_8", "pcre2_compile_8"}},
      {"libexpat.so.1", {"XML_Parse", "XML_ParserCreate"}},
      {"libm.so.6", {"sin", "exp", "log", "pow"}},
  };
  return *m;
}

}  // namespace

BatchGenerator::BatchGenerator(const BatchGenOptions& options)
    : options_(options), rng_(options.seed) {
  const int n = std::max(1, options_.modules * options_.symbols_per_module);
  ranks_cdf_.resize(n);
  double total = 0;
  for (int r = 0; r < n; ++r) {
    total += 1.0 / std::pow(r + 1, options_.zipf_s);
    ranks_cdf_[r] = total;
  }
  for (double& c : ranks_cdf_) c /= total;
}

std::string BatchGenerator::NewBatchId() {
  std::string id(kBatchIdBytes, '\0');
  for (size_t i = 0; i < kBatchIdBytes; i += 8) {
    uint64_t x = rng_();
    std::memcpy(id.data() + i, &x, 8);
  }
  return id;
}

int BatchGenerator::DrawRank() {
  double u = std::uniform_real_distribution<double>(0, 1)(rng_);
  auto it = std::lower_bound(ranks_cdf_.begin(), ranks_cdf_.end(), u);
  return static_cast<int>(std::min<ptrdiff_t>(it - ranks_cdf_.begin(), ranks_cdf_.size() - 1));
}

ApiKey BatchGenerator::KeyFor(int rank, wire::Metric metric) const {
  // Spread popular ranks over the known modules first, then the synthetic tail.
  const auto& known = KnownModules();
  const int m = rank % options_.modules;
  const int s = rank / options_.modules;
  ApiKey k;
  if (m < static_cast<int>(known.size())) {
    k.module = known[m].soname;
    if (s < static_cast<int>(known[m].symbols.size())) {
      k.symbol = known[m].symbols[s];
    } else {
      k.symbol = std::string(known[m].symbols[0]) + "_variant" + std::to_string(s);
    }
  } else {
    k.module = "libfieldgen" + std::to_string(m) + ".so." + std::to_string(1 + m % 3);
    k.symbol = "fg" + std::to_string(m) + "_op" + std::to_string(s);
  }
  k.module_version =
      (rank % 7 == 0) ? "2.3." + std::to_string(rank % 5) : "build-" + std::to_string(m);
  k.metric = metric;
  return k;
}

ApiKey BatchGenerator::StackKeyFor(int rank, int variant) const {
  ApiKey k = KeyFor(rank, wire::METRIC_STACK_CPU_NS);
  // The API, then internal frames (one exported, the rest offsets), then
  // where the time went: as the runtime folds a stack.
  static constexpr const char* kMarks[] = {"[libc.so.6]", "[program]", "[deeper]", ""};
  char offset[24];
  std::snprintf(offset, sizeof offset, "+%x", 0x1000 + (rank * 131 + variant * 17) % 0xf000);
  std::string stack = k.symbol + ";" + offset;
  if (variant % 2 == 1) stack += ";" + k.symbol + "_inner";
  if (variant >= 2) {
    std::snprintf(offset, sizeof offset, ";+%x", 0x20 * (variant + 1));
    stack += offset;
  }
  if (const char* mark = kMarks[variant % 4]; mark[0] != 0) stack += ";" + std::string(mark);
  k.symbol = std::move(stack);
  return k;
}

wire::Record BatchGenerator::MakeStackRecord(int rank) {
  wire::Record rec;
  const int variant = static_cast<int>(rng_() % 8);
  ApiKeyToWire(StackKeyFor(rank, variant), rec.mutable_key());
  rec.mutable_key()->clear_platform();
  // One value per run: that run's CPU time in the stack (a sample is 50 ms).
  const int runs = 1 + static_cast<int>(rng_() % 20);
  Histogram h;
  for (int i = 0; i < runs; ++i) h.Record(50000000ull * (1 + rng_() % 40));
  HistogramToWire(h, rec.mutable_histogram());
  rec.set_runs(static_cast<uint64_t>(runs));
  return rec;
}

wire::Record BatchGenerator::MakeRecord(int rank, wire::Metric metric) {
  wire::Record rec;
  ApiKey key = KeyFor(rank, metric);
  ApiKeyToWire(key, rec.mutable_key());
  rec.mutable_key()->clear_platform();  // inherit the batch's platform
  // Log-uniform number of calls, API-specific median cost.
  std::uniform_real_distribution<double> u(0, std::log(options_.max_calls_per_record));
  const int calls = std::max(1, static_cast<int>(std::exp(u(rng_))));
  double median;
  double sigma = 0.8;
  switch (metric) {
    case wire::METRIC_WALL_TIME_NS:
      median = 30.0 * (1 + (rank * 2654435761u) % 5000);
      break;
    case wire::METRIC_ALLOC_COUNT:
      median = 1 + rank % 6;
      sigma = 0.5;
      break;
    default:
      median = 64.0 * (1 + (rank * 40503u) % 200);
      break;
  }
  std::lognormal_distribution<double> cost(std::log(median), sigma);
  Histogram h;
  for (int i = 0; i < calls; ++i) {
    double v = cost(rng_);
    // Some calls allocate nothing / do no I/O at all.
    if (metric != wire::METRIC_WALL_TIME_NS && (rng_() & 7) == 0) v = 0;
    h.Record(static_cast<uint64_t>(std::min(v, 1e15)));
  }
  HistogramToWire(h, rec.mutable_histogram());
  rec.set_runs(std::min<uint64_t>(calls, 1 + rng_() % 20));
  // As the runtime sends it: wall time's timing resolution (no draw from
  // rng_, so a seed gives the batches it always gave).
  if (metric == wire::METRIC_WALL_TIME_NS) rec.set_resolution_ns(5 + rank % 40);
  return rec;
}

wire::Batch BatchGenerator::Next() {
  static constexpr wire::Metric kMetrics[] = {
      wire::METRIC_WALL_TIME_NS, wire::METRIC_ALLOC_BYTES_INCLUSIVE,
      wire::METRIC_ALLOC_BYTES_EXCLUSIVE, wire::METRIC_ALLOC_COUNT, wire::METRIC_FILE_IO_BYTES};
  wire::Batch b;
  b.set_schema_version(kSchemaVersion);
  b.set_batch_id(NewBatchId());
  b.set_created_unix_ms(1700000000000 + static_cast<int64_t>(rng_() % 1000000000));
  wire::Platform* p = b.mutable_client_platform();
  p->set_os(wire::OS_LINUX);
  p->set_arch((rng_() % 4 == 0) ? wire::ARCH_AARCH64 : wire::ARCH_X86_64);
  p->set_cpu_vendor(p->arch() == wire::ARCH_AARCH64
                        ? wire::CPU_VENDOR_ARM
                        : ((rng_() & 1) ? wire::CPU_VENDOR_INTEL : wire::CPU_VENDOR_AMD));
  p->set_cpu_family(p->arch() == wire::ARCH_AARCH64 ? 8 : 6 + (rng_() % 2) * 17);
  b.mutable_counters()->set_runs_instrumented(1 + rng_() % 500);
  b.mutable_counters()->set_runs_refused_load_cap(rng_() % 10);
  size_t bytes = b.ByteSizeLong();
  while (bytes < options_.target_bytes && b.records_size() < 30000) {
    const int rank = DrawRank();
    wire::Record* r = b.add_records();
    if (options_.stack_share > 0 &&
        std::uniform_real_distribution<double>(0, 1)(rng_) < options_.stack_share) {
      *r = MakeStackRecord(rank);
    } else {
      // Time is always measured; each allocation/IO metric for some APIs only.
      const wire::Metric metric = (rng_() % 3 == 0) ? kMetrics[1 + rank % 4] : kMetrics[0];
      *r = MakeRecord(rank, metric);
    }
    const size_t rb = r->ByteSizeLong();
    bytes += rb + 1 + (rb >= 128 ? 2 : 1);  // tag + length varint
  }
  return b;
}

void GroundTruth::Add(const wire::Batch& batch) {
  for (const wire::Record& r : batch.records()) {
    by_key_[EncodeApiKey(ApiKeyFromWire(r.key(), batch.client_platform()))].Merge(
        HistogramFromWire(r.histogram()));
  }
}

void GroundTruth::Merge(const GroundTruth& other) {
  for (const auto& [k, h] : other.by_key_) by_key_[k].Merge(h);
}

}  // namespace fieldprof::tools
