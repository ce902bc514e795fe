// The runtime loaded after start: the front (front.cc), preloaded in every
// process, looks at the run and dlopens libfieldprof.so only when the run
// may be measured. The dynamic linker has then bound every import of
// malloc, read, execve, _exit, dlsym, fieldprof_point_hit, ... to their
// first definitions (libc's, or none for the weak point hook), so the
// runtime's interposers (companion.h) would see nothing. InterposeLate
// does by hand what preloading does: every JUMP_SLOT, GLOB_DAT and
// absolute (R_X86_64_64) entry of every loaded object that names a
// function the runtime exports, and that the dynamic linker would bind to
// the runtime's definition, is pointed at it. The interposers then find
// the functions they wrap as the first definitions that are not the
// runtime's own (next_symbol.h, g_loaded_late).
//
// What is not the same as preloading: objects loaded later (dlopen) are
// pointed at the runtime when the binder next looks at new objects (at the
// program's next dlsym, binder.h); a program's own dlsym(RTLD_DEFAULT,
// "malloc") answers libc's.
#ifndef FIELDPROF_AGENT_PRELOAD_RUNTIME_BINDER_LATE_INTERPOSE_H_
#define FIELDPROF_AGENT_PRELOAD_RUNTIME_BINDER_LATE_INTERPOSE_H_

namespace fieldprof::rt {

// True when the runtime does not come first for its own exports (it was
// dlopened, or something earlier in the search order defines malloc);
// sets g_loaded_late. From the constructor of a measured run.
bool DetectLoadedLate();

// Points the entries of every object loaded so far at the runtime's
// definitions (entries already there are left alone). Returns how many
// entries it wrote. Safe to call again after more objects are loaded.
int InterposeLate();

// InterposeLate when loaded late and objects were loaded since it last ran;
// otherwise nothing (one dl_iterate_phdr step).
int InterposeLateOnNewObjects();

}  // namespace fieldprof::rt

#endif  // FIELDPROF_AGENT_PRELOAD_RUNTIME_BINDER_LATE_INTERPOSE_H_
