// gguf_blocks.h — pieces of GGUF's block layouts (kernels.h) that more than
// one kernel folder decodes: iq4nl's grid and the packed 6-bit scales and
// mins of q4k / q5k. Scalar and header-only, with internal linkage (a kernel
// folder's objects define no shared symbols).
#ifndef GEARBX_ARCH_GGUF_BLOCKS_H
#define GEARBX_ARCH_GGUF_BLOCKS_H

#include <stdint.h>
#include <string.h>

namespace gb_gguf {

// iq4nl: weight = d * kIq4nlGrid[nibble].
static constexpr int8_t kIq4nlGrid[16] = {-127, -104, -83, -65, -49, -35, -22, -10, 1, 13, 25, 38, 53, 69, 89, 113};

// q4k / q5k: the 6-bit scale and min of 32-weight sub-block j (0..7) from
// the 12 scale bytes q (ggml's get_scale_min_k4): sub-blocks 0..3 are the
// low six bits of bytes j (scale) and j + 4 (min); 4..7 a nibble of byte
// j + 4 (low: scale, high: min) under the top two bits of bytes j - 4
// (scale) and j (min).
static inline void scale_min_k4(int j, const uint8_t *q, uint8_t *sc, uint8_t *mn) {
  if (j < 4) {
    *sc = q[j] & 63;
    *mn = q[j + 4] & 63;
  } else {
    *sc = (uint8_t)((q[j + 4] & 15) | ((q[j - 4] >> 6) << 4));
    *mn = (uint8_t)((q[j + 4] >> 4) | ((q[j] >> 6) << 4));
  }
}

// The same for all eight sub-blocks, four at a time in 32-bit words (a
// little-endian host): byte j of *sc / *mn is sub-block j's scale / min.
static inline void scales_mins_k4(const uint8_t *q, uint64_t *sc, uint64_t *mn) {
  uint32_t u[3];
  memcpy(u, q, 12);
  const uint32_t m6 = 0x3f3f3f3fu, m4 = 0x0f0f0f0fu, top = 0xc0c0c0c0u;
  *sc = (uint64_t)(u[0] & m6) | (uint64_t)((u[2] & m4) | ((u[0] & top) >> 2)) << 32;
  *mn = (uint64_t)(u[1] & m6) | (uint64_t)(((u[2] >> 4) & m4) | ((u[1] & top) >> 2)) << 32;
}

}  // namespace gb_gguf

#endif  // GEARBX_ARCH_GGUF_BLOCKS_H
