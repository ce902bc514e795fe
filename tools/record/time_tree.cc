#include "tools/record/time_tree.h"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <functional>
#include <thread>

#include "common/base/encoding.h"

namespace fieldprof::tools {

namespace {

// Version 1 laid nodes out top down (each split into N of equal size);
// version 2 bottom up (leaves of M, N to a parent). Both are read.
constexpr char kTreeMagic1[] = "FPTIMETREE1\n";
constexpr char kTreeMagic[] = "FPTIMETREE2\n";
constexpr size_t kTreeMagicSize = sizeof kTreeMagic - 1;
static_assert(sizeof kTreeMagic1 == sizeof kTreeMagic);

// A long list keeps this many of its most frequent types in order of
// count (its head): a range asking for the top N < this reads N entries of
// it rather than the whole list.
constexpr uint32_t kHeadLength = 1024;

// Most frequent first; ties in order of type.
constexpr auto kByCount = [](const std::pair<uint32_t, uint32_t>& a,
                             const std::pair<uint32_t, uint32_t>& b) {
  return a.second != b.second ? a.second > b.second : a.first < b.first;
};

// The bottom-up shape's nodes per level, leaves first, for n > 0 samples;
// and where each level starts in the breadth-first layout (the root at 0).
std::vector<uint64_t> LevelCounts(uint64_t n, uint64_t m, uint64_t fan) {
  std::vector<uint64_t> count{(n + m - 1) / m};
  while (count.back() > 1) count.push_back((count.back() + fan - 1) / fan);
  return count;
}
std::vector<uint64_t> LevelStarts(const std::vector<uint64_t>& count) {
  std::vector<uint64_t> start(count.size());
  uint64_t at = 0;
  for (size_t k = count.size(); k-- > 0;) {
    start[k] = at;
    at += count[k];
  }
  return start;
}

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
    t.MakeHeads();
  }
  return t;
}

void TimeTree::Shape() {
  nodes_.clear();
  top_.clear();
  heads_.clear();
  if (times_.empty()) return;
  const uint64_t n = times_.size(), m = options_.leaf_samples, fan = options_.fanout;
  if (version_ == 1) {
    // Top down: a node of at least M samples splits into N of equal size.
    nodes_.push_back({0, static_cast<uint32_t>(n)});
    for (size_t i = 0; i < nodes_.size(); ++i) {
      const uint32_t lo = nodes_[i].lo, hi = nodes_[i].hi, k = hi - lo;
      if (k < m || k < fan) continue;  // a leaf
      nodes_[i].first_child = static_cast<uint32_t>(nodes_.size());
      nodes_[i].children = static_cast<uint32_t>(fan);
      for (uint32_t c = 0; c < fan; ++c) {
        const uint64_t a = lo + uint64_t{k} * c / fan, b = lo + uint64_t{k} * (c + 1) / fan;
        nodes_.push_back({static_cast<uint32_t>(a), static_cast<uint32_t>(b)});
      }
    }
  } else {
    // Bottom up: leaves of M samples in order, each N consecutive nodes of
    // a level under one parent (the last with what is left), up to one
    // root; laid out breadth first from the root. A node is complete, and
    // its list final, once its samples are: what lets it be built as the
    // samples arrive (TimeTreeBuilder).
    const std::vector<uint64_t> count = LevelCounts(n, m, fan), start = LevelStarts(count);
    nodes_.resize(start[0] + count[0]);
    for (uint64_t j = 0; j < count[0]; ++j) {
      Node& leaf = nodes_[start[0] + j];
      leaf.lo = static_cast<uint32_t>(j * m);
      leaf.hi = static_cast<uint32_t>(std::min(n, (j + 1) * m));
    }
    for (size_t k = 1; k < count.size(); ++k) {
      for (uint64_t j = 0; j < count[k]; ++j) {
        Node& nd = nodes_[start[k] + j];
        const uint64_t c0 = j * fan, c1 = std::min(count[k - 1], c0 + fan);
        nd.first_child = static_cast<uint32_t>(start[k - 1] + c0);
        nd.children = static_cast<uint32_t>(c1 - c0);
        nd.lo = nodes_[nd.first_child].lo;
        nd.hi = nodes_[nd.first_child + nd.children - 1].hi;
      }
    }
  }
  for (Node& nd : nodes_) {  // kept on the node: a range reads no sample to skip it
    nd.first = times_[nd.lo];
    nd.last = times_[nd.hi - 1];
  }
}

TimeTree::Counts TimeTree::Fill(uint32_t node, std::vector<Counts>* lists, unsigned spare) {
  const Node nd = nodes_[node];
  Counts all;
  if (nd.leaf()) return TimeTreeBuilder::CountsOf(types_.data() + nd.lo, nd.hi - nd.lo);
  // With threads to spare and enough samples to be worth one, the first
  // half of the children are filled on another thread.
  const uint32_t fan = nd.children;
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
  Node& filled = nodes_[node];
  filled.listed =
      KeepList(all, filled.hi - filled.lo, options_.keep_fraction, &(*lists)[node], &filled.other);
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

bool TimeTree::KeepList(const Counts& all, uint64_t total, double keep_fraction, Counts* list,
                        uint64_t* other) {
  const auto want = static_cast<uint64_t>(std::ceil(keep_fraction * total - 1e-9));
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
  if (kept * 4 > total) return false;  // a list as long as the samples: the children answer
  for (const auto& [type, c] : all) {  // already in order of type
    if (c > threshold || (c == threshold && at_threshold > 0)) {
      if (c == threshold) --at_threshold;
      list->emplace_back(type, c);
    }
  }
  *other = total - covered;
  return true;
}

void TimeTree::MakeHeads() {
  heads_.clear();
  std::vector<std::pair<uint32_t, uint32_t>> scratch;
  for (Node& nd : nodes_) {
    nd.head_begin = nd.head_end = static_cast<uint32_t>(heads_.size());
    if (!nd.listed) continue;
    // A type the list left out has at most its least count; an empty list
    // bounds nothing below the node's size.
    nd.least = nd.hi - nd.lo;
    for (uint32_t i = nd.top_begin; i < nd.top_end; ++i)
      nd.least = std::min(nd.least, top_[i].second);
    if (nd.top_end - nd.top_begin <= kHeadLength) continue;
    scratch.assign(top_.begin() + nd.top_begin, top_.begin() + nd.top_end);
    std::nth_element(scratch.begin(), scratch.begin() + kHeadLength, scratch.end(), kByCount);
    scratch.resize(kHeadLength);
    std::sort(scratch.begin(), scratch.end(), kByCount);
    heads_.insert(heads_.end(), scratch.begin(), scratch.end());
    nd.head_end = static_cast<uint32_t>(heads_.size());
  }
}

// One range report's state: what is asked, the answer, and the per-query
// scratch: a count per type (a range holds fewer than 2^32 samples), and
// which were touched. Adding is branch-free, so that the loads of
// scattered counts overlap.
struct TimeTree::Query {
  uint64_t t1 = 0, t2 = 0;
  RangeQuery want;
  RangeCounts* out = nullptr;
  uint32_t* dense = nullptr;
  uint32_t* touched = nullptr;  // room for every type, and one more
  size_t ntouched = 0;
  std::vector<uint32_t>* merged = nullptr;  // the nodes wholly inside, merged after the walk
  // With top N: what a type needs in one merged node to be taken from its
  // list. The N-th count of the merged node whose head has the largest
  // one: its N types have at least that in the range, so none of the
  // range's top N has less.
  uint32_t floor = 0;
  void Add(uint32_t type, uint32_t n) {
    uint32_t& c = dense[type];
    touched[ntouched] = type;
    ntouched += c == 0;
    c += n;
  }
};

RangeCounts TimeTree::Range(uint64_t t1, uint64_t t2, const RangeQuery& want) const {
  RangeCounts out;
  if (nodes_.empty() || t1 > t2) return out;
  thread_local std::vector<uint32_t> dense_scratch, touched_scratch;
  if (dense_scratch.size() < size_t{max_type_} + 1) {
    dense_scratch.resize(size_t{max_type_} + 1);
    touched_scratch.resize(size_t{max_type_} + 2);
  }
  thread_local std::vector<uint32_t> merged;
  merged.clear();
  Query q{t1, t2, want, &out, dense_scratch.data(), touched_scratch.data()};
  q.merged = &merged;
  if (q.want.exact) q.want.top = 0;
  Visit(0, &q);
  const uint32_t top = q.want.top;
  for (uint32_t node : merged) {
    const Node& nd = nodes_[node];
    if (top > 0 && nd.head_end - nd.head_begin > top) {
      q.floor = std::max(q.floor, heads_[nd.head_begin + top - 1].second);
    }
  }
  for (uint32_t node : merged) Merge(nodes_[node], &q);
  uint32_t* const dense = q.dense;
  uint32_t* const touched = q.touched;
  uint32_t* const touched_end = touched + q.ntouched;
  if (q.want.top > 0) {
    // The N most frequent, selected as keys that order by count, then by
    // type (a count is below 2^32 samples, a type below 2^24); not sorted,
    // which would cost as much again.
    static_assert(kMaxTimeTreeTypes == 1u << 24);
    // Only types at least as frequent as `floor` can be among them: a
    // merged node that gave N types gave each at least its N-th count.
    thread_local std::vector<uint64_t> keys;
    if (keys.size() < q.ntouched) keys.resize(q.ntouched);
    const bool cut = q.ntouched > q.want.top;
    const uint32_t floor = cut ? q.floor : 0;
    size_t k = 0;
    for (const uint32_t* t = touched; t != touched_end; ++t) {  // branch-free
      keys[k] = uint64_t{dense[*t]} << 24 | (kMaxTimeTreeTypes - 1 - *t);
      k += dense[*t] >= floor;
      dense[*t] = 0;
    }
    const auto end = keys.begin() + static_cast<ptrdiff_t>(std::min<size_t>(k, q.want.top));
    if (k > q.want.top) {
      std::nth_element(keys.begin(), end, keys.begin() + static_cast<ptrdiff_t>(k),
                       std::greater<>());
    }
    uint64_t listed = 0, least = UINT64_MAX;
    out.by_type.reserve(static_cast<size_t>(end - keys.begin()));
    for (auto it = keys.begin(); it != end; ++it) {
      const uint64_t count = *it >> 24;
      out.by_type.emplace_back(kMaxTimeTreeTypes - 1 - (*it & (kMaxTimeTreeTypes - 1)), count);
      listed += count;
      least = std::min(least, count);
    }
    out.other = out.samples - listed;
    // A type left out was seen at most as often as the least one listed
    // (never, when every type seen is listed), and may be short by the bound.
    out.other_at_most = std::min(out.other, (cut ? least : 0) + out.bound);
    return out;
  }
  out.other_at_most = std::min(out.other, out.bound);
  const size_t n = q.ntouched;
  out.by_type.reserve(n);
  if (n * 16 > max_type_) {  // many: in order by walking them all
    for (uint32_t t = 0; t <= max_type_; ++t) {
      if (dense[t] != 0) out.by_type.emplace_back(t, dense[t]);
    }
    for (const uint32_t* t = touched; t != touched_end; ++t) dense[*t] = 0;
    return out;
  }
  std::sort(touched, touched_end);
  for (const uint32_t* t = touched; t != touched_end; ++t) {
    out.by_type.emplace_back(*t, dense[*t]);
    dense[*t] = 0;
  }
  return out;
}

void TimeTree::Visit(uint32_t node, Query* q) const {
  const Node& nd = nodes_[node];
  if (nd.last < q->t1 || nd.first > q->t2) return;
  const bool whole = q->t1 <= nd.first && nd.last <= q->t2;
  if (nd.leaf()) {
    uint32_t lo = nd.lo, hi = nd.hi;
    if (!whole) {
      lo = static_cast<uint32_t>(std::lower_bound(times_.begin() + lo, times_.begin() + hi, q->t1) -
                                 times_.begin());
      hi = static_cast<uint32_t>(std::upper_bound(times_.begin() + lo, times_.begin() + hi, q->t2) -
                                 times_.begin());
    }
    for (uint32_t i = lo; i < hi; ++i) q->Add(types_[i], 1);
    q->out->samples += hi - lo;
    q->out->samples_scanned += hi - lo;
    ++q->out->leaves_scanned;
    return;
  }
  if (!whole || !nd.listed) {
    for (uint32_t c = 0; c < nd.children; ++c) Visit(nd.first_child + c, q);
    return;
  }
  q->merged->push_back(static_cast<uint32_t>(&nd - nodes_.data()));
}

void TimeTree::Merge(const Node& nd, Query* q) const {
  RangeCounts& out = *q->out;
  const uint64_t size = nd.hi - nd.lo;
  ++out.nodes_merged;
  out.samples += size;
  const uint32_t top = q->want.top;
  if (top > 0 && nd.head_end - nd.head_begin > top) {
    // The head's types down to the floor, at most N; a type after them
    // has at most the next one's count here (and at most what they leave
    // of the node).
    const auto* h = heads_.data() + nd.head_begin;
    uint64_t taken = 0;
    uint32_t i = 0;
    for (; i < top && h[i].second >= q->floor; ++i) {
      q->Add(h[i].first, h[i].second);
      taken += h[i].second;
    }
    out.entries_merged += i;
    out.bound += std::min<uint64_t>(h[i].second, size - taken);
    return;
  }
  if (top > 0 && q->floor > 1) {
    // A short list: its types down to the floor, read in order of type.
    uint64_t taken = 0;
    uint32_t skipped = nd.other > 0 ? nd.least : 0;  // the most a type left out has here
    for (uint32_t i = nd.top_begin; i < nd.top_end; ++i) {
      const auto [type, c] = top_[i];
      if (c >= q->floor) {
        q->Add(type, c);
        taken += c;
        ++out.entries_merged;
      } else {
        skipped = std::max(skipped, c);
      }
    }
    out.bound += std::min<uint64_t>(skipped, size - taken);
    return;
  }
  const auto* begin = top_.data() + nd.top_begin;
  const auto* end = top_.data() + nd.top_end;
  for (const auto* p = begin; p != end; ++p) q->Add(p->first, p->second);
  out.entries_merged += nd.top_end - nd.top_begin;
  if (nd.other == 0) return;
  if (!q->want.exact) {
    out.other += nd.other;
    out.bound += std::min<uint64_t>(nd.least, nd.other);
    return;
  }
  // The types the list left out, from the node's samples (the list's
  // types marked for the scan).
  thread_local std::vector<uint8_t> listed;
  if (listed.size() < size_t{max_type_} + 1) listed.resize(size_t{max_type_} + 1);
  for (const auto* p = begin; p != end; ++p) listed[p->first] = 1;
  for (uint32_t i = nd.lo; i < nd.hi; ++i) {
    if (!listed[types_[i]]) q->Add(types_[i], 1);
  }
  for (const auto* p = begin; p != end; ++p) listed[p->first] = 0;
  out.samples_scanned += size;
}

void TimeTree::MakeTimesRelative(uint64_t origin) {
  const auto rel = [origin](uint64_t t) { return t >= origin ? t - origin : 0; };
  for (uint64_t& t : times_) t = rel(t);
  for (Node& nd : nodes_) {
    nd.first = rel(nd.first);
    nd.last = rel(nd.last);
  }
}

std::vector<TimeTree::NodeView> TimeTree::NodeViews() const {
  std::vector<NodeView> out;
  out.reserve(nodes_.size());
  for (const Node& nd : nodes_) {
    out.push_back(
        {nd.lo, nd.hi, nd.first_child, nd.children, nd.listed, nd.top_begin, nd.top_end, nd.other});
  }
  return out;
}

std::string TimeTree::Encode() const {
  std::string out(version_ == 1 ? kTreeMagic1 : kTreeMagic, kTreeMagicSize);
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
  TimeTree t;
  if (in.substr(0, kTreeMagicSize) == std::string_view(kTreeMagic1, kTreeMagicSize)) {
    t.version_ = 1;
  } else if (in.substr(0, kTreeMagicSize) != std::string_view(kTreeMagic, kTreeMagicSize)) {
    return DataLoss("not a time tree (bad magic)");
  }
  in.remove_prefix(kTreeMagicSize);
  uint64_t n = 0, m = 0, fan = 0, p_bits = 0;
  if (!GetVarint(&in, &n) || !GetVarint(&in, &m) || !GetVarint(&in, &fan) ||
      !GetVarint(&in, &p_bits)) {
    return DataLoss("time tree: truncated header");
  }
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
  t.MakeHeads();
  return t;
}

TimeTreeBuilder::Counts TimeTreeBuilder::CountsOf(const uint32_t* types, size_t n) {
  std::vector<uint32_t> ts(types, types + n);
  std::sort(ts.begin(), ts.end());
  Counts all;
  for (uint32_t t : ts) {
    if (!all.empty() && all.back().first == t) {
      ++all.back().second;
    } else {
      all.emplace_back(t, 1);
    }
  }
  return all;
}

Status TimeTreeBuilder::Append(uint64_t time, uint32_t type) {
  if (times_.empty()) FP_RETURN_IF_ERROR(CheckTimeTreeOptions(options_));
  if (!times_.empty() && time < times_.back()) {
    return InvalidArgument("samples must come in order of time");
  }
  if (type >= kMaxTimeTreeTypes) {
    return InvalidArgument("sample type " + std::to_string(type) + " is not below " +
                           std::to_string(kMaxTimeTreeTypes) + ": intern the types");
  }
  if (times_.size() + 1 >= (uint64_t{1} << 32)) return TooLarge("over 4G samples in one tree");
  times_.push_back(time);
  types_.push_back(type);
  const uint32_t m = options_.leaf_samples;
  if (times_.size() % m == 0) Completed(0, CountsOf(types_.data() + types_.size() - m, m));
  return Status::Ok();
}

void TimeTreeBuilder::Completed(size_t level, Counts counts) {
  if (waiting_.size() <= level + 1) {
    waiting_.resize(level + 2);
    done_.resize(level + 2);
  }
  waiting_[level].push_back(std::move(counts));
  if (waiting_[level].size() < options_.fanout) return;
  // Its parent is complete: its counts are its children's, its list final.
  Counts all = std::move(waiting_[level].front());
  for (size_t c = 1; c < waiting_[level].size(); ++c) {
    all = TimeTree::MergeCounts(all, waiting_[level][c]);
  }
  waiting_[level].clear();
  uint64_t total = 0;
  for (const auto& [type, c] : all) total += c;
  Done d;
  d.listed = TimeTree::KeepList(all, total, options_.keep_fraction, &d.list, &d.other);
  done_[level + 1].push_back(std::move(d));
  Completed(level + 1, std::move(all));
}

size_t TimeTreeBuilder::complete_nodes() const {
  size_t n = 0;
  for (const auto& level : done_) n += level.size();
  return n;
}

StatusOr<TimeTree> TimeTreeBuilder::Tree() const {
  FP_RETURN_IF_ERROR(CheckTimeTreeOptions(options_));
  TimeTree t;
  t.options_ = options_;
  t.times_ = times_;
  t.types_ = types_;
  for (uint32_t ty : t.types_) t.max_type_ = std::max(t.max_type_, ty);
  t.Shape();
  if (times_.empty()) return t;
  const uint64_t n = times_.size(), m = options_.leaf_samples;
  const std::vector<uint64_t> count = LevelCounts(n, m, options_.fanout);
  const std::vector<uint64_t> start = LevelStarts(count);
  // The last node of each level, when not complete: its counts are its
  // complete children's and its own last child's (the partial leaf's at
  // the bottom).
  std::vector<Done> open(count.size());
  Counts last;
  bool partial = n % m != 0;
  if (partial) last = CountsOf(types_.data() + (n - n % m), n % m);
  for (size_t k = 1; k < count.size(); ++k) {
    const size_t complete = k < done_.size() ? done_[k].size() : 0;
    if (complete == count[k]) {
      partial = false;
      continue;
    }
    Counts all = partial ? std::move(last) : Counts{};
    if (k - 1 < waiting_.size()) {
      for (const Counts& c : waiting_[k - 1]) all = TimeTree::MergeCounts(all, c);
    }
    const TimeTree::Node& nd = t.nodes_[start[k] + count[k] - 1];
    open[k].listed = TimeTree::KeepList(all, nd.hi - nd.lo, options_.keep_fraction, &open[k].list,
                                        &open[k].other);
    last = std::move(all);
    partial = true;
  }
  // The lists in the order of the nodes (the root's level first).
  for (size_t k = count.size(); k-- > 1;) {
    for (uint64_t j = 0; j < count[k]; ++j) {
      const size_t complete = k < done_.size() ? done_[k].size() : 0;
      const Done& d = j < complete ? done_[k][j] : open[k];
      TimeTree::Node& nd = t.nodes_[start[k] + j];
      nd.listed = d.listed;
      nd.other = d.other;
      nd.top_begin = static_cast<uint32_t>(t.top_.size());
      for (const auto& [type, c] : d.list) t.top_.emplace_back(type, static_cast<uint32_t>(c));
      nd.top_end = static_cast<uint32_t>(t.top_.size());
    }
  }
  t.MakeHeads();
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

}  // namespace fieldprof::tools
