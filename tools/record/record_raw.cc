#include "tools/record/record_raw.h"

#include <fcntl.h>
#include <signal.h>
#include <unistd.h>

#include <cerrno>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <ctime>
#include <fstream>
#include <iostream>
#include <sstream>

#include "common/base/durable_file.h"
#include "common/stacks/sampler_format.h"
#include "tools/record/command_points.h"
#include "tools/record/perf_sampler.h"

namespace fieldprof::tools {

namespace fs = std::filesystem;

namespace {

// What was written, and what the samplers could not take.
void SayRecorded(const Recording& r, const std::string& output) {
  std::fprintf(stderr,
               "fieldprof record: %s written: %zu samples (%s, %u Hz) over %.2f s, %u process%s, "
               "%zu threads, %zu stacks%s\n",
               output.c_str(), r.tree.samples(), tools::SampleSourceName(r.source), r.hz,
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
                 raw::IsPerfSource(r.source) ? ""
                                             : "; the default --clock perf samples on "
                                               "from outside");
  }
  if (r.signal_taken > 0) {
    std::fprintf(stderr,
                 "fieldprof record: %u process%s set its own SIGURG handler by the raw system "
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
  if (per_s > 5000 && (r.source == raw::kTaskClock || r.source == raw::kTaskClockUser)) {
    std::fprintf(stderr,
                 "fieldprof record: %.0f context switches a second: the task clock adds to "
                 "each; --clock timer does not\n",
                 per_s);
  }
}

// Points in the modules the processes loaded, when the points recorder
// was not preloaded (RawArgs::points_unasked): a program the command
// started, or a library loaded later, that has them.
void SayUnrecordedPoints(const Recording& r) {
  const std::vector<std::string> with = ModulesWithPoints(r.module_files);
  if (with.empty()) return;
  std::string names;
  for (size_t i = 0; i < with.size() && i < 3; ++i) names += (i > 0 ? ", " : "") + with[i];
  if (with.size() > 3) names += " and " + std::to_string(with.size() - 3) + " more";
  std::fprintf(stderr,
               "fieldprof record: %s %s instrumentation points that were not recorded: the "
               "command's own program and libraries have none, so the points recorder was not "
               "loaded into its processes; --points records them in every program it starts\n",
               names.c_str(), with.size() == 1 ? "has" : "have");
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
    StatusOr<tools::PerfUnwindSummary> u = tools::UnwindPerfSamples(
        snap.path, snap.path, static_cast<uint32_t>(a.hz), a.kernel_time, a.idle);
    if (!u.ok()) return u.status();
  }
  StatusOr<Recording> r = tools::RecordingFromRawDir(snap.path, TreeOptions(a));
  if (r.ok()) r->command = a.command;
  return r;
}

// The recording so far, from the follower of a live recording: asked for
// by creating kLiveWant, answered when it is gone (the follower looks
// every 200 ms; a busy machine may take longer, hence the generous
// deadline), and read from kLiveFile.
StatusOr<Recording> AskFollower(const std::string& raw_dir, const RawArgs& a) {
  const std::string want = raw_dir + "/" + kLiveWant;
  const int fd = open(want.c_str(), O_WRONLY | O_CREAT | O_CLOEXEC, 0600);
  if (fd < 0) return IOError("cannot ask: " + want);
  close(fd);
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(20);
  std::error_code ec;
  while (fs::exists(want, ec)) {
    if (std::chrono::steady_clock::now() > deadline || !WriterAlive(a)) {
      return Unavailable("the live recording's follower did not answer");
    }
    timespec ts{0, 10 * 1000 * 1000};
    nanosleep(&ts, nullptr);
  }
  StatusOr<std::string> bytes = ReadWholeFile(raw_dir + "/" + kLiveFile);
  if (!bytes.ok()) return bytes.status();
  return tools::DecodeRecording(*bytes);
}

}  // namespace

Status WriteRawArgs(const std::string& raw_dir, const RawArgs& r) {
  char head[160];
  std::snprintf(head, sizeof head,
                "hz %lld\nleaf_samples %lld\nfanout %lld\nkeep %.17g\n"
                "kernel_time %d\n",
                static_cast<long long>(r.hz), static_cast<long long>(r.m),
                static_cast<long long>(r.n), r.p, r.kernel_time ? 1 : 0);
  return WriteFileDurably(
      raw_dir + "/" + kRawArgs,
      head + ("pid " + std::to_string(r.pid) + "\nlive " + std::to_string(r.live ? 1 : 0) +
              "\nidle " + std::to_string(r.idle ? 1 : 0) + "\npoints_unasked " +
              std::to_string(r.points_unasked ? 1 : 0) + "\ncommand " + r.command + "\n"),
      FileAccess::kPrivate);
}

void AppendRawArg(const std::string& raw_dir, const char* key, int64_t value) {
  std::ofstream(raw_dir + "/" + kRawArgs, std::ios::app) << key << " " << value << "\n";
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
    } else if (key == "live") {
      r.live = number == 1;
    } else if (key == "idle") {
      r.idle = number == 1;
    } else if (key == "points_unasked") {
      r.points_unasked = number == 1;
    }
  }
  if (r.hz < 1 || r.m < 1 || r.n < 2 || !(r.p > 0 && r.p <= 1)) {
    return DataLoss(raw_dir + "/" + kRawArgs + " is damaged");
  }
  return r;
}

tools::TimeTreeOptions TreeOptions(const RawArgs& a) {
  tools::TimeTreeOptions o;
  o.leaf_samples = static_cast<uint32_t>(a.m);
  o.keep_fraction = a.p;
  o.fanout = static_cast<uint32_t>(a.n);
  return o;
}

Made WriteRecording(const RawArgs& a, const std::string& raw_dir, const std::string& output,
                    const std::string& context, tools::RawDirReader* followed) {
  StatusOr<Recording> r = NotFound("");
  if (followed != nullptr) {
    Status s = followed->Poll(UINT64_MAX);  // the rest, up to the end
    r = s.ok() ? followed->Snapshot() : StatusOr<Recording>(s);
  }
  if (followed == nullptr || followed->stale() || !r.ok()) {
    r = tools::RecordingFromRawDir(raw_dir, TreeOptions(a));
  }
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
  if (Status w = WriteFileDurably(output, tools::EncodeRecording(*r), FileAccess::kShared);
      !w.ok()) {
    std::cerr << "fieldprof record: " << w.message() << context << "\n";
    return Made::kNotWritten;
  }
  SayRecorded(*r, output);
  SayIdle(*r);
  if (a.points_unasked) SayUnrecordedPoints(*r);
  return Made::kWritten;
}

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
    StatusOr<tools::PerfUnwindSummary> u = tools::UnwindPerfSamples(
        raw_dir, raw_dir, static_cast<uint32_t>(a->hz), a->kernel_time, a->idle);
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

StatusOr<Recording> LoadForShow(const std::string& file) {
  const std::string raw_dir = file + kRawSuffix;
  if (std::error_code ec; !fs::exists(file, ec) && fs::is_directory(raw_dir, ec)) {
    StatusOr<RawArgs> a = ReadRawArgs(raw_dir);
    if (a.ok() && WriterAlive(*a)) {
      if (a->live) {
        StatusOr<Recording> grown = AskFollower(raw_dir, *a);
        if (grown.ok()) {
          std::fprintf(
              stderr,
              "fieldprof record show: %s is still being recorded (fieldprof record, pid "
              "%lld): shown from its time tree as grown, up to the samplers' last writes\n",
              file.c_str(), static_cast<long long>(a->pid));
          return grown;
        }
      }
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
  return tools::DecodeRecording(*bytes);
}

RawDirFollower::RawDirFollower(std::string raw_dir, const RawArgs& args)
    : dir_(std::move(raw_dir)), args_(args), reader_(dir_, TreeOptions(args)) {}

RawDirFollower::~RawDirFollower() { Stop(); }

void RawDirFollower::Start() {
  thread_ = std::thread([this] { Loop(); });
}

tools::RawDirReader& RawDirFollower::Stop() {
  {
    std::lock_guard<std::mutex> l(mu_);
    stop_ = true;
  }
  wake_.notify_all();
  if (thread_.joinable()) thread_.join();
  return reader_;
}

void RawDirFollower::Loop() {
  std::unique_lock<std::mutex> l(mu_);
  while (!stop_) {
    wake_.wait_for(l, std::chrono::milliseconds(200));
    if (stop_) break;
    l.unlock();
    timespec now{};
    clock_gettime(CLOCK_MONOTONIC, &now);
    const uint64_t now_ns =
        static_cast<uint64_t>(now.tv_sec) * 1000000000ull + static_cast<uint64_t>(now.tv_nsec);
    // A failure here (a full disk, a damaged file) leaves the rest to the
    // end, which reads the files afresh.
    if (reader_.Poll(now_ns - std::min<uint64_t>(now_ns, 500000000ull)).ok()) {
      std::error_code ec;
      if (fs::exists(dir_ + "/" + kLiveWant, ec)) Answer();
    }
    l.lock();
  }
}

void RawDirFollower::Answer() {
  StatusOr<Recording> r = reader_.Snapshot(/*with_waiting=*/true);
  std::error_code ec;
  if (r.ok()) {
    r->command = args_.command;
    if (!WriteFileDurably(dir_ + "/" + kLiveFile, tools::EncodeRecording(*r), FileAccess::kPrivate)
             .ok()) {
      fs::remove(dir_ + "/" + kLiveFile, ec);
    }
  } else {
    fs::remove(dir_ + "/" + kLiveFile, ec);  // nothing yet: the asker reads the files
  }
  fs::remove(dir_ + "/" + kLiveWant, ec);  // answered, or nothing to show yet: the asker reads on
}

}  // namespace fieldprof::tools
