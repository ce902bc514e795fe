#include "tools/local/recording.h"

#include <elfutils/libdwfl.h>

#include <algorithm>
#include <cstring>
#include <filesystem>
#include <map>
#include <unordered_map>

#include "common/cxx_names.h"
#include "common/durable_file.h"
#include "tools/local/raw_format.h"
#include "tools/local/varint.h"

namespace fieldprof::local {

namespace {

constexpr char kMagic[] = "FPRECORDING1\n";
constexpr size_t kMagicSize = sizeof kMagic - 1;

struct RawModule {
  raw::ModuleHeader h;
  std::string path;
};

struct RawSample {
  raw::SampleHeader h;
  std::vector<uint64_t> ips;
};

struct RawProcess {
  raw::FileHeader header{};
  std::vector<RawModule> modules;
  std::vector<RawSample> samples;
  bool ended = false;
  raw::Trailer trailer{};
};

template <typename T>
bool Take(std::string_view* in, T* out) {
  if (in->size() < sizeof(T)) return false;
  std::memcpy(out, in->data(), sizeof(T));
  in->remove_prefix(sizeof(T));
  return true;
}

StatusOr<RawProcess> ReadRaw(const std::string& path) {
  FP_ASSIGN_OR_RETURN(std::string bytes, ReadWholeFile(path));
  std::string_view in = bytes;
  RawProcess p;
  if (!Take(&in, &p.header) || std::memcmp(p.header.magic, raw::kMagic, sizeof raw::kMagic) != 0) {
    return DataLoss(path + ": not a fieldprof record raw file");
  }
  while (!in.empty()) {
    const char tag = in.front();
    std::string_view rest = in.substr(1);
    if (tag == 'S') {
      RawSample s;
      if (!Take(&rest, &s.h) || s.h.depth > raw::kMaxFrames ||
          rest.size() < s.h.depth * sizeof(uint64_t)) {
        break;  // cut short
      }
      s.ips.resize(s.h.depth);
      std::memcpy(s.ips.data(), rest.data(), s.h.depth * sizeof(uint64_t));
      rest.remove_prefix(s.h.depth * sizeof(uint64_t));
      p.samples.push_back(std::move(s));
    } else if (tag == 'M') {
      RawModule m;
      if (!Take(&rest, &m.h) || rest.size() < m.h.path_len) break;
      m.path.assign(rest.data(), m.h.path_len);
      rest.remove_prefix(m.h.path_len);
      p.modules.push_back(std::move(m));
    } else if (tag == 'E') {
      if (!Take(&rest, &p.trailer)) break;
      p.ended = true;
    } else {
      break;  // damage: what came before stands
    }
    in = rest;
  }
  return p;
}

// Names for one process's addresses, from its modules.
class Symbolizer {
 public:
  explicit Symbolizer(const std::vector<RawModule>& modules) {
    static const Dwfl_Callbacks callbacks = {
        .find_elf = dwfl_build_id_find_elf,
        .find_debuginfo = dwfl_standard_find_debuginfo,
        .section_address = dwfl_offline_section_address,
        .debuginfo_path = nullptr,
    };
    dwfl_ = dwfl_begin(&callbacks);
    if (dwfl_ == nullptr) return;
    dwfl_report_begin(dwfl_);
    std::map<uint64_t, const RawModule*> latest;  // the last report of each load
    for (const RawModule& m : modules) latest[m.h.lo] = &m;
    for (const auto& [lo, m] : latest) {
      modules_.push_back(m);
      dwfl_report_elf(dwfl_, m->path.c_str(), m->path.c_str(), -1, m->h.bias, false);
    }
    dwfl_report_end(dwfl_, nullptr, nullptr);
  }
  ~Symbolizer() {
    if (dwfl_ != nullptr) dwfl_end(dwfl_);
  }
  Symbolizer(const Symbolizer&) = delete;
  Symbolizer& operator=(const Symbolizer&) = delete;

  // `return_address`: a caller's frame, whose call lies just before it.
  std::string Name(uint64_t ip, bool return_address) {
    const uint64_t at = return_address ? ip - 1 : ip;
    if (auto it = memo_.find(at); it != memo_.end()) return it->second;
    std::string name;
    if (dwfl_ != nullptr) {
      if (Dwfl_Module* mod = dwfl_addrmodule(dwfl_, at); mod != nullptr) {
        if (const char* sym = dwfl_module_addrname(mod, at); sym != nullptr) {
          std::string plain = sym;
          plain = plain.substr(0, plain.find('@'));  // "__libc_start_main@@GLIBC_2.34"
          name = Demangle(plain);
        } else {
          Dwarf_Addr start = 0;
          const char* mname =
              dwfl_module_info(mod, nullptr, &start, nullptr, nullptr, nullptr, nullptr, nullptr);
          char off[32];
          std::snprintf(off, sizeof off, "+0x%llx", static_cast<unsigned long long>(at - start));
          name = std::filesystem::path(mname != nullptr ? mname : "?").filename().string() + off;
        }
      }
    }
    if (name.empty()) {  // a module with no file (the vDSO): its name and offset
      for (const RawModule* m : modules_) {
        if (at >= m->h.lo && at < m->h.hi) {
          char off[32];
          std::snprintf(off, sizeof off, "+0x%llx",
                        static_cast<unsigned long long>(at - m->h.bias));
          name = std::filesystem::path(m->path).filename().string() + off;
          break;
        }
      }
    }
    if (name.empty()) {
      char hex[32];
      std::snprintf(hex, sizeof hex, "0x%llx", static_cast<unsigned long long>(at));
      name = hex;
    }
    memo_.emplace(at, name);
    return name;
  }

 private:
  Dwfl* dwfl_ = nullptr;
  std::vector<const RawModule*> modules_;
  std::unordered_map<uint64_t, std::string> memo_;
};

}  // namespace

StatusOr<Recording> RecordingFromRawDir(const std::string& dir, const TimeTreeOptions& options) {
  std::vector<std::string> files;
  std::error_code ec;
  for (const auto& e : std::filesystem::directory_iterator(dir, ec)) {
    if (e.path().extension() == ".raw") files.push_back(e.path().string());
  }
  if (ec) return IOError("cannot read " + dir + ": " + ec.message());
  std::sort(files.begin(), files.end());
  Recording r;
  std::vector<RawProcess> procs;
  for (const std::string& f : files) {
    StatusOr<RawProcess> p = ReadRaw(f);
    if (!p.ok()) continue;  // a file the sampler never got to write its header into
    procs.push_back(std::move(*p));
  }
  if (procs.empty()) return NotFound("no process was recorded (no raw files in " + dir + ")");
  r.start_ns = UINT64_MAX;
  uint64_t end = 0;
  for (const RawProcess& p : procs) {
    r.start_ns = std::min(r.start_ns, p.header.start_ns);
    r.hz = p.header.hz;
    r.wall = p.header.wall != 0;
    ++r.processes;
    if (p.ended) {
      end = std::max(end, p.trailer.end_ns);
      r.dropped += p.trailer.dropped;
      r.skipped += p.trailer.skipped;
    } else {
      ++r.processes_cut_short;
    }
    if (!p.samples.empty()) end = std::max(end, p.samples.back().h.time_ns);
  }
  r.duration_ns = end > r.start_ns ? end - r.start_ns : 0;
  // Intern frames, stacks, threads and (thread, stack) types.
  std::unordered_map<std::string, uint32_t> frame_ids;
  std::map<std::vector<uint32_t>, uint32_t> stack_ids;
  std::map<std::pair<uint32_t, uint32_t>, uint32_t> thread_ids, type_ids;
  std::vector<std::pair<uint64_t, uint32_t>> samples;  // (time, type)
  for (const RawProcess& p : procs) {
    Symbolizer sym(p.modules);
    const uint32_t pid = p.header.pid;
    for (const RawSample& s : p.samples) {
      std::vector<uint32_t> stack;
      stack.reserve(s.ips.size());
      for (size_t i = s.ips.size(); i-- > 0;) {  // outermost first
        const std::string name = sym.Name(s.ips[i], /*return_address=*/i > 0);
        auto [it, fresh] = frame_ids.emplace(name, static_cast<uint32_t>(r.frames.size()));
        if (fresh) r.frames.push_back(name);
        stack.push_back(it->second);
      }
      auto [st, new_stack] = stack_ids.emplace(stack, static_cast<uint32_t>(r.stacks.size()));
      if (new_stack) r.stacks.push_back(stack);
      auto [th, new_thread] =
          thread_ids.emplace(std::make_pair(pid, s.h.tid), static_cast<uint32_t>(r.threads.size()));
      if (new_thread) r.threads.push_back({pid, s.h.tid});
      auto [ty, new_type] = type_ids.emplace(std::make_pair(th->second, st->second),
                                             static_cast<uint32_t>(r.types.size()));
      if (new_type) r.types.emplace_back(th->second, st->second);
      const uint64_t t = s.h.time_ns >= r.start_ns ? s.h.time_ns - r.start_ns : 0;
      samples.emplace_back(t, ty->second);
    }
  }
  std::stable_sort(samples.begin(), samples.end(),
                   [](const auto& a, const auto& b) { return a.first < b.first; });
  std::vector<uint64_t> times(samples.size());
  std::vector<uint32_t> types(samples.size());
  for (size_t i = 0; i < samples.size(); ++i) {
    times[i] = samples[i].first;
    types[i] = samples[i].second;
  }
  FP_ASSIGN_OR_RETURN(r.tree, TimeTree::Build(std::move(times), std::move(types), options));
  return r;
}

std::string EncodeRecording(const Recording& r) {
  std::string out(kMagic, kMagicSize);
  PutString(&out, r.command);
  PutVarint(&out, r.hz);
  PutVarint(&out, r.wall ? 1 : 0);
  PutVarint(&out, r.start_ns);
  PutVarint(&out, r.duration_ns);
  PutVarint(&out, r.dropped);
  PutVarint(&out, r.skipped);
  PutVarint(&out, r.processes);
  PutVarint(&out, r.processes_cut_short);
  PutVarint(&out, r.frames.size());
  for (const std::string& f : r.frames) PutString(&out, f);
  PutVarint(&out, r.stacks.size());
  for (const auto& s : r.stacks) {
    PutVarint(&out, s.size());
    for (uint32_t f : s) PutVarint(&out, f);
  }
  PutVarint(&out, r.threads.size());
  for (const RecordedThread& t : r.threads) {
    PutVarint(&out, t.pid);
    PutVarint(&out, t.tid);
  }
  PutVarint(&out, r.types.size());
  for (const auto& [thread, stack] : r.types) {
    PutVarint(&out, thread);
    PutVarint(&out, stack);
  }
  out += r.tree.Encode();
  return out;
}

StatusOr<Recording> DecodeRecording(std::string_view in) {
  if (in.substr(0, kMagicSize) != std::string_view(kMagic, kMagicSize)) {
    return DataLoss("not a fieldprof recording");
  }
  in.remove_prefix(kMagicSize);
  Recording r;
  uint64_t hz = 0, wall = 0, procs = 0, cut = 0, n = 0;
  if (!GetString(&in, &r.command) || !GetVarint(&in, &hz) || !GetVarint(&in, &wall) ||
      !GetVarint(&in, &r.start_ns) || !GetVarint(&in, &r.duration_ns) ||
      !GetVarint(&in, &r.dropped) || !GetVarint(&in, &r.skipped) || !GetVarint(&in, &procs) ||
      !GetVarint(&in, &cut)) {
    return DataLoss("recording: truncated header");
  }
  r.hz = static_cast<uint32_t>(hz);
  r.wall = wall != 0;
  r.processes = static_cast<uint32_t>(procs);
  r.processes_cut_short = static_cast<uint32_t>(cut);
  auto bad = [](const char* what) { return DataLoss(std::string("recording: bad ") + what); };
  if (!GetVarint(&in, &n) || n > in.size()) return bad("frames");
  r.frames.resize(n);
  for (std::string& f : r.frames) {
    if (!GetString(&in, &f)) return bad("frames");
  }
  if (!GetVarint(&in, &n) || n > in.size()) return bad("stacks");
  r.stacks.resize(n);
  for (auto& s : r.stacks) {
    uint64_t depth = 0;
    if (!GetVarint(&in, &depth) || depth > in.size()) return bad("stacks");
    s.resize(depth);
    for (uint32_t& f : s) {
      uint64_t v = 0;
      if (!GetVarint(&in, &v) || v >= r.frames.size()) return bad("stacks");
      f = static_cast<uint32_t>(v);
    }
  }
  if (!GetVarint(&in, &n) || n > in.size()) return bad("threads");
  r.threads.resize(n);
  for (RecordedThread& t : r.threads) {
    uint64_t pid = 0, tid = 0;
    if (!GetVarint(&in, &pid) || !GetVarint(&in, &tid)) return bad("threads");
    t.pid = static_cast<uint32_t>(pid);
    t.tid = static_cast<uint32_t>(tid);
  }
  if (!GetVarint(&in, &n) || n > in.size()) return bad("types");
  r.types.resize(n);
  for (auto& [thread, stack] : r.types) {
    uint64_t a = 0, b = 0;
    if (!GetVarint(&in, &a) || !GetVarint(&in, &b) || a >= r.threads.size() ||
        b >= r.stacks.size()) {
      return bad("types");
    }
    thread = static_cast<uint32_t>(a);
    stack = static_cast<uint32_t>(b);
  }
  FP_ASSIGN_OR_RETURN(r.tree, TimeTree::Decode(in));
  for (uint32_t t : r.tree.types()) {
    if (t >= r.types.size()) return bad("samples");
  }
  return r;
}

}  // namespace fieldprof::local
