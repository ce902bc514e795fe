#include "aggregator/reads/snapshot_handler.h"

#include <charconv>
#include <cinttypes>
#include <cstdio>

#include "aggregator/http/http_status.h"
#include "aggregator/http/query_params.h"

namespace fieldprof::aggregator {
namespace {

std::string Hex16(uint64_t v) {
  char buf[17];
  std::snprintf(buf, sizeof buf, "%016" PRIx64, v);
  return buf;
}

// Whether an If-None-Match header lists `etag` (or is "*").
bool EtagMatches(std::string_view header, std::string_view etag) {
  while (!header.empty()) {
    const size_t comma = header.find(',');
    std::string_view t = header.substr(0, comma);
    header = comma == std::string_view::npos ? std::string_view() : header.substr(comma + 1);
    while (!t.empty() && t.front() == ' ') t.remove_prefix(1);
    while (!t.empty() && t.back() == ' ') t.remove_suffix(1);
    if (t.starts_with("W/")) t.remove_prefix(2);
    if (t == "*" || t == etag) return true;
  }
  return false;
}

HttpResponse NotPublishing() {
  return ErrorResponse(
      NotFound("this aggregator does not publish snapshots (start it with --signing_key)"));
}

// 200 with `bytes`, or 304 when the client holds `etag` already.
HttpResponse Cacheable(std::string bytes, const std::string& etag, std::string cache_control,
                       std::string_view if_none_match, Metrics* metrics) {
  HttpResponse r;
  r.content_type = std::string(kProtobufContentType);
  r.headers.emplace_back("ETag", etag);
  r.headers.emplace_back("Cache-Control", std::move(cache_control));
  if (!if_none_match.empty() && EtagMatches(if_none_match, etag)) {
    r.status = 304;
    return r;
  }
  metrics->SnapshotServed(bytes.size());
  r.body = std::move(bytes);
  return r;
}

// ?version=HEX (0: none given).
StatusOr<uint64_t> FragmentVersion(std::string_view query) {
  FP_ASSIGN_OR_RETURN(QueryParams params, ParseQuery(query));
  uint64_t version = 0;
  for (const auto& [k, v] : params) {
    if (k != "version") return InvalidArgument("unknown parameter '" + k + "'");
    auto [e, ec] = std::from_chars(v.data(), v.data() + v.size(), version, 16);
    if (ec != std::errc() || e != v.data() + v.size() || version == 0) {
      return InvalidArgument("version must be the fragment version in hex");
    }
  }
  return version;
}

}  // namespace

HttpResponse SnapshotHandler::Config() {
  return HttpResponse{
      200, "application/json", FleetSettingsToJson(fleet_, /*with_version=*/true), {}};
}

HttpResponse SnapshotHandler::Manifest(std::string_view if_none_match) {
  if (publish_ == nullptr) return NotPublishing();
  StatusOr<wire::Manifest> m = publish_->publisher()->CurrentManifest();
  StatusOr<std::string> bytes = publish_->publisher()->SignedManifestBytes();
  if (!m.ok() || !bytes.ok()) return ErrorResponse(NotFound("no snapshot published yet"));
  // The manifest changes with every cycle: clients revalidate each time.
  return Cacheable(std::move(*bytes), "\"m" + std::to_string(m->snapshot_version()) + "\"",
                   "no-cache", if_none_match, metrics_);
}

HttpResponse SnapshotHandler::Fragment(std::string_view index_text, std::string_view query,
                                       std::string_view if_none_match) {
  if (publish_ == nullptr) return NotPublishing();
  uint32_t index = 0;
  auto [end, ec] = std::from_chars(index_text.data(), index_text.data() + index_text.size(), index);
  if (ec != std::errc() || end != index_text.data() + index_text.size()) {
    return ErrorResponse(
        InvalidArgument("fragment index must be a number, got '" + std::string(index_text) + "'"));
  }
  StatusOr<uint64_t> version = FragmentVersion(query);
  if (!version.ok()) return ErrorResponse(version.status());
  StatusOr<wire::Manifest> m = publish_->publisher()->CurrentManifest();
  if (!m.ok()) return ErrorResponse(NotFound("no snapshot published yet"));
  if (index >= m->fragment_count()) {
    return ErrorResponse(NotFound("no fragment " + std::to_string(index) + "; there are " +
                                  std::to_string(m->fragment_count())));
  }
  const bool pinned = *version != 0;
  if (!pinned) *version = m->fragments(static_cast<int>(index)).version();
  StatusOr<std::string> bytes = publish_->publisher()->FragmentBytes(index, *version);
  if (!bytes.ok()) {
    return ErrorResponse(NotFound("fragment " + std::to_string(index) + " version " +
                                  Hex16(*version) +
                                  " is no longer kept; fetch the manifest again"));
  }
  // A versioned fragment never changes; the current one moves with the rotation.
  return Cacheable(std::move(*bytes), "\"" + Hex16(*version) + "\"",
                   pinned ? "public, max-age=31536000, immutable" : "no-cache", if_none_match,
                   metrics_);
}

}  // namespace fieldprof::aggregator
