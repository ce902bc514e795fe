// A preloaded library's own descriptors live high, at or above the soft
// limit's last quarter (at most 4096): a program that expects a low number
// for its own (the zygote of Chromium takes its socket at 3) or dup2()s
// onto one never meets ours.
#ifndef FIELDPROF_AGENT_PRELOAD_BASE_HIGH_FD_H_
#define FIELDPROF_AGENT_PRELOAD_BASE_HIGH_FD_H_

namespace fieldprof::preload {

// Moves `fd` up and closes it; returns the new descriptor (close-on-exec),
// or `fd` itself when it cannot move.
int MoveFdHigh(int fd);

// A high duplicate of `fd` (close-on-exec), or -1.
int DupFdHigh(int fd);

}  // namespace fieldprof::preload

#endif  // FIELDPROF_AGENT_PRELOAD_BASE_HIGH_FD_H_
