// The one test of what may be named off a volunteer's machine
// (docs/privacy.md): a module's names (its file name, its functions, its
// build id, a mark in another module's stack) may leave only when its file
// is the system's code:
//   - an installed package holds the file (dpkg's info/*.list),
//   - that package comes from a known archive: an apt index that apt
//     trusts and whose Release says an Origin the settings name (Debian's
//     by default; `apt-get indextargets`) holds the package at its
//     installed version, held it at an earlier refresh, or holds a newer
//     version of it (a machine not upgraded since the archive moved on
//     runs a build the archive published before; a build of the same name
//     with a version above the archive's is someone's own),
//   - and the file's content is what the package shipped (its MD5 in
//     dpkg's info/*.md5sums).
// Everything else is unpackaged: the program's own code, a library built
// and installed by hand into /usr/lib, a private build copied over a
// packaged file, a package from a company's own repository.
//
// The answer is kept by build id: a build id names one build, so a list of
// the build ids of verified files is right for every file that has one of
// them, wherever it is, and never for another build. The runtime reads that
// list (BuildIdListPath, a sorted array it maps) to choose APIs only among
// the system's code; the agent, `fieldprof status --pending` and `fieldprof
// lab upload` ask Judge. Both come from one refresh.
//
// A refresh reads dpkg's database and apt's indexes only when either changed
// since the last one (their times and sizes), and hashes a file only when it
// changed since it was last hashed (its inode, size and times): the first
// refresh on a machine reads every packaged shared object once (~1.3 GB and
// a few seconds on a development machine), later ones a few files or none.
// The remembered facts are in `cache_dir` (the machine's, written by root,
// or the user's own), under an flock, so concurrent refreshes do the work
// once.
//
//   SystemCode code;                          // this machine, the defaults
//   FP_RETURN_IF_ERROR(code.Refresh());
//   SystemCode::Judgement j = code.Judge("libz.so.1", build_id);
//   if (j.verdict == SystemCode::kShared) ... j.package, j.version
//
// Not thread-safe; one per thread of use.
#ifndef FIELDPROF_COMMON_SYSTEM_SYSTEM_CODE_H_
#define FIELDPROF_COMMON_SYSTEM_SYSTEM_CODE_H_

#include <cstdint>
#include <functional>
#include <map>
#include <set>
#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

#include "common/base/status.h"

namespace fieldprof {

struct SystemCodeOptions {
  // dpkg's database. Default: this machine's.
  std::string dpkg_dir = "/var/lib/dpkg";
  // The Origin of every archive whose packages count as the system's
  // (apt's Release field). Default: Debian's ("Debian"; its security
  // archive says the same Origin).
  std::vector<std::string> archives = {"Debian"};
  // apt's package indexes: empty asks apt (`apt-get indextargets`); else a
  // file of lines "PATH<TAB>ORIGIN<TAB>TRUSTED" (yes/no) in that form, for
  // tests and machines apt does not manage. A compressed index is read
  // through apt's own `apt-helper cat-file`.
  std::string indexes;
  // Where the facts are remembered and the runtime's list is written.
  // Default: DefaultSystemCodeDir().
  std::string cache_dir;
};

// Debian's order of package versions (dpkg --compare-versions): < 0, 0,
// > 0 as `a` is older than, the same as, or newer than `b`.
int CompareDebianVersions(std::string_view a, std::string_view b);

// Root's: /var/cache/fieldprof/system-code; any other user's:
// $XDG_CACHE_HOME/fieldprof/system-code, else ~/.cache/fieldprof/system-code.
std::string DefaultSystemCodeDir();

class SystemCode {
 public:
  enum Verdict {
    kShared,        // the system's code: may be named
    kOtherArchive,  // a package holds it, but not from a known archive
    kModified,      // a package of a known archive holds it, changed since
    kOtherBuild,    // a package holds a file of that name, but another build
    kUnpackaged,    // no installed package holds a file of that name
    kNotAModule,    // not a build id (a version token, "unknown")
  };
  static const char* VerdictName(Verdict v);

  struct Judgement {
    Verdict verdict = kUnpackaged;
    std::string package;  // the package that holds the module (or a file of its name)
    std::string version;  // that package's installed version
    // "not in a known archive (in-house package acme-tools 1.2)", one line
    // for `fieldprof status --pending`.
    std::string Why() const;
  };

  // What a refresh did.
  struct RefreshStats {
    bool reread = false;        // dpkg's or apt's files had changed: read again
    size_t packages = 0;        // installed
    size_t known_packages = 0;  // of them, in a known archive at that version
    size_t files = 0;           // candidate files (ELF modules) looked at
    size_t hashed = 0;          // of them, hashed in this refresh
    uint64_t hashed_bytes = 0;
    size_t shared = 0;  // build ids verified as the system's
  };
  // Called now and then during a long refresh: files looked at so far,
  // of how many.
  using Progress = std::function<void(size_t done, size_t total)>;

  explicit SystemCode(SystemCodeOptions options = {});

  // Brings the answers up to date with dpkg's database and apt's indexes
  // (cheap when neither changed: a few stats). Errors: the cache directory
  // cannot be made or written. A machine without dpkg or apt is not an
  // error: nothing on it is the system's code.
  [[nodiscard]] Status Refresh(const Progress& progress = {});
  const RefreshStats& stats() const { return stats_; }

  // Whether `module` (a key's module: a soname or file name) built as
  // `module_version` (a build id in hex, or a version already named:
  // common/wire/module_version.h) is the system's code, and if not why.
  // Refresh first.
  Judgement Judge(std::string_view module, std::string_view module_version) const;

  // The key version the field uses for a shared module: its package's
  // version joined with the build id (common/wire/module_version.h); else
  // `module_version` as it is.
  std::string KeyVersion(std::string_view module, std::string_view module_version) const;

  // Whether any verified file is named `module`: a mark in a stack may name
  // only such a module ("[libc.so.6]").
  bool SharedModuleName(std::string_view module) const;

  // The runtime's list of verified build ids (agent/preload/runtime reads it in
  // measured runs: the `system_code` setting, FIELDPROF_SYSTEM_CODE).
  std::string BuildIdListPath() const { return cache_dir_ + "/build-ids"; }
  const std::string& cache_dir() const { return cache_dir_; }

 private:
  struct FileFacts {  // what a refresh remembers of one packaged file
    uint64_t dev = 0, ino = 0, size = 0;
    int64_t mtime_ns = 0, ctime_ns = 0;
    std::string md5;       // hex; "" when not hashed (not a candidate)
    std::string build_id;  // hex; "" when none
    std::string soname;
    bool candidate = false;  // an ELF module whose names the field may carry
    // Of a candidate, as of the last refresh: its package and the verdict.
    std::string package, version;
    Verdict verdict = kUnpackaged;
  };
  struct Held {  // a file of a given name, and who holds it
    std::string path, package, version, build_id, soname;
    Verdict verdict;
  };

  std::string Stamp() const;
  // The remembered facts at `path` into memo_ (and known_; the stamp, of
  // the cache's own file); `hints` only: another cache's file facts.
  void LoadMemo(const std::string& path, bool hints, std::string* stamp);
  // The facts anew from dpkg's and apt's files, hashing what changed.
  void Rebuild(const Progress& progress);
  // shared_ and by_name_ from memo_.
  void Index();
  Status Save(const std::string& stamp);

  SystemCodeOptions options_;
  std::string cache_dir_;
  std::string stamp_;  // of the dpkg and apt files the answers are from
  RefreshStats stats_;
  std::unordered_map<std::string, FileFacts> memo_;  // by path
  std::set<std::string> known_;                      // "name version arch" seen in a known archive
  std::map<std::string, std::string>
      newest_;  // "name arch" -> the archives' newest version (a refresh's)
  // Builds verified before that no file has now (an upgrade replaced
  // them): a build id names one build, so a record a run made of it before
  // the upgrade still leaves. Kept kForgetDays after the last refresh that
  // saw the file. By build id.
  struct Past {
    int64_t day;  // days since 1970 when last seen
    std::string package, version, soname, base;
  };
  std::map<std::string, Past> past_;
  std::map<std::string, Held> shared_;                  // build id -> the verified file
  std::unordered_multimap<std::string, Held> by_name_;  // soname and file name -> files
};

}  // namespace fieldprof

#endif  // FIELDPROF_COMMON_SYSTEM_SYSTEM_CODE_H_
