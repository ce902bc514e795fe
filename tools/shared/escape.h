// Escaping text from the data (module and symbol names, paths, messages)
// for the formats the commands write: every string that reaches a report,
// a page or a CI file goes through one of these.
#ifndef FIELDPROF_TOOLS_SHARED_ESCAPE_H_
#define FIELDPROF_TOOLS_SHARED_ESCAPE_H_

#include <string>

namespace fieldprof::tools {

// HTML text and attribute values: & < > " ' as entities.
std::string HtmlEscape(const std::string& s);
// XML 1.0 text: HTML's escapes, and control characters (not allowed in
// XML 1.0) other than newline and tab as '?'.
std::string XmlEscape(const std::string& s);
// A CSV field (RFC 4180): quoted, with quotes doubled, when it holds a
// comma, a quote or a line break.
std::string CsvField(const std::string& s);
// A Markdown table cell: the characters Markdown would read as markup
// backslash-escaped, line breaks as spaces.
std::string MarkdownCell(const std::string& s);

}  // namespace fieldprof::tools

#endif  // FIELDPROF_TOOLS_SHARED_ESCAPE_H_
