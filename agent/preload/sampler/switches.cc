// Idle transitions for fieldprof record (docs/record.md): where each
// thread stood when it left the CPU to wait and when it came back.
//
// The kernel tells exactly when: each thread gets a perf_event ring with
// context_switch set, which receives a PERF_RECORD_SWITCH at every switch
// out and in, with time and CPU, at perf_event_paranoid 2 (no root). Those
// records carry no stack, so the stack comes from here: the blocking calls
// a thread waits in (locks, condition variables, sleeps, poll/select/epoll,
// reads and writes, waits for children) are wrapped. A wrapper notes the
// ring's head before the call and after it; only when the head moved (the
// thread switched during the call) does it unwind, once, after the call
// returns: the caller's stack is the same as it was at the switch. The
// pair (ring, positions) ties the stack to its switch records, which the
// command line pairs up (recording.cc). A call that did not block costs
// two loads of the ring's head; a switch outside any wrapped call (a page
// fault, a preemption, a raw futex) is still counted, without a stack.
#include <dlfcn.h>
#include <fcntl.h>
#include <linux/perf_event.h>
#include <poll.h>
#include <pthread.h>
#include <semaphore.h>
#include <sys/epoll.h>
#include <sys/ioctl.h>
#include <sys/mman.h>
#include <sys/select.h>
#include <sys/single_threaded.h>
#include <sys/socket.h>
#include <sys/syscall.h>
#include <sys/uio.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cerrno>
#include <cstdio>
#include <cstring>

#include "agent/preload/base/unwinder_io.h"
#include "agent/preload/sampler/sampler.h"
#include "common/stacks/sampler_format.h"

namespace fieldprof::sampler {
namespace {

constexpr size_t kDataPages = 32;  // 128 KiB a thread: 4,000 switch records
constexpr int kMaxRings = 1024;

enum RingState : int { kFree = 0, kClaimed, kActive, kClosing };

struct Ring {
  std::atomic<int> state{kFree};
  int fd = -1;
  perf_event_mmap_page* page = nullptr;
  size_t map_size = 0;
  uint32_t id = 0, tid = 0;
};

Ring g_rings[kMaxRings];
std::atomic<uint32_t> g_next_ring_id{1};
std::atomic<uint64_t> g_lost{0}, g_unwatched{0};

thread_local Ring* t_ring = nullptr;

// Whether this process's rings are mapped here: a word on a page the
// kernel zeroes in every child of a fork (MADV_WIPEONFORK). A child made
// by the raw clone system call runs no atfork handler (Chromium starts
// its processes so), and perf_event maps are not copied into it: a wrapped
// call there must not touch its parent's ring.
struct alignas(4096) MappedFlag {
  volatile int mapped;
  char pad[4096 - sizeof(int)];
};
MappedFlag* g_mapped = nullptr;
bool g_stopped = false;  // StopWatchingSwitches()

bool RingsMapped() { return g_mapped != nullptr && g_mapped->mapped != 0; }

void SetRingsMapped() {
  if (g_mapped == nullptr) {
    void* p = mmap(nullptr, sizeof(MappedFlag), PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS,
                   -1, 0);
    if (p == MAP_FAILED) return;
    if (madvise(p, sizeof(MappedFlag), MADV_WIPEONFORK) != 0) {
      munmap(p, sizeof(MappedFlag));
      return;  // an old kernel: no guard, and no rings either (see WatchThreadSwitches)
    }
    g_mapped = static_cast<MappedFlag*>(p);
  }
  g_mapped->mapped = 1;
}
thread_local int t_depth = 0;  // wrapped calls in progress (a wrapper may call another)

uint64_t Head(const Ring* r) { return __atomic_load_n(&r->page->data_head, __ATOMIC_ACQUIRE); }

void Release(Ring* r) {
  if (r->page != nullptr) munmap(r->page, r->map_size);
  if (r->fd >= 0 && IsPerfEvent(r->fd)) close(r->fd);
  r->page = nullptr;
  r->fd = -1;
  r->state.store(kFree, std::memory_order_release);
}

// Copies `n` bytes at stream offset `pos` out of a ring's data area.
void CopyOut(const Ring& r, uint64_t pos, void* out, size_t n) {
  const char* data = reinterpret_cast<const char*>(r.page) + r.page->data_offset;
  const uint64_t size = r.page->data_size;
  char* o = static_cast<char*>(out);
  for (size_t done = 0; done < n;) {
    const uint64_t at = (pos + done) % size;
    const size_t chunk = static_cast<size_t>(std::min<uint64_t>(n - done, size - at));
    memcpy(o + done, data + at, chunk);
    done += chunk;
  }
}

// Drains one ring; returns how full it was.
double DrainRing(Ring& r) {
  const uint64_t head = Head(&r);
  uint64_t tail = r.page->data_tail;
  const double fill = static_cast<double>(head - tail) / static_cast<double>(r.page->data_size);
  while (tail < head) {
    perf_event_header h;
    CopyOut(r, tail, &h, sizeof h);
    if (h.size < sizeof h || tail + h.size > head) break;
    // The record, then sample_id: {pid, tid}, time, {cpu, reserved}.
    uint64_t body[8] = {};
    CopyOut(r, tail + sizeof h, body, std::min<size_t>(h.size - sizeof h, sizeof body));
    if (h.type == PERF_RECORD_SWITCH && h.size >= sizeof h + 24) {
      raw::Switch w{};
      w.tid = static_cast<uint32_t>(body[0] >> 32);
      w.time_ns = body[1];
      w.cpu = static_cast<uint16_t>(body[2] & 0xffff);
      w.pos = tail;
      w.ring = r.id;
      w.out = (h.misc & PERF_RECORD_MISC_SWITCH_OUT) != 0 ? 1 : 0;
      w.preempt = (h.misc & PERF_RECORD_MISC_SWITCH_OUT_PREEMPT) != 0 ? 1 : 0;
      WriteRecord('W', &w, sizeof w);
    } else if (h.type == PERF_RECORD_LOST && h.size >= sizeof h + 16) {
      g_lost.fetch_add(body[1], std::memory_order_relaxed);
    }
    tail += h.size;
  }
  __atomic_store_n(&r.page->data_tail, tail, __ATOMIC_RELEASE);
  return fill;
}

// Notes the ring's head before a wrapped call and records the stack after
// it when the thread switched meanwhile. Outermost wrapper only.
class Watch {
 public:
  // Not inside the signal handler: the unwinder's own reads are not waits.
  __attribute__((always_inline)) Watch()
      : r_(t_depth++ == 0 && t_in_handler == 0 && RingsMapped() ? t_ring : nullptr) {
    if (r_ != nullptr) from_ = Head(r_);
  }
  __attribute__((always_inline)) ~Watch() {
    --t_depth;
    if (r_ == nullptr) return;
    const uint64_t to = Head(r_);
    if (to == from_) return;
    const int saved = errno;
    RecordBlockedCall(r_->id, from_, to);
    errno = saved;
  }
  Watch(const Watch&) = delete;
  Watch& operator=(const Watch&) = delete;

 private:
  Ring* r_;
  uint64_t from_ = 0;
};

}  // namespace

// Whether `fd` is still a perf_event (the program may have closed it, and
// the number been reused): so that we never close one of the program's.
bool IsPerfEvent(int fd) {
  char link[64], path[32];
  snprintf(path, sizeof path, "/proc/self/fd/%d", fd);
  const ssize_t n = readlink(path, link, sizeof link - 1);
  if (n <= 0) return false;
  link[n] = 0;
  return strcmp(link, "anon_inode:[perf_event]") == 0;
}

bool WatchThreadSwitches() {
  if (t_ring != nullptr && RingsMapped()) return true;
  if (g_stopped) return false;
  if (g_mapped != nullptr && !RingsMapped()) ForgetSwitchesAfterFork();  // a raw clone's child
  SetRingsMapped();
  if (!RingsMapped()) {  // no way to tell a raw clone's child: watch nothing
    g_unwatched.fetch_add(1, std::memory_order_relaxed);
    return false;
  }
  perf_event_attr a{};
  a.size = sizeof a;
  a.type = PERF_TYPE_SOFTWARE;
  a.config = PERF_COUNT_SW_DUMMY;
  a.context_switch = 1;
  a.exclude_kernel = 1;
  a.exclude_hv = 1;
  a.sample_id_all = 1;
  a.sample_type = PERF_SAMPLE_TID | PERF_SAMPLE_TIME | PERF_SAMPLE_CPU;
  a.use_clockid = 1;
  a.clockid = CLOCK_MONOTONIC;  // the samples' clock
  a.disabled = 1;
  const pid_t tid = static_cast<pid_t>(syscall(SYS_gettid));
  int fd = static_cast<int>(syscall(SYS_perf_event_open, &a, tid, -1, -1,
                                    static_cast<unsigned long>(PERF_FLAG_FD_CLOEXEC)));
  if (fd < 0) {
    g_unwatched.fetch_add(1, std::memory_order_relaxed);
    return false;
  }
  fd = MoveFdHigh(fd);
  const size_t page = static_cast<size_t>(sysconf(_SC_PAGESIZE));
  const size_t size = (1 + kDataPages) * page;
  void* map = mmap(nullptr, size, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
  Ring* r = nullptr;
  for (int i = 0; map != MAP_FAILED && i < kMaxRings && r == nullptr; ++i) {
    int want = kFree;
    if (g_rings[i].state.compare_exchange_strong(want, kClaimed)) r = &g_rings[i];
  }
  if (r == nullptr) {  // the kernel's locked-memory limit, or too many threads
    if (map != MAP_FAILED) munmap(map, size);
    close(fd);
    g_unwatched.fetch_add(1, std::memory_order_relaxed);
    return false;
  }
  r->fd = fd;
  r->page = static_cast<perf_event_mmap_page*>(map);
  r->map_size = size;
  r->tid = static_cast<uint32_t>(tid);
  r->id = g_next_ring_id.fetch_add(1, std::memory_order_relaxed);
  r->state.store(kActive, std::memory_order_release);
  ioctl(fd, PERF_EVENT_IOC_ENABLE, 0);
  t_ring = r;
  return true;
}

void UnwatchThreadSwitches() {
  if (t_ring == nullptr || !RingsMapped()) return;
  ioctl(t_ring->fd, PERF_EVENT_IOC_DISABLE, 0);
  t_ring->state.store(kClosing, std::memory_order_release);  // the writer drains and closes it
  t_ring = nullptr;
}

bool DrainSwitches() {
  if (!RingsMapped()) return false;  // a raw clone's child: not its rings
  bool busy = false;
  for (Ring& r : g_rings) {
    const int s = r.state.load(std::memory_order_acquire);
    if (s != kActive && s != kClosing) continue;
    busy |= DrainRing(r) > 0.25;
    if (s == kClosing) Release(&r);
  }
  return busy;
}

void ForgetSwitchesAfterFork() {
  // The parent's rings are not mapped in a child (perf maps are not
  // copied); their descriptors are, and are closed.
  t_ring = nullptr;
  t_depth = 0;
  for (Ring& r : g_rings) {
    if (r.state.load() == kFree) continue;
    if (r.fd >= 0 && IsPerfEvent(r.fd)) close(r.fd);
    r.fd = -1;
    r.page = nullptr;
    r.state.store(kFree);
  }
}

void StopWatchingSwitches() {
  if (g_mapped != nullptr) g_mapped->mapped = 0;
  g_stopped = true;
}

uint64_t SwitchesLost() { return g_lost.load(); }
uint64_t ThreadsUnwatched() { return g_unwatched.load(); }

}  // namespace fieldprof::sampler

// The blocking calls, wrapped. Each forwards to the next definition (the C
// library's) inside a Watch.
using fieldprof::sampler::Watch;

#define FP_BLOCKING(ret, name, params, args)                                               \
  namespace fieldprof::sampler {                                                           \
  ret(*g_real_##name) params = nullptr;                                                    \
  FP_NEXT_SLOT(g_real_##name, #name);                                                      \
  }                                                                                        \
  extern "C" __attribute__((visibility("default"))) ret name params {                      \
    const auto real = fieldprof::sampler::Next(&fieldprof::sampler::g_real_##name, #name); \
    Watch fp_watch_;                                                                       \
    return real args;                                                                      \
  }

// A lock, wrapped: in a process of one thread a lock that is not shared
// with other processes cannot wait (there is nobody to hold it), so it goes
// straight on: sqlite3 takes millions. `private_lock`: the lock is not
// process-shared (glibc's own field; the layout is its ABI).
#define FP_LOCK(name, params, args, private_lock)                                          \
  namespace fieldprof::sampler {                                                           \
  int(*g_real_##name) params = nullptr;                                                    \
  FP_NEXT_SLOT(g_real_##name, #name);                                                      \
  }                                                                                        \
  extern "C" __attribute__((visibility("default"))) int name params {                      \
    const auto real = fieldprof::sampler::Next(&fieldprof::sampler::g_real_##name, #name); \
    if (__libc_single_threaded != 0 && (private_lock)) return real args;                   \
    Watch fp_watch_;                                                                       \
    return real args;                                                                      \
  }

// Locks and waits of threads (std::mutex, std::condition_variable and
// std::thread::join come here too).
constexpr int kMutexPsharedBit = 128;  // glibc's PTHREAD_MUTEX_PSHARED_BIT in __kind
FP_LOCK(pthread_mutex_lock, (pthread_mutex_t * m), (m), (m->__data.__kind & kMutexPsharedBit) == 0)
FP_LOCK(pthread_mutex_timedlock, (pthread_mutex_t * m, const timespec* t), (m, t),
        (m->__data.__kind & kMutexPsharedBit) == 0)
FP_BLOCKING(int, pthread_cond_wait, (pthread_cond_t * c, pthread_mutex_t* m), (c, m))
FP_BLOCKING(int, pthread_cond_timedwait,
            (pthread_cond_t * c, pthread_mutex_t* m, const timespec* t), (c, m, t))
FP_BLOCKING(int, pthread_cond_clockwait,
            (pthread_cond_t * c, pthread_mutex_t* m, clockid_t k, const timespec* t), (c, m, k, t))
FP_LOCK(pthread_rwlock_rdlock, (pthread_rwlock_t * l), (l), l->__data.__shared == 0)
FP_LOCK(pthread_rwlock_wrlock, (pthread_rwlock_t * l), (l), l->__data.__shared == 0)
FP_BLOCKING(int, pthread_barrier_wait, (pthread_barrier_t * b), (b))
FP_BLOCKING(int, pthread_join, (pthread_t t, void** r), (t, r))
FP_BLOCKING(int, sem_wait, (sem_t * s), (s))
FP_BLOCKING(int, sem_timedwait, (sem_t * s, const timespec* t), (s, t))
// Sleeps.
FP_BLOCKING(int, nanosleep, (const timespec* t, timespec* rem), (t, rem))
FP_BLOCKING(int, clock_nanosleep, (clockid_t c, int f, const timespec* t, timespec* rem),
            (c, f, t, rem))
FP_BLOCKING(int, usleep, (useconds_t us), (us))
FP_BLOCKING(unsigned, sleep, (unsigned s), (s))
FP_BLOCKING(int, pause, (), ())
// Waiting for descriptors.
FP_BLOCKING(int, poll, (pollfd * f, nfds_t n, int t), (f, n, t))
FP_BLOCKING(int, ppoll, (pollfd * f, nfds_t n, const timespec* t, const sigset_t* s), (f, n, t, s))
FP_BLOCKING(int, select, (int n, fd_set* r, fd_set* w, fd_set* e, timeval* t), (n, r, w, e, t))
FP_BLOCKING(int, pselect,
            (int n, fd_set* r, fd_set* w, fd_set* e, const timespec* t, const sigset_t* s),
            (n, r, w, e, t, s))
FP_BLOCKING(int, epoll_wait, (int e, epoll_event* v, int n, int t), (e, v, n, t))
FP_BLOCKING(int, epoll_pwait, (int e, epoll_event* v, int n, int t, const sigset_t* s),
            (e, v, n, t, s))
// Reads and writes (pipes, sockets, and files that wait on the disk).
// read(), as the others, but while the sampler unwinds: libunwind's reads
// of its memory-check pipe go to the sampler's pipe (unwinder_io.h).
namespace fieldprof::sampler {
ssize_t (*g_real_read)(int, void*, size_t) = nullptr;
FP_NEXT_SLOT(g_real_read, "read");
}  // namespace fieldprof::sampler
extern "C" __attribute__((visibility("default"))) ssize_t read(int fd, void* b, size_t n) {
  if (fieldprof::preload::t_unwinding > 0) return fieldprof::preload::UnwinderRead(b, n);
  const auto real = fieldprof::sampler::Next(&fieldprof::sampler::g_real_read, "read");
  Watch fp_watch_;
  return real(fd, b, n);
}
FP_BLOCKING(ssize_t, readv, (int fd, const iovec* v, int n), (fd, v, n))
FP_BLOCKING(ssize_t, pread64, (int fd, void* b, size_t n, off64_t o), (fd, b, n, o))
FP_BLOCKING(ssize_t, write, (int fd, const void* b, size_t n), (fd, b, n))
FP_BLOCKING(ssize_t, writev, (int fd, const iovec* v, int n), (fd, v, n))
FP_BLOCKING(ssize_t, pwrite64, (int fd, const void* b, size_t n, off64_t o), (fd, b, n, o))
FP_BLOCKING(ssize_t, recv, (int fd, void* b, size_t n, int f), (fd, b, n, f))
FP_BLOCKING(ssize_t, recvfrom, (int fd, void* b, size_t n, int f, sockaddr* a, socklen_t* l),
            (fd, b, n, f, a, l))
FP_BLOCKING(ssize_t, recvmsg, (int fd, msghdr* m, int f), (fd, m, f))
FP_BLOCKING(ssize_t, send, (int fd, const void* b, size_t n, int f), (fd, b, n, f))
FP_BLOCKING(int, accept, (int fd, sockaddr* a, socklen_t* l), (fd, a, l))
FP_BLOCKING(int, accept4, (int fd, sockaddr* a, socklen_t* l, int f), (fd, a, l, f))
FP_BLOCKING(int, connect, (int fd, const sockaddr* a, socklen_t l), (fd, a, l))
FP_BLOCKING(int, fsync, (int fd), (fd))
FP_BLOCKING(int, fdatasync, (int fd), (fd))
// Waiting for children.
FP_BLOCKING(pid_t, waitpid, (pid_t p, int* s, int o), (p, s, o))
FP_BLOCKING(pid_t, wait, (int* s), (s))
FP_BLOCKING(pid_t, wait4, (pid_t p, int* s, int o, struct rusage* u), (p, s, o, u))
