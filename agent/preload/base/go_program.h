// Whether the main program was built by Go, for a preloaded library that
// must then keep out of its signals: a Go runtime installs its handlers
// with the raw system call, over any library's, and runs goroutines on
// small stacks a foreign handler must not use.
#ifndef FIELDPROF_AGENT_PRELOAD_BASE_GO_PROGRAM_H_
#define FIELDPROF_AGENT_PRELOAD_BASE_GO_PROGRAM_H_

namespace fieldprof::preload {

// Its ELF has a .go.buildinfo or .note.go.buildid section (read from
// /proc/self/exe: the header, the section headers, their names). From a
// constructor: one thread, no lock.
bool IsGoProgram();

}  // namespace fieldprof::preload

#endif  // FIELDPROF_AGENT_PRELOAD_BASE_GO_PROGRAM_H_
