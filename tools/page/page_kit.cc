#include "tools/page/page_kit.h"

#include <openssl/evp.h>

#include <algorithm>
#include <utility>

#include "tools/shared/escape.h"

namespace fieldprof::page {
namespace {

using json = nlohmann::json;

// The template with each {{NAME}} replaced, in one pass.
std::string Fill(std::string_view tmpl,
                 const std::vector<std::pair<std::string_view, std::string_view>>& with) {
  std::string out;
  while (!tmpl.empty()) {
    const size_t at = tmpl.find("{{");
    out += tmpl.substr(0, at);
    if (at == std::string_view::npos) break;
    tmpl.remove_prefix(at);
    const size_t end = tmpl.find("}}");
    const std::string_view name = tmpl.substr(2, end == std::string_view::npos ? 0 : end - 2);
    auto it =
        std::find_if(with.begin(), with.end(), [&](const auto& p) { return p.first == name; });
    if (it == with.end()) {
      out += "{{";
      tmpl.remove_prefix(2);
      continue;
    }
    out += it->second;
    tmpl.remove_prefix(end + 2);
  }
  return out;
}

}  // namespace

std::string Base64(const void* bytes, size_t n) {
  const auto* from = static_cast<const unsigned char*>(bytes);
  std::string out(4 * ((n + 2) / 3), '\0');
  auto* to = reinterpret_cast<unsigned char*>(out.data());
  constexpr size_t kChunk = 3 << 20;  // whole groups of three bytes, an int's worth
  for (size_t at = 0; at < n; at += kChunk) {
    const int len = static_cast<int>(std::min(kChunk, n - at));
    to += EVP_EncodeBlock(to, from + at, len);
  }
  return out;
}

std::string ScriptJson(const json& data) {
  const std::string text = data.dump(-1, ' ', false, json::error_handler_t::replace);
  std::string safe;
  safe.reserve(text.size());
  for (size_t i = 0; i < text.size(); ++i) {
    safe += text[i];
    if (text[i] == '<' && i + 1 < text.size() && text[i + 1] == '/') safe += '\\';
  }
  return safe;
}

// The shell every page of the local toolkit shares.
constexpr std::string_view kShell = R"(<!doctype html>
<html lang="en">
<head>
<meta charset="utf-8">
<meta name="viewport" content="width=device-width, initial-scale=1">
<title>{{TITLE}}</title>
<style>
{{CSS}}
</style>
</head>
<body>
<header>
  <span class="brand">{{BRAND}}</span>
  <span id="command"></span>
  <span id="facts" class="facts"></span>
</header>
<main>
{{BODY}}
</main>
<div id="tip" class="tip" hidden></div>
<script id="fp-data" type="application/json">{{DATA}}</script>
<script>
{{JS}}
</script>
</body>
</html>
)";

std::string RenderPage(std::string_view brand, const std::string& title, std::string_view body,
                       std::string_view css, std::string_view js, const json& data) {
  const std::string styles = std::string(KitFile("kit.css")->body) +
                             std::string(KitFile("page.css")->body) + std::string(css);
  const std::string scripts = std::string(KitFile("kit.js")->body) + std::string(js);
  const std::string escaped = tools::HtmlEscape(title);
  const std::string safe = ScriptJson(data);
  return Fill(kShell, {{"TITLE", escaped},
                       {"CSS", styles},
                       {"BRAND", brand},
                       {"BODY", body},
                       {"DATA", safe},
                       {"JS", scripts}});
}

std::string KitStyleElement() {
  return "<style>\n" + std::string(KitFile("kit.css")->body) + "</style>\n";
}

std::string KitScriptElement() {
  return "<script>\n" + std::string(KitFile("kit.js")->body) +
         "fieldprofKit.drawMarked(document);\ndocument.body.dataset.ready = '1';\n</script>\n";
}

}  // namespace fieldprof::page
