// AVX2 + FMA + F16C fused attention over packed KV records (layouts in
// kernels.h), chunk by chunk (32 records):
//  - scores: per kv head, every query head of the group dots the chunk's
//    key rows eight at a time (vpmaddubsw: unsigned codes x int8 query,
//    8-bit keys by the sign trick) into exact int32 sums, one horizontal
//    reduction per eight rows, then scaled exactly as the generic kernel
//    does (vector multiplies in the same order), so scores are bit-identical
//    to generic. 8-bit, 4-bit (head_dim % 64 == 0) and f16 / f32 keys are
//    read in place; 2/3-bit rows (and other 4-bit ones) are unpacked once
//    into an L1 buffer (planes are contiguous quarters or halves of the row:
//    one shift and mask per plane);
//  - softmax: running max per head, weights from a vector exp;
//  - values: per kv head, quantized rows unpacked once to int8 (code -
//    offset); each head of the group keeps its output row in registers for
//    the whole chunk (64 columns at a time) and adds (p x sv) x value with
//    FMAs (a different rounding than generic's separate multiply and add:
//    within the tests' tolerance).
// Rows whose head_dim is not a multiple of 32 (or more than 64 query heads)
// go to the generic kernel. The finish step normalises the output and
// computes the attention mass with the same vector exp.
#include <immintrin.h>
#include <math.h>
#include <stdint.h>
#include <string.h>

#include "f16.h"
#include "kernels.h"

namespace {

constexpr uint32_t kChunk = 32;

// exp(x) for x <= 0 (Cephes polynomial, relative error ~2e-7).
inline __m256 exp256(__m256 x) {
  x = _mm256_max_ps(x, _mm256_set1_ps(-87.3f));
  __m256 fx = _mm256_fmadd_ps(x, _mm256_set1_ps(1.44269504088896341f), _mm256_set1_ps(0.5f));
  fx = _mm256_floor_ps(fx);
  x = _mm256_fnmadd_ps(fx, _mm256_set1_ps(0.693359375f), x);
  x = _mm256_fnmadd_ps(fx, _mm256_set1_ps(-2.12194440e-4f), x);
  __m256 y = _mm256_set1_ps(1.9875691500E-4f);
  y = _mm256_fmadd_ps(y, x, _mm256_set1_ps(1.3981999507E-3f));
  y = _mm256_fmadd_ps(y, x, _mm256_set1_ps(8.3334519073E-3f));
  y = _mm256_fmadd_ps(y, x, _mm256_set1_ps(4.1665795894E-2f));
  y = _mm256_fmadd_ps(y, x, _mm256_set1_ps(1.6666665459E-1f));
  y = _mm256_fmadd_ps(y, x, _mm256_set1_ps(5.0000001201E-1f));
  const __m256 x2 = _mm256_mul_ps(x, x);
  y = _mm256_fmadd_ps(y, x2, _mm256_add_ps(x, _mm256_set1_ps(1.0f)));
  const __m256i e = _mm256_slli_epi32(_mm256_add_epi32(_mm256_cvttps_epi32(fx), _mm256_set1_epi32(127)), 23);
  return _mm256_mul_ps(y, _mm256_castsi256_ps(e));
}

inline float hsum(__m256 v) {
  __m128 s = _mm_add_ps(_mm256_castps256_ps128(v), _mm256_extractf128_ps(v, 1));
  s = _mm_add_ps(s, _mm_movehl_ps(s, s));
  s = _mm_add_ss(s, _mm_movehdup_ps(s));
  return _mm_cvtss_f32(s);
}

inline uint64_t ld64(const uint8_t *p) {
  uint64_t v;
  memcpy(&v, p, 8);
  return v;
}

// Store 16 / 32 codes minus bias.
inline void put16(uint8_t *u, __m128i v, __m128i bias) {
  _mm_storeu_si128(reinterpret_cast<__m128i *>(u), _mm_sub_epi8(v, bias));
}
inline void put32(uint8_t *u, __m256i v, __m256i bias) {
  _mm256_storeu_si256(reinterpret_cast<__m256i *>(u), _mm256_sub_epi8(v, bias));
}

// A packed row (bits 2, 3, 4) to codes u[0..d) minus `bias` (0: the
// unsigned codes for the key dots; the level's offset: signed values for the
// value sums); d % 32 == 0. Planes are read 32, 16 or 8 bytes at a time.
inline void unpack_codes(uint8_t *u, const uint8_t *row, uint32_t d, uint32_t bits, uint8_t bias = 0) {
  const __m128i m3 = _mm_set1_epi8(3), m15 = _mm_set1_epi8(15), one = _mm_set1_epi8(1);
  const __m128i b16 = _mm_set1_epi8((char)bias);
  if (bits == 4) {
    const uint32_t h = d / 2;
    uint32_t c = 0;
    if (h % 32 == 0) {
      const __m256i m = _mm256_set1_epi8(15), b32 = _mm256_set1_epi8((char)bias);
      for (; c < h; c += 32) {
        const __m256i b = _mm256_loadu_si256(reinterpret_cast<const __m256i *>(row + c));
        put32(u + c, _mm256_and_si256(b, m), b32);
        put32(u + h + c, _mm256_and_si256(_mm256_srli_epi16(b, 4), m), b32);
      }
    }
    for (; c < h; c += 16) {
      const __m128i b = _mm_loadu_si128(reinterpret_cast<const __m128i *>(row + c));
      put16(u + c, _mm_and_si128(b, m15), b16);
      put16(u + h + c, _mm_and_si128(_mm_srli_epi16(b, 4), m15), b16);
    }
    return;
  }
  const uint32_t qd = d / 4;  // multiple of 8
  // Whole 32-byte results built in registers where the shapes allow (a
  // narrower store followed by a wider load of the same bytes would stall
  // store-to-load forwarding).
  const __m256i m3v = _mm256_set1_epi8(3), onev = _mm256_set1_epi8(1), bv = _mm256_set1_epi8((char)bias);
  if (d == 64) {  // qd = 16: [plane 0 | plane 1], [plane 2 | plane 3]; e = 8
    const __m256i x = _mm256_broadcastsi128_si256(_mm_loadu_si128(reinterpret_cast<const __m128i *>(row)));
    __m256i l0 = _mm256_and_si256(_mm256_srlv_epi32(x, _mm256_setr_epi32(0, 0, 0, 0, 2, 2, 2, 2)), m3v);
    __m256i l1 = _mm256_and_si256(_mm256_srlv_epi32(x, _mm256_setr_epi32(4, 4, 4, 4, 6, 6, 6, 6)), m3v);
    if (bits == 3) {
      const __m256i y = _mm256_set1_epi64x((long long)ld64(row + 16));
      l0 = _mm256_or_si256(l0, _mm256_slli_epi64(_mm256_and_si256(_mm256_srlv_epi64(y, _mm256_setr_epi64x(0, 1, 2, 3)), onev), 2));
      l1 = _mm256_or_si256(l1, _mm256_slli_epi64(_mm256_and_si256(_mm256_srlv_epi64(y, _mm256_setr_epi64x(4, 5, 6, 7)), onev), 2));
    }
    put32(u, l0, bv);
    put32(u + 32, l1, bv);
    return;
  }
  if (d == 128) {  // qd = 32: one plane per vector; e = 16: two high planes per vector
    const __m256i x = _mm256_loadu_si256(reinterpret_cast<const __m256i *>(row));
    const __m256i y = bits == 3 ? _mm256_broadcastsi128_si256(_mm_loadu_si128(reinterpret_cast<const __m128i *>(row + 32)))
                                : _mm256_setzero_si256();
    for (int k = 0; k < 4; k++) {
      __m256i l = _mm256_and_si256(_mm256_srl_epi16(x, _mm_cvtsi32_si128(2 * k)), m3v);
      if (bits == 3)
        l = _mm256_or_si256(l, _mm256_slli_epi64(_mm256_and_si256(_mm256_srlv_epi64(y, _mm256_setr_epi64x(2 * k, 2 * k, 2 * k + 1, 2 * k + 1)), onev), 2));
      put32(u + 32 * k, l, bv);
    }
    return;
  }
  // 3 bits: the low pairs without the bias (the high bits are or'ed in below).
  const __m128i lb = bits == 2 ? b16 : _mm_setzero_si128();
  uint32_t c = 0;
  for (; c + 16 <= qd; c += 16) {
    const __m128i b = _mm_loadu_si128(reinterpret_cast<const __m128i *>(row + c));
    put16(u + c, _mm_and_si128(b, m3), lb);
    put16(u + qd + c, _mm_and_si128(_mm_srli_epi16(b, 2), m3), lb);
    put16(u + 2 * qd + c, _mm_and_si128(_mm_srli_epi16(b, 4), m3), lb);
    put16(u + 3 * qd + c, _mm_and_si128(_mm_srli_epi16(b, 6), m3), lb);
  }
  for (; c < qd; c += 8) {
    const __m128i b = _mm_loadl_epi64(reinterpret_cast<const __m128i *>(row + c));
    for (int k = 0; k < 4; k++)
      _mm_storel_epi64(reinterpret_cast<__m128i *>(u + k * qd + c),
                       _mm_sub_epi8(_mm_and_si128(_mm_srl_epi16(b, _mm_cvtsi32_si128(2 * k)), m3), lb));
  }
  if (bits == 3) {
    const uint32_t e = d / 8;  // multiple of 4
    const uint8_t *hi = row + qd;
    if (e % 16 == 0) {
      for (uint32_t c2 = 0; c2 < e; c2 += 16) {
        const __m128i b = _mm_loadu_si128(reinterpret_cast<const __m128i *>(hi + c2));
        for (int k = 0; k < 8; k++) {
          __m128i *p = reinterpret_cast<__m128i *>(u + k * e + c2);
          const __m128i bit = _mm_and_si128(_mm_srl_epi16(b, _mm_cvtsi32_si128(k)), one);
          _mm_storeu_si128(p, _mm_sub_epi8(_mm_or_si128(_mm_loadu_si128(p), _mm_slli_epi16(bit, 2)), b16));
        }
      }
    } else if (e % 8 == 0) {
      for (uint32_t c2 = 0; c2 < e; c2 += 8) {
        const __m128i b = _mm_loadl_epi64(reinterpret_cast<const __m128i *>(hi + c2));
        for (int k = 0; k < 8; k++) {
          __m128i *p = reinterpret_cast<__m128i *>(u + k * e + c2);
          const __m128i bit = _mm_and_si128(_mm_srl_epi16(b, _mm_cvtsi32_si128(k)), one);
          _mm_storel_epi64(p, _mm_sub_epi8(_mm_or_si128(_mm_loadl_epi64(p), _mm_slli_epi16(bit, 2)), b16));
        }
      }
    } else {
      for (uint32_t j = 0; j < e; j++)
        for (uint32_t k = 0; k < 8; k++)
          u[j + k * e] = (uint8_t)((u[j + k * e] | (((hi[j] >> k) & 1) << 2)) - bias);
    }
  }
}

// Eight int32 vectors to the vector of their lane sums: [sum(a0) .. sum(a7)].
inline __m256i reduce8_i32(const __m256i *a) {
  const __m256i h01 = _mm256_hadd_epi32(a[0], a[1]), h23 = _mm256_hadd_epi32(a[2], a[3]);
  const __m256i h45 = _mm256_hadd_epi32(a[4], a[5]), h67 = _mm256_hadd_epi32(a[6], a[7]);
  const __m256i q0 = _mm256_hadd_epi32(h01, h23), q1 = _mm256_hadd_epi32(h45, h67);
  return _mm256_add_epi32(_mm256_permute2x128_si256(q0, q1, 0x20), _mm256_permute2x128_si256(q0, q1, 0x31));
}

inline __m256 reduce8_ps(const __m256 *a) {
  const __m256 h01 = _mm256_hadd_ps(a[0], a[1]), h23 = _mm256_hadd_ps(a[2], a[3]);
  const __m256 h45 = _mm256_hadd_ps(a[4], a[5]), h67 = _mm256_hadd_ps(a[6], a[7]);
  const __m256 q0 = _mm256_hadd_ps(h01, h23), q1 = _mm256_hadd_ps(h45, h67);
  return _mm256_add_ps(_mm256_permute2f128_ps(q0, q1, 0x20), _mm256_permute2f128_ps(q0, q1, 0x31));
}

// Binary16 scales of the chunk's records for one row (kv head r of K, or
// R + r of V) to f32 with F16C (exact, like gb::f16_to_f32).
inline void chunk_scales(float *out, const uint16_t *scales, const uint32_t *slots, uint32_t n, size_t stride,
                         size_t col) {
  // Four scales per 64-bit register, two registers per vcvtph2ps (no
  // narrow stores re-read by a wide load).
  for (uint32_t t = 0; t < kChunk; t += 8) {
    uint64_t w[2] = {0, 0};
    for (uint32_t i = 0; i < 8 && t + i < n; i++)
      w[i / 4] |= (uint64_t)scales[(size_t)slots[t + i] * stride + col] << (16 * (i % 4));
    _mm256_storeu_ps(out + t, _mm256_cvtph_ps(_mm_set_epi64x((long long)w[1], (long long)w[0])));
  }
}

// Exact int32 dots of (up to) eight key rows of codes with one int8 query
// row: lane i = row i (rows past nt are zero). Unsigned codes u (2/3/4 bits:
// u8 x s8 products; the caller subtracts off x sum(q)) or signed int8 keys
// (SIGNED: |q| x sign(k, q)).
template <bool SIGNED, bool FULL>
inline __m256i dots8_i8(const uint8_t *rows, size_t rs, uint32_t nt, const int8_t *q, uint32_t d) {
  const __m256i ones = _mm256_set1_epi16(1);
  __m256i a[8];
  for (int i = 0; i < 8; i++) a[i] = _mm256_setzero_si256();
  for (uint32_t j = 0; j < d; j += 32) {
    const __m256i qv = _mm256_loadu_si256(reinterpret_cast<const __m256i *>(q + j));
    const __m256i qa = SIGNED ? _mm256_abs_epi8(qv) : qv;
    for (uint32_t i = 0; i < 8; i++) {
      if (!FULL && i >= nt) break;
      const __m256i k = _mm256_loadu_si256(reinterpret_cast<const __m256i *>(rows + i * rs + j));
      const __m256i pr = SIGNED ? _mm256_maddubs_epi16(qa, _mm256_sign_epi8(k, qv)) : _mm256_maddubs_epi16(k, qv);
      a[i] = _mm256_add_epi32(a[i], _mm256_madd_epi16(pr, ones));
    }
  }
  return reduce8_i32(a);
}

// The same for packed 4-bit key rows read in place (h = d / 2 a multiple of
// 32): byte j holds codes j (low nibble) and j + h (high nibble).
template <bool FULL>
inline __m256i dots8_q4(const uint8_t *rows, size_t rs, uint32_t nt, const int8_t *q, uint32_t d) {
  const __m256i ones = _mm256_set1_epi16(1), m15 = _mm256_set1_epi8(15);
  const uint32_t h = d / 2;
  __m256i a[8];
  for (int i = 0; i < 8; i++) a[i] = _mm256_setzero_si256();
  for (uint32_t j = 0; j < h; j += 32) {
    const __m256i ql = _mm256_loadu_si256(reinterpret_cast<const __m256i *>(q + j));
    const __m256i qh = _mm256_loadu_si256(reinterpret_cast<const __m256i *>(q + h + j));
    for (uint32_t i = 0; i < 8; i++) {
      if (!FULL && i >= nt) break;
      const __m256i b = _mm256_loadu_si256(reinterpret_cast<const __m256i *>(rows + i * rs + j));
      const __m256i lo = _mm256_and_si256(b, m15), hi = _mm256_and_si256(_mm256_srli_epi16(b, 4), m15);
      // |15 x 127 x 2| x 2 < 2^15: the int16 sum of both halves is exact.
      const __m256i pr = _mm256_add_epi16(_mm256_maddubs_epi16(lo, ql), _mm256_maddubs_epi16(hi, qh));
      a[i] = _mm256_add_epi32(a[i], _mm256_madd_epi16(pr, ones));
    }
  }
  return reduce8_i32(a);
}

// Float dots of (up to) eight f16 / f32 key rows with the f32 query row.
template <bool HALF, bool FULL>
inline __m256 dots8_f(const uint8_t *rows, size_t rs, uint32_t nt, const float *q, uint32_t d) {
  __m256 a[8];
  for (int i = 0; i < 8; i++) a[i] = _mm256_setzero_ps();
  for (uint32_t j = 0; j < d; j += 8) {
    const __m256 qv = _mm256_loadu_ps(q + j);
    for (uint32_t i = 0; i < 8; i++) {
      if (!FULL && i >= nt) break;
      const uint8_t *row = rows + i * rs;
      const __m256 k = HALF ? _mm256_cvtph_ps(_mm_loadu_si128(reinterpret_cast<const __m128i *>(row + 2 * j)))
                            : _mm256_loadu_ps(reinterpret_cast<const float *>(row + 4 * j));
      a[i] = _mm256_fmadd_ps(qv, k, a[i]);
    }
  }
  return reduce8_ps(a);
}

// Value element loaders: 8 consecutive elements of a row as f32 (int8
// codes already offset; binary16; f32).
struct LoadI8 {
  static __m256 load(const uint8_t *p) {
    return _mm256_cvtepi32_ps(_mm256_cvtepi8_epi32(_mm_loadl_epi64(reinterpret_cast<const __m128i *>(p))));
  }
  static constexpr uint32_t kSize = 1;
};
struct LoadF16 {
  static __m256 load(const uint8_t *p) { return _mm256_cvtph_ps(_mm_loadu_si128(reinterpret_cast<const __m128i *>(p))); }
  static constexpr uint32_t kSize = 2;
};
struct LoadF32 {
  static __m256 load(const uint8_t *p) { return _mm256_loadu_ps(reinterpret_cast<const float *>(p)); }
  static constexpr uint32_t kSize = 4;
};

// acc[0 .. 8*NV) += sum over the chunk's rows t of w[t] * row_t[col ..], the
// accumulators in registers for the whole chunk.
template <class L, int NV>
inline void accumulate_cols(float *acc, const uint8_t *rows, size_t rs, const float *w, uint32_t n, uint32_t col) {
  __m256 a[NV];
  for (int i = 0; i < NV; i++) a[i] = _mm256_loadu_ps(acc + 8 * i);
  for (uint32_t t = 0; t < n; t++) {
    const __m256 wt = _mm256_set1_ps(w[t]);
    const uint8_t *p = rows + t * rs + (size_t)col * L::kSize;
    for (int i = 0; i < NV; i++) a[i] = _mm256_fmadd_ps(wt, L::load(p + 8 * i * L::kSize), a[i]);
  }
  for (int i = 0; i < NV; i++) _mm256_storeu_ps(acc + 8 * i, a[i]);
}

template <class L>
inline void accumulate_row(float *acc, const uint8_t *rows, size_t rs, const float *w, uint32_t n, uint32_t d) {
  uint32_t c = 0;
  for (; c + 64 <= d; c += 64) accumulate_cols<L, 8>(acc + c, rows, rs, w, n, c);
  if (c < d) accumulate_cols<L, 4>(acc + c, rows, rs, w, n, c);  // d % 32 == 0
}

}  // namespace

// The chunk's work in three passes: scores (eight records per reduction),
// softmax weights, values (each head's accumulators stay in registers for
// the whole chunk).
extern "C" void gb_attn_run__avx2(gb_attn_state *st, const uint8_t *records, const uint32_t *slots, uint32_t count,
                                  uint32_t kbits, uint32_t vbits, uint32_t base) {
  const uint32_t H = st->n_heads, R = st->n_kv_heads, d = st->head_dim, G = H / R;
  if (d % 32 != 0 || d > GB_KV_QUANT_MAX_HEAD_DIM || H > 64) {
    gb_attn_run__generic(st, records, slots, count, kbits, vbits, base);
    return;
  }
  const uint32_t krow = d * kbits / 8, vrow = d * vbits / 8;
  const size_t rec = (size_t)R * (krow + vrow);
  const size_t stride = st->score_stride;
  alignas(32) uint8_t codes[kChunk * GB_KV_QUANT_MAX_HEAD_DIM];  // the chunk's rows of one kv head, unpacked
  alignas(32) float p[64 * kChunk];         // (H, chunk) softmax weights (x the value scale)
  alignas(32) float sc[kChunk];             // the chunk's scales of one row
  int32_t qsum[64];  // off x sum(q8) per head
  const bool q4_in_place = kbits == 4 && d % 64 == 0;  // 4-bit keys dotted without unpacking
  if (kbits < 8)
    for (uint32_t h = 0; h < H; h++) {
      int32_t s = 0;
      for (uint32_t j = 0; j < d; j++) s += st->q8[(size_t)h * d + j];
      qsum[h] = s * (1 << (kbits - 1));
    }
  for (uint32_t c0 = 0; c0 < count; c0 += kChunk) {
    const uint32_t n = count - c0 < kChunk ? count - c0 : kChunk;
    const uint8_t *r0 = records + (size_t)c0 * rec;
    // The records of a run are contiguous. A chunk's passes visit each of
    // its records once per kv head (a stride the hardware prefetchers do
    // not run ahead of), so the bytes are asked for in two stages, spread
    // over the kv heads' passes: the chunk after the next into L2 while
    // this one's keys are scored, the next one into L1 while its values
    // are summed (after the last use of this chunk's keys).
    const auto chunk_bytes = [&](uint32_t c) -> size_t {  // bytes of the chunk starting at record c
      return c < count ? (size_t)(count - c < kChunk ? count - c : kChunk) * rec : 0;
    };
    const size_t next_bytes = chunk_bytes(c0 + kChunk), next2_bytes = chunk_bytes(c0 + 2 * kChunk);
    const uint8_t *next = next_bytes ? r0 + (size_t)kChunk * rec : nullptr;
    const uint8_t *next2 = next2_bytes ? r0 + 2 * (size_t)kChunk * rec : nullptr;
    // Scores, kv head by kv head. Key rows t of the chunk at rows + t * rs:
    // in the records, or unpacked into `codes`.
    for (uint32_t r = 0; r < R; r++) {
      const uint8_t *rows = r0 + (size_t)r * krow;
      size_t rs = rec;
      if (kbits < 8 && !q4_in_place) {
        for (uint32_t t = 0; t < n; t++) unpack_codes(codes + (size_t)t * d, rows + t * rec, d, kbits);
        rows = codes;
        rs = d;
      }
      for (size_t o = next2_bytes * r / R & ~(size_t)63; o < next2_bytes * (r + 1) / R; o += 64)
        _mm_prefetch(reinterpret_cast<const char *>(next2 + o), _MM_HINT_T1);
      if (kbits <= 8) chunk_scales(sc, st->scales, slots + c0, n, 2 * (size_t)R, r);
      for (uint32_t g = 0; g < G; g++) {
        const uint32_t h = r * G + g;
        float *out = st->scores + (size_t)h * stride + base + c0;
        for (uint32_t t0 = 0; t0 < n; t0 += 8) {
          const uint32_t nt = n - t0 < 8 ? n - t0 : 8;
          __m256 s;
          if (kbits <= 8) {
            const int8_t *q8 = st->q8 + (size_t)h * d;
            const uint8_t *rt = rows + t0 * rs;
            __m256i isum;
            if (q4_in_place)
              isum = nt == 8 ? dots8_q4<true>(rt, rs, 8, q8, d) : dots8_q4<false>(rt, rs, nt, q8, d);
            else
              isum = nt == 8 ? (kbits == 8 ? dots8_i8<true, true>(rt, rs, 8, q8, d) : dots8_i8<false, true>(rt, rs, 8, q8, d))
                             : (kbits == 8 ? dots8_i8<true, false>(rt, rs, nt, q8, d)
                                           : dots8_i8<false, false>(rt, rs, nt, q8, d));
            if (kbits < 8) isum = _mm256_sub_epi32(isum, _mm256_set1_epi32(qsum[h]));
            // As generic: ((float)isum * (sk * q8_d)) * scale.
            const __m256 f = _mm256_mul_ps(_mm256_loadu_ps(sc + t0), _mm256_set1_ps(st->q8_d[h]));
            s = _mm256_mul_ps(_mm256_mul_ps(_mm256_cvtepi32_ps(isum), f), _mm256_set1_ps(st->scale));
          } else {
            const float *q = st->q + (size_t)h * d;
            const uint8_t *rt = rows + t0 * rs;
            const __m256 dot = nt == 8 ? (kbits == 16 ? dots8_f<true, true>(rt, rs, 8, q, d) : dots8_f<false, true>(rt, rs, 8, q, d))
                                       : (kbits == 16 ? dots8_f<true, false>(rt, rs, nt, q, d)
                                                      : dots8_f<false, false>(rt, rs, nt, q, d));
            s = _mm256_mul_ps(dot, _mm256_set1_ps(st->scale));
          }
          if (nt == 8) {
            _mm256_storeu_ps(out + t0, s);
          } else {
            alignas(32) float tmp[8];
            _mm256_store_ps(tmp, s);
            for (uint32_t i = 0; i < nt; i++) out[t0 + i] = tmp[i];
          }
        }
      }
    }
    // Running max per head (rescaling what was accumulated under a smaller
    // one) and the chunk's softmax weights p = exp(score - m), summed into l.
    for (uint32_t h = 0; h < H; h++) {
      const float *s = st->scores + (size_t)h * stride + base + c0;
      float mx = st->m[h];
      {
        uint32_t t = 0;
        if (n >= 8) {
          __m256 vm = _mm256_loadu_ps(s);
          for (t = 8; t + 8 <= n; t += 8) vm = _mm256_max_ps(vm, _mm256_loadu_ps(s + t));
          __m128 m4 = _mm_max_ps(_mm256_castps256_ps128(vm), _mm256_extractf128_ps(vm, 1));
          m4 = _mm_max_ps(m4, _mm_movehl_ps(m4, m4));
          m4 = _mm_max_ss(m4, _mm_movehdup_ps(m4));
          const float vmax = _mm_cvtss_f32(m4);
          mx = vmax > mx ? vmax : mx;
        }
        for (; t < n; t++) mx = s[t] > mx ? s[t] : mx;
      }
      if (mx > st->m[h]) {
        const float f = expf(st->m[h] - mx);
        st->l[h] *= f;
        float *acc = st->acc + (size_t)h * d;
        const __m256 vfac = _mm256_set1_ps(f);
        for (uint32_t j = 0; j < d; j += 8) _mm256_storeu_ps(acc + j, _mm256_mul_ps(_mm256_loadu_ps(acc + j), vfac));
        st->m[h] = mx;
      }
      float *ph = p + (size_t)h * kChunk;
      const __m256 m = _mm256_set1_ps(st->m[h]);
      __m256 vl = _mm256_setzero_ps();
      uint32_t t = 0;
      for (; t + 8 <= n; t += 8) {
        const __m256 e = exp256(_mm256_sub_ps(_mm256_loadu_ps(s + t), m));
        _mm256_storeu_ps(ph + t, e);
        vl = _mm256_add_ps(vl, e);
      }
      float l = hsum(vl);
      for (; t < n; t++) l += ph[t] = expf(s[t] - st->m[h]);
      st->l[h] += l;
    }
    // Values, kv head by kv head: quantized rows unpacked once to int8
    // (code - offset), weights p x sv, then every head of the group.
    for (uint32_t r = 0; r < R; r++) {
      const uint8_t *rows = r0 + (size_t)R * krow + (size_t)r * vrow;
      size_t rs = rec;
      if (vbits < 8) {
        for (uint32_t t = 0; t < n; t++)
          unpack_codes(codes + (size_t)t * d, rows + t * rec, d, vbits, (uint8_t)(1u << (vbits - 1)));
        rows = codes;
        rs = d;
      }
      for (size_t o = next_bytes * r / R & ~(size_t)63; o < next_bytes * (r + 1) / R; o += 64)
        _mm_prefetch(reinterpret_cast<const char *>(next + o), _MM_HINT_T0);
      if (vbits <= 8) chunk_scales(sc, st->scales, slots + c0, n, 2 * (size_t)R, (size_t)R + r);
      for (uint32_t g = 0; g < G; g++) {
        const uint32_t h = r * G + g;
        float *w = p + (size_t)h * kChunk;
        float *acc = st->acc + (size_t)h * d;
        if (vbits <= 8) {
          uint32_t t = 0;
          for (; t + 8 <= n; t += 8)
            _mm256_storeu_ps(w + t, _mm256_mul_ps(_mm256_loadu_ps(w + t), _mm256_loadu_ps(sc + t)));
          for (; t < n; t++) w[t] *= sc[t];
          accumulate_row<LoadI8>(acc, rows, rs, w, n, d);
        } else if (vbits == 16) {
          accumulate_row<LoadF16>(acc, rows, rs, w, n, d);
        } else {
          accumulate_row<LoadF32>(acc, rows, rs, w, n, d);
        }
      }
    }
  }
}

extern "C" void gb_attn_finish__avx2(const gb_attn_state *st, uint32_t n, const float *head_w, float *out, float *mass,
                                     float *wmass, float *head_mean) {
  const uint32_t H = st->n_heads, d = st->head_dim;
  for (uint32_t h = 0; h < H; h++) {
    const float inv = st->l[h] > 0.0f ? 1.0f / st->l[h] : 0.0f;
    for (uint32_t j = 0; j < d; j++) out[(size_t)h * d + j] = st->acc[(size_t)h * d + j] * inv;
  }
  if (!mass) return;
  for (uint32_t i = 0; i < n; i++) mass[i] = wmass[i] = 0.0f;
  for (uint32_t h = 0; h < H; h++) {
    const float inv = st->l[h] > 0.0f ? 1.0f / st->l[h] : 0.0f;
    const float *s = st->scores + (size_t)h * st->score_stride;
    const __m256 vm = _mm256_set1_ps(st->m[h]), vinv = _mm256_set1_ps(inv), vw = _mm256_set1_ps(head_w[h]);
    __m256 vsum = _mm256_setzero_ps();
    uint32_t i = 0;
    for (; i + 8 <= n; i += 8) {
      const __m256 pv = _mm256_mul_ps(exp256(_mm256_sub_ps(_mm256_loadu_ps(s + i), vm)), vinv);
      _mm256_storeu_ps(mass + i, _mm256_add_ps(_mm256_loadu_ps(mass + i), pv));
      _mm256_storeu_ps(wmass + i, _mm256_fmadd_ps(vw, pv, _mm256_loadu_ps(wmass + i)));
      vsum = _mm256_add_ps(vsum, pv);
    }
    float sum = hsum(vsum);
    for (; i < n; i++) {
      const float pv = expf(s[i] - st->m[h]) * inv;
      mass[i] += pv;
      wmass[i] += head_w[h] * pv;
      sum += pv;
    }
    head_mean[h] = n ? sum / (float)n : 0.0f;
  }
  const float invH = 1.0f / (float)H;
  for (uint32_t i = 0; i < n; i++) {
    mass[i] *= invH;
    wmass[i] *= invH;
  }
}
