// Arming: at load, and after each dlopen, every loaded module's USDT
// notes (.note.stapsdt, read from its file: the section is not loaded)
// are searched for the fieldprof:point probes of agent/include/fieldprof/
// points.h, and their semaphore, one per module, is raised. From then on
// the module's points call the recorder's fieldprof_point_hit. A module
// closed is forgotten, so that one opened again is armed again.
#ifndef FIELDPROF_AGENT_PRELOAD_POINTS_ARMING_H_
#define FIELDPROF_AGENT_PRELOAD_POINTS_ARMING_H_

#include <string>

namespace fieldprof::points {

// At load, in a process that records: before any other call here.
void StartArming();

// Points placed by configuration (--at): the modules the plan at `plan`
// names ("MODULE:SYMBOL" lines). The file and the drain wait for one of
// them to be loaded, so a process that never loads one (the shell around
// the program) leaves no file.
void PlaceModulesOf(const char* plan);

// Arms what is loaded; true when some module has points, or one of the
// modules the plan names is loaded. False before StartArming.
bool ArmAll();

// After a dlclose: the modules no longer loaded are forgotten, with their
// semaphores.
void ForgetClosedModules();

// The program's file, as /proc/self/exe names it (empty when it cannot),
// and its name ("?" then).
std::string ProgramPath();
std::string ProgramName();

}  // namespace fieldprof::points

#endif  // FIELDPROF_AGENT_PRELOAD_POINTS_ARMING_H_
