#include "common/stacks/field_stacks.h"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <map>
#include <set>

#include "common/base/json_writer.h"
#include "common/wire/key_rules.h"

namespace fieldprof {

namespace {

// Calls `f` with each frame of a stack series' symbol, outermost first.
template <typename F>
void ForEachFrame(std::string_view symbol, F&& f) {
  size_t start = 0;
  for (size_t i = 0; i <= symbol.size(); ++i) {
    if (i < symbol.size() && symbol[i] != key_rules::kStackSeparator) continue;
    f(symbol.substr(start, i - start));
    start = i + 1;
  }
}

}  // namespace

std::vector<std::string> SplitStack(std::string_view symbol) {
  std::vector<std::string> out;
  ForEachFrame(symbol, [&](std::string_view f) { out.emplace_back(f); });
  return out;
}

bool IsStackMark(std::string_view frame) {
  return frame.size() >= 3 && frame.front() == '[' && frame.back() == ']';
}

FieldStacksBuilder::FieldStacksBuilder(std::string module, bool keep_per_run, bool split_frames)
    : keep_per_run_(keep_per_run), split_frames_(split_frames) {
  out_.module = std::move(module);
}

void FieldStacksBuilder::Add(const std::string& symbol, const std::string& version,
                             const Histogram& h, uint64_t runs, uint64_t machines) {
  AddAs(symbol, nullptr, version, h, runs, machines);
}

void FieldStacksBuilder::Add(std::string&& symbol, const std::string& version, const Histogram& h,
                             uint64_t runs, uint64_t machines) {
  AddAs(symbol, &symbol, version, h, runs, machines);
}

void FieldStacksBuilder::AddAs(const std::string& symbol, std::string* take,
                               const std::string& version, const Histogram& h, uint64_t runs,
                               uint64_t machines) {
  // A store walks its series in key order, where a stack's versions and
  // platforms are neighbours: while the symbols come in order, the last
  // stack is the only one a series can add to, and no index is needed. The
  // first one out of order (a folded "[other]" after the walk, a caller's
  // own order) indexes every stack so far, and the index takes over.
  FieldStack* st = nullptr;
  if (!stacks_.empty() && stacks_.back().symbol == symbol) {
    st = &stacks_.back();
  } else if (in_order_ && (stacks_.empty() || stacks_.back().symbol < symbol)) {
    st = NewStack(symbol, take, /*index=*/false);
  } else {
    if (in_order_) {
      in_order_ = false;
      by_symbol_.reserve(stacks_.size() * 2);
      for (FieldStack& known : stacks_) by_symbol_.emplace(known.symbol, &known);
    }
    if (auto it = by_symbol_.find(symbol); it != by_symbol_.end()) {
      st = it->second;
    } else {
      st = NewStack(symbol, take, /*index=*/true);
    }
  }
  st->ns += static_cast<uint64_t>(h.sum());
  st->runs += runs;
  st->machines = std::max(st->machines, machines);
  if (keep_per_run_) {
    if (!st->per_run) st->per_run = std::make_shared<Histogram>();
    st->per_run->Merge(h);
  }
  if (versions_.empty() || version != last_version_) {
    if (versions_.insert(version).second) out_.versions.push_back(version);
    last_version_ = version;
  }
  out_.machines = std::max(out_.machines, machines);
}

FieldStack* FieldStacksBuilder::NewStack(const std::string& symbol, std::string* take, bool index) {
  FieldStack* st = &stacks_.emplace_back();
  if (take != nullptr) {
    st->symbol = std::move(*take);  // `symbol` is *take: not read again
  } else {
    st->symbol = symbol;
  }
  if (split_frames_) st->frames = SplitStack(st->symbol);
  if (index) by_symbol_.emplace(st->symbol, st);
  return st;
}

FieldStacks FieldStacksBuilder::Finish(size_t dearest) {
  std::sort(out_.versions.begin(), out_.versions.end());
  by_symbol_.clear();
  // The dearest first; equal ones by their frames (their symbol: the frames
  // joined, which orders them alike but where a frame is a prefix of
  // another's), so the order is the same whatever order the series came in.
  // Sorted as pointers, each stack moved once.
  std::vector<FieldStack*> order;
  order.reserve(stacks_.size());
  for (FieldStack& st : stacks_) {
    out_.total_ns += st.ns;
    order.push_back(&st);
  }
  const auto dearer = [](const FieldStack* a, const FieldStack* b) {
    return a->ns != b->ns ? a->ns > b->ns : a->symbol < b->symbol;
  };
  if (dearest < order.size()) {
    std::partial_sort(order.begin(), order.begin() + static_cast<ptrdiff_t>(dearest), order.end(),
                      dearer);
  } else {
    std::sort(order.begin(), order.end(), dearer);
  }
  out_.stacks.reserve(order.size());
  for (FieldStack* st : order) out_.stacks.push_back(std::move(*st));
  stacks_.clear();
  return std::move(out_);
}

FieldStacks BuildFieldStacks(const std::string& module, const std::vector<SeriesSum>& series,
                             const ModelFilter& filter) {
  FieldStacksBuilder b(module, /*keep_per_run=*/true);
  for (const SeriesSum& s : series) {
    if (s.key.module() != module || s.key.metric() != wire::METRIC_STACK_CPU_NS) continue;
    if (!SeriesMatches(s, filter)) continue;
    b.Add(s.key.symbol(), s.key.module_version(), s.histogram, s.runs, s.machines);
  }
  return b.Finish();
}

FieldStacks StacksUnder(const FieldStacks& s, const std::string& api) {
  FieldStacks out;
  out.module = s.module;
  out.versions = s.versions;
  out.machines = s.machines;
  for (const FieldStack& st : s.stacks) {
    if (st.frames.empty() || st.frames[0] != api) continue;
    out.total_ns += st.ns;
    out.stacks.push_back(st);
  }
  return out;
}

std::vector<FrameShare> TopFramesUnder(const FieldStacks& s, const std::string& api, size_t n) {
  std::map<std::string, uint64_t> by_frame;
  uint64_t total = 0;
  for (const FieldStack& st : s.stacks) {
    if (st.frames.empty() || st.frames[0] != api) continue;
    total += st.ns;
    const std::set<std::string> once(st.frames.begin() + 1, st.frames.end());
    for (const std::string& f : once) by_frame[f] += st.ns;
  }
  std::vector<FrameShare> out;
  for (const auto& [frame, ns] : by_frame) {
    out.push_back(
        {frame, ns, total > 0 ? static_cast<double>(ns) / static_cast<double>(total) : 0});
  }
  std::stable_sort(out.begin(), out.end(),
                   [](const FrameShare& a, const FrameShare& b) { return a.ns > b.ns; });
  if (out.size() > n) out.resize(n);
  return out;
}

namespace {

struct TextNode {
  uint64_t ns = 0;
  std::map<std::string, TextNode> kids;
};

void TextLines(const TextNode& n, uint64_t total, int depth, size_t lines, double min_share,
               std::string* out, size_t* written) {
  std::vector<std::pair<const std::string*, const TextNode*>> kids;
  for (const auto& [name, k] : n.kids) kids.push_back({&name, &k});
  std::stable_sort(kids.begin(), kids.end(),
                   [](const auto& a, const auto& b) { return a.second->ns > b.second->ns; });
  for (const auto& [name, k] : kids) {
    const double share = total > 0 ? static_cast<double>(k->ns) / static_cast<double>(total) : 0;
    if (*written >= lines || share < min_share) return;
    char head[64];
    std::snprintf(head, sizeof head, "%6.1f%%  %10.3f ms  ", 100 * share,
                  static_cast<double>(k->ns) / 1e6);
    *out += head + std::string(2 * static_cast<size_t>(depth), ' ') + *name + "\n";
    ++*written;
    TextLines(*k, total, depth + 1, lines, min_share, out, written);
  }
}

}  // namespace

std::string FieldStacksText(const FieldStacks& s, size_t lines, double min_share) {
  TextNode root;
  for (const FieldStack& st : s.stacks) {
    TextNode* n = &root;
    for (const std::string& f : st.frames) {
      n = &n->kids[f];
      n->ns += st.ns;
    }
  }
  std::string out;
  size_t written = 0;
  TextLines(root, s.total_ns, 0, lines, min_share, &out, &written);
  return out;
}

namespace {

std::string Joined(const std::vector<std::string>& frames) {
  std::string s;
  for (size_t i = 0; i < frames.size(); ++i) {
    if (i != 0) s += key_rules::kStackSeparator;
    s += frames[i];
  }
  return s;
}

}  // namespace

FieldStacksDiff DiffFieldStacks(const FieldStacks& before, const FieldStacks& after,
                                const DiffOptions& o) {
  FieldStacksDiff d;
  std::map<std::string, const FieldStack*> b;
  for (const FieldStack& st : before.stacks) b[Joined(st.frames)] = &st;
  std::set<std::string> seen;
  for (const FieldStack& st : after.stacks) {
    const std::string key = Joined(st.frames);
    seen.insert(key);
    auto it = b.find(key);
    if (it == b.end()) {
      ++d.only_after;
      continue;
    }
    const FieldStack& was = *it->second;
    if (!was.per_run || !st.per_run || was.per_run->count() < o.min_calls ||
        st.per_run->count() < o.min_calls) {
      ++d.too_few_runs;
      continue;
    }
    StackDiff x;
    x.frames = st.frames;
    x.before = *was.per_run;
    x.after = *st.per_run;
    x.ns_before = was.ns;
    x.ns_after = st.ns;
    x.mean_before = was.per_run->Mean();
    x.mean_after = st.per_run->Mean();
    x.change = x.mean_before > 0 ? x.mean_after / x.mean_before - 1 : 0;
    const double slower = GreaterCostTest(x.after, x.before, o.test).p_value;
    const double faster = GreaterCostTest(x.before, x.after, o.test).p_value;
    x.p = std::min(1.0, 2 * std::min(slower, faster));
    d.stacks.push_back(std::move(x));
  }
  for (const auto& [key, st] : b) d.only_before += !seen.contains(key);
  AdjustAcross(&d.stacks, o.dependent);
  for (StackDiff& x : d.stacks) {
    const bool large = std::fabs(x.change) >= o.min_effect;
    if (x.adjusted <= o.fdr && large) {
      x.verdict = x.mean_after > x.mean_before ? ApiDiff::kSlower : ApiDiff::kFaster;
    }
  }
  SortByVerdict(&d.stacks);
  return d;
}

std::string FieldStacksDiffFolded(const FieldStacks& before, const FieldStacks& after) {
  std::map<std::string, std::pair<uint64_t, uint64_t>> both;
  for (const FieldStack& st : before.stacks) both[Joined(st.frames)].first += st.ns;
  for (const FieldStack& st : after.stacks) both[Joined(st.frames)].second += st.ns;
  std::string out;
  for (const auto& [key, ns] : both) {
    out += key + " " + std::to_string(ns.first) + " " + std::to_string(ns.second) + "\n";
  }
  return out;
}

namespace {

// A stack's frames as a JSON array, written from its symbol in one pass
// (an answer of 100,000 stacks has a million frames): each separator
// becomes `","`. False, and *out unusable, when a character needs JSON's
// escapes; the frames then go one by one through the writer.
bool FramesJson(std::string_view symbol, std::string* out) {
  for (char c : symbol) {
    const auto u = static_cast<unsigned char>(c);
    if (u < 0x20 || u == 0x7f || c == '"' || c == '\\') return false;
  }
  out->assign("[\"");
  for (;;) {
    const size_t end = symbol.find(key_rules::kStackSeparator);
    out->append(symbol.substr(0, end));
    if (end == std::string_view::npos) break;
    out->append("\",\"");
    symbol.remove_prefix(end + 1);
  }
  out->append("\"]");
  return true;
}

}  // namespace

std::string FieldStacksJson(const FieldStacks& s, size_t limit) {
  JsonWriter j;
  // Frames are short: a stack's JSON is about twice its symbol, plus its
  // numbers.
  size_t estimate = 256;
  for (size_t i = 0; i < s.stacks.size() && i < limit; ++i) {
    estimate += 2 * s.stacks[i].symbol.size() + 64;
  }
  j.Reserve(estimate);
  std::string frames;  // one stack's, reused
  j.BeginObject();
  j.Key("module").String(s.module);
  j.Key("versions").BeginArray();
  for (const std::string& v : s.versions) j.String(v);
  j.EndArray();
  j.Key("total_ns").Uint(s.total_ns);
  j.Key("machines").Uint(s.machines);
  j.Key("stacks_total").Uint(s.stacks.size());
  j.Key("truncated").Bool(s.stacks.size() > limit);
  j.Key("stacks").BeginArray();
  for (size_t i = 0; i < s.stacks.size() && i < limit; ++i) {
    const FieldStack& st = s.stacks[i];
    j.BeginObject();
    j.Key("frames");
    if (st.frames.empty() && FramesJson(st.symbol, &frames)) {
      j.Raw(frames);
    } else {
      j.BeginArray();
      if (st.frames.empty()) {
        ForEachFrame(st.symbol, [&](std::string_view f) { j.String(f); });
      } else {
        for (const std::string& f : st.frames) j.String(f);
      }
      j.EndArray();
    }
    j.Key("ns").Uint(st.ns);
    j.Key("runs").Uint(st.runs);
    j.Key("machines").Uint(st.machines);
    j.EndObject();
  }
  j.EndArray();
  j.EndObject();
  return j.Take();
}

std::string FieldStacksFolded(const FieldStacks& s) {
  std::string out;
  for (const FieldStack& st : s.stacks) {
    bool first = true;
    auto frame = [&](std::string_view f) {
      if (!first) out += ';';
      out += f;
      first = false;
    };
    if (st.frames.empty()) {
      ForEachFrame(st.symbol, frame);
    } else {
      for (const std::string& f : st.frames) frame(f);
    }
    out += ' ';
    out += std::to_string(st.ns);
    out += '\n';
  }
  return out;
}

}  // namespace fieldprof
