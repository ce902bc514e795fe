#include "common/spool/run_counters.h"

#include <fcntl.h>
#include <sys/file.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <sstream>

namespace fieldprof {
namespace {

RunCounts Parse(const std::string& text) {
  RunCounts c{};
  std::istringstream in(text);
  std::string name;
  std::string value;
  while (in >> name >> value) {
    for (int i = 0; i < kNumRunCounters; ++i) {
      if (name != kRunCounterNames[i]) continue;
      char* end = nullptr;
      errno = 0;
      const unsigned long long v = std::strtoull(value.c_str(), &end, 10);
      if (errno == 0 && end != value.c_str() && *end == 0) c[i] = v;
    }
  }
  return c;
}

std::string Format(const RunCounts& c) {
  std::string out;
  for (int i = 0; i < kNumRunCounters; ++i) {
    out += std::string(kRunCounterNames[i]) + " " + std::to_string(c[i]) + "\n";
  }
  return out;
}

StatusOr<std::string> ReadAll(int fd, const std::string& path) {
  std::string text;
  char buf[512];
  off_t at = 0;
  for (;;) {
    const ssize_t n = pread(fd, buf, sizeof buf, at);
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) return IOError("cannot read " + path + ": " + std::strerror(errno));
    if (n == 0) break;
    text.append(buf, static_cast<size_t>(n));
    at += n;
    if (text.size() > 64 * 1024) break;  // damage: the runtime writes a few lines
  }
  return text;
}

}  // namespace

StatusOr<RunCounts> ReadRunCounters(const std::string& spool_dir) {
  const std::string path = spool_dir + "/" FP_COUNTERS_FILE;
  const int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC | O_NOFOLLOW);
  if (fd < 0) {
    if (errno == ENOENT) return RunCounts{};
    return IOError("cannot open " + path + ": " + std::strerror(errno));
  }
  StatusOr<std::string> text = ReadAll(fd, path);
  ::close(fd);
  if (!text.ok()) return text.status();
  return Parse(*text);
}

StatusOr<RunCounts> TakeRunCounters(const std::string& spool_dir,
                                    const std::function<Status(const RunCounts&)>& keep) {
  const std::string path = spool_dir + "/" FP_COUNTERS_FILE;
  const int fd = ::open(path.c_str(), O_RDWR | O_CLOEXEC | O_NOFOLLOW);
  if (fd < 0) {
    if (errno == ENOENT) return RunCounts{};
    return IOError("cannot open " + path + ": " + std::strerror(errno));
  }
  // The runtime never holds the lock for more than a few system calls.
  if (::flock(fd, LOCK_EX) != 0) {
    const int e = errno;
    ::close(fd);
    return IOError("cannot lock " + path + ": " + std::strerror(e));
  }
  StatusOr<std::string> text = ReadAll(fd, path);
  if (!text.ok()) {
    ::close(fd);
    return text.status();
  }
  const RunCounts counts = Parse(*text);
  bool any = false;
  for (uint64_t v : counts) any = any || v != 0;
  if (any) {
    if (Status s = keep(counts); !s.ok()) {
      ::close(fd);
      return s;
    }
    const std::string zero = Format(RunCounts{});
    if (::pwrite(fd, zero.data(), zero.size(), 0) != static_cast<ssize_t>(zero.size()) ||
        ::ftruncate(fd, static_cast<off_t>(zero.size())) != 0) {
      // Kept already: the next take would count them again. Say so.
      const int e = errno;
      ::close(fd);
      return IOError("cannot zero " + path + " after taking its counts: " + std::strerror(e));
    }
  }
  ::close(fd);  // releases the lock
  return counts;
}

}  // namespace fieldprof
