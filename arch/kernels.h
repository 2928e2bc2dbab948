/* kernels.h — the kernel contract shared by every instruction-set folder.
 *
 * Kernels are pure functions over buffers: no allocation, no globals, no
 * calls into port/. The list of kernels is written once, in kernels.inc; it
 * generates the declarations here, the dispatch tables (dispatch.cpp), the
 * kernel tests and the kernel benchmarks.
 *
 * The weight layouts are described here and the formats listed, one row
 * each, in formats.inc (ids, block sizes, GGUF type ids, ...: formats.h
 * makes them a table); src/format.h names them for the file format and
 * static_asserts the ids it shares.
 *   f32 row: cols floats; f16 row: cols binary16;
 *   q8 row: ceil(cols/32) blocks {u16 d; i8 qs[32]}            (34 bytes);
 *   q4 row: ceil(cols/32) blocks {u16 d; u8 qs[16]}            (18 bytes),
 *           weight j = d*((qs[j]&15)-8), weight j+16 = d*((qs[j]>>4)-8).
 * Block rows are padded with zero weights past cols.
 * q4r16 (the q4 blocks of 16 rows interleaved; rows % 16 == 0):
 *   group g = rows 16g..16g+15 starts at byte g * nb * 288 (nb = ceil(cols/32));
 *   block b of the group, at +b*288: u16 d[16] (row 16g+i's scale), then for
 *   k = 0..3 and i = 0..15 the four bytes qs[4k..4k+3] of row 16g+i's block
 *   (same nibble meaning as q4). So one 16-byte vector holds one 4-byte slice
 *   of four rows and one 64-byte vector the slice of all sixteen: an integer
 *   dot product lane (sdot by element, vpdpbusd with a broadcast) gathers one
 *   row's whole block, with no horizontal sums.
 * GGUF's block formats (GB_FMT_Q4_1..GB_FMT_Q6K) are GGUF's blocks byte for
 * byte (little-endian; f16 = binary16); a row of cols weights (a multiple of
 * the block: no padding) is cols/32 blocks, or cols/256 for the K-quants.
 * Weight e of a block, code u, w its value:
 *   q4_1  {f16 d, m; u8 qs[16]} 20 B: u = low nibble of qs[e] (e < 16) or
 *         high nibble of qs[e-16]; w = d*u + m.
 *   q5_0  {f16 d; u32 qh; u8 qs[16]} 22 B: u = nibble as q4_1 | (bit e of
 *         qh) << 4; w = d*(u - 16).
 *   q5_1  {f16 d, m; u32 qh; u8 qs[16]} 24 B: u as q5_0; w = d*u + m.
 *   iq4nl {f16 d; u8 qs[16]} 18 B: the nibble (as q4_1) indexes the grid
 *         {-127,-104,-83,-65,-49,-35,-22,-10,1,13,25,38,53,69,89,113}: w = d*grid.
 *   iq4xs {f16 d; u16 sh; u8 sl[4]; u8 qs[128]} 136 B: 32-weight sub-block
 *         s = e/32 has the 6-bit scale ls = nibble s%2 of sl[s/2] | bits
 *         2s..2s+1 of sh << 4 and its codes as iq4nl's in qs[16s..16s+15]:
 *         w = d*(ls - 32)*grid.
 *   The i-quants (codebooks and decoders: arch/iquants.h), 256-weight
 *   super-blocks of 32-weight sub-blocks s, each four groups l of 8 weights
 *   (a codebook entry of 8, or two of 4, magnitudes) with signs:
 *   iq2xxs {f16 d; u8 q[64]} 66 B: sub-block s is q[8s..8s+7]: bytes 0..3
 *         index group l in a 256-entry grid, the u32 of bytes 4..7 holds
 *         group l's 7 sign bits at bit 7l (the eighth: their parity) and
 *         ls at bits 28..31; w = d*(0.5 + ls)/4*grid*sign.
 *   iq2xs {f16 d; u16 q[32]; u8 sc[8]} 74 B: group l of s is q[4s + l]:
 *         9-bit index (512-entry grid), 7 sign bits above; ls of weights
 *         16t.. is nibble t%2 of sc[t/2]; w as iq2xxs.
 *   iq2s  {f16 d; u8 qs[32]; u8 signs[32]; u8 qh[8]; u8 sc[8]} 82 B: index
 *         of group l of s: qs[4s + l] | bits 2l..2l+1 of qh[s] << 8 (1024
 *         entries); signs[4s + l] bit j negates weight j; ls as iq2xs.
 *   iq3xxs {f16 d; u8 qs[64]; u32 ss[8]} 98 B: group l of s is the 4-entry
 *         grid rows qs[8s + 2l], qs[8s + 2l + 1] (256 entries); ss[s] as
 *         iq2xxs's sign word; w = d*(0.5 + ls)/2*grid*sign.
 *   iq3s  {f16 d; u8 qs[64]; u8 qh[8]; u8 signs[32]; u8 sc[4]} 110 B: row
 *         index k of s: qs[8s + k] | bit k of qh[s] << 8 (512 entries);
 *         signs as iq2s; ls nibble s%2 of sc[s/2]; w = d*(1 + 2ls)*grid*sign.
 *   iq1s  {f16 d; u8 qs[32]; u16 qh[8]} 50 B: index of group l of s:
 *         qs[4s + l] | bits 3l..3l+2 of qh[s] << 8 (2048 entries of -1, 0,
 *         1); ls bits 12..14, delta = -1/8 if bit 15 else 1/8;
 *         w = d*(2ls + 1)*(grid + delta).
 *   iq1m  {u8 qs[32]; u8 qh[16]; u16 sc[4]} 56 B: index as iq1s from
 *         nibble l%2 of qh[2s + l/2] (bit 3 of that nibble: delta's sign);
 *         3-bit ls of weights 16t.. at bit 3(t%4) of sc[t/4]; d is the f16
 *         of the four top nibbles of sc[0..3] (sc[0]'s lowest).
 *   mxfp4 {u8 e; u8 qs[16]} 17 B, 32 weights: nibbles as q4_1 index
 *         {0,1,2,3,4,6,8,12,0,-1,-2,-3,-4,-6,-8,-12}; w = 2^(e-128)*value.
 *   q1_0  {f16 d; u8 qs[16]} 18 B, 128 weights: bit j % 8 of qs[j / 8] set:
 *         w = d, clear: w = -d.
 *   q2_0  {f16 d; u8 qs[16]} 18 B, 64 weights: u = bits 2(j % 4)..+1 of
 *         qs[j / 4]; w = (u - 1)*d (-d, 0, d, 2d).
 *   nvfp4 {u8 d[4]; u8 qs[32]} 36 B, 64 weights in four 16-weight groups:
 *         group k's weights k*16 + j (j < 8) and k*16 + j + 8 are the low
 *         and high nibbles of qs[8k + j], values as mxfp4's; w = d_k*value,
 *         d_k the UE4M3 byte d[k] decoded and halved (0x00, 0x7f: 0).
 *   q2k   {u8 sc[16]; u8 qs[64]; f16 d, dmin} 84 B: u = bits 2g..2g+1 of
 *         qs[32h + e%32] (half h = e/128, group g = (e%128)/32); 16-weight
 *         group t = e/16 has scale sc[t]&15, min sc[t]>>4;
 *         w = d*scale*u - dmin*min.
 *   q3k   {u8 hmask[32]; u8 qs[64]; u8 sc[12]; f16 d} 110 B: low two bits as
 *         q2k, minus 4 where bit e/32 of hmask[e%32] is clear (-4..3); scale
 *         of group t: low nibble of sc[t] (t < 8) or high of sc[t-8], plus
 *         bits 2(t/4)..2(t/4)+1 of sc[8 + t%4] << 4, minus 32; w = d*scale*u.
 *   q4k   {f16 d, dmin; u8 sc[12]; u8 qs[128]} 144 B: 32-weight sub-block
 *         s = e/32 takes the low (s even) or high nibbles of qs[32(s/2) + e%32];
 *         6-bit scale, min: sc[s]&63, sc[s+4]&63 for s < 4, else the low /
 *         high nibble of sc[s+4] | the top two bits of sc[s-4] / sc[s] << 4;
 *         w = d*scale*u - dmin*min.
 *   q5k   {f16 d, dmin; u8 sc[12]; u8 qh[32]; u8 qs[128]} 176 B: as q4k, with
 *         bit s of qh[e%32] as the fifth bit (0..31).
 *   q6k   {u8 ql[128]; u8 qh[64]; i8 sc[16]; f16 d} 210 B: u = low (g < 2)
 *         or high nibble of ql[64h + 32(g%2) + e%32] | bits 2g..2g+1 of
 *         qh[32h + e%32] << 4 (h, g as q2k); w = d*sc[e/16]*(u - 32).
 * Their gemv sums exactly in int32 per activation block (per 16-weight half
 * where scales are per 16); arch/generic/gemv_ggml.h defines the float
 * arithmetic, and the generic rows_to_f32 is bit-exact with ggml's decoder.
 * q4kr16, q6kr16 (q4k / q6k super-blocks of 16 rows interleaved; rows % 16
 * == 0; arch/krows16.h): group g = rows 16g..16g+15 starts at byte
 * g * nsb * 16B (nsb = cols / 256, B the block bytes); its super-block s, at
 * +s*16B, holds the sixteen rows' blocks in 4-byte slices: bytes 4k..4k+3 of
 * row i's block at 64k + 4i, and the last B % 4 bytes of each block (q6k's
 * d) after the slices, row by row. Same bytes as the row-major matrix; a
 * 64-byte vector is one slice of all sixteen rows (one lane per row).
 */
#ifndef GEARBX_ARCH_KERNELS_H
#define GEARBX_ARCH_KERNELS_H

#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

/* Layout facts (see above; bytes per block: GB_<ID>_BLOCK_BYTES below). */
#define GB_QBLOCK 32             /* weights per q8 / q4 block and per activation block */
#define GB_QK_K 256              /* weights per K-quant super-block (q2k..q6k)         */
#define GB_Q4R16_ROWS 16         /* rows interleaved per q4r16 group                    */
/* Largest head_dim the attention kernels take for K/V rows at <= 8 bits
 * (their unpack buffers); f16 / f32 rows have no limit of their own. */
#define GB_KV_QUANT_MAX_HEAD_DIM 512

/* An activation vector quantized for integer dot products: 32 values per
 * block, symmetric, one f32 scale: x[j] ~= d * qs[j]. Blocks past the end of
 * the vector are zero-padded. */
typedef struct gb_q8x_block {
  float d;
  int32_t sum;  /* sum of qs (offset formats: sum (u - 8) x = sum u x - 8 sum) */
  int8_t qs[32];
} gb_q8x_block;

/* y[r] = sum_c W[r][c] * x[c] for r in [row_begin, row_end).
 * W points at row 0 of the matrix. x: cols floats (used by f32/f16);
 * xq: ceil(cols/32) activation blocks (used by q8/q4: integer products per
 * block, one float multiply-add per block). y is indexed by absolute row.
 * Over-read allowance: none (kernels read exactly the rows' bytes). */
/* Rows a gemv kernel handles together (its row tile): kernels step through
 * [row_begin, row_end) in groups of at most this many rows, starting at
 * row_begin. Splitting a matrix between threads at multiples of it gives
 * every row the same grouping as one call over the whole matrix, so results
 * do not depend on the split. */
#define GB_GEMV_ROW_TILE 16
/* Every kernel's own row grouping divides GB_GEMV_ROW_TILE; q4r16 kernels
 * take row ranges whose ends are multiples of 16 (whole groups). */

typedef void (*gb_gemv_fn)(float *y, const uint8_t *W, const float *x, const gb_q8x_block *xq,
                           size_t row_begin, size_t row_end, size_t cols);

/* Multi-position GEMV (speculative verify: m = draft length + 1 positions
 * through one pass over the weights):
 *   Y[i*ldy + r] = sum_c W[r][c] * X_i[c]  for positions i < m and rows
 *   r in [row_begin, row_end); 1 <= m <= GB_GEMVM_MAX_M.
 * X: m activation vectors of cols floats, X_i = X + i*ldx (f32 / f16);
 * XQ: m quantized vectors of ceil(cols/32) blocks, XQ_i = XQ + i*ldxq (q8 /
 * q4). For f16 weights XQ is nullptr or the same m vectors as X in binary16,
 * value for value equal to X (each X value an f16 represents exactly),
 * position i at (const uint16_t *)XQ + i*ldxq: a kernel may read either.
 * Y is indexed by absolute row; ldy >= row_end. Only Y[i*ldy + r] for
 * r in the range are written.
 * Bit-identical, position by position, to the gemv kernel of the same folder
 * called with the same row range (and so to the dispatch slot's gemv when
 * both are chosen together: gb_kernels_select pairs them by folder). Each
 * weight is loaded from memory once per call; it may be re-read from cache
 * once per chunk of positions that fits the register file.
 * Over-read allowance: none. */
#define GB_GEMVM_MAX_M 16
typedef void (*gb_gemvm_fn)(float *Y, size_t ldy, const uint8_t *W, const float *X, size_t ldx,
                            const gb_q8x_block *XQ, size_t ldxq, size_t m, size_t row_begin, size_t row_end,
                            size_t cols);

/* Prefill GEMM (GB_PGEMM): the gemvm's arguments and result for any m >= 1,
 * equal to the gemv's per position up to float summation order (not bit for
 * bit); each row's result depends only on the row, its position's x and the
 * kernel, never on the row range, m or the other positions (so not on how
 * threads and chunks split the work). */
typedef gb_gemvm_fn gb_pgemm_fn;

/* Quantize n floats into ceil(n/32) activation blocks. */
typedef void (*gb_quantize_act_fn)(gb_q8x_block *out, const float *x, size_t n);

/* Expand rows [row_begin, row_end) of the matrix at W (row 0) to f32:
 * out is (row_end - row_begin) x cols (embedding lookup, prefill panels).
 * Any row range, whatever the layout. */
typedef void (*gb_rows_to_f32_fn)(float *out, const uint8_t *W, size_t row_begin, size_t row_end, size_t cols);

/* ---- Fused attention over the KV pool (src/kv.h) ------------------------
 * A run is `count` consecutive records of one precision level. A record is
 * one token of one layer: K rows of the n_kv_heads heads, then their V
 * rows (R = n_kv_heads, d = head_dim, d % 8 == 0). A row of d elements is:
 *   32 bits: d f32;   16 bits: d binary16;
 *    8 bits: d int8 q, x = s * q;
 *    4 bits: d/2 bytes, byte j: low nibble u[j], high nibble u[j + d/2];
 *            x = s * (u - 8)
 *    3 bits: d/4 bytes of low bit pairs (byte j, bits 2k..2k+1:
 *            u[j + k*d/4] & 3), then d/8 bytes of high bits (byte j, bit k:
 *            u[j + k*d/8] >> 2); x = s * (u - 4)
 *    2 bits: d/4 bytes, byte j, bits 2k..2k+1: u[j + k*d/4]; x = s * (u - 2)
 * The planes are split by quarters / halves of the row so that SIMD code
 * unpacks contiguous elements with one shift and mask per plane.
 * Scales (levels <= 8 bits) are binary16, indexed by the record's slot:
 * scales[slot * 2R + h] for the K row of kv head h, [slot * 2R + R + h]
 * for its V row. Query head h uses kv head h / (n_heads / n_kv_heads).
 *
 * Scores. For K at <= 8 bits the query is used quantized (q8, per head):
 *   isum = sum_j q8[h][j] * (q or u - off)[j]        (exact int32)
 *   score = ((float)isum * (sk * q8_d[h])) * scale   (in this order)
 * so every variant produces the same scores bit for bit. For f16 / f32 K:
 *   score = (sum_j q[h][j] * k[j]) * scale (summation order is the
 *   variant's: compared with a tolerance).
 * Streaming softmax: per query head, m = running max, l = running sum of
 * exp(score - m), acc = running sum of exp(score - m) * v; a larger score
 * rescales l and acc by exp(m_old - m_new). Values at <= 8 bits enter as
 * (p * sv) * (float)(u - off). The order of chunks is the variant's. */
typedef struct gb_attn_state {
  uint32_t n_heads, n_kv_heads, head_dim;
  float scale;            /* multiplies q.k (1 / sqrt(head_dim))          */
  const float *q;         /* (n_heads, head_dim)                          */
  const int8_t *q8;       /* (n_heads, head_dim) q quantized per head     */
  const float *q8_d;      /* (n_heads) q ~= q8_d[h] * q8[h]              */
  const uint16_t *scales; /* (slots, 2 * n_kv_heads) binary16             */
  float *m;               /* (n_heads) running max; -INFINITY at the start */
  float *l;               /* (n_heads) running sum; 0 at the start        */
  float *acc;             /* (n_heads, head_dim); 0 at the start          */
  float *scores;          /* (n_heads, score_stride): record j of a run
                             writes scores[h * score_stride + base + j]  */
  uint32_t score_stride;
} gb_attn_state;

/* Attend to one run: scores of its `count` records (written to st->scores
 * at base..base+count) folded into the streaming softmax and the value sum.
 * kbits / vbits: 2, 3, 4, 8 (quantized), 16 or 32 (then kbits == vbits).
 * slots: (count) slot of each record (its scales). Over-read: none. */
typedef void (*gb_attn_run_fn)(gb_attn_state *st, const uint8_t *records, const uint32_t *slots, uint32_t count,
                               uint32_t kbits, uint32_t vbits, uint32_t base);

/* Finish a pass: out[h] = acc[h] / l[h] (n_heads x head_dim) and the
 * attention mass of every scored position (n of them):
 *   p[h][i] = exp(scores[h][i] - m[h]) / l[h]
 *   mass[i]  = (1/H) sum_h p[h][i]
 *   wmass[i] = (1/H) sum_h head_w[h] * p[h][i]   (head-weighted, not renormalised)
 *   head_mean[h] = (1/n) sum_i p[h][i]
 * The full attention matrix is never stored: the scores of this query are
 * the only per-token state. */
typedef void (*gb_attn_finish_fn)(const gb_attn_state *st, uint32_t n, const float *head_w, float *out, float *mass,
                                  float *wmass, float *head_mean);

/* Dequantize `count` records' rows to f32 (the dequantize-then-attend
 * baseline and requantization): out is (count, 2, n_kv_heads, head_dim). */
typedef void (*gb_kv_dequant_fn)(float *out, const uint8_t *records, const uint32_t *slots, const uint16_t *scales,
                                 uint32_t count, uint32_t n_kv_heads, uint32_t head_dim, uint32_t kbits, uint32_t vbits);
/* C[i][j] = sum_p A[i][p] * B[j][p] for i < m, j < n, i.e. C = A B^T (a
 * block of positions times a panel of weight rows, batched prefill).
 * A: (m, k), row stride lda; B: (n, k), row stride ldb; C: (m, n), row
 * stride ldc; all f32, strides in elements. Each C element's sum runs in an
 * order fixed by k alone (kernels document it), so splitting B's rows gives
 * identical results. Writes exactly C's m x n elements; reads exactly A's and
 * B's. */
typedef void (*gb_gemm_fn)(float *C, size_t ldc, const float *A, size_t lda, const float *B, size_t ldb, size_t m,
                           size_t n, size_t k);

/* The f32 GEMM of OpenBLAS (cblas_sgemm, row-major, B transposed) when the
 * library was built with it (GEARBX_WITH_OPENBLAS), else NULL. Its summation
 * order is OpenBLAS's: it depends on the CPU it runs on, not on how the
 * caller splits B. OpenBLAS allocates its own working buffers (once, at its
 * initialisation or first use). */
gb_gemm_fn gb_gemm_blas(void);
/* Make OpenBLAS run each call on the calling thread only (process-wide
 * openblas_set_num_threads(1)): gearbx splits prefill between its own
 * threads. No-op without OpenBLAS. */
void gb_gemm_blas_single_threaded(void);

/* Instruction sets, one bit each (also the CPU feature bits the dispatcher
 * is given). */
enum {
  GB_ISA_GENERIC = 1u << 0,
  GB_ISA_AVX2 = 1u << 1,    /* AVX2 + FMA + F16C */
  GB_ISA_AVX512 = 1u << 2,  /* AVX-512 F, BW, VL and VNNI (with AVX2 + FMA + F16C) */
  GB_ISA_NEON = 1u << 8,    /* ARMv8-A Advanced SIMD (+fp16 conversions) */
  GB_ISA_DOTPROD = 1u << 9, /* ARMv8.2-A sdot */
  GB_ISA_I8MM = 1u << 10,   /* ARMv8.6-A smmla */
  GB_ISA_SVE = 1u << 11,    /* SVE, any vector length */
  GB_ISA_FP16 = 1u << 12    /* ARMv8.2-A half-precision arithmetic (FEAT_FP16: FMLA .8h) */
};

/* Weight formats, indexes of the tables below: GB_FMT_<ID> for each row of
 * formats.inc. The file formats' ids are also the .gbx file's (gb::WeightFormat,
 * static_asserted there); q4r16, q4kr16 and q6kr16 are q4, q4k and q6k
 * stored in the 16-row layout, ids in memory only. GB_FMT_COUNT: one past
 * the largest id (the number of rows: ids have no gaps). */
#define GB_FORMAT(id, ID, name, weights, bytes, ggml, act, gguf, rows16, file, d_at, m_at) GB_FMT_##ID = id,
enum {
#include "formats.inc"
#undef GB_FORMAT
#define GB_FORMAT(id, ID, name, weights, bytes, ggml, act, gguf, rows16, file, d_at, m_at) +1
  GB_FMT_COUNT = 0
#include "formats.inc"
};
#undef GB_FORMAT

/* Bytes per block of each format, GB_<ID>_BLOCK_BYTES (a row of a GGUF
 * format holds cols / weights-per-block whole blocks: GGUF requires it, the
 * file reader checks it). */
#define GB_FORMAT(id, ID, name, weights, bytes, ggml, act, gguf, rows16, file, d_at, m_at) GB_##ID##_BLOCK_BYTES = bytes,
enum {
#include "formats.inc"
};
#undef GB_FORMAT

/* Priorities of kernels.inc entries: per slot, the available entry with the
 * highest wins. Folders of one architecture rank by specialisation; an entry
 * may deviate (with the reason next to it in kernels.inc). */
enum {
  GB_PRIO_GENERIC = 0,
  GB_PRIO_AVX2 = 10,
  GB_PRIO_AVX512 = 20,
  GB_PRIO_NEON = 10,
  GB_PRIO_DOTPROD = 20,
  GB_PRIO_I8MM = 30,
  GB_PRIO_SVE = 40
};

/* The Gated DeltaNet's update of one value head's state S (d x d, row j:
 * value dimension j over the key dimensions) by key k, value v, decay g
 * and rate beta, then its read-out by the query q:
 *   S <- exp(g) S;  S[j] <- S[j] + k * beta * (v[j] - S[j] . k);  o[j] = S[j] . q
 * row by row (each row's new values depend on that row alone). o == NULL:
 * the update only (a replay; q is not read). The update's bits do not
 * depend on whether o is given. */
typedef void (*gb_delta_rule_fn)(float *S, const float *k, const float *v, const float *q, float g, float beta, uint32_t d,
                                 float *o);

typedef struct gb_kernels {
  const char *name[GB_FMT_COUNT];  /* name of the gemv chosen per format   */
  const char *gemvm_name[GB_FMT_COUNT]; /* and of its gemvm (same folder) */
  uint32_t isa_mask;               /* every ISA a chosen kernel uses       */
  gb_gemv_fn gemv[GB_FMT_COUNT];
  gb_gemvm_fn gemvm[GB_FMT_COUNT]; /* NULL where gemv's folder has none    */
  uint32_t gemvm_isa[GB_FMT_COUNT]; /* ISA bits the chosen gemvm requires
                                      (GB_ISA_GENERIC: the portable one)  */
  gb_rows_to_f32_fn rows_to_f32[GB_FMT_COUNT];
  gb_quantize_act_fn quantize_act;
  gb_attn_run_fn attn_run;         /* fused attention over packed records */
  gb_attn_finish_fn attn_finish;
  gb_kv_dequant_fn kv_dequant;
  const char *attn_name;           /* of attn_run                        */
  gb_delta_rule_fn delta_rule;
  const char *delta_name;          /* of delta_rule                      */
  gb_gemm_fn gemm_f32;             /* the built-in GEMM (batched prefill)  */
  gb_pgemm_fn pgemm[GB_FMT_COUNT]; /* prefill GEMM, NULL where none        */
  const char *pgemm_name[GB_FMT_COUNT];
} gb_kernels;

/* Declarations of every kernel in kernels.inc. */
#define GB_GEMV(fmt, id, isa, req, prio)                                                                  \
  void gb_##fmt##_gemv__##isa(float *y, const uint8_t *W, const float *x, const gb_q8x_block *xq, \
                              size_t row_begin, size_t row_end, size_t cols);
#define GB_GEMVM(fmt, id, isa, req)                                                                    \
  void gb_##fmt##_gemvm__##isa(float *Y, size_t ldy, const uint8_t *W, const float *X, size_t ldx,     \
                               const gb_q8x_block *XQ, size_t ldxq, size_t m, size_t row_begin,        \
                               size_t row_end, size_t cols);
#define GB_ROW(fmt, id, isa, req, prio) \
  void gb_##fmt##_rows_to_f32__##isa(float *out, const uint8_t *W, size_t row_begin, size_t row_end, size_t cols);
#define GB_QUANT_ACT(isa, req, prio) void gb_q8x_quantize__##isa(gb_q8x_block *out, const float *x, size_t n);
#define GB_ATTN(isa, req, prio)                                                                                  \
  void gb_attn_run__##isa(gb_attn_state *st, const uint8_t *records, const uint32_t *slots, uint32_t count, \
                          uint32_t kbits, uint32_t vbits, uint32_t base);
#define GB_ATTN_FINISH(isa, req, prio)                                                                     \
  void gb_attn_finish__##isa(const gb_attn_state *st, uint32_t n, const float *head_w, float *out, float *mass, \
                             float *wmass, float *head_mean);
#define GB_KV_DEQUANT(isa, req, prio)                                                                             \
  void gb_kv_dequant__##isa(float *out, const uint8_t *records, const uint32_t *slots, const uint16_t *scales, \
                            uint32_t count, uint32_t n_kv_heads, uint32_t head_dim, uint32_t kbits, uint32_t vbits);
#define GB_DELTA(isa, req, prio) \
  void gb_delta_rule__##isa(float *S, const float *k, const float *v, const float *q, float g, float beta, uint32_t d, float *o);
#define GB_GEMM(fmt, id, isa, req, prio)                                                                            \
  void gb_##fmt##_gemm__##isa(float *C, size_t ldc, const float *A, size_t lda, const float *B, size_t ldb, \
                              size_t m, size_t n, size_t k);
#define GB_PGEMM(fmt, id, isa, req, prio)                                                              \
  void gb_##fmt##_pgemm__##isa(float *Y, size_t ldy, const uint8_t *W, const float *X, size_t ldx,     \
                               const gb_q8x_block *XQ, size_t ldxq, size_t m, size_t row_begin,        \
                               size_t row_end, size_t cols);
#include "kernels.inc"
#undef GB_GEMV
#undef GB_GEMVM
#undef GB_PGEMM
#undef GB_ROW
#undef GB_QUANT_ACT
#undef GB_ATTN
#undef GB_ATTN_FINISH
#undef GB_KV_DEQUANT
#undef GB_DELTA
#undef GB_GEMM

/* Fill *k with the kernel of highest priority of each slot whose ISA
 * requirement is in `isa_available` (GB_ISA_GENERIC is always assumed; pass GB_ISA_GENERIC
 * alone for the generic table). gemvm[f] is the gemvm of the folder whose
 * gemv was chosen for format f (bit-identity), NULL if that folder has none. */
void gb_kernels_select(gb_kernels *k, uint32_t isa_available);

#ifdef __cplusplus
}
#endif

#endif /* GEARBX_ARCH_KERNELS_H */
