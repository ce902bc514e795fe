#include "tools/record/pprof_export.h"

#include <unordered_map>

#include "common/net/gzip.h"
#include "tools/record/profile.pb.h"

namespace fieldprof::tools {

namespace {

class Strings {
 public:
  explicit Strings(pprof::Profile* p) : p_(p) { Id(""); }
  int64_t Id(const std::string& s) {
    auto [it, fresh] = ids_.emplace(s, static_cast<int64_t>(p_->string_table_size()));
    if (fresh) p_->add_string_table(s);
    return it->second;
  }

 private:
  pprof::Profile* p_;
  std::unordered_map<std::string, int64_t> ids_;
};

// A function and a location per frame name used (by the caller's id of
// the name), ids from 1, all in mapping 1; what a sample's stack lists.
class Locations {
 public:
  Locations(pprof::Profile* p, Strings* s) : p_(p), s_(s) {}
  uint64_t Of(uint32_t key, const std::string& name) {
    auto [it, fresh] = ids_.emplace(key, ids_.size() + 1);
    if (fresh) {
      pprof::Function* f = p_->add_function();
      f->set_id(it->second);
      f->set_name(s_->Id(name));
      f->set_system_name(f->name());
      pprof::Location* l = p_->add_location();
      l->set_id(it->second);
      l->set_mapping_id(1);
      l->add_line()->set_function_id(it->second);
    }
    return it->second;
  }

 private:
  pprof::Profile* p_;
  Strings* s_;
  std::unordered_map<uint32_t, uint64_t> ids_;
};

}  // namespace

StatusOr<std::string> EncodePprof(const Recording& r, const PprofProfile& in) {
  pprof::Profile p;
  Strings s(&p);
  for (const auto& [type, unit] : in.value_types) {
    pprof::ValueType* v = p.add_sample_type();
    v->set_type(s.Id(type));
    v->set_unit(s.Id(unit));
  }
  p.mutable_period_type()->set_type(s.Id(in.period_type.first));
  p.mutable_period_type()->set_unit(s.Id(in.period_type.second));
  p.set_period(in.period);
  p.set_duration_nanos(in.duration_ns);
  for (const std::string& c : in.comments) p.add_comment(s.Id(c));
  pprof::Mapping* m = p.add_mapping();
  m->set_id(1);
  m->set_filename(s.Id(r.command));
  m->set_has_functions(true);  // symbolised already: pprof need not look
  Locations locations(&p, &s);
  const int64_t thread_key = s.Id("thread");
  for (const PprofSample& in_sample : in.samples) {
    pprof::Sample* sample = p.add_sample();
    const std::vector<uint32_t>& frames = r.stacks[in_sample.stack];
    for (size_t i = frames.size(); i-- > 0;) {  // the leaf first
      sample->add_location_id(locations.Of(frames[i], r.frames[frames[i]]));
    }
    for (int64_t v : in_sample.values) sample->add_value(v);
    pprof::Label* label = sample->add_label();
    label->set_key(thread_key);
    label->set_num(in_sample.tid);
    if (in_sample.stack < in.stack_labels.size() && !in.stack_labels[in_sample.stack].empty()) {
      pprof::Label* over = sample->add_label();
      over->set_key(s.Id("over_field"));
      over->set_str(s.Id(in.stack_labels[in_sample.stack]));
    }
  }
  std::string bytes;
  if (!p.SerializeToString(&bytes)) return Internal("pprof: the profile did not serialise");
  return Gzip(bytes);
}

StatusOr<std::string> EncodePprofTree(const CallTree& t) {
  static constexpr std::pair<const char*, const char*> kTypes[kMetricCount] = {
      {"samples", "count"},     {"time", "nanoseconds"},  {"calls", "count"},
      {"alloc_space", "bytes"}, {"freed_space", "bytes"}, {"alloc_objects", "count"}};
  pprof::Profile p;
  Strings s(&p);
  std::vector<Metric> metrics;
  for (int m = 0; m < kMetricCount; ++m) {
    if (!t.has(static_cast<Metric>(m))) continue;
    metrics.push_back(static_cast<Metric>(m));
    pprof::ValueType* v = p.add_sample_type();
    v->set_type(s.Id(kTypes[m].first));
    v->set_unit(s.Id(kTypes[m].second));
  }
  p.add_comment(s.Id(t.description));
  pprof::Mapping* mapping = p.add_mapping();
  mapping->set_id(1);
  mapping->set_filename(s.Id(t.description));
  mapping->set_has_functions(true);
  Locations locations(&p, &s);
  for (uint32_t n = 1; n < t.size(); ++n) {
    bool any = false;
    for (Metric m : metrics) any |= t.self(n, m) != 0;
    if (!any) continue;
    pprof::Sample* sample = p.add_sample();
    for (uint32_t f = n; f != CallTree::kRoot; f = t.parent(f)) {  // the leaf first
      sample->add_location_id(locations.Of(t.name_id(f), t.name(f)));
    }
    for (Metric m : metrics) sample->add_value(t.self(n, m));
  }
  std::string bytes;
  if (!p.SerializeToString(&bytes)) return Internal("pprof: the profile did not serialise");
  return Gzip(bytes);
}

}  // namespace fieldprof::tools
