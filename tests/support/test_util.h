// Helpers shared by the tests: temporary directories, TLS certificates made
// with the openssl command line, and valid batches.
#ifndef FIELDPROF_TESTS_SUPPORT_TEST_UTIL_H_
#define FIELDPROF_TESTS_SUPPORT_TEST_UTIL_H_

#include <netinet/in.h>
#include <sys/mount.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <optional>
#include <string>
#include <thread>

#include "common/base/durable_file.h"
#include "common/proto/fieldprof.pb.h"
#include "common/statistics/histogram.h"
#include "common/wire/wire.h"

namespace fieldprof::testing {

// A fresh directory under $TMPDIR, removed with everything in it on destruction.
class TempDir {
 public:
  TempDir() {
    std::string tmpl = (std::filesystem::temp_directory_path() / "fieldprof-test-XXXXXX").string();
    char* p = mkdtemp(tmpl.data());
    if (p == nullptr) std::abort();
    path_ = p;
  }
  ~TempDir() {
    std::error_code ec;
    std::filesystem::remove_all(path_, ec);
  }
  TempDir(const TempDir&) = delete;
  TempDir& operator=(const TempDir&) = delete;
  const std::string& path() const { return path_; }
  std::string File(const std::string& name) const { return path_ + "/" + name; }

 private:
  std::string path_;
};

// The page tests' browser: node and npm's playwright-core under
// tests/aggregator/ui (./deploy/install-deps.sh process installs both).
// `source_dir`: the repository's root.
inline bool BrowserInstalled(const std::string& source_dir) {
  const std::string check = "command -v node >/dev/null && test -d " + source_dir +
                            "/tests/aggregator/ui/node_modules/playwright-core";
  return std::system(check.c_str()) == 0;
}
inline constexpr char kBrowserMissing[] =
    "node and playwright-core: ./deploy/install-deps.sh process";

// A loopback port free right now.
inline uint16_t FreePort() {
  int fd = socket(AF_INET, SOCK_STREAM, 0);
  sockaddr_in a{};
  a.sin_family = AF_INET;
  a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  bind(fd, reinterpret_cast<sockaddr*>(&a), sizeof a);
  socklen_t len = sizeof a;
  getsockname(fd, reinterpret_cast<sockaddr*>(&a), &len);
  close(fd);
  return ntohs(a.sin_port);
}

// Writes dir/cert.pem and dir/key.pem, self-signed for localhost/127.0.0.1/::1.
// kind: "ec" (P-256) or "rsa". Returns false if openssl failed.
inline bool MakeCert(const std::string& dir, const std::string& kind = "ec") {
  std::string newkey =
      kind == "ec" ? "-newkey ec -pkeyopt ec_paramgen_curve:prime256v1" : "-newkey rsa:2048";
  std::string cmd = "openssl req -x509 " + newkey +
                    " -nodes -days 2 -subj /CN=localhost -addext "
                    "subjectAltName=DNS:localhost,IP:127.0.0.1,IP:::1 -keyout " +
                    dir + "/key.pem -out " + dir + "/cert.pem >/dev/null 2>&1";
  return std::system(cmd.c_str()) == 0;
}

// A valid single-record batch: `calls` calls of `value` ns to module:symbol.
inline wire::Batch SimpleBatch(const std::string& id, const std::string& module,
                               const std::string& symbol, uint64_t value, int calls = 1) {
  wire::Batch b;
  b.set_schema_version(kSchemaVersion);
  b.set_batch_id(id);
  b.set_created_unix_ms(1700000000000);
  b.mutable_client_platform()->set_os(wire::OS_LINUX);
  b.mutable_client_platform()->set_arch(wire::ARCH_X86_64);
  b.mutable_client_platform()->set_cpu_vendor(wire::CPU_VENDOR_INTEL);
  b.mutable_client_platform()->set_cpu_family(6);
  wire::Record* r = b.add_records();
  r->mutable_key()->set_module(module);
  r->mutable_key()->set_module_version("1.0");
  r->mutable_key()->set_symbol(symbol);
  r->mutable_key()->set_metric(wire::METRIC_WALL_TIME_NS);
  Histogram h;
  for (int i = 0; i < calls; ++i) h.Record(value);
  HistogramToWire(h, r->mutable_histogram());
  r->set_runs(1);
  return b;
}

// A real filesystem of bounded size (a tmpfs of `size`, e.g. "24m") mounted
// on the directory `path` for the object's life, for full-disk tests. Needs
// root; ok() says whether it is mounted, why() why not.
class SmallDisk {
 public:
  SmallDisk(std::string path, const std::string& size) : path_(std::move(path)) {
    const std::string options = "size=" + size;
    if (::mount("tmpfs", path_.c_str(), "tmpfs", 0, options.c_str()) == 0) {
      mounted_ = true;
    } else {
      why_ = "cannot mount a tmpfs here (needs root): " + std::string(std::strerror(errno));
    }
  }
  ~SmallDisk() {
    if (mounted_) ::umount2(path_.c_str(), MNT_DETACH);
  }
  SmallDisk(const SmallDisk&) = delete;
  SmallDisk& operator=(const SmallDisk&) = delete;
  bool ok() const { return mounted_; }
  const std::string& why() const { return why_; }
  // Space returns: the same filesystem, its files kept, at a new size.
  bool Resize(const std::string& size) {
    const std::string options = "size=" + size;
    return mounted_ && ::mount("tmpfs", path_.c_str(), "tmpfs", MS_REMOUNT, options.c_str()) == 0;
  }

 private:
  std::string path_;
  bool mounted_ = false;
  std::string why_;
};

// Polls `condition` every few milliseconds until it holds or `deadline`
// passes; whether it held. What a test waits for, never a fixed sleep.
template <typename Condition>
bool WaitUntil(Condition condition, std::chrono::milliseconds deadline = std::chrono::seconds(30)) {
  const auto end = std::chrono::steady_clock::now() + deadline;
  for (;;) {
    if (condition()) return true;
    if (std::chrono::steady_clock::now() >= end) return false;
    std::this_thread::sleep_for(std::chrono::milliseconds(5));
  }
}

// The value of the sample `name` ("name VALUE" on a line of its own; a
// labelled sample's name with its labels as printed, name{a="b"}) in
// Prometheus text, or nullopt when the text has no such line: a test that
// a counter stayed 0 must tell 0 from missing.
inline std::optional<double> MetricValue(const std::string& text, const std::string& name) {
  const std::string at_start = name + " ";
  size_t pos = text.rfind("\n" + at_start);
  if (pos != std::string::npos) {
    pos += 1;
  } else if (text.compare(0, at_start.size(), at_start) == 0) {
    pos = 0;
  } else {
    return std::nullopt;
  }
  return std::strtod(text.c_str() + pos + at_start.size(), nullptr);
}

// A 16-byte id built from a number, for readable tests.
inline std::string IdOf(uint64_t n) {
  std::string id(16, '\0');
  for (int i = 0; i < 8; ++i) id[i] = static_cast<char>(n >> (8 * i));
  id[15] = 'T';
  return id;
}

// The whole of /proc/<pid>/<name>, or "" when the process is gone. Another
// process's file can fail between open and read (ESRCH once it has ended),
// and std::ifstream's buffer turns that failure into an exception.
inline std::string ProcFile(pid_t pid, const std::string& name) {
  StatusOr<std::string> text = ReadWholeFile("/proc/" + std::to_string(pid) + "/" + name);
  return text.ok() ? std::move(text).value() : std::string();
}

// Runs a shell command; its stdout in `out`, its exit code returned (-1 if
// it did not exit).
inline int RunCommand(const std::string& cmd, std::string* out) {
  FILE* p = popen(cmd.c_str(), "r");
  if (p == nullptr) return -1;
  out->clear();
  char buf[4096];
  size_t n;
  while ((n = fread(buf, 1, sizeof buf, p)) > 0) out->append(buf, n);
  const int status = pclose(p);
  return WIFEXITED(status) ? WEXITSTATUS(status) : -1;
}

}  // namespace fieldprof::testing

#endif  // FIELDPROF_TESTS_SUPPORT_TEST_UTIL_H_
