#include "tools/tree/call_tree.h"

#include <zlib.h>

#include <algorithm>
#include <cctype>
#include <cmath>

#include "common/base/encoding.h"

namespace fieldprof::tools {

namespace {

constexpr std::string_view kMagic = "FPTREE2\n", kMagicV1 = "FPTREE1\n";
constexpr const char* kMetricNames[kMetricCount] = {"samples",     "time_ns",     "calls",
                                                    "alloc_bytes", "freed_bytes", "allocs"};

uint64_t ZigZag(int64_t v) {
  return (static_cast<uint64_t>(v) << 1) ^ static_cast<uint64_t>(v >> 63);
}
int64_t UnZigZag(uint64_t v) { return static_cast<int64_t>(v >> 1) ^ -static_cast<int64_t>(v & 1); }

bool IsHex(char c) { return std::isxdigit(static_cast<unsigned char>(c)) != 0; }
bool IsDigit(char c) { return c >= '0' && c <= '9'; }

// Drops a trailing run of GCC's local-symbol suffixes: ".isra.0",
// ".part.3", ".constprop.1", ".cold", ".lto_priv.0", ".localalias".
void DropCloneSuffixes(std::string* s) {
  static constexpr std::string_view kSuffixes[] = {
      ".isra", ".part", ".constprop", ".cold", ".lto_priv", ".localalias", ".llvm"};
  for (bool again = true; again;) {
    again = false;
    // A trailing ".N" belongs to the suffix before it.
    size_t end = s->size();
    while (end > 0 && IsDigit((*s)[end - 1])) --end;
    size_t stem = end < s->size() && end > 0 && (*s)[end - 1] == '.' ? end - 1 : s->size();
    for (std::string_view suffix : kSuffixes) {
      if (stem >= suffix.size() && s->compare(stem - suffix.size(), suffix.size(), suffix) == 0) {
        s->resize(stem - suffix.size());
        again = true;
        break;
      }
    }
  }
}

}  // namespace

const char* MetricName(Metric m) { return kMetricNames[static_cast<int>(m)]; }

bool MetricByName(std::string_view name, Metric* m) {
  if (name == "time") name = "time_ns";
  for (int i = 0; i < kMetricCount; ++i) {
    if (name == kMetricNames[i]) {
      *m = static_cast<Metric>(i);
      return true;
    }
  }
  return false;
}

std::string MatchKey(std::string_view name, Match rule) {
  std::string s(name);
  if (rule == Match::kExact) return s;
  std::string out;
  out.reserve(s.size());
  for (size_t i = 0; i < s.size();) {
    // " [clone .constprop.0]" and its kin, wherever they stand.
    if (s.compare(i, 8, " [clone ") == 0) {
      const size_t close = s.find(']', i);
      if (close != std::string::npos) {
        i = close + 1;
        continue;
      }
    }
    // "{lambda(int)#3}", "{unnamed type#2}": the number is the compiler's.
    if (s[i] == '#' && i + 1 < s.size() && IsDigit(s[i + 1])) {
      size_t j = i + 1;
      while (j < s.size() && IsDigit(s[j])) ++j;
      if (j < s.size() && s[j] == '}') {
        i = j;
        continue;
      }
    }
    // GCC's mangled anonymous namespace, when a name was not demangled.
    if (s.compare(i, 12, "_GLOBAL__N_1") == 0) {
      out += "(anonymous namespace)";
      i += 12;
      continue;
    }
    // "libz.so.1+0x1a2b", "0x7f12...": addresses differ per build.
    if (s[i] == '0' && i + 2 < s.size() && (s[i + 1] == 'x' || s[i + 1] == 'X') &&
        IsHex(s[i + 2])) {
      size_t j = i + 2;
      while (j < s.size() && IsHex(s[j])) ++j;
      out += "0x?";
      i = j;
      continue;
    }
    // A build id: a run of 16 or more hex digits standing alone.
    if (IsHex(s[i]) && (i == 0 || !std::isalnum(static_cast<unsigned char>(s[i - 1])))) {
      size_t j = i;
      while (j < s.size() && IsHex(s[j])) ++j;
      if (j - i >= 16 && (j == s.size() || !std::isalnum(static_cast<unsigned char>(s[j])))) {
        out += "?";
        i = j;
        continue;
      }
    }
    out += s[i++];
  }
  DropCloneSuffixes(&out);
  return out;
}

CallTree::CallTree() {
  Intern("");
  nodes_.push_back(Node{});
}

uint32_t CallTree::Intern(std::string_view name) {
  auto [it, fresh] = name_ids_.emplace(std::string(name), static_cast<uint32_t>(names_.size()));
  if (fresh) names_.emplace_back(name);
  return it->second;
}

uint32_t CallTree::Child(uint32_t parent, std::string_view name) {
  const uint32_t id = Intern(name);
  const uint64_t key = static_cast<uint64_t>(parent) << 32 | id;
  auto [it, fresh] = child_.emplace(key, static_cast<uint32_t>(nodes_.size()));
  if (fresh) {
    Node n;
    n.parent = parent;
    n.name = id;
    nodes_.push_back(n);
  }
  return it->second;
}

uint32_t CallTree::Find(uint32_t parent, std::string_view name) const {
  const auto id = name_ids_.find(std::string(name));
  if (id == name_ids_.end()) return kNone;
  const auto it = child_.find(static_cast<uint64_t>(parent) << 32 | id->second);
  return it == child_.end() ? kNone : it->second;
}

uint32_t CallTree::AddPath(const std::vector<std::string_view>& frames) {
  uint32_t n = kRoot;
  for (std::string_view f : frames) n = Child(n, f);
  return n;
}

void CallTree::Add(uint32_t node, Metric m, int64_t v) {
  nodes_[node].self[static_cast<int>(m)] += v;
  metrics_ |= Bit(m);
}

void CallTree::Set(uint32_t node, Metric m, int64_t v) {
  nodes_[node].self[static_cast<int>(m)] = v;
  metrics_ |= Bit(m);
}

uint32_t CallTree::depth(uint32_t n) const {
  uint32_t d = 0;
  for (; n != kRoot; n = nodes_[n].parent) ++d;
  return d;
}

std::vector<std::string> CallTree::Path(uint32_t n) const {
  std::vector<std::string> path;
  for (; n != kRoot; n = nodes_[n].parent) path.push_back(name(n));
  std::reverse(path.begin(), path.end());
  return path;
}

std::vector<int64_t> CallTree::Totals(Metric m) const {
  std::vector<int64_t> total(nodes_.size());
  for (size_t n = nodes_.size(); n-- > 0;) {
    total[n] += nodes_[n].self[static_cast<int>(m)];
    if (n != kRoot) total[nodes_[n].parent] += total[n];
  }
  return total;
}

void CallTree::KeepOnly(const std::vector<bool>& live) {
  std::vector<uint32_t> to(nodes_.size(), kNone);
  uint32_t next = 0;
  for (uint32_t n = 0; n < nodes_.size(); ++n) {
    if (n != kRoot && !live[n]) continue;
    Node node = nodes_[n];
    if (n != kRoot) node.parent = to[node.parent];
    to[n] = next;
    nodes_[next++] = node;
  }
  nodes_.resize(next);
  nodes_.shrink_to_fit();
  child_ = {};  // its buckets freed before the new ones
  child_.reserve(nodes_.size());
  for (uint32_t n = 1; n < nodes_.size(); ++n) {
    child_.emplace(static_cast<uint64_t>(nodes_[n].parent) << 32 | nodes_[n].name, n);
  }
}

std::vector<std::vector<uint32_t>> CallTree::Children() const {
  std::vector<std::vector<uint32_t>> kids(nodes_.size());
  for (uint32_t n = 1; n < nodes_.size(); ++n) kids[nodes_[n].parent].push_back(n);
  return kids;
}

Metric CallTree::PrimaryMetric() const {
  for (Metric m : {Metric::kTimeNs, Metric::kSamples, Metric::kCalls, Metric::kAllocBytes,
                   Metric::kFreedBytes, Metric::kAllocs}) {
    if (has(m)) return m;
  }
  return Metric::kSamples;
}

void CallTreeBuilder::Enter(uint32_t thread, std::string_view name, int64_t time_ns) {
  std::vector<Open>& stack = stacks_[thread];
  const uint32_t parent = stack.empty() ? CallTree::kRoot : stack.back().node;
  stack.push_back({tree_->Child(parent, name), time_ns, 0});
}

void CallTreeBuilder::EnterAt(uint32_t thread, uint32_t node, int64_t time_ns) {
  stacks_[thread].push_back({node, time_ns, 0});
}

void CallTreeBuilder::Exit(uint32_t thread, int64_t time_ns) {
  std::vector<Open>& stack = stacks_[thread];
  if (stack.empty()) {
    ++unmatched_;
    return;
  }
  const Open o = stack.back();
  stack.pop_back();
  const int64_t took = std::max<int64_t>(0, time_ns - o.start);
  tree_->Add(o.node, Metric::kCalls, 1);
  tree_->Add(o.node, Metric::kTimeNs, took - std::min(took, o.children));
  if (!stack.empty()) stack.back().children += took;
}

uint64_t CallTreeBuilder::Finish(int64_t time_ns) {
  uint64_t open = 0;
  for (auto& [thread, stack] : stacks_) {
    while (!stack.empty()) {
      Exit(thread, time_ns);
      ++open;
    }
  }
  return open;
}

// The file: magic; varints: metrics mask, runs, flags (1: per run; not
// in FPTREE1 files); the description; the
// names (count, then each); the nodes (count, then per node but the root:
// its distance back to its parent and its name id; and for every node, the
// root first, each present metric's self value, zigzagged); a CRC-32 of
// all of it, 4 bytes little-endian.
std::string EncodeCallTree(const CallTree& t) {
  std::string out(kMagic);
  PutVarint(&out, t.metrics());
  PutVarint(&out, t.runs);
  PutVarint(&out, t.per_run ? 1 : 0);
  PutString(&out, t.description);
  PutVarint(&out, t.names().size());
  for (const std::string& n : t.names()) PutString(&out, n);
  PutVarint(&out, t.size());
  for (uint32_t n = 0; n < t.size(); ++n) {
    if (n != CallTree::kRoot) {
      PutVarint(&out, n - t.parent(n));
      PutVarint(&out, t.name_id(n));
    }
    for (int m = 0; m < kMetricCount; ++m) {
      if ((t.metrics() >> m & 1) != 0) PutVarint(&out, ZigZag(t.self(n, static_cast<Metric>(m))));
    }
  }
  const uLong crc = crc32(0L, reinterpret_cast<const Bytef*>(out.data()), out.size());
  for (int i = 0; i < 4; ++i) out.push_back(static_cast<char>(crc >> (8 * i)));
  return out;
}

StatusOr<CallTree> DecodeCallTree(std::string_view bytes) {
  const bool v1 = bytes.substr(0, kMagicV1.size()) == kMagicV1;
  if (!v1 && bytes.substr(0, kMagic.size()) != kMagic) {
    return InvalidArgument("not a call tree (.fptree) file");
  }
  if (bytes.size() < kMagic.size() + 4) return DataLoss("the call tree is cut short");
  uint32_t stored = 0;
  for (int i = 0; i < 4; ++i) {
    stored |= static_cast<uint32_t>(static_cast<uint8_t>(bytes[bytes.size() - 4 + i])) << (8 * i);
  }
  const uLong crc = crc32(0L, reinterpret_cast<const Bytef*>(bytes.data()), bytes.size() - 4);
  if (static_cast<uint32_t>(crc) != stored) {
    return DataLoss("the call tree is damaged (its checksum does not match)");
  }
  std::string_view in = bytes.substr(kMagic.size(), bytes.size() - kMagic.size() - 4);
  const Status bad = DataLoss("the call tree is damaged");
  uint64_t metrics = 0, runs = 0, flags = 0, nnames = 0, nnodes = 0;
  CallTree t;
  if (!GetVarint(&in, &metrics) || metrics >= (1u << kMetricCount) || !GetVarint(&in, &runs) ||
      runs == 0 || runs > UINT32_MAX || (!v1 && (!GetVarint(&in, &flags) || flags > 1)) ||
      !GetString(&in, &t.description) || !GetVarint(&in, &nnames) || nnames == 0 ||
      nnames > in.size()) {
    return bad;
  }
  t.per_run = flags == 1;
  std::vector<std::string> names(nnames);
  for (std::string& n : names) {
    if (!GetString(&in, &n)) return bad;
  }
  if (!names[0].empty() || !GetVarint(&in, &nnodes) || nnodes == 0 || nnodes > in.size() + 1) {
    return bad;
  }
  t.runs = static_cast<uint32_t>(runs);
  std::vector<uint32_t> ids(nnodes, 0);
  for (uint64_t n = 0; n < nnodes; ++n) {
    uint32_t node = CallTree::kRoot;
    if (n > 0) {
      uint64_t back = 0, name = 0;
      if (!GetVarint(&in, &back) || back == 0 || back > n || !GetVarint(&in, &name) || name == 0 ||
          name >= nnames) {
        return bad;
      }
      node = t.Child(ids[n - back], names[name]);
      if (node != t.size() - 1) return bad;  // the same path twice
    }
    ids[n] = node;
    for (int m = 0; m < kMetricCount; ++m) {
      if ((metrics >> m & 1) == 0) continue;
      uint64_t v = 0;
      if (!GetVarint(&in, &v)) return bad;
      t.Set(node, static_cast<Metric>(m), UnZigZag(v));
    }
  }
  if (!in.empty()) return bad;
  t.set_metrics(static_cast<uint32_t>(metrics));
  return t;
}

namespace {

// Each name's key, worked out once per name.
class Keys {
 public:
  Keys(const CallTree& t, Match rule) : keys_(t.names().size()) {
    for (size_t i = 0; i < keys_.size(); ++i) keys_[i] = MatchKey(t.names()[i], rule);
  }
  const std::string& of(const CallTree& t, uint32_t n) const { return keys_[t.name_id(n)]; }

 private:
  std::vector<std::string> keys_;
};

// Each node of `t` mapped into `out` by keys (added to `out` as needed).
std::vector<uint32_t> MapInto(const CallTree& t, Match rule, CallTree* out) {
  const Keys keys(t, rule);
  std::vector<uint32_t> to(t.size(), CallTree::kRoot);
  for (uint32_t n = 1; n < t.size(); ++n) to[n] = out->Child(to[t.parent(n)], keys.of(t, n));
  return to;
}

// Each node of `t` at the node of `out` with its path of keys, or kNone:
// `out` is not added to.
std::vector<uint32_t> MapExisting(const CallTree& t, Match rule, const CallTree& out) {
  const Keys keys(t, rule);
  std::vector<uint32_t> to(t.size(), CallTree::kNone);
  to[CallTree::kRoot] = CallTree::kRoot;
  for (uint32_t n = 1; n < t.size(); ++n) {
    const uint32_t p = to[t.parent(n)];
    if (p != CallTree::kNone) to[n] = out.Find(p, keys.of(t, n));
  }
  return to;
}

// The root totals' ratios that scale `t` to `first` (see Normalize).
std::array<double, kMetricCount> Scale(const CallTree& first, const CallTree& t, Normalize how) {
  std::array<double, kMetricCount> f;
  f.fill(1.0);
  auto ratio = [&](Metric m) {
    const int64_t a = first.Totals(m)[CallTree::kRoot], b = t.Totals(m)[CallTree::kRoot];
    return b == 0 ? 1.0 : static_cast<double>(a) / static_cast<double>(b);
  };
  if (how == Normalize::kTotal) {
    for (int m = 0; m < kMetricCount; ++m) f[m] = ratio(static_cast<Metric>(m));
  } else if (how == Normalize::kCalls) {
    f.fill(ratio(Metric::kCalls));
  }
  return f;
}

int64_t Scaled(int64_t v, double f) {
  return f == 1.0 ? v : static_cast<int64_t>(std::llround(static_cast<double>(v) * f));
}

// `t` without the nodes not kept, and without those whose whole subtree is
// zero in every metric, pruned in place.
CallTree Pruned(CallTree&& t, const std::vector<bool>& keep) {
  std::vector<bool> live(t.size(), false);
  size_t dead = 0;
  for (uint32_t n = static_cast<uint32_t>(t.size()); n-- > 1;) {
    bool any = keep[n] && live[n];
    for (int m = 0; m < kMetricCount && !any && keep[n]; ++m) {
      any = t.self(n, static_cast<Metric>(m)) != 0;
    }
    if (any) {
      live[n] = true, live[t.parent(n)] = true;
    } else {
      ++dead;
    }
  }
  if (dead > 0) t.KeepOnly(live);
  return std::move(t);
}

}  // namespace

namespace {

// One run's value of a node: a per-run tree's own, a sum tree's over its
// runs, rounded to nearest.
int64_t PerRunValue(const CallTree& t, uint32_t n, Metric m) {
  if (t.per_run || t.runs <= 1) return t.self(n, m);
  return std::llround(static_cast<double>(t.self(n, m)) / static_cast<double>(t.runs));
}

// Input `t` added into `out` through `map`, scaled by `f`, times `sign`:
// each node's sum over its runs (`over_runs`), or its own value.
void AddInto(const CallTree& t, const std::vector<uint32_t>& map,
             const std::array<double, kMetricCount>& f, int64_t sign, bool over_runs,
             CallTree* out) {
  for (uint32_t v = 0; v < t.size(); ++v) {
    for (int m = 0; m < kMetricCount; ++m) {
      const auto metric = static_cast<Metric>(m);
      const int64_t x = over_runs ? t.OverRuns(v, metric) : t.self(v, metric);
      if (x != 0) out->Add(map[v], metric, sign * Scaled(x, f[m]));
    }
  }
}

// Input `i` of a min: each node every earlier input had keeps the least
// of its values (one run's), and counts one more input that had it
// (`seen_by`). With `shared_keys` (normalised matching) two nodes of the
// input may share a node of `out`: their values are summed first.
void MinInto(const CallTree& t, size_t i, const std::vector<uint32_t>& map,
             const std::array<double, kMetricCount>& f, bool shared_keys,
             std::vector<uint32_t>* seen_by, CallTree* out) {
  seen_by->resize(out->size(), 0);
  std::vector<std::array<int64_t, kMetricCount>> mine;
  if (shared_keys) {
    mine.assign(out->size(), {});
    for (uint32_t v = 0; v < t.size(); ++v) {
      if (map[v] == CallTree::kNone) continue;
      for (int m = 0; m < kMetricCount; ++m) {
        mine[map[v]][m] += Scaled(PerRunValue(t, v, static_cast<Metric>(m)), f[m]);
      }
    }
  }
  for (uint32_t v = 0; v < t.size(); ++v) {
    const uint32_t to = map[v];
    if (to == CallTree::kNone || (*seen_by)[to] != i) continue;  // missing before, or done
    ++(*seen_by)[to];
    for (int m = 0; m < kMetricCount; ++m) {
      const auto metric = static_cast<Metric>(m);
      const int64_t x = shared_keys ? mine[to][m] : Scaled(PerRunValue(t, v, metric), f[m]);
      out->Set(to, metric, i == 0 ? x : std::min(out->self(to, metric), x));
    }
  }
}

// Every value of `t` divided by `k`, to nearest, halves away from zero.
void DivideNearest(int64_t k, CallTree* t) {
  for (uint32_t v = 0; v < t->size(); ++v) {
    for (int m = 0; m < kMetricCount; ++m) {
      const int64_t x = t->self(v, static_cast<Metric>(m));
      t->Set(v, static_cast<Metric>(m), (x >= 0 ? x + k / 2 : x - k / 2) / k);
    }
  }
}

}  // namespace

StatusOr<CallTree> Combine(const std::vector<const CallTree*>& in, Op op, const CombineOptions& o) {
  if (in.empty()) return InvalidArgument("no trees to combine");
  if (op == Op::kSub && in.size() < 2) return InvalidArgument("sub takes two trees or more");
  CallTree out;
  uint32_t metrics = 0;
  uint64_t runs = 0;
  // sub of groups: each group's runs, the weights of its per-run mean.
  const bool groups = op == Op::kSub && o.sub_group > 0 && o.sub_group < in.size();
  int64_t runs_new = 0, runs_base = 0;
  for (size_t i = 0; groups && i < in.size(); ++i) {
    (i < o.sub_group ? runs_new : runs_base) += std::max<int64_t>(1, in[i]->runs);
  }
  // One input at a time into the union: its map to `out` lives while it
  // is added. min keeps, per node, how many inputs had it so far
  // (`seen_by`), and its least values in `out` itself; only a node that
  // every earlier input had can still be kept. Under normalised matching
  // two nodes of one input may share a key, so an input's values are
  // summed per node (in `mine`) before the least is taken.
  std::vector<uint32_t> seen_by;
  for (size_t i = 0; i < in.size(); ++i) {
    const CallTree& t = *in[i];
    metrics |= t.metrics();
    runs += t.runs;
    // min's nodes are all in the first input: the others are only looked up.
    const std::vector<uint32_t> map =
        op == Op::kMin && i > 0 ? MapExisting(t, o.match, out) : MapInto(t, o.match, &out);
    const auto f = Scale(*in[0], t, o.normalize);
    if (op != Op::kMin) {
      // Each input as the sum over its runs. Groups: the new runs' sum
      // counts (base runs) times, the base runs' -(new runs) times, and
      // the total is divided by both at the end.
      const int64_t sign = groups                    ? (i < o.sub_group ? runs_base : -runs_new)
                           : op == Op::kSub && i > 0 ? -1
                                                     : 1;
      AddInto(t, map, f, sign, /*over_runs=*/op != Op::kSub || groups, &out);
    } else {
      MinInto(t, i, map, f, o.match != Match::kExact, &seen_by, &out);
    }
  }
  const size_t n = out.size();
  std::vector<bool> keep(n, true);
  if (op == Op::kMin) {
    seen_by.resize(n, 0);
    for (size_t v = 0; v < n; ++v) keep[v] = seen_by[v] == in.size();
  } else if (op == Op::kMean || groups) {
    DivideNearest(op == Op::kMean ? static_cast<int64_t>(runs) : runs_new * runs_base, &out);
  }
  out.set_metrics(metrics);
  static constexpr const char* kOpNames[] = {"add", "mean", "sub", "min"};
  out.description = std::string(kOpNames[static_cast<int>(op)]) + " of " +
                    std::to_string(in.size()) + " trees, " + std::to_string(runs) + " runs";
  // add holds every run, summed; mean and min one run's values of them
  // all; sub of groups the new group's runs, per run.
  out.runs = op == Op::kSub ? (groups ? static_cast<uint32_t>(runs_new) : in[0]->runs)
                            : static_cast<uint32_t>(std::min<uint64_t>(runs, UINT32_MAX));
  out.per_run = op == Op::kMean || op == Op::kMin || (op == Op::kSub && (groups || in[0]->per_run));
  return Pruned(std::move(out), keep);
}

std::vector<uint32_t> MapNodes(const CallTree& of, const CallTree& t, Match rule) {
  // Keys interned to numbers, so that a child is found by (parent, key).
  std::unordered_map<std::string, uint32_t> key_ids;
  auto key_ids_of = [&](const CallTree& tree) {
    std::vector<uint32_t> ids(tree.names().size());
    for (size_t i = 0; i < ids.size(); ++i) {
      ids[i] = key_ids.emplace(MatchKey(tree.names()[i], rule), key_ids.size()).first->second;
    }
    return ids;
  };
  const std::vector<uint32_t> kt = key_ids_of(t), kof = key_ids_of(of);
  std::unordered_map<uint64_t, uint32_t> by_key;  // parent << 32 | key -> node of t
  by_key.reserve(t.size());
  for (uint32_t n = 1; n < t.size(); ++n) {
    by_key.emplace(static_cast<uint64_t>(t.parent(n)) << 32 | kt[t.name_id(n)], n);
  }
  std::vector<uint32_t> to(of.size(), CallTree::kNone);
  to[CallTree::kRoot] = CallTree::kRoot;
  for (uint32_t n = 1; n < of.size(); ++n) {
    const uint32_t p = to[of.parent(n)];
    if (p == CallTree::kNone) continue;
    const auto it = by_key.find(static_cast<uint64_t>(p) << 32 | kof[of.name_id(n)]);
    if (it != by_key.end()) to[n] = it->second;
  }
  return to;
}

std::vector<std::pair<std::string, std::array<int64_t, kMetricCount>>> Canonical(
    const CallTree& t) {
  std::vector<std::string> path(t.size());
  std::vector<std::pair<std::string, std::array<int64_t, kMetricCount>>> out;
  for (uint32_t n = 0; n < t.size(); ++n) {
    if (n != CallTree::kRoot) path[n] = path[t.parent(n)] + '\x1f' + t.name(n);
    std::array<int64_t, kMetricCount> v{};
    for (int m = 0; m < kMetricCount; ++m) v[m] = t.self(n, static_cast<Metric>(m));
    out.emplace_back(path[n], v);
  }
  std::sort(out.begin(), out.end());
  return out;
}

}  // namespace fieldprof::tools
