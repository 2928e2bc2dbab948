// forward.cpp — one token through a Llama-family decoder, read top to bottom
// as the model's specification:
//
//   x = embed[token]
//   for each layer l:
//     xb = rmsnorm(x) * attn_norm[l]
//     q = Wq xb, k = Wk xb, v = Wv xb          (GEMV on the active tier)
//     rotate q and k by position (RoPE: adjacent pairs or NeoX halves)
//     cache k, v at pos (in the KV pool, at the token's precision)
//     for each head h (kv head h / (n_heads / n_kv_heads)):
//       att = softmax(q_h . k_t / sqrt(head_dim)) over the cached t
//       xb_h = sum_t att_t v_t
//     x += Wo xb
//     xb = rmsnorm(x) * ffn_norm[l]
//     x += W2 (silu(W1 xb) * (W3 xb))
//   logits = Wcls rmsnorm(x) * out_norm
#include <math.h>
#include <string.h>

#include "format.h"
#include "quant.h"
#include "gearbx_port.h"
#include "session.h"

namespace gb {

void rmsnorm(float *out, const float *x, const TensorRef &w, uint32_t n, float eps) {
  double ss = 0.0;
  for (uint32_t i = 0; i < n; i++) ss += (double)x[i] * x[i];
  const float scale = 1.0f / sqrtf((float)(ss / n) + eps);
  const float *g = reinterpret_cast<const float *>(w.data);  // F32, 64-byte aligned in the file
  for (uint32_t i = 0; i < n; i++) out[i] = g[i] * (x[i] * scale);
}

namespace {

struct GemvTask {
  const gb_kernels *k;
  const TensorRef *w;
  float *y;
  const float *x;
  const gb_q8x_block *xq;
};

// Task t of n: rows of whole kernel row tiles (GB_GEMV_ROW_TILE), so each
// row is computed by one thread exactly as a single-threaded call would:
// results do not depend on the thread count (no cross-thread reductions).
void gemv_task(void *ctx, uint32_t t, uint32_t n) {
  const GemvTask *g = static_cast<const GemvTask *>(ctx);
  size_t r0, r1;
  task_rows(g->w->rows, t, n, &r0, &r1);
  if (r0 < r1) g->k->gemv[g->w->format](g->y, g->w->data, g->x, g->xq, r0, r1, g->w->cols);
}

}  // namespace

uint32_t gemv_tasks(const gb_session *s, uint64_t rows, uint64_t cols) {
  // A task below kMinTaskWeights costs more to hand out than it saves.
  constexpr uint64_t kMinTaskWeights = 16384;
  const uint64_t tiles = (rows + GB_GEMV_ROW_TILE - 1) / GB_GEMV_ROW_TILE;
  uint64_t n = gb_port_pool_threads(s->pool);
  if (n > tiles) n = tiles;
  const uint64_t by_work = rows * cols / kMinTaskWeights;
  if (n > by_work) n = by_work;
  return n ? (uint32_t)n : 1u;
}

namespace {

// y = W x on W's format. Block formats first quantize x into s->xq.
void matmul(gb_session *s, float *y, const float *x, const TensorRef &w) {
  const gb_q8x_block *xq = nullptr;
  if (is_block_format(w.format)) {
    s->k.quantize_act(s->xq, x, w.cols);
    xq = s->xq;
  }
  GemvTask task{&s->k, &w, y, x, xq};
  gb_port_pool_run(s->pool, gemv_tasks(s, w.rows, w.cols), gemv_task, &task);
  s->bytes_read += w.nbytes;
  s->weights_read += (uint64_t)w.rows * w.cols;
}

}  // namespace

void rope(float *vec, uint32_t n_heads, uint32_t head_dim, uint32_t rope_dim, uint32_t type, const float *freq, uint32_t pos) {
  const uint32_t half = rope_dim / 2;
  for (uint32_t i = 0; i < half; i++) {
    const float angle = (float)pos * freq[i];
    const float c = cosf(angle), sn = sinf(angle);
    for (uint32_t h = 0; h < n_heads; h++) {
      float *v = vec + (size_t)h * head_dim;
      // Adjacent: pair (2i, 2i+1). NeoX: pair (i, i + rope_dim/2).
      const uint32_t a = type == GB_ROPE_NEOX ? i : 2 * i;
      const uint32_t b = type == GB_ROPE_NEOX ? i + half : 2 * i + 1;
      const float v0 = v[a], v1 = v[b];
      v[a] = v0 * c - v1 * sn;
      v[b] = v0 * sn + v1 * c;
    }
  }
}

gb_status forward(gb_session *s, int32_t token, bool want_logits) {
  const gb_model *m = s->model;
  const Meta &c = m->meta;
  const uint32_t dim = c.dim, hd = c.head_dim, pos = s->pos;
  const bool attn_only = s->opt.managed == GB_MANAGED_ATTENTION;
  // A place in the KV pool for this token (precision of older tokens may
  // step down, or the least important may be evicted, per the kv policy).
  GB_TRY(kv_begin(&s->kv, s->k, pos, s->log));
  s->bytes_read = 0;
  s->weights_read = 0;

  // Embedding row (any stored format).
  s->k.rows_to_f32[m->embd.format](s->x, m->embd.data, token, (size_t)token + 1, dim);

  for (uint32_t l = 0; l < c.n_layers; l++) {
    const TensorRef *W = s->mats + (size_t)l * kMatsPerLayer;
    const TensorRef *Wb = attn_only ? s->base_mats + (size_t)l * kMatsPerLayer : W;

    rmsnorm(s->xb, s->x, m->attn_norm[l], dim, c.norm_eps);
    matmul(s, s->q, s->xb, W[kMatQ]);
    matmul(s, s->kt, s->xb, W[kMatK]);
    matmul(s, s->vt, s->xb, W[kMatV]);
    rope(s->q, c.n_heads, hd, c.rope_dim, c.rope_type, s->rope_freq, pos);
    rope(s->kt, c.n_kv_heads, hd, c.rope_dim, c.rope_type, s->rope_freq, pos);
    kv_store(&s->kv, l, s->kt, s->vt);
    // For each head h (kv head h / (n_heads / n_kv_heads)):
    //   xb_h = sum_t softmax_t(q_h . k_t / sqrt(head_dim)) v_t
    // over the cached tokens, read in place from the pool's buckets.
    kv_attend(&s->kv, s->k, l, s->q, s->xb);
    matmul(s, s->xb2, s->xb, W[kMatO]);
    for (uint32_t i = 0; i < dim; i++) s->x[i] += s->xb2[i];

    rmsnorm(s->xb, s->x, m->ffn_norm[l], dim, c.norm_eps);
    matmul(s, s->hb, s->xb, Wb[kMat1]);
    matmul(s, s->hb2, s->xb, Wb[kMat3]);
    for (uint32_t i = 0; i < c.hidden_dim; i++) {
      const float g = s->hb[i];
      s->hb[i] = g / (1.0f + expf(-g)) * s->hb2[i];
    }
    matmul(s, s->xb2, s->hb, Wb[kMat2]);
    for (uint32_t i = 0; i < dim; i++) s->x[i] += s->xb2[i];
  }

  kv_end(&s->kv);
  s->pos = pos + 1;
  if (!want_logits) return GB_OK;
  rmsnorm(s->x, s->x, m->out_norm, dim, c.norm_eps);
  matmul(s, s->logits, s->x, *s->classifier);
  return GB_OK;
}

}  // namespace gb
