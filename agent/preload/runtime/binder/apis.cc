// The binder's API table: every name a trap can ask about, by its key,
// with whether it is forced, chosen, excluded or evicted.
#include <string.h>
#include <sys/mman.h>

#include "agent/preload/runtime/binder/internal.h"
#include "agent/preload/runtime/front/decide.h"

namespace fieldprof::rt {

// Room for `more` names in the API table (at most half full). The indexes
// the binder keeps (random_api) are redone when it grows.
bool ApiRoom(uint32_t more) {
  const uint64_t need = (uint64_t{g_binder.napis} + more) * 2;
  if (g_binder.apis != nullptr && need <= g_binder.api_cap) return true;
  // Sized to the need (a page holds 256 entries): a table bigger than the
  // names it holds would be touched all over by its hashing.
  uint32_t cap = 64;
  while (cap < need) cap *= 2;
  auto* fresh = static_cast<Api*>(MapZero(sizeof(Api) * cap));
  if (fresh == nullptr) return false;
  uint64_t chosen[FP_MAX_APIS];
  for (int j = 0; j < g_binder.nrandom; ++j) {
    chosen[j] = g_binder.apis[g_binder.random_api[j]].name_key;
  }
  for (uint32_t i = 0; g_binder.apis != nullptr && i < g_binder.api_cap; ++i) {
    const Api& a = g_binder.apis[i];
    if (a.name_key == 0) continue;
    uint32_t j = static_cast<uint32_t>(a.name_key) & (cap - 1);
    while (fresh[j].name_key != 0) j = (j + 1) & (cap - 1);
    fresh[j] = a;
  }
  Api* old = g_binder.apis;
  const uint32_t old_cap = g_binder.api_cap;
  g_binder.apis = fresh;
  g_binder.api_cap = cap;
  for (int j = 0; j < g_binder.nrandom; ++j) g_binder.random_api[j] = FindApiIndex(chosen[j]);
  if (old != nullptr) munmap(old, sizeof(Api) * old_cap);
  return true;
}

bool IsForced(uint64_t key) {
  for (int f = 0; f < g_binder.nforced; ++f) {
    if (g_binder.forced[f].name_key == key) return true;
  }
  return false;
}

int32_t ApiFor(uint64_t key) {
  int32_t i = FindApiIndex(key);
  if (i >= 0) return i;
  const uint32_t mask = g_binder.api_cap - 1;
  uint32_t j = static_cast<uint32_t>(key) & mask;
  while (g_binder.apis[j].name_key != 0) j = (j + 1) & mask;
  Api& a = g_binder.apis[j];
  a.name_key = key;
  a.stub = -1;
  for (int f = 0; f < g_binder.nforced; ++f) {
    if (g_binder.forced[f].name_key != key) continue;
    a.flags |= kApiForced;
    a.force = static_cast<uint8_t>(f);
    if (g_binder.forced[f].module[0]) a.flags |= kApiForcedModule;
    if (g_binder.forced[f].point) a.flags |= kApiPoint;
  }
  ++g_binder.napis;
  return static_cast<int32_t>(j);
}

// A `force` or `points` list: "sym" or "module:sym", comma-separated, split
// in place in `copy` (the tables' own). A point must name its module.
// Returns how many were added.
int ParseForced(const char* list, char* copy, size_t cap, bool point, const char* debug_log) {
  CopyName(copy, cap, list);
  int added = 0;
  for (char* p = copy; *p && g_binder.nforced < FP_MAX_APIS;) {
    char* comma = strchr(p, ',');
    if (comma) *comma = 0;
    while (*p == ' ') ++p;
    for (char* e = p + strlen(p); e > p && e[-1] == ' ';) *--e = 0;
    char* colon = strchr(p, ':');
    const char* sym = colon ? colon + 1 : p;
    if (UnsafeToWrap(sym)) {
      DebugLine(debug_log, "not measuring %s: it cannot be wrapped safely", p);
    } else if (point && (colon == nullptr || colon == p || *sym == 0)) {
      DebugLine(debug_log, "points: '%s' is not MODULE:FUNCTION, left out", p);
    } else if (*sym) {
      ForcedApi& f = g_binder.forced[g_binder.nforced++];
      f.name_key = NameKey(sym);
      f.symbol = sym;
      f.module[0] = 0;
      f.point = point;
      if (colon) {
        *colon = 0;
        CopyName(f.module, sizeof f.module, p);
      }
      ++added;
    }
    if (!comma) break;
    p = comma + 1;
  }
  return added;
}

}  // namespace fieldprof::rt
