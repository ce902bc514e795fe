// The I/O counters (companion.h): file and socket bytes during a measured
// call.
#include <errno.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/uio.h>
#include <unistd.h>

#include "agent/preload/runtime/companion.h"

using fieldprof::rt::CountersWillMove;
using fieldprof::rt::Counting;
using fieldprof::rt::Next;
using fieldprof::rt::t_state;
// Bytes are counted per thread; only inside a measured call is it worth
// knowing whether a read/write fd is a file or a socket (one fstat per fd,
// cached until close).

namespace {

FP_COLD_BSS uint8_t fd_kind[4096];  // 0 unknown, 1 file, 2 socket, 3 other

void CountFdIo(int fd, ssize_t n) {
  if (n <= 0 || !Counting()) return;
  uint8_t kind = 3;
  if (fd >= 0 && fd < static_cast<int>(sizeof fd_kind)) {
    kind = fd_kind[fd];
    if (kind == 0) {
      struct stat st;
      const int saved = errno;
      kind = fstat(fd, &st) != 0 ? 3 : S_ISSOCK(st.st_mode) ? 2 : S_ISREG(st.st_mode) ? 1 : 3;
      errno = saved;
      fd_kind[fd] = kind;
    }
  }
  if (kind == 3) return;
  CountersWillMove(t_state);
  if (kind == 1) t_state.file_io += static_cast<uint64_t>(n);
  if (kind == 2) t_state.sock_io += static_cast<uint64_t>(n);
}

void CountSocketIo(ssize_t n) {
  if (n > 0 && Counting()) {
    CountersWillMove(t_state);
    t_state.sock_io += static_cast<uint64_t>(n);
  }
}

void ForgetFd(int fd) {
  if (fd >= 0 && fd < static_cast<int>(sizeof fd_kind)) fd_kind[fd] = 0;
}

}  // namespace

#define FP_FORWARD(ret, name, params, args) \
  using name##_fn = ret(*) params;          \
  FP_HOT_DATA name##_fn next_##name;        \
  FP_NEXT_SLOT(next_##name, #name);         \
  extern "C" FP_EXPORT ret name params {    \
    ret r = Next(&next_##name, #name) args;

FP_FORWARD(ssize_t, read, (int fd, void* b, size_t n), (fd, b, n))
CountFdIo(fd, r);
return r;
}
FP_FORWARD(ssize_t, write, (int fd, const void* b, size_t n), (fd, b, n))
CountFdIo(fd, r);
return r;
}
FP_FORWARD(ssize_t, pread, (int fd, void* b, size_t n, off_t o), (fd, b, n, o))
CountFdIo(fd, r);
return r;
}
FP_FORWARD(ssize_t, pwrite, (int fd, const void* b, size_t n, off_t o), (fd, b, n, o))
CountFdIo(fd, r);
return r;
}
FP_FORWARD(ssize_t, pread64, (int fd, void* b, size_t n, off_t o), (fd, b, n, o))
CountFdIo(fd, r);
return r;
}
FP_FORWARD(ssize_t, pwrite64, (int fd, const void* b, size_t n, off_t o), (fd, b, n, o))
CountFdIo(fd, r);
return r;
}
FP_FORWARD(ssize_t, readv, (int fd, const struct iovec* v, int c), (fd, v, c))
CountFdIo(fd, r);
return r;
}
FP_FORWARD(ssize_t, writev, (int fd, const struct iovec* v, int c), (fd, v, c))
CountFdIo(fd, r);
return r;
}
FP_FORWARD(ssize_t, send, (int fd, const void* b, size_t n, int f), (fd, b, n, f))
CountSocketIo(r);
return r;
}
FP_FORWARD(ssize_t, recv, (int fd, void* b, size_t n, int f), (fd, b, n, f))
CountSocketIo(r);
return r;
}
FP_FORWARD(ssize_t, sendto,
           (int fd, const void* b, size_t n, int f, const struct sockaddr* a, socklen_t l),
           (fd, b, n, f, a, l))
CountSocketIo(r);
return r;
}
FP_FORWARD(ssize_t, recvfrom, (int fd, void* b, size_t n, int f, struct sockaddr* a, socklen_t* l),
           (fd, b, n, f, a, l))
CountSocketIo(r);
return r;
}
FP_FORWARD(ssize_t, sendmsg, (int fd, const struct msghdr* m, int f), (fd, m, f))
CountSocketIo(r);
return r;
}
FP_FORWARD(ssize_t, recvmsg, (int fd, struct msghdr* m, int f), (fd, m, f))
CountSocketIo(r);
return r;
}
FP_FORWARD(int, close, (int fd), (fd))
ForgetFd(fd);
return r;
}
FP_FORWARD(int, dup2, (int a, int b), (a, b))
ForgetFd(b);
return r;
}
FP_FORWARD(int, dup3, (int a, int b, int f), (a, b, f))
ForgetFd(b);
return r;
}
