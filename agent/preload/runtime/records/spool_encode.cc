#include "agent/preload/runtime/records/spool_encode.h"

#include <cpuid.h>
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <string.h>
#include <sys/file.h>
#include <sys/platform/x86.h>
#include <sys/random.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

namespace fieldprof::rt {

constexpr uint64_t kMetricPointNs = 7;     // wire::METRIC_POINT_NS
constexpr uint64_t kMetricStackCpuNs = 8;  // wire::METRIC_STACK_CPU_NS

void EncodePlatform(ProtoOut& o) {
  unsigned a, b, c, d;
  uint32_t vendor = 15, family = 0;
  // The vendor by one cpuid (leaf 0 is always there on x86-64; asking
  // for the highest leaf first, as __get_cpuid does, is a second): each
  // is a VM exit, about 4 us here, once in every measured process.
  __cpuid(0, a, b, c, d);
  char v[13];
  memcpy(v, &b, 4);
  memcpy(v + 4, &d, 4);
  memcpy(v + 8, &c, 4);
  v[12] = 0;
  if (!strcmp(v, "GenuineIntel")) vendor = 1;
  if (!strcmp(v, "AuthenticAMD")) vendor = 2;
  // Leaf 1 as glibc read it at start (the instruction is a VM exit).
  a = __x86_get_cpuid_feature_leaf(CPUID_INDEX_1)->cpuid_array[cpuid_register_index_eax];
  family = (a >> 8) & 0xf;
  if (family == 0xf) family += (a >> 20) & 0xff;
  o.U64(1, 1);  // OS_LINUX
  o.U64(2, 1);  // ARCH_X86_64
  o.U64(3, vendor);
  o.U64(4, family);
}

void EncodeHistogram(const Histogram& h, ProtoOut& o) {
  o.U64(1, h.zero_count());
  char bbuf[128];
  for (int i = 0; i < kNumBuckets; ++i) {
    const HistogramBucket& b = h.bucket(i);
    if (b.count == 0) continue;
    ProtoOut bo{bbuf, 0, sizeof bbuf};
    if (i != 0) {  // index 0 is the proto3 default
      bo.Tag(1, 0);
      bo.Varint(static_cast<uint64_t>(i));
    }
    bo.U64(2, b.count);
    bo.U64(3, static_cast<uint64_t>(b.sum));
    bo.U64(4, static_cast<uint64_t>(b.sum >> 64));
    bo.U64(5, static_cast<uint64_t>(b.sum_sq));
    bo.U64(6, static_cast<uint64_t>(b.sum_sq >> 64));
    o.Bytes(2, bbuf, bo.n);
  }
  o.U64(3, h.count());
  o.U64(4, static_cast<uint64_t>(h.sum()));
  o.U64(5, static_cast<uint64_t>(h.sum() >> 64));
  o.U64(6, static_cast<uint64_t>(h.sum_sq()));
  o.U64(7, static_cast<uint64_t>(h.sum_sq() >> 64));
  o.U64(8, h.sum_sq_saturated() ? 1 : 0);
  o.U64(9, h.count() ? h.min() : 0);
  o.U64(10, h.max());
}

namespace {

// A record of one run (runs = 1) of a series that is not an API's: a
// point's or a stack's. False when it did not fit.
bool EncodeOtherRecord(const char* module, const char* build_id, const char* symbol,
                       uint64_t metric, const Histogram& h, const ProtoOut& po,
                       SpoolScratch& scratch, ProtoOut& o) {
  ProtoOut ko{scratch.key, 0, sizeof scratch.key};
  ko.Str(1, module);
  ko.Str(2, build_id);
  ko.Str(3, symbol);
  ko.U64(4, metric);
  ko.Bytes(5, po.p, po.n);
  ProtoOut ho{scratch.hist, 0, sizeof scratch.hist};
  EncodeHistogram(h, ho);
  ProtoOut ro{scratch.rec, 0, sizeof scratch.rec};
  ro.Bytes(1, scratch.key, ko.n);
  ro.Bytes(2, scratch.hist, ho.n);
  ro.U64(3, 1);  // runs
  if (ko.bad || ho.bad || ro.bad) return false;
  o.Bytes(3, scratch.rec, ro.n);
  return true;
}

}  // namespace

size_t EncodeRunRecord(const SpoolRun& run, int64_t ended_unix_ms, SpoolScratch& scratch, char* out,
                       size_t cap) {
  // Nested messages: encoded into scratch buffers, then copied as bytes.
  ProtoOut o{out, 0, cap};
  char* const plat = scratch.plat;
  char* const key = scratch.key;
  char* const hist = scratch.hist;
  char* const rec = scratch.rec;
  char* const ctr = scratch.ctr;
  ProtoOut po{plat, 0, sizeof scratch.plat};
  EncodePlatform(po);
  o.U64(1, 1);  // schema_version
  o.Bytes(2, plat, po.n);
  for (int a = 0; a < run.napis; ++a) {
    const SpoolApi& api = run.apis[a];
    for (int m = 0; m < FP_NUM_METRICS; ++m) {
      const Histogram& h = api.metrics[m];
      if (h.count() == 0) continue;
      ProtoOut ko{key, 0, sizeof scratch.key};
      ko.Str(1, api.module);
      ko.Str(2, api.build_id);
      ko.Str(3, api.symbol);
      ko.U64(4, static_cast<uint64_t>(m + 1));
      ko.Bytes(5, plat, po.n);
      ProtoOut ho{hist, 0, sizeof scratch.hist};
      EncodeHistogram(h, ho);
      ProtoOut ro{rec, 0, sizeof scratch.rec};
      ro.Bytes(1, key, ko.n);
      ro.Bytes(2, hist, ho.n);
      ro.U64(3, 1);  // runs
      ro.U64(4, api.truncated ? 1 : 0);
      if (m == 0 && run.resolution_ns != 0) ro.U64(5, run.resolution_ns);
      if (ko.bad || ho.bad || ro.bad) return 0;
      o.Bytes(3, rec, ro.n);
    }
  }
  for (int i = 0; i < run.npoints; ++i) {
    const SpoolPoint& pt = run.points[i];
    if (!EncodeOtherRecord(pt.module, pt.build_id, pt.symbol, kMetricPointNs, *pt.h, po, scratch,
                           o)) {
      return 0;
    }
  }
  for (int i = 0; i < run.nstacks; ++i) {
    const SpoolStack& st = run.stacks[i];
    Histogram h;
    h.Record(st.ns);
    if (!EncodeOtherRecord(st.module, st.build_id, st.symbol, kMetricStackCpuNs, h, po, scratch,
                           o)) {
      return 0;
    }
  }
  ProtoOut co{ctr, 0, sizeof scratch.ctr};
  co.U64(1, run.calls_measured);
  co.U64(2, run.abandoned);
  co.U64(3, run.dropped);
  co.U64(4, run.probe_ns);
  co.U64(5, run.apis_chosen);
  co.U64(6, run.apis_truncated);
  co.U64(7, run.refused);
  co.U64(8, run.run_ns);
  o.Bytes(4, ctr, co.n);
  if (ended_unix_ms > 0) o.U64(5, static_cast<uint64_t>(ended_unix_ms));
  o.U64(6, run.part);
  return o.bad ? 0 : o.n;
}

namespace {

void MakeDirs(const char* dir) {
  char path[1024];
  snprintf(path, sizeof path, "%s", dir);
  for (char* p = path + 1; *p; ++p) {
    if (*p != '/') continue;
    *p = 0;
    mkdir(path, 0700);
    *p = '/';
  }
  mkdir(path, 0700);
}

uint64_t SpoolBytes(const char* dir) {
  DIR* d = opendir(dir);
  if (d == nullptr) return 0;
  uint64_t total = 0;
  while (dirent* e = readdir(d)) {
    const size_t len = strlen(e->d_name);
    if (len < 5 || strcmp(e->d_name + len - 4, ".fpr") != 0) continue;
    struct stat st;
    if (fstatat(dirfd(d), e->d_name, &st, 0) == 0) total += static_cast<uint64_t>(st.st_size);
  }
  closedir(d);
  return total;
}

// The spool's size is kept in DIR/.usage ("<bytes> <unix seconds of the
// last count>"), read and updated under an flock, so that a run's exit
// costs a few system calls rather than a stat of every record (~1 ms per
// thousand records here, ~8 ms at the default cap). The records are
// counted again when the file is missing, damaged, or its count is older
// than kRecountAfterS (records the agent uploaded and removed are then
// forgotten), so at most about once a minute per spool. Until then the
// figure only overestimates: a record may be refused early, never let
// past the cap.
constexpr int64_t kRecountAfterS = 60;
// The longest an exit waits for another process's hold on .usage.
constexpr int64_t kLockWaitNs = 50'000'000;

struct Usage {
  int fd = -1;  // locked; -1 when the file cannot be used (then: count every time)
  uint64_t bytes = 0;
  int64_t counted_at = 0;
};

Usage ReadUsage(const char* dir, int64_t now_s) {
  Usage u;
  char path[1100];
  snprintf(path, sizeof path, "%s/.usage", dir);
  // Without O_CREAT first (a create-capable open locks the directory), and
  // the directories made only when missing: most exits find them all.
  u.fd = open(path, O_RDWR | O_CLOEXEC | O_NOFOLLOW);
  if (u.fd < 0 && errno == ENOENT) {
    u.fd = open(path, O_RDWR | O_CREAT | O_CLOEXEC | O_NOFOLLOW, 0600);
    if (u.fd < 0 && errno == ENOENT) {
      MakeDirs(dir);
      u.fd = open(path, O_RDWR | O_CREAT | O_CLOEXEC | O_NOFOLLOW, 0600);
    }
  }
  if (u.fd >= 0) {
    // Never wait long: a process stopped while holding the lock must not
    // hold up this one's exit. Past kLockWaitNs, count without the file
    // (the cap may then be passed by the records written meanwhile). Each
    // holder keeps it for a read, a file written and renamed, and a write:
    // eight programs ending at once on a busy 2-core VM queued for more
    // than the 5 ms this waited before, and passed the cap.
    timespec t0;
    clock_gettime(CLOCK_MONOTONIC, &t0);
    while (flock(u.fd, LOCK_EX | LOCK_NB) != 0) {
      timespec now;
      clock_gettime(CLOCK_MONOTONIC, &now);
      const int64_t waited = (now.tv_sec - t0.tv_sec) * 1000000000 + (now.tv_nsec - t0.tv_nsec);
      if ((errno != EWOULDBLOCK && errno != EINTR) || waited >= kLockWaitNs) {
        close(u.fd);
        u.fd = -1;
        break;
      }
      const timespec pause{0, 100 * 1000};
      nanosleep(&pause, nullptr);
    }
  }
  if (u.fd >= 0) {
    char buf[64];
    const ssize_t n = pread(u.fd, buf, sizeof buf - 1, 0);
    unsigned long long bytes = 0;
    long long at = 0;
    if (n > 0) {
      buf[n] = 0;
      if (sscanf(buf, "%llu %lld", &bytes, &at) == 2 && at <= now_s &&
          now_s - at < kRecountAfterS) {
        u.bytes = bytes;
        u.counted_at = at;
        return u;
      }
    }
  }
  u.bytes = SpoolBytes(dir);
  u.counted_at = now_s;
  return u;
}

// Writes the figure back and lets go of the lock.
void WriteUsage(Usage& u) {
  if (u.fd < 0) return;
  char buf[64];
  const int n = snprintf(buf, sizeof buf, "%llu %lld\n", static_cast<unsigned long long>(u.bytes),
                         static_cast<long long>(u.counted_at));
  if (n > 0 && pwrite(u.fd, buf, static_cast<size_t>(n), 0) == n) {
    if (ftruncate(u.fd, n) != 0) {
      // A longer old figure left behind would only be misread as damaged.
    }
  }
  close(u.fd);  // releases the lock
  u.fd = -1;
}

}  // namespace

const char* WriteSpoolRecord(const char* dir, uint64_t cap_bytes, const SpoolRun& run,
                             SpoolScratch& scratch) {
  if (dir == nullptr || dir[0] == 0) return "no spool directory";
  char* const buf = scratch.file;
  timespec ts;
  clock_gettime(CLOCK_REALTIME, &ts);
  const int64_t ms = int64_t{ts.tv_sec} * 1000 + ts.tv_nsec / 1000000;
  const size_t n = EncodeRunRecord(run, ms, scratch, buf, sizeof scratch.file);
  if (n == 0) return "record too large";
  const int saved = errno;
  Usage usage = ReadUsage(dir, ts.tv_sec);
  if (usage.bytes + n > cap_bytes) {
    WriteUsage(usage);
    errno = saved;
    return "spool is full";
  }
  uint32_t rnd = 0;
  if (getrandom(&rnd, sizeof rnd, GRND_NONBLOCK) != sizeof rnd)
    rnd = static_cast<uint32_t>(ts.tv_nsec);
  char tmp[1100], final_path[1100];
  snprintf(tmp, sizeof tmp, "%s/.tmp-%lld-%d-%08x", dir, static_cast<long long>(ms), getpid(), rnd);
  snprintf(final_path, sizeof final_path, "%s/run-%lld-%d-%08x.fpr", dir,
           static_cast<long long>(ms), getpid(), rnd);
  int fd = open(tmp, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0600);
  if (fd < 0 && errno == ENOENT) {  // no .usage either (a spool it cannot write)
    MakeDirs(dir);
    fd = open(tmp, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0600);
  }
  if (fd < 0) {
    WriteUsage(usage);
    errno = saved;
    return "cannot create the record file";
  }
  size_t done = 0;
  while (done < n) {
    const ssize_t w = write(fd, buf + done, n - done);
    if (w < 0 && errno == EINTR) continue;
    if (w <= 0) break;
    done += static_cast<size_t>(w);
  }
  const bool ok = done == n && close(fd) == 0;
  if (!ok || rename(tmp, final_path) != 0) {
    unlink(tmp);
    WriteUsage(usage);
    errno = saved;
    return "cannot write the record (disk full?)";
  }
  usage.bytes += n;
  WriteUsage(usage);
  errno = saved;
  return nullptr;
}

}  // namespace fieldprof::rt
