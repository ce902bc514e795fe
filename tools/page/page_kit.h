// The page kit: what every fieldprof page draws, written once. Its
// script (kit.js: durations, bytes and counts as text, the heat
// spectrum, log2 histograms, flame graphs, sortable tables, tooltips) and
// styles (kit.css) go into every page the command line writes (record,
// tree, points, the vendor's report) and into the aggregator's dashboard.
// Here: putting a page together in C++ around them.
#ifndef FIELDPROF_TOOLS_PAGE_PAGE_KIT_H_
#define FIELDPROF_TOOLS_PAGE_PAGE_KIT_H_

#include <bit>
#include <cstddef>
#include <nlohmann/json.hpp>
#include <string>
#include <string_view>
#include <vector>

#include "common/base/embedded_file.h"

namespace fieldprof::page {

// The kit's files ("kit.js", "kit.css", "page.css": the local toolkit's
// page layout), or nullptr.
const EmbeddedFile* KitFile(std::string_view name);

// A self-contained page of the local toolkit, in the kit's one shell: the
// head (`title`, escaped here; the kit's styles, page.css, then `css`), a
// header bar (`brand`; #command and #facts for the page's script to
// fill), `body` in <main>, the tooltip (#tip), `data` (safe inside
// <script type="application/json" id="fp-data">), then the kit's script
// and `js`. What is put in is never searched again.
std::string RenderPage(std::string_view brand, const std::string& title, std::string_view body,
                       std::string_view css, std::string_view js, const nlohmann::json& data);

// For a page written in C++ without a script of its own (the vendor's
// report): the kit's styles as a <style> element for its head, and the
// kit's script as a <script> element for the end of its body, which
// draws the histograms it marked (kit.js drawMarked) and sets
// body[data-ready] when done.
std::string KitStyleElement();
std::string KitScriptElement();

// JSON to put inside <script>: "</" is written "<\/", so that names from
// a program cannot end the element early.
std::string ScriptJson(const nlohmann::json& data);

// `n` bytes as base64.
std::string Base64(const void* bytes, size_t n);

// A little-endian array as base64: the page reads it into a typed array.
template <typename T>
std::string Base64Of(const std::vector<T>& v) {
  static_assert(std::endian::native == std::endian::little);
  return Base64(v.data(), v.size() * sizeof(T));
}

}  // namespace fieldprof::page

#endif  // FIELDPROF_TOOLS_PAGE_PAGE_KIT_H_
