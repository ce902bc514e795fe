// The binder's libc side, shared by its files (state.h has the state and
// the no-libc trap half; binder.h the contract):
//   binder.cc          start, and the calls the rest of the runtime makes
//   tables.cc          the fixed-size tables, one mapping made at start
//   objects.cc         the object table kept up with the dynamic linker's
//                      list, and lazy bindings resolved as it would
//   trampolines.cc     which imports are candidates, and their trampolines
//   apis.cc            the API table: names, forced APIs
//   module_naming.cc   the module name a key may carry (privacy)
//   trap_slow.cc       first calls: choosing, binding to a stub, rebinding
//   dlsym.cc           dlsym/dlvsym results, and the hooks' entry points
//   ../lab/binding.cc  lab mode's binding
//   ../points/field_setting.cc  the field's `points` functions moved to
//                      measure every call (detours)
// Everything here runs under the binder lock (BinderLock) unless said
// otherwise, and may call libc: never from trap_fast.cc.
#ifndef FIELDPROF_AGENT_PRELOAD_RUNTIME_BINDER_INTERNAL_H_
#define FIELDPROF_AGENT_PRELOAD_RUNTIME_BINDER_INTERNAL_H_

#include <elf.h>

#include <cstddef>
#include <cstdint>

#include "agent/preload/runtime/binder/binder.h"
#include "agent/preload/runtime/binder/state.h"
#include "agent/preload/runtime/points/detour.h"

extern "C" {
FP_HIDDEN extern uint64_t fp_xsave_size;
FP_HIDDEN extern uint32_t fp_xsave_mask;
FP_HIDDEN extern uint8_t fp_use_xsave;
FP_HIDDEN extern uint8_t fp_binder_on;
FP_HIDDEN extern uintptr_t fp_real_dlsym;
FP_HIDDEN extern uintptr_t fp_real_dlvsym;
FP_HIDDEN void fp_trap();
}

namespace fieldprof::rt {

// ------------------------------------------------------------ tables

// A chosen API's names, copied: the defining library may be dlclose'd
// before the record is written.
struct ApiNames {
  char module[256];
  char build_id[96];
  char symbol[1025];
  bool point;  // named in the `points` setting (binder.h): also a point series
  // The object table's entry of the definition it is bound to (kNoObject:
  // none known): a dlopen after a dlclose gets a new entry, even at the
  // same or an overlapping place.
  uint32_t object;
};
inline constexpr uint32_t kNoObject = ~uint32_t{0};
// One object as dl_iterate_phdr reports it.
struct Seen {
  uintptr_t base;
  const char* name;
  const Elf64_Phdr* phdr;
  int phnum;
};

// The binder's fixed-size tables, one mapping made at start (only the
// pages a run uses are ever touched).
struct BinderTables {
  TrampBlock blocks[kMaxBlocks];
  ForcedApi forced[FP_MAX_APIS];
  char force[1024];   // the `force` setting, split in place
  char points[1024];  // the `points` setting, the same way
  ApiNames names[FP_MAX_SLOTS];
  Seen seen[kMaxObjects];  // the objects of one look
  Object objects[kMaxObjects];
};
FP_HIDDEN extern BinderTables* g_tables;
FP_HIDDEN extern ApiNames* api_names;  // g_tables->names
FP_HIDDEN extern Seen* g_seen;         // g_tables->seen
FP_HIDDEN extern bool g_starting;      // inside BinderStart
FP_HIDDEN extern uintptr_t g_page;

// Anonymous zeroed memory; populated at once when small (binder/tables.cc).
void* MapZero(size_t bytes);
size_t RoundUp(size_t n, size_t to);
// Faults in the pages of [from, from + bytes) in one call.
void Populate(const void* from, size_t bytes);
// Maps the tables and points g_binder at them. False: no memory.
bool MapTables();

// ------------------------------------------------------------ objects

// Runs fn(arg) under the dynamic linker's lock and the binder's, after
// bringing the object table up to date (unless nothing was loaded or
// unloaded since the last look); new objects get their traps. False when
// it could not run.
bool WithObjects(void (*fn)(void*), void* arg);
// The live object whose mapping holds `a` (not the vDSO), or nullptr.
const Object* ObjectContaining(uintptr_t a);
// libfieldprof.so itself, or nullptr.
const Object* Ours();
// Where a lazily bound import will lead, found as the dynamic linker
// would; 0: unknown.
uintptr_t ResolveLazy(const ImportSlot& s);
// The object that defines what import `s` leads to (`target`): the one
// holding it, else, for a target outside every object (an IFUNC that
// chose a vDSO function: gettimeofday, time), the object the dynamic
// linker found the name in. nullptr: none.
const Object* DefinerOf(const ImportSlot& s, uintptr_t target);
// The same for what dlsym returned for `name`: the object holding `addr`,
// else the first that defines the name.
const Object* DefinerByName(const char* name, uintptr_t addr);

// ------------------------------------------------------------ traps

// Trampolines for the candidate imports of objects[first..]: one block,
// made executable before any entry points at it, then the entries.
void BuildTraps(uint32_t first);
// Never a candidate (binder/trampolines.cc says which and why).
bool Excluded(const char* name, uint32_t gnu_hash, const Object* ours);
// Functions a return-address wrapper must never sit in front of.
bool UnsafeToWrap(const char* name);

// ------------------------------------------------------------ APIs

// Room for `more` names in the API table (at most half full).
bool ApiRoom(uint32_t more);
// The index of `key`, added if new (room must have been made).
int32_t ApiFor(uint64_t key);
bool IsForced(uint64_t key);
// A `force` or `points` list ("sym" or "module:sym", comma-separated; a
// point must name its module) into g_binder.forced, split in place in
// `copy`. Returns how many were added.
int ParseForced(const char* list, char* copy, size_t cap, bool point, const char* debug_log);

// ------------------------------------------------------------ names

// The module a key names for an API defined in `def` (nullptr: not known:
// "unknown"), or nullptr when no name can be given that keeps the key
// rules (module_naming.cc).
const char* KeyModule(const Object* def);
// Whether comma-separated `list` names `module`.
bool InList(const char* list, const char* module);
// Whether `module` passes the allow and deny lists.
bool ModuleAllowed(const char* module);
// Whether the file at `path` belongs to the system: under a system
// directory, root's and writable by nobody else, as its directory is.
bool SystemFile(const char* path);
// Whether the object's build is in the agent's list of the system's code
// (common/system/system_code.h: a file an installed package of a known archive
// holds, as the package shipped it). The list is mapped at the first ask.
bool InSystemCode(const ElfObject& e);
// Whether the volunteer shares `module`, defined in `def`, by name
// (share_modules): the module's key name, or for the program its file name.
bool SharedByVolunteer(const Object* def, const char* module);
// Whether an API defined in `def` may be chosen at random, and its module
// named in stacks and points: a library file of the system's (SystemFile:
// where a package installs, root's) whose build is the system's code
// (InSystemCode), or the program when its executable is both. A user's own
// library or program, an in-house package's, a private build over a
// packaged file, are measured only where they are named (force, points,
// share_modules): their names, like their frames (stack_fold.cc), stay on
// the machine.
bool SystemModule(const Object* def);
// Copies `src` with its NUL into dst[cap]; false (nothing copied) when it
// does not fit.
bool CopyName(char* dst, size_t cap, const char* src);
// `def`'s build id in hex into out[cap], or "unknown" when there is none
// that keeps the key rules.
void KeyBuildId(const Object* def, char* out, size_t cap);

// ------------------------------------------------------------ binding

// Points slot i of `b` at its direct target for good; returns it.
uintptr_t Direct(TrampBlock& b, uint32_t i);
// Slot `stub` measures `symbol` at `real` from now on; false (nothing
// bound) when the names break the key rules.
// `point`: its durations also make a point series (kApiPoint).
bool BindStub(int stub, uintptr_t real, const Object* def, const char* symbol, bool point);
// A stub bound to a definition in an object since unloaded (dlclose, then
// dlopen again: the same API elsewhere, maybe over its old place) follows
// it to `real` in `def`, if `def` is the same known module (`module` not
// null) and build. False: the
// stub stays with its definition (that object still loaded: `real` is
// another definition of the name; another build, or one without a build
// id; another place in the build), its callers here unmeasured.
bool FollowReload(int stub, uintptr_t real, const Object* def, const char* module);
// Callers bound to the stubs in pending_rebind go straight to the API.
int RebindPending();
// The first call of a slot that needs more than fp_trap_fast could do.
uintptr_t FirstCallSlow(TrampBlock& b, uint32_t i);

// Lab mode: the first call of an import, and the lab index of a function
// reached through dlsym (-1: not observed).
uintptr_t LabFirstCall(TrampBlock& b, uint32_t i);
// The program's file name, as /proc/self/exe ends (a points entry may name
// the program so, where its key module is "main").
const char* ProgramFileName();
// A look for detours: capstone loaded (`ready`, else `unready` says why),
// and whether a thread besides the caller and fieldprof's own runs (then
// entries are not moved, calls are re-aimed). The threads are counted once
// a look needs to know (it reads /proc); while only the looking thread
// runs, no other can start before the look ends.
struct DetourLook {
  bool ready = false;
  const char* unready = nullptr;
  bool Threads() const {
    if (threads_ < 0) threads_ = OtherThreadsRun() ? 1 : 0;
    return threads_ != 0;
  }

 private:
  mutable int threads_ = -1;
};
// Calls fn for each object not looked at for detours yet (and marks it),
// under the dynamic linker's lock (so that no other thread's dlclose
// unmaps an object meanwhile) and the binder's; call it with neither held
// (lab/binding.cc).
void DetourEachNewObject(void (*fn)(const Object& ob, const char* module, const DetourLook& look));
// The field's `points` functions defined in objects not looked at yet get
// detours: every call measured through the function's own entry, calls
// from inside its module too (points/field_setting.cc). Takes the binder's lock.
void FieldDetourNewObjects();
int32_t BindLab(const Object* def, const char* symbol, uintptr_t real);

}  // namespace fieldprof::rt

#endif  // FIELDPROF_AGENT_PRELOAD_RUNTIME_BINDER_INTERNAL_H_
