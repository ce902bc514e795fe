// Whole-process cost, variants interleaved: runs each command line once per
// round, ROUNDS rounds (after 5 warm-up rounds, or ROUNDS when fewer: a
// smoke run), and prints each variant's mean and median and its mean
// difference from the first, with a 95% confidence interval. Interleaving
// puts every variant under the same moment of a shared machine, which
// back-to-back runs (hyperfine's) do not: on a noisy VM their spread hides
// a 0.1 ms difference.
//
//   spawn_bench ROUNDS "CMD ARGS..." ["VAR=VALUE ... CMD ARGS..."]...
//
// Leading VAR=VALUE words are added to the environment; stdout goes to
// /dev/null. Commands are split at spaces (no quoting).
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
  if (argc < 3) {
    fprintf(stderr, "usage: spawn_bench ROUNDS \"CMD ARGS...\" [\"VAR=VALUE CMD ARGS...\"]...\n");
    return 2;
  }
  const int rounds = atoi(argv[1]);
  if (rounds < 2) {
    fprintf(stderr, "spawn_bench: ROUNDS must be at least 2\n");
    return 2;
  }
  std::vector<Variant> vs;
  for (int i = 2; i < argc; ++i) {
    Variant v;
    v.text = argv[i];
    std::istringstream words(v.text);
    for (std::string w; words >> w;) {
      if (v.args.empty() && w.find('=') != std::string::npos) {
        v.env.push_back(w);
      } else {
        v.args.push_back(w);
      }
    }
    if (v.args.empty()) {
      fprintf(stderr, "spawn_bench: no command in '%s'\n", argv[i]);
      return 2;
    }
    vs.push_back(v);
  }
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
  for (Variant& v : vs) {
    double sum = 0, d = 0, dd = 0;
    for (int r = 0; r < rounds; ++r) {
      sum += v.ms[r];
      const double x = v.ms[r] - vs[0].ms[r];
      d += x;
      dd += x * x;
    }
    const double md = d / rounds;
    const double sd = std::sqrt(std::max(0.0, (dd - rounds * md * md) / (rounds - 1)));
    std::vector<double> sorted = v.ms;
    std::sort(sorted.begin(), sorted.end());
    printf("mean %8.3f ms  median %8.3f  added %+7.3f ms ± %.3f (95%%)  | %s\n", sum / rounds,
           sorted[rounds / 2], md, 1.96 * sd / std::sqrt(rounds), v.text.c_str());
  }
}
