#include "common/settings/options.h"

#include <cerrno>
#include <charconv>
#include <cstdlib>
#include <fstream>
#include <sstream>

namespace fieldprof {

std::string_view TrimSpace(std::string_view s) {
  while (!s.empty() &&
         (s.front() == ' ' || s.front() == '\t' || s.front() == '\r' || s.front() == '\n')) {
    s.remove_prefix(1);
  }
  while (!s.empty() &&
         (s.back() == ' ' || s.back() == '\t' || s.back() == '\r' || s.back() == '\n')) {
    s.remove_suffix(1);
  }
  return s;
}

namespace {}  // namespace

OptionTable::OptionTable(std::string program, std::string summary)
    : program_(std::move(program)), summary_(std::move(summary)) {}

void OptionTable::AddString(std::string name, std::string* target, std::string help) {
  options_.push_back({name, std::move(help), *target, false, [target](std::string_view v) {
                        target->assign(v);
                        return Status::Ok();
                      }});
}

void OptionTable::AddInt(std::string name, int64_t* target, std::string help, int64_t min,
                         int64_t max) {
  options_.push_back({name, std::move(help), std::to_string(*target), false,
                      [name, target, min, max](std::string_view v) -> Status {
                        int64_t x = 0;
                        auto [ptr, ec] = std::from_chars(v.data(), v.data() + v.size(), x);
                        if (ec != std::errc() || ptr != v.data() + v.size()) {
                          return InvalidArgument(name + ": '" + std::string(v) +
                                                 "' is not an integer");
                        }
                        if (x < min || x > max) {
                          return InvalidArgument(name + ": " + std::string(v) + " is outside " +
                                                 std::to_string(min) + ".." + std::to_string(max));
                        }
                        *target = x;
                        return Status::Ok();
                      }});
}

void OptionTable::AddDouble(std::string name, double* target, std::string help, double min,
                            double max) {
  std::ostringstream def;
  def << *target;
  const std::string n = name;
  options_.push_back({std::move(name), std::move(help), def.str(), false,
                      [target, min, max, n](std::string_view v) -> Status {
                        const std::string text(v);
                        char* end = nullptr;
                        errno = 0;
                        const double x = std::strtod(text.c_str(), &end);
                        if (text.empty() || end != text.c_str() + text.size() || errno != 0) {
                          return InvalidArgument(n + ": '" + text + "' is not a number");
                        }
                        if (!(x >= min && x <= max)) {
                          std::ostringstream m;
                          m << n << ": " << text << " is out of range [" << min << ", " << max
                            << "]";
                          return InvalidArgument(m.str());
                        }
                        *target = x;
                        return Status::Ok();
                      }});
}

void OptionTable::AddBool(std::string name, bool* target, std::string help) {
  options_.push_back({name, std::move(help), *target ? "true" : "false", true,
                      [name, target](std::string_view v) -> Status {
                        if (v == "true" || v == "1" || v == "yes" || v == "on") {
                          *target = true;
                        } else if (v == "false" || v == "0" || v == "no" || v == "off") {
                          *target = false;
                        } else {
                          return InvalidArgument(name + ": '" + std::string(v) +
                                                 "' is not a boolean (true/false)");
                        }
                        return Status::Ok();
                      }});
}

void OptionTable::AddRenamed(std::string old_name, std::string says) {
  renamed_.emplace_back(std::move(old_name), std::move(says));
}

Status OptionTable::Unknown(std::string_view name, bool flag) const {
  for (const auto& [old_name, says] : renamed_) {
    if (old_name == name) return InvalidArgument("--" + old_name + " was renamed: " + says);
  }
  return InvalidArgument(flag ? "unknown flag --" + std::string(name)
                              : "unknown option '" + std::string(name) + "'");
}

const OptionTable::Option* OptionTable::Find(std::string_view name) const {
  for (const Option& o : options_) {
    if (o.name == name) return &o;
  }
  return nullptr;
}

Status OptionTable::Set(std::string_view name, std::string_view value) {
  const Option* o = Find(name);
  if (o == nullptr) {
    return Unknown(name, /*flag=*/false);
  }
  FP_RETURN_IF_ERROR(o->set(value));
  given_.insert(o->name);
  return Status::Ok();
}

Status OptionTable::ParseFile(const std::string& path) {
  std::ifstream in(path);
  if (!in) return NotFound("cannot open config file " + path);
  std::string line;
  int lineno = 0;
  while (std::getline(in, line)) {
    ++lineno;
    std::string_view l = line;
    if (size_t hash = l.find('#'); hash != std::string_view::npos) l = l.substr(0, hash);
    l = TrimSpace(l);
    if (l.empty()) continue;
    size_t eq = l.find('=');
    if (eq == std::string_view::npos) {
      return InvalidArgument(path + ":" + std::to_string(lineno) +
                             ": expected 'name = value', got '" + std::string(l) + "'");
    }
    Status s = Set(TrimSpace(l.substr(0, eq)), TrimSpace(l.substr(eq + 1)));
    if (!s.ok()) return s.WithContext(path + ":" + std::to_string(lineno));
  }
  return Status::Ok();
}

Status OptionTable::Parse(int argc, const char* const* argv) {
  FP_RETURN_IF_ERROR(ParseConfigThenFlags(argc, argv));
  if (help_requested_) return Status::Ok();
  for (const auto& check : checks_) FP_RETURN_IF_ERROR(check(*this));
  return Status::Ok();
}

Status OptionTable::ParseConfigThenFlags(int argc, const char* const* argv) {
  // Pass 1: the config file, so flags can override it.
  for (int i = 1; i < argc; ++i) {
    std::string_view a = argv[i];
    if (a == "--") break;
    if (a == "--config" && i + 1 < argc) return ParseFileThenFlags(argc, argv, argv[i + 1]);
    if (a.starts_with("--config=")) {
      return ParseFileThenFlags(argc, argv, std::string(a.substr(9)));
    }
  }
  return ParseFlags(argc, argv);
}

void OptionTable::AddCheck(std::function<Status(const OptionTable&)> check) {
  checks_.push_back(std::move(check));
}

Status OptionTable::ParseFileThenFlags(int argc, const char* const* argv, const std::string& f) {
  FP_RETURN_IF_ERROR(ParseFile(f));
  return ParseFlags(argc, argv);
}

Status OptionTable::ParseFlags(int argc, const char* const* argv) {
  for (int i = 1; i < argc; ++i) {
    std::string_view a = argv[i];
    if (a == "--") {
      for (++i; i < argc; ++i) positional_.emplace_back(argv[i]);
      break;
    }
    if (a == "--help" || a == "-h") {
      help_requested_ = true;
      continue;
    }
    std::string long_form;
    for (const auto& [letter, name] : shorts_) {
      if (a.size() == 2 && a[0] == '-' && a[1] == letter) long_form = "--" + name;
    }
    if (!long_form.empty()) a = long_form;
    if (!a.starts_with("--")) {
      positional_.emplace_back(a);
      continue;
    }
    a.remove_prefix(2);
    std::string_view name = a;
    std::string_view value;
    bool has_value = false;
    if (size_t eq = a.find('='); eq != std::string_view::npos) {
      name = a.substr(0, eq);
      value = a.substr(eq + 1);
      has_value = true;
    }
    if (name == "config") {
      if (!has_value) ++i;  // already read in pass 1
      continue;
    }
    const Option* o = Find(name);
    if (o == nullptr) {
      return Unknown(name, /*flag=*/true);
    }
    if (!has_value) {
      if (o->is_bool) {
        value = "true";
      } else if (i + 1 < argc) {
        value = argv[++i];
      } else {
        return InvalidArgument("flag --" + std::string(name) + " needs a value");
      }
    }
    Status s = o->set(value);
    if (!s.ok()) return s.WithContext("flag --" + std::string(name));
    given_.insert(o->name);
  }
  return Status::Ok();
}

void OptionTable::AddShort(char letter, const std::string& name) {
  shorts_.emplace_back(letter, name);
}

void OptionTable::SayDefault(const std::string& name, std::string text) {
  for (Option& o : options_) {
    if (o.name == name) o.default_text = std::move(text);
  }
}

std::string OptionTable::Help() const {
  std::ostringstream out;
  out << "Usage: " << program_ << " [--config FILE] [--name=value ...]\n\n" << summary_ << "\n\n";
  out << "Every option can also be set in the config file as 'name = value'; flags win.\n\n";
  out << "  --config FILE\n      read options from FILE first\n";
  for (const Option& o : options_) {
    std::string alias;
    for (const auto& [letter, name] : shorts_) {
      if (name == o.name) alias = std::string(", -") + letter + (o.is_bool ? "" : " VALUE");
    }
    out << "  --" << o.name << (o.is_bool ? "" : "=VALUE") << alias << "\n      " << o.help;
    out << " (default: " << (o.default_text.empty() ? "\"\"" : o.default_text) << ")\n";
  }
  out << "  --help\n      print this help\n";
  return out.str();
}

}  // namespace fieldprof
