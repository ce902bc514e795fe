/* Stands in for the runtime's recorder in tests/agent/preload/points/points_test.cc:
 * preloaded, it defines fieldprof_point_hit, counts what the points send,
 * and says it on stderr at exit:
 *   points-hook: point=N begin=N end=N value_sum=N first=TAG/NAME */
#include <fieldprof/points.h>
#include <stdio.h>

static long counts[3];
static int64_t value_sum;
static const struct fieldprof_point_site* first;

void fieldprof_point_hit(const struct fieldprof_point_site* site, int kind, int64_t value) {
  if (kind >= 0 && kind < 3) ++counts[kind];
  value_sum += value;
  if (first == NULL) first = site;
}

__attribute__((destructor)) static void Say(void) {
  fprintf(stderr, "points-hook: point=%ld begin=%ld end=%ld value_sum=%lld first=%s/%s\n",
          counts[0], counts[1], counts[2], (long long)value_sum, first ? first->tag : "-",
          first ? first->name : "-");
}
