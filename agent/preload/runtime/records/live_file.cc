// The runtime's side of the live file (live_file.h, live_layout.h).
#include "agent/preload/runtime/records/live_file.h"

#include <errno.h>
#include <fcntl.h>
#include <linux/falloc.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include <cstring>

#include "agent/preload/runtime/companion.h"
#include "agent/preload/runtime/front/decide.h"
#include "agent/preload/runtime/sys.h"
#include "agent/preload/runtime/text.h"

namespace fieldprof::rt {

FP_HOT_DATA LiveHeader* g_live;
FP_HOT_DATA int g_live_fd = -1;
FP_HOT_DATA uint64_t g_live_ino, g_live_dev;
FP_COLD_BSS uint32_t g_live_metrics_backed[kSlabs];

namespace {

int& live_fd = g_live_fd;
// The file's path, for removing it (only a measured run writes this page).
FP_COLD_BSS char live_path[640];

bool SetLock(int fd, short type, off_t byte, bool wait_a_while) {
  struct flock l {};
  l.l_type = type;
  l.l_whence = SEEK_SET;
  l.l_start = byte;
  l.l_len = 1;
  // A bounded wait: the agent holds the report lock for the milliseconds
  // it takes to read a run; the runtime never waits for more than 50 ms.
  for (int i = 0;; ++i) {
    if (sys::Fcntl(fd, F_OFD_SETLK, &l) == 0) return true;
    if (!wait_a_while || i >= 50) return false;
    sys::Nanosleep(1000000);
  }
}

// The directory for live files: `live_dir`, else /dev/shm/fieldprof-<uid>;
// false when it is "off" or too long. No system call: the directory is
// made (mode 0700) only when the file cannot be made for want of it.
bool LiveDir(const RunSettings& s, char* dir, size_t cap) {
  if (Eq(s.live_dir, "off")) return false;
  if (s.live_dir[0] != 0) return Copy(dir, cap, s.live_dir);
  char uid[24];
  FormatU64(sys::Geteuid(), uid);
  return Copy(dir, cap, "/dev/shm/fieldprof-") && Cat(dir, cap, uid);
}

void FillHeader(LiveHeader& h) {
  std::memcpy(h.magic, kLiveMagic, sizeof h.magic);
  h.layout = kLiveLayout;
  h.header_bytes = kLiveHeaderBytes;
  h.slab_bytes = sizeof(Slab);
  h.stack_bytes = sizeof(ShadowStack);
  h.slabs = kSlabs;
  h.stacks = kShadowStacks;
  h.max_slots = FP_MAX_SLOTS;
  h.metrics = FP_NUM_METRICS;
  h.tick_table = kTickTable;
  h.ring = kRing;
  h.histogram_bytes = sizeof(Histogram);
  h.pid = static_cast<uint64_t>(sys::Getpid());
  timespec now{};
  clock_gettime(CLOCK_REALTIME, &now);
  h.start_unix_ms = int64_t{now.tv_sec} * 1000 + now.tv_nsec / 1000000;
  h.start_mono_ns = sys::MonoNs();
  h.state = kLiveRunning;
}

// What the header mirrors of the binder, as it stands (a fork child's new
// file: its parent's bound APIs are its own).
void NoteBinder() {
  for (int a = 0; a < FP_MAX_SLOTS; ++a) {
    if (!g.bound[a]) continue;
    LiveNoteApi(a, g.apis[a].module, g.apis[a].build_id, g.apis[a].symbol);
    if (g.evicted[a]) g_live->evicted[a] = 1;
    if (g.truncated[a]) g_live->truncated[a] = 1;
  }
}

// The parent's module notes (live_layout.h LiveSamples) into the child's
// file: the libraries the parent opened after its start are noted nowhere
// else (stack_samples.h StackSamplesNoteObject). Read by the parent's
// descriptor, where a page the parent never allocated reads as zeros (the
// mapping would allocate it, or fault on a full tmpfs); an entry being
// written at the fork keeps its kind 0 and is skipped.
void CopyModuleNotes(int parent_fd) {
  constexpr size_t kCount = kLiveSamplesOffset + offsetof(LiveSamples, nmodules);
  constexpr size_t kModules = kLiveSamplesOffset + offsetof(LiveSamples, modules);
  uint32_t n = 0;
  if (sys::Pread(parent_fd, &n, sizeof n, static_cast<long>(kCount)) != sizeof n || n == 0) return;
  if (n > LiveSamples::kModules) n = LiveSamples::kModules;
  const size_t bytes = sizeof(LiveModule) * n;
  LiveSamples* const mine = LiveSamplesOf(g_live);
  if (!LiveAllocate(kCount, sizeof n) || !LiveAllocate(kModules, bytes) ||
      sys::Pread(parent_fd, mine->modules, bytes, static_cast<long>(kModules)) !=
          static_cast<long>(bytes)) {
    return;  // nmodules stays 0: whatever was read is not counted
  }
  __atomic_store_n(&mine->nmodules, n, __ATOMIC_RELEASE);
}

void* Open(const RunSettings& s, const char* debug_log) {
  char dir[512];
  if (!LiveDir(s, dir, sizeof dir)) return nullptr;
  uint64_t rnd = 0;
  sys::Getrandom(&rnd, sizeof rnd, 0);
  char num[24];
  if (!Copy(live_path, sizeof live_path, dir) || !Cat(live_path, sizeof live_path, "/run-")) {
    return nullptr;
  }
  FormatU64(static_cast<uint64_t>(sys::Getpid()), num);
  Cat(live_path, sizeof live_path, num);
  Cat(live_path, sizeof live_path, "-");
  FormatU64(rnd & 0xffffffffffffu, num);
  if (!Cat(live_path, sizeof live_path, num) || !Cat(live_path, sizeof live_path, ".fplive")) {
    return nullptr;
  }
  constexpr int kFlags = O_RDWR | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC;
  int fd = sys::OpenAt(AT_FDCWD, live_path, kFlags, 0600);
  if (fd == -ENOENT) {
    MakeDirs(dir, 0700);
    fd = sys::OpenAt(AT_FDCWD, live_path, kFlags, 0600);
  }
  if (fd < 0) {
    DebugLine(debug_log, "live file in %s: cannot make it (errno %d): none", dir, -fd);
    return nullptr;
  }
  live_fd = fd;
  struct stat st;
  if (sys::Fstat(fd, &st) == 0) {
    g_live_ino = st.st_ino;
    g_live_dev = st.st_dev;
  }
  void* whole = MAP_FAILED;
  // The alive lock before anything is written, so that a reader never
  // takes a file being made for one whose owner is gone; then the header's
  // first page (the rest as APIs are bound: a full tmpfs fails that
  // cleanly, never a write).
  if (sys::Ftruncate(fd, static_cast<long>(kLiveFileBytes)) == 0 &&
      SetLock(fd, F_WRLCK, kLiveAliveByte, false)) {
    whole = mmap(nullptr, kLiveFileBytes, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
  }
  if (whole != MAP_FAILED) {
    g_live = static_cast<LiveHeader*>(whole);
    if (!LiveAllocate(0, offsetof(LiveHeader, apis))) {
      munmap(whole, kLiveFileBytes);
      g_live = nullptr;
      whole = MAP_FAILED;
    }
  }
  if (whole == MAP_FAILED) {
    sys::Unlink(live_path);
    sys::Close(fd);
    live_fd = -1;
    return nullptr;
  }
  FillHeader(*g_live);
  return static_cast<char*>(whole) + kLiveSlabsOffset;
}

}  // namespace

void* LiveOpen(const RunSettings& s, const char* debug_log) { return Open(s, debug_log); }

void LiveNoteClock() {
  if (g_live == nullptr) return;
  g_live->ns_per_tick_q32 = g.ns_per_tick_q32;
  g_live->probe_ticks = g.probe_ticks;
  g_live->resolution_ticks = g.resolution_ticks;
  g_live->rate_refuted = g.rate_refuted;
  __atomic_store_n(&g_live->calibrated, static_cast<uint32_t>(g.calibrated), __ATOMIC_RELEASE);
}

void LiveNoteApi(int slot, const char* module, const char* build_id, const char* symbol) {
  if (g_live == nullptr) return;
  LiveApi& a = g_live->apis[slot];
  if (!LiveAllocate(reinterpret_cast<char*>(&a) - reinterpret_cast<char*>(g_live), sizeof a))
    return;
  Copy(a.module, sizeof a.module, module);
  Copy(a.build_id, sizeof a.build_id, build_id);
  Copy(a.symbol, sizeof a.symbol, symbol);
  __atomic_store_n(&g_live->bound[slot], 1, __ATOMIC_RELEASE);
}

void LiveNoteTruncated(int slot) {
  if (g_live != nullptr) g_live->truncated[slot] = 1;
}

LiveReporter LiveBeforeRecord() {
  if (g_live == nullptr) return LiveReporter::kNone;
  if (live_fd < 0 || !LiveFdIsOurs()) {
    // The program closed our descriptor (a daemon closing every one): the
    // alive lock went with it, so the agent may have taken the run for
    // ended. The parts it announced decide; none: the record is ours.
    live_fd = -1;
    return __atomic_load_n(&g_live->parts, __ATOMIC_ACQUIRE) == 0 ? LiveReporter::kRuntime
                                                                  : LiveReporter::kAgent;
  }
  // Held until LiveRetire, or released here for the agent.
  const bool locked = SetLock(live_fd, F_WRLCK, kLiveReportByte, true);
  if (locked && __atomic_load_n(&g_live->parts, __ATOMIC_ACQUIRE) == 0) {
    return LiveReporter::kRuntime;
  }
  // Parts reported (or one being reported now): the rest is the agent's.
  __atomic_store_n(&g_live->state, kLiveEnded, __ATOMIC_RELEASE);
  if (locked) SetLock(live_fd, F_UNLCK, kLiveReportByte, false);
  return LiveReporter::kAgent;
}

void LiveRetire() {
  if (g_live == nullptr) return;
  __atomic_store_n(&g_live->state, kLiveRetired, __ATOMIC_RELEASE);
  sys::Unlink(live_path);
  // Closing the descriptor lets both locks go; the mapping stays (an
  // image going on after a failed exec still allocates through it).
  if (live_fd >= 0 && LiveFdIsOurs()) sys::Close(live_fd);
  live_fd = -1;
}

void LiveSeal() {
  LiveRetire();
  // Pages still unbacked fault in as written, without a system call: what
  // a measured call in flight writes after the seal reports nowhere.
  __atomic_store_n(&g_live, static_cast<LiveHeader*>(nullptr), __ATOMIC_RELEASE);
}

void LiveDiscard() {
  if (g_live == nullptr) return;
  if (live_fd >= 0 && LiveFdIsOurs()) SetLock(live_fd, F_WRLCK, kLiveReportByte, true);
  LiveRetire();
}

void LiveResumeAfterFailedExec() {
  if (g_live == nullptr || live_fd < 0 || !LiveFdIsOurs()) return;
  if (SetLock(live_fd, F_WRLCK, kLiveReportByte, true)) {
    __atomic_store_n(&g_live->state, kLiveRunning, __ATOMIC_RELEASE);
    SetLock(live_fd, F_UNLCK, kLiveReportByte, false);
  }
}

void* LiveOpenInForkChild(const RunSettings& s, const char* debug_log) {
  if (g_live == nullptr) return nullptr;
  // The parent's: its descriptor (whose locks are the parent's while it
  // lives) and its header, mapped shared, are not the child's to write.
  munmap(g_live, kLiveHeaderBytes);
  munmap(LiveSamplesOf(g_live), sizeof(LiveSamples));  // the child samples into its own
  g_live = nullptr;
  const int parent_fd = live_fd >= 0 && LiveFdIsOurs() ? live_fd : -1;
  live_fd = -1;
  for (uint32_t& b : g_live_metrics_backed) b = 0;
  void* m = Open(s, debug_log);
  if (m != nullptr) {
    LiveNoteClock();
    NoteBinder();
    if (parent_fd >= 0) CopyModuleNotes(parent_fd);
  }
  if (parent_fd >= 0) sys::Close(parent_fd);
  return m;
}

}  // namespace fieldprof::rt
