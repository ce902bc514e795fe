// Whole-process cost, variants interleaved: runs each command line once per
// round, ROUNDS rounds (after 5 warm-up rounds, or ROUNDS when fewer: a
// smoke run), and prints each variant's mean and median and its mean
// difference from the first, with a 95% confidence interval. Interleaving
// puts every variant under the same moment of a shared machine, which
// back-to-back runs (hyperfine's) do not: on a noisy VM their spread hides
// a 0.1 ms difference.
//
//   spawn_bench [--unit "CMD ARGS..."] ROUNDS "CMD ARGS..." ["VAR=VALUE ... CMD ARGS..."]...
//
// Leading VAR=VALUE words are added to the environment; stdout goes to
// /dev/null. Commands are split at spaces (no quoting). Each difference is
// also printed as a share of the first variant's mean, and with --unit,
// in units of that command's mean (run once each round, in the same
// rounds): a plain `true` makes "spawns", a figure that carries from one
// machine to another, where milliseconds differ twofold.
#include <fcntl.h>
#include <spawn.h>
#include <sys/wait.h>
#include <time.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <sstream>
#include <string>
#include <vector>

extern char** environ;

namespace {

double NowMs() {
  timespec t;
  clock_gettime(CLOCK_MONOTONIC, &t);
  return t.tv_sec * 1e3 + t.tv_nsec / 1e6;
}

struct Variant {
  std::string text;
  std::vector<std::string> args, env;
  std::vector<double> ms;
};

}  // namespace

int main(int argc, char** argv) {
  int first = 1;
  const char* unit = nullptr;
  if (argc > 2 && std::string(argv[1]) == "--unit") {
    unit = argv[2];
    first = 3;
  }
  if (argc < first + 2) {
    fprintf(stderr,
            "usage: spawn_bench [--unit \"CMD ARGS...\"] ROUNDS \"CMD ARGS...\" "
            "[\"VAR=VALUE CMD ARGS...\"]...\n");
    return 2;
  }
  const int rounds = atoi(argv[first]);
  if (rounds < 2) {
    fprintf(stderr, "spawn_bench: ROUNDS must be at least 2\n");
    return 2;
  }
  std::vector<Variant> vs;
  auto add = [&vs](const char* text) {
    Variant v;
    v.text = text;
    std::istringstream words(v.text);
    for (std::string w; words >> w;) {
      if (v.args.empty() && w.find('=') != std::string::npos) {
        v.env.push_back(w);
      } else {
        v.args.push_back(w);
      }
    }
    if (v.args.empty()) {
      fprintf(stderr, "spawn_bench: no command in '%s'\n", text);
      return false;
    }
    vs.push_back(v);
    return true;
  };
  for (int i = first + 1; i < argc; ++i) {
    if (!add(argv[i])) return 2;
  }
  // The unit runs last in each round, as one more variant, not printed.
  const size_t shown = vs.size();
  if (unit != nullptr && !add(unit)) return 2;
  posix_spawn_file_actions_t fa;
  posix_spawn_file_actions_init(&fa);
  posix_spawn_file_actions_addopen(&fa, 1, "/dev/null", O_WRONLY, 0);
  const int warmup = rounds < 5 ? rounds : 5;
  for (int r = 0; r < rounds + warmup; ++r) {
    for (Variant& v : vs) {
      std::vector<char*> args, env;
      for (std::string& a : v.args) args.push_back(a.data());
      args.push_back(nullptr);
      for (char** e = environ; *e; ++e) env.push_back(*e);
      for (std::string& e : v.env) env.push_back(e.data());
      env.push_back(nullptr);
      pid_t pid;
      const double t0 = NowMs();
      if (posix_spawnp(&pid, args[0], &fa, nullptr, args.data(), env.data()) != 0) {
        perror(args[0]);
        return 1;
      }
      int st = 0;
      waitpid(pid, &st, 0);
      const double dt = NowMs() - t0;
      if (!WIFEXITED(st) || WEXITSTATUS(st) != 0) {
        fprintf(stderr, "spawn_bench: '%s' failed (status %d)\n", v.text.c_str(), st);
        return 1;
      }
      if (r >= warmup) v.ms.push_back(dt);
    }
  }
  auto mean = [rounds](const Variant& v) {
    double sum = 0;
    for (int r = 0; r < rounds; ++r) sum += v.ms[r];
    return sum / rounds;
  };
  const double first_mean = mean(vs[0]);
  const double unit_mean = unit != nullptr ? mean(vs.back()) : 0;
  if (unit != nullptr) {
    printf("unit: a spawn of '%s', mean %.3f ms\n", unit, unit_mean);
  }
  for (size_t i = 0; i < shown; ++i) {
    const Variant& v = vs[i];
    // The difference from the first variant, and in units: each round's
    // difference over that round's unit, so the unit's own spread is in
    // the interval.
    double d = 0, dd = 0, u = 0, uu = 0;
    for (int r = 0; r < rounds; ++r) {
      const double x = v.ms[r] - vs[0].ms[r];
      d += x;
      dd += x * x;
      if (unit != nullptr) {
        const double y = x / vs.back().ms[r];
        u += y;
        uu += y * y;
      }
    }
    const auto interval = [rounds](double sum, double squares) {
      const double m = sum / rounds;
      return 1.96 * std::sqrt(std::max(0.0, (squares - rounds * m * m) / (rounds - 1))) /
             std::sqrt(rounds);
    };
    const double md = d / rounds;
    std::vector<double> sorted = v.ms;
    std::sort(sorted.begin(), sorted.end());
    printf("mean %8.3f ms  median %8.3f  added %+7.3f ms ± %.3f (95%%) %+6.1f%%", mean(v),
           sorted[rounds / 2], md, interval(d, dd), 100 * md / first_mean);
    if (unit != nullptr) printf(" %+7.3f ± %.3f spawns", u / rounds, interval(u, uu));
    printf("  | %s\n", v.text.c_str());
  }
}
