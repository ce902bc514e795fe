// Whether a file belongs to the system: under a system directory, owned by
// root and writable by nobody else, as is the directory that holds it.
// What a Debian package can have installed; the runtime keeps stack frames
// only of such modules (the agent then keeps those a package holds), and
// names a program's own exports only when its executable is one.
//
// Header only, without the C++ library: the runtime applies it in the
// process with its raw stat (agent/preload/runtime/binder/module_naming.cc), the
// recorder to the modules of a recording (tools/record/field_view.cc).
#ifndef FIELDPROF_COMMON_SYSTEM_SYSTEM_PATH_H_
#define FIELDPROF_COMMON_SYSTEM_SYSTEM_PATH_H_

#include <string.h>
#include <sys/stat.h>

#include <cstddef>

namespace fieldprof {

// `path` (`len` bytes, NUL-terminated, written to and restored);
// `stat_fn(const char*, struct stat*)` returns 0 on success.
template <typename StatFn>
bool SystemPath(char* path, size_t len, StatFn stat_fn) {
  static const char* const kDirs[] = {"/usr/bin/", "/usr/sbin/",    "/bin/",       "/sbin/",
                                      "/usr/lib/", "/usr/libexec/", "/usr/games/", "/lib/"};
  bool under = false;
  for (const char* d : kDirs) {
    const size_t n = strlen(d);
    if (len > n && strncmp(path, d, n) == 0) under = true;
  }
  if (!under) return false;
  constexpr unsigned kOthersWrite = S_IWGRP | S_IWOTH;
  struct stat st;
  if (stat_fn(path, &st) != 0 || st.st_uid != 0 || (st.st_mode & kOthersWrite) != 0) {
    return false;
  }
  char* slash = strrchr(path, '/');
  *slash = 0;
  const bool dir_ok = stat_fn(path, &st) == 0 && st.st_uid == 0 && (st.st_mode & S_IWOTH) == 0;
  *slash = '/';
  return dir_ok;
}

}  // namespace fieldprof

#endif  // FIELDPROF_COMMON_SYSTEM_SYSTEM_PATH_H_
