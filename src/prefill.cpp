// prefill.cpp — the matrix products of a batched prefill pass: forward()
// (forward.cpp) with m = the chunk's positions and matmul_panels, so every
// GEMV of one position becomes a GEMM over the chunk:
//
//   X[i] = embed[token_i]                                    i < m
//   for each layer l:
//     XB[i] = rmsnorm(X[i]) * attn_norm[l]
//     Q = XB Wq^T, K = XB Wk^T, V = XB Wv^T                  (m, rows) GEMMs
//     rotate Q[i], K[i] by position pos + i; cache K[i], V[i] at pos + i
//     XB[i] = attention of Q[i] over the cache t <= pos + i  (causal)
//     X += XB Wo^T
//     XB[i] = rmsnorm(X[i]) * ffn_norm[l]
//     X += (silu(XB W1^T) * (XB W3^T)) W2^T
//   logits[i] = rmsnorm(X[i]) * out_norm Wcls^T             (calibration only)
//
// A GEMM Y = A W^T walks W in panels of panel_rows rows at fixed offsets:
// a panel is expanded to f32 into the task's slot of the arena (f32 tiers are
// used in place) and multiplied by the session's GEMM (OpenBLAS or built-in).
// Task t of n takes panels t, t + n, ...; every output element comes from one
// GEMM call whose shape depends only on the panel, so the thread count never
// changes a result. For q8/q4 matrices the activations are first quantized
// exactly as the decode kernels quantize them (and expanded back), so the
// chunk sees the products token-by-token decoding computes.
#include <math.h>
#include <string.h>

#include "format.h"
#include "forward.h"
#include "gearbx_port.h"

namespace gb {
namespace {

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
  const uint32_t P = e.panel_rows;
  const uint32_t panels = (w.rows + P - 1) / P;
  const uint64_t rb = row_bytes(w.format, w.cols);
  float *slot = g->sc->panel + (size_t)t * P * w.cols;
  for (uint32_t p = t; p < panels; p += n) {
    const uint32_t r0 = p * P, nr = w.rows - r0 < P ? w.rows - r0 : P;
    const float *B = slot;
    if (w.format == kFmtF32) {
      B = reinterpret_cast<const float *>(w.data + r0 * rb);  // 64-byte aligned tier, rows of floats
    } else {
      e.k->rows_to_f32[w.format](slot, w.data, r0, (size_t)r0 + nr, w.cols);
    }
    e.gemm(g->Y + r0, w.rows, g->A, w.cols, B, w.cols, g->m, nr, w.cols);
  }
}

}  // namespace

void matmul_panels(const Exec &e, Scratch &sc, PassCost *cost, float *Y, const float *X, uint32_t m, const TensorRef &w) {
  (void)cost;  // prefill is not a decode step: its reads are not reported
  const float *A = X;
  if (is_block_format(w.format)) {
    // The decode kernels' view of each activation row: 32-value blocks,
    // one scale, int8 values.
    const uint32_t nb = (w.cols + 31) / 32;
    for (uint32_t i = 0; i < m; i++) {
      e.k->quantize_act(sc.xq, X + (size_t)i * w.cols, w.cols);
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
  const uint32_t panels = (w.rows + e.panel_rows - 1) / e.panel_rows;
  uint32_t n = gemv_tasks(e.pool, w.rows, (uint64_t)w.cols * m);
  if (n > e.panel_slots) n = e.panel_slots;
  if (n > panels) n = panels;
  GemmTask task{&e, &sc, &w, Y, A, m};
  gb_port_pool_run(e.pool, n, gemm_task, &task);
}

// The multi-position kernels (matmul_gemvm): every weight read from memory
// once per chunk (in L2-sized blocks of rows, each multiplied by every group
// of up to GB_GEMVM_MAX_M positions), integer products for the
// quantized formats, and per position bit for bit the decode GEMV. Used for
// the quantized formats and f16 where this CPU has a SIMD gemvm: on the
// AVX-512 host a 128-token prefill ran 1.8x (q8), 3.4x (q4r16) and 1.1x (f16)
// faster than OpenBLAS on panels expanded to f32 (docs/RESULTS.md, "Decode
// and prefill against llama.cpp"). The generic gemvm kernels are slower than
// the panels, and f32 weights go to the GEMM in place.
bool prefill_by_gemvm(const Exec &e, uint32_t format) {
  return (is_block_format(format) || format == kFmtF16) && e.k->gemvm_name[format] &&
         !strstr(e.k->gemvm_name[format], "__generic");
}

void matmul_prefill(const Exec &e, Scratch &sc, PassCost *cost, float *Y, const float *X, uint32_t m, const TensorRef &w) {
  if (e.pgemm && e.k->pgemm[w.format]) {
    matmul_pgemm(e, sc, cost, Y, X, m, w);
    return;
  }
  const bool panels = e.panel_slots > 0 && sc.panel;
  if (panels && !prefill_by_gemvm(e, w.format)) {
    matmul_panels(e, sc, cost, Y, X, m, w);
    return;
  }
  // Without panels (prefill_blas 3, or 1 without OpenBLAS or in a
  // deterministic session) every format comes here, through the table's
  // gemvm, SIMD or generic: the whole chunk in one pass over the weights.
  matmul_gemvm(e, sc, cost, Y, X, m, w);
}

}  // namespace gb
