// Points nobody wrote (points record --auto, record --auto_points): with
// FIELDPROF_POINTS_AUTO=1 the recorder passes points of its own, tag
// "auto", so that a program's startup and shape read as segments without
// touching its code:
//   start          the recorder's constructor: the program's libraries
//                  are loaded, not all of their constructors run
//   fork           a forked child begins
//   main           main is entered (__libc_start_main is wrapped)
//   exec           an exec is about to replace the image
//   exit           main returns, or exit() or _exit() is called
//   dlopen LIB     a scope around each dlopen: loading the library and
//                  running its constructors
//   thread         a scope on each thread, from its start routine to its
//                  end (pthread_create is wrapped; a return or pthread_exit)
// Points are taken in time order whatever thread made them, so one
// process reads "start -> main", "main -> exit" (or "-> exec"); the
// scopes read as their durations (common/points/points_analysis.h).
#ifndef FIELDPROF_AGENT_PRELOAD_POINTS_AUTO_POINTS_H_
#define FIELDPROF_AGENT_PRELOAD_POINTS_AUTO_POINTS_H_

namespace fieldprof::points {

// Whether this process passes automatic points (read at start).
bool AutoPointsOn();
// Reads FIELDPROF_POINTS_AUTO; at the recorder's start.
void StartAutoPoints();

// The recorder's hooks pass these when AutoPointsOn. Start and fork come
// from the recorder's own work (its constructor, its fork handler) and
// are passed still; the others only from the program's (the recorder
// leaves out exec and _exit in a vfork child, whose rings are its
// parent's).
void AutoStart();
void AutoForked();
void AutoExec();
void AutoExit();
// Around every dlopen, paired on the thread (a library's constructor may
// open another): `file` null for one that is no scope (the recorder's own
// work, dlopen(NULL)).
void AutoDlopenBegin(const char* file);
void AutoDlopenEnd();

}  // namespace fieldprof::points

#endif  // FIELDPROF_AGENT_PRELOAD_POINTS_AUTO_POINTS_H_
