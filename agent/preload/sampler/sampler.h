// The parts of libfieldprof-sampler.so (fieldprof record's in-process
// sampler) that its files share: sampler.cc owns the process's state, the
// handler and the writer thread; clocks.cc the sampling clocks;
// stack_rings.cc each thread's ring of
// stacks; switches.cc watches each thread's switches off and onto the CPU
// and the blocking calls that caused them.
// Nothing here is exported from the library.
#ifndef FIELDPROF_AGENT_PRELOAD_SAMPLER_SAMPLER_H_
#define FIELDPROF_AGENT_PRELOAD_SAMPLER_SAMPLER_H_

#include <dlfcn.h>
#include <signal.h>

#include <atomic>
#include <cstddef>
#include <cstdint>

#include "agent/preload/base/high_fd.h"
#include "agent/preload/base/next_slots.h"

namespace fieldprof::sampler {

// The preloaded libraries' shared base, by its short name for the
// sampler's code outside this namespace (sampler.cc's wrappers).
namespace preload = ::fieldprof::preload;

// Whether this process is being recorded (set up by the constructor).
bool On();

// Guards the sampler's own unwinding: no sample (and no blocked call) is
// taken while a thread is in the dynamic linker or already unwinding.
extern thread_local int t_in_loader;
extern thread_local int t_in_handler;

// The next definition of `name` after ours (the function a wrapper
// calls): agent/preload/base/next_slots.h's, every cache filled at start and
// before a fork. The sampler's lookup (FindNext) counts as being in the
// loader, so no sample unwinds during it.
using preload::Next;

// The sampler's own descriptors live high (agent/preload/base/high_fd.h).
using preload::MoveFdHigh;

// Records the stack of the calling thread, as it stands in the caller of
// the blocking-call wrapper that calls this, for a call during which the
// thread's switch ring `ring` got records [from, to). Never blocks; drops
// and counts when the writer is behind.
void RecordBlockedCall(uint32_t ring, uint64_t from, uint64_t to);

// Appends a tagged record to the raw file. The writer thread only (and
// the process's end, once the writer has stopped).
void WriteRecord(char tag, const void* p, size_t n);

// clocks.cc

// A task-clock event on the calling thread that signals it every
// `period_ns` of its CPU time; -1 when the kernel refuses. `user_only`:
// what perf_event_paranoid 2 allows. `trap`: by synchronous SIGTRAP
// (sigtrap.cc), else kSampleSignal (SIGURG) through O_ASYNC.
int OpenTaskClock(uint64_t period_ns, bool user_only, bool trap);

// What takes this process's samples (common/stacks/sampler_format.h's
// SampleSource): for CPU time a task-clock event if the kernel gives one
// (with kernel time if allowed), else the tick-bound timers, tried on the
// calling thread; none when fieldprof record samples from outside, or when
// the program is Go's (`stepped_aside`: its runtime takes the signals by
// the raw system call).
struct SourceChoice {
  uint32_t source = 0;
  bool trap = false;           // task-clock events signal by SIGTRAP
  bool stepped_aside = false;  // no samples: the program owns their signals
};
SourceChoice ChooseSource(uint64_t period_ns, bool wall);

// stack_rings.cc

// Opens the calling thread's ring of stacks, as its sampling starts. False
// when none could be had (its records are then dropped and counted).
bool OpenStackRing();
// As the thread's sampling stops: the writer drains its ring once more and
// frees it.
void CloseStackRing();
// Appends the raw file's record `tag` (its fixed `head`, then `depth`
// return addresses) to the calling thread's ring. False (counted as
// dropped) when the ring is full or the thread has none.
bool PutRecord(char tag, const void* head, size_t head_bytes, const uint64_t* ips, uint16_t depth);
// The writer: every ring's new records to the raw file. Returns whether
// one was over a quarter full (drain again soon).
bool DrainStackRings();
// In a forked child: the other threads' rings are nobody's.
void ForgetStackRingsAfterFork();
uint64_t StackRecordsDropped();

// sigtrap.cc

// The sig_data of our task-clock events: a SIGTRAP that carries it is a
// sample, any other SIGTRAP the program's.
inline constexpr uint64_t kSampleSigData = 0x6670726563747261;  // "fprectra"
// Whether a SIGTRAP is one of our samples.
bool IsSampleTrap(const siginfo_t* si);
// Makes `on_sample` the handler of our SIGTRAPs, keeping the program's
// disposition for its own (sigaction() and signal() are wrapped). False
// when the handler could not be installed.
bool OwnTrapSignal(void (*on_sample)(int, siginfo_t*, void*));
// Puts the program's SIGTRAP disposition back (before an exec).
void ReturnTrapSignal();

// The other clocks signal by SIGURG, whose default action is to ignore it:
// a process that puts every signal back to its default by the raw system
// call and then still runs a while (Chromium's child of a fork, before its
// exec) lets the samples on their way go by. With SIGPROF (the signal it used before),
// whose default action ends the process, every such child of a fork died
// of a sample under every in-process clock. Few programs use SIGURG
// (out-of-band socket data; Go's runtime, which the sampler steps aside
// for), and it is owned the same way as SIGTRAP: a program's own handler on
// it never runs for one of our samples, and the program's own SIGURGs still
// reach it. A sample is a SIGURG from one of our timers (SI_TIMER carrying
// kProfTimerValue) or from one of our task-clock events (a SIGPOLL code and
// one of their descriptors, clocks.cc).
inline constexpr int kSampleSignal = SIGURG;
inline constexpr uintptr_t kProfTimerValue = 0x6670726563707266;  // "fprecprf"
bool IsSampleSignal(const siginfo_t* si);
bool OwnSampleSignal(void (*on_sample)(int, siginfo_t*, void*));
// Before an exec (the program's disposition back).
void ReturnSampleSignal();
// Whether a program's raw rt_sigaction took the sample signal from us.
bool SampleSignalTaken();

// modules.cc

// Writes (through `write`) a module record per loaded object with code,
// when objects were loaded or unloaded since `*adds_seen` (the dynamic
// linker's count of them, which it then holds). The caller makes sure no
// walk of the loaded objects may hang (fork_hooks.h).
void ListModulesIfChanged(unsigned long long* adds_seen, void (*write)(const void*, size_t));

// switches.cc

// Whether `fd` is still a perf_event: the program may have closed one of
// ours and the number been reused, and must never have its own closed.
bool IsPerfEvent(int fd);

// Opens the calling thread's switch ring (perf_event, context_switch), as
// threads start. False when the kernel refused (counted).
bool WatchThreadSwitches();
// At thread exit: the writer drains the ring once more and closes it.
void UnwatchThreadSwitches();
// The writer: copies every ring's new switch records to the raw file.
// Returns whether any ring was over a quarter full (drain again soon).
bool DrainSwitches();
// In a forked child: the parent's rings are not mapped here.
void ForgetSwitchesAfterFork();
// For the rest of the process: no wrapped call records anything (a
// seccomp filter is coming).
void StopWatchingSwitches();
uint64_t SwitchesLost();
uint64_t ThreadsUnwatched();

}  // namespace fieldprof::sampler

#endif  // FIELDPROF_AGENT_PRELOAD_SAMPLER_SAMPLER_H_
