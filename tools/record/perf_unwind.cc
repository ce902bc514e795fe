// UnwindPerfSamples (perf_sampler.h): the copied rings of the outside
// sampler, in time order, into one raw file per process image, each
// sample's stack unwound through its process's modules as they were mapped
// at that moment (elfutils' libdwfl, given the copied registers and stack
// instead of a live process).
#include <elfutils/libdwfl.h>
#include <fcntl.h>
#include <gelf.h>
#include <linux/perf_event.h>
#include <sys/mman.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <map>
#include <mutex>
#include <string>
#include <unordered_map>
#include <unordered_set>

#include "common/stacks/sampler_format.h"
#include "common/wire/wire.h"
#include "tools/record/perf_records.h"
#include "tools/record/perf_sampler.h"
#include "tools/shared/symbolizer.h"

namespace fieldprof::tools {

namespace {

// The time a non-sample record carries at its end (sample_id_all with
// TID, TIME and CPU: pid, tid, time, cpu, reserved).
uint64_t TrailerTime(const char* rec, uint16_t size) {
  if (size < sizeof(perf_event_header) + 24) return 0;
  uint64_t t = 0;
  std::memcpy(&t, rec + size - 16, 8);
  return t;
}

// Where a file's mapping at `pgoff` puts its ELF addresses: from the
// loadable segment the offset falls in.
uint64_t BiasOf(const std::string& path, uint64_t addr, uint64_t pgoff) {
  static std::unordered_map<std::string, std::vector<GElf_Phdr>> cache;
  auto it = cache.find(path);
  if (it == cache.end()) {
    std::vector<GElf_Phdr> loads;
    const int fd = open(path.c_str(), O_RDONLY | O_CLOEXEC);
    if (fd >= 0) {
      elf_version(EV_CURRENT);
      if (Elf* e = elf_begin(fd, ELF_C_READ_MMAP, nullptr); e != nullptr) {
        size_t n = 0;
        if (elf_getphdrnum(e, &n) == 0) {
          for (size_t i = 0; i < n; ++i) {
            GElf_Phdr ph;
            if (gelf_getphdr(e, static_cast<int>(i), &ph) != nullptr && ph.p_type == PT_LOAD) {
              loads.push_back(ph);
            }
          }
        }
        elf_end(e);
      }
      close(fd);
    }
    it = cache.emplace(path, std::move(loads)).first;
  }
  for (const GElf_Phdr& ph : it->second) {
    const uint64_t page_off = ph.p_offset & ~uint64_t{4095};
    if (pgoff >= page_off && pgoff < ph.p_offset + std::max(ph.p_filesz, uint64_t{1})) {
      return addr - (ph.p_vaddr - ph.p_offset + pgoff);
    }
  }
  return addr - pgoff;
}

// The pid the kernel gives a record of a task already dead: the last
// switch off its CPU, which the events on a cgroup (command_cgroup.h) see
// and the task's own events, gone with it, do not.
constexpr uint32_t kDeadTask = 0xffffffffu;

// One process image: a process from its start or exec to its exit or next
// exec.
struct Image {
  uint32_t pid = 0;
  uint64_t start_ns = 0, end_ns = 0;
  bool ended = false;
  bool replaced = false;  // the same process exec'd: the next image goes on
  std::vector<LoadedModule> modules;
  std::string samples;  // its 'S' records, and with the waits its 'W' and 'B'
  uint64_t sample_count = 0;
  uint64_t wait_count = 0;  // switches off the CPU that were no preemption
  // Each thread's next switch record's position: one stream per thread,
  // numbered by its id (the in-program sampler numbers a ring per thread).
  std::unordered_map<uint32_t, uint64_t> switch_pos;
  // Each thread's last switch off the CPU ('W', and 'B' with its stack),
  // held until it comes back: one that has not when the thread's exit is
  // recorded is no wait of the program's (the exit record drops it), nor
  // is a switch recorded after its exit (the thread's last, as it ends:
  // seen under load, where it left the two counts of a ping-pong player
  // one apart). A thread made again with the same id is watched again.
  std::unordered_map<uint32_t, std::string> open_wait;
  std::unordered_set<uint32_t> exited;
  // Each thread's last switch: off the CPU (true) or onto it. Two in the
  // same direction mean the kernel's record of the switch between them is
  // missing, lost to a full ring; a loss it never told (it tells one with
  // the ring's next record, and a CPU's ring may get none after) shows
  // only so. Counted as switch records lost, one a gap.
  std::unordered_map<uint32_t, bool> last_out;
  uint64_t switches_lost = 0;

  void AddSwitchRecords(uint32_t tid, const std::string& records, bool out) {
    auto [last, fresh] = last_out.try_emplace(tid, out);
    if (!fresh && last->second == out) ++switches_lost;
    last->second = out;
    auto held = open_wait.find(tid);
    if (held != open_wait.end()) {  // an earlier switch off, whatever follows
      samples += held->second;
      open_wait.erase(held);
    }
    if (out) {
      open_wait[tid] = records;
    } else {
      samples += records;
    }
  }
  // What is still held: switches off the CPU of threads still waiting
  // when the recording ended.
  void ReleaseOpenWaits() {
    for (const auto& [tid, records] : open_wait) samples += records;
    open_wait.clear();
  }

  Dwfl* dwfl = nullptr;
  bool attach_failed = false;
  size_t reported = 0;  // modules given to dwfl so far
  const SampleView* current = nullptr;

  // Ended: its libdwfl session, which holds each module's file open, is
  // let go (a browser's dozens of processes would hold thousands).
  void End(uint64_t t) {
    ended = true;
    end_ns = t;
    if (dwfl != nullptr) dwfl_end(dwfl);
    dwfl = nullptr;
  }

  ~Image() {
    if (dwfl != nullptr) dwfl_end(dwfl);
  }
};

pid_t NextThread(Dwfl*, void* arg, void** thread_arg) {
  if (*thread_arg != nullptr) return 0;
  *thread_arg = arg;
  return static_cast<pid_t>(static_cast<Image*>(arg)->current->tid);
}

bool GetThread(Dwfl*, pid_t, void* arg, void** thread_arg) {
  *thread_arg = arg;
  return true;
}

bool MemoryRead(Dwfl*, Dwarf_Addr addr, Dwarf_Word* result, void* arg) {
  const SampleView* s = static_cast<Image*>(arg)->current;
  const uint64_t sp = s->dwarf[7];
  if (s->stack == nullptr || addr < sp || addr + 8 > sp + s->stack_size) return false;
  std::memcpy(result, s->stack + (addr - sp), 8);
  return true;
}

bool SetInitialRegisters(Dwfl_Thread* thread, void* arg) {
  const SampleView* s = static_cast<Image*>(arg)->current;
  Dwarf_Word regs[kDwarfRegs];
  for (int i = 0; i < kDwarfRegs; ++i) regs[i] = s->dwarf[i];
  return dwfl_thread_state_registers(thread, 0, kDwarfRegs, regs);
}

const Dwfl_Thread_Callbacks kThreadCallbacks = {
    .next_thread = NextThread,
    .get_thread = GetThread,
    .memory_read = MemoryRead,
    .set_initial_registers = SetInitialRegisters,
    .detach = nullptr,
    .thread_detach = nullptr,
};

// Whether the ELF file open at `fd` holds CFI of its own (a .debug_frame
// with contents): section headers only, nothing inflated.
bool HasDebugFrame(int fd) {
  elf_version(EV_CURRENT);
  Elf* elf = elf_begin(fd, ELF_C_READ_MMAP, nullptr);
  if (elf == nullptr) return false;
  size_t names = 0;
  bool found = false;
  if (elf_getshdrstrndx(elf, &names) == 0) {
    for (Elf_Scn* scn = elf_nextscn(elf, nullptr); scn != nullptr && !found;
         scn = elf_nextscn(elf, scn)) {
      GElf_Shdr sh;
      if (gelf_getshdr(scn, &sh) == nullptr || sh.sh_type == SHT_NOBITS || sh.sh_size == 0)
        continue;
      const char* name = elf_strptr(elf, names, sh.sh_name);
      found = name != nullptr && std::strcmp(name, ".debug_frame") == 0;
    }
  }
  elf_end(elf);
  return found;
}

// A separate debug file only where it has CFI of its own. libdwfl asks
// for one's .debug_frame wherever a module's .eh_frame has nothing for a
// frame, which is at the end of nearly every stack, and opening one
// inflates all of its compressed DWARF (Debian's libc6-dbg: 4 MB) once
// per process image: 73% of record's work after the 200 short processes
// of bench-record.sh, for no frame (docs/record.md). Debian's debug files
// (/usr/lib/debug/.build-id/) have no .debug_frame as a rule, their
// code's CFI being in .eh_frame: such a file is let go unopened (asking
// libdwfl's own search would open it into the module whatever this
// answered). One with a .debug_frame, or one found otherwise (a
// .gnu_debuglink), is used. The names of the frames come from the debug
// files all the same (Symbolizer). Which files have CFI is kept by path.
int DebugFileWithCfi(Dwfl_Module* mod, void** userdata, const char* modname, Dwarf_Addr base,
                     const char* file_name, const char* debuglink_file, GElf_Word debuglink_crc,
                     char** debuginfo_file_name) {
  const unsigned char* id = nullptr;
  GElf_Addr id_vaddr = 0;
  const int id_len = dwfl_module_build_id(mod, &id, &id_vaddr);
  if (id_len > 1) {
    const std::string hex =
        HexEncode(std::string_view(reinterpret_cast<const char*>(id), static_cast<size_t>(id_len)));
    const std::string path =
        "/usr/lib/debug/.build-id/" + hex.substr(0, 2) + "/" + hex.substr(2) + ".debug";
    static std::mutex mu;
    static std::unordered_map<std::string, bool> has_cfi;
    std::lock_guard lock(mu);
    auto it = has_cfi.find(path);
    if (it == has_cfi.end()) {
      const int fd = open(path.c_str(), O_RDONLY | O_CLOEXEC);
      // No file by its build id: whatever libdwfl finds (below).
      if (fd >= 0) {
        it = has_cfi.emplace(path, HasDebugFrame(fd)).first;
        close(fd);
      }
    }
    if (it != has_cfi.end() && !it->second) return -1;
  }
  return dwfl_standard_find_debuginfo(mod, userdata, modname, base, file_name, debuglink_file,
                                      debuglink_crc, debuginfo_file_name);
}

const Dwfl_Callbacks kOfflineCallbacks = {
    .find_elf = dwfl_build_id_find_elf,
    .find_debuginfo = DebugFileWithCfi,
    .section_address = dwfl_offline_section_address,
    .debuginfo_path = nullptr,
};

void ReportNew(Image& im) {
  for (; im.reported < im.modules.size(); ++im.reported) {
    const LoadedModule& m = im.modules[im.reported];
    // A file mapped executable again elsewhere (node maps its own text a
    // second time): libdwfl keeps the first (see Symbolizer).
    bool again = false;
    for (size_t i = 0; i < im.reported; ++i) again |= im.modules[i].path == m.path;
    if (again) continue;
    const int fd = IsVdso(m.path) ? VdsoImageFd() : -1;
    dwfl_report_elf(im.dwfl, m.path.c_str(), m.path.c_str(), fd, m.bias, false);
  }
}

struct FrameCollector {
  std::vector<uint64_t>* ips;
};

int OnFrame(Dwfl_Frame* state, void* arg) {
  auto* c = static_cast<FrameCollector*>(arg);
  Dwarf_Addr pc = 0;
  bool activation = false;
  if (!dwfl_frame_pc(state, &pc, &activation)) return DWARF_CB_ABORT;
  if (pc == 0) return DWARF_CB_ABORT;
  c->ips->push_back(pc);
  return c->ips->size() >= raw::kMaxFrames ? DWARF_CB_ABORT : DWARF_CB_OK;
}

// The sample's stack, innermost first: its interrupted instruction, then
// return addresses.
void Unwind(Image& im, const SampleView& s, std::vector<uint64_t>* ips) {
  ips->clear();
  if (!s.has_regs) {
    ips->push_back(s.ip);
    return;
  }
  if (im.dwfl == nullptr && !im.attach_failed && !im.modules.empty()) {
    im.dwfl = dwfl_begin(&kOfflineCallbacks);
    if (im.dwfl != nullptr) {
      dwfl_report_begin(im.dwfl);
      ReportNew(im);
      dwfl_report_end(im.dwfl, nullptr, nullptr);
      im.current = &s;
      if (!dwfl_attach_state(im.dwfl, nullptr, static_cast<pid_t>(im.pid), &kThreadCallbacks,
                             &im)) {
        im.attach_failed = true;
      }
    } else {
      im.attach_failed = true;
    }
  }
  if (im.dwfl == nullptr || im.attach_failed) {
    ips->push_back(s.dwarf[16]);
    return;
  }
  if (im.reported < im.modules.size()) {
    dwfl_report_begin_add(im.dwfl);
    ReportNew(im);
    dwfl_report_end(im.dwfl, nullptr, nullptr);
  }
  im.current = &s;
  FrameCollector c{ips};
  dwfl_getthread_frames(im.dwfl, static_cast<pid_t>(s.tid), OnFrame, &c);
  if (ips->empty()) ips->push_back(s.dwarf[16]);
}

struct Entry {
  uint64_t time;
  const char* rec;
};

// A mapped file, unmapped when done.
struct Mapped {
  void* p = MAP_FAILED;
  size_t n = 0;
  ~Mapped() {
    if (p != MAP_FAILED) munmap(p, n);
  }
};

// Every record of the .perf files in `dir`, mapped (into `files`), with
// its time, in time order.
Status ReadRecords(const std::string& dir, std::vector<std::unique_ptr<Mapped>>* files,
                   std::vector<Entry>* entries) {
  namespace fs = std::filesystem;
  std::error_code ec;
  for (const auto& e : fs::directory_iterator(dir, ec)) {
    if (e.path().extension() != ".perf") continue;
    const int fd = open(e.path().c_str(), O_RDONLY | O_CLOEXEC);
    if (fd < 0) continue;
    struct stat st {};
    auto m = std::make_unique<Mapped>();
    if (fstat(fd, &st) == 0 && st.st_size > 0) {
      m->n = static_cast<size_t>(st.st_size);
      m->p = mmap(nullptr, m->n, PROT_READ, MAP_PRIVATE, fd, 0);
    }
    close(fd);
    if (m->p == MAP_FAILED) continue;
    const char* base = static_cast<const char*>(m->p);
    for (size_t at = 0; at + sizeof(perf_event_header) <= m->n;) {
      perf_event_header h;
      std::memcpy(&h, base + at, sizeof h);
      if (h.size < sizeof h || at + h.size > m->n) break;  // cut short
      const char* rec = base + at;
      uint64_t t = 0;
      if (h.type == PERF_RECORD_SAMPLE) {
        if (h.size >= sizeof h + 24) std::memcpy(&t, rec + sizeof h + 16, 8);  // ip, pid/tid, time
      } else {
        t = TrailerTime(rec, h.size);
      }
      entries->push_back({t, rec});
      at += h.size;
    }
    files->push_back(std::move(m));
  }
  if (ec) return IOError("cannot read " + dir + ": " + ec.message());
  std::stable_sort(entries->begin(), entries->end(),
                   [](const Entry& a, const Entry& b) { return a.time < b.time; });
  return Status();
}

// The process images the records describe, in the order they began.
struct Images {
  std::vector<std::unique_ptr<Image>> all;
  std::unordered_map<uint32_t, Image*> live;  // by pid: its current image
  // By thread: its last context-switch sample, until the switch record
  // that follows it says whether the thread left to wait.
  std::unordered_map<uint32_t, SampleView> switch_sample;

  // A new image of `pid` from `t`: a fork's copies `from`'s mappings; the
  // image it replaces ends (by exec, when `exec`).
  Image* Begin(uint32_t pid, uint64_t t, const Image* from, bool exec) {
    auto im = std::make_unique<Image>();
    im->pid = pid;
    im->start_ns = t;
    if (from != nullptr) im->modules = from->modules;
    Image* p = im.get();
    all.push_back(std::move(im));
    if (auto it = live.find(pid); it != live.end() && it->second != nullptr && !it->second->ended) {
      it->second->End(t);
      it->second->replaced = exec;
    }
    live[pid] = p;
    return p;
  }
  Image* Of(uint32_t pid, uint64_t t) {
    auto it = live.find(pid);
    return it != live.end() ? it->second : Begin(pid, t, nullptr, false);
  }
};

// A sample, unwound, onto its image's raw samples.
void OnSample(const Entry& e, const perf_event_header& h, Images* images,
              std::vector<uint64_t>* ips_out, PerfUnwindSummary* sum) {
  std::vector<uint64_t>& ips = *ips_out;
  SampleView s;
  if (!ParseSample(e.rec, h.size, &s)) return;
  if (s.pid == kDeadTask) return;
  if (s.period == 1) {  // a context switch's (perf_records.h), not CPU time
    images->switch_sample[s.tid] = s;
    return;
  }
  Image* im = images->Of(s.pid, s.time);
  Unwind(*im, s, &ips);
  ++sum->samples;
  if (ips.size() > 1) ++sum->unwound;
  raw::SampleHeader sh{};
  sh.time_ns = s.time;
  sh.tid = s.tid;
  sh.cpu = static_cast<uint16_t>(s.cpu);
  sh.depth = static_cast<uint16_t>(ips.size());
  // The task clock's ns since the thread's previous sample (on the
  // command's cgroup: since the CPU's previous one for any of its threads).
  sh.weight_ns = s.period;
  im->samples.push_back('S');
  im->samples.append(reinterpret_cast<const char*>(&sh), sizeof sh);
  im->samples.append(reinterpret_cast<const char*>(ips.data()), ips.size() * sizeof(uint64_t));
  ++im->sample_count;
}

// A thread's switch off or onto a CPU (with the waits from outside): a
// 'W' record in its image's file, and for a switch off that was no
// preemption a 'B' record with the stack it waited at, unwound from the
// context-switch sample the kernel wrote just before.
void OnSwitch(const Entry& e, const perf_event_header& h, Images* images,
              std::vector<uint64_t>* ips) {
  if (h.size < sizeof h + 24) return;
  uint32_t pid = 0, tid = 0, cpu = 0;
  std::memcpy(&pid, e.rec + h.size - 24, 4);  // sample_id_all: pid, tid, time, cpu
  std::memcpy(&tid, e.rec + h.size - 20, 4);
  std::memcpy(&cpu, e.rec + h.size - 8, 4);
  if (pid == kDeadTask) return;
  Image* im = images->Of(pid, e.time);
  // The scheduler writes a switch's sample and then its record, on one
  // CPU: a sample from elsewhere or later is an earlier switch's whose
  // record was lost, not this one's.
  SampleView s;
  bool sampled = false;
  if (const auto pending = images->switch_sample.find(tid);
      pending != images->switch_sample.end()) {
    s = pending->second;
    sampled = s.cpu == cpu && s.time <= e.time;
    images->switch_sample.erase(pending);
  }
  if (im->exited.count(tid) != 0) return;
  raw::Switch w{};
  w.time_ns = e.time;
  w.pos = im->switch_pos[tid]++;
  w.ring = tid;
  w.tid = tid;
  w.cpu = static_cast<uint16_t>(cpu);
  w.out = (h.misc & PERF_RECORD_MISC_SWITCH_OUT) != 0 ? 1 : 0;
  w.preempt = (h.misc & PERF_RECORD_MISC_SWITCH_OUT_PREEMPT) != 0 ? 1 : 0;
  std::string records(1, 'W');
  records.append(reinterpret_cast<const char*>(&w), sizeof w);
  const bool wait = w.out != 0 && w.preempt == 0;
  if (wait) ++im->wait_count;
  if (wait && sampled) {
    Unwind(*im, s, ips);
    raw::BlockedHeader b{};
    b.from = w.pos;
    b.to = w.pos + 1;
    b.ring = tid;
    b.tid = tid;
    b.depth = static_cast<uint16_t>(ips->size());
    records.push_back('B');
    records.append(reinterpret_cast<const char*>(&b), sizeof b);
    records.append(reinterpret_cast<const char*>(ips->data()), ips->size() * sizeof(uint64_t));
  }
  im->AddSwitchRecords(tid, records, w.out != 0);
}

// A mapping of a file (or the vDSO) into its image's modules.
void OnMmap(const Entry& e, const perf_event_header& h, Images* images) {
  const char* p = e.rec + sizeof h;
  const char* end = e.rec + h.size;
  uint32_t pid = 0, tid = 0;
  uint64_t addr = 0, len = 0, pgoff = 0;
  if (!ReadField(p, end, &pid) || !ReadField(p, end, &tid) || !ReadField(p, end, &addr) ||
      !ReadField(p, end, &len) || !ReadField(p, end, &pgoff)) {
    return;
  }
  if (h.type == PERF_RECORD_MMAP2) p += 4 + 4 + 8 + 8 + 4 + 4;  // maj min ino gen prot flags
  if (p >= end) return;
  const std::string path(p, strnlen(p, static_cast<size_t>(end - p)));
  // JIT code and other anonymous memory ("//anon", "[anon:...]"):
  // named from perf maps when symbolised, not a module.
  if (path.empty() || path.rfind("//", 0) == 0 || (path[0] != '/' && !IsVdso(path))) return;
  Image* im = images->Of(pid, e.time);
  const uint64_t bias = IsVdso(path) ? addr - pgoff : BiasOf(path, addr, pgoff);
  bool known = false;
  for (const LoadedModule& m : im->modules) known |= m.path == path && m.bias == bias;
  if (!known) im->modules.push_back({path, bias, addr, addr + len});
}

// One record replayed onto the images.
void Replay(const Entry& e, Images* images, std::vector<uint64_t>* ips, PerfUnwindSummary* sum) {
  perf_event_header h;
  std::memcpy(&h, e.rec, sizeof h);
  const char* p = e.rec + sizeof h;
  const char* end = e.rec + h.size;
  switch (h.type) {
    case PERF_RECORD_SAMPLE:
      OnSample(e, h, images, ips, sum);
      break;
    case PERF_RECORD_MMAP:
    case PERF_RECORD_MMAP2:
      OnMmap(e, h, images);
      break;
    case PERF_RECORD_SWITCH:
    case PERF_RECORD_SWITCH_CPU_WIDE:  // sampled on the command's cgroup (command_cgroup.h)
      OnSwitch(e, h, images, ips);
      break;
    case PERF_RECORD_COMM: {
      uint32_t pid = 0, tid = 0;
      if (!ReadField(p, end, &pid) || !ReadField(p, end, &tid)) break;
      if ((h.misc & PERF_RECORD_MISC_COMM_EXEC) != 0) images->Begin(pid, e.time, nullptr, true);
      break;
    }
    case PERF_RECORD_FORK: {
      uint32_t pid = 0, ppid = 0, tid = 0;
      if (!ReadField(p, end, &pid) || !ReadField(p, end, &ppid) || !ReadField(p, end, &tid)) break;
      if (pid != ppid) {
        auto parent = images->live.find(ppid);
        images->Begin(pid, e.time, parent != images->live.end() ? parent->second : nullptr, false);
      } else if (auto it = images->live.find(pid); it != images->live.end()) {
        it->second->exited.erase(tid);  // a new thread, perhaps with an old one's id
        it->second->last_out.erase(tid);
      }
      break;
    }
    case PERF_RECORD_EXIT: {
      uint32_t pid = 0, ppid = 0, tid = 0;
      if (!ReadField(p, end, &pid) || !ReadField(p, end, &ppid) || !ReadField(p, end, &tid)) break;
      if (auto it = images->live.find(pid); it != images->live.end()) {
        it->second->open_wait.erase(tid);
        it->second->exited.insert(tid);
      }
      if (pid == tid) {
        if (auto it = images->live.find(pid); it != images->live.end() && !it->second->ended) {
          it->second->End(e.time);
        }
      }
      break;
    }
    case PERF_RECORD_LOST: {
      uint64_t id = 0, lost = 0;
      if (ReadField(p, end, &id) && ReadField(p, end, &lost)) sum->lost += lost;
      break;
    }
    default:
      break;
  }
}

// Each image as a raw file of the in-program sampler's format.
Status WriteImages(const Images& images, const std::string& out_dir, uint32_t hz, bool kernel_time,
                   bool idle, PerfUnwindSummary* sum_out) {
  PerfUnwindSummary& sum = *sum_out;
  std::map<uint32_t, int> generation;
  bool lost_told = false;
  for (const auto& im : images.all) {
    const int n = generation[im->pid]++;
    // A process that ran and was never sampled (a short one, or one that
    // slept, with user time only) is recorded with no samples; the
    // image a process left by exec'ing without a sample or a wait is not
    // a process (a fork child on its way to exec, preempted perhaps), nor
    // is one that exec'd with no module known: the command before its
    // exec, sampled on its cgroup (command_cgroup.h) as fieldprof record
    // lets it go, with nothing to name its code by.
    if (im->sample_count == 0 && im->wait_count == 0 && (im->replaced || im->modules.empty())) {
      continue;
    }
    if (im->replaced && im->modules.empty()) {
      sum.samples -= std::min<uint64_t>(sum.samples, im->sample_count);
      continue;
    }
    ++sum.processes;
    raw::FileHeader fh{};
    std::memcpy(fh.magic, raw::kMagic, sizeof fh.magic);
    fh.pid = im->pid;
    fh.hz = hz;
    fh.start_ns = im->start_ns;
    fh.source = PerfSampleSource(kernel_time);
    fh.idle = idle ? 1 : 0;
    std::string out(reinterpret_cast<const char*>(&fh), sizeof fh);
    for (const LoadedModule& m : im->modules) {
      raw::ModuleHeader mh{};
      mh.bias = m.bias;
      mh.lo = m.lo;
      mh.hi = m.hi;
      mh.path_len = static_cast<uint16_t>(std::min<size_t>(m.path.size(), 65535));
      out.push_back('M');
      out.append(reinterpret_cast<const char*>(&mh), sizeof mh);
      out.append(m.path.data(), mh.path_len);
    }
    out += im->samples;
    if (im->ended) {
      raw::Trailer t{};
      t.end_ns = im->end_ns;
      if (!lost_told) t.dropped = sum.lost;
      t.switches_lost = im->switches_lost;
      lost_told = true;
      out.push_back('E');
      out.append(reinterpret_cast<const char*>(&t), sizeof t);
    }
    const std::string path =
        out_dir + "/perf-" + std::to_string(im->pid) + "-" + std::to_string(n) + ".raw";
    // Scratch, read back at once: no fsync (hundreds of short processes).
    FILE* f = std::fopen(path.c_str(), "we");
    if (f == nullptr || std::fwrite(out.data(), 1, out.size(), f) != out.size()) {
      if (f != nullptr) std::fclose(f);
      return IOError("cannot write " + path + ": " + std::strerror(errno));
    }
    if (std::fclose(f) != 0) return IOError("cannot write " + path + ": " + std::strerror(errno));
  }
  return Status();
}

}  // namespace

StatusOr<PerfUnwindSummary> UnwindPerfSamples(const std::string& dir, const std::string& out_dir,
                                              uint32_t hz, bool kernel_time, bool idle) {
  // libdwfl holds each module of a live process image open: as many
  // descriptors as the hard limit allows (the command has ended, so
  // nothing inherits it).
  if (rlimit rl{}; getrlimit(RLIMIT_NOFILE, &rl) == 0 && rl.rlim_cur < rl.rlim_max) {
    rl.rlim_cur = rl.rlim_max;
    setrlimit(RLIMIT_NOFILE, &rl);
  }
  std::vector<std::unique_ptr<Mapped>> files;
  std::vector<Entry> entries;
  FP_RETURN_IF_ERROR(ReadRecords(dir, &files, &entries));
  PerfUnwindSummary sum;
  Images images;
  std::vector<uint64_t> ips;
  for (const Entry& e : entries) Replay(e, &images, &ips, &sum);
  for (const auto& im : images.all) im->ReleaseOpenWaits();
  FP_RETURN_IF_ERROR(WriteImages(images, out_dir, hz, kernel_time, idle, &sum));
  return sum;
}

}  // namespace fieldprof::tools
