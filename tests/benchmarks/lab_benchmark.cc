// The lab, measured (docs/benchmarks-history.md):
//  1. a sqlite3 workload profiled by the real `fieldprof lab`: the APIs
//     found, the timing runs used against the APIs (and the least number of
//     sets any plan could use), the total time against the plain workload's;
//  2. how far the lab's timing of a function differs from timing that
//     function alone: the scenario's APIs (tests/tools/lab/) in a lab
//     profile, against `fieldprof run --force API` (the field runtime, that
//     one API measured, nothing else probed) and against the program timing
//     its own calls with no probe at all.
//
//   lab_benchmark [CALLS=20000] [REPEAT=3]
#include <sys/wait.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <map>
#include <set>
#include <string>
#include <vector>

#include "common/spool/spool.h"
#include "common/statistics/histogram.h"
#include "common/wire/wire.h"
#include "tools/shared/lab_profile.h"

namespace {

namespace fs = std::filesystem;
using fieldprof::HistogramFromWire;

double Seconds(const std::string& cmd) {
  const auto t0 = std::chrono::steady_clock::now();
  const int rc = std::system(cmd.c_str());
  const double s = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  if (rc != 0) std::fprintf(stderr, "lab_benchmark: '%s' exited %d\n", cmd.c_str(), rc);
  return s;
}

std::string Output(const std::string& cmd) {
  std::string out;
  FILE* p = popen(cmd.c_str(), "r");
  if (p == nullptr) return out;
  char buf[4096];
  size_t n;
  while ((n = fread(buf, 1, sizeof buf, p)) > 0) out.append(buf, n);
  pclose(p);
  return out;
}

double Median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  return v.empty() ? 0 : v[v.size() / 2];
}

// Mean wall time per API (by symbol) of the profile.
std::map<std::string, double> LabMeans(const fieldprof::wire::LabProfile& p) {
  std::map<std::string, fieldprof::Histogram> h;
  for (const auto& r : p.records()) {
    if (r.key().metric() == fieldprof::wire::METRIC_WALL_TIME_NS) {
      h[r.key().symbol()].Merge(HistogramFromWire(r.histogram()));
    }
  }
  std::map<std::string, double> out;
  for (const auto& [s, hist] : h) out[s] = hist.Mean();
  return out;
}

}  // namespace

int main(int argc, char** argv) {
  const long calls = argc > 1 ? std::atol(argv[1]) : 20000;
  const int repeat = argc > 2 ? std::atoi(argv[2]) : 3;
  const std::string cli = FIELDPROF_CLI_BIN, prog = FIELDPROF_LABPROG;
  std::string tmpl = (fs::temp_directory_path() / "fieldprof-labbench-XXXXXX").string();
  if (mkdtemp(tmpl.data()) == nullptr) return 1;
  const std::string dir = tmpl;

  // 1. sqlite3.
  const std::string sql =
      "create table t(a integer primary key, b text, c real); "
      "with recursive n(x) as (select 1 union all select x+1 from n where x<50000) "
      "insert into t select x, hex(randomblob(12)), x*0.5 from n; "
      "create index tb on t(b); "
      "select count(*), sum(c), max(b) from t where a % 7 = 3; "
      "select b from t where b like 'A%' order by b limit 5; "
      "update t set c = c + 1 where a % 11 = 0; delete from t where a % 13 = 0; "
      "select count(*) from t;";
  const std::string workload = "sqlite3 :memory: \"" + sql + "\" > /dev/null";
  std::vector<double> plain;
  for (int i = 0; i < 5; ++i) plain.push_back(Seconds(workload));
  const double plain_s = Median(plain);
  const std::string profile = dir + "/sqlite3.labprofile";
  const double lab_s = Seconds(cli + " lab --repeat " + std::to_string(repeat) + " -o " + profile +
                               " -- " + workload + " 2>/dev/null");
  auto p = fieldprof::tools::ReadLabProfile(profile);
  if (!p.ok()) {
    std::fprintf(stderr, "lab_benchmark: %s\n", p.status().message().c_str());
    return 1;
  }
  std::set<std::string> modules;
  for (const auto& a : p->apis()) modules.insert(a.module());
  double census_s = 0, timing_s = 0;
  for (const auto& pass : p->passes()) {
    (pass.set() == 0 ? census_s : timing_s) += static_cast<double>(pass.wall_ns()) / 1e9;
  }
  std::printf("sqlite3 workload (50,000 rows: insert, index, queries, update, delete)\n");
  std::printf("  plain run                 %8.3f s (median of 5)\n", plain_s);
  std::printf("  APIs found                %8d in %zu modules, %d nested pairs\n", p->apis_size(),
              modules.size(), p->edges_size());
  std::printf("  timing sets               %8u (no plan can use fewer than %u), x%d\n",
              p->timing_sets(), p->min_sets(), repeat);
  std::printf("  runs                      %8d (1 census + %u x %d), against %d APIs\n",
              p->passes_size(), p->timing_sets(), repeat, p->apis_size());
  std::printf("  census run                %8.3f s  = %.2fx the plain run\n", census_s,
              census_s / plain_s);
  std::printf("  timing runs               %8.3f s  = %.2fx their plain time (%d runs)\n", timing_s,
              timing_s / (plain_s * (p->passes_size() - 1)), p->passes_size() - 1);
  std::printf("  fieldprof lab in all      %8.3f s  = %.2fx one plain run\n\n", lab_s,
              lab_s / plain_s);

  // 2. Timing accuracy.
  const std::string lab2 = dir + "/scenario.labprofile";
  Seconds(cli + " lab --repeat " + std::to_string(repeat) + " -o " + lab2 + " -- " + prog + " " +
          std::to_string(calls) + " > /dev/null 2>&1");
  auto p2 = fieldprof::tools::ReadLabProfile(lab2);
  if (!p2.ok()) return 1;
  const std::map<std::string, double> lab = LabMeans(*p2);
  std::map<std::string, double> self;
  for (int i = 0; i < repeat; ++i) {
    const std::string out = Output(prog + " --selftime " + std::to_string(calls));
    size_t at = 0;
    while (at < out.size()) {
      const size_t nl = out.find('\n', at);
      const std::string line = out.substr(at, nl - at);
      const size_t sp = line.find(' ');
      if (sp != std::string::npos) {
        const double v = std::atof(line.c_str() + sp + 1);
        const std::string name = line.substr(0, sp);
        self[name] = i == 0 ? v : std::min(self[name], v);
      }
      if (nl == std::string::npos) break;
      at = nl + 1;
    }
  }
  std::printf("timing one function: the lab against that function timed alone (%ld calls a run)\n",
              calls);
  std::printf("  %-18s %12s %12s %12s %10s %10s\n", "API", "no probe", "field alone", "lab",
              "lab-alone", "lab-none");
  for (const auto& [api, self_ns] : self) {
    const std::string spool = dir + "/spool-" + api;
    fs::create_directories(spool);
    for (int i = 0; i < repeat; ++i) {
      Seconds(cli + " run --force " + api + " --apis 1 --max_load 1000000 --budget 1000 " +
              "--slots 1000 --spool " + spool + " -- " + prog + " " + std::to_string(calls) +
              " > /dev/null 2>&1");
    }
    fieldprof::Histogram alone;
    auto files = fieldprof::ListSpool(spool);
    if (files.ok()) {
      for (const auto& f : *files) {
        auto run = fieldprof::ReadRunRecord(f.path);
        if (!run.ok()) continue;
        for (const auto& r : run->records()) {
          if (r.key().symbol() == api && r.key().metric() == fieldprof::wire::METRIC_WALL_TIME_NS)
            alone.Merge(HistogramFromWire(r.histogram()));
        }
      }
    }
    const double l = lab.count(api) ? lab.at(api) : 0;
    std::printf("  %-18s %9.1f ns %9.1f ns %9.1f ns %+7.1f ns %+7.1f ns\n", api.c_str(), self_ns,
                alone.Mean(), l, l - alone.Mean(), l - self_ns);
  }
  std::error_code ec;
  fs::remove_all(dir, ec);
  return 0;
}
