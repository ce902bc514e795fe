/* fieldprof/points.h: tagged instrumentation points, for C and C++.
 *
 *   #include <fieldprof/points.h>
 *
 *   FP_POINT("startup", "config_loaded");        a point
 *   FP_POINT_V("startup", "plugins", n);         a point with one integer
 *   { FP_SCOPE("request", "handle"); ... }       begin here, end at '}'
 *   FP_BEGIN("request", "handle"); ... FP_END("request", "handle");   a pair
 *
 * FP_SCOPE is C++'s, and C's with GCC and clang (the cleanup attribute);
 * in other C compilers, use FP_BEGIN/FP_END.
 *
 * Tags and names are string literals: short identifiers ("startup",
 * "config_loaded"), never paths or free text; the field refuses others.
 *
 * Disarmed (no fieldprof runtime, or a run it does not measure, and no
 * tracer attached) a point costs one load and one branch that is not
 * taken: no call, no system call.
 *
 * Each point is also a USDT probe, provider "fieldprof", name "point",
 * arguments (tag, name, kind, value) with kind 0 a point, 1 a begin, 2 an
 * end. perf, bpftrace and systemtap attach to it as to any USDT probe:
 *   perf probe -x ./prog sdt_fieldprof:point
 *   bpftrace -e 'usdt:./prog:fieldprof:point { printf("%s\n", str(arg1)); }'
 *
 * How it is armed: every point of a module (program or library) tests that
 * module's one USDT semaphore, fieldprof_point_semaphore. Tracers raise it
 * when they attach; the fieldprof runtime raises it when it measures the
 * run (it finds it through the note below, without reading any file).
 * Armed, a point fires its USDT probe and calls fieldprof_point_hit, which
 * the runtime defines (a weak reference: without the runtime it is
 * null and skipped).
 *
 * Build with systemtap's <sys/sdt.h> on the include path (Debian:
 * systemtap-sdt-dev). Nothing to link.
 */
#ifndef FIELDPROF_POINTS_H_
#define FIELDPROF_POINTS_H_

#include <stdint.h>

#ifndef _SDT_HAS_SEMAPHORES
#define _SDT_HAS_SEMAPHORES 1
#endif
#include <sys/sdt.h>

#ifdef __cplusplus
extern "C" {
#endif

/* One per point in the program's text: what the runtime keys it by. */
struct fieldprof_point_site {
  const char* tag;
  const char* name;
};

enum { FP_POINT_KIND_POINT = 0, FP_POINT_KIND_BEGIN = 1, FP_POINT_KIND_END = 2 };

/* The runtime's recorder; null when no loaded object defines it. */
extern void fieldprof_point_hit(const struct fieldprof_point_site* site, int kind, int64_t value)
    __attribute__((weak));

/* fieldprof's own libraries define FIELDPROF_POINTS_DECLARATIONS_ONLY:
 * the declarations above, none of what makes a module one with points. */
#ifndef FIELDPROF_POINTS_DECLARATIONS_ONLY
/* The module's switch (see above): weak, so every file that includes this
 * header shares one, and hidden, so each module has its own. In the
 * section where USDT semaphores live, which tracers know. */
extern volatile unsigned short fieldprof_point_semaphore;
__attribute__((weak, visibility("hidden"), used,
               section(".probes"))) volatile unsigned short fieldprof_point_semaphore;

/* Where that switch is, for the fieldprof runtime: a note in the module's
 * loaded notes (PT_NOTE), owner "fieldprof", type 0x46500001, whose 4-byte
 * description is the semaphore's offset from the description itself. The
 * static linker resolves it, so it costs no relocation at load, and a
 * COMDAT group keeps one note per module whatever the number of files. */
__asm__(
    ".pushsection .note.fieldprof,\"aG\",@note,fieldprof_points_note,comdat\n"
    ".balign 4\n"
    ".4byte 10\n"         /* namesz: "fieldprof" and its NUL */
    ".4byte 4\n"          /* descsz */
    ".4byte 0x46500001\n" /* type */
    ".asciz \"fieldprof\"\n"
    ".balign 4\n"
    ".4byte fieldprof_point_semaphore - .\n"
    ".popsection\n");

/* The module's coming and going, told to whichever fieldprof library
 * defines fieldprof_point_module: the recorder (fieldprof points record),
 * or the front a field install preloads, which passes it on to the runtime
 * in a run it measures. Without either, nothing is called. Before the
 * module's own constructors run, so that their points
 * (a plugin starting up) are armed; after its own destructors, so that
 * theirs are written while their names can still be read. Every file that
 * includes this header adds one constructor and one destructor at
 * priority 101, which run first and last among the module's; a count the
 * module's files share lets only the first and the last one call. */
extern void fieldprof_point_module(volatile unsigned short* semaphore, int arriving)
    __attribute__((weak));
extern unsigned fieldprof_point_units;
__attribute__((weak, visibility("hidden"))) unsigned fieldprof_point_units;
static __attribute__((constructor(101), used)) void fieldprof_point_arrive_(void) {
  if (fieldprof_point_units++ == 0 && fieldprof_point_module) {
    fieldprof_point_module(&fieldprof_point_semaphore, 1);
  }
}
static __attribute__((destructor(101), used)) void fieldprof_point_leave_(void) {
  if (--fieldprof_point_units == 0 && fieldprof_point_module) {
    fieldprof_point_module(&fieldprof_point_semaphore, 0);
  }
}

#endif /* FIELDPROF_POINTS_DECLARATIONS_ONLY */

#ifdef __cplusplus
}
#endif

#define FP_POINTS_CAT2_(a, b) a##b
#define FP_POINTS_CAT_(a, b) FP_POINTS_CAT2_(a, b)

#ifdef __cplusplus
#define FP_POINTS_INT_(x) static_cast<int>(x)
#define FP_POINTS_I64_(x) static_cast<int64_t>(x)
#else
#define FP_POINTS_INT_(x) ((int)(x))
#define FP_POINTS_I64_(x) ((int64_t)(x))
#endif

/* The USDT probe. <sys/sdt.h>'s macros pass no argument to a variadic
 * one and make a long string, which clang's -Wpedantic warns of where the
 * point is written (even from a system header): not the program's doing. */
#ifdef __clang__
/* clang-format off */
#define FP_POINTS_PROBE_(site, kind, value)                                             \
  _Pragma("clang diagnostic push")                                                      \
  _Pragma("clang diagnostic ignored \"-Wgnu-zero-variadic-macro-arguments\"")           \
  _Pragma("clang diagnostic ignored \"-Woverlength-strings\"")                          \
  STAP_PROBE4(fieldprof, point, (site)->tag, (site)->name, FP_POINTS_INT_(kind),        \
              FP_POINTS_I64_(value))                                                    \
  _Pragma("clang diagnostic pop")
/* clang-format on */
#else
#define FP_POINTS_PROBE_(site, kind, value)                                      \
  STAP_PROBE4(fieldprof, point, (site)->tag, (site)->name, FP_POINTS_INT_(kind), \
              FP_POINTS_I64_(value))
#endif

/* Armed: the probe for tracers, then the runtime. Out of the caller's
 * straight line: the branch is expected not taken. The empty asm after
 * the call keeps it from being a tail call, so that the function passing
 * the point is on the stack the recorder takes (points record --stacks). */
#define FP_POINTS_FIRE_(site, kind, value)                        \
  do {                                                            \
    FP_POINTS_PROBE_(site, kind, value);                          \
    if (fieldprof_point_hit) {                                    \
      fieldprof_point_hit((site), (kind), FP_POINTS_I64_(value)); \
      __asm__ __volatile__("");                                   \
    }                                                             \
  } while (0)

#define FP_POINTS_HIT_(tag, name, kind, value)                                    \
  do {                                                                            \
    if (__builtin_expect(fieldprof_point_semaphore != 0, 0)) {                    \
      static const struct fieldprof_point_site fp_points_site_ = {(tag), (name)}; \
      FP_POINTS_FIRE_(&fp_points_site_, (kind), (value));                         \
    }                                                                             \
  } while (0)

#define FP_POINT(tag, name) FP_POINTS_HIT_(tag, name, FP_POINT_KIND_POINT, 0)
#define FP_POINT_V(tag, name, value) FP_POINTS_HIT_(tag, name, FP_POINT_KIND_POINT, value)
#define FP_BEGIN(tag, name) FP_POINTS_HIT_(tag, name, FP_POINT_KIND_BEGIN, 0)
#define FP_BEGIN_V(tag, name, value) FP_POINTS_HIT_(tag, name, FP_POINT_KIND_BEGIN, value)
#define FP_END(tag, name) FP_POINTS_HIT_(tag, name, FP_POINT_KIND_END, 0)

#ifndef FIELDPROF_POINTS_DECLARATIONS_ONLY
#ifdef __cplusplus
namespace fieldprof {

/* FP_SCOPE's object: a begin when made, its end when destroyed, both or
 * neither (a scope armed in between ends unrecorded). */
class PointScope {
 public:
  /* Inlined always, so that the scope's function, not this one, passes
   * the point (a stack taken there starts in that function). */
  __attribute__((always_inline)) explicit PointScope(const fieldprof_point_site* site,
                                                     int64_t value = 0)
      : site_(__builtin_expect(fieldprof_point_semaphore != 0, 0) ? site : nullptr) {
    if (site_ != nullptr) FP_POINTS_FIRE_(site_, FP_POINT_KIND_BEGIN, value);
  }
  __attribute__((always_inline)) ~PointScope() {
    if (site_ != nullptr) FP_POINTS_FIRE_(site_, FP_POINT_KIND_END, 0);
  }
  PointScope(const PointScope&) = delete;
  PointScope& operator=(const PointScope&) = delete;

 private:
  const fieldprof_point_site* const site_;
};

} /* namespace fieldprof */

/* Named by __COUNTER__: several scopes may be on one line (a macro's). */
#define FP_POINTS_SCOPE_(tag, name, value, n)                                                   \
  static const fieldprof_point_site FP_POINTS_CAT_(fp_points_scope_site_, n) = {(tag), (name)}; \
  ::fieldprof::PointScope FP_POINTS_CAT_(fp_points_scope_, n)(                                  \
      &FP_POINTS_CAT_(fp_points_scope_site_, n), (value))
#define FP_SCOPE_V(tag, name, value) FP_POINTS_SCOPE_(tag, name, value, __COUNTER__)
#define FP_SCOPE(tag, name) FP_SCOPE_V(tag, name, 0)
#elif defined(__GNUC__)
/* FP_SCOPE in C, as in C++: a begin where it stands and its end on every
 * way out of the block ('}', return, break, continue, goto), through the
 * cleanup attribute of GCC and clang. Not through longjmp, as C++'s
 * destructors are not. Both inlined always, as PointScope's are. */
static __inline__ __attribute__((always_inline, unused)) const struct fieldprof_point_site*
fieldprof_point_scope_begin_(const struct fieldprof_point_site* site, int64_t value) {
  if (__builtin_expect(fieldprof_point_semaphore != 0, 0)) {
    FP_POINTS_FIRE_(site, FP_POINT_KIND_BEGIN, value);
    return site;
  }
  return 0;
}
static __inline__ __attribute__((always_inline, unused)) void fieldprof_point_scope_end_(
    const struct fieldprof_point_site* const* site) {
  if (*site) FP_POINTS_FIRE_(*site, FP_POINT_KIND_END, 0);
}
#define FP_POINTS_SCOPE_(tag, name, value, n)                                                   \
  static const struct fieldprof_point_site FP_POINTS_CAT_(fp_points_scope_site_, n) = {(tag),   \
                                                                                       (name)}; \
  const struct fieldprof_point_site* const FP_POINTS_CAT_(fp_points_scope_, n)                  \
      __attribute__((cleanup(fieldprof_point_scope_end_), unused)) =                            \
          fieldprof_point_scope_begin_(&FP_POINTS_CAT_(fp_points_scope_site_, n), (value))
#define FP_SCOPE_V(tag, name, value) FP_POINTS_SCOPE_(tag, name, value, __COUNTER__)
#define FP_SCOPE(tag, name) FP_SCOPE_V(tag, name, 0)
#endif /* __cplusplus, __GNUC__ */
#endif /* FIELDPROF_POINTS_DECLARATIONS_ONLY */

#endif /* FIELDPROF_POINTS_H_ */
