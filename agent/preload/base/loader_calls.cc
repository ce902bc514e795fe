// dlopen, dlmopen, dlclose and dl_iterate_phdr, wrapped once for the
// libraries that unwind from a signal handler (loader_calls.h).
#include "agent/preload/base/loader_calls.h"

#include <dlfcn.h>
#include <time.h>

#include "agent/preload/base/linker_lock.h"
#include "agent/preload/base/next_slots.h"
#include "agent/preload/base/unwinder_io.h"

namespace fieldprof::preload {

__thread int t_in_linker __attribute__((tls_model("initial-exec")));
__thread int t_iterating __attribute__((tls_model("initial-exec")));

namespace {

using DlopenFn = void* (*)(const char*, int);
using DlmopenFn = void* (*)(Lmid_t, const char*, int);
DlopenFn next_dlopen;
int (*next_dlclose)(void*);
DlmopenFn next_dlmopen;
DlIteratePhdrFn next_dl_iterate_phdr;
FP_NEXT_SLOT(next_dlopen, "dlopen");
FP_NEXT_SLOT(next_dlclose, "dlclose");
FP_NEXT_SLOT(next_dlmopen, "dlmopen");
FP_NEXT_SLOT(next_dl_iterate_phdr, "dl_iterate_phdr");

// The whole call, when the lock's own state cannot tell.
struct InLinker {
  InLinker() : on_(!LinkerLockKnown()) { t_in_linker += on_; }
  ~InLinker() { t_in_linker -= on_; }
  InLinker(const InLinker&) = delete;
  InLinker& operator=(const InLinker&) = delete;

 private:
  const int on_;
};

struct IterateCall {
  int (*callback)(dl_phdr_info*, size_t, void*);
  void* data;
};
int IteratedCall(dl_phdr_info* info, size_t size, void* arg) {
  const IterateCall* call = static_cast<const IterateCall*>(arg);
  const int in_linker = t_in_linker;
  t_in_linker = 0;
  ++t_iterating;
  const int r = call->callback(info, size, call->data);
  --t_iterating;
  t_in_linker = in_linker;
  return r;
}

}  // namespace

int RealDlIteratePhdr(int (*callback)(dl_phdr_info*, size_t, void*), void* data) {
  return Next(&next_dl_iterate_phdr, "dl_iterate_phdr")(callback, data);
}

}  // namespace fieldprof::preload

namespace fp = fieldprof::preload;

extern "C" __attribute__((visibility("default"))) void* dlopen(const char* file, int mode) {
  const auto real = fp::Next(&fp::next_dlopen, "dlopen");
  const int before = fp::BeforeDlopen(file);
  void* h;
  {
    fp::InLinker in_linker;
    h = real(file, mode);
  }
  fp::NextSlotsMayResolve();
  fp::AfterDlopen(h, before);
  return h;
}

extern "C" __attribute__((visibility("default"))) int dlclose(void* handle) {
  const auto real = fp::Next(&fp::next_dlclose, "dlclose");
  fp::BeforeDlclose();
  int r;
  {
    fp::InLinker in_linker;
    r = real(handle);
  }
  fp::AfterDlclose();
  return r;
}

// In another namespace: for InLinker only.
extern "C" __attribute__((visibility("default"))) void* dlmopen(Lmid_t lmid, const char* file,
                                                                int mode) {
  const auto real = fp::Next(&fp::next_dlmopen, "dlmopen");
  fp::InLinker in_linker;
  return real(lmid, file, mode);
}

// The program's, its libraries' (libunwind's, at each new return address)
// and the library's own walks.
//
// A walk inside the library's own unwinding (UnwindScope: a sample's or a
// point's, often in a signal handler) never sleeps on the dynamic linker's
// lock. libunwind walks while holding its own cache lock, and glibc hands
// a released lock to one sleeping waiter: when that waiter is a thread
// whose signal handler then waits for libunwind's lock, the unwinding
// thread that holds it sleeps on a free linker lock for good, and so does
// every thread behind it (seen under `record --wall`, a thread opening a
// library while another looked names up: 1 run in about 120). So the walk
// tries the lock for at most kWalkWaitNs on the clock, holding it across
// the C library's own walk (which takes it again, recursively, without a
// wait); busy past that, it walks nothing, and the unwind ends at that
// frame. Once one walk gave up, the rest of the same unwinding do not wait.
extern "C" __attribute__((visibility("default"))) int dl_iterate_phdr(
    int (*callback)(dl_phdr_info*, size_t, void*), void* data) {
  const auto real = fp::Next(&fp::next_dl_iterate_phdr, "dl_iterate_phdr");
  fp::InLinker in_linker;
  fp::IterateCall call{callback, data};
  if (fp::t_unwinding <= 0) return real(fp::IteratedCall, &call);
  constexpr long kWalkWaitNs = 5000;
  timespec start{};
  for (;;) {
    const fp::LinkerLockTry got = fp::TryLinkerLock();
    if (got == fp::LinkerLockTry::kUnknown) return real(fp::IteratedCall, &call);
    if (got == fp::LinkerLockTry::kTaken) {
      const int r = real(fp::IteratedCall, &call);
      fp::GiveLinkerLock();
      return r;
    }
    if (fp::t_walk_gave_up) return 0;
    timespec now{};
    clock_gettime(CLOCK_MONOTONIC, &now);
    if (start.tv_sec == 0 && start.tv_nsec == 0) start = now;
    if ((now.tv_sec - start.tv_sec) * 1'000'000'000L + (now.tv_nsec - start.tv_nsec) >=
        kWalkWaitNs) {
      fp::t_walk_gave_up = true;
      return 0;
    }
    __builtin_ia32_pause();
  }
}
