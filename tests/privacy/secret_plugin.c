/* A plugin with secret names that the program opens from the user's own
 * directory (the privacy suite): its frames, and its calls back into the
 * program's own exports (-rdynamic), name nothing that leaves. */
unsigned long zq_secret_prog_fn(unsigned long x); /* the program's */

unsigned long zq_secret_plugin_work(int rounds) {
  unsigned long x = 3;
  for (int r = 0; r < rounds; ++r) x ^= zq_secret_prog_fn(x + (unsigned long)r);
  return x;
}
