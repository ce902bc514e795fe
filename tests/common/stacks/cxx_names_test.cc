// Demangling and the scope splitter on real names, with every
// hard case: templates holding "::", (anonymous namespace), lambdas, clones,
// thunks, return types, and operator<, operator<<, operator<=>, operator(),
// conversion operators, operator new.
#include "common/stacks/cxx_names.h"

#include <string>
#include <vector>

#include "gtest/gtest.h"

namespace fieldprof {
namespace {

struct Case {
  const char* mangled;
  std::vector<std::string> scopes;
  std::string function;
  std::string thunk = "", clone = "";
};

TEST(CxxNamesTest, SplitsRealNamesIntoScopesAndFunction) {
  const Case cases[] = {
      {"_ZNSt6vectorIiSaIiEE9push_backERKi", {"std", "vector"}, "push_back"},
      {"_ZN3foo3barEi.constprop.0", {"foo"}, "bar", "", "[clone .constprop.0]"},
      {"_ZN12_GLOBAL__N_16Parser5parseEv", {"(anonymous namespace)", "Parser"}, "parse"},
      {"_ZZN2ns3fooEvENKUliE_clEi", {"ns", "foo", "{lambda(int)#1}"}, "operator()"},
      {"_ZN2nsltERKNS_1AES2_", {"ns"}, "operator<"},
      {"_ZStlsISt11char_traitsIcEERSt13basic_ostreamIcT_ES5_PKc", {"std"}, "operator<<"},
      {"_ZThn16_NSdD0Ev", {"std", "basic_iostream"}, "~basic_iostream", "non-virtual thunk to"},
      {"_ZTv0_n24_NSdD1Ev", {"std", "basic_iostream"}, "~basic_iostream", "virtual thunk to"},
      {"_ZN4llvm12handleErrorsIJZNKS_6object13ELFObjectFileINS1_7ELFTypeILNS_7support10endiannes"
       "sE0ELb0EEEE15getSectionIndexENS1_11DataRefImplEEUlRKNS_13ErrorInfoBaseEE_EEENS_5ErrorESD_"
       "DpOT_",
       {"llvm"},
       "handleErrors"},
      {"_ZNSt3mapINSt7__cxx1112basic_stringIcSt11char_traitsIcESaIcEEEN2ns1TESt4lessIS5_ESaISt4pa"
       "irIKS5_S7_EEE4findERSB_",
       {"std", "map"},
       "find"},
      {"_ZN2nsrsERNS_1AEi", {"ns"}, "operator>>"},
      {"_ZN2ns1AclEv", {"ns", "A"}, "operator()"},
      {"_ZNK2ns1AcviEv", {"ns", "A"}, "operator int"},
      {"_ZN2ns1AptEv", {"ns", "A"}, "operator->"},
      {"_ZN2ns1AssERKS0_", {"ns", "A"}, "operator<=>"},
      {"_ZN2ns1AixEm", {"ns", "A"}, "operator[]"},
      {"_ZN2ns1AleERKS0_", {"ns", "A"}, "operator<="},
      {"_Znwm", {}, "operator new"},
      {"sqlite3_prepare_v2", {}, "sqlite3_prepare_v2"},
  };
  for (const Case& c : cases) {
    const std::string d = Demangle(c.mangled);
    const CxxName n = SplitScopes(d);
    EXPECT_EQ(n.scopes, c.scopes) << c.mangled << " = " << d;
    EXPECT_EQ(n.function, c.function) << c.mangled << " = " << d;
    EXPECT_EQ(n.thunk, c.thunk) << d;
    EXPECT_EQ(n.clone, c.clone) << d;
  }
}

TEST(CxxNamesTest, DemangleLeavesCNamesAndJunkAlone) {
  EXPECT_EQ(Demangle("deflate"), "deflate");
  EXPECT_EQ(Demangle("_Znotvalid!"), "_Znotvalid!");
  EXPECT_EQ(Demangle("_ZN2ns1A1fEv"), "ns::A::f()");
}

TEST(CxxNamesTest, ScopePrefixJoinsTheOuterScopes) {
  const CxxName n = SplitScopes(Demangle("_ZZN2ns3fooEvENKUliE_clEi"));
  EXPECT_EQ(ScopePrefix(n, 0), "");
  EXPECT_EQ(ScopePrefix(n, 1), "ns");
  EXPECT_EQ(ScopePrefix(n, 2), "ns::foo");
  EXPECT_EQ(ScopePrefix(n, 9), "ns::foo::{lambda(int)#1}");
}

}  // namespace
}  // namespace fieldprof
