// Arming the points of a measured run (points.h). The header leaves a
// note in each module's loaded notes (PT_NOTE, owner "fieldprof") holding
// its semaphore's offset from the note, so the binder raises every
// module's semaphore as it first sees the module, at start and after
// dlopen, without reading a file.
#include <elf.h>
#include <string.h>

#include "agent/preload/runtime/companion.h"
#include "agent/preload/runtime/lab/lab.h"
#include "agent/preload/runtime/points/points.h"

namespace fieldprof::rt {
namespace {

constexpr uint32_t kNoteType = 0x46500001;

// Raises the semaphores `e`'s notes name (only those at 0 with
// `only_lowered`); how many.
int ArmNotes(const ElfObject& e, bool only_lowered) {
  int armed = 0;
  for (int i = 0; i < e.phnum; ++i) {
    const Elf64_Phdr& ph = e.phdr[i];
    if (ph.p_type != PT_NOTE) continue;
    const uintptr_t lo = e.base + ph.p_vaddr, hi = lo + ph.p_memsz;
    for (uintptr_t at = lo; at + 12 <= hi;) {
      const uint32_t* h = reinterpret_cast<const uint32_t*>(at);
      const uint32_t namesz = h[0], descsz = h[1], type = h[2];
      const uintptr_t name = at + 12, desc = name + ((namesz + 3) & ~3u);
      const uintptr_t next = desc + ((descsz + 3) & ~3u);
      if (next > hi || next <= at) break;
      if (type == kNoteType && namesz == 10 && descsz == 4 &&
          memcmp(reinterpret_cast<const char*>(name), "fieldprof", 10) == 0) {
        int32_t off;
        memcpy(&off, reinterpret_cast<const void*>(desc), sizeof off);
        const uintptr_t sem = desc + static_cast<intptr_t>(off);
        auto* word = reinterpret_cast<unsigned short*>(sem);
        if (sem >= e.map_lo && sem + 2 <= e.map_hi && sem % 2 == 0 &&
            !(only_lowered && __atomic_load_n(word, __ATOMIC_RELAXED) != 0)) {
          __atomic_add_fetch(word, 1, __ATOMIC_RELAXED);
          ++armed;
        }
      }
      at = next;
    }
  }
  return armed;
}

}  // namespace

void ArmPoints(const ElfObject& e) {
  if (g_lab_mode != kLabOff && g_lab_mode != kLabPoints) return;  // the census and timing passes
  if (ArmNotes(e, false) > 0) DebugLog("points: armed %s", e.path[0] != 0 ? e.path : "the program");
}

void RearmPoints(const ElfObject& e) {
  if (g_lab_mode != kLabOff && g_lab_mode != kLabPoints) return;
  if (ArmNotes(e, true) > 0) {
    DebugLog("points: armed again %s (opened again)", e.path[0] != 0 ? e.path : "the program");
  }
}

}  // namespace fieldprof::rt
