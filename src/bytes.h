// bytes.h — little-endian loads/stores that never assume alignment, and
// overflow-checked range tests used by every parser.
#pragma once

#include <stdint.h>
#include <string.h>

namespace gb {

inline uint16_t ld_u16(const uint8_t *p) { return (uint16_t)(p[0] | (p[1] << 8)); }
inline uint32_t ld_u32(const uint8_t *p) {
  return (uint32_t)p[0] | ((uint32_t)p[1] << 8) | ((uint32_t)p[2] << 16) | ((uint32_t)p[3] << 24);
}
inline uint64_t ld_u64(const uint8_t *p) { return (uint64_t)ld_u32(p) | ((uint64_t)ld_u32(p + 4) << 32); }
inline int32_t ld_i32(const uint8_t *p) { return (int32_t)ld_u32(p); }
inline float ld_f32(const uint8_t *p) {
  uint32_t u = ld_u32(p);
  float f;
  memcpy(&f, &u, 4);
  return f;
}
inline double ld_f64(const uint8_t *p) {
  uint64_t u = ld_u64(p);
  double d;
  memcpy(&d, &u, 8);
  return d;
}

inline void st_u16(uint8_t *p, uint16_t v) { p[0] = (uint8_t)v; p[1] = (uint8_t)(v >> 8); }
inline void st_u32(uint8_t *p, uint32_t v) {
  p[0] = (uint8_t)v; p[1] = (uint8_t)(v >> 8); p[2] = (uint8_t)(v >> 16); p[3] = (uint8_t)(v >> 24);
}
inline void st_u64(uint8_t *p, uint64_t v) { st_u32(p, (uint32_t)v); st_u32(p + 4, (uint32_t)(v >> 32)); }
inline void st_f32(uint8_t *p, float f) {
  uint32_t u;
  memcpy(&u, &f, 4);
  st_u32(p, u);
}

// True when [off, off + len) lies inside [0, size) — with no overflow.
inline bool in_range(uint64_t off, uint64_t len, uint64_t size) {
  return off <= size && len <= size - off;
}

// a * b without overflow; false on overflow.
inline bool mul_ok(uint64_t a, uint64_t b, uint64_t *out) {
  if (a != 0 && b > UINT64_MAX / a) return false;
  *out = a * b;
  return true;
}

inline uint64_t align_up(uint64_t v, uint64_t a) { return (v + a - 1) & ~(a - 1); }
inline bool is_pow2(uint64_t v) { return v && !(v & (v - 1)); }

}  // namespace gb
