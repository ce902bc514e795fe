#include "agent/preload/base/high_fd.h"

#include <fcntl.h>
#include <sys/resource.h>
#include <unistd.h>

namespace fieldprof::preload {

int DupFdHigh(int fd) {
  static int floor = 0;
  if (floor == 0) {
    rlimit rl{};
    const rlim_t soft = getrlimit(RLIMIT_NOFILE, &rl) == 0 ? rl.rlim_cur : 1024;
    const rlim_t limit = soft == RLIM_INFINITY || soft > 4096 ? 4096 : soft;
    floor = static_cast<int>(limit > 64 ? limit - limit / 4 : 10);
  }
  return fcntl(fd, F_DUPFD_CLOEXEC, floor);
}

int MoveFdHigh(int fd) {
  const int high = DupFdHigh(fd);
  if (high < 0) return fd;
  close(fd);
  return high;
}

}  // namespace fieldprof::preload
