// Stack samples of a measured run, folded to the packaged libraries'
// frames (docs/field-stacks.md).
//
// Every thread of a measured run gets a timer on its own CPU time
// (timer_create on CLOCK_THREAD_CPUTIME_ID, delivered to that thread),
// stack_hz times a CPU second (default 20): a run that lives less CPU time
// than one period is never interrupted. The signal is SIGURG, whose
// default action is to ignore it, owned through the in-process base
// (agent/preload/base/owned_signals.h): the program keeps its own disposition
// of it, and sees none of ours. A Go program is not sampled. The handler walks the
// stack with the C library's unwinder (libgcc_s's _Unwind_Backtrace, whose
// lookups need no lock: _dl_find_object) and adds the return addresses to
// a table of distinct stacks, with the CPU time each stands for. Nothing
// is named in the handler.
//
// When the run's record is written, each stack is folded per module: a
// module that a system package can have installed (its file root's, in a
// system directory; the agent keeps only modules a package holds) keeps
// the frames of its innermost stretch on the stack, outermost first, each
// the exported symbol that covers it or "+offset" of that build, and one
// last frame for where the time went on to: another module, "[program]"
// or "[unpackaged]". The program's own frames, and those of any other
// file, never leave the run: not even their addresses (common/wire/key_rules.h
// StackSymbolOk). Each (module, build, stack) becomes a record of metric
// stack_cpu_ns with the run's CPU time in it.
#ifndef FIELDPROF_AGENT_PRELOAD_RUNTIME_STACKS_STACK_SAMPLES_H_
#define FIELDPROF_AGENT_PRELOAD_RUNTIME_STACKS_STACK_SAMPLES_H_

#include <cstdint>

namespace fieldprof::rt {

struct SpoolRun;

// At start of a measured run, with its settings' stack_hz (0: nothing).
void StackSamplesStart(int hz);
// Whether samples were taken that no record has folded yet.
bool StackSamplesTaken();
// Whether this process samples now.
bool StackSamplesOn();
// The binder has found object `i`, loaded after the start (binder/objects.cc,
// under the dynamic linker's lock): noted in the live file for the agent
// (live_layout.h LiveSamples), when this run samples stacks.
void StackSamplesNoteObject(uint32_t i);
// A thread begins or ends (the pthread_create wrapper, stack_samples.cc).
void StackSamplesThreadBegins();
// Every timer stopped and no sample pending on this thread: before an exec
// (whose image would take a pending sample to its own handler) and
// before the record is folded. After a failed exec sampling stays off.
void StackSamplesQuiet();
// In a fork child: the parent's samples are its own; this thread samples
// afresh.
void StackSamplesAfterFork();
// The run's stacks as records of `run` (run->stacks), named now.
void AddStackRecords(SpoolRun* run);

}  // namespace fieldprof::rt

#endif  // FIELDPROF_AGENT_PRELOAD_RUNTIME_STACKS_STACK_SAMPLES_H_
