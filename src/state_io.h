// state_io.h — the wire of a saved session state (state.cpp): a writer that
// can also only count, a reader that latches its first failure, field values
// as the field lists (state_fields.h) write them, and tagged records.
#pragma once

#include <math.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include "bytes.h"
#include "common.h"

struct gb_session;

namespace gb {
struct KvPool;
namespace state {

// Record tags: four characters, read as a little-endian u32.
constexpr uint32_t tag(const char (&s)[5]) {
  return (uint32_t)(uint8_t)s[0] | (uint32_t)(uint8_t)s[1] << 8 | (uint32_t)(uint8_t)s[2] << 16 | (uint32_t)(uint8_t)s[3] << 24;
}
constexpr size_t kRecordHead = 8;  // u32 tag, u32 payload bytes

// ---- writing (counting when p is null) ----
struct W {
  uint8_t *p = nullptr;
  size_t n = 0;
  void raw(const void *v, size_t k) {
    if (p && k) memcpy(p + n, v, k);
    n += k;
  }
  void u8(uint8_t v) { raw(&v, 1); }
  void u16(uint16_t v) {
    uint8_t b[2];
    st_u16(b, v);
    raw(b, 2);
  }
  void u32(uint32_t v) {
    uint8_t b[4];
    st_u32(b, v);
    raw(b, 4);
  }
  void i32(int32_t v) { u32((uint32_t)v); }
  void u64(uint64_t v) {
    uint8_t b[8];
    st_u64(b, v);
    raw(b, 8);
  }
  void f32(float v) {
    uint32_t u;
    memcpy(&u, &v, 4);
    u32(u);
  }
  void f64(double v) {
    uint64_t u;
    memcpy(&u, &v, 8);
    u64(u);
  }
  // A record: its tag and a length patched by end().
  size_t begin(uint32_t t) {
    u32(t);
    const size_t at = n;
    u32(0);
    return at;
  }
  void end(size_t at) {
    if (p) st_u32(p + at, (uint32_t)(n - at - 4));
  }
};

// ---- reading: a failed read latches `bad` and yields zeros ----
struct R {
  const uint8_t *p;
  size_t n, at = 0;
  bool bad = false;
  const uint8_t *take(size_t k) {
    if (bad || k > n - at) {
      bad = true;
      return nullptr;
    }
    const uint8_t *q = p + at;
    at += k;
    return q;
  }
  uint8_t u8() {
    const uint8_t *q = take(1);
    return q ? q[0] : 0;
  }
  uint16_t u16() {
    const uint8_t *q = take(2);
    return q ? ld_u16(q) : 0;
  }
  uint32_t u32() {
    const uint8_t *q = take(4);
    return q ? ld_u32(q) : 0;
  }
  int32_t i32() { return (int32_t)u32(); }
  uint64_t u64() {
    const uint8_t *q = take(8);
    return q ? ld_u64(q) : 0;
  }
  float f32() {
    const uint32_t u = u32();
    float f;
    memcpy(&f, &u, 4);
    return f;
  }
  double f64() {
    const uint64_t u = u64();
    double f;
    memcpy(&f, &u, 8);
    return f;
  }
};

// ---- field values on the wire ----
inline void put(W &w, bool v) { w.u8(v ? 1 : 0); }
inline void put(W &w, uint8_t v) { w.u8(v); }
inline void put(W &w, uint32_t v) { w.u32(v); }
inline void put(W &w, int32_t v) { w.i32(v); }
inline void put(W &w, uint64_t v) { w.u64(v); }
inline void put(W &w, float v) { w.f32(v); }
inline void put(W &w, double v) { w.f64(v); }
inline void put(W &w, gb_gear v) { w.i32(raw_enum(v)); }
template <class T, size_t N>
void put(W &w, const T (&a)[N]) {
  for (size_t i = 0; i < N; i++) put(w, a[i]);
}

// A bool must read 0 or 1: anything else is a corrupt image.
inline void get(R &r, bool *v) {
  const uint8_t b = r.u8();
  if (b > 1) r.bad = true;
  *v = b != 0;
}
inline void get(R &r, uint8_t *v) { *v = r.u8(); }
inline void get(R &r, uint32_t *v) { *v = r.u32(); }
inline void get(R &r, int32_t *v) { *v = r.i32(); }
inline void get(R &r, uint64_t *v) { *v = r.u64(); }
inline void get(R &r, float *v) { *v = r.f32(); }
inline void get(R &r, double *v) { *v = r.f64(); }
// A gear is stored as its number; a number that names no gear marks the
// record invalid (and yields GB_GEAR_LOW) before it is held in the enum,
// whose range is only the named values' bits.
inline void get(R &r, gb_gear *v) {
  const int32_t x = r.i32();
  const bool named = (x >= GB_GEAR_LOW && x < GB_GEAR_COUNT) || x == GB_GEAR_AUTO || x == GB_GEAR_SPEC || x == GB_GEAR_DEFAULT;
  if (!named) r.bad = true;
  *v = named ? static_cast<gb_gear>(x) : GB_GEAR_LOW;
}
template <class T, size_t N>
void get(R &r, T (*a)[N]) {
  for (size_t i = 0; i < N; i++) get(r, &(*a)[i]);
}

template <class T>
uint64_t wire_bytes(const T &) {
  return sizeof(T) == 1 ? 1 : sizeof(T) <= 4 ? 4 : 8;
}
template <class T, size_t N>
uint64_t wire_bytes(const T (&a)[N]) {
  return N * wire_bytes(a[0]);
}

// A MATCH field: whether the saved value equals this session's.
template <class T>
bool match(R &r, const T &cur) {
  T v;
  get(r, &v);
  return r.bad || v == cur;  // a short read is reported as truncation, not as a mismatch
}
template <class T, size_t N>
bool match(R &r, const T (&cur)[N]) {
  bool same = true;
  for (size_t i = 0; i < N; i++) same = match(r, cur[i]) && same;
  return same;
}

template <class T>
void assign(T *d, const T &s) {
  *d = s;
}
template <class T, size_t N>
void assign(T (*d)[N], const T (&s)[N]) {
  for (size_t i = 0; i < N; i++) (*d)[i] = s[i];
}

// The first MATCH field of a part whose saved value differs.
struct Mismatch {
  const char *field = nullptr;
  void note(const char *f) {
    if (!field) field = f;
  }
};

// The outcome of reading a part's fields (get_fields, state_fields.h):
// GB_ERR_CORRUPT when the record ended early or held an invalid value,
// GB_ERR_INVALID_ARGUMENT naming the first MATCH field saved with another
// value than this session's.
inline gb_status fields_read(const R &r, const Mismatch &mm, const Logger &log, const char *part) {
  GB_RETURN_IF(r.bad, log, GB_ERR_CORRUPT, "session state: the %s record is truncated or holds an invalid value", part);
  GB_RETURN_IF(mm.field, log, GB_ERR_INVALID_ARGUMENT,
               "session state: saved with another %s (field %s differs from this session's)", part, mm.field);
  return GB_OK;
}

// The payload of the next record, which must carry tag t.
inline gb_status open_record(R &r, uint32_t t, R *out, const Logger &log, const char *part) {
  const uint32_t got = r.u32(), len = r.u32();
  GB_RETURN_IF(r.bad, log, GB_ERR_CORRUPT, "session state: the image ends before the %s record", part);
  GB_RETURN_IF(got != t, log, GB_ERR_CORRUPT, "session state: record %08x where the %s record belongs", got, part);
  const uint8_t *q = r.take(len);
  GB_RETURN_IF(!q, log, GB_ERR_CORRUPT, "session state: the %s record (%u bytes) runs past the image", part, len);
  *out = R{q, len};
  return GB_OK;
}
inline gb_status close_record(const R &r, const Logger &log, const char *part) {
  GB_RETURN_IF(r.bad, log, GB_ERR_CORRUPT, "session state: the %s record is truncated", part);
  GB_RETURN_IF(r.at != r.n, log, GB_ERR_CORRUPT, "session state: %zu bytes after the %s record's last field", r.n - r.at, part);
  return GB_OK;
}

inline bool finite(float v) { return isfinite(v) != 0; }

// The KV pool's record (kv_state.cpp): its fields and its tokens' slots,
// pages and records. load_kv checks (apply false) or restores (apply true)
// one; pos_limit: the positions the session holds; which: the pool's name
// in log lines.
void save_kv(W &w, const KvPool &kv);
gb_status load_kv(R &outer, KvPool *kv, bool apply, const Logger &log, uint32_t pos_limit, const char *which);
uint64_t kv_max_bytes(const KvPool &kv);

}  // namespace state
}  // namespace gb
