#include "agent/preload/base/linker_lock.h"

#include <dlfcn.h>
#include <pthread.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <cstddef>

namespace fieldprof::preload {
namespace {

const pthread_mutex_t* g_lock;  // null: not found

struct Search {
  const char* base;
  size_t size;
  int tid;
  int found;
  size_t offsets[4];
};

// Inside a dl_iterate_phdr callback: the recursive mutexes of _rtld_global
// that this thread holds once.
int HeldMutexes(dl_phdr_info*, size_t, void* arg) {
  auto* s = static_cast<Search*>(arg);
  for (size_t off = 0; off + sizeof(pthread_mutex_t) <= s->size && s->found < 4;
       off += alignof(pthread_mutex_t)) {
    const auto* m = reinterpret_cast<const pthread_mutex_t*>(s->base + off);
    if (m->__data.__lock != 0 && m->__data.__count == 1 && m->__data.__owner == s->tid &&
        (m->__data.__kind & 3) == PTHREAD_MUTEX_RECURSIVE_NP) {
      s->offsets[s->found++] = off;
    }
  }
  return 1;  // one object is enough
}

}  // namespace

bool FindLinkerLock(DlIteratePhdrFn real) {
  void* global = dlsym(RTLD_DEFAULT, "_rtld_global");
  Dl_info info;
  void* sym = nullptr;
  if (real == nullptr || global == nullptr || dladdr1(global, &info, &sym, RTLD_DL_SYMENT) == 0 ||
      sym == nullptr) {
    return false;
  }
  const size_t size = static_cast<const ElfW(Sym)*>(sym)->st_size;
  Search s{static_cast<const char*>(global), size, static_cast<int>(syscall(SYS_gettid)), 0, {}};
  real(HeldMutexes, &s);
  // Held by this thread inside, not outside: dlopen's own lock, held here
  // too when this library is loaded by one, is this thread's outside as
  // well. Not "free outside": another thread that walks the objects in a
  // loop takes the lock again the moment it is given back, and the lock
  // went unfound (a fork child then walked into it: a hang, seen once in
  // HostSafetyTest's fork-in-loader program under points record --stacks).
  const pthread_mutex_t* lock = nullptr;
  int given_back = 0;
  for (int i = 0; i < s.found; ++i) {
    const auto* m = reinterpret_cast<const pthread_mutex_t*>(s.base + s.offsets[i]);
    if (__atomic_load_n(&m->__data.__owner, __ATOMIC_RELAXED) != s.tid) {
      lock = m;
      ++given_back;
    }
  }
  g_lock = given_back == 1 ? lock : nullptr;
  return g_lock != nullptr;
}

bool LinkerLockKnown() { return g_lock != nullptr; }

LinkerLockLook LookAtLinkerLock(int tid, int whole) {
  const pthread_mutex_t* m = g_lock;
  if (m == nullptr) return LinkerLockLook::kSafe;
  const int word = __atomic_load_n(&m->__data.__lock, __ATOMIC_ACQUIRE);
  if (word == 0) return LinkerLockLook::kSafe;
  const int owner = __atomic_load_n(&m->__data.__owner, __ATOMIC_RELAXED);
  const unsigned count = __atomic_load_n(&m->__data.__count, __ATOMIC_RELAXED);
  return LinkerLockLookOf(word, owner, count, tid, whole);
}

LinkerLockTry TryLinkerLock() {
  if (g_lock == nullptr) return LinkerLockTry::kUnknown;
  return pthread_mutex_trylock(const_cast<pthread_mutex_t*>(g_lock)) == 0 ? LinkerLockTry::kTaken
                                                                          : LinkerLockTry::kBusy;
}

void GiveLinkerLock() { pthread_mutex_unlock(const_cast<pthread_mutex_t*>(g_lock)); }

bool LinkerLockHeldByAnother(int tid) {
  const pthread_mutex_t* m = g_lock;
  if (m == nullptr) return false;
  if (__atomic_load_n(&m->__data.__lock, __ATOMIC_ACQUIRE) == 0) return false;
  const int owner = __atomic_load_n(&m->__data.__owner, __ATOMIC_RELAXED);
  return owner == 0 || owner != tid;
}

}  // namespace fieldprof::preload
