// The one test of the system's code (common/system/system_code.h) and the door
// that applies it (common/system/field_door.h): on this machine's own dpkg
// database and apt indexes, checked against dpkg-query; and on databases
// made here, one per way a module can fail the test (an in-house archive,
// an untrusted one, a file changed after its package installed it, a
// private build of the same name, a renamed copy, no package at all).
#include "common/system/system_code.h"

#include <dlfcn.h>
#include <link.h>
#include <sys/stat.h>

#include <cstdio>
#include <filesystem>
#include <fstream>
#include <string>

#include "common/base/durable_file.h"
#include "common/system/exported_symbols.h"
#include "common/system/field_door.h"
#include "common/system/system_code_list.h"
#include "common/wire/module_version.h"
#include "gtest/gtest.h"
#include "tests/support/test_util.h"

namespace fieldprof {
namespace {

namespace fs = std::filesystem;

// What dpkg-query says (`args`), first line.
std::string DpkgQuery(const std::string& args) {
  std::string out;
  testing::RunCommand("dpkg-query " + args + " 2>/dev/null", &out);
  return out.substr(0, out.find('\n'));
}

// The file a loaded library was mapped from, as the runtime finds it.
std::string LoadedPath(const char* soname) {
  void* h = dlopen(soname, RTLD_NOW | RTLD_NOLOAD);
  if (h == nullptr) h = dlopen(soname, RTLD_NOW);
  if (h == nullptr) return {};
  link_map* m = nullptr;
  dlinfo(h, RTLD_DI_LINKMAP, &m);
  return m != nullptr ? fs::canonical(m->l_name).string() : std::string();
}

std::string Slurp(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  return std::string(std::istreambuf_iterator<char>(in), {});
}

std::string Md5Of(const std::string& path) {
  std::string out;
  testing::RunCommand("md5sum '" + path + "'", &out);
  return out.substr(0, 32);
}

// The machine's own: its dpkg database, apt's indexes, the default cache.
TEST(SystemCodeTest, ThisMachinesDebianLibrariesAreTheSystemsCode) {
  SystemCode code;
  ASSERT_TRUE(code.Refresh().ok());
  for (const auto& [soname, package] : {std::pair<std::string, std::string>{"libz.so.1", "zlib1g"},
                                        {"libsqlite3.so.0", "libsqlite3-0"},
                                        {"libc.so.6", "libc6"}}) {
    const std::string path = LoadedPath(soname.c_str());
    ASSERT_FALSE(path.empty()) << soname << " (deploy/install-deps.sh installs it)";
    const std::string id = FileBuildId(path);
    ASSERT_EQ(id.size(), 40u) << path;
    const std::string want = DpkgQuery("-W -f='${Version}' " + package + ":amd64");
    ASSERT_FALSE(want.empty()) << package;
    const SystemCode::Judgement j = code.Judge(soname, id);
    EXPECT_EQ(j.verdict, SystemCode::kShared) << soname << ": " << j.Why();
    EXPECT_EQ(j.package, package);
    EXPECT_EQ(code.KeyVersion(soname, id), want + "_" + id.substr(0, 16)) << soname;
    // Once named, still the system's code (a lab profile named here).
    EXPECT_EQ(code.Judge(soname, code.KeyVersion(soname, id)).verdict, SystemCode::kShared);
    EXPECT_TRUE(code.SharedModuleName(soname));
  }
  // Another build of the same name (a user's own libz), a module no
  // package holds, libz's build under another name, no build id at all.
  const std::string id = FileBuildId(LoadedPath("libz.so.1"));
  EXPECT_EQ(code.Judge("libz.so.1", std::string(40, 'a')).verdict, SystemCode::kOtherBuild);
  EXPECT_EQ(code.Judge("libmine.so.1", std::string(40, 'a')).verdict, SystemCode::kUnpackaged);
  EXPECT_EQ(code.Judge("libmine.so.1", id).verdict, SystemCode::kUnpackaged);
  EXPECT_EQ(code.Judge("libz.so.1", "unknown").verdict, SystemCode::kNotAModule);
  EXPECT_EQ(code.KeyVersion("libmine.so.1", id), id);
  EXPECT_FALSE(code.SharedModuleName("libmine.so.1"));
  // The runtime's list holds libz's build.
  StatusOr<std::string> list = ReadWholeFile(code.BuildIdListPath());
  ASSERT_TRUE(list.ok());
  uint32_t n = 0;
  const unsigned char* entries = system_code_list::Entries(list->data(), list->size(), &n);
  ASSERT_NE(entries, nullptr);
  EXPECT_GT(n, 100u);
  unsigned char e[system_code_list::kEntryBytes];
  std::string bytes;
  for (size_t i = 0; i < id.size(); i += 2) {
    bytes.push_back(static_cast<char>(std::stoi(id.substr(i, 2), nullptr, 16)));
  }
  system_code_list::EntryOf(reinterpret_cast<const unsigned char*>(bytes.data()), bytes.size(), e);
  EXPECT_TRUE(system_code_list::Contains(entries, n, e));
  e[0] ^= 1;
  EXPECT_FALSE(system_code_list::Contains(entries, n, e));
}

TEST(SystemCodeTest, VersionsCompareAsDpkgComparesThem) {
  const char* versions[] = {"1.0",
                            "1.0-1",
                            "1.0-1~deb12u1",
                            "1.0-1+deb12u1",
                            "1:0.9",
                            "1.0~rc1",
                            "1.0a",
                            "1.00",
                            "1.0.1",
                            "2:1.2.13.dfsg-1",
                            "3.0.19-1~deb12u2",
                            "3.0.22-1~deb12u2",
                            "3.0.9-1",
                            "1.0+b1",
                            "1.0-1.1",
                            "10.0"};
  for (const char* a : versions) {
    for (const char* b : versions) {
      std::string out;
      const bool less =
          testing::RunCommand(std::string("dpkg --compare-versions '") + a + "' lt '" + b + "'",
                              &out) == 0;
      const bool equal =
          testing::RunCommand(std::string("dpkg --compare-versions '") + a + "' eq '" + b + "'",
                              &out) == 0;
      const int c = CompareDebianVersions(a, b);
      EXPECT_EQ(c < 0, less) << a << " vs " << b;
      EXPECT_EQ(c == 0, equal) << a << " vs " << b;
    }
  }
}

// A machine made here: a dpkg database naming files in a temp dir, a
// Packages index of the known archive, the cache in the temp dir too.
class MadeMachine : public ::testing::Test {
 protected:
  void SetUp() override {
    fs::create_directories(dir_.File("dpkg/info"));
    fs::create_directories(dir_.File("files"));
    fs::create_directories(dir_.File("apt"));
  }

  // A shared object built here, `body` its C code: a build of its own.
  std::string Build(const std::string& name, const std::string& body) {
    const std::string c = dir_.File(name + ".c");
    std::ofstream(c) << body;
    const std::string out = dir_.File("files/" + name);
    std::string log;
    EXPECT_EQ(testing::RunCommand("cc -shared -fPIC -Wl,--build-id -Wl,-soname," + name + " -o '" +
                                      out + "' '" + c + "' 2>&1",
                                  &log),
              0)
        << log;
    return out;
  }

  struct Package {
    std::string name, version;
    std::vector<std::string> files;
    bool in_archive = true;
  };

  // dpkg's status, lists and md5sums for `packages`, and the index of the
  // known archive (origin `origin`, trusted or not) with those in it.
  void Install(const std::vector<Package>& packages, const std::string& origin = "Debian",
               bool trusted = true) {
    std::ofstream status(dir_.File("dpkg/status"));
    std::ofstream index(dir_.File("apt/Packages"));
    for (const Package& p : packages) {
      status << "Package: " << p.name << "\nStatus: install ok installed\nArchitecture: amd64\n"
             << "Version: " << p.version << "\n\n";
      if (p.in_archive) {
        index << "Package: " << p.name << "\nVersion: " << p.version << "\nArchitecture: amd64\n\n";
      }
      std::ofstream list(dir_.File("dpkg/info/" + p.name + ":amd64.list"));
      std::ofstream sums(dir_.File("dpkg/info/" + p.name + ":amd64.md5sums"));
      for (const std::string& f : p.files) {
        list << f << "\n";
        sums << Md5Of(f) << "  " << f.substr(1) << "\n";
      }
    }
    std::ofstream(dir_.File("apt/indexes"))
        << dir_.File("apt/Packages") << "\t" << origin << "\t" << (trusted ? "yes" : "no") << "\n";
  }

  SystemCodeOptions Options() const {
    return {.dpkg_dir = dir_.File("dpkg"),
            .archives = {"Debian"},
            .indexes = dir_.File("apt/indexes"),
            .cache_dir = dir_.File("cache")};
  }

  testing::TempDir dir_;
};

TEST_F(MadeMachine, EachWayOfNotBeingTheSystemsCodeIsToldApart) {
  const std::string ok = Build("libok.so.1", "int ok(void) { return 1; }\n");
  const std::string inhouse = Build("libinhouse.so.1", "int inhouse(void) { return 2; }\n");
  const std::string changed = Build("libchanged.so.1", "int changed(void) { return 3; }\n");
  const std::string loose = Build("libloose.so.1", "int loose(void) { return 4; }\n");
  Install(
      {{"good", "1.0-1", {ok, changed}}, {"acme-tools", "2.0", {inhouse}, /*in_archive=*/false}});
  // A private build copied over a packaged file, after dpkg installed it.
  const std::string before = FileBuildId(changed);
  const std::string private_build = Build("private.so", "int changed(void) { return 33; }\n");
  fs::copy_file(private_build, changed, fs::copy_options::overwrite_existing);
  ASSERT_NE(FileBuildId(changed), before);

  SystemCode code(Options());
  ASSERT_TRUE(code.Refresh().ok());
  EXPECT_TRUE(code.stats().reread);
  EXPECT_EQ(code.stats().hashed, 2u);  // the in-house package's file is never hashed
  auto verdict = [&](const std::string& module, const std::string& path) {
    return code.Judge(module, FileBuildId(path)).verdict;
  };
  EXPECT_EQ(verdict("libok.so.1", ok), SystemCode::kShared);
  EXPECT_EQ(code.KeyVersion("libok.so.1", FileBuildId(ok)),
            "1.0-1_" + FileBuildId(ok).substr(0, 16));
  EXPECT_EQ(verdict("libinhouse.so.1", inhouse), SystemCode::kOtherArchive);
  EXPECT_EQ(code.Judge("libinhouse.so.1", FileBuildId(inhouse)).Why(),
            "not in a known archive (package acme-tools 2.0)");
  EXPECT_EQ(verdict("libchanged.so.1", changed), SystemCode::kModified);
  EXPECT_EQ(code.Judge("libchanged.so.1", FileBuildId(changed)).Why(),
            "file differs from its package (package good 1.0-1)");
  EXPECT_EQ(verdict("libloose.so.1", loose), SystemCode::kUnpackaged);
  // libok's build under another name: not what the package holds.
  EXPECT_EQ(code.Judge("libloose.so.1", FileBuildId(ok)).verdict, SystemCode::kUnpackaged);
  // The runtime's list: exactly the one verified build.
  StatusOr<std::string> list = ReadWholeFile(code.BuildIdListPath());
  ASSERT_TRUE(list.ok());
  uint32_t n = 0;
  ASSERT_NE(system_code_list::Entries(list->data(), list->size(), &n), nullptr);
  EXPECT_EQ(n, 1u);
}

TEST_F(MadeMachine, AnArchiveCountsOnlyByTheOriginTheSettingsNameAndWhenTrusted) {
  const std::string lib = Build("libx.so.1", "int x(void) { return 1; }\n");
  const std::string id = FileBuildId(lib);
  Install({{"x", "1", {lib}}}, "Acme");
  {
    SystemCode code(Options());
    ASSERT_TRUE(code.Refresh().ok());
    EXPECT_EQ(code.Judge("libx.so.1", id).verdict, SystemCode::kOtherArchive);
  }
  {
    SystemCodeOptions o = Options();
    o.archives = {"Debian", "Acme"};  // a setting adds the archive
    o.cache_dir = dir_.File("cache2");
    SystemCode code(o);
    ASSERT_TRUE(code.Refresh().ok());
    EXPECT_EQ(code.Judge("libx.so.1", id).verdict, SystemCode::kShared);
  }
  Install({{"x", "1", {lib}}}, "Debian", /*trusted=*/false);
  {
    SystemCodeOptions o = Options();
    o.cache_dir = dir_.File("cache3");
    SystemCode code(o);
    ASSERT_TRUE(code.Refresh().ok());
    EXPECT_EQ(code.Judge("libx.so.1", id).verdict, SystemCode::kOtherArchive);
  }
}

TEST_F(MadeMachine, FilesAreHashedOnceAndAnUpgradeIsSeen) {
  const std::string a = Build("liba.so.1", "int a(void) { return 1; }\n");
  const std::string b = Build("libb.so.1", "int b(void) { return 2; }\n");
  Install({{"ab", "1.0", {a, b}}});
  const std::string a_id = FileBuildId(a);
  {
    SystemCode code(Options());
    ASSERT_TRUE(code.Refresh().ok());
    EXPECT_EQ(code.stats().hashed, 2u);
    ASSERT_TRUE(code.Refresh().ok());  // nothing changed: not even read again
    EXPECT_FALSE(code.stats().reread);
  }
  {
    // Another process: the cache answers, nothing is hashed.
    SystemCode code(Options());
    ASSERT_TRUE(code.Refresh().ok());
    EXPECT_FALSE(code.stats().reread);
    EXPECT_EQ(code.Judge("liba.so.1", a_id).verdict, SystemCode::kShared);
  }
  // An upgrade: liba rebuilt and installed as 1.1.
  Build("liba.so.1", "int a(void) { return 11; }\n");
  Install({{"ab", "1.1", {a, b}}});
  SystemCode code(Options());
  ASSERT_TRUE(code.Refresh().ok());
  EXPECT_TRUE(code.stats().reread);
  EXPECT_EQ(code.stats().hashed, 1u);  // only the file that changed
  EXPECT_EQ(code.Judge("liba.so.1", FileBuildId(a)).verdict, SystemCode::kShared);
  EXPECT_EQ(code.Judge("liba.so.1", FileBuildId(a)).version, "1.1");
  // The build before the upgrade (a run that loaded it, its record sealed
  // after) is still the system's code, under the version it had.
  EXPECT_EQ(code.Judge("liba.so.1", a_id).verdict, SystemCode::kShared);
  EXPECT_EQ(code.Judge("liba.so.1", a_id).version, "1.0");
  // A version the archive moved on from stays known: 1.1 gone from the
  // index, still installed.
  Install({{"ab", "1.1", {a, b}, /*in_archive=*/false}});
  std::ofstream(dir_.File("dpkg/status"), std::ios::app) << "\n";  // dpkg wrote it again
  SystemCode later(Options());
  ASSERT_TRUE(later.Refresh().ok());
  EXPECT_TRUE(later.stats().reread);
  EXPECT_EQ(later.Judge("liba.so.1", FileBuildId(a)).verdict, SystemCode::kShared);
}

// A machine not upgraded since the archive moved on runs a build the
// archive published before: still the archive's. A version above the
// archive's is a build of someone's own.
TEST_F(MadeMachine, AnOlderVersionOfAnArchivesPackageIsTheArchivesANewerOneIsNot) {
  const std::string a = Build("liba.so.1", "int a(void) { return 1; }\n");
  const std::string b = Build("libb.so.1", "int b(void) { return 2; }\n");
  Install({{"a", "3.0.19-1~deb12u2", {a}, false}, {"b", "3.0.22-1~deb12u2+local1", {b}, false}});
  std::ofstream(dir_.File("apt/Packages"))
      << "Package: a\nVersion: 3.0.22-1~deb12u2\nArchitecture: amd64\n\n"
      << "Package: b\nVersion: 3.0.22-1~deb12u2\nArchitecture: amd64\n\n";
  SystemCode code(Options());
  ASSERT_TRUE(code.Refresh().ok());
  EXPECT_EQ(code.Judge("liba.so.1", FileBuildId(a)).verdict, SystemCode::kShared);
  EXPECT_EQ(code.Judge("libb.so.1", FileBuildId(b)).verdict, SystemCode::kOtherArchive);
}

// A rebuild under an archive package's name and version (a company's own
// patched libsqlite3, say) most often has another installed size than
// the archive's package: not the archive's.
TEST_F(MadeMachine, ARebuildUnderTheArchivesNameAndVersionIsNotTheArchives) {
  const std::string a = Build("liba.so.1", "int a(void) { return 1; }\n");
  Install({{"a", "1.0-1", {a}}});
  std::ofstream(dir_.File("apt/Packages"))
      << "Package: a\nVersion: 1.0-1\nArchitecture: amd64\nInstalled-Size: 120\n\n";
  std::string status = Slurp(dir_.File("dpkg/status"));
  status.insert(status.find("Version:"), "Installed-Size: 96\n");
  std::ofstream(dir_.File("dpkg/status")) << status;
  SystemCode code(Options());
  ASSERT_TRUE(code.Refresh().ok());
  EXPECT_EQ(code.Judge("liba.so.1", FileBuildId(a)).verdict, SystemCode::kOtherArchive);
  // The archive's own, of the size it published: the archive's.
  status.replace(status.find("Installed-Size: 96"), 18, "Installed-Size: 120");
  std::ofstream(dir_.File("dpkg/status")) << status << "\n";
  SystemCode again(Options());
  ASSERT_TRUE(again.Refresh().ok());
  EXPECT_EQ(again.Judge("liba.so.1", FileBuildId(a)).verdict, SystemCode::kShared);
}

TEST_F(MadeMachine, ADamagedCacheIsMadeAgain) {
  const std::string a = Build("liba.so.1", "int a(void) { return 1; }\n");
  Install({{"a", "1", {a}}});
  {
    SystemCode code(Options());
    ASSERT_TRUE(code.Refresh().ok());
  }
  std::ofstream(dir_.File("cache/files")) << "not a memo\nfile 1 2\n";
  std::ofstream(dir_.File("cache/build-ids")) << "garbage";
  SystemCode code(Options());
  ASSERT_TRUE(code.Refresh().ok());
  EXPECT_TRUE(code.stats().reread);
  EXPECT_EQ(code.Judge("liba.so.1", FileBuildId(a)).verdict, SystemCode::kShared);
  StatusOr<std::string> list = ReadWholeFile(code.BuildIdListPath());
  uint32_t n = 0;
  ASSERT_TRUE(list.ok());
  EXPECT_NE(system_code_list::Entries(list->data(), list->size(), &n), nullptr);
  EXPECT_EQ(n, 1u);
}

TEST_F(MadeMachine, NoDpkgNoAptNothingIsTheSystemsCode) {
  const std::string a = Build("liba.so.1", "int a(void) { return 1; }\n");
  SystemCode code(Options());  // an empty dpkg directory, no index
  ASSERT_TRUE(code.Refresh().ok());
  EXPECT_EQ(code.Judge("liba.so.1", FileBuildId(a)).verdict, SystemCode::kUnpackaged);
}

// The door: what a run record keeps, how it is named, marks rewritten.
TEST_F(MadeMachine, TheDoorKeepsOnlyTheSystemsCodeAndWhatTheVolunteerShares) {
  const std::string ok = Build("libok.so.1", "int ok(void) { return 1; }\n");
  const std::string secret = Build("libsecret.so.1", "int secret(void) { return 2; }\n");
  Install({{"good", "1.0-1", {ok}}});
  SystemCode code(Options());
  ASSERT_TRUE(code.Refresh().ok());
  auto record = [](wire::RunRecord* run, const std::string& module, const std::string& id,
                   const std::string& symbol, wire::Metric metric) {
    wire::Record* r = run->add_records();
    r->mutable_key()->set_module(module);
    r->mutable_key()->set_module_version(id);
    r->mutable_key()->set_symbol(symbol);
    r->mutable_key()->set_metric(metric);
  };
  const std::string ok_id = FileBuildId(ok), secret_id = FileBuildId(secret);
  wire::RunRecord run;
  record(&run, "libok.so.1", ok_id, "ok", wire::METRIC_WALL_TIME_NS);
  record(&run, "libsecret.so.1", secret_id, "secret", wire::METRIC_WALL_TIME_NS);
  record(&run, "libok.so.1", ok_id, "ok;[libsecret.so.1]", wire::METRIC_STACK_CPU_NS);
  record(&run, "libok.so.1", ok_id, "ok;[program]", wire::METRIC_STACK_CPU_NS);
  record(&run, "libsecret.so.1", secret_id, "secret;[libok.so.1]", wire::METRIC_STACK_CPU_NS);
  record(&run, "libok.so.1", "unknown", "ok", wire::METRIC_WALL_TIME_NS);
  FieldDoor door(&code, "");
  wire::RunRecord kept = run;
  EXPECT_EQ(door.Apply(&kept), 3u);
  ASSERT_EQ(kept.records_size(), 3);
  const std::string named = "1.0-1_" + ok_id.substr(0, 16);
  for (const wire::Record& r : kept.records()) {
    EXPECT_EQ(r.key().module(), "libok.so.1");
    EXPECT_EQ(r.key().module_version(), named);
  }
  EXPECT_EQ(kept.records(1).key().symbol(), "ok;[unpackaged]");
  EXPECT_EQ(kept.records(2).key().symbol(), "ok;[program]");
  EXPECT_EQ(door.marks_rewritten(), 1u);
  EXPECT_EQ(door.dropped().at("libsecret.so.1").why, "unpackaged");
  EXPECT_EQ(door.dropped().at("libsecret.so.1").records, 2u);
  EXPECT_EQ(door.dropped().at("libok.so.1").why, "no build id");
  EXPECT_EQ(kept.SerializeAsString().find("secret"), std::string::npos);
  // Shared by the volunteer: kept as it is, and named in marks.
  FieldDoor shared(&code, "libsecret.so.1");
  wire::RunRecord all = run;
  EXPECT_EQ(shared.Apply(&all), 1u);
  EXPECT_EQ(all.records(2).key().symbol(), "ok;[libsecret.so.1]");
  EXPECT_EQ(all.records(1).key().module_version(), secret_id);
}

TEST_F(MadeMachine, ALabProfileLeavesWithItsSystemAPIsAndNoScenarioNames) {
  const std::string ok = Build("libok.so.1", "int ok(void) { return 1; }\n");
  const std::string secret = Build("libsecret.so.1", "int secret(void) { return 2; }\n");
  Install({{"good", "1.0-1", {ok}}});
  SystemCode code(Options());
  ASSERT_TRUE(code.Refresh().ok());
  wire::LabProfile p;
  p.add_scenarios("my-secret-program");
  p.add_passes()->set_scenario("my-secret-program");
  const std::pair<std::string, std::string> apis[] = {{"libsecret.so.1", FileBuildId(secret)},
                                                      {"libok.so.1", FileBuildId(ok)}};
  for (const auto& [m, id] : apis) {
    wire::ApiKey* k = p.add_apis();
    k->set_module(m);
    k->set_module_version(id);
    k->set_symbol(m == "libok.so.1" ? "ok" : "secret");
    *p.add_records()->mutable_key() = *k;
  }
  wire::LabEdge* e = p.add_edges();  // secret calls ok
  e->set_outer(0);
  e->set_inner(1);
  wire::LabEdge* e2 = p.add_edges();  // ok calls ok
  e2->set_outer(1);
  e2->set_inner(1);
  FieldDoor door(&code, "");
  EXPECT_EQ(door.Apply(&p), 1u);
  ASSERT_EQ(p.apis_size(), 1);
  EXPECT_EQ(p.apis(0).module(), "libok.so.1");
  ASSERT_EQ(p.edges_size(), 1);
  EXPECT_EQ(p.edges(0).outer(), 0u);
  EXPECT_EQ(p.edges(0).inner(), 0u);
  EXPECT_EQ(p.scenarios(0), "scenario-1");
  EXPECT_EQ(p.passes(0).scenario(), "scenario-1");
  EXPECT_EQ(p.SerializeAsString().find("secret"), std::string::npos);
}

}  // namespace
}  // namespace fieldprof
