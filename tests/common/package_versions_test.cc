// Readable versions from this machine's dpkg database (common/
// package_versions.h), checked against dpkg-query: real Debian libraries
// loaded by a real program, their build ids as the runtime reports them.
#include "common/package_versions.h"

#include <dlfcn.h>
#include <link.h>

#include <cstdio>
#include <filesystem>
#include <fstream>
#include <string>

#include "common/module_version.h"
#include "gtest/gtest.h"
#include "tests/support/test_util.h"

namespace fieldprof {
namespace {

// What dpkg-query says of `what` (a format, a package), first line.
std::string DpkgQuery(const std::string& args) {
  FILE* p = popen(("dpkg-query " + args + " 2>/dev/null").c_str(), "r");
  if (p == nullptr) return {};
  char buf[4096];
  std::string out;
  for (size_t n; (n = fread(buf, 1, sizeof buf, p)) > 0;) out.append(buf, n);
  pclose(p);
  return out.substr(0, out.find('\n'));
}

// The file a loaded library was mapped from, found as the runtime finds
// modules (the dynamic linker's list), and its soname.
std::string LoadedPath(const char* soname) {
  void* h = dlopen(soname, RTLD_NOW | RTLD_NOLOAD);
  if (h == nullptr) h = dlopen(soname, RTLD_NOW);
  if (h == nullptr) return {};
  link_map* m = nullptr;
  dlinfo(h, RTLD_DI_LINKMAP, &m);
  return m != nullptr ? std::filesystem::canonical(m->l_name).string() : std::string();
}

TEST(PackageVersionsTest, RealDebianLibrariesGetTheirPackagesVersion) {
  PackageVersions versions;
  for (const auto& [soname, package] : {std::pair<std::string, std::string>{"libz.so.1", "zlib1g"},
                                        {"libsqlite3.so.0", "libsqlite3-0"},
                                        {"libc.so.6", "libc6"}}) {
    const std::string path = LoadedPath(soname.c_str());
    ASSERT_FALSE(path.empty()) << soname << " (deploy/install-deps.sh installs it)";
    const std::string build_id = FileBuildId(path);
    ASSERT_EQ(build_id.size(), 40u) << path;
    const std::string want = DpkgQuery("-W -f='${Version}' " + package + ":amd64");
    ASSERT_FALSE(want.empty()) << package;
    const std::string got = versions.KeyVersion(soname, build_id);
    EXPECT_EQ(got, want + "_" + build_id.substr(0, 16)) << soname;
    EXPECT_EQ(ReadableModuleVersion(got), want + " (" + build_id.substr(0, 8) + ")");
    // The package that holds the file is the one dpkg-query -S names (by
    // its name: with merged /usr, dpkg may list it under /lib).
    const std::string file = std::filesystem::path(path).filename();
    EXPECT_EQ(DpkgQuery("-S '*/" + file + "'").rfind(package + ":", 0), 0u) << path;
  }
  // The dynamic linker, under its soname: libc6's too.
  const std::string ld = std::filesystem::canonical("/lib64/ld-linux-x86-64.so.2").string();
  EXPECT_EQ(
      SplitModuleVersion(versions.KeyVersion("ld-linux-x86-64.so.2", FileBuildId(ld))).version,
      DpkgQuery("-W -f='${Version}' libc6:amd64"));
  EXPECT_EQ(versions.found(), 4u);
}

TEST(PackageVersionsTest, WhatNoPackageHoldsKeepsItsBuildId) {
  PackageVersions versions;
  const std::string libz = LoadedPath("libz.so.1");
  // Another build of the same name: a user's own libz.
  EXPECT_EQ(versions.KeyVersion("libz.so.1", std::string(40, 'a')), std::string(40, 'a'));
  // A module no package installs.
  const std::string id = FileBuildId(libz);
  EXPECT_EQ(versions.KeyVersion("libmine.so.1", id), id);
  // Not a build id: left alone (a vendor's token, "unknown").
  EXPECT_EQ(versions.KeyVersion("libz.so.1", "unknown"), "unknown");
  EXPECT_EQ(versions.KeyVersion("libz.so.1", "1.3"), "1.3");
  EXPECT_EQ(versions.not_found(), 2u);
  // No database at all (a machine without dpkg): build ids stay.
  testing::TempDir empty;
  PackageVersions none(empty.path());
  EXPECT_EQ(none.KeyVersion("libz.so.1", id), id);
}

// An upgrade while the agent runs: dpkg rewrites its status file, and a
// module asked for after that is named by the new version. (A database
// made here: one package holding this machine's libz and libsqlite3.)
TEST(PackageVersionsTest, AnUpgradeWhileRunningIsSeen) {
  testing::TempDir dpkg;
  std::filesystem::create_directories(dpkg.File("info"));
  const std::string libz = LoadedPath("libz.so.1"), sqlite = LoadedPath("libsqlite3.so.0");
  std::ofstream(dpkg.File("info/demo:amd64.list")) << libz << "\n"
                                                   << sqlite << "\n/usr/share/doc/demo/copyright\n";
  auto write_status = [&](const std::string& version) {
    std::ofstream(dpkg.File("status"))
        << "Package: demo\nStatus: install ok installed\nArchitecture: amd64\nVersion: " << version
        << "\n\n";
  };
  write_status("1.0-1");
  PackageVersions versions(dpkg.path());
  const std::string z_id = FileBuildId(libz), s_id = FileBuildId(sqlite);
  const std::string z = std::filesystem::path(libz).filename().string();
  const std::string s = std::filesystem::path(sqlite).filename().string();
  EXPECT_EQ(versions.KeyVersion(z, z_id), "1.0-1_" + z_id.substr(0, 16));
  write_status("1.0-2+upgraded");  // a different size: seen even within one clock tick
  EXPECT_EQ(versions.KeyVersion(s, s_id), "1.0-2+upgraded_" + s_id.substr(0, 16));
  // What was answered for a build stays: that build was 1.0-1.
  EXPECT_EQ(versions.KeyVersion(z, z_id), "1.0-1_" + z_id.substr(0, 16));
}

TEST(PackageVersionsTest, RecordsAndProfilesAreRewrittenKeyByKey) {
  PackageVersions versions;
  const std::string id = FileBuildId(LoadedPath("libz.so.1"));
  wire::RunRecord run;
  for (const char* module : {"libz.so.1", "libmine.so.1"}) {
    wire::Record* r = run.add_records();
    r->mutable_key()->set_module(module);
    r->mutable_key()->set_module_version(id);
    r->mutable_key()->set_symbol("deflate");
  }
  versions.Apply(&run);
  EXPECT_EQ(SplitModuleVersion(run.records(0).key().module_version()).version,
            DpkgQuery("-W -f='${Version}' zlib1g:amd64"));
  EXPECT_EQ(run.records(1).key().module_version(), id);
  wire::LabProfile p;
  *p.add_records() = run.records(0);
  p.mutable_records(0)->mutable_key()->set_module_version(id);
  p.add_apis()->CopyFrom(p.records(0).key());
  versions.Apply(&p);
  EXPECT_EQ(p.records(0).key().module_version(), run.records(0).key().module_version());
  EXPECT_EQ(p.apis(0).module_version(), run.records(0).key().module_version());
}

}  // namespace
}  // namespace fieldprof
