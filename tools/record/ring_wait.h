// How a thread that drains perf_event rings waits between looks: until the
// kernel wakes it for one of them (when a ring is half full, unless its
// event asks otherwise), a timeout, or Wake() from another thread, which
// ends the wait at once (an eventfd). The outside sampler's copier
// (perf_sampler.cc) and the CPU-wide switch records' drainer
// (cpu_switches.cc) wait so.
#ifndef FIELDPROF_TOOLS_RECORD_RING_WAIT_H_
#define FIELDPROF_TOOLS_RECORD_RING_WAIT_H_

#include <poll.h>
#include <sys/eventfd.h>
#include <unistd.h>

#include <vector>

namespace fieldprof::tools {

class RingWait {
 public:
  RingWait() : wake_fd_(eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK)) {
    if (wake_fd_ >= 0) fds_.push_back({wake_fd_, POLLIN, 0});
  }
  ~RingWait() {
    if (wake_fd_ >= 0) close(wake_fd_);
  }
  RingWait(const RingWait&) = delete;
  RingWait& operator=(const RingWait&) = delete;

  // A ring's perf_event descriptor to wake for. Before the waiting thread
  // starts.
  void Add(int ring_fd) { fds_.push_back({ring_fd, POLLIN, 0}); }

  // The waiting thread. Without an eventfd (refused), Wake() is only seen
  // at the timeout.
  void Wait(int timeout_ms) {
    if (poll(fds_.data(), fds_.size(), timeout_ms) > 0 && wake_fd_ >= 0 &&
        (fds_[0].revents & POLLIN) != 0) {
      eventfd_t ignored;
      (void)eventfd_read(wake_fd_, &ignored);
    }
  }

  // Any thread: the wait ends now (or the next one does at once).
  void Wake() {
    if (wake_fd_ >= 0) (void)eventfd_write(wake_fd_, 1);
  }

 private:
  int wake_fd_;
  std::vector<pollfd> fds_;
};

}  // namespace fieldprof::tools

#endif  // FIELDPROF_TOOLS_RECORD_RING_WAIT_H_
