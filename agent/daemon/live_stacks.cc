#include "agent/daemon/live_stacks.h"

#include <fcntl.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstddef>
#include <cstring>
#include <map>
#include <memory>
#include <optional>
#include <tuple>

#include "agent/preload/runtime/records/live_layout.h"
#include "common/stacks/stack_folding.h"
#include "common/system/exported_symbols.h"
#include "common/wire/key_rules.h"
#include "common/wire/wire.h"

namespace fieldprof::agent {

namespace {

// A killed run's modules (stack_folding.h's Frames).
class FileFrames {
 public:
  explicit FileFrames(std::vector<rt::LiveModule> modules) : modules_(std::move(modules)) {
    symbols_.resize(modules_.size());
  }

  int32_t ObjectOf(uintptr_t a) const {
    // The latest module mapped there: a range freed by dlclose may have
    // been taken by another since.
    for (size_t i = modules_.size(); i-- > 0;) {
      const rt::LiveModule& m = modules_[i];
      if (a < m.lo || a >= m.hi) continue;
      return rt::FoldCode(m.kind, static_cast<int32_t>(i));
    }
    return stack_folding::kUnpackaged;
  }

  size_t FrameName(int32_t obj, uintptr_t a, char* out, size_t cap) {
    const rt::LiveModule& m = modules_[static_cast<size_t>(obj)];
    std::optional<ExportedSymbols>& syms = symbols_[static_cast<size_t>(obj)];
    if (!syms.has_value()) {
      syms.emplace();  // if it cannot be loaded (another build now): every frame by offset
      syms->Load(FixedField(m.path, sizeof m.path), FixedField(m.build_id, sizeof m.build_id));
    }
    if (const std::string* name = syms->At(a - m.base);
        name != nullptr && name->size() < cap && key_rules::SymbolOk(name->data(), name->size())) {
      std::memcpy(out, name->data(), name->size());
      return name->size();
    }
    return stack_folding::OffsetName(a - m.base, out);
  }

  const char* ModuleOf(int32_t obj) const { return modules_[static_cast<size_t>(obj)].module; }

  void Add(int32_t obj, const char* stack, uint64_t ns) {
    const rt::LiveModule& m = modules_[static_cast<size_t>(obj)];
    sums_[{m.module, FixedField(m.build_id, sizeof m.build_id), stack}] += ns;
  }

  std::map<std::tuple<std::string, std::string, std::string>, uint64_t>& sums() { return sums_; }

 private:
  std::vector<rt::LiveModule> modules_;
  std::vector<std::optional<ExportedSymbols>> symbols_;
  std::map<std::tuple<std::string, std::string, std::string>, uint64_t> sums_;
};

// A module entry as the fold may trust it: names that keep the key rules,
// a known kind; anything else is taken as a file whose frames are not kept.
rt::LiveModule Checked(const rt::LiveModule& in) {
  rt::LiveModule m = in;
  if (m.kind == 0) {  // being written when the run ended: holds no address
    m.lo = m.hi = 0;
    return m;
  }
  m.module[sizeof m.module - 1] = 0;
  m.build_id[sizeof m.build_id - 1] = 0;
  m.path[sizeof m.path - 1] = 0;
  const bool kept = m.kind == rt::kLiveModuleKept &&
                    key_rules::ModuleOk(m.module, strlen(m.module)) &&
                    key_rules::ModuleVersionOk(m.build_id, strlen(m.build_id)) && m.lo < m.hi;
  if (m.kind == rt::kLiveModuleKept && !kept) m.kind = rt::kLiveModuleOther;
  if (m.kind < rt::kLiveModuleKept || m.kind > rt::kLiveModuleOurs) m.kind = rt::kLiveModuleOther;
  return m;
}

}  // namespace

std::string FixedField(const char* p, size_t cap) { return std::string(p, strnlen(p, cap)); }

bool ReadAt(int fd, void* out, size_t n, size_t offset) {
  auto* p = static_cast<char*>(out);
  while (n > 0) {
    const ssize_t r = ::pread(fd, p, n, static_cast<off_t>(offset));
    if (r < 0 && errno == EINTR) continue;
    if (r <= 0) return false;
    p += r;
    n -= static_cast<size_t>(r);
    offset += static_cast<size_t>(r);
  }
  return true;
}

bool ReadLiveStacks(int fd, LiveStacks* out) {
  constexpr size_t kAt = rt::kLiveSamplesOffset;
  uint32_t head[2];
  if (!ReadAt(fd, head, sizeof head, kAt + offsetof(rt::LiveSamples, nmodules))) return false;
  static_assert(offsetof(rt::LiveSamples, folded) == offsetof(rt::LiveSamples, nmodules) + 4);
  out->folded = head[1] != 0;
  if (out->folded) return true;
  const uint32_t nmodules = std::min(head[0], rt::LiveSamples::kModules);
  std::vector<rt::LiveModule> modules(nmodules);
  if (nmodules > 0 && !ReadAt(fd, modules.data(), sizeof(rt::LiveModule) * nmodules,
                              kAt + offsetof(rt::LiveSamples, modules))) {
    return false;
  }
  for (rt::LiveModule& m : modules) m = Checked(m);
  uint64_t counts[2];  // samples, lost: a run never sampled has no table to read
  static_assert(offsetof(rt::StackTable, lost) == offsetof(rt::StackTable, samples) + 8);
  if (!ReadAt(fd, counts, sizeof counts,
              kAt + offsetof(rt::LiveSamples, table) + offsetof(rt::StackTable, samples))) {
    return false;
  }
  out->samples = counts[0];
  out->lost = counts[1];
  if (out->samples == 0) return true;
  auto table = std::make_unique<rt::StackTable>();
  if (!ReadAt(fd, table.get(), sizeof *table, kAt + offsetof(rt::LiveSamples, table))) {
    return false;
  }
  FileFrames frames(std::move(modules));
  for (const rt::StackEntry& e : table->e) {
    // Ready entries only: one being written when the run was killed is
    // not whole.
    if (e.state != 2 || e.depth == 0 || e.depth > static_cast<uint32_t>(rt::kStackDepth)) continue;
    stack_folding::FoldStack(frames, e.ips, e.depth, e.ns);
  }
  for (const auto& [key, ns] : frames.sums()) {
    out->stacks.push_back({std::get<0>(key), std::get<1>(key), std::get<2>(key), ns});
  }
  // As many as a run's own record holds: the dearest.
  if (out->stacks.size() > stack_folding::kMaxRunStacks) {
    std::stable_sort(out->stacks.begin(), out->stacks.end(),
                     [](const LiveStack& a, const LiveStack& b) { return a.ns > b.ns; });
    out->not_kept = out->stacks.size() - stack_folding::kMaxRunStacks;
    out->stacks.resize(stack_folding::kMaxRunStacks);
  }
  return true;
}

int AddLiveStackRecords(const LiveStacks& stacks, const Platform& platform, wire::RunRecord* rec) {
  int n = 0;
  for (const LiveStack& s : stacks.stacks) {
    if (s.ns == 0) continue;
    wire::Record* r = rec->add_records();
    wire::ApiKey* k = r->mutable_key();
    k->set_module(s.module);
    k->set_module_version(s.build_id);
    k->set_symbol(s.stack);
    k->set_metric(wire::METRIC_STACK_CPU_NS);
    PlatformToWire(platform, k->mutable_platform());
    Histogram h;
    h.Record(s.ns);
    HistogramToWire(h, r->mutable_histogram());
    r->set_runs(1);
    ++n;
  }
  return n;
}

}  // namespace fieldprof::agent
