#include "tools/check/check_render.h"

#include <nlohmann/json.hpp>

#include "common/base/json_writer.h"
#include "tools/shared/escape.h"
#include "tools/shared/format.h"
#include "tools/shared/lab_profile.h"

namespace fieldprof::tools {
namespace {

std::string Value(const CheckOptions& o, double v) { return FormatMetricValue(o.metric, v); }

void WriteSide(JsonWriter& j, const char* name, const Histogram& h, uint64_t runs) {
  const HistogramStats s = h.Stats();
  j.Key(name).BeginObject();
  j.Key("calls").Uint(s.count).Key("runs").Uint(runs);
  j.Key("mean").Double(s.mean).Key("p50").Double(s.p50).Key("p90").Double(s.p90);
}

void WriteFinding(JsonWriter& j, const Finding& f, const std::vector<wire::LabProfile>& profiles) {
  j.BeginObject();
  j.Key("module").String(f.module).Key("symbol").String(f.symbol);
  j.Key("evidence").Bool(f.evidence);
  if (f.resolution_ns != 0) j.Key("resolution_ns").Uint(f.resolution_ns);
  j.Key("p_value").Double(f.test.p_value).Key("adjusted_p").Double(f.adjusted);
  j.Key("resamples").Int(f.test.resamples);
  j.Key("excess").Double(f.excess).Key("statistic_difference").Double(f.test.observed);
  WriteSide(j, "local", f.local, f.local_runs);
  j.EndObject();
  WriteSide(j, "field", f.field, f.field_runs);
  j.Key("platform_match").String(kWidened[f.match]);
  j.Key("suspect").Bool(!f.field_suspect.empty());
  if (!f.field_suspect.empty()) j.Key("suspect_reason").String(f.field_suspect);
  j.EndObject();
  if (!profiles.empty()) {
    // Where it sits in the lab profiles' call stacks, outermost first.
    j.Key("stacks").BeginArray();
    for (const wire::LabProfile& lp : profiles) {
      for (const auto& stack : LabStacks(lp, f.module, f.symbol)) {
        j.BeginArray();
        for (const std::string& a : stack) j.String(a);
        j.EndArray();
      }
    }
    j.EndArray();
  }
  j.EndObject();
}

void PrintHeader(std::FILE* out, const CheckResult& r, const CheckOptions& o, int bad_files) {
  const AnalysisOptions& a = o.analysis;
  std::fprintf(out,
               "%zu APIs compared on %s (%s, %s); %d without field data, %d with under %.0f "
               "calls.\n",
               r.findings.size(), o.metric_name.c_str(), o.statistic.c_str(),
               a.dependent ? "Benjamini-Yekutieli" : "Benjamini-Hochberg", r.no_field, r.few_calls,
               a.min_calls);
  if (bad_files > 0) {
    std::fprintf(out, "%d record file(s) could not be read (see above).\n", bad_files);
  }
  if (r.under_resolution > 0) {
    std::fprintf(out,
                 "%d API(s) differ significantly by less than --min_diff_ns or twice the timing "
                 "resolution: not counted as evidence.\n",
                 r.under_resolution);
  }
  if (r.under_effect > 0) {
    std::fprintf(out,
                 "%d API(s) differ significantly by less than --min_effect (%.0f%%): not "
                 "counted.\n",
                 r.under_effect, 100 * a.min_effect);
  }
}

}  // namespace

std::vector<const Finding*> ShownFindings(const CheckResult& r, bool all) {
  std::vector<const Finding*> shown;
  for (const Finding& f : r.findings) {
    if (f.evidence || all) shown.push_back(&f);
  }
  return shown;
}

std::string FindingSummary(const Finding& f, const CheckOptions& o) {
  const HistogramStats l = f.local.Stats(), fl = f.field.Stats();
  char p[64];
  std::snprintf(p, sizeof p, "%.4g", f.adjusted);
  return f.module + ":" + f.symbol + " costs you " + Value(o, l.mean - fl.mean) +
         " more per call than the field (" + o.metric_name + " p50 " + Value(o, l.p50) +
         " against " + Value(o, fl.p50) + ", p90 " + Value(o, l.p90) + " against " +
         Value(o, fl.p90) + "; " + FormatCount(l.count) + " calls against " +
         FormatCount(fl.count) + "; adjusted p " + p + "); excess " + Value(o, f.excess) +
         " in all" +
         (f.field_suspect.empty() ? "" : "; the field's figure is suspect: " + f.field_suspect);
}

std::string Fingerprint(const std::string& text) {
  uint64_t h = 1469598103934665603ull;
  for (unsigned char c : text) h = (h ^ c) * 1099511628211ull;
  char out[17];
  std::snprintf(out, sizeof out, "%016llx", static_cast<unsigned long long>(h));
  return out;
}

std::string CheckJson(const CheckResult& r, const CheckOptions& o,
                      const std::vector<wire::LabProfile>& profiles) {
  const AnalysisOptions& a = o.analysis;
  JsonWriter j;
  j.BeginObject();
  j.Key("metric").String(o.metric_name).Key("statistic").String(o.statistic);
  j.Key("fdr").Double(a.fdr);
  j.Key("correction").String(a.dependent ? "benjamini-yekutieli" : "benjamini-hochberg");
  j.Key("seed").Int(static_cast<int64_t>(a.test.seed)).Key("resamples_max").Int(a.test.resamples);
  j.Key("apis_compared").Uint(r.findings.size()).Key("apis_without_field_data").Uint(r.no_field);
  j.Key("apis_with_too_few_calls").Uint(r.few_calls);
  j.Key("apis_under_resolution").Uint(r.under_resolution);
  j.Key("apis_under_min_effect").Uint(r.under_effect).Key("min_effect").Double(a.min_effect);
  j.Key("findings").BeginArray();
  for (const Finding* f : ShownFindings(r, o.all)) WriteFinding(j, *f, profiles);
  j.EndArray();
  j.EndObject();
  return j.Take();
}

// SARIF 2.1.0: one rule, a result per API with evidence, located at the
// record file it was measured in and, logically, at the API.
std::string CheckSarif(const CheckResult& r, const CheckOptions& o) {
  using nlohmann::json;
  json results = json::array();
  for (const Finding& f : r.findings) {
    if (!f.evidence) continue;
    results.push_back(
        {{"ruleId", "fieldprof/api-excess-cost"},
         {"level", "warning"},
         {"message", {{"text", FindingSummary(f, o)}}},
         {"locations",
          {{{"physicalLocation", {{"artifactLocation", {{"uri", f.file}}}}},
            {"logicalLocations",
             {{{"name", f.symbol},
               {"fullyQualifiedName", f.module + ":" + f.symbol},
               {"kind", "function"}}}}}}},
         {"partialFingerprints",
          {{"fieldprofApi/v1", Fingerprint(f.module + ":" + f.symbol + ":" + o.metric_name)}}},
         {"properties",
          {{"pValue", f.test.p_value},
           {"adjustedPValue", f.adjusted},
           {"excess", f.excess},
           {"metric", o.metric_name}}}});
  }
  json rule = {
      {"id", "fieldprof/api-excess-cost"},
      {"name", "ApiCostsMoreThanInTheField"},
      {"shortDescription", {{"text", "An API costs these runs more than it costs the field"}}},
      {"fullDescription",
       {{"text",
         "A one-sided permutation test found the runs' cost of this API greater than the field "
         "distribution's, at the false discovery rate set (Benjamini-Hochberg across APIs)."}}},
      {"defaultConfiguration", {{"level", "warning"}}}};
  json sarif = {
      {"version", "2.1.0"},
      {"runs",
       {{{"tool",
          {{"driver", {{"name", "fieldprof check"}, {"version", "0.1.0"}, {"rules", {rule}}}}}},
         {"results", results}}}}};
  return sarif.dump(2, ' ', false, json::error_handler_t::replace) + "\n";
}

// JUnit XML: a test case per API compared, failed when it has evidence.
std::string CheckJunit(const CheckResult& r, const CheckOptions& o) {
  size_t failures = 0;
  for (const Finding& f : r.findings) failures += f.evidence;
  std::string x = "<?xml version=\"1.0\" encoding=\"UTF-8\"?>\n";
  x += "<testsuites>\n  <testsuite name=\"fieldprof check\" tests=\"" +
       std::to_string(r.findings.size()) + "\" failures=\"" + std::to_string(failures) + "\">\n";
  for (const Finding& f : r.findings) {
    x += "    <testcase classname=\"" + XmlEscape(f.module) + "\" name=\"" + XmlEscape(f.symbol) +
         "\"";
    if (!f.evidence) {
      x += "/>\n";
      continue;
    }
    x += ">\n      <failure message=\"" + XmlEscape(FindingSummary(f, o)) +
         "\" type=\"excess-cost\"/>\n    </testcase>\n";
  }
  x += "  </testsuite>\n</testsuites>\n";
  return x;
}

void PrintCheckText(std::FILE* out, const CheckResult& r, const CheckOptions& o,
                    const std::vector<wire::LabProfile>& profiles, int bad_files, bool tty) {
  PrintHeader(out, r, o, bad_files);
  const std::vector<const Finding*> shown = ShownFindings(r, o.all);
  if (shown.empty()) {
    std::fprintf(out,
                 "No API costs you more than it costs the field (false discovery rate %.2f).\n",
                 o.analysis.fdr);
    return;
  }
  std::fprintf(out, "\n%-40s %12s %12s %12s %12s %9s %9s  %s\n", "API", "yours p50", "field p50",
               "yours p90", "field p90", "p", "adj. p", "calls yours / field");
  for (size_t i = 0; i < shown.size(); ++i) {
    const Finding& f = *shown[i];
    const HistogramStats l = f.local.Stats(), fl = f.field.Stats();
    const bool hot = i < 3 && f.evidence && tty;
    const std::string api = f.module + ":" + f.symbol;
    const std::string widened =
        f.match < kPlatformLevels - 1 ? std::string("  (field: ") + kWidened[f.match] + ")" : "";
    std::fprintf(out, "%s%-40s %12s %12s %12s %12s %9.4f %9.4f  %s / %s%s%s\n",
                 hot ? "\033[1;31m" : "", api.c_str(), Value(o, l.p50).c_str(),
                 Value(o, fl.p50).c_str(), Value(o, l.p90).c_str(), Value(o, fl.p90).c_str(),
                 f.test.p_value, f.adjusted, FormatCount(l.count).c_str(),
                 FormatCount(fl.count).c_str(), hot ? "\033[0m" : "", widened.c_str());
    std::fprintf(out, "%-40s excess %s in all (%s per call)\n", "", Value(o, f.excess).c_str(),
                 Value(o, l.mean - fl.mean).c_str());
    if (!f.field_suspect.empty()) {
      std::fprintf(out, "%-40s %sfield figure SUSPECT%s: %s\n", "", tty ? "\033[1;31m" : "",
                   tty ? "\033[0m" : "", f.field_suspect.c_str());
    }
    // Where it sits, when a lab profile has the nesting graph.
    for (const wire::LabProfile& lp : profiles) {
      PrintLabStacks(out, lp, f.module, f.symbol, std::string(41, ' '));
    }
  }
}

}  // namespace fieldprof::tools
