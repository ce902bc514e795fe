#include "common/base/durable_file.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <random>
#include <sstream>

namespace fieldprof {

namespace fs = std::filesystem;

namespace {

Status Errno(const std::string& what) {
  const int e = errno;
  std::string m = what + ": " + std::strerror(e);
  // A full disk (or quota) is a condition to wait out, not a failure.
  if (e == ENOSPC || e == EDQUOT) return NoSpace(std::move(m));
  return IOError(std::move(m));
}

}  // namespace

Status MakeDirs(const std::string& dir, FileAccess access) {
  std::error_code ec;
  if (dir.empty() || fs::is_directory(dir, ec)) return Status::Ok();
  const fs::path parent = fs::path(dir).parent_path();
  if (!parent.empty() && parent != fs::path(dir)) {
    FP_RETURN_IF_ERROR(MakeDirs(parent.string(), access));
  }
  const mode_t mode = access == FileAccess::kShared ? 0777 : 0700;
  if (::mkdir(dir.c_str(), mode) != 0 && errno != EEXIST) return Errno("cannot create " + dir);
  return Status::Ok();
}

Status SyncDir(const std::string& dir) {
  const std::string where = dir.empty() ? "." : dir;
  const int fd = ::open(where.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  if (fd < 0) return Errno("cannot open directory " + where);
  const int r = ::fsync(fd);
  const int err = errno;
  ::close(fd);
  errno = err;
  if (r != 0) return Errno("cannot sync " + where);
  return Status::Ok();
}

Status WriteFileDurably(const std::string& path, const std::string& data, FileAccess access) {
  if (path.empty()) return InvalidArgument("no file name given");
  static thread_local std::mt19937_64 rng{std::random_device{}()};
  const std::string tmp = path + ".tmp-" + std::to_string(rng());
  // Shared files get 0666 and the umask takes its part, as any tool's output.
  const mode_t mode = access == FileAccess::kShared ? 0666 : 0600;
  const int fd = ::open(tmp.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, mode);
  if (fd < 0) return Errno("cannot create " + tmp);
  size_t done = 0;
  while (done < data.size()) {
    const ssize_t n = ::write(fd, data.data() + done, data.size() - done);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) {
      const Status s = Errno("cannot write " + tmp);
      ::close(fd);
      ::unlink(tmp.c_str());
      return s;
    }
    done += static_cast<size_t>(n);
  }
  if (::fsync(fd) != 0) {
    const Status s = Errno("cannot sync " + tmp);
    ::close(fd);
    ::unlink(tmp.c_str());
    return s;
  }
  ::close(fd);
  if (::rename(tmp.c_str(), path.c_str()) != 0) {
    const Status s = Errno("cannot rename " + tmp);
    ::unlink(tmp.c_str());
    return s;
  }
  return SyncDir(fs::path(path).parent_path().string());
}

StatusOr<std::string> ReadWholeFile(const std::string& path) { return ReadFileFrom(path, 0); }

StatusOr<std::string> ReadFileFrom(const std::string& path, uint64_t offset) {
  // Sized from fstat and read in place: a stream copy through a growing
  // buffer spent most of a 2 MiB read moving bytes (fieldprof cost's index).
  const int fd = open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) return NotFound("cannot read " + path);
  struct stat st {};
  std::string out;
  if (fstat(fd, &st) == 0 && static_cast<uint64_t>(st.st_size) > offset) {
    out.reserve(static_cast<size_t>(static_cast<uint64_t>(st.st_size) - offset));
  }
  if (offset > 0 && lseek(fd, static_cast<off_t>(offset), SEEK_SET) < 0) {
    close(fd);
    return IOError("reading " + path + " failed: " + std::strerror(errno));
  }
  char chunk[65536];
  while (true) {
    const size_t room = out.capacity() - out.size();
    if (room > 0) {  // straight into the string's spare capacity
      const size_t at = out.size();
      out.resize(out.capacity());
      const ssize_t n = read(fd, out.data() + at, room);
      if (n < 0 && errno == EINTR) {
        out.resize(at);
        continue;
      }
      if (n < 0) {
        close(fd);
        return IOError("reading " + path + " failed: " + std::strerror(errno));
      }
      out.resize(at + static_cast<size_t>(n));
      if (n == 0) break;
      continue;
    }
    const ssize_t n = read(fd, chunk, sizeof chunk);  // the file grew, or no size was known
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) {
      close(fd);
      return IOError("reading " + path + " failed: " + std::strerror(errno));
    }
    if (n == 0) break;
    out.append(chunk, static_cast<size_t>(n));
  }
  close(fd);
  return out;
}

}  // namespace fieldprof
