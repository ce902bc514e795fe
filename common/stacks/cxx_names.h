// C++ names for reports: demangling, and splitting a demangled
// name into the scopes that enclose the function, so costs can be grouped by
// namespace and class.
//
//   Demangle("_ZNSt6vectorIiSaIiEE9push_backERKi")
//       -> "std::vector<int, std::allocator<int> >::push_back(int const&)"
//   SplitScopes(that) -> {"std", "vector"}, function "push_back"
//
// The splitter reads the demangler's output (GNU style, as c++filt prints it)
// and keeps apart what a naive split at "::" would break:
// - template arguments, which hold "::" of their own (std::map<std::string,
//   ns::T>::find), and are dropped from the scope names used for grouping;
// - parameter lists and "(anonymous namespace)";
// - lambdas ({lambda(int)#1}) and other unnamed entities ({unnamed type#1});
// - suffixes like " [clone .constprop.0]" and " const";
// - "virtual thunk to", "non-virtual thunk to", "covariant return thunk to";
// - operator names: operator<, operator<<, operator>>=, operator->,
//   operator(), operator<=>, conversion operators.
// A C name (no "::") has no scopes.
#ifndef FIELDPROF_COMMON_STACKS_CXX_NAMES_H_
#define FIELDPROF_COMMON_STACKS_CXX_NAMES_H_

#include <string>
#include <vector>

namespace fieldprof {

// The demangled form of an Itanium-ABI symbol ("_Z..."), or `symbol` as it is.
std::string Demangle(const std::string& symbol);

struct CxxName {
  // Enclosing scopes, outermost first, template arguments dropped:
  // {"std", "vector"}, {"(anonymous namespace)", "Parser"}.
  std::vector<std::string> scopes;
  std::string function;  // "push_back", "operator<", "{lambda(int)#1}"
  std::string thunk;     // "virtual thunk to", ... or ""
  std::string clone;     // "[clone .constprop.0]", ... or ""
};

// Splits a demangled name (see above).
CxxName SplitScopes(const std::string& demangled);

// "ns::Class" from the first `depth` scopes ("" when there are none).
std::string ScopePrefix(const CxxName& n, size_t depth);

}  // namespace fieldprof

#endif  // FIELDPROF_COMMON_STACKS_CXX_NAMES_H_
