// common.h — status plumbing and logging used by every file in src/.
#pragma once

#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include "gearbx.h"

namespace gb {

// The bits of an enum field a caller filled in. C callers may store any int
// there; reading the raw value first keeps a bad one a rejected argument
// rather than undefined behaviour.
template <class E>
inline int32_t raw_enum(const E &e) {
  static_assert(sizeof(E) == sizeof(int32_t), "public enums are 32-bit");
  int32_t v;
  memcpy(&v, &e, sizeof v);
  return v;
}

// One log sink: a callback plus a level. Copied by value into objects.
struct Logger {
  gb_log_fn fn = nullptr;  // nullptr: the port's default sink
  void *user = nullptr;
  gb_log_level level = GB_LOG_WARN;

  void log(gb_log_level lv, const char *fmt, ...) const __attribute__((format(printf, 3, 4)));
  void vlog(gb_log_level lv, const char *fmt, va_list ap) const;
};

// Log an error and return its status: `return fail(log, GB_ERR_CORRUPT, "...", ...)`.
gb_status fail(const Logger &log, gb_status s, const char *fmt, ...) __attribute__((format(printf, 3, 4)));

// The first member of every handle's struct says what kind of object it is,
// so a handle of another kind, or one destroyed in caller memory (where the
// bytes are still readable), is refused instead of being read as something
// it is not. A freed handle cannot be told apart: using one is undefined.
enum HandleKind : uint32_t {
  kHandleModel = 0x4d584247u,      // "GBXM"
  kHandleSession = 0x53584247u,    // "GBXS"
  kHandleTokenizer = 0x54584247u,  // "GBXT"
  kHandleGrammar = 0x47584247u,    // "GBXG"
  kHandleDead = 0x44584247u,       // "GBXD": destroyed
};
// GB_OK when h is a live object of kind `want`; else GB_ERR_NULL_POINTER or
// GB_ERR_BAD_HANDLE with a log line through the default sink (a handle that
// is not what it claims carries no usable log callback) naming fn.
gb_status check_handle(const void *h, HandleKind want, const char *fn);
// The result of a function with no object to log through: an error other
// than GB_ERR_BUFFER_TOO_SMALL (the size query) gets the line "fn: what"
// (what: NULL for the status's description) through the default sink.
gb_status api_result(const char *fn, gb_status st, const char *what = nullptr);
// The memory an object with a lifetime is carved from: the caller's `mem`
// (at least `need` bytes, `align`-aligned: else GB_ERR_ALIGNMENT or
// GB_ERR_ARENA_TOO_SMALL, logged naming `what`), or, when mem is NULL, need
// bytes obtained once from the port (GB_ERR_OUT_OF_MEMORY). *owned: the
// library obtained it (and frees it with the object).
gb_status obtain_memory(const Logger &log, const char *what, void *mem, size_t mem_bytes, size_t need, size_t align,
                        void **out, bool *owned);

// A required argument missing: GB_ERR_NULL_POINTER and "fn: what is NULL".
gb_status null_arg(const Logger &log, const char *fn, const char *what);

}  // namespace gb

// Evaluate a gb_status expression; return it from the caller if it failed.
#define GB_TRY(expr)                         \
  do {                                       \
    gb_status gb_try_s_ = (expr);            \
    if (gb_try_s_ != GB_OK) return gb_try_s_; \
  } while (0)

// If cond holds: log the message at error level and return status.
#define GB_RETURN_IF(cond, logger, status, ...)                 \
  do {                                                          \
    if (cond) return ::gb::fail((logger), (status), __VA_ARGS__); \
  } while (0)

#ifdef NDEBUG
#define GB_DASSERT(x) ((void)0)
#else
#include <assert.h>
#define GB_DASSERT(x) assert(x)
#endif
