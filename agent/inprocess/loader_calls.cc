// dlopen, dlmopen, dlclose and dl_iterate_phdr, wrapped once for the
// libraries that unwind from a signal handler (loader_calls.h).
#include "agent/inprocess/loader_calls.h"

#include <dlfcn.h>

#include "agent/inprocess/linker_lock.h"
#include "agent/inprocess/next_slots.h"

namespace fieldprof::inproc {

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

}  // namespace fieldprof::inproc

namespace fp = fieldprof::inproc;

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
extern "C" __attribute__((visibility("default"))) int dl_iterate_phdr(
    int (*callback)(dl_phdr_info*, size_t, void*), void* data) {
  const auto real = fp::Next(&fp::next_dl_iterate_phdr, "dl_iterate_phdr");
  fp::InLinker in_linker;
  fp::IterateCall call{callback, data};
  return real(fp::IteratedCall, &call);
}
