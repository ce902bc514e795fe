#include "tools/shared/escape.h"

namespace fieldprof::tools {

std::string HtmlEscape(const std::string& s) {
  std::string out;
  for (char c : s) {
    switch (c) {
      case '&':
        out += "&amp;";
        break;
      case '<':
        out += "&lt;";
        break;
      case '>':
        out += "&gt;";
        break;
      case '"':
        out += "&quot;";
        break;
      case '\'':
        out += "&#39;";
        break;
      default:
        out += c;
    }
  }
  return out;
}

std::string CsvField(const std::string& s) {
  if (s.find_first_of(",\"\n\r") == std::string::npos) return s;
  std::string out = "\"";
  for (char c : s) {
    if (c == '"') out += '"';
    out += c;
  }
  return out + "\"";
}

std::string MarkdownCell(const std::string& s) {
  std::string out;
  for (char c : s) {
    if (c == '|' || c == '\\' || c == '`' || c == '*' || c == '_' || c == '<' || c == '>' ||
        c == '[' || c == ']') {
      out += '\\';
    }
    out += c == '\n' ? ' ' : c;
  }
  return out;
}

std::string XmlEscape(const std::string& s) {
  std::string clean;
  for (unsigned char c : s)
    clean += c < 0x20 && c != '\n' && c != '\t' ? '?' : static_cast<char>(c);
  return HtmlEscape(clean);
}

}  // namespace fieldprof::tools
