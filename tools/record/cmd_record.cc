// fieldprof record: sample a command's call stacks into a
// recording, and show any time range of it.
//
//   fieldprof record [-o NAME.fprec] [--hz 999] [--wall] [--idle=false] -- CMD ARGS...
//   fieldprof record show FILE [--from S] [--to S] [--thread TID]
//                              [--collapsed] [--exact] [--bottom_up] [--idle]
//                              [--html PAGE] [--pprof FILE] [--chrome_trace]
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

#include "common/durable_file.h"
#include "common/options.h"
#include "common/sampler_format.h"
#include "tools/cli/command_args.h"
#include "tools/cli/command_line.h"
#include "tools/cli/format.h"
#include "tools/cli/runtime_env.h"
#include "tools/cli/spawn.h"
#include "tools/commands.h"
#include "tools/record/cpu_switches.h"
#include "tools/record/idle_report.h"
#include "tools/record/perf_sampler.h"
#include "tools/record/pprof_export.h"
#include "tools/record/raw_dir_reader.h"
#include "tools/record/record_page.h"
#include "tools/record/recording.h"

namespace fieldprof::tools {
namespace {

namespace fs = std::filesystem;
using local::RangeCounts;
using local::Recording;

constexpr const char* kSamplerLib = "libfieldprof-sampler.so";

// A directory removed with what is in it when this goes out of scope,
// unless kept (what it holds could not be made into a recording).
struct ScratchDir {
  std::string path;
  bool keep = false;
  ~ScratchDir() {
    std::error_code ec;
    if (!path.empty() && !keep) fs::remove_all(path, ec);
  }
};

// What the samplers write while the command runs goes to OUTPUT.raw/,
// beside the recording: a `fieldprof record` killed before it wrote the
// recording leaves it there, and `record recover` (or the next `record
// show` of OUTPUT) makes the recording from it. `kRawArgs` in it says how.
constexpr const char* kRawSuffix = ".raw";
constexpr const char* kRawArgs = "record.args";

// What `fieldprof record` was asked, checked.
struct RecordArgs {
  std::string output, lib_dir, clock = "perf", cpu_wide = "auto";
  int64_t hz = 999, m = 100, n = 2, stack_bytes = 12288;
  double p = 0.95;
  bool wall = false, idle = true, all_user = false;
  std::vector<std::string> cmd;
};

// Reads the flags and the command into `a`; -1 to go on, else the exit
// code (help shown, or a usage error said).
int ParseRecordArgs(int argc, char** argv, RecordArgs* a) {
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
  t.AddString("cpu_wide", &cpu_wide,
              "with idle transitions, also CPU-wide switch records, which tell when a CPU truly "
              "went idle after a thread and left idle for it: auto (when privileged: "
              "CAP_PERFMON, root, or perf_event_paranoid <= 0), on, off");
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
  if (!s.ok()) return UsageError(t, s);
  if (output.empty()) output = fs::path(a->cmd[0]).filename().string() + ".fprec";
  return -1;
}

// Tells the preloaded sampler what to do, through its environment.
void SetSamplerEnv(const RecordArgs& a, bool outside, const std::string& lib_dir,
                   const std::string& raw_dir) {
  setenv("FIELDPROF_RECORD_DIR", raw_dir.c_str(), 1);
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
int RunSampled(const RecordArgs& a, const local::PerfSamplerOptions& po, bool outside,
               const std::string& raw_dir) {
  // Ctrl-C stops the program; its recording is still written.
  SpawnOptions so;
  so.interrupt_child_only = true;
  std::unique_ptr<local::PerfSampler> sampler;
  if (outside) {
    so.before_exec = [&](pid_t pid, std::string* why) {
      StatusOr<std::unique_ptr<local::PerfSampler>> ps = local::PerfSampler::Open(pid, po, raw_dir);
      if (!ps.ok()) {
        *why = "sampling from outside: " + std::string(ps.status().message()) +
               " (--clock task samples in the program)";
        return false;
      }
      sampler = std::move(*ps);
      sampler->Start();
      // For a recovery: how the rings sample, before anything is in them.
      if (sampler->kernel_time()) {
        std::ofstream(raw_dir + "/" + kRawArgs, std::ios::app) << "kernel_time 1\n";
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
    if (sampler->bytes_copied() > (64u << 20)) {
      std::fprintf(stderr, "fieldprof record: unwinding %.0f MB of samples...\n",
                   static_cast<double>(sampler->bytes_copied()) / 1e6);
    }
    StatusOr<local::PerfUnwindSummary> u = local::UnwindPerfSamples(
        raw_dir, raw_dir, static_cast<uint32_t>(a.hz), sampler->kernel_time());
    if (!u.ok()) std::cerr << "fieldprof record: " << u.status().message() << "\n";
  }
  return code;
}

// What was written, and what the samplers could not take.
void SayRecorded(const Recording& r, const std::string& output) {
  std::fprintf(stderr,
               "fieldprof record: %s written: %zu samples (%s, %u Hz) over %.2f s, %u process%s, "
               "%zu threads, %zu stacks%s\n",
               output.c_str(), r.tree.samples(), local::SampleSourceName(r.source), r.hz,
               static_cast<double>(r.duration_ns) / 1e9, r.processes, r.processes == 1 ? "" : "es",
               r.threads.size(), r.stacks.size(),
               r.processes_cut_short > 0 ? " (some processes ended without a last flush)" : "");
  if (r.dropped > 0 || r.skipped > r.tree.samples() / 100) {
    std::fprintf(
        stderr,
        "fieldprof record: %llu stacks dropped (the sampler's ring was full: its writer "
        "fell behind), %llu samples skipped (taken in the dynamic linker or the sampler)\n",
        static_cast<unsigned long long>(r.dropped), static_cast<unsigned long long>(r.skipped));
  }
  if (r.stepped_aside > 0) {
    std::fprintf(stderr,
                 "fieldprof record: %u process%s took no samples: the sampler in the program "
                 "steps aside for programs that own its signals (Go); the default --clock perf "
                 "samples them from outside\n",
                 r.stepped_aside, r.stepped_aside == 1 ? "" : "es");
  }
  if (r.seccomp_aside > 0) {
    std::fprintf(stderr,
                 "fieldprof record: %u process%s installed a seccomp filter: the sampler in the "
                 "program stopped there, before a system call the filter did not expect%s\n",
                 r.seccomp_aside, r.seccomp_aside == 1 ? "" : "es",
                 local::raw::IsPerfSource(r.source) ? ""
                                                    : "; the default --clock perf samples on "
                                                      "from outside");
  }
  if (r.signal_taken > 0) {
    std::fprintf(stderr,
                 "fieldprof record: %u process%s set its own SIGPROF handler by the raw system "
                 "call: the sampler in the program lost its samples there (the program got the "
                 "signals, as it would under a profiler of its own); the default --clock perf "
                 "samples from outside\n",
                 r.signal_taken, r.signal_taken == 1 ? " has" : "es have");
  }
  if (r.throttled > 0) {
    std::fprintf(stderr,
                 "fieldprof record: %llu samples throttled: unwinding took over a quarter of a "
                 "thread's time at %u Hz (a lower --hz keeps them)\n",
                 static_cast<unsigned long long>(r.throttled), r.hz);
  }
}

// How many idle transitions, and whether the clock itself costs switches.
void SayIdle(const Recording& r) {
  if (!r.idle) return;
  std::fprintf(stderr, "fieldprof record: %zu idle transitions%s (show --idle)%s\n",
               r.idle_tree.samples(), r.cpu_wide ? ", with CPU-wide idle" : "",
               r.switches_lost + r.threads_unwatched > 0 ? "; some switches were not seen" : "");
  const double per_s = static_cast<double>(r.idle_tree.samples() / 2 + r.preemptions) /
                       std::max(1e-3, static_cast<double>(r.duration_ns) / 1e9);
  if (per_s > 5000 &&
      (r.source == local::raw::kTaskClock || r.source == local::raw::kTaskClockUser)) {
    std::fprintf(stderr,
                 "fieldprof record: %.0f context switches a second: the task clock adds to "
                 "each; --clock timer does not\n",
                 per_s);
  }
}

// How a raw directory is made into a recording: the time tree's
// parameters, the command, and how the perf rings were sampled.
struct RawArgs {
  int64_t hz = 999, m = 100, n = 2;
  double p = 0.95;
  bool kernel_time = false;
  std::string command;
  int64_t pid = 0;  // the fieldprof record writing it
};

Status WriteRawArgs(const std::string& raw_dir, const RawArgs& r) {
  char head[160];
  std::snprintf(head, sizeof head,
                "hz %lld\nleaf_samples %lld\nfanout %lld\nkeep %.17g\n"
                "kernel_time %d\n",
                static_cast<long long>(r.hz), static_cast<long long>(r.m),
                static_cast<long long>(r.n), r.p, r.kernel_time ? 1 : 0);
  return WriteFileDurably(raw_dir + "/" + kRawArgs,
                          head + ("pid " + std::to_string(r.pid) + "\ncommand " + r.command + "\n"),
                          FileAccess::kPrivate);
}

StatusOr<RawArgs> ReadRawArgs(const std::string& raw_dir) {
  StatusOr<std::string> text = ReadWholeFile(raw_dir + "/" + kRawArgs);
  if (!text.ok()) {
    return Status(text.status().code(), raw_dir + " is not what fieldprof record left (" +
                                            kRawArgs + ": " + std::string(text.status().message()) +
                                            ")");
  }
  RawArgs r;
  std::istringstream lines(*text);
  for (std::string line; std::getline(lines, line);) {
    const size_t sp = line.find(' ');
    const std::string key = line.substr(0, sp),
                      value = sp == std::string::npos ? "" : line.substr(sp + 1);
    const long long number = std::strtoll(value.c_str(), nullptr, 10);
    if (key == "command") {
      r.command = value;
    } else if (key == "keep") {
      r.p = std::strtod(value.c_str(), nullptr);
    } else if (key == "hz") {
      r.hz = number;
    } else if (key == "leaf_samples") {
      r.m = number;
    } else if (key == "fanout") {
      r.n = number;
    } else if (key == "kernel_time") {
      r.kernel_time = number == 1;
    } else if (key == "pid") {
      r.pid = number;
    }
  }
  if (r.hz < 1 || r.m < 1 || r.n < 2 || !(r.p > 0 && r.p <= 1)) {
    return DataLoss(raw_dir + "/" + kRawArgs + " is damaged");
  }
  return r;
}

// What became of a raw directory.
enum class Made { kWritten, kNothing, kNotWritten };

// Builds the recording from what the samplers left in `raw_dir` and
// writes it to `output`; kNothing when there is nothing to make one of,
// kNotWritten when it could not be written (both said, with `context`).
Made WriteRecording(const RawArgs& a, const std::string& raw_dir, const std::string& output,
                    const std::string& context) {
  local::TimeTreeOptions o;
  o.leaf_samples = static_cast<uint32_t>(a.m);
  o.keep_fraction = a.p;
  o.fanout = static_cast<uint32_t>(a.n);
  StatusOr<Recording> r = local::RecordingFromRawDir(raw_dir, o);
  if (!r.ok()) {
    std::cerr << "fieldprof record: " << r.status().message()
              << (r.status().code() == StatusCode::kNotFound
                      ? ": a statically linked program, or one that drops LD_PRELOAD, cannot "
                        "be sampled from inside"
                      : "")
              << context << "\n";
    return Made::kNothing;
  }
  r->command = a.command;
  if (Status w = WriteFileDurably(output, local::EncodeRecording(*r), FileAccess::kShared);
      !w.ok()) {
    std::cerr << "fieldprof record: " << w.message() << context << "\n";
    return Made::kNotWritten;
  }
  SayRecorded(*r, output);
  SayIdle(*r);
  return Made::kWritten;
}

// `fieldprof record recover DIR`, and `record show` of a recording whose
// fieldprof record was killed: the perf rings copied so far are unwound
// (when there are any left), the raw files made into the recording at
// `output`, and DIR removed once it is written.
bool Recover(const std::string& raw_dir, const std::string& output) {
  StatusOr<RawArgs> a = ReadRawArgs(raw_dir);
  if (!a.ok()) {
    std::cerr << "fieldprof record: " << a.status().message() << "\n";
    return false;
  }
  std::error_code ec;
  bool rings = false;
  for (const auto& e : fs::directory_iterator(raw_dir, ec)) {
    const std::string name = e.path().filename().string();
    rings |= name.rfind("cpu", 0) == 0 && e.path().extension() == ".perf";
  }
  if (rings) {
    StatusOr<local::PerfUnwindSummary> u =
        local::UnwindPerfSamples(raw_dir, raw_dir, static_cast<uint32_t>(a->hz), a->kernel_time);
    if (!u.ok()) std::cerr << "fieldprof record: " << u.status().message() << "\n";
  }
  if (WriteRecording(*a, raw_dir, output, " (" + raw_dir + " is kept)") != Made::kWritten) {
    return false;
  }
  fs::remove_all(raw_dir, ec);
  std::fprintf(stderr,
               "fieldprof record: recovered %s from %s, which a killed fieldprof record left\n",
               output.c_str(), raw_dir.c_str());
  return true;
}

// Whether the fieldprof record that wrote `a` is still running (its
// directory is then a live recording, not one to recover).
bool WriterAlive(const RawArgs& a) {
  if (a.pid <= 0 || (kill(static_cast<pid_t>(a.pid), 0) != 0 && errno != EPERM)) return false;
  StatusOr<std::string> cmdline = ReadWholeFile("/proc/" + std::to_string(a.pid) + "/cmdline");
  return cmdline.ok() && cmdline->find("record") != std::string::npos;
}

// A recording still being written, read up to the samplers' last writes:
// its files copied as they are now into a directory of our own, the perf
// rings' copies unwound there; `raw_dir` is left as it is.
StatusOr<Recording> ReadLive(const std::string& raw_dir, const RawArgs& a) {
  ScratchDir snap;
  std::string tmpl = (fs::temp_directory_path() / "fieldprof-show-XXXXXX").string();
  if (mkdtemp(tmpl.data()) == nullptr) return Internal("cannot make a temporary directory");
  snap.path = tmpl;
  std::error_code ec;
  bool rings = false;
  // Copied first: the recording may end, and its directory go, meanwhile.
  for (const auto& e : fs::directory_iterator(raw_dir, ec)) {
    const std::string name = e.path().filename().string();
    fs::copy_file(e.path(), snap.path + "/" + name, ec);
    rings |= name.rfind("cpu", 0) == 0 && e.path().extension() == ".perf";
  }
  if (rings) {
    StatusOr<local::PerfUnwindSummary> u =
        local::UnwindPerfSamples(snap.path, snap.path, static_cast<uint32_t>(a.hz), a.kernel_time);
    if (!u.ok()) return u.status();
  }
  local::TimeTreeOptions o;
  o.leaf_samples = static_cast<uint32_t>(a.m);
  o.keep_fraction = a.p;
  o.fanout = static_cast<uint32_t>(a.n);
  StatusOr<Recording> r = local::RecordingFromRawDir(snap.path, o);
  if (r.ok()) r->command = a.command;
  return r;
}

// The recording `file` for show: the file; or, when there is none but its
// raw directory, the live recording (its fieldprof record still runs) or
// the one a killed fieldprof record left (made and written now).
StatusOr<Recording> LoadForShow(const std::string& file) {
  const std::string raw_dir = file + kRawSuffix;
  if (std::error_code ec; !fs::exists(file, ec) && fs::is_directory(raw_dir, ec)) {
    StatusOr<RawArgs> a = ReadRawArgs(raw_dir);
    if (a.ok() && WriterAlive(*a)) {
      std::fprintf(stderr,
                   "fieldprof record show: %s is still being recorded (fieldprof record, pid "
                   "%lld): shown up to the samplers' last writes\n",
                   file.c_str(), static_cast<long long>(a->pid));
      return ReadLive(raw_dir, *a);
    }
    if (!Recover(raw_dir, file)) return DataLoss("could not be recovered from " + raw_dir);
  }
  StatusOr<std::string> bytes = ReadWholeFile(file);
  if (!bytes.ok()) return bytes.status();
  return local::DecodeRecording(*bytes);
}

int Record(int argc, char** argv) {
  RecordArgs a;
  if (const int code = ParseRecordArgs(argc, argv, &a); code >= 0) return code;
  local::PerfSamplerOptions po;
  po.hz = static_cast<uint32_t>(a.hz);
  po.stack_bytes = static_cast<uint32_t>(a.stack_bytes) & ~7u;
  po.all_user = a.all_user;
  bool outside = a.clock == "perf" && !a.wall;
  if (outside) {
    if (Status av = local::PerfSamplerAvailable(po); !av.ok()) {
      std::cerr << "fieldprof record: sampling from outside is not available here (" << av.message()
                << "); sampling in the program instead (--clock task)\n";
      outside = false;
      a.clock = "task";
    }
  }
  // In the program: its samples unless taken from outside, and its idle
  // transitions. With neither, nothing is preloaded at all.
  const bool preload = !outside || a.idle;
  std::string dir;
  if (preload) {
    StatusOr<std::string> d = FindRuntime(a.lib_dir);
    if (d.ok() && access((*d + "/" + kSamplerLib).c_str(), R_OK) != 0) {
      d = NotFound(*d + " has no " + kSamplerLib);
    }
    if (!d.ok()) {
      std::cerr << "fieldprof record: " << d.status().message() << "\n";
      return 3;
    }
    dir = *d;
  }
  ScratchDir raw;
  raw.path = a.output + kRawSuffix;
  if (mkdir(raw.path.c_str(), 0700) != 0) {
    const int e = errno;
    std::cerr << "fieldprof record: " << raw.path << ": " << std::strerror(e)
              << (e == EEXIST ? " (a recording a killed fieldprof record left: fieldprof record "
                                "recover " +
                                    raw.path + ", or remove it)"
                              : "")
              << "\n";
    raw.path.clear();
    return 3;
  }
  RawArgs ra{a.hz, a.m, a.n, a.p, false, "", getpid()};
  for (const std::string& arg : a.cmd) ra.command += (ra.command.empty() ? "" : " ") + arg;
  if (Status w = WriteRawArgs(raw.path, ra); !w.ok()) {
    std::cerr << "fieldprof record: " << w.message() << "\n";
    return 3;
  }
  if (preload) SetSamplerEnv(a, outside, dir, raw.path);
  std::unique_ptr<local::CpuWideSwitches> cpu;
  if (a.idle && a.cpu_wide != "off") {
    StatusOr<std::unique_ptr<local::CpuWideSwitches>> c = local::CpuWideSwitches::Open();
    if (c.ok()) {
      cpu = std::move(*c);
      cpu->Start();
    } else if (a.cpu_wide == "on") {
      std::cerr << "fieldprof record: --cpu_wide on: " << c.status().message() << "\n";
      return 3;
    }
  }
  const int code = RunSampled(a, po, outside, raw.path);
  if (code < 0) return 127;
  if (cpu != nullptr) {
    const std::string log = local::EncodeCpuIdleLog(cpu->Stop());
    if (Status w =
            WriteFileDurably(raw.path + "/" + local::kCpuIdleFile, log, FileAccess::kPrivate);
        !w.ok()) {
      std::cerr << "fieldprof record: " << w.message() << "\n";
    }
  }
  // A message, not the program's failure: the exit status stays its own.
  const std::string context = "; the exit status is the program's (" + std::to_string(code) + ")";
  raw.keep = WriteRecording(ra, raw.path, a.output, context) == Made::kNotWritten;
  if (raw.keep) {
    std::cerr << "fieldprof record: what was sampled is kept in " << raw.path
              << " (fieldprof record recover " << raw.path << ")\n";
  }
  return code;
}

// A call-tree node: children by frame, samples in it and below.
struct TreeNode {
  uint64_t total = 0, self = 0;
  std::map<uint32_t, TreeNode> children;
};

// How lines are coloured: by self share of the hottest line.
struct Paint {
  bool color = false, truecolor = false;
  uint64_t hottest = 1;
  std::string operator()(const std::string& line, uint64_t self) const {
    return HeatText(line, static_cast<double>(self) / static_cast<double>(hottest), color,
                    truecolor);
  }
};

uint64_t HottestSelf(const TreeNode& node) {
  uint64_t most = node.self;
  for (const auto& [f, c] : node.children) most = std::max(most, HottestSelf(c));
  return most;
}

void PrintTree(const Recording& r, const TreeNode& node, uint64_t all, double min_share,
               const std::string& indent, const Paint& paint) {
  std::vector<std::pair<uint32_t, const TreeNode*>> kids;
  for (const auto& [f, c] : node.children) kids.emplace_back(f, &c);
  std::sort(kids.begin(), kids.end(),
            [](const auto& a, const auto& b) { return a.second->total > b.second->total; });
  for (const auto& [f, c] : kids) {
    const double share = static_cast<double>(c->total) / static_cast<double>(all);
    if (share < min_share) continue;
    char cols[32];
    std::snprintf(cols, sizeof cols, "%6.2f%% %6.2f%% ", 100 * share,
                  100 * static_cast<double>(c->self) / static_cast<double>(all));
    std::printf("%s\n", paint(cols + indent + r.frames[f], c->self).c_str());
    PrintTree(r, *c, all, min_share, indent + "  ", paint);
  }
}

// The range's samples as Chrome trace events (Perfetto UI,
// chrome://tracing). Each sample of a thread stands for the time before
// it since the thread's previous one (its weight: CPU time, or wall time
// with --wall), so it covers [time - weight, time]. Per thread, a frame
// begins where the first sample whose stack holds it at that depth
// begins, and ends where the first that does not begins, or where the
// last one ends when the next begins later (the thread was not running):
// each frame's slices add up to the time its samples stand for.
std::string ChromeTrace(const Recording& r, uint64_t t1, uint64_t t2, int64_t thread) {
  const std::vector<uint64_t>& times = r.tree.times();
  const std::vector<uint32_t>& types = r.tree.types();
  const size_t lo = std::lower_bound(times.begin(), times.end(), t1) - times.begin();
  const size_t hi = std::upper_bound(times.begin(), times.end(), t2) - times.begin();
  struct Open {
    std::vector<uint32_t> frames;
    uint64_t end = 0;  // where the thread's last sample ended
  };
  std::map<uint32_t, Open> open;  // by thread index
  nlohmann::json events = nlohmann::json::array();
  auto event = [&](uint32_t th, uint32_t frame, const char* ph, uint64_t at) {
    events.push_back({{"name", r.frames[frame]},
                      {"ph", ph},
                      {"ts", static_cast<double>(at) / 1000},
                      {"pid", r.threads[th].pid},
                      {"tid", r.threads[th].tid}});
  };
  auto close = [&](uint32_t th, Open& o, size_t keep, uint64_t at) {
    for (; o.frames.size() > keep; o.frames.pop_back()) event(th, o.frames.back(), "E", at);
  };
  for (size_t i = lo; i < hi; ++i) {
    const auto [th, stack] = r.types[types[i]];
    if (thread != 0 && r.threads[th].tid != static_cast<uint32_t>(thread)) continue;
    Open& o = open[th];
    const uint64_t weight = local::SampleNs(r, i);
    uint64_t begin = times[i] > weight ? times[i] - weight : 0;
    begin = std::max(begin, o.end);
    // Timers fire a little late or early: a gap under half the sample's
    // weight (or 50 us) is the same stretch of running.
    if (!o.frames.empty() && begin > o.end + std::max<uint64_t>(weight / 2, 50000)) {
      close(th, o, 0, o.end);
    } else if (!o.frames.empty()) {
      begin = o.end;
    }
    const std::vector<uint32_t>& now = r.stacks[stack];
    size_t same = 0;
    while (same < o.frames.size() && same < now.size() && o.frames[same] == now[same]) ++same;
    close(th, o, same, begin);
    for (size_t d = same; d < now.size(); ++d) {
      event(th, now[d], "B", begin);
      o.frames.push_back(now[d]);
    }
    o.end = std::max(times[i], begin);
  }
  for (auto& [th, o] : open) close(th, o, 0, o.end);
  return nlohmann::json{{"traceEvents", events}, {"displayTimeUnit", "ms"}}.dump() + "\n";
}

// The range as a pprof profile: samples (count, and CPU time at the
// period), or with `idle` the waits (to-idle count, off-CPU time).
int WritePprof(const Recording& r, uint64_t t1, uint64_t t2, uint32_t tid, bool idle,
               const std::string& path) {
  local::PprofProfile p;
  std::map<std::pair<uint32_t, uint32_t>, std::vector<int64_t>> by;  // (stack, tid)
  if (idle) {
    p.value_types = {{"waits", "count"}, {"off_cpu", "nanoseconds"}};
    p.period_type = {"waits", "count"};
    p.period = 1;
    const auto& times = r.idle_tree.times();
    const auto& types = r.idle_tree.types();
    const size_t lo = std::lower_bound(times.begin(), times.end(), t1) - times.begin();
    const size_t hi = std::upper_bound(times.begin(), times.end(), t2) - times.begin();
    for (size_t i = lo; i < hi; ++i) {
      const local::IdleType& t = r.idle_types[types[i]];
      const uint32_t thread_tid = r.threads[t.thread].tid;
      if (t.direction != local::IdleDirection::kToIdle || (tid != 0 && thread_tid != tid)) continue;
      auto& v = by[{t.stack, thread_tid}];
      v.resize(2);
      v[0] += 1;
      v[1] += static_cast<int64_t>(r.idle_off_ns[i]);
    }
  } else {
    const int64_t period = r.hz > 0 ? 1000000000 / r.hz : 0;
    p.value_types = {{"samples", "count"}, {r.wall ? "wall" : "cpu", "nanoseconds"}};
    p.period_type = {r.wall ? "wall" : "cpu", "nanoseconds"};
    p.period = period;
    for (const auto& [type, total] : local::SampleTotalsByType(r, t1, t2)) {
      const auto [th, stack] = r.types[type];
      if (tid != 0 && r.threads[th].tid != tid) continue;
      auto& v = by[{stack, r.threads[th].tid}];
      v.resize(2);
      v[0] += static_cast<int64_t>(total.samples);
      v[1] += static_cast<int64_t>(total.ns);  // what each sample stood for
    }
  }
  for (auto& [key, values] : by) p.samples.push_back({key.first, key.second, std::move(values)});
  p.duration_ns =
      static_cast<int64_t>(std::min<uint64_t>(t2, r.duration_ns) - std::min(t1, r.duration_ns));
  p.comments.push_back("fieldprof record: " + r.command);
  StatusOr<std::string> bytes = local::EncodePprof(r, p);
  Status w = bytes.ok() ? WriteFileDurably(path, *bytes, FileAccess::kShared) : bytes.status();
  if (!w.ok()) {
    std::cerr << "fieldprof record show: " << w.message() << "\n";
    return 1;
  }
  std::fprintf(stderr, "fieldprof record show: %s written: %zu stacks (go tool pprof -top %s)\n",
               path.c_str(), p.samples.size(), path.c_str());
  return 0;
}

int WritePage(const Recording& r, uint64_t t1, uint64_t t2, uint32_t tid, const std::string& path) {
  local::PageOptions o;
  o.from_ns = t1;
  o.to_ns = t2;
  o.tid = tid;
  const std::string page = local::RecordingPage(r, o);
  if (Status w = WriteFileDurably(path, page, FileAccess::kShared); !w.ok()) {
    std::cerr << "fieldprof record show: " << w.message() << "\n";
    return 1;
  }
  std::fprintf(stderr, "fieldprof record show: %s written (%s): open it in a browser\n",
               path.c_str(), FormatBytes(static_cast<double>(page.size())).c_str());
  return 0;
}

// Samples per stack in the range counted in `c`, of `thread` (0: all);
// `all`: their sum.
std::map<uint32_t, uint64_t> SamplesByStack(const Recording& r, const RangeCounts& c,
                                            int64_t thread, uint64_t* all) {
  std::map<uint32_t, uint64_t> by_stack;
  *all = 0;
  for (const auto& [type, count] : c.by_type) {
    const auto [th, stack] = r.types[type];
    if (thread != 0 && r.threads[th].tid != static_cast<uint32_t>(thread)) continue;
    by_stack[stack] += count;
    *all += count;
  }
  return by_stack;
}

// "a;b;c COUNT", a line per stack (flamegraph.pl, speedscope).
void PrintCollapsed(const Recording& r, const std::map<uint32_t, uint64_t>& by_stack) {
  for (const auto& [stack, count] : by_stack) {
    std::string line;
    for (uint32_t f : r.stacks[stack]) line += (line.empty() ? "" : ";") + r.frames[f];
    std::printf("%s %llu\n", line.c_str(), static_cast<unsigned long long>(count));
  }
}

// The functions by self samples, with their total.
void PrintBottomUp(const Recording& r, const std::map<uint32_t, uint64_t>& by_stack, uint64_t all,
                   double min_share, const std::string& color) {
  std::map<uint32_t, std::pair<uint64_t, uint64_t>> fn;  // frame -> (self, total)
  for (const auto& [stack, count] : by_stack) {
    const auto& frames = r.stacks[stack];
    if (frames.empty()) continue;
    fn[frames.back()].first += count;
    std::vector<uint32_t> seen(frames.begin(), frames.end());
    std::sort(seen.begin(), seen.end());
    seen.erase(std::unique(seen.begin(), seen.end()), seen.end());
    for (uint32_t f : seen) fn[f].second += count;
  }
  std::vector<std::pair<uint32_t, std::pair<uint64_t, uint64_t>>> rows(fn.begin(), fn.end());
  std::sort(rows.begin(), rows.end(), [](const auto& x, const auto& y) {
    return x.second != y.second ? x.second > y.second : x.first < y.first;
  });
  if (rows.empty()) return;
  Paint paint{ColorWanted(color), TrueColor(), std::max<uint64_t>(1, rows.front().second.first)};
  std::printf("  self   total  function\n");
  for (const auto& [f, st] : rows) {
    if (static_cast<double>(st.second) / static_cast<double>(all) < min_share) continue;
    char cols[32];
    std::snprintf(cols, sizeof cols, "%6.2f%% %6.2f%% ", 100 * static_cast<double>(st.first) / all,
                  100 * static_cast<double>(st.second) / all);
    std::printf("%s\n", paint(cols + r.frames[f], st.first).c_str());
  }
}

// The call tree, top-down, with total and self shares.
// `other`: the range's samples in the time tree's "other", a line of their
// own under the tree, so that the top lines and it make 100%.
void PrintTopDown(const Recording& r, const std::map<uint32_t, uint64_t>& by_stack, uint64_t all,
                  uint64_t other, double min_share, const std::string& color) {
  TreeNode root;
  for (const auto& [stack, count] : by_stack) {
    TreeNode* node = &root;
    node->total += count;
    for (uint32_t f : r.stacks[stack]) {
      node = &node->children[f];
      node->total += count;
    }
    node->self += count;
  }
  std::printf(" total    self  call tree (top-down)\n");
  const Paint paint{ColorWanted(color), TrueColor(), std::max<uint64_t>(1, HottestSelf(root))};
  PrintTree(r, root, all, min_share, "", paint);
  if (other > 0) {
    const double share = 100 * static_cast<double>(other) / static_cast<double>(all);
    std::printf("%6.2f%% %6.2f%% [other: stacks not listed]\n", share, share);
  }
}

// The range's header and, when "other" holds samples, the bound: what the
// shares below leave out (`top`: the most frequent stacks asked for). `in_range` counts the samples
// the shares are over: every thread's, or `thread`'s alone (counted
// exactly: "other" cannot be told apart by thread).
void PrintRangeHeader(const std::string& file, const Recording& r, const RangeCounts& c,
                      uint64_t in_range, double from, double to, int64_t thread, uint32_t top) {
  const double end = to < 0 ? static_cast<double>(r.duration_ns) / 1e9 : to;
  const double duration = static_cast<double>(r.duration_ns) / 1e9;
  if (thread != 0) {
    std::printf(
        "%s: %s, %llu samples of thread %lld in [%.3f s, %.3f s] of %.3f s (%llu of every "
        "thread); counted exactly\n",
        file.c_str(), r.command.c_str(), static_cast<unsigned long long>(in_range),
        static_cast<long long>(thread), from, end, duration,
        static_cast<unsigned long long>(c.samples));
    return;
  }
  std::printf("%s: %s, %llu samples in [%.3f s, %.3f s] of %.3f s\n", file.c_str(),
              r.command.c_str(), static_cast<unsigned long long>(c.samples), from, end, duration);
  if (c.other > 0) {
    const double points =
        100 * static_cast<double>(c.other) / static_cast<double>(std::max<uint64_t>(1, c.samples));
    std::printf(
        "bound: %llu of these %llu samples (%.1f%%) are in \"other\", stacks left out by the\n"
        "       time tree's lists%s (none with more than %llu samples). Each share\n"
        "       below is exact or short of the true share by at most %.1f points; one\n"
        "       stack's count, by at most %llu samples (--exact counts every sample)\n",
        static_cast<unsigned long long>(c.other), static_cast<unsigned long long>(c.samples),
        points, top > 0 ? (" and --top " + std::to_string(top)).c_str() : "",
        static_cast<unsigned long long>(c.other_at_most), points,
        static_cast<unsigned long long>(c.bound));
  }
}

// Where threads waited, coloured as asked.
std::string IdleText(const Recording& r, local::IdleReportOptions io, const std::string& color) {
  io.color = ColorWanted(color);
  io.truecolor = TrueColor();
  return local::IdleReport(r, io);
}

int Show(int argc, char** argv) {
  double from = 0, to = -1, min_share = 0.5;
  std::string color = "auto";
  int64_t thread = 0, top = 1000;
  bool collapsed = false, exact = false, bottom_up = false, chrome = false, idle = false;
  std::string pprof_out, html_out;
  OptionTable t("fieldprof record show",
                "A recording's samples in a time range as a call tree: total and self shares,\n"
                "top-down (or the functions by self time with --bottom_up), or as collapsed\n"
                "stacks for flamegraph.pl and speedscope. The range is answered from the time\n"
                "tree, its most frequent stacks listed (--top); what the tree's lists and the\n"
                "top left out is one \"other\" of exact size, stated as the bound (--exact counts\n"
                "every stack). Shares are over every sample of the range; with --thread, over\n"
                "that thread's, counted exactly.\n\n"
                "  fieldprof record show prog.fprec --from 2 --to 3.5 --thread 4242");
  t.AddDouble("from", &from, "from this many seconds after the start", 0, 1e9);
  t.AddDouble("to", &to, "to this many seconds after the start (default: the end)", -1, 1e9);
  t.AddInt("thread", &thread, "only this thread id (0: all)", 0, INT32_MAX);
  t.AddBool("collapsed", &collapsed, "collapsed stacks, one \"a;b;c COUNT\" line each (exact)");
  t.AddBool("chrome_trace", &chrome,
            "Chrome trace event JSON, a slice per frame (Perfetto UI, chrome://tracing)");
  t.AddString("pprof", &pprof_out,
              "write the range as a gzipped pprof profile to this file, for go tool pprof "
              "(with --idle: waits and off-CPU time)");
  t.AddString("html", &html_out,
              "write a self-contained page to this file: a timeline of samples per thread, and "
              "a flame graph of the range dragged on it, answered from the time tree (opens at "
              "--from/--to/--thread)");
  t.AddBool("exact", &exact, "every stack, counted exactly (--top is then not used)");
  t.AddInt("top", &top,
           "list the range's N most frequent stacks (a stack of each thread), the rest as "
           "\"other\" (0: every stack the tree's lists hold)",
           0, 1 << 24);
  t.AddBool("bottom_up", &bottom_up, "the functions by self samples, with their total");
  t.AddDouble("min_percent", &min_share, "hide call-tree nodes under this share (%)", 0, 100);
  t.AddString("color", &color,
              "the lab's heat colours, by self share (blue cold .. red hot): auto, always, never");
  t.AddBool("idle", &idle,
            "where threads waited: to-idle and from-idle counts and off-CPU ms per call path "
            "(with --collapsed: off-CPU microseconds)");
  Status s;
  if (ParseOrShowHelp(t, argc, argv, &s)) return 0;
  if (s.ok() && t.positional().size() != 1) s = InvalidArgument("give one recording file");
  if (s.ok() && to >= 0 && to < from) s = InvalidArgument("--to is before --from");
  if (s.ok() && color != "auto" && color != "always" && color != "never") {
    s = InvalidArgument("--color is auto, always or never, not \"" + color + "\"");
  }
  if (!s.ok()) return UsageError(t, s);
  const std::string file = t.positional()[0];
  StatusOr<Recording> r = LoadForShow(file);
  if (!r.ok()) {
    std::cerr << "fieldprof record show: " << file << ": " << r.status().message() << "\n";
    return 1;
  }
  const uint64_t t1 = static_cast<uint64_t>(std::llround(from * 1e9));
  const uint64_t t2 = to < 0 ? UINT64_MAX : static_cast<uint64_t>(std::llround(to * 1e9));
  if (chrome) {
    std::cout << ChromeTrace(*r, t1, t2, thread);
    return 0;
  }
  if (!html_out.empty()) return WritePage(*r, t1, t2, static_cast<uint32_t>(thread), html_out);
  if (!pprof_out.empty())
    return WritePprof(*r, t1, t2, static_cast<uint32_t>(thread), idle, pprof_out);
  if (idle) {
    local::IdleReportOptions io;
    io.from_ns = t1;
    io.to_ns = t2;
    io.tid = static_cast<uint32_t>(thread);
    io.min_share = min_share / 100;
    io.collapsed = collapsed;
    std::cout << IdleText(*r, io, color);
    return 0;
  }
  // One thread's range is counted exactly: the tree's "other" has no
  // thread, so its bound could not be stated over the thread's samples.
  local::RangeQuery query;
  query.exact = exact || collapsed || thread != 0;
  query.top = static_cast<uint32_t>(top);
  const RangeCounts c = r->tree.Range(t1, t2, query);
  uint64_t listed = 0;
  const std::map<uint32_t, uint64_t> by_stack = SamplesByStack(*r, c, thread, &listed);
  if (collapsed) {
    PrintCollapsed(*r, by_stack);
    return 0;
  }
  // Shares are over the range's samples (the thread's), "other" included.
  const uint64_t in_range = thread != 0 ? listed : c.samples;
  // --top named only when it left stacks out.
  const bool cut = !query.exact && query.top > 0 && c.by_type.size() >= query.top;
  PrintRangeHeader(file, *r, c, in_range, from, to, thread, cut ? query.top : 0);
  if (in_range == 0) {
    std::printf("no samples in this range\n");
    return 0;
  }
  if (bottom_up) {
    PrintBottomUp(*r, by_stack, in_range, min_share / 100, color);
  } else {
    PrintTopDown(*r, by_stack, in_range, thread != 0 ? 0 : c.other, min_share / 100, color);
  }
  return 0;
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

int CmdRecord(int argc, char** argv) {
  if (argc >= 2 && std::string(argv[1]) == "show") return Show(argc - 1, argv + 1);
  if (argc >= 2 && std::string(argv[1]) == "recover") return RecoverCommand(argc - 1, argv + 1);
  return Record(argc, argv);
}

}  // namespace fieldprof::tools
