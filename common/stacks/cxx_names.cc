#include "common/stacks/cxx_names.h"

#include <cxxabi.h>

#include <cstdlib>
#include <cstring>

namespace fieldprof {
namespace {

// Operator tokens after "operator", longest first: their '<', '(', '['
// are not brackets.
const char* const kOperators[] = {
    "<=>", "<<=", ">>=", "->*", "()", "[]", "<<", ">>", "<=", ">=", "->", "==", "!=",
    "&&",  "||",  "++",  "--",  "+=", "-=", "*=", "/=", "%=", "&=", "|=", "^=", "<",
    ">",   "+",   "-",   "*",   "/",  "%",  "&",  "|",  "^",  "~",  "!",  "=",  ","};

bool IsIdent(char c) {
  return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '_';
}

// If s[i..] starts the word "operator" followed by an operator token,
// returns the length of "operator" + token (+ a space before it, if any);
// else 0.
size_t OperatorAt(const std::string& s, size_t i) {
  static const size_t kLen = std::strlen("operator");
  if (s.compare(i, kLen, "operator") != 0) return 0;
  if (i > 0 && IsIdent(s[i - 1])) return 0;
  size_t j = i + kLen;
  if (j < s.size() && IsIdent(s[j])) return 0;  // operatorX is a name; "operator new" a word
  while (j < s.size() && s[j] == ' ') ++j;
  for (const char* op : kOperators) {
    const size_t n = std::strlen(op);
    if (s.compare(j, n, op) == 0) return j + n - i;
  }
  return 0;
}

// Removes top-level <...> (template arguments) from a name.
std::string DropTemplateArgs(const std::string& s) {
  std::string out;
  int depth = 0;
  for (size_t i = 0; i < s.size(); ++i) {
    if (depth == 0) {
      if (const size_t op = OperatorAt(s, i); op > 0) {
        out.append(s, i, op);
        i += op - 1;
        continue;
      }
    }
    const char c = s[i];
    if (c == '<') {
      ++depth;
      continue;
    }
    if (c == '>' && depth > 0) {
      --depth;
      continue;
    }
    if (depth == 0) out += c;
  }
  return out;
}

// Splits at "::" outside brackets of any kind.
std::vector<std::string> SplitTop(const std::string& s) {
  std::vector<std::string> parts;
  std::string cur;
  int depth = 0;
  for (size_t i = 0; i < s.size(); ++i) {
    if (const size_t op = OperatorAt(s, i); op > 0) {
      cur.append(s, i, op);
      i += op - 1;
      continue;
    }
    const char c = s[i];
    if (c == '<' || c == '(' || c == '[' || c == '{') ++depth;
    if ((c == '>' || c == ')' || c == ']' || c == '}') && depth > 0) --depth;
    if (depth == 0 && c == ':' && i + 1 < s.size() && s[i + 1] == ':') {
      parts.push_back(cur);
      cur.clear();
      ++i;
      continue;
    }
    cur += c;
  }
  parts.push_back(cur);
  return parts;
}

// The part of the last component before its parameter list: the first '('
// outside brackets, past an operator token ("operator()(int)").
std::string WithoutParameters(const std::string& s) {
  int depth = 0;
  for (size_t i = 0; i < s.size(); ++i) {
    if (depth == 0) {
      if (const size_t op = OperatorAt(s, i); op > 0) {
        i += op - 1;
        continue;
      }
    }
    const char c = s[i];
    if (c == '(' && depth == 0 && i > 0) return s.substr(0, i);
    if (c == '<' || c == '(' || c == '[' || c == '{') ++depth;
    if ((c == '>' || c == ')' || c == ']' || c == '}') && depth > 0) --depth;
  }
  return s;
}

// A leading return type ("void ns::f()", "std::ostream& std::operator<<
// <...>(...)", "llvm::Error llvm::handleErrors<...>(...)"): the text after
// the last space outside brackets that comes before the parameter list and
// before the word "operator" (whose own spaces belong to its name).
std::string WithoutReturnType(const std::string& s) {
  int depth = 0;
  size_t cut = std::string::npos;
  for (size_t i = 0; i < s.size(); ++i) {
    const char c = s[i];
    if (depth == 0) {
      if (s.compare(i, 8, "operator") == 0 && (i == 0 || !IsIdent(s[i - 1]))) break;
      // The parameter list: a '(' after a name, not a scope's "(anonymous ...)".
      if (c == '(' && i > 0 && (IsIdent(s[i - 1]) || s[i - 1] == '>')) break;
      if (c == ' ') cut = i;
    }
    if (c == '<' || c == '(' || c == '[' || c == '{') ++depth;
    if ((c == '>' || c == ')' || c == ']' || c == '}') && depth > 0) --depth;
  }
  return cut == std::string::npos ? s : s.substr(cut + 1);
}

}  // namespace

std::string Demangle(const std::string& symbol) {
  if (symbol.rfind("_Z", 0) != 0) return symbol;
  int status = 0;
  char* d = abi::__cxa_demangle(symbol.c_str(), nullptr, nullptr, &status);
  std::string out = status == 0 && d != nullptr ? d : symbol;
  std::free(d);
  return out;
}

CxxName SplitScopes(const std::string& demangled) {
  CxxName n;
  std::string s = demangled;
  for (const char* p : {"virtual thunk to ", "non-virtual thunk to ", "covariant return thunk to ",
                        "construction vtable for ", "vtable for ", "typeinfo for ",
                        "typeinfo name for ", "guard variable for ", "transaction clone for "}) {
    if (s.rfind(p, 0) == 0) {
      n.thunk = std::string(p, std::strlen(p) - 1);
      s = s.substr(std::strlen(p));
      break;
    }
  }
  if (const size_t c = s.find(" [clone "); c != std::string::npos) {
    n.clone = s.substr(c + 1);
    s = s.substr(0, c);
  }
  std::vector<std::string> parts = SplitTop(WithoutReturnType(s));
  // The function: its parameters and qualifiers off, its template arguments
  // too (except an operator's own '<').
  n.function = DropTemplateArgs(WithoutParameters(parts.back()));
  while (!n.function.empty() && n.function.back() == ' ') n.function.pop_back();
  parts.pop_back();
  // Scopes: a function's (the enclosing function of a lambda or a local
  // class) without its parameters; brackets ("(anonymous namespace)",
  // "{lambda(int)#1}") as they are.
  for (const std::string& part : parts) {
    if (part.empty()) continue;
    n.scopes.push_back(
        part[0] == '{' || part[0] == '(' ? part : DropTemplateArgs(WithoutParameters(part)));
  }
  return n;
}

std::string ScopePrefix(const CxxName& n, size_t depth) {
  std::string out;
  for (size_t i = 0; i < depth && i < n.scopes.size(); ++i) {
    if (i > 0) out += "::";
    out += n.scopes[i];
  }
  return out;
}

}  // namespace fieldprof
