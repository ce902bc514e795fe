#include "common/system/system_code.h"

#include <dirent.h>
#include <fcntl.h>
#include <openssl/evp.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <ctime>
#include <fstream>
#include <sstream>

#include "common/base/durable_file.h"
#include "common/system/exported_symbols.h"
#include "common/system/system_code_list.h"
#include "common/wire/module_version.h"

namespace fieldprof {

namespace {

constexpr char kMemoHeader[] = "fieldprof-system-code 1";
// Days a build verified before stays the system's code after its file is
// gone (a run that loaded it before an upgrade, its record sealed after).
constexpr int64_t kForgetDays = 30;
constexpr char kAptLists[] = "/var/lib/apt/lists";

int64_t Ns(const timespec& t) { return int64_t{t.tv_sec} * 1000000000 + t.tv_nsec; }

// "mtime:size" of a file or directory, "-" when it is not there.
std::string StatStamp(const std::string& path) {
  struct stat st {};
  if (::stat(path.c_str(), &st) != 0) return "-";
  return std::to_string(Ns(st.st_mtim)) + ":" + std::to_string(st.st_size);
}

// Files a key can name: shared objects (libraries, plugins, Python's
// extension modules) and programs, whose exports another object may
// import (python3's C API). The rest of dpkg's lists (data, docs,
// headers) is most of their lines.
bool MayBeModule(std::string_view path) {
  const size_t slash = path.rfind('/');
  const std::string_view base = slash == std::string_view::npos ? path : path.substr(slash + 1);
  const std::string_view dir = slash == std::string_view::npos ? "" : path.substr(0, slash + 1);
  if (base.find(".so") != std::string_view::npos) return true;
  for (std::string_view d : {"/bin/", "/sbin/", "/usr/bin/", "/usr/sbin/", "/usr/games/"}) {
    if (dir == d) return true;
  }
  return dir.starts_with("/usr/libexec/");
}

std::string BaseName(std::string_view path) {
  const size_t slash = path.rfind('/');
  return std::string(slash == std::string_view::npos ? path : path.substr(slash + 1));
}

// The output of a command run without a shell's help for its arguments
// (they are this file's constants and paths apt itself gave).
std::string CommandOutput(const std::string& command) {
  FILE* p = ::popen((command + " 2>/dev/null").c_str(), "r");
  if (p == nullptr) return {};
  std::string out;
  char buf[1 << 16];
  for (size_t n; (n = fread(buf, 1, sizeof buf, p)) > 0;) out.append(buf, n);
  ::pclose(p);
  return out;
}

std::string ShellQuoted(const std::string& s) {
  std::string q = "'";
  for (char c : s) {
    if (c == '\'') {
      q += "'\\''";
    } else {
      q += c;
    }
  }
  return q + "'";
}

// The MD5 of a file's content, hex; "" when it cannot be read.
std::string FileMd5(const std::string& path, uint64_t* bytes) {
  const int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC | O_NONBLOCK);
  if (fd < 0) return {};
  EVP_MD_CTX* ctx = EVP_MD_CTX_new();
  bool ok = ctx != nullptr && EVP_DigestInit_ex(ctx, EVP_md5(), nullptr) == 1;
  std::vector<char> buf(1 << 20);
  while (ok) {
    const ssize_t n = ::read(fd, buf.data(), buf.size());
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) ok = false;
    if (n <= 0) break;
    *bytes += static_cast<uint64_t>(n);
    ok = EVP_DigestUpdate(ctx, buf.data(), static_cast<size_t>(n)) == 1;
  }
  unsigned char md[EVP_MAX_MD_SIZE];
  unsigned int len = 0;
  ok = ok && EVP_DigestFinal_ex(ctx, md, &len) == 1;
  EVP_MD_CTX_free(ctx);
  ::close(fd);
  if (!ok) return {};
  static const char kHex[] = "0123456789abcdef";
  std::string out;
  for (unsigned int i = 0; i < len; ++i) {
    out += kHex[md[i] >> 4];
    out += kHex[md[i] & 15];
  }
  return out;
}

struct Installed {
  std::string name, arch, version, size;  // size: Installed-Size (KiB), as dpkg has it
};

// dpkg's status file: the packages installed (paragraphs of "Field: value").
std::vector<Installed> ReadInstalled(const std::string& dpkg_dir) {
  std::vector<Installed> out;
  std::ifstream in(dpkg_dir + "/status");
  Installed p;
  std::string state;
  auto flush = [&] {
    if (!p.name.empty() && !p.version.empty() && state.ends_with(" installed")) out.push_back(p);
    p = {};
    state.clear();
  };
  for (std::string line; std::getline(in, line);) {
    if (line.empty()) {
      flush();
    } else if (line.starts_with("Package: ")) {
      p.name = line.substr(9);
    } else if (line.starts_with("Architecture: ")) {
      p.arch = line.substr(14);
    } else if (line.starts_with("Version: ")) {
      p.version = line.substr(9);
    } else if (line.starts_with("Installed-Size: ")) {
      p.size = line.substr(16);
    } else if (line.starts_with("Status: ")) {
      state = line.substr(8);
    }
  }
  flush();
  return out;
}

// A package as an archive published it: its name, version, architecture
// and installed size (a rebuild under the archive's name and version most
// often has another size).
std::string KnownKey(std::string_view name, std::string_view version, std::string_view arch,
                     std::string_view size) {
  std::string k(name);
  k += ' ';
  k += version;
  k += ' ';
  k += arch;
  k += ' ';
  k += size.empty() ? "-" : size;
  return k;
}

// The package indexes of apt's known archives: (path, origin, trusted,
// and the Release file apt verified them by; "" in an indexes file given).
struct AptIndex {
  std::string path, origin;
  bool trusted = false;
  std::string release;
};

// apt's name in its lists directory for a URI (its URItoFileName): the
// scheme dropped, some characters quoted as %xx, '/' as '_'.
std::string AptListName(std::string_view uri) {
  if (const size_t s = uri.find("://"); s != std::string_view::npos) uri.remove_prefix(s + 3);
  static constexpr std::string_view kQuoted = "\\|{}[]<>\"^~_=!@#$%^&*";
  std::string out;
  for (char c : uri) {
    if (c == '/') {
      out += '_';
    } else if (kQuoted.find(c) != std::string_view::npos || c <= ' ' || c >= 0x7f) {
      char hex[4];
      std::snprintf(hex, sizeof hex, "%%%02x", static_cast<unsigned char>(c));
      out += hex;
    } else {
      out += c;
    }
  }
  return out;
}

std::vector<AptIndex> ListIndexes(const std::string& indexes_file) {
  std::string text;
  const bool from_apt = indexes_file.empty();
  if (from_apt) {
    text = CommandOutput(
        "apt-get indextargets --format '$(FILENAME)\t$(ORIGIN)\t$(TRUSTED)\t$(BASE_URI)' "
        "'Created-By: Packages'");
  } else {
    StatusOr<std::string> t = ReadWholeFile(indexes_file);
    if (t.ok()) text = std::move(*t);
  }
  std::vector<AptIndex> out;
  std::istringstream in(text);
  for (std::string line; std::getline(in, line);) {
    std::vector<std::string> f;
    for (size_t at = 0; at <= line.size();) {
      const size_t tab = std::min(line.find('\t', at), line.size());
      f.push_back(line.substr(at, tab - at));
      at = tab + 1;
    }
    if (f.size() < 3) continue;
    AptIndex idx{f[0], f[1], f[2] == "yes", ""};
    if (from_apt && f.size() >= 4 && !f[3].empty()) {
      const size_t slash = f[0].rfind('/');
      if (slash != std::string::npos) {
        idx.release = f[0].substr(0, slash + 1) + AptListName(f[3]) + "InRelease";
      }
    }
    out.push_back(std::move(idx));
  }
  return out;
}

// Whether an index of Origin "Debian" that apt lists is Debian's: its
// InRelease signed by a key of Debian's archive keyring. The Origin is
// whatever a repository's Release says (a company's mirror may say
// Debian), and apt's trust is any key the machine added.
bool SignedByDebian(const std::string& release, std::map<std::string, bool>* checked) {
  if (release.empty()) return false;
  auto [it, fresh] = checked->emplace(release, false);
  if (fresh) {
    constexpr char kKeyring[] = "/usr/share/keyrings/debian-archive-keyring.gpg";
    it->second = ::access(kKeyring, R_OK) == 0 && ::access(release.c_str(), R_OK) == 0 &&
                 std::system(("gpgv --keyring " + std::string(kKeyring) + " " +
                              ShellQuoted(release) + " > /dev/null 2>&1")
                                 .c_str()) == 0;
  }
  return it->second;
}

// An index's text: compressed ones through apt's own reader.
std::string ReadIndex(const std::string& path) {
  for (std::string_view ext : {".lz4", ".gz", ".xz", ".zst", ".bz2", ".lzma"}) {
    if (path.ends_with(ext)) {
      return CommandOutput("/usr/lib/apt/apt-helper cat-file " + ShellQuoted(path));
    }
  }
  StatusOr<std::string> t = ReadWholeFile(path);
  return t.ok() ? std::move(*t) : std::string();
}

// dpkg's info file of a package: NAME:ARCH.EXT, else NAME.EXT.
std::string InfoFile(const std::string& dpkg_dir, const Installed& p, const char* ext) {
  const std::string with_arch = dpkg_dir + "/info/" + p.name + ":" + p.arch + ext;
  if (::access(with_arch.c_str(), R_OK) == 0) return with_arch;
  return dpkg_dir + "/info/" + p.name + ext;
}

bool SameFile(const struct stat& st, uint64_t dev, uint64_t ino, uint64_t size, int64_t mtime,
              int64_t ctime) {
  return st.st_dev == dev && st.st_ino == ino && static_cast<uint64_t>(st.st_size) == size &&
         Ns(st.st_mtim) == mtime && Ns(st.st_ctim) == ctime;
}

// Whether a file (and the directory it is in) is root's and no one else
// may change it: facts another user's refresh may take as hints.
bool RootsAlone(const std::string& path) {
  struct stat st {};
  if (::stat(path.c_str(), &st) != 0 || st.st_uid != 0 || (st.st_mode & (S_IWGRP | S_IWOTH))) {
    return false;
  }
  const std::string dir = path.substr(0, path.rfind('/'));
  return ::stat(dir.c_str(), &st) == 0 && st.st_uid == 0 && (st.st_mode & (S_IWGRP | S_IWOTH)) == 0;
}

bool HexToBytes(std::string_view hex, std::string* out) {
  if (hex.size() % 2 != 0) return false;
  out->clear();
  auto nib = [](char c) {
    return c >= '0' && c <= '9' ? c - '0' : c >= 'a' && c <= 'f' ? c - 'a' + 10 : -1;
  };
  for (size_t i = 0; i < hex.size(); i += 2) {
    const int h = nib(hex[i]), l = nib(hex[i + 1]);
    if (h < 0 || l < 0) return false;
    out->push_back(static_cast<char>(h * 16 + l));
  }
  return true;
}

constexpr char kRootCache[] = "/var/cache/fieldprof/system-code";

}  // namespace

namespace {

int Order(char c) {
  if (c >= '0' && c <= '9') return 0;
  if ((c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z')) return c;
  if (c == '~') return -1;
  if (c != 0) return c + 256;
  return 0;
}

bool Digit(char c) { return c >= '0' && c <= '9'; }

// dpkg's comparison of an upstream version or a revision.
int VerRevCmp(const char* a, const char* b) {
  while (*a || *b) {
    int first_diff = 0;
    while ((*a && !Digit(*a)) || (*b && !Digit(*b))) {
      const int ac = Order(*a), bc = Order(*b);
      if (ac != bc) return ac - bc;
      ++a, ++b;
    }
    while (*a == '0') ++a;
    while (*b == '0') ++b;
    while (Digit(*a) && Digit(*b)) {
      if (first_diff == 0) first_diff = *a - *b;
      ++a, ++b;
    }
    if (Digit(*a)) return 1;
    if (Digit(*b)) return -1;
    if (first_diff != 0) return first_diff;
  }
  return 0;
}

struct DebianVersion {
  uint64_t epoch = 0;
  std::string upstream, revision;
};

DebianVersion ParseDebianVersion(std::string_view v) {
  DebianVersion d;
  if (const size_t colon = v.find(':'); colon != std::string_view::npos) {
    for (char c : v.substr(0, colon)) d.epoch = Digit(c) ? d.epoch * 10 + (c - '0') : d.epoch;
    v = v.substr(colon + 1);
  }
  if (const size_t dash = v.rfind('-'); dash != std::string_view::npos) {
    d.revision = std::string(v.substr(dash + 1));
    v = v.substr(0, dash);
  }
  d.upstream = std::string(v);
  return d;
}

}  // namespace

int CompareDebianVersions(std::string_view a, std::string_view b) {
  const DebianVersion x = ParseDebianVersion(a), y = ParseDebianVersion(b);
  if (x.epoch != y.epoch) return x.epoch < y.epoch ? -1 : 1;
  if (int c = VerRevCmp(x.upstream.c_str(), y.upstream.c_str()); c != 0) return c;
  return VerRevCmp(x.revision.c_str(), y.revision.c_str());
}

std::string DefaultSystemCodeDir() {
  if (::geteuid() == 0) return kRootCache;
  if (const char* x = std::getenv("XDG_CACHE_HOME"); x != nullptr && x[0] == '/') {
    return std::string(x) + "/fieldprof/system-code";
  }
  if (const char* h = std::getenv("HOME"); h != nullptr && h[0] == '/') {
    return std::string(h) + "/.cache/fieldprof/system-code";
  }
  return {};
}

const char* SystemCode::VerdictName(Verdict v) {
  switch (v) {
    case kShared:
      return "shared";
    case kOtherArchive:
      return "not in a known archive";
    case kModified:
      return "file differs from its package";
    case kOtherBuild:
      return "not the build its package installed";
    case kUnpackaged:
      return "unpackaged";
    case kNotAModule:
      return "no build id";
  }
  return "unpackaged";
}

std::string SystemCode::Judgement::Why() const {
  std::string s = VerdictName(verdict);
  if (!package.empty()) s += " (package " + package + (version.empty() ? "" : " " + version) + ")";
  return s;
}

SystemCode::SystemCode(SystemCodeOptions options)
    : options_(std::move(options)),
      cache_dir_(options_.cache_dir.empty() ? DefaultSystemCodeDir() : options_.cache_dir) {}

std::string SystemCode::Stamp() const {
  std::string s = "v3 dpkg=" + StatStamp(options_.dpkg_dir + "/status");
  s += " apt=" + StatStamp(options_.indexes.empty() ? kAptLists : options_.indexes);
  s += " archives=";
  for (const std::string& a : options_.archives) s += a + ",";
  return s;
}

Status SystemCode::Refresh(const Progress& progress) {
  stats_ = {};
  const std::string stamp = Stamp();
  if (!stamp_.empty() && stamp == stamp_) return Status::Ok();
  if (cache_dir_.empty()) {
    return InvalidArgument("no directory for the system code's facts (HOME is not set)");
  }
  const bool machines = cache_dir_ == kRootCache;
  FP_RETURN_IF_ERROR(MakeDirs(cache_dir_, machines ? FileAccess::kShared : FileAccess::kPrivate));
  if (machines) {
    for (const char* d : {"/var/cache/fieldprof", kRootCache}) {
      if (::chmod(d, 0755) != 0) {
        return IOError(std::string("cannot set the mode of ") + d + ": " + std::strerror(errno));
      }
    }
  }
  // One refresh at a time per cache: a second one waits, then finds the
  // work done.
  const std::string lock_path = cache_dir_ + "/lock";
  const int lock = ::open(lock_path.c_str(), O_RDWR | O_CREAT | O_CLOEXEC, 0600);
  if (lock < 0) return IOError("cannot open " + lock_path + ": " + std::strerror(errno));
  while (::flock(lock, LOCK_EX) != 0 && errno == EINTR) {
  }
  memo_.clear();
  known_.clear();
  past_.clear();
  std::string remembered;
  LoadMemo(cache_dir_ + "/files", /*hints=*/false, &remembered);
  Status s = Status::Ok();
  if (remembered != stamp || ::access(BuildIdListPath().c_str(), R_OK) != 0) {
    // Another user's refresh as root may have hashed the files already.
    if (!machines && RootsAlone(std::string(kRootCache) + "/files")) {
      LoadMemo(std::string(kRootCache) + "/files", /*hints=*/true, nullptr);
    }
    stats_.reread = true;
    Rebuild(progress);
    s = Save(stamp);
  }
  ::close(lock);
  if (!s.ok()) return s;
  Index();
  stamp_ = stamp;
  return Status::Ok();
}

void SystemCode::LoadMemo(const std::string& path, bool hints, std::string* stamp) {
  std::ifstream in(path);
  std::string line;
  if (!in || !std::getline(in, line) || line != kMemoHeader) return;  // none yet, or another format
  while (std::getline(in, line)) {
    if (line.starts_with("stamp ")) {
      if (stamp != nullptr) *stamp = line.substr(6);
    } else if (line.starts_with("known ")) {
      if (!hints) known_.insert(line.substr(6));
    } else if (line.starts_with("past ")) {
      std::istringstream f(line.substr(5));
      std::string id;
      Past p;
      if (!hints && f >> id >> p.day >> p.package >> p.version >> p.soname >> p.base) {
        if (p.soname == "-") p.soname.clear();
        past_.insert_or_assign(id, std::move(p));
      }
    } else if (line.starts_with("file ")) {
      // file DEV INO SIZE MTIME CTIME CANDIDATE MD5 BUILD_ID SONAME VERDICT PACKAGE VERSION PATH
      std::istringstream f(line.substr(5));
      FileFacts ff;
      int candidate = 0, verdict = 0;
      std::string md5, id, soname, package, version, p;
      if (!(f >> ff.dev >> ff.ino >> ff.size >> ff.mtime_ns >> ff.ctime_ns >> candidate >> md5 >>
            id >> soname >> verdict >> package >> version)) {
        continue;
      }
      f.get();
      std::getline(f, p);
      if (p.empty() || p[0] != '/' || verdict < kShared || verdict > kNotAModule) continue;
      ff.candidate = candidate != 0;
      ff.md5 = md5 == "-" ? "" : md5;
      ff.build_id = id == "-" ? "" : id;
      ff.soname = soname == "-" ? "" : soname;
      if (!hints) {
        ff.verdict = static_cast<Verdict>(verdict);
        ff.package = package == "-" ? "" : package;
        ff.version = version == "-" ? "" : version;
      }
      memo_.insert_or_assign(p, std::move(ff));
    }
  }
}

void SystemCode::Rebuild(const Progress& progress) {
  newest_.clear();
  const std::vector<Installed> installed = ReadInstalled(options_.dpkg_dir);
  stats_.packages = installed.size();
  std::set<std::string> names;
  for (const Installed& p : installed) names.insert(p.name);
  // The versions apt's known archives hold now, added to those they held
  // at earlier refreshes (a package not upgraded since its archive moved
  // on is still the archive's build).
  std::map<std::string, bool> signed_by_debian;
  for (const AptIndex& idx : ListIndexes(options_.indexes)) {
    if (!idx.trusted || std::find(options_.archives.begin(), options_.archives.end(), idx.origin) ==
                            options_.archives.end()) {
      continue;
    }
    // An index apt lists as Debian's must be signed by Debian's archive
    // keyring; one given in an indexes file is taken as it says.
    if (options_.indexes.empty() && idx.origin == "Debian" &&
        !SignedByDebian(idx.release, &signed_by_debian)) {
      continue;
    }
    std::istringstream in(ReadIndex(idx.path));
    std::string name, version, arch, size;
    auto flush = [&] {
      if (names.count(name) != 0 && !version.empty()) {
        known_.insert(KnownKey(name, version, arch, size));
        std::string& newest = newest_[name + " " + arch];
        if (newest.empty() || CompareDebianVersions(version, newest) > 0) newest = version;
      }
      name.clear(), version.clear(), arch.clear(), size.clear();
    };
    for (std::string line; std::getline(in, line);) {
      if (line.empty()) {
        flush();
      } else if (line.starts_with("Package: ")) {
        name = line.substr(9);
      } else if (line.starts_with("Version: ")) {
        version = line.substr(9);
      } else if (line.starts_with("Architecture: ")) {
        arch = line.substr(14);
      } else if (line.starts_with("Installed-Size: ")) {
        size = line.substr(16);
      }
    }
    flush();
  }
  // What each installed package holds.
  struct Todo {
    const Installed* package;
    bool known;
    std::string path;
  };
  std::vector<Todo> todo;
  std::set<std::string> still_known;
  for (const Installed& p : installed) {
    const std::string key = KnownKey(p.name, p.version, p.arch, p.size);
    auto newest = newest_.find(p.name + " " + p.arch);
    const bool known =
        known_.count(key) != 0 ||
        (newest != newest_.end() && CompareDebianVersions(p.version, newest->second) < 0);
    if (known) still_known.insert(key);
    std::ifstream list(InfoFile(options_.dpkg_dir, p, ".list"));
    for (std::string line; std::getline(list, line);) {
      if (MayBeModule(line)) todo.push_back({&p, known, line});
    }
  }
  known_ = std::move(still_known);
  std::unordered_map<std::string, std::string> md5_of;  // path -> what its package shipped
  const Installed* md5_package = nullptr;
  std::unordered_map<std::string, FileFacts> memo;
  for (size_t i = 0; i < todo.size(); ++i) {
    if (progress && i % 256 == 0) progress(i, todo.size());
    const Todo& t = todo[i];
    struct stat st {};
    if (::lstat(t.path.c_str(), &st) != 0 || !S_ISREG(st.st_mode)) continue;
    FileFacts f;
    auto m = memo_.find(t.path);
    if (m != memo_.end() && SameFile(st, m->second.dev, m->second.ino, m->second.size,
                                     m->second.mtime_ns, m->second.ctime_ns)) {
      f = m->second;
    } else {
      f.dev = st.st_dev, f.ino = st.st_ino, f.size = static_cast<uint64_t>(st.st_size);
      f.mtime_ns = Ns(st.st_mtim), f.ctime_ns = Ns(st.st_ctim);
      const ElfFacts e = ReadElfFacts(t.path);
      f.build_id = e.build_id;
      f.soname = e.soname;
      f.candidate =
          e.read && !e.build_id.empty() && (!e.soname.empty() || e.exported_functions > 0);
    }
    f.package = t.package->name;
    f.version = t.package->version;
    f.verdict = kOtherArchive;
    if (f.candidate) {
      ++stats_.files;
      if (t.known) {
        if (f.md5.empty()) {
          f.md5 = FileMd5(t.path, &stats_.hashed_bytes);
          ++stats_.hashed;
        }
        if (md5_package != t.package) {
          md5_package = t.package;
          md5_of.clear();
          std::ifstream sums(InfoFile(options_.dpkg_dir, *t.package, ".md5sums"));
          for (std::string line; std::getline(sums, line);) {
            const size_t sp = line.find("  ");
            if (sp != std::string::npos) md5_of["/" + line.substr(sp + 2)] = line.substr(0, sp);
          }
        }
        auto want = md5_of.find(t.path);
        f.verdict =
            want != md5_of.end() && !f.md5.empty() && want->second == f.md5 ? kShared : kModified;
      }
    }
    memo.insert_or_assign(t.path, std::move(f));
  }
  if (progress) progress(todo.size(), todo.size());
  memo_ = std::move(memo);
  stats_.known_packages = known_.size();
  // The builds verified now are remembered; those gone long ago forgotten.
  const int64_t today = ::time(nullptr) / 86400;
  for (const auto& [path, f] : memo_) {
    if (f.candidate && f.verdict == kShared) {
      past_.insert_or_assign(f.build_id,
                             Past{today, f.package, f.version, f.soname, BaseName(path)});
    }
  }
  std::erase_if(past_, [&](const auto& p) { return p.second.day + kForgetDays < today; });
}

void SystemCode::Index() {
  shared_.clear();
  by_name_.clear();
  // Builds verified lately, the files gone (an upgrade).
  for (const auto& [id, p] : past_) {
    Held h{"/" + p.base, p.package, p.version, id, p.soname, kShared};
    shared_.emplace(id, h);
    by_name_.emplace(p.base, h);
    if (!p.soname.empty() && p.soname != p.base) by_name_.emplace(p.soname, h);
  }
  for (const auto& [path, f] : memo_) {
    if (!f.candidate) continue;
    Held h{path, f.package, f.version, f.build_id, f.soname, f.verdict};
    if (f.verdict == kShared) {
      if (past_.count(f.build_id) != 0) continue;  // indexed above
      shared_.emplace(f.build_id, h);
    }
    const std::string base = BaseName(path);
    by_name_.emplace(base, h);
    if (!f.soname.empty() && f.soname != base) by_name_.emplace(f.soname, h);
  }
  stats_.shared = shared_.size();
}

Status SystemCode::Save(const std::string& stamp) {
  auto word = [](const std::string& w) {
    return w.empty() || w.find_first_of(" \t\n") != std::string::npos ? std::string("-") : w;
  };
  std::string memo = std::string(kMemoHeader) + "\nstamp " + stamp + "\n";
  for (const std::string& k : known_) memo += "known " + k + "\n";
  for (const auto& [id, p] : past_) {
    if (word(p.package) == "-" || word(p.version) == "-" || word(p.base) == "-") continue;
    memo += "past " + id + " " + std::to_string(p.day) + " " + p.package + " " + p.version + " " +
            word(p.soname) + " " + p.base + "\n";
  }
  std::vector<std::string> entries;
  for (const auto& [path, f] : memo_) {
    if (path.find('\n') != std::string::npos) continue;
    memo += "file " + std::to_string(f.dev) + " " + std::to_string(f.ino) + " " +
            std::to_string(f.size) + " " + std::to_string(f.mtime_ns) + " " +
            std::to_string(f.ctime_ns) + " " + (f.candidate ? "1 " : "0 ") + word(f.md5) + " " +
            word(f.build_id) + " " + word(f.soname) + " " +
            std::to_string(static_cast<int>(f.verdict)) + " " + word(f.package) + " " +
            word(f.version) + " " + path + "\n";
  }
  // The runtime's list: every verified build id, now and lately, sorted as
  // bytes.
  for (const auto& [id, p] : past_) {
    std::string bytes;
    if (!HexToBytes(id, &bytes) || bytes.empty()) continue;
    unsigned char e[system_code_list::kEntryBytes];
    system_code_list::EntryOf(reinterpret_cast<const unsigned char*>(bytes.data()), bytes.size(),
                              e);
    entries.emplace_back(reinterpret_cast<const char*>(e), sizeof e);
  }
  std::sort(entries.begin(), entries.end());
  entries.erase(std::unique(entries.begin(), entries.end()), entries.end());
  std::string list(system_code_list::kMagic, sizeof system_code_list::kMagic);
  const uint32_t head[2] = {static_cast<uint32_t>(entries.size()),
                            static_cast<uint32_t>(system_code_list::kEntryBytes)};
  list.append(reinterpret_cast<const char*>(head), sizeof head);
  for (const std::string& e : entries) list += e;
  // Root's cache serves every user of the machine: readable by all (it
  // says which packages are installed, as dpkg's database does), writable
  // by root alone whatever the umask (another user who could write it could
  // have a build of theirs judged the system's).
  FP_RETURN_IF_ERROR(WriteFileDurably(BuildIdListPath(), list, FileAccess::kPrivate));
  // The memo last: its stamp says the list is current.
  FP_RETURN_IF_ERROR(WriteFileDurably(cache_dir_ + "/files", memo, FileAccess::kPrivate));
  if (cache_dir_ == kRootCache) {
    for (const std::string& f : {BuildIdListPath(), cache_dir_ + "/files"}) {
      if (::chmod(f.c_str(), 0644) != 0) {
        return IOError("cannot make " + f + " readable: " + std::strerror(errno));
      }
    }
  }
  return Status::Ok();
}

SystemCode::Judgement SystemCode::Judge(std::string_view module,
                                        std::string_view module_version) const {
  // A build id, or a version already named (package version, and the build
  // id's first kKeyBuildIdDigits).
  const ModuleVersionParts parts = SplitModuleVersion(module_version);
  const std::string_view id = parts.build_id;
  if (id.size() < kKeyBuildIdDigits || (parts.version.empty() && !IsBuildId(id))) {
    return {kNotAModule, "", ""};
  }
  // A raw build id is the whole of one; a named version carries its first
  // kKeyBuildIdDigits, and its package version must be the same too.
  auto same_build = [&](const Held& h) {
    return parts.version.empty() ? h.build_id == id
                                 : h.build_id.starts_with(id) && h.version == parts.version;
  };
  auto named = [&](const Held& h) { return h.soname == module || BaseName(h.path) == module; };
  for (auto it = shared_.lower_bound(std::string(id));
       it != shared_.end() && std::string_view(it->first).starts_with(id); ++it) {
    // The same build under another name is not what the package holds.
    if (same_build(it->second) && named(it->second)) {
      return {kShared, it->second.package, it->second.version};
    }
  }
  // Why not: the files of that name the packages hold, the most telling first.
  Judgement j{kUnpackaged, "", ""};
  auto [lo, hi] = by_name_.equal_range(std::string(module));
  int rank = 0;
  for (auto it = lo; it != hi; ++it) {
    const Held& h = it->second;
    if (same_build(h) && h.verdict != kShared) return {h.verdict, h.package, h.version};
    const Verdict v = h.verdict == kShared ? kOtherBuild : h.verdict;
    const int r = v == kModified ? 3 : v == kOtherArchive ? 2 : 1;
    if (r > rank) {
      rank = r;
      j = {v, h.package, h.version};
    }
  }
  return j;
}

std::string SystemCode::KeyVersion(std::string_view module, std::string_view module_version) const {
  const Judgement j = Judge(module, module_version);
  if (j.verdict != kShared || !IsBuildId(module_version)) return std::string(module_version);
  const std::string joined = JoinModuleVersion(j.version, module_version);
  return joined.empty() ? std::string(module_version) : joined;
}

bool SystemCode::SharedModuleName(std::string_view module) const {
  auto [lo, hi] = by_name_.equal_range(std::string(module));
  for (auto it = lo; it != hi; ++it) {
    if (it->second.verdict == kShared) return true;
  }
  return false;
}

}  // namespace fieldprof
