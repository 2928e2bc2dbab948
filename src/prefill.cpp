// prefill.cpp — a chunk of prompt positions through the model at once.
//
// The same model as forward.cpp, with every GEMV of one position replaced by
// a GEMM over the chunk's m positions:
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
// A GEMM Y = A W^T walks W in panels of pf_panel_rows rows at fixed offsets:
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
#include "gearbx_port.h"
#include "session.h"

namespace gb {
namespace {

struct GemmTask {
  gb_session *s;
  const TensorRef *w;
  float *Y;        // (m, w->rows)
  const float *A;  // (m, w->cols)
  uint32_t m;
};

void gemm_task(void *ctx, uint32_t t, uint32_t n) {
  const GemmTask *g = static_cast<const GemmTask *>(ctx);
  gb_session *s = g->s;
  const TensorRef &w = *g->w;
  const uint32_t P = s->pf_panel_rows;
  const uint32_t panels = (w.rows + P - 1) / P;
  const uint64_t rb = row_bytes(w.format, w.cols);
  float *slot = s->pf_panel + (size_t)t * P * w.cols;
  for (uint32_t p = t; p < panels; p += n) {
    const uint32_t r0 = p * P, nr = w.rows - r0 < P ? w.rows - r0 : P;
    const float *B = slot;
    if (w.format == kFmtF32) {
      B = reinterpret_cast<const float *>(w.data + r0 * rb);  // 64-byte aligned tier, rows of floats
    } else {
      s->k.rows_to_f32[w.format](slot, w.data, r0, (size_t)r0 + nr, w.cols);
    }
    s->pf_gemm(g->Y + r0, w.rows, g->A, w.cols, B, w.cols, g->m, nr, w.cols);
  }
}

// Y (m, w.rows) = X (m, w.cols) W^T on the current tier.
void matmul_batch(gb_session *s, float *Y, const float *X, uint32_t m, const TensorRef &w) {
  const float *A = X;
  if (is_block_format(w.format)) {
    // The decode kernels' view of each activation row: 32-value blocks,
    // one scale, int8 values.
    const uint32_t nb = (w.cols + 31) / 32;
    for (uint32_t i = 0; i < m; i++) {
      s->k.quantize_act(s->xq, X + (size_t)i * w.cols, w.cols);
      float *a = s->pf_xa + (size_t)i * w.cols;
      for (uint32_t b = 0; b < nb; b++) {
        const uint32_t c0 = b * 32, cn = w.cols - c0 < 32 ? w.cols - c0 : 32;
        for (uint32_t j = 0; j < cn; j++) a[c0 + j] = s->xq[b].d * (float)s->xq[b].qs[j];
      }
    }
    A = s->pf_xa;
  }
  // As many tasks as threads, panels and panel slots allow, and none with
  // less work than a GEMV task's minimum (m products per weight).
  const uint32_t panels = (w.rows + s->pf_panel_rows - 1) / s->pf_panel_rows;
  uint32_t n = gemv_tasks(s, w.rows, (uint64_t)w.cols * m);
  if (n > s->pf_slots) n = s->pf_slots;
  if (n > panels) n = panels;
  GemmTask task{s, &w, Y, A, m};
  gb_port_pool_run(s->pool, n, gemm_task, &task);
}

}  // namespace

gb_status forward_rows(gb_session *s, const int32_t *tok, uint32_t m, const BatchBuffers &b, BatchMatmulFn mm) {
  const gb_model *mod = s->model;
  const Meta &c = mod->meta;
  const uint32_t dim = c.dim, hd = c.head_dim, qd = c.q_dim(), kvd = c.kv_dim(), hid = c.hidden_dim, pos = s->pos;
  const bool attn_only = s->opt.managed == GB_MANAGED_ATTENTION;
  float *X = b.x, *XB = b.xb, *XB2 = b.xb2, *HB = b.hb, *HB2 = b.hb2;
  // Places in the KV pool for the m tokens (a single-level policy: they
  // enter as m single tokens would, in position order).
  GB_RETURN_IF(!kv_batchable(&s->kv, m), s->log, GB_ERR_CONTEXT_FULL, "batched forward: no room for %u tokens in the KV pool", m);
  GB_TRY(kv_begin_batch(&s->kv, s->k, pos, m, s->log));
  s->bytes_read = 0;
  s->weights_read = 0;

  for (uint32_t i = 0; i < m; i++)
    s->k.rows_to_f32[mod->embd.format](X + (size_t)i * dim, mod->embd.data, tok[i], (size_t)tok[i] + 1, dim);

  for (uint32_t l = 0; l < c.n_layers; l++) {
    const TensorRef *W = s->mats + (size_t)l * kMatsPerLayer;
    const TensorRef *Wb = attn_only ? s->base_mats + (size_t)l * kMatsPerLayer : W;

    for (uint32_t i = 0; i < m; i++) rmsnorm(XB + (size_t)i * dim, X + (size_t)i * dim, mod->attn_norm[l], dim, c.norm_eps);
    mm(s, b.q, XB, m, W[kMatQ]);
    mm(s, b.k, XB, m, W[kMatK]);
    mm(s, b.v, XB, m, W[kMatV]);
    for (uint32_t i = 0; i < m; i++) {
      float *q = b.q + (size_t)i * qd, *k = b.k + (size_t)i * kvd;
      rope(q, c.n_heads, hd, c.rope_dim, c.rope_type, s->rope_freq, pos + i);
      rope(k, c.n_kv_heads, hd, c.rope_dim, c.rope_type, s->rope_freq, pos + i);
      kv_store_slot(&s->kv, l, s->kv.batch_slot[i], k, b.v + (size_t)i * kvd);
    }
    // Position i attends to t <= pos + i only: the batch's m - 1 - i later
    // tokens, already cached, are hidden from it.
    for (uint32_t i = 0; i < m; i++) kv_attend(&s->kv, s->k, l, b.q + (size_t)i * qd, XB + (size_t)i * qd, m - 1 - i);
    mm(s, XB2, XB, m, W[kMatO]);
    for (size_t i = 0; i < (size_t)m * dim; i++) X[i] += XB2[i];

    for (uint32_t i = 0; i < m; i++) rmsnorm(XB + (size_t)i * dim, X + (size_t)i * dim, mod->ffn_norm[l], dim, c.norm_eps);
    mm(s, HB, XB, m, Wb[kMat1]);
    mm(s, HB2, XB, m, Wb[kMat3]);
    for (size_t i = 0; i < (size_t)m * hid; i++) {
      const float g = HB[i];
      HB[i] = g / (1.0f + expf(-g)) * HB2[i];
    }
    mm(s, XB2, HB, m, Wb[kMat2]);
    for (size_t i = 0; i < (size_t)m * dim; i++) X[i] += XB2[i];
  }

  for (uint32_t i = 0; i < m; i++) kv_end(&s->kv);
  s->pos = pos + m;
  if (!b.logits) return GB_OK;
  for (uint32_t i = 0; i < m; i++) rmsnorm(X + (size_t)i * dim, X + (size_t)i * dim, mod->out_norm, dim, c.norm_eps);
  mm(s, b.logits, X, m, *s->classifier);
  return GB_OK;
}

gb_status forward_batch(gb_session *s, const int32_t *tok, uint32_t m, bool want_logits) {
  const BatchBuffers b{s->pf_x, s->pf_xb, s->pf_xb2, s->pf_hb, s->pf_hb2, s->pf_q, s->pf_k, s->pf_v, want_logits ? s->pf_logits : nullptr};
  return forward_rows(s, tok, m, b, matmul_batch);
}

}  // namespace gb
