#include "common/wire/platform.h"

#include <gtest/gtest.h>

namespace fieldprof::agent {
namespace {

TEST(PlatformTest, IntelCpuinfo) {
  Platform p = PlatformFromCpuinfo(
      "x86_64", "processor\t: 0\nvendor_id\t: GenuineIntel\ncpu family\t: 6\nmodel\t\t: 85\n");
  EXPECT_EQ(p.os, wire::OS_LINUX);
  EXPECT_EQ(p.arch, wire::ARCH_X86_64);
  EXPECT_EQ(p.cpu_vendor, wire::CPU_VENDOR_INTEL);
  EXPECT_EQ(p.cpu_family, 6);
}

TEST(PlatformTest, AmdAndArm) {
  EXPECT_EQ(PlatformFromCpuinfo("x86_64", "vendor_id : AuthenticAMD\ncpu family : 25\n").cpu_family,
            25);
  Platform arm = PlatformFromCpuinfo("aarch64", "CPU implementer\t: 0x41\nCPU architecture: 8\n");
  EXPECT_EQ(arm.arch, wire::ARCH_AARCH64);
  EXPECT_EQ(arm.cpu_vendor, wire::CPU_VENDOR_ARM);
  EXPECT_EQ(arm.cpu_family, 8);
}

TEST(PlatformTest, GarbageIsUnspecifiedNotACrash) {
  Platform p = PlatformFromCpuinfo("x86_64", "cpu family : banana\n\n:::\n");
  EXPECT_EQ(p.cpu_vendor, wire::CPU_VENDOR_UNSPECIFIED);
  EXPECT_EQ(p.cpu_family, 0);
}

TEST(PlatformTest, ThisMachineIsValid) {
  Platform p = DetectPlatform();
  wire::Platform w;
  PlatformToWire(p, &w);
  EXPECT_EQ(p.os, wire::OS_LINUX);
  EXPECT_NE(p.arch, wire::ARCH_UNSPECIFIED);
}

}  // namespace
}  // namespace fieldprof::agent
