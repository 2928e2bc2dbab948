// matmul.cpp — every way a pass multiplies a matrix (matmul.h).
#include "matmul.h"

#include <math.h>
#include <string.h>

#include "format.h"
#include "forward.h"

namespace gb {

// ---- the plan ---------------------------------------------------------------

// How prefill runs batched. prefill_blas 0 asks for the built-in GEMM on
// panels; 1 and 2 for OpenBLAS, which deterministic sessions never use; 3
// for no panels: every matrix through the multi-position GEMV kernels, each
// weight read once per group of positions and each position's result bit
// for bit token-by-token decoding's (the built-in GEMM on panels runs at
// about a third of the decode kernels' speed). prefill_blas 1 falls back to
// 3 without OpenBLAS (the usual cross-compiled ARM build) and in
// deterministic sessions (whose kernel table is the generic one).
bool matmul_uses_blas(const SessionConfig &o) {
  return (o.prefill_blas == 1 || o.prefill_blas == 2) && !o.deterministic && gb_gemm_blas();
}
bool matmul_gemvm_only(const SessionConfig &o) {
  return o.prefill_blas == 3 || (o.prefill_blas == 1 && !matmul_uses_blas(o));
}

MatmulPlan matmul_plan(const gb_kernels &k, const SessionConfig &o, uint32_t batch) {
  MatmulPlan p;
  memset(&p, 0, sizeof p);  // padding included: the plan is copied into the session's arena
  p.gemm = matmul_uses_blas(o) ? gb_gemm_blas() : k.gemm_f32;
  p.panel_rows = o.prefill_panel_rows;
  p.panel_slots = batch > 1 && !matmul_gemvm_only(o) ? (o.n_threads > 1 ? o.n_threads : 1) : 0;
  // The kernel table's prefill GEMMs are not bit for bit decoding's: not in
  // deterministic sessions, nor when only the multi-position GEMV is asked
  // for.
  const bool pgemm = o.prefill_blas != 3 && !o.deterministic;
  for (uint32_t f = 0; f < GB_FMT_COUNT; f++) {
    // A SIMD multi-position GEMV reads every weight from memory once per
    // chunk (in L2-sized blocks of rows, each multiplied by every group of
    // up to GB_GEMVM_MAX_M positions), with integer products for the
    // quantized formats: on the AVX-512 host a 128-token prefill ran 1.8x
    // (q8), 3.4x (q4r16) and 1.1x (f16) faster than OpenBLAS on panels
    // expanded to f32. The generic ones are slower than the panels, and f32
    // weights go to the GEMM in place.
    const bool simd_gemvm = (is_block_format(f) || f == kFmtF16) && k.gemvm[f] && k.gemvm_isa[f] != GB_ISA_GENERIC;
    if (pgemm && k.pgemm[f])
      p.prefill[f] = PrefillMethod::kPgemm;
    else if (p.panel_slots && !simd_gemvm)
      p.prefill[f] = PrefillMethod::kPanels;
    else
      p.prefill[f] = PrefillMethod::kGemvm;
  }
  return p;
}

uint32_t gemv_tasks(gb_port_pool *pool, uint64_t rows, uint64_t cols) {
  // A task below kMinTaskWeights costs more to hand out than it saves.
  constexpr uint64_t kMinTaskWeights = 16384;
  const uint64_t tiles = (rows + GB_GEMV_ROW_TILE - 1) / GB_GEMV_ROW_TILE;
  uint64_t n = gb_port_pool_threads(pool);
  if (n > tiles) n = tiles;
  const uint64_t by_work = rows * cols / kMinTaskWeights;
  if (n > by_work) n = by_work;
  return n ? (uint32_t)n : 1u;
}

// ---- activations ------------------------------------------------------------

namespace {

// x[0..n) rounded as f16_activations says, into xr and (binary16) xb;
// true when some value has no binary16 form.
bool f16_round(const float *__restrict x, float *__restrict xr, uint16_t *__restrict xb, size_t n) {
  // Without branches, so that the compiler vectorizes it (a 64-position
  // prefill chunk converts up to 360 K values per matrix): every case
  // computed, one chosen by masks (selects written as ?: left GCC 12 a
  // branch and a scalar loop). Normal f16 range: the f32 mantissa rounded
  // to 10 bits in place (a carry into the exponent is the correct result).
  // Below it, adding 0.75 (whose f32 neighbours are 2^-24 apart, the f16
  // subnormal step) rounds |f| to the nearest step, ties to even, as f16.h
  // does. Beyond 65504 (and inf, NaN): unchanged.
  uint32_t big = 0;
  for (size_t i = 0; i < n; i++) {
    uint32_t b;
    memcpy(&b, x + i, 4);
    const uint32_t a = b & 0x7fffffffu, s = b & 0x80000000u;
    const uint32_t sub = 0u - (uint32_t)(a < 0x38800000u), over = 0u - (uint32_t)(a > 0x477fe000u);
    // Normal range: the rounded f32 and its binary16 bits (exponent
    // rebased from 127 to 15, the top 10 mantissa bits).
    const uint32_t rn = (b + 0xfffu + ((b >> 13) & 1u)) & ~0x1fffu;
    const uint32_t hn = (s >> 16) | (((rn & 0x7fffffffu) >> 13) - (112u << 10));
    // Subnormals and zero: t = 0.75 + steps * 2^-24, so t's bits minus
    // 0.75's are the steps, the binary16 mantissa.
    float af;
    memcpy(&af, &a, 4);
    const float t = af + 0.75f, ya = t - 0.75f;
    uint32_t tb, ys;
    memcpy(&tb, &t, 4);
    memcpy(&ys, &ya, 4);
    const uint32_t hs = (s >> 16) | (tb - 0x3f400000u);
    const uint32_t r = (over & b) | (~over & ((sub & (s | ys)) | (~sub & rn)));
    memcpy(xr + i, &r, 4);
    xb[i] = (uint16_t)((sub & hs) | (~sub & hn));
    big |= over;
  }
  return big != 0;
}

struct RoundTask {
  const float *x;
  float *xr;
  uint16_t *xb;
  uint32_t cols;
  bool big[kMaxPositionTasks];
};

struct QuantTask {
  const gb_kernels *k;
  const float *x;
  gb_q8x_block *xq;
  size_t stride;
  uint32_t cols;
};

}  // namespace

const float *f16_activations(Scratch &sc, const float *X, uint32_t m, uint32_t cols, const uint16_t **xh16,
                             gb_port_pool *pool) {
  // The matrices of matmul_shared read one input: the first one's rounding
  // serves the rest.
  if (!(sc.keep_input && sc.xh_of == X && sc.xh_m == m && sc.xh_cols == cols)) {
    RoundTask task{X, sc.xh, sc.xh16, cols, {}};
    run_positions(
        pool, m, (uint64_t)m * cols,
        [](void *c, uint32_t t, uint32_t i0, uint32_t i1) {
          RoundTask *k = static_cast<RoundTask *>(c);
          const size_t o = (size_t)i0 * k->cols;
          k->big[t] = f16_round(k->x + o, k->xr + o, k->xb + o, (size_t)(i1 - i0) * k->cols);
        },
        &task);
    bool big = false;
    for (bool b : task.big) big |= b;
    sc.xh_big = big;
    sc.xh_of = sc.keep_input ? X : nullptr;
    sc.xh_m = m;
    sc.xh_cols = cols;
  }
  if (xh16) *xh16 = sc.xh_big ? nullptr : sc.xh16;
  return sc.xh;
}

const gb_q8x_block *quantized_activations(const Exec &e, Scratch &sc, const float *X, uint32_t m, uint32_t cols) {
  if (sc.keep_input && sc.xq_of == X && sc.xq_m == m && sc.xq_cols == cols) return sc.xq;
  QuantTask task{&e.k, X, sc.xq, sc.xq_stride, cols};
  run_positions(
      e.pool, m, (uint64_t)m * cols,
      [](void *c, uint32_t, uint32_t i0, uint32_t i1) {
        const QuantTask *k = static_cast<const QuantTask *>(c);
        for (uint32_t i = i0; i < i1; i++) k->k->quantize_act(k->xq + i * k->stride, k->x + (size_t)i * k->cols, k->cols);
      },
      &task);
  sc.xq_of = sc.keep_input ? X : nullptr;
  sc.xq_m = m;
  sc.xq_cols = cols;
  return sc.xq;
}

// ---- one position: the GEMV ---------------------------------------------------

namespace {

// Up to three matrices that read the same activations, as one pool run.
constexpr uint32_t kMaxGroup = 3;
struct GemvGroupTask {
  const gb_kernels *k;
  uint32_t n;
  const TensorRef *w[kMaxGroup];
  float *y[kMaxGroup];
  const float *x[kMaxGroup];
  uint32_t tasks[kMaxGroup];
  const gb_q8x_block *xq;
  bool glu;  // then y[0] = silu(y[0]) * y[1], each task over its rows
};

// Task t: its rows of every matrix j, in whole kernel row tiles
// (task_rows of tasks[j] tasks; the tasks past tasks[j] have none of it), so
// each row is computed by one thread exactly as a single-threaded call
// would: results do not depend on the thread count (no cross-thread
// reductions).
void gemv_group_task(void *ctx, uint32_t t, uint32_t) {
  const GemvGroupTask *g = static_cast<const GemvGroupTask *>(ctx);
  for (uint32_t j = 0; j < g->n; j++) {
    if (t >= g->tasks[j]) continue;
    const TensorRef &w = *g->w[j];
    size_t r0, r1;
    task_rows(w.rows, t, g->tasks[j], &r0, &r1);
    if (r0 < r1) g->k->gemv[w.format](g->y[j], w.data, g->x[j], is_block_format(w.format) ? g->xq : nullptr, r0, r1, w.cols);
  }
  if (g->glu && t < g->tasks[0]) {
    size_t r0, r1;
    task_rows(g->w[0]->rows, t, g->tasks[0], &r0, &r1);
    silu_mul(g->y[0], g->y[1], r0, r1);
  }
}

// n matrices with the same input (and the same columns) in one pool run,
// the input quantized (block formats) or rounded to f16 (f16 matrices) once
// for all of them; glu as matmul_shared says. Returns whether it gated.
bool gemv_group(const Exec &e, Scratch &sc, PassCost *cost, float *const *Y, const float *x, const TensorRef *const *W,
                uint32_t n, bool glu) {
  GemvGroupTask task;
  task.k = &e.k;
  task.n = n;
  task.xq = nullptr;
  const float *xh = nullptr;
  uint32_t most = 1;
  for (uint32_t j = 0; j < n; j++) {
    const TensorRef &w = *W[j];
    task.w[j] = &w;
    task.y[j] = Y[j];
    task.x[j] = x;
    if (is_block_format(w.format)) {
      if (!task.xq) {
        e.k.quantize_act(sc.xq, x, w.cols);
        task.xq = sc.xq;
      }
    } else if (w.format == kFmtF16) {
      if (!xh) xh = f16_activations(sc, x, 1, w.cols);
      task.x[j] = xh;
    }
    task.tasks[j] = gemv_tasks(e.pool, w.rows, w.cols);
    if (task.tasks[j] > most) most = task.tasks[j];
    cost->bytes += w.nbytes;
    cost->weights += (uint64_t)w.rows * w.cols;
  }
  task.glu = glu && n == 2 && W[0]->rows == W[1]->rows && task.tasks[0] == task.tasks[1];
  gb_port_pool_run(e.pool, most, gemv_group_task, &task);
  return task.glu;
}

// ---- several positions: the multi-position GEMV and the prefill GEMMs --------

struct GemvmTask {
  gb_gemvm_fn fn;            // the gemvm or the prefill GEMM of w's format
  const TensorRef *w;
  float *Y;                  // (m, w.rows)
  const float *X;            // (m, w.cols)
  const uint8_t *XQ;         // (m, xq_stride): q8 blocks, or binary16 activations (f16), or nullptr
  size_t xq_stride;          // in the kernel's units (blocks, or binary16 values)
  size_t xq_bytes;           // bytes per position of XQ
  uint32_t m;
  uint32_t group;            // positions per kernel call, at most GB_GEMVM_MAX_M
  size_t block_rows;         // rows per kernel call, whole row tiles
};

// Weight bytes per kernel call when m exceeds one kernel call's positions:
// the block stays in the core's L2 (1 MiB on the Zen 4 host, 512 KiB on
// Cortex-A76) while every group of positions passes over it,
// so the matrix is read from memory once per pass instead of once per group.
// The 4x3 f16 tile on a 2048 x 5632 matrix ran at 40 GMAC/s with 15
// positions per weight read and 49-52 with 48-120.
constexpr uint64_t kGemvmBlockBytes = 192 * 1024;

// Rows in whole kernel tiles per task, as the one-position GEMV splits them;
// within them, blocks of block_rows rows, each multiplied by every group of
// positions before the next block.
void gemvm_task(void *ctx, uint32_t t, uint32_t n) {
  const GemvmTask *g = static_cast<const GemvmTask *>(ctx);
  const TensorRef &w = *g->w;
  const size_t rows = w.rows;
  size_t r0, r1;
  task_rows(rows, t, n, &r0, &r1);
  for (size_t b = r0; b < r1; b += g->block_rows) {
    const size_t be = r1 - b < g->block_rows ? r1 : b + g->block_rows;
    for (uint32_t i = 0; i < g->m; i += g->group) {
      const uint32_t mi = g->m - i < g->group ? g->m - i : g->group;
      const gb_q8x_block *xq = g->XQ ? reinterpret_cast<const gb_q8x_block *>(g->XQ + i * g->xq_bytes) : nullptr;
      g->fn(g->Y + (size_t)i * rows, rows, w.data, g->X + (size_t)i * w.cols, w.cols, xq, g->xq_stride, mi, b, be, w.cols);
    }
  }
}

// Y = X W^T through the gemvm (bit for bit the GEMV per position) or, with
// pgemm, the table's prefill GEMM: rows split between the pool's tasks, each
// in L2-sized blocks that every group of positions multiplies in turn.
void multi(const Exec &e, Scratch &sc, PassCost *cost, float *Y, const float *X, uint32_t m, const TensorRef &w, bool pgemm) {
  size_t stride = sc.xq_stride, stride_bytes = stride * sizeof(gb_q8x_block);
  const uint8_t *XQ = nullptr;
  // Positions per kernel call: GB_GEMVM_MAX_M, or for f16 a multiple of
  // the AVX-512 kernel's 3-position tile (the 1.1B model's matrices with
  // 128 positions: 4-6 % faster in groups of 15 than of 16, whose 16th
  // position ran through a 1-position tile).
  uint32_t group = GB_GEMVM_MAX_M;
  if (is_block_format(w.format)) {  // each position's activations quantized as the GEMV does
    XQ = reinterpret_cast<const uint8_t *>(quantized_activations(e, sc, X, m, w.cols));
  } else if (w.format == kFmtF16) {
    // The binary16 copy goes where the block formats' quantized
    // activations do (kernels.h, gb_gemvm_fn).
    const uint16_t *xh16 = nullptr;
    X = f16_activations(sc, X, m, w.cols, &xh16, e.pool);
    XQ = reinterpret_cast<const uint8_t *>(xh16);
    stride = w.cols;
    stride_bytes = stride * sizeof(uint16_t);
    if (!pgemm) group = GB_GEMVM_MAX_M / 3 * 3;
  }
  size_t block_rows = w.rows;  // one group of positions: one call per task
  if (m > group) {
    const uint64_t tile_bytes = row_bytes(w.format, w.cols) * GB_GEMV_ROW_TILE;
    const uint64_t tiles = tile_bytes ? kGemvmBlockBytes / tile_bytes : 1;
    block_rows = (size_t)(tiles > 1 ? tiles : 1) * GB_GEMV_ROW_TILE;
  }
  GemvmTask task{pgemm ? e.k.pgemm[w.format] : e.k.gemvm[w.format], &w, Y, X, XQ, stride, stride_bytes, m, group, block_rows};
  gb_port_pool_run(e.pool, gemv_tasks(e.pool, w.rows, (uint64_t)w.cols * m), gemvm_task, &task);
  cost->bytes += w.nbytes;
  cost->weights += (uint64_t)w.rows * w.cols;
}

// ---- prefill panels -----------------------------------------------------------
//
// A GEMM Y = A W^T walks W in panels of panel_rows rows at fixed offsets:
// a panel is expanded to f32 into the task's slot of the arena (f32 tiers are
// used in place) and multiplied by the plan's GEMM (OpenBLAS or built-in).
// Task t of n takes panels t, t + n, ...; every output element comes from one
// GEMM call whose shape depends only on the panel, so the thread count never
// changes a result. For block formats the activations are first quantized
// exactly as the decode kernels quantize them (and expanded back), so the
// chunk sees the products token-by-token decoding computes.

struct GemmTask {
  const Exec *e;
  Scratch *sc;
  const TensorRef *w;
  float *Y;        // (m, w->rows)
  const float *A;  // (m, w->cols)
  uint32_t m;
};

void gemm_task(void *ctx, uint32_t t, uint32_t n) {
  const GemmTask *g = static_cast<const GemmTask *>(ctx);
  const Exec &e = *g->e;
  const TensorRef &w = *g->w;
  const uint32_t P = e.mm.panel_rows;
  const uint32_t panels = (w.rows + P - 1) / P;
  const uint64_t rb = row_bytes(w.format, w.cols);
  float *slot = g->sc->panel + (size_t)t * P * w.cols;
  for (uint32_t p = t; p < panels; p += n) {
    const uint32_t r0 = p * P, nr = w.rows - r0 < P ? w.rows - r0 : P;
    const float *B = slot;
    if (w.format == kFmtF32) {
      B = reinterpret_cast<const float *>(w.data + r0 * rb);  // 64-byte aligned tier, rows of floats
    } else {
      e.k.rows_to_f32[w.format](slot, w.data, r0, (size_t)r0 + nr, w.cols);
    }
    e.mm.gemm(g->Y + r0, w.rows, g->A, w.cols, B, w.cols, g->m, nr, w.cols);
  }
}

void panels(const Exec &e, Scratch &sc, float *Y, const float *X, uint32_t m, const TensorRef &w) {
  const float *A = X;
  if (is_block_format(w.format)) {
    // The decode kernels' view of each activation row: 32-value blocks,
    // one scale, int8 values.
    const uint32_t nb = (w.cols + 31) / 32;
    for (uint32_t i = 0; i < m; i++) {
      e.k.quantize_act(sc.xq, X + (size_t)i * w.cols, w.cols);
      float *a = sc.xa + (size_t)i * w.cols;
      for (uint32_t b = 0; b < nb; b++) {
        const uint32_t c0 = b * 32, cn = w.cols - c0 < 32 ? w.cols - c0 : 32;
        for (uint32_t j = 0; j < cn; j++) a[c0 + j] = sc.xq[b].d * (float)sc.xq[b].qs[j];
      }
    }
    A = sc.xa;
  } else if (w.format == kFmtF16) {
    A = f16_activations(sc, X, m, w.cols, nullptr, e.pool);
  }
  // As many tasks as threads, panels and panel slots allow, and none with
  // less work than a GEMV task's minimum (m products per weight).
  const uint32_t np = (w.rows + e.mm.panel_rows - 1) / e.mm.panel_rows;
  uint32_t n = gemv_tasks(e.pool, w.rows, (uint64_t)w.cols * m);
  if (n > e.mm.panel_slots) n = e.mm.panel_slots;
  if (n > np) n = np;
  GemmTask task{&e, &sc, &w, Y, A, m};
  gb_port_pool_run(e.pool, n, gemm_task, &task);
}

}  // namespace

// ---- the entry points -----------------------------------------------------------

void matmul(const Exec &e, Scratch &sc, PassKind kind, PassCost *cost, float *Y, const float *X, uint32_t m,
            const TensorRef &w) {
  if (m == 1) {
    const TensorRef *W[1] = {&w};
    gemv_group(e, sc, cost, &Y, X, W, 1, false);
    return;
  }
  if (kind == PassKind::kExact) {
    multi(e, sc, cost, Y, X, m, w, false);
    return;
  }
  switch (e.mm.prefill[w.format]) {
    case PrefillMethod::kPgemm: multi(e, sc, cost, Y, X, m, w, true); return;
    case PrefillMethod::kPanels: panels(e, sc, Y, X, m, w); return;
    case PrefillMethod::kGemvm: multi(e, sc, cost, Y, X, m, w, false); return;
  }
}

bool matmul_shared(const Exec &e, Scratch &sc, PassKind kind, PassCost *cost, float *const *Y, const float *X, uint32_t m,
                   const TensorRef *const *W, uint32_t n, bool glu) {
  bool same_cols = n <= kMaxGroup;
  for (uint32_t j = 1; j < n && same_cols; j++) same_cols = W[j]->cols == W[0]->cols;
  if (m == 1 && same_cols) return gemv_group(e, sc, cost, Y, X, W, n, glu);
  sc.keep_input = true;
  for (uint32_t j = 0; j < n; j++) matmul(e, sc, kind, cost, Y[j], X, m, *W[j]);
  sc.keep_input = false;
  sc.xh_of = nullptr;
  sc.xq_of = nullptr;
  return false;
}

}  // namespace gb
