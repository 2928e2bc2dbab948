// status.cpp — status strings, gear and KV policy names, version, and the logger.
#include <stdio.h>
#include <string.h>

#include "common.h"
#include "gearbx_port.h"

extern "C" uint32_t gb_version(void) { return GB_VERSION_NUMBER; }

#define GB_STR2(x) #x
#define GB_STR(x) GB_STR2(x)
extern "C" const char *gb_version_string(void) {
  return GB_STR(GB_VERSION_MAJOR) "." GB_STR(GB_VERSION_MINOR) "." GB_STR(GB_VERSION_PATCH);
}

namespace {
// Index = enum value, for the dense ranges of both enums.
const char *const kTierNames[] = {"low", "mid", "high", "f32"};
const char *const kPolicyNames[] = {"default", "f32",      "f16",  "uniform8", "uniform4",
                                    "uniform3", "uniform2", "seed", "window",   "recency"};
static_assert(sizeof kTierNames / sizeof *kTierNames == GB_GEAR_COUNT, "one name per tier");
static_assert(sizeof kPolicyNames / sizeof *kPolicyNames == GB_KV_RECENCY + 1, "one name per KV policy");
}  // namespace

// The functions that name enum values read their argument with raw_enum: C
// allows any int in an enum parameter, and loading one outside the enum's
// range as the enum is undefined behaviour in C++.
extern "C" const char *gb_status_str(gb_status s) {
  switch (gb::raw_enum(s)) {
    case GB_STATUS_MAX_ENUM: break;
    case GB_OK: return "ok";
    case GB_ERR_INVALID_ARGUMENT: return "invalid argument";
    case GB_ERR_NULL_POINTER: return "required pointer is NULL";
    case GB_ERR_STRUCT_SIZE: return "options struct_size not supported";
    case GB_ERR_BUFFER_TOO_SMALL: return "buffer too small";
    case GB_ERR_BAD_STATE: return "call not valid in the current state";
    case GB_ERR_TOKEN_OUT_OF_RANGE: return "token id out of range";
    case GB_ERR_ALIGNMENT: return "pointer not aligned";
    case GB_ERR_UNAVAILABLE: return "feature not available";
    case GB_ERR_BAD_HANDLE: return "handle is not a live object of the expected kind";
    case GB_ERR_SYNTAX: return "grammar or schema text malformed";
    case GB_ERR_UNSUPPORTED_FEATURE: return "grammar or schema feature not supported";
    case GB_ERR_IO: return "I/O error";
    case GB_ERR_FILE_NOT_FOUND: return "file not found";
    case GB_ERR_FILE_CHANGED: return "model file changed after it was opened";
    case GB_ERR_BAD_MAGIC: return "bad magic: not a file of the expected kind";
    case GB_ERR_UNSUPPORTED_VERSION: return "unsupported format version";
    case GB_ERR_TRUNCATED: return "file truncated";
    case GB_ERR_CHECKSUM: return "checksum mismatch";
    case GB_ERR_CORRUPT: return "inconsistent or corrupt data";
    case GB_ERR_UNSUPPORTED_TYPE: return "unsupported tensor type or architecture";
    case GB_ERR_MISSING_TENSOR: return "required tensor missing";
    case GB_ERR_SHAPE_MISMATCH: return "tensor shape mismatch";
    case GB_ERR_OUT_OF_MEMORY: return "out of memory";
    case GB_ERR_BUDGET_EXCEEDED: return "memory budget exceeded";
    case GB_ERR_ARENA_TOO_SMALL: return "arena too small";
    case GB_ERR_LOCK_REFUSED: return "the system refused to lock the model in memory";
    case GB_ERR_CONTEXT_FULL: return "context full";
    case GB_ERR_ABORTED: return "aborted by the callback";
    case GB_ERR_GRAMMAR_LIMIT: return "grammar parse state over its limits";
    case GB_ERR_GRAMMAR_NO_TOKEN: return "no token can continue the grammar";
    case GB_ERR_INTERNAL: return "internal error";
  }
  return "unknown status";
}

extern "C" const char *gb_gear_name(gb_gear gear) {
  const int g = gb::raw_enum(gear);
  if (g >= 0 && g < GB_GEAR_COUNT) return kTierNames[g];
  if (g == GB_GEAR_AUTO) return "auto";
  if (g == GB_GEAR_SPEC) return "spec";
  if (g == GB_GEAR_DEFAULT) return "default";
  return "unknown";
}

extern "C" gb_status gb_gear_from_name(const char *name, gb_gear *out) {
  if (!name || !out) return gb::api_result("gb_gear_from_name", GB_ERR_NULL_POINTER, !name ? "name is NULL" : "out is NULL");
  static const gb_gear kAll[] = {GB_GEAR_LOW, GB_GEAR_MID, GB_GEAR_HIGH, GB_GEAR_F32, GB_GEAR_AUTO, GB_GEAR_SPEC, GB_GEAR_DEFAULT};
  for (const gb_gear g : kAll)
    if (strcmp(name, gb_gear_name(g)) == 0) {
      *out = g;
      return GB_OK;
    }
  return GB_ERR_INVALID_ARGUMENT;
}

extern "C" const char *gb_kv_policy_name(gb_kv_policy policy) {
  const int p = gb::raw_enum(policy);
  return p >= 0 && p <= GB_KV_RECENCY ? kPolicyNames[p] : "unknown";
}

extern "C" gb_status gb_kv_policy_from_name(const char *name, gb_kv_policy *out) {
  if (!name || !out) return gb::api_result("gb_kv_policy_from_name", GB_ERR_NULL_POINTER, !name ? "name is NULL" : "out is NULL");
  for (int p = 0; p <= GB_KV_RECENCY; p++)
    if (strcmp(name, kPolicyNames[p]) == 0) {
      *out = (gb_kv_policy)p;
      return GB_OK;
    }
  return GB_ERR_INVALID_ARGUMENT;
}

namespace gb {

void Logger::vlog(gb_log_level lv, const char *fmt, va_list ap) const {
  if (lv > level) return;
  char line[512];
  vsnprintf(line, sizeof line, fmt, ap);
  if (fn) {
    fn(user, lv, line);
  } else {
    gb_port_log_write((int)lv, line);
  }
}

void Logger::log(gb_log_level lv, const char *fmt, ...) const {
  va_list ap;
  va_start(ap, fmt);
  vlog(lv, fmt, ap);
  va_end(ap);
}

gb_status check_handle(const void *h, HandleKind want, const char *fn) {
  const char *kind = want == kHandleModel ? "gb_model" : want == kHandleSession ? "gb_session" : "gb_tokenizer";
  if (!h) return fail(Logger(), GB_ERR_NULL_POINTER, "%s: the %s is NULL", fn, kind);
  uint32_t tag;
  memcpy(&tag, h, sizeof tag);
  if (tag == (uint32_t)want) return GB_OK;
  return fail(Logger(), GB_ERR_BAD_HANDLE, "%s: %s", fn,
              tag == kHandleDead                                     ? "the handle was destroyed"
              : tag == kHandleModel || tag == kHandleSession || tag == kHandleTokenizer ? "a handle of another kind"
                                                                     : "not a gearbx handle");
}

gb_status api_result(const char *fn, gb_status st, const char *what) {
  if (st != GB_OK && st != GB_ERR_BUFFER_TOO_SMALL) fail(Logger(), st, "%s: %s", fn, what ? what : gb_status_str(st));
  return st;
}

gb_status null_arg(const Logger &log, const char *fn, const char *what) {
  return fail(log, GB_ERR_NULL_POINTER, "%s: %s is NULL", fn, what);
}

gb_status fail(const Logger &log, gb_status s, const char *fmt, ...) {
  va_list ap;
  va_start(ap, fmt);
  log.vlog(GB_LOG_ERROR, fmt, ap);
  va_end(ap);
  return s;
}

}  // namespace gb

namespace gb {

gb_status obtain_memory(const Logger &log, const char *what, void *mem, size_t mem_bytes, size_t need, size_t align,
                        void **out, bool *owned) {
  if (mem) {
    GB_RETURN_IF((uintptr_t)mem % align != 0, log, GB_ERR_ALIGNMENT, "%s: memory must be %zu-byte aligned", what, align);
    GB_RETURN_IF(mem_bytes < need, log, GB_ERR_ARENA_TOO_SMALL, "%s: %zu bytes given, %zu needed", what, mem_bytes, need);
    *out = mem;
    *owned = false;
    return GB_OK;
  }
  *out = gb_port_aligned_alloc(need, align > 64 ? align : 64);
  GB_RETURN_IF(!*out, log, GB_ERR_OUT_OF_MEMORY, "%s: cannot obtain %zu bytes", what, need);
  *owned = true;
  return GB_OK;
}

}  // namespace gb
