/* A private build of a library named as Debian's SQLite (soname
 * libsqlite3.so.0): what a `make install --prefix=/usr`, a copied-over .so
 * or a library found through LD_LIBRARY_PATH puts where the program finds
 * it (the privacy suite). It does what the suite's program asks of SQLite,
 * and carries a name of its own, zq_secret_marker. (Not zlib: fieldprof's
 * own tools link zlib, and would not start with a build that lacks its
 * symbol versions.) */
volatile unsigned long zq_secret_marker;

int sqlite3_libversion_number(void) {
  unsigned long x = zq_secret_marker + 1;
  for (int i = 0; i < 20000; ++i) x = x * 6364136223846793005ul + 1;
  zq_secret_marker = x;
  return 3040001;
}
