// SVE q4r16 x q8x GEMV (any vector length): one 32-bit lane per row.
//
// In the q4r16 layout (kernels.h) slice k of a 16-row group block is 64
// bytes: four bytes per row. A vector of VL bits holds the slice of VL/32
// rows (4 at 128 bits, 8 at 256, all 16 from 512 on: wider vectors are
// predicated to the group's 64 bytes). SDOT by element works within each
// 128-bit segment, so the activation block replicated per segment (LD1RQB)
// and index k pick bytes 4k..4k+3 for every row lane: each lane gathers its
// row's whole block sum, starting from -8 * sum(x) for the nibble offset.
// The exact int32 isum equals the generic kernel's; then, as there,
// acc += (d_w * d_x) * (float)isum with separate multiply and add (no FMLA),
// block after block: bit-identical to gb_q4_gemv__generic.
//
// A group is done in ceil(16 / (VL/32)) chunks of rows (4 at 128 bits, 2 at
// 256 or 384, 1 from 512 on; one loop per count), each with its own
// accumulator, all advanced block by block so the group is streamed once.
#include <arm_sve.h>
#include <stdint.h>

#include "kernels.h"

namespace {

constexpr uint64_t kGroupBlock = 16 * 18;  // bytes of one block of a 16-row group

// A chunk of rows starts at row r of the group; loads start at its first
// byte / scale, so pb = whilelt_b8(4r, 64) keeps its bytes of a 64-byte slice
// and pw = whilelt_b32(r, 16) its row lanes (lane j = row r + j).
#define GB_CHUNK_PB(r) svwhilelt_b8_u64(4 * (r), 64)
#define GB_CHUNK_PW(r) svwhilelt_b32_u64((r), 16)

// acc += (d * xd) * (float)isum for the chunk's rows of group block g.
inline svfloat32_t chunk_step(svfloat32_t acc, svbool_t pb, svbool_t pw, uint64_t r, const uint8_t *g,
                              const gb_q8x_block &x, svint8_t xlo, svint8_t xhi) {
  const svuint8_t low4 = svdup_n_u8(0x0F);
  svint32_t isum = svdup_n_s32(-8 * x.sum);
  const uint8_t *q = g + 32 + 4 * r;
  svuint8_t v = svld1_u8(pb, q);
  isum = svdot_lane_s32(isum, svreinterpret_s8_u8(svand_u8_x(pb, v, low4)), xlo, 0);
  isum = svdot_lane_s32(isum, svreinterpret_s8_u8(svlsr_n_u8_x(pb, v, 4)), xhi, 0);
  v = svld1_u8(pb, q + 64);
  isum = svdot_lane_s32(isum, svreinterpret_s8_u8(svand_u8_x(pb, v, low4)), xlo, 1);
  isum = svdot_lane_s32(isum, svreinterpret_s8_u8(svlsr_n_u8_x(pb, v, 4)), xhi, 1);
  v = svld1_u8(pb, q + 128);
  isum = svdot_lane_s32(isum, svreinterpret_s8_u8(svand_u8_x(pb, v, low4)), xlo, 2);
  isum = svdot_lane_s32(isum, svreinterpret_s8_u8(svlsr_n_u8_x(pb, v, 4)), xhi, 2);
  v = svld1_u8(pb, q + 192);
  isum = svdot_lane_s32(isum, svreinterpret_s8_u8(svand_u8_x(pb, v, low4)), xlo, 3);
  isum = svdot_lane_s32(isum, svreinterpret_s8_u8(svlsr_n_u8_x(pb, v, 4)), xhi, 3);
  // The rows' fp16 scales, one per 32-bit lane (zero-extended halfwords).
  const svuint32_t h = svld1uh_u32(pw, reinterpret_cast<const uint16_t *>(g) + r);
  const svfloat32_t d = svcvt_f32_f16_x(pw, svreinterpret_f16_u32(h));
  const svfloat32_t t = svmul_n_f32_x(pw, d, x.d);
  return svadd_f32_x(pw, acc, svmul_f32_x(pw, t, svcvt_f32_s32_x(pw, isum)));
}

// y[0..16) of one group (g = its block 0), in N chunks of rows_per_vec rows
// (N = 4 at 128 bits, 2 at 256 and 384, 1 from 512 on: each vector length
// runs a loop without dead chunks).
template <int N>
inline void group_dot(const uint8_t *g, const gb_q8x_block *xq, uint64_t nb, float *y, uint64_t rows_per_vec) {
  const uint64_t r1 = rows_per_vec, r2 = 2 * rows_per_vec, r3 = 3 * rows_per_vec;
  const svbool_t b0 = GB_CHUNK_PB(0), b1 = GB_CHUNK_PB(r1), b2 = GB_CHUNK_PB(r2), b3 = GB_CHUNK_PB(r3);
  const svbool_t w0 = GB_CHUNK_PW(0), w1 = GB_CHUNK_PW(r1), w2 = GB_CHUNK_PW(r2), w3 = GB_CHUNK_PW(r3);
  svfloat32_t a0 = svdup_n_f32(0.0f), a1 = a0, a2 = a0, a3 = a0;
  const svbool_t all = svptrue_b8();
  for (uint64_t b = 0; b < nb; b++, g += kGroupBlock) {
    svprfb(all, g + 2048, SV_PLDL1STRM);
    const svint8_t xlo = svld1rq_s8(all, xq[b].qs), xhi = svld1rq_s8(all, xq[b].qs + 16);
    a0 = chunk_step(a0, b0, w0, 0, g, xq[b], xlo, xhi);
    if (N > 1) a1 = chunk_step(a1, b1, w1, r1, g, xq[b], xlo, xhi);
    if (N > 2) {
      a2 = chunk_step(a2, b2, w2, r2, g, xq[b], xlo, xhi);
      a3 = chunk_step(a3, b3, w3, r3, g, xq[b], xlo, xhi);
    }
  }
  // Lane j of a chunk starting at row r is row r + j (whilelt(r, 16) keeps
  // lanes j < 16 - r).
  svst1_f32(w0, y, a0);
  if (N > 1) svst1_f32(w1, y + r1, a1);
  if (N > 2) {
    svst1_f32(w2, y + r2, a2);
    svst1_f32(w3, y + r3, a3);
  }
}

inline void group_dot_vl(const uint8_t *g, const gb_q8x_block *xq, uint64_t nb, float *y) {
  const uint64_t rows_per_vec = svcntw() < 16 ? svcntw() : 16;
  if (rows_per_vec >= 16) group_dot<1>(g, xq, nb, y, rows_per_vec);
  else if (rows_per_vec >= 8) group_dot<2>(g, xq, nb, y, rows_per_vec);
  else group_dot<4>(g, xq, nb, y, rows_per_vec);
}

}  // namespace

extern "C" void gb_q4r16_gemv__sve(float *y, const uint8_t *W, const float *, const gb_q8x_block *xq,
                                   size_t row_begin, size_t row_end, size_t cols) {
  const uint64_t nb = (cols + 31) / 32;
  for (size_t r = row_begin; r < row_end; r += 16) group_dot_vl(W + (r / 16) * nb * kGroupBlock, xq, nb, y + r);
}

// Per group, the positions one after another: the group's bytes come from
// memory once and from cache for the other positions; each position's
// result is computed exactly as the gemv computes it.
extern "C" void gb_q4r16_gemvm__sve(float *Y, size_t ldy, const uint8_t *W, const float *, size_t,
                                    const gb_q8x_block *XQ, size_t ldxq, size_t m, size_t row_begin,
                                    size_t row_end, size_t cols) {
  const uint64_t nb = (cols + 31) / 32;
  for (size_t r = row_begin; r < row_end; r += 16) {
    const uint8_t *g = W + (r / 16) * nb * kGroupBlock;
    for (size_t i = 0; i < m; i++) group_dot_vl(g, XQ + i * ldxq, nb, Y + i * ldy + r);
  }
}
