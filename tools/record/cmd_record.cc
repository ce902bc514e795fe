// fieldprof record: sample a command's call stacks into a
// recording, and show any time range of it.
//
//   fieldprof record [-o NAME.fprec] [--hz 999] [--wall] [--idle=false] -- CMD ARGS...
//   fieldprof record show FILE [--from S] [--to S] [--thread TID]
//                              [--collapsed] [--exact] [--bottom_up] [--idle]
//                              [--html PAGE] [--pprof FILE] [--chrome_trace]
#include <fcntl.h>
#include <signal.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <map>
#include <nlohmann/json.hpp>
#include <sstream>
#include <string>
#include <vector>

#include "common/base/durable_file.h"
#include "common/points/points_format.h"
#include "common/settings/options.h"
#include "common/snapshot/snapshot_cache.h"
#include "common/stacks/sampler_format.h"
#include "tools/commands.h"
#include "tools/record/command_cgroup.h"
#include "tools/record/command_points.h"
#include "tools/record/cpu_switches.h"
#include "tools/record/idle_report.h"
#include "tools/record/perf_sampler.h"
#include "tools/record/pprof_export.h"
#include "tools/record/raw_dir_reader.h"
#include "tools/record/record_page.h"
#include "tools/record/record_raw.h"
#include "tools/record/record_show.h"
#include "tools/record/recording.h"
#include "tools/shared/command_args.h"
#include "tools/shared/command_line.h"
#include "tools/shared/format.h"
#include "tools/shared/runtime_env.h"
#include "tools/shared/spawn.h"

namespace fieldprof::tools {
namespace {

namespace fs = std::filesystem;

constexpr const char* kSamplerLib = "libfieldprof-sampler.so";

// What `fieldprof record` was asked, checked.
struct RecordArgs {
  std::string output, lib_dir, clock = "perf", cpu_wide = "auto", idle_from = "auto";
  std::string cgroup = "auto";
  int64_t hz = 999, m = 100, n = 2, stack_bytes = 12288;
  double p = 0.95;
  bool wall = false, idle = true, all_user = false, points = true, auto_points = false;
  bool points_given = false;  // --points or --points=false, not the default
  bool check = false;
  std::string cache = DefaultSnapshotCacheDir();
  std::vector<std::string> cmd;
};

// Reads the flags and the command into `a`: nothing to go on, else the
// exit code (ExitCode).
ExitCode ParseRecordArgs(int argc, char** argv, RecordArgs* a) {
  std::string& output = a->output;
  int64_t &hz = a->hz, &m = a->m, &n = a->n, &stack_bytes = a->stack_bytes;
  double& p = a->p;
  bool &wall = a->wall, &idle = a->idle, &all_user = a->all_user;
  std::string &lib_dir = a->lib_dir, &clock = a->clock, &cpu_wide = a->cpu_wide;
  OptionTable t("fieldprof record",
                "Samples the call stacks of a command and every program it starts (CPU time,\n"
                "or wall-clock time with --wall) into a recording: whole stacks through\n"
                "libraries without frame pointers (DWARF unwinding), symbolised from ELF\n"
                "symbol tables and installed debug info. The recording keeps its samples in a\n"
                "time tree, so any time range is shown at once. It also records idle\n"
                "transitions: when each thread left the CPU to wait and came back, and the\n"
                "blocking call it waited in.\n\n"
                "  fieldprof record -- sqlite3 db.sqlite 'select ...'\n"
                "  fieldprof record show sqlite3.fprec                   # the call tree\n"
                "  fieldprof record show sqlite3.fprec --from 1.5 --to 2 # seconds 1.5 to 2\n"
                "  fieldprof record show sqlite3.fprec --collapsed > s.folded  # flamegraph.pl\n"
                "  fieldprof record show sqlite3.fprec --idle            # where threads waited\n\n"
                "While the command runs, the samples go to NAME.fprec.raw/ beside the recording;\n"
                "if fieldprof record is killed, `record show NAME.fprec` (or `record recover\n"
                "NAME.fprec.raw`) makes the recording from what was written.\n"
                "The command's exit status is fieldprof record's.");
  t.AddString("output", &output, "the recording's file (-o; default NAME.fprec)");
  t.AddShort('o', "output");
  t.AddInt("hz", &hz, "samples per second of CPU time (of wall time with --wall)", 1, 10000);
  t.AddBool("wall", &wall, "sample wall-clock time instead of CPU time");
  t.AddString("clock", &clock,
              "what takes CPU-time samples: perf (from outside, as perf record --call-graph "
              "dwarf: task-clock perf_events of fieldprof record on the command and all it "
              "starts, each sample with a copy of the user stack, unwound afterwards; nothing "
              "runs in the program for it, so static binaries, Go, Chromium and each process's "
              "startup are sampled too), task (in the program: a task-clock per thread, its "
              "stack unwound at once) or timer (in the program: per-thread CPU timers, at most "
              "one sample per kernel tick, ~250/s). --wall samples in the program");
  t.AddInt("stack_bytes", &stack_bytes,
           "with --clock perf: the bytes of user stack copied with each sample; a stack "
           "deeper than that ends where the copy does (perf's default, 8192, cuts Debian's "
           "sqlite3 shell short of main; each KiB costs the program about 0.13% more)",
           1024, 65528);
  t.AddBool("all_user", &all_user,
            "with --clock perf: sample user time only, as perf record --all-user (kernel "
            "time is included where perf_event_paranoid or privileges allow it)");
  t.AddBool("idle", &idle,
            "record idle transitions: each thread's switches off and onto the CPU (perf_event "
            "switch records) and the blocking call it waited in");
  t.AddString("idle_from", &a->idle_from,
              "where idle transitions are taken: perf (from outside, with --clock perf: the "
              "kernel's switch records and, at each switch off the CPU, a copy of the user "
              "stack, as perf record -e cs --switch-events --call-graph dwarf; nothing runs in "
              "the program for them, so static programs' waits are recorded too; needs "
              "CAP_PERFMON, root or perf_event_paranoid <= 1), program (a sampler preloaded "
              "into each process unwinds the blocking call at once; costs each process about "
              "0.4 ms to start) or auto (perf where allowed, else program)");
  t.AddBool("points", &a->points,
            "record the program's instrumentation points (FP_POINT, FP_SCOPE: "
            "<fieldprof/points.h>) on the samples' timeline: record show --points lists their "
            "segments and scopes, --during TAG:NAME gives the samples inside them. Unless "
            "given, on when the command's program or a library it loads at start has points: "
            "the recorder is then loaded into every process the command starts, which costs "
            "each about 0.05 ms; --points loads it for points in programs the command starts "
            "(a script, make), and record says when it saw such points unrecorded");
  t.SayDefault("points", "when the command has points");
  t.AddBool("check", &a->check,
            "then check the command against the field (fieldprof check --json -- CMD: a lab "
            "profile of it, each API it calls against the field) into OUTPUT.check.json, which "
            "record show then marks on the stacks");
  t.AddString("cache", &a->cache, "with --check: the snapshot cache (the field)");
  t.AddBool("auto_points", &a->auto_points,
            "also points nobody wrote, tag auto: each process's start, main entered, exec, "
            "exit, fork, a scope around each dlopen (its constructors included) and around "
            "each thread; a startup then reads as segments (record show --points)");
  t.AddString("cpu_wide", &cpu_wide,
              "with idle transitions, also CPU-wide switch records, which tell when a CPU truly "
              "went idle after a thread and left idle for it: auto (when privileged: "
              "CAP_PERFMON, root, or perf_event_paranoid <= 0), on, off");
  t.AddString("cgroup", &a->cgroup,
              "with --clock perf: the command in a cgroup of its own (cgroup v2, inside fieldprof "
              "record's), sampled by one perf_event per CPU on the group: none is copied into "
              "each process it starts, which cuts what a short process pays by a third or more "
              "(perf record -a -G does so; without, as perf record -- CMD, every fork copies an "
              "event per CPU). "
              "A process the command moves to another group (systemd-run, a container) is not "
              "followed there. auto (where fieldprof record may make the group, root or a "
              "delegated subtree, and sample whole CPUs: CAP_PERFMON, root or "
              "perf_event_paranoid <= 0), on, off");
  t.AddInt("leaf_samples", &m, "the time tree's M: a node with fewer samples is a leaf", 1,
           1 << 30);
  t.AddDouble("keep", &p, "the time tree's P: an inner node's stacks cover this share", 0.01, 1);
  t.AddInt("fanout", &n, "the time tree's N: children of an inner node", 2, 64);
  t.AddString("lib_dir", &lib_dir, "directory holding libfieldprof-sampler.so");
  const int cmd_at = DoubleDashAt(argc, argv);
  Status s;
  if (ParseOrShowHelp(t, cmd_at, argv, &s)) return 0;
  a->cmd = ProgramArgs(argc, argv, cmd_at);
  if (s.ok() && a->cmd.empty()) s = InvalidArgument("give the command to record: -- CMD ARGS...");
  if (s.ok() && clock != "perf" && clock != "task" && clock != "timer") {
    s = InvalidArgument("--clock is perf, task or timer, not \"" + clock + "\"");
  }
  if (s.ok() && cpu_wide != "auto" && cpu_wide != "on" && cpu_wide != "off") {
    s = InvalidArgument("--cpu_wide is auto, on or off, not \"" + cpu_wide + "\"");
  }
  if (s.ok() && a->cgroup != "auto" && a->cgroup != "on" && a->cgroup != "off") {
    s = InvalidArgument("--cgroup is auto, on or off, not \"" + a->cgroup + "\"");
  }
  if (s.ok() && a->cgroup == "on" && (clock != "perf" || wall)) {  // --wall samples inside
    s = InvalidArgument("--cgroup on is for the sampler from outside: --clock perf, no --wall");
  }
  if (s.ok() && a->idle_from != "auto" && a->idle_from != "perf" && a->idle_from != "program") {
    s = InvalidArgument("--idle_from is auto, perf or program, not \"" + a->idle_from + "\"");
  }
  if (s.ok() && a->idle_from == "perf" && (clock != "perf" || wall)) {
    s = InvalidArgument(
        "--idle_from perf takes the waits beside the samples from outside: it "
        "needs --clock perf, without --wall");
  }
  a->points_given = t.given("points");
  if (s.ok() && a->auto_points && !a->points) {
    s = InvalidArgument("--auto_points are points: drop --points=false");
  }
  if (!s.ok()) return UsageError(t, s);
  if (output.empty()) output = fs::path(a->cmd[0]).filename().string() + ".fprec";
  return std::nullopt;
}

// Tells the preloaded sampler what to do, through its environment.
void SetSamplerEnv(const RecordArgs& a, bool outside, const std::string& lib_dir,
                   const std::string& raw_dir) {
  // Absolute: a program that changes its directory (make -C) and then
  // starts others still writes beside the rest.
  setenv("FIELDPROF_RECORD_DIR", fs::absolute(raw_dir).c_str(), 1);
  setenv("FIELDPROF_RECORD_HZ", std::to_string(a.hz).c_str(), 1);
  setenv("FIELDPROF_RECORD_WALL", a.wall ? "1" : "0", 1);
  setenv("FIELDPROF_RECORD_IDLE", a.idle ? "1" : "0", 1);
  setenv("FIELDPROF_RECORD_CLOCK", a.clock.c_str(), 1);
  setenv("FIELDPROF_RECORD_SAMPLES", outside ? "0" : "1", 1);
  PrependEnv("LD_PRELOAD", lib_dir + "/" + kSamplerLib);
}

// Runs the command, sampled from outside when `outside`; the samples are
// unwound into `raw_dir` when it ends. Returns its exit status, or -1
// when it could not be run (said).
int RunSampled(const RecordArgs& a, const tools::PerfSamplerOptions& po, bool outside,
               const std::string& raw_dir) {
  // Ctrl-C stops the program; its recording is still written.
  SpawnOptions so;
  so.interrupt_child_only = true;
  std::unique_ptr<tools::PerfSampler> sampler;
  std::unique_ptr<tools::CommandCgroup> group;  // outlives the sampler's last look
  if (outside) {
    so.before_exec = [&](pid_t pid, std::string* why) {
      StatusOr<std::unique_ptr<tools::PerfSampler>> ps = Unavailable("");
      if (a.cgroup != "off") {
        // The command in its own group, sampled there; where the group or
        // its events are refused, by events it inherits (said with
        // --cgroup on, which then stops).
        Status allowed = tools::PerfOnCgroupAvailable();
        StatusOr<std::unique_ptr<tools::CommandCgroup>> g =
            allowed.ok() ? tools::CommandCgroup::Make()
                         : StatusOr<std::unique_ptr<tools::CommandCgroup>>(allowed);
        Status added = g.ok() ? (*g)->Add(pid) : g.status();
        if (added.ok()) {
          tools::PerfSamplerOptions on_group = po;
          on_group.cgroup_fd = (*g)->fd();
          ps = tools::PerfSampler::Open(pid, on_group, raw_dir);
          if (ps.ok()) {
            group = std::move(*g);
          } else {
            (*g)->Remove(pid);
            added = ps.status();
          }
        }
        if (!added.ok() && a.cgroup == "on") {
          *why = "--cgroup on: " + std::string(added.message()) +
                 " (--cgroup off samples the command by events each of its processes inherits)";
          return false;
        }
      }
      if (group == nullptr) ps = tools::PerfSampler::Open(pid, po, raw_dir);
      if (!ps.ok()) {
        *why = "sampling from outside: " + std::string(ps.status().message()) +
               " (--clock task samples in the program)";
        return false;
      }
      sampler = std::move(*ps);
      if (po.waits && !sampler->waits()) {
        // Allowed to fieldprof record a moment ago, refused for the
        // command (out of descriptors, say): no sampler was preloaded.
        if (a.idle_from == "perf") {
          *why = "--idle_from perf: the kernel refused the context-switch events for the command";
          return false;
        }
        std::cerr << "fieldprof record: the kernel refused the context-switch events for the "
                     "command: no idle transitions are recorded (--idle_from program takes them "
                     "in the program)\n";
        AppendRawArg(raw_dir, "idle", 0);
      }
      sampler->Start();
      // For a recovery: how the rings sample, before anything is in them.
      if (sampler->kernel_time()) {
        AppendRawArg(raw_dir, "kernel_time", 1);
      }
      return true;
    };
  }
  std::string error;
  const int code = SpawnAndWait(a.cmd, so, &error);
  if (code < 0) {
    std::cerr << "fieldprof record: cannot run " << a.cmd[0] << ": " << error << "\n";
    return -1;
  }
  if (sampler != nullptr) {
    sampler->Stop();
    group.reset();
    if (sampler->bytes_copied() > (64u << 20)) {
      std::fprintf(stderr, "fieldprof record: unwinding %.0f MB of samples...\n",
                   static_cast<double>(sampler->bytes_copied()) / 1e6);
    }
    // Waits asked from outside and refused at the start: none recorded.
    const bool idle = a.idle && (!po.waits || sampler->waits());
    StatusOr<tools::PerfUnwindSummary> u = tools::UnwindPerfSamples(
        raw_dir, raw_dir, static_cast<uint32_t>(a.hz), sampler->kernel_time(), idle);
    if (!u.ok()) std::cerr << "fieldprof record: " << u.status().message() << "\n";
  }
  return code;
}

// The folder of the libraries the command is to preload: the sampler
// when `preload`, the points recorder with --points.
StatusOr<std::string> PreloadDir(const RecordArgs& a, bool preload) {
  StatusOr<std::string> d = FindRuntime(a.lib_dir);
  for (const char* lib : {preload ? kSamplerLib : nullptr, a.points ? points::kLibName : nullptr}) {
    if (lib != nullptr && d.ok() && access((*d + "/" + lib).c_str(), R_OK) != 0) {
      d = NotFound(*d + " has no " + lib);
    }
  }
  return d;
}

// The raw directory the samplers write into, new (one a killed record
// left is named, not reused); false when it cannot be made (said).
bool MakeRawDir(const std::string& path, ScratchDir* raw) {
  if (mkdir(path.c_str(), 0700) == 0) {
    raw->path = path;
    return true;
  }
  const int e = errno;
  std::cerr << "fieldprof record: " << path << ": " << std::strerror(e)
            << (e == EEXIST ? " (a recording a killed fieldprof record left: fieldprof record "
                              "recover " +
                                  path + ", or remove it)"
                            : "")
            << "\n";
  return false;
}

// With --idle, every CPU's switches (cpu_switches.h) unless --cpu_wide
// off; false when --cpu_wide on cannot have them (said).
bool StartCpuWide(const RecordArgs& a, std::unique_ptr<tools::CpuWideSwitches>* cpu) {
  if (!a.idle || a.cpu_wide == "off") return true;
  StatusOr<std::unique_ptr<tools::CpuWideSwitches>> c = tools::CpuWideSwitches::Open();
  if (c.ok()) {
    *cpu = std::move(*c);
    (*cpu)->Start();
    return true;
  }
  if (a.cpu_wide != "on") return true;
  std::cerr << "fieldprof record: --cpu_wide on: " << c.status().message() << "\n";
  return false;
}

// --check: the field's check of the command, run after the recording
// (fieldprof check --json --cache C -- CMD) with none of the recording's
// preloads, into OUTPUT.check.json beside it, which record show reads.
void CheckAgainstField(const RecordArgs& a, const std::string& ld_preload) {
  for (const char* name : {"FIELDPROF_RECORD_DIR", "FIELDPROF_RECORD_HZ", "FIELDPROF_RECORD_WALL",
                           "FIELDPROF_RECORD_IDLE", "FIELDPROF_RECORD_CLOCK",
                           "FIELDPROF_RECORD_SAMPLES", points::kDirEnv, points::kAutoEnv}) {
    unsetenv(name);
  }
  if (ld_preload.empty()) {
    unsetenv("LD_PRELOAD");
  } else {
    setenv("LD_PRELOAD", ld_preload.c_str(), 1);
  }
  const std::string path = a.output + ".check.json";
  const int fd = open(path.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
  if (fd < 0) {
    std::cerr << "fieldprof record: --check: " << path << ": " << std::strerror(errno) << "\n";
    return;
  }
  std::vector<std::string> argv = {"/proc/self/exe", "check", "--json", "--cache", a.cache, "--"};
  argv.insert(argv.end(), a.cmd.begin(), a.cmd.end());
  SpawnOptions so;
  so.out_fd = fd;
  so.interrupt_child_only = true;
  std::fprintf(stderr, "fieldprof record: checking the command against the field...\n");
  std::string error;
  const int code = SpawnAndWait(argv, so, &error);
  close(fd);
  StatusOr<std::string> text = ReadWholeFile(path);
  const nlohmann::json j = nlohmann::json::parse(text.ok() ? *text : "", nullptr, false);
  if (code < 0 || !j.is_object() || !j.contains("findings")) {
    std::cerr << "fieldprof record: --check: fieldprof check "
              << (code < 0 ? "could not run: " + error : "exited " + std::to_string(code))
              << " (no report in " << path << ")\n";
    std::remove(path.c_str());
    return;
  }
  size_t found = 0;
  for (const nlohmann::json& f : j["findings"]) found += f.value("evidence", false) ? 1 : 0;
  std::fprintf(stderr,
               "fieldprof record: %zu API%s cost%s more here than in the field (%s); record "
               "show %s marks %s on the stacks\n",
               found, found == 1 ? "" : "s", found == 1 ? "s" : "", path.c_str(), a.output.c_str(),
               found == 1 ? "it" : "them");
}

int Record(int argc, char** argv) {
  RecordArgs a;
  if (const ExitCode done = ParseRecordArgs(argc, argv, &a)) return *done;
  const char* preload_before = std::getenv("LD_PRELOAD");
  const std::string ld_preload = preload_before != nullptr ? preload_before : "";
  tools::PerfSamplerOptions po;
  po.hz = static_cast<uint32_t>(a.hz);
  po.stack_bytes = static_cast<uint32_t>(a.stack_bytes) & ~7u;
  po.all_user = a.all_user;
  bool outside = a.clock == "perf" && !a.wall;
  if (outside) {
    if (Status av = tools::PerfSamplerAvailable(po); !av.ok()) {
      if (a.idle_from == "perf" && a.idle) {
        std::cerr << "fieldprof record: --idle_from perf: sampling from outside is not available "
                     "here ("
                  << av.message() << ")\n";
        return 3;
      }
      if (a.cgroup == "on") {
        std::cerr << "fieldprof record: --cgroup on: sampling from outside is not available here ("
                  << av.message() << ")\n";
        return 3;
      }
      std::cerr << "fieldprof record: sampling from outside is not available here (" << av.message()
                << "); sampling in the program instead (--clock task)\n";
      outside = false;
      a.clock = "task";
    }
  }
  // The waits from outside, beside the samples, where the kernel allows it:
  // then no sampler is preloaded into every process (docs/benchmarks.md,
  // fieldprof record: what a process pays for it).
  if (outside && a.idle && a.idle_from != "program") {
    if (Status w = tools::PerfWaitsAvailable(); w.ok()) {
      po.waits = true;
    } else if (a.idle_from == "perf") {
      std::cerr << "fieldprof record: --idle_from perf: " << w.message()
                << " (--idle_from program takes them in the program)\n";
      return 3;
    }
  }
  // In the program: its samples unless taken from outside, its idle
  // transitions unless taken from outside, and the points recorder. With
  // none, nothing is preloaded.
  const bool preload = !outside || (a.idle && !po.waits);
  // Points by default only where the command has them (command_points.h).
  bool points_unasked = false;
  if (a.points && !a.points_given && !a.auto_points && CommandModuleWithPoints(a.cmd).empty()) {
    a.points = false;
    points_unasked = true;
  }
  std::string dir;
  if (preload || a.points) {
    StatusOr<std::string> d = PreloadDir(a, preload);
    if (!d.ok()) {
      std::cerr << "fieldprof record: " << d.status().message() << "\n";
      return 3;
    }
    dir = *d;
  }
  ScratchDir raw;
  if (!MakeRawDir(a.output + kRawSuffix, &raw)) return 3;
  RawArgs ra{a.hz, a.m, a.n, a.p, false, "", getpid()};
  for (const std::string& arg : a.cmd) ra.command += (ra.command.empty() ? "" : " ") + arg;
  // Sampled in the program, the stacks arrive unwound: a follower grows
  // the time tree as they do. From outside they are unwound when the
  // command has ended, as perf report does, to leave the program's CPUs
  // to it; the tree is made then.
  ra.live = !outside;
  ra.idle = a.idle;
  ra.points_unasked = points_unasked;
  if (Status w = WriteRawArgs(raw.path, ra); !w.ok()) {
    std::cerr << "fieldprof record: " << w.message() << "\n";
    return 3;
  }
  if (preload) SetSamplerEnv(a, outside, dir, raw.path);
  if (a.points) {
    // The points recorder writes its files beside the samplers' (a process
    // whose modules have no points writes none), timed by the TSC.
    SetTscRate();
    setenv(points::kDirEnv, fs::absolute(raw.path).c_str(), 1);
    if (a.auto_points) setenv(points::kAutoEnv, "1", 1);
    PrependEnv("LD_PRELOAD", dir + "/" + points::kLibName);
  }
  std::unique_ptr<tools::CpuWideSwitches> cpu;
  if (!StartCpuWide(a, &cpu)) return 3;
  std::unique_ptr<RawDirFollower> follower;
  if (ra.live) {
    follower = std::make_unique<RawDirFollower>(raw.path, ra);
    follower->Start();
  }
  const int code = RunSampled(a, po, outside, raw.path);
  if (code < 0) return 127;
  if (cpu != nullptr) {
    const std::string log = tools::EncodeCpuIdleLog(cpu->Stop());
    const std::string path = raw.path + "/" + tools::kCpuIdleFile;
    if (Status w = WriteFileDurably(path, log, FileAccess::kPrivate); !w.ok()) {
      std::cerr << "fieldprof record: " << w.message() << "\n";
    }
  }
  // A message, not the program's failure: the exit status stays its own.
  const std::string context = "; the exit status is the program's (" + std::to_string(code) + ")";
  raw.keep = WriteRecording(ra, raw.path, a.output, context,
                            follower != nullptr ? &follower->Stop() : nullptr) == Made::kNotWritten;
  if (raw.keep) {
    std::cerr << "fieldprof record: what was sampled is kept in " << raw.path
              << " (fieldprof record recover " << raw.path << ")\n";
  } else if (a.check) {
    CheckAgainstField(a, ld_preload);
  }
  return code;
}

}  // namespace

int RecoverCommand(int argc, char** argv) {
  std::string output;
  OptionTable t("fieldprof record recover",
                "Makes the recording that a killed fieldprof record did not: from the raw\n"
                "directory it leaves beside the recording's file (NAME.fprec.raw), up to the\n"
                "samplers' last writes. `record show NAME.fprec` does it too.\n\n"
                "  fieldprof record recover sqlite3.fprec.raw   # writes sqlite3.fprec");
  t.AddString("output", &output, "the recording's file (-o; default: DIR without .raw)");
  t.AddShort('o', "output");
  Status s;
  if (ParseOrShowHelp(t, argc, argv, &s)) return 0;
  if (s.ok() && t.positional().size() != 1) s = InvalidArgument("give the raw directory");
  if (!s.ok()) return UsageError(t, s);
  std::string dir = t.positional()[0];
  while (dir.size() > 1 && dir.back() == '/') dir.pop_back();
  if (output.empty()) {
    const std::string suffix = kRawSuffix;
    output = dir.size() > suffix.size() &&
                     dir.compare(dir.size() - suffix.size(), suffix.size(), suffix) == 0
                 ? dir.substr(0, dir.size() - suffix.size())
                 : dir + ".fprec";
  }
  return Recover(dir, output) ? 0 : 1;
}

constexpr Verb kVerbs[] = {{"show", RecordShow}, {"recover", RecoverCommand}};

// Without a verb, the recording itself: fieldprof record -- CMD.
int CmdRecord(int argc, char** argv) { return RunVerb(kVerbs, argc, argv, Record); }

}  // namespace fieldprof::tools
