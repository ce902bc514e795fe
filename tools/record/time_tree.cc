#include "tools/record/time_tree.h"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <thread>

#include "common/encoding.h"

namespace fieldprof::local {

namespace {

constexpr char kMagic[] = "FPTIMETREE1\n";
constexpr size_t kMagicSize = sizeof kMagic - 1;

// Per-query scratch: a count per type, and which were touched.
struct Tally {
  std::vector<uint64_t>* dense;
  std::vector<uint32_t>* touched;
  void Add(uint32_t type, uint64_t n) {
    uint64_t& c = (*dense)[type];
    if (c == 0) touched->push_back(type);
    c += n;
  }
};

}  // namespace

Status CheckTimeTreeOptions(const TimeTreeOptions& o) {
  if (o.leaf_samples < 1) return InvalidArgument("M (leaf samples) must be at least 1");
  if (o.fanout < 2 || o.fanout > 64) return InvalidArgument("N (fanout) must be 2 to 64");
  if (!(o.keep_fraction > 0 && o.keep_fraction <= 1)) {
    return InvalidArgument("P (the share an inner node's types cover) must be in (0, 1]");
  }
  return Status::Ok();
}

StatusOr<TimeTree> TimeTree::Build(std::vector<uint64_t> times, std::vector<uint32_t> types,
                                   const TimeTreeOptions& options) {
  FP_RETURN_IF_ERROR(CheckTimeTreeOptions(options));
  if (times.size() != types.size()) return InvalidArgument("times and types differ in length");
  if (times.size() >= (uint64_t{1} << 32)) return TooLarge("over 4G samples in one tree");
  if (!std::is_sorted(times.begin(), times.end())) {
    return InvalidArgument("samples must be in order of time");
  }
  TimeTree t;
  t.options_ = options;
  t.times_ = std::move(times);
  t.types_ = std::move(types);
  for (uint32_t ty : t.types_) t.max_type_ = std::max(t.max_type_, ty);
  if (t.max_type_ >= kMaxTimeTreeTypes) {
    return InvalidArgument("sample type " + std::to_string(t.max_type_) + " is not below " +
                           std::to_string(kMaxTimeTreeTypes) + ": intern the types");
  }
  t.Shape();
  if (!t.times_.empty()) {
    // Each node's list is filled apart (threads fill disjoint subtrees),
    // then laid out in the order of the nodes.
    std::vector<Counts> lists(t.nodes_.size());
    const unsigned cpus = std::max(1u, std::thread::hardware_concurrency());
    t.Fill(0, &lists, cpus - 1);
    for (size_t i = 0; i < t.nodes_.size(); ++i) {
      Node& nd = t.nodes_[i];
      nd.top_begin = static_cast<uint32_t>(t.top_.size());
      for (const auto& [type, c] : lists[i]) t.top_.emplace_back(type, static_cast<uint32_t>(c));
      nd.top_end = static_cast<uint32_t>(t.top_.size());
    }
  }
  return t;
}

void TimeTree::Shape() {
  nodes_.clear();
  top_.clear();
  if (times_.empty()) return;
  nodes_.push_back({0, static_cast<uint32_t>(times_.size())});
  // Breadth first: each node's children are consecutive.
  const uint32_t m = options_.leaf_samples, fan = options_.fanout;
  for (size_t i = 0; i < nodes_.size(); ++i) {
    const uint32_t lo = nodes_[i].lo, hi = nodes_[i].hi, n = hi - lo;
    if (n < m || n < fan) continue;  // a leaf
    nodes_[i].first_child = static_cast<uint32_t>(nodes_.size());
    for (uint32_t c = 0; c < fan; ++c) {
      const uint64_t a = lo + uint64_t{n} * c / fan, b = lo + uint64_t{n} * (c + 1) / fan;
      nodes_.push_back({static_cast<uint32_t>(a), static_cast<uint32_t>(b)});
    }
  }
}

TimeTree::Counts TimeTree::Fill(uint32_t node, std::vector<Counts>* lists, unsigned spare) {
  const Node nd = nodes_[node];
  Counts all;
  if (nd.leaf()) {
    std::vector<uint32_t> ts(types_.begin() + nd.lo, types_.begin() + nd.hi);
    std::sort(ts.begin(), ts.end());
    for (uint32_t t : ts) {
      if (!all.empty() && all.back().first == t) {
        ++all.back().second;
      } else {
        all.emplace_back(t, 1);
      }
    }
    return all;
  }
  // With threads to spare and enough samples to be worth one, the first
  // half of the children are filled on another thread.
  const uint32_t fan = options_.fanout;
  std::vector<Counts> early;
  std::thread helper;
  uint32_t first = 0;
  if (spare > 0 && nd.hi - nd.lo >= 1u << 16) {
    const unsigned theirs = (spare - 1) / 2, ours = spare - 1 - theirs;
    first = fan / 2;
    early.resize(first);
    helper = std::thread([&, theirs] {
      for (uint32_t c = 0; c < first; ++c) early[c] = Fill(nd.first_child + c, lists, theirs);
    });
    spare = ours;
  }
  for (uint32_t c = first; c <= fan; ++c) {
    Counts child;
    if (c == fan) {  // last: the other thread's children
      if (!helper.joinable()) break;
      helper.join();
      for (Counts& e : early) {
        if (child.empty()) {
          child = std::move(e);
        } else {
          child = MergeCounts(child, e);
        }
      }
    } else {
      child = Fill(nd.first_child + c, lists, spare);
    }
    if (all.empty()) {
      all = std::move(child);
      continue;
    }
    all = MergeCounts(all, child);
  }
  Keep(node, all, &(*lists)[node]);
  return all;
}

TimeTree::Counts TimeTree::MergeCounts(const Counts& a, const Counts& b) {
  Counts merged;
  merged.reserve(a.size() + b.size());
  size_t i = 0, j = 0;
  while (i < a.size() || j < b.size()) {
    if (j == b.size() || (i < a.size() && a[i].first < b[j].first)) {
      merged.push_back(a[i++]);
    } else if (i == a.size() || b[j].first < a[i].first) {
      merged.push_back(b[j++]);
    } else {
      merged.emplace_back(a[i].first, a[i].second + b[j].second);
      ++i, ++j;
    }
  }
  return merged;
}

void TimeTree::Keep(uint32_t node, const Counts& all, Counts* list) {
  Node& nd = nodes_[node];
  const uint64_t total = nd.hi - nd.lo;
  const auto want = static_cast<uint64_t>(std::ceil(options_.keep_fraction * total - 1e-9));
  // The most frequent types first until `want` is covered: the count at
  // which that happens (the threshold), found from how many types have
  // each count, without sorting the types. Ties at the threshold go to
  // the lower types.
  uint64_t most = 0;
  for (const auto& [type, c] : all) most = std::max(most, c);
  std::vector<uint32_t> with_count(most + 1);
  for (const auto& [type, c] : all) ++with_count[c];
  uint64_t covered = 0, threshold = most + 1, at_threshold = 0;
  for (uint64_t c = most; c >= 1 && covered < want; --c) {
    const uint64_t take = std::min<uint64_t>(with_count[c], (want - covered + c - 1) / c);
    covered += take * c;
    threshold = c;
    at_threshold = take;
  }
  size_t kept = 0;
  for (const auto& [type, c] : all) kept += c > threshold;
  kept += at_threshold;
  if (kept * 4 > total) return;  // a list as long as the samples: the children answer
  nd.listed = true;
  for (const auto& [type, c] : all) {  // already in order of type
    if (c > threshold || (c == threshold && at_threshold > 0)) {
      if (c == threshold) --at_threshold;
      list->emplace_back(type, c);
    }
  }
  nd.other = total - covered;
}

RangeCounts TimeTree::Range(uint64_t t1, uint64_t t2, bool exact) const {
  RangeCounts out;
  if (nodes_.empty() || t1 > t2) return out;
  thread_local std::vector<uint64_t> dense;
  thread_local std::vector<uint32_t> touched;
  if (dense.size() < size_t{max_type_} + 1) dense.resize(size_t{max_type_} + 1);
  touched.clear();
  Visit(0, t1, t2, exact, &out, &dense, &touched);
  out.by_type.reserve(touched.size());
  if (touched.size() * 16 > max_type_) {  // many: in order by walking them all
    for (uint32_t t = 0; t <= max_type_; ++t) {
      if (dense[t] != 0) out.by_type.emplace_back(t, dense[t]);
    }
    for (uint32_t t : touched) dense[t] = 0;
    return out;
  }
  std::sort(touched.begin(), touched.end());
  for (uint32_t t : touched) {
    out.by_type.emplace_back(t, dense[t]);
    dense[t] = 0;
  }
  return out;
}

void TimeTree::Visit(uint32_t node, uint64_t t1, uint64_t t2, bool exact, RangeCounts* out,
                     std::vector<uint64_t>* dense, std::vector<uint32_t>* touched) const {
  const Node& nd = nodes_[node];
  const uint64_t tmin = times_[nd.lo], tmax = times_[nd.hi - 1];
  if (tmax < t1 || tmin > t2) return;
  Tally tally{dense, touched};
  const bool whole = t1 <= tmin && tmax <= t2;
  if (nd.leaf()) {
    uint32_t lo = nd.lo, hi = nd.hi;
    if (!whole) {
      lo = static_cast<uint32_t>(std::lower_bound(times_.begin() + lo, times_.begin() + hi, t1) -
                                 times_.begin());
      hi = static_cast<uint32_t>(std::upper_bound(times_.begin() + lo, times_.begin() + hi, t2) -
                                 times_.begin());
    }
    for (uint32_t i = lo; i < hi; ++i) tally.Add(types_[i], 1);
    out->samples += hi - lo;
    out->samples_scanned += hi - lo;
    ++out->leaves_scanned;
    return;
  }
  if (!whole || !nd.listed) {
    for (uint32_t c = 0; c < options_.fanout; ++c) {
      Visit(nd.first_child + c, t1, t2, exact, out, dense, touched);
    }
    return;
  }
  ++out->nodes_merged;
  out->samples += nd.hi - nd.lo;
  const auto* begin = top_.data() + nd.top_begin;
  const auto* end = top_.data() + nd.top_end;
  for (const auto* p = begin; p != end; ++p) tally.Add(p->first, p->second);
  if (nd.other == 0) return;
  if (!exact) {
    out->other += nd.other;
    return;
  }
  // The types the list left out, from the node's samples (the list's
  // types marked for the scan).
  thread_local std::vector<uint8_t> listed;
  if (listed.size() < dense->size()) listed.resize(dense->size());
  for (const auto* p = begin; p != end; ++p) listed[p->first] = 1;
  for (uint32_t i = nd.lo; i < nd.hi; ++i) {
    if (!listed[types_[i]]) tally.Add(types_[i], 1);
  }
  for (const auto* p = begin; p != end; ++p) listed[p->first] = 0;
  out->samples_scanned += nd.hi - nd.lo;
}

std::vector<TimeTree::NodeView> TimeTree::NodeViews() const {
  std::vector<NodeView> out;
  out.reserve(nodes_.size());
  for (const Node& nd : nodes_) {
    out.push_back({nd.lo, nd.hi, nd.first_child, nd.listed, nd.top_begin, nd.top_end, nd.other});
  }
  return out;
}

std::string TimeTree::Encode() const {
  std::string out(kMagic, kMagicSize);
  PutVarint(&out, times_.size());
  PutVarint(&out, options_.leaf_samples);
  PutVarint(&out, options_.fanout);
  uint64_t p_bits = 0;
  std::memcpy(&p_bits, &options_.keep_fraction, sizeof p_bits);
  PutVarint(&out, p_bits);
  out.reserve(out.size() + times_.size() * 5);
  uint64_t prev = 0;
  for (uint64_t t : times_) {
    PutVarint(&out, t - prev);
    prev = t;
  }
  for (uint32_t t : types_) PutVarint(&out, t);
  for (const Node& nd : nodes_) {
    if (nd.leaf()) continue;
    PutVarint(&out, nd.listed ? nd.top_end - nd.top_begin + 1 : 0);  // 0: no list
    uint32_t prev_type = 0;
    for (uint32_t i = nd.top_begin; i < nd.top_end; ++i) {
      PutVarint(&out, top_[i].first - prev_type);
      prev_type = top_[i].first;
      PutVarint(&out, top_[i].second);
    }
  }
  return out;
}

StatusOr<TimeTree> TimeTree::Decode(std::string_view in) {
  if (in.substr(0, kMagicSize) != std::string_view(kMagic, kMagicSize)) {
    return DataLoss("not a time tree (bad magic)");
  }
  in.remove_prefix(kMagicSize);
  uint64_t n = 0, m = 0, fan = 0, p_bits = 0;
  if (!GetVarint(&in, &n) || !GetVarint(&in, &m) || !GetVarint(&in, &fan) ||
      !GetVarint(&in, &p_bits)) {
    return DataLoss("time tree: truncated header");
  }
  TimeTree t;
  t.options_.leaf_samples = static_cast<uint32_t>(std::min<uint64_t>(m, UINT32_MAX));
  t.options_.fanout = static_cast<uint32_t>(std::min<uint64_t>(fan, UINT32_MAX));
  std::memcpy(&t.options_.keep_fraction, &p_bits, sizeof p_bits);
  FP_RETURN_IF_ERROR(CheckTimeTreeOptions(t.options_).WithContext("time tree"));
  // Every sample takes at least two bytes: a count beyond that is damage.
  if (n >= (uint64_t{1} << 32) || n > in.size() / 2) return DataLoss("time tree: bad sample count");
  t.times_.resize(n);
  t.types_.resize(n);
  uint64_t now = 0;
  for (uint64_t i = 0; i < n; ++i) {
    uint64_t d = 0;
    if (!GetVarint(&in, &d) || now + d < now) return DataLoss("time tree: truncated times");
    now += d;
    t.times_[i] = now;
  }
  for (uint64_t i = 0; i < n; ++i) {
    uint64_t ty = 0;
    if (!GetVarint(&in, &ty)) return DataLoss("time tree: truncated types");
    if (ty >= kMaxTimeTreeTypes) return DataLoss("time tree: a sample type out of range");
    t.types_[i] = static_cast<uint32_t>(ty);
    t.max_type_ = std::max(t.max_type_, t.types_[i]);
  }
  t.Shape();
  for (Node& nd : t.nodes_) {
    if (nd.leaf()) continue;
    uint64_t k = 0;
    if (!GetVarint(&in, &k) || k > uint64_t{nd.hi - nd.lo} + 1) {
      return DataLoss("time tree: bad node list");
    }
    nd.top_begin = nd.top_end = static_cast<uint32_t>(t.top_.size());
    if (k == 0) continue;  // no list: its children answer
    nd.listed = true;
    --k;
    uint64_t type = 0, covered = 0;
    for (uint64_t i = 0; i < k; ++i) {
      uint64_t dt = 0, c = 0;
      if (!GetVarint(&in, &dt) || !GetVarint(&in, &c)) return DataLoss("time tree: truncated list");
      type += dt;
      covered += c;
      if (type >= kMaxTimeTreeTypes || covered > nd.hi - nd.lo)
        return DataLoss("time tree: bad node list");
      t.top_.emplace_back(static_cast<uint32_t>(type), static_cast<uint32_t>(c));
    }
    nd.top_end = static_cast<uint32_t>(t.top_.size());
    nd.other = (nd.hi - nd.lo) - covered;
  }
  if (!in.empty()) return DataLoss("time tree: trailing bytes");
  return t;
}

RangeCounts ScanRange(const std::vector<uint64_t>& times, const std::vector<uint32_t>& types,
                      uint64_t t1, uint64_t t2) {
  RangeCounts out;
  if (t1 > t2) return out;
  // The slice of the range (found by binary search), every sample in it
  // counted: what a profiler without a tree does on each range change.
  const size_t lo = std::lower_bound(times.begin(), times.end(), t1) - times.begin();
  const size_t hi = std::upper_bound(times.begin(), times.end(), t2) - times.begin();
  std::vector<uint64_t> dense;
  for (size_t i = lo; i < hi; ++i) {
    const uint32_t t = types[i];
    if (t >= dense.size()) dense.resize(size_t{t} + 1);
    ++dense[t];
  }
  out.samples = hi - lo;
  out.samples_scanned = hi - lo;
  for (uint32_t t = 0; t < dense.size(); ++t) {
    if (dense[t] != 0) out.by_type.emplace_back(t, dense[t]);
  }
  return out;
}

}  // namespace fieldprof::local
