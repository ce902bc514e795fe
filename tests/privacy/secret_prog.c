/* A program with secret names (the privacy suite, privacy_test.cc): it
 * calls a library of secret names (linked, or a plugin it opens; or a
 * private build named as SQLite, -DZQ_SQLITE), sorts
 * with a comparator of its own (libc calling back into the program), and
 * compresses with Debian's zlib, so that the field has something of the
 * system's to name.
 *   zq_secret_prog ROUNDS [PLUGIN] [kill]
 * With `kill`, it sends itself SIGKILL at the end (a run killed before
 * its record). */
#include <dlfcn.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <zlib.h>

#ifndef ZQ_NO_LIB
unsigned long zq_secret_work(int rounds);
void zq_secret_sort(int n);
#endif
#ifdef ZQ_SQLITE
int sqlite3_libversion_number(void);
#endif

volatile unsigned long zq_secret_prog_sink;

/* Exported (-rdynamic): a plugin calls back into the program. */
unsigned long zq_secret_prog_fn(unsigned long x) {
  for (int i = 0; i < 500; ++i) x = x * 2862933555777941757ul + 3037000493ul;
  return x;
}

static int zq_secret_prog_cmp(const void* a, const void* b) {
  zq_secret_prog_sink += zq_secret_prog_fn(*(const unsigned*)a);
  return (int)(*(const unsigned*)a % 977) - (int)(*(const unsigned*)b % 977);
}

int main(int argc, char** argv) {
  const int rounds = argc > 1 ? atoi(argv[1]) : 100;
  unsigned char in[1 << 14], out[1 << 15];
  for (size_t i = 0; i < sizeof in; ++i) in[i] = (unsigned char)(i * 7 % 251);
  unsigned v[1000];
  unsigned long (*plugin)(int) = NULL;
  if (argc > 2 && strcmp(argv[2], "-") != 0) {
    void* h = dlopen(argv[2], RTLD_NOW);
    if (h == NULL) {
      fprintf(stderr, "%s\n", dlerror());
      return 2;
    }
    plugin = (unsigned long (*)(int))dlsym(h, "zq_secret_plugin_work");
  }
  for (int r = 0; r < rounds; ++r) {
#ifndef ZQ_NO_LIB
    zq_secret_work(20);
    zq_secret_sort(300);
#endif
    if (plugin != NULL) plugin(20);
#ifdef ZQ_SQLITE
    zq_secret_prog_sink += (unsigned long)sqlite3_libversion_number();
#endif
    uLongf n = sizeof out;
    compress2(out, &n, in, sizeof in, 6);
    for (int i = 0; i < 1000; ++i) v[i] = (unsigned)(i * 2654435761u) ^ (unsigned)r;
    qsort(v, 1000, sizeof *v, zq_secret_prog_cmp);
  }
  printf("done %lu\n", zq_secret_prog_sink % 10);
  fflush(stdout);
  if (argc > 3 && strcmp(argv[3], "kill") == 0) raise(SIGKILL);
  return 0;
}
