// status.cpp — status strings, version, and the logger.
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

extern "C" const char *gb_status_str(gb_status s) {
  // C callers may pass any int. Loading a value outside the enum's range as
  // gb_status is undefined behaviour in C++, so the value is read as an int.
  int v;
  memcpy(&v, &s, sizeof v);
  switch (v) {
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
    case GB_ERR_IO: return "I/O error";
    case GB_ERR_FILE_NOT_FOUND: return "file not found";
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
    case GB_ERR_CONTEXT_FULL: return "context full";
    case GB_ERR_INTERNAL: return "internal error";
  }
  return "unknown status";
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

gb_status fail(const Logger &log, gb_status s, const char *fmt, ...) {
  va_list ap;
  va_start(ap, fmt);
  log.vlog(GB_LOG_ERROR, fmt, ap);
  va_end(ap);
  return s;
}

}  // namespace gb
