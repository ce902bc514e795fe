// Before an unwinder walks the stack (companion.h).
#include <unwind.h>

#include "agent/preload/runtime/companion.h"

using fieldprof::rt::g;
using fieldprof::rt::Next;
using fieldprof::rt::t_state;
// An unwinder walking the stack must see real return addresses, not the
// stub's return point: before a C++ exception or a forced unwind (pthread_exit/cancel)
// starts, put back every return address this thread replaced. Those calls
// are then not measured (counted as abandoned); the program is unaffected.

namespace {

void RestoreReturnAddresses() {
  if (t_state.ss == nullptr) return;
  auto& t = *t_state.ss;
  const uintptr_t ours = reinterpret_cast<uintptr_t>(fieldprof::rt::fp_return_point);
  const uintptr_t detour = reinterpret_cast<uintptr_t>(fieldprof::rt::fp_detour_return);
  for (int i = static_cast<int>(t.depth) - 1; i >= 0; --i) {
    fieldprof::rt::Entry& e = t.e[i];
    if (e.ret_slot != nullptr && e.ret_slot != fieldprof::rt::FillingSlot() &&
        (*e.ret_slot == ours || *e.ret_slot == detour)) {
      *e.ret_slot = e.ret_addr;
      g.abandoned.fetch_add(1, std::memory_order_relaxed);
    }
    e.ret_slot = nullptr;
  }
}

}  // namespace

using RaiseFn = _Unwind_Reason_Code (*)(struct _Unwind_Exception*);
FP_HOT_DATA RaiseFn next_raise;
FP_HOT_DATA RaiseFn next_resume_or_rethrow;
using ForcedFn = _Unwind_Reason_Code (*)(struct _Unwind_Exception*, _Unwind_Stop_Fn, void*);
FP_HOT_DATA ForcedFn next_forced;
FP_NEXT_SLOT(next_raise, "_Unwind_RaiseException");
FP_NEXT_SLOT(next_resume_or_rethrow, "_Unwind_Resume_or_Rethrow");
FP_NEXT_SLOT(next_forced, "_Unwind_ForcedUnwind");

extern "C" FP_EXPORT _Unwind_Reason_Code _Unwind_RaiseException(struct _Unwind_Exception* e) {
  RestoreReturnAddresses();
  return Next(&next_raise, "_Unwind_RaiseException")(e);
}

extern "C" FP_EXPORT _Unwind_Reason_Code _Unwind_Resume_or_Rethrow(struct _Unwind_Exception* e) {
  RestoreReturnAddresses();
  return Next(&next_resume_or_rethrow, "_Unwind_Resume_or_Rethrow")(e);
}

extern "C" FP_EXPORT _Unwind_Reason_Code _Unwind_ForcedUnwind(struct _Unwind_Exception* e,
                                                              _Unwind_Stop_Fn stop, void* arg) {
  RestoreReturnAddresses();
  return Next(&next_forced, "_Unwind_ForcedUnwind")(e, stop, arg);
}
