// The language server (server_impl.h): what it shows. Hover, code lenses,
// inlay hints and diagnostics, from the cost index.
#include "tools/ide/server_impl.h"

namespace fieldprof::tools::lsp {
namespace {

std::string Time(const ApiCost& c, double ns) {
  return FormatMetricValue(wire::METRIC_WALL_TIME_NS, ns, c.resolution_ns);
}

// The wall-time histogram as text bars, one row per log2 bucket from the
// first to the last with calls (a fenced block: monospace in every client).
std::string Bars(const ApiCost& c) {
  uint64_t top = std::max<uint64_t>(c.zero_count, 1);
  for (uint64_t n : c.buckets) top = std::max(top, n);
  std::vector<std::pair<std::string, uint64_t>> rows;
  if (c.zero_count > 0) {
    rows.emplace_back(ZeroBucketLabel(wire::METRIC_WALL_TIME_NS, c.resolution_ns), c.zero_count);
  }
  for (size_t k = 0; k < c.buckets.size(); ++k) {
    const int i = c.first_bucket + static_cast<int>(k);
    rows.emplace_back(FormatNanos(static_cast<double>(BucketLow(i))) + " .. " +
                          FormatNanos(static_cast<double>(BucketHigh(i))),
                      c.buckets[k]);
  }
  size_t width = 0;
  for (const auto& r : rows) width = std::max(width, r.first.size());
  std::string out = "```text\n";
  for (const auto& [label, n] : rows) {
    const int cells = n == 0
                          ? 0
                          : std::max(1, static_cast<int>(std::lround(24.0 * static_cast<double>(n) /
                                                                     static_cast<double>(top))));
    out += std::string(width - label.size(), ' ') + label + " ";
    for (int k = 0; k < cells; ++k) out += "\u2588";
    out += std::string(static_cast<size_t>(25 - cells), ' ') + FormatCount(n) + "\n";
  }
  return out + "```";
}

// One module's figures: a table, then the per-call costs and where the data
// comes from.
std::string Figures(const ApiCost& c) {
  std::string s = "| p50 | p90 | p99 | mean ± sd |\n|---|---|---|---|\n";
  s += "| " + Time(c, c.time.p50) + " | " + Time(c, c.time.p90) + " | " + Time(c, c.time.p99) +
       " | " + Time(c, c.time.mean) + " ± " + FormatNanos(c.time.stddev) + " |\n\n";
  if (!c.suspect.empty()) s += "⚠ **Suspect:** " + c.suspect + "\n\n";
  std::vector<std::string> per;
  if (c.alloc_bytes >= 0) {
    std::string a = FormatBytes(c.alloc_bytes) + " allocated";
    if (c.alloc_count >= 0) {
      char n[32];
      std::snprintf(n, sizeof n, " in %.2f allocations", c.alloc_count);
      a += n;
    }
    per.push_back(a);
  }
  if (c.file_io_bytes >= 0) per.push_back("file I/O " + FormatBytes(c.file_io_bytes));
  if (c.socket_io_bytes >= 0) per.push_back("socket I/O " + FormatBytes(c.socket_io_bytes));
  for (size_t i = 0; i < per.size(); ++i) s += (i == 0 ? "Per call: " : " · ") + per[i];
  if (!per.empty()) s += "\n\n";
  s += FormatCount(c.time.count) + " calls in " + FormatCount(c.runs) + " runs";
  if (c.machines > 0) s += " on " + FormatCount(c.machines) + "+ machines";
  s += " · " + std::to_string(c.platforms.size()) +
       (c.platforms.size() == 1 ? " platform" : " platforms");
  if (!c.platforms.empty()) {
    s += " (";
    for (size_t i = 0; i < c.platforms.size() && i < 4; ++i) s += (i ? ", " : "") + c.platforms[i];
    if (c.platforms.size() > 4) s += ", …";
    s += ")";
  }
  if (c.truncated) s += " · some runs cut short by the overhead budget";
  s += "\n";
  if (!c.inside.empty()) {
    s += "\nInside " + c.module + " (field stacks, " +
         FormatNanos(static_cast<double>(c.inside_ns)) + " of sampled CPU): ";
    for (size_t i = 0; i < c.inside.size(); ++i) {
      char share[16];
      std::snprintf(share, sizeof share, "%.0f%%", 100 * c.inside[i].share);
      s += (i ? " · " : "") + std::string("`") + c.inside[i].frame + "` " + share;
    }
    s += "\n";
  }
  return s;
}

}  // namespace

Server::Choice Server::Choose(const std::vector<ApiCost>& all,
                              const std::vector<std::string>& includes) {
  Choice ch;
  if (all.size() > 1) {
    for (const ApiCost& c : all) {
      (ModuleMatchesIncludes(c.module, includes) ? ch.shown : ch.others).push_back(&c);
    }
    ch.decided = !ch.shown.empty() && !ch.others.empty();
    if (ch.shown.empty()) std::swap(ch.shown, ch.others);
  } else {
    for (const ApiCost& c : all) ch.shown.push_back(&c);
  }
  return ch;
}

json Server::Hover(const json& params) {
  Document* d = Doc(params);
  if (d == nullptr) return nullptr;
  const std::string& text = d->text;
  const size_t at =
      OffsetOf(text, params.at("position").at("line"), params.at("position").at("character"));
  for (const PointMark& m : PointMarks(text)) {
    if (m.begin <= at && at <= m.end) return PointHover(text, m);
  }
  if (const CxxUnit* u = CxxUnitOf(*d)) {
    // Clang's answer is the call's own: a name it resolved to a function
    // of the program's is not taken for a library's of the same name.
    const std::vector<const CxxCall*> calls = u->At(at);
    if (!calls.empty()) return CxxHover(text, calls);
    // Clang read the whole file and found no call here: the name is not a
    // call (a definition, `&f`), and no library's. Where it could not read
    // everything, names are looked up as in C.
    if (u->errors() == 0) return nullptr;
  }
  const Word w = IdentifierAt(text, at);
  if (w.name.empty()) return nullptr;
  std::shared_ptr<const CostIndex> ix = Index("textDocument/hover");
  if (!ix) return nullptr;
  const std::shared_ptr<const std::vector<ApiCost>> found = ix->Find(w.name);
  if (found->empty()) return nullptr;
  std::string md = "### " + w.name + " — field cost\n\n" + Cards(*found, text);
  md += "\n---\n\n" + SnapshotLine(*ix);
  json range = {{"start", PositionOf(text, w.begin)}, {"end", PositionOf(text, w.end)}};
  return {{"contents", {{"kind", "markdown"}, {"value", md}}}, {"range", range}};
}

std::string Server::Cards(const std::vector<ApiCost>& all, const std::string& text) {
  const Choice ch = Choose(all, IncludedHeaders(text));
  std::string md;
  if (ch.shown.size() > 1) {
    md += "Found in " + std::to_string(ch.shown.size()) +
          " modules; this source's includes do not tell which one it calls.\n\n";
  }
  for (size_t i = 0; i < ch.shown.size(); ++i) {
    const ApiCost& c = *ch.shown[i];
    if (i > 0) md += "\n---\n\n";
    md += "`" + c.module + "`" + (ch.decided ? " (by this source's includes)" : "") + "\n\n";
    md += Figures(c);
    md += "\n" + Bars(c) + "\n";
  }
  if (!ch.others.empty()) {
    md += "\n---\n\nAlso in:";
    for (const ApiCost* c : ch.others) {
      md += " `" + c->module + "` (p50 " + Time(*c, c->time.p50) + ", " +
            FormatCount(c->time.count) + " calls)";
    }
    md += "\n";
  }
  return md;
}

json Server::PointHover(const std::string& text, const PointMark& m) {
  std::shared_ptr<const CostIndex> ix = Index("textDocument/hover");
  if (!ix) return nullptr;
  const std::shared_ptr<const std::vector<PointSeries>> found = ix->FindPoints(m.tag);
  std::string md = "### " + m.macro + " " + m.tag + " · " + m.name + " — field durations\n\n";
  auto touches = [&](const PointSeries& p) {
    return p.scope == m.name || p.from == m.name || p.to == m.name;
  };
  auto label = [](const PointSeries& p) {
    return p.scope.empty() ? p.from + " → " + p.to : p.scope + " (scope)";
  };
  auto time = [](const PointSeries& p, double ns) {
    return FormatMetricValue(wire::METRIC_POINT_NS, ns, p.resolution_ns);
  };
  std::vector<std::string> modules;
  for (const PointSeries& p : *found) {
    if (std::find(modules.begin(), modules.end(), p.module) == modules.end()) {
      modules.push_back(p.module);
    }
  }
  if (modules.empty()) {
    md += "No field durations for tag `" + m.tag +
          "` yet. Points are summed from volunteers' measured runs of a program that "
          "marks them.\n";
  }
  for (size_t mi = 0; mi < modules.size(); ++mi) {
    const std::string& module = modules[mi];
    if (mi > 0) md += "\n---\n\n";
    uint32_t builds = 0;
    uint64_t machines = 0;
    std::vector<const PointSeries*> near, far;
    for (const PointSeries& p : *found) {
      if (p.module != module) continue;
      builds = std::max(builds, p.builds);
      machines = std::max(machines, p.machines);
      (touches(p) ? near : far).push_back(&p);
    }
    md += "`" + module + "`";
    if (builds > 1) md += " (" + std::to_string(builds) + " builds)";
    md += "\n\n";
    if (near.empty()) {
      md += "No segment starts or ends at `" + m.name + "` here.\n\n";
    } else {
      md += "| segment | p50 | p90 | p99 | mean | calls | runs |\n|---|---|---|---|---|---|---|\n";
      for (const PointSeries* p : near) {
        md += "| " + label(*p) + " | " + time(*p, p->time.p50) + " | " + time(*p, p->time.p90) +
              " | " + time(*p, p->time.p99) + " | " + time(*p, p->time.mean) + " | " +
              FormatCount(p->time.count) + " | " + FormatCount(p->runs) + " |\n";
      }
      md += "\n";
    }
    if (!far.empty()) {
      md += "Other segments of `" + m.tag + "`:";
      for (size_t i = 0; i < far.size() && i < 6; ++i) {
        md += std::string(i ? " ·" : "") + " " + label(*far[i]) + " p50 " +
              time(*far[i], far[i]->time.p50);
      }
      if (far.size() > 6) md += " · " + std::to_string(far.size() - 6) + " more";
      md += "\n\n";
    }
    if (machines > 0) md += "Seen on " + FormatCount(machines) + "+ machines.\n";
  }
  if (modules.size() > 0 && std::find(modules.begin(), modules.end(), "main") != modules.end()) {
    md += "\n`main` sums the points of every user's own program that uses this tag.\n";
  }
  md += "\n---\n\n" + SnapshotLine(*ix);
  json range = {{"start", PositionOf(text, m.begin)}, {"end", PositionOf(text, m.end)}};
  return {{"contents", {{"kind", "markdown"}, {"value", md}}}, {"range", range}};
}

std::string Server::SnapshotLine(const CostIndex& ix) {
  std::string s = "Field snapshot " + std::to_string(ix.snapshot_version()) + " of " +
                  DateOf(ix.created_unix_ms());
  if (ix.fragments_held() < ix.fragment_count()) {
    s += " (" + std::to_string(ix.fragments_held()) + " of " + std::to_string(ix.fragment_count()) +
         " fragments held)";
  }
  return s + "\n";
}

std::vector<Server::Site> Server::SolidSites(Document& d, const char* method) {
  std::vector<Site> out;
  const CxxUnit* u = CxxUnitOf(d);
  std::shared_ptr<const CostIndex> ix = Index(method);
  if (!ix) return out;
  std::vector<size_t> resolved;  // where Clang's calls begin
  if (u != nullptr) {
    CxxSites(*u, *ix, &out);
    if (u->errors() == 0) return out;
    // What Clang could not resolve (a header missing) is looked up by name.
    for (const CxxCall& c : u->calls()) resolved.push_back(c.begin);
  }
  const std::vector<std::string> includes = IncludedHeaders(d.text);
  for (const CallSite& cs : CallSites(d.text)) {
    if (std::binary_search(resolved.begin(), resolved.end(), cs.begin)) continue;
    std::shared_ptr<const std::vector<ApiCost>> found = ix->Find(cs.name);
    if (found->empty()) continue;
    const Choice ch = Choose(*found, includes);
    const ApiCost* c = ch.shown.front();  // the most called of those shown
    if (!Solid(*c)) continue;
    out.push_back({cs, c, ch.shown.size() > 1, std::move(found)});
  }
  return out;
}

std::vector<Server::PointSite> Server::SolidPoints(const std::string& text, const char* method) {
  std::vector<PointSite> out;
  const std::vector<PointMark> marks = PointMarks(text);
  if (marks.empty()) return out;
  std::shared_ptr<const CostIndex> ix = Index(method);
  if (!ix) return out;
  for (const PointMark& m : marks) {
    const bool scope = m.macro.rfind("FP_POINT", 0) != 0;
    const PointSeries* best = nullptr;
    for (const PointSeries& p : *ix->FindPoints(m.tag)) {
      const bool fits = scope ? p.scope == m.name : p.to == m.name && p.scope.empty();
      if (fits && (best == nullptr || p.time.count > best->time.count)) best = &p;
    }
    if (best == nullptr || best->time.count < opt_.min_calls || best->runs < opt_.min_runs ||
        best->time.p50 < opt_.min_p50_ns) {
      continue;
    }
    out.push_back({m, scope ? best->scope : best->from + " → " + best->to, *best});
  }
  return out;
}

std::string Server::PointTime(const PointSeries& p, double ns) {
  return FormatMetricValue(wire::METRIC_POINT_NS, ns, p.resolution_ns);
}

Document* Server::Doc(const json& params) {
  auto it = docs_.find(params.at("textDocument").at("uri").get<std::string>());
  return it == docs_.end() ? nullptr : &it->second;
}

json Server::CodeLenses(const json& params) {
  json out = json::array();
  Document* doc = opt_.code_lens ? Doc(params) : nullptr;
  if (doc == nullptr) return out;
  const std::string& text = doc->text;
  const Positions pos(text);
  for (const Site& s : SolidSites(*doc, "textDocument/codeLens")) {
    std::string title = s.call.name + " ≈ " + Time(*s.cost, s.cost->time.p50) + " p50, p99 " +
                        Time(*s.cost, s.cost->time.p99) + " (field";
    title += s.ambiguous ? ", " + s.cost->module + " of several)" : ")";
    if (!s.cost->suspect.empty()) title += " ⚠ suspect";
    out.push_back({{"range", {{"start", pos.At(s.call.begin)}, {"end", pos.At(s.call.end)}}},
                   {"command", {{"title", title}, {"command", ""}}}});
  }
  for (const PointSite& p : SolidPoints(text, "textDocument/codeLens")) {
    const std::string title =
        p.mark.tag + ": " + p.label + " ≈ " + PointTime(p.series, p.series.time.p50) +
        " p50, p99 " + PointTime(p.series, p.series.time.p99) + " (field, " + p.series.module + ")";
    out.push_back({{"range", {{"start", pos.At(p.mark.begin)}, {"end", pos.At(p.mark.end)}}},
                   {"command", {{"title", title}, {"command", ""}}}});
  }
  return out;
}

json Server::InlayHints(const json& params) {
  json out = json::array();
  Document* doc = opt_.inlay_hints ? Doc(params) : nullptr;
  if (doc == nullptr) return out;
  const std::string& text = doc->text;
  size_t from = 0, to = text.size();
  if (params.contains("range")) {
    const json& r = params["range"];
    from = OffsetOf(text, r.at("start").at("line"), r.at("start").at("character"));
    to = OffsetOf(text, r.at("end").at("line"), r.at("end").at("character"));
  }
  const Positions pos(text);
  for (const Site& s : SolidSites(*doc, "textDocument/inlayHint")) {
    if (s.call.after < from || s.call.after > to) continue;
    out.push_back({{"position", pos.At(s.call.after)},
                   {"label", "≈ " + Time(*s.cost, s.cost->time.p50) + " p50" +
                                 (s.cost->suspect.empty() ? "" : " ⚠")},
                   {"paddingLeft", true},
                   {"tooltip", s.call.name + " in " + s.cost->module + ": " +
                                   FormatCount(s.cost->time.count) + " calls in " +
                                   FormatCount(s.cost->runs) + " runs (fieldprof)"}});
  }
  for (const PointSite& p : SolidPoints(text, "textDocument/inlayHint")) {
    // After the macro's parenthesis; a scope's hint reads as its
    // duration, a point's as the time since the segment's start.
    if (p.mark.after < from || p.mark.after > to) continue;
    const bool scope = !p.series.scope.empty();
    out.push_back({{"position", pos.At(p.mark.after)},
                   {"label", "≈ " + PointTime(p.series, p.series.time.p50) +
                                 (scope ? " p50" : " p50 since " + p.series.from)},
                   {"paddingLeft", true},
                   {"tooltip", p.mark.tag + ": " + p.label + " in " + p.series.module + ": " +
                                   FormatCount(p.series.time.count) + " in " +
                                   FormatCount(p.series.runs) + " runs (fieldprof)"}});
  }
  return out;
}

}  // namespace fieldprof::tools::lsp
