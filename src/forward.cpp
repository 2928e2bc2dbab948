// forward.cpp — m tokens through a Llama-family decoder (forward.h), read
// top to bottom as the model's specification; for each position i < m at
// position pos + i:
//
//   x = embed[token]
//   for each layer l:
//     xb = rmsnorm(x) * attn_norm[l]
//     q = Wq xb, k = Wk xb, v = Wv xb          (GEMV on the active tier)
//         (+ bq, bk, bv where the model has biases: qwen2)
//     rotate q and k by position (RoPE: adjacent pairs or NeoX halves)
//     cache k, v at pos + i (in the KV pool, at the token's precision)
//     for each head h (kv head h / (n_heads / n_kv_heads)):
//       att = softmax(q_h . k_t / sqrt(head_dim)) over the cached t <= pos + i
//       xb_h = sum_t att_t v_t
//     x += Wo xb
//     xb = rmsnorm(x) * ffn_norm[l]
//     x += W2 (silu(W1 xb) * (W3 xb))
//   logits = Wcls rmsnorm(x) * out_norm
#include "forward.h"

#include <math.h>
#include <string.h>

#include "format.h"

namespace gb {

void rmsnorm(float *out, const float *x, const TensorRef &w, uint32_t n, float eps) {
  double ss = 0.0;
  for (uint32_t i = 0; i < n; i++) ss += (double)x[i] * x[i];
  const float scale = 1.0f / sqrtf((float)(ss / n) + eps);
  const float *g = reinterpret_cast<const float *>(w.data);  // F32, 64-byte aligned in the file
  for (uint32_t i = 0; i < n; i++) out[i] = g[i] * (x[i] * scale);
}

// y[i][j] += b[j] for m rows of n (a bias of the file, F32).
void add_bias(float *y, uint32_t n, uint32_t m, const TensorRef &b) {
  const float *bv = reinterpret_cast<const float *>(b.data);
  for (uint32_t i = 0; i < m; i++)
    for (uint32_t j = 0; j < n; j++) y[(size_t)i * n + j] += bv[j];
}

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

void run_positions(gb_port_pool *pool, uint32_t m, uint64_t values, PositionsFn fn, void *ctx) {
  // Below kMinValues in all, handing out tasks costs more than it saves.
  constexpr uint64_t kMinValues = 32768;
  uint32_t n = gb_port_pool_threads(pool);
  if (n > m) n = m;
  if (n > kMaxPositionTasks) n = kMaxPositionTasks;
  if (values < kMinValues) n = 1;
  struct Split {
    PositionsFn fn;
    void *ctx;
    uint32_t m;
  } split{fn, ctx, m};
  gb_port_pool_run(
      pool, n,
      [](void *c, uint32_t t, uint32_t nt) {
        const Split *sp = static_cast<const Split *>(c);
        const uint32_t i0 = (uint32_t)((uint64_t)sp->m * t / nt), i1 = (uint32_t)((uint64_t)sp->m * (t + 1) / nt);
        if (i0 < i1) sp->fn(sp->ctx, t, i0, i1);
      },
      &split);
}

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

namespace {

// a[i] = silu(a[i]) * b[i] for i in [i0, i1): the FFN's gate (SwiGLU).
void silu_mul(float *a, const float *b, size_t i0, size_t i1) {
  for (size_t i = i0; i < i1; i++) {
    const float g = a[i];
    a[i] = g / (1.0f + expf(-g)) * b[i];
  }
}

struct QuantTask {
  const gb_kernels *k;
  const float *x;
  gb_q8x_block *xq;
  size_t stride;
  uint32_t cols;
};
}  // namespace

const gb_q8x_block *quantized_activations(const Exec &e, Scratch &sc, const float *X, uint32_t m, uint32_t cols) {
  if (sc.keep_input && sc.xq_of == X && sc.xq_m == m && sc.xq_cols == cols) return sc.xq;
  QuantTask task{e.k, X, sc.xq, sc.xq_stride, cols};
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

// Decode: n matrices with the same input (and the same columns) in one pool
// run (one wait for the threads instead of n), the input quantized (block
// formats) or rounded to f16 (f16 matrices) once for all of them. With glu
// (two matrices of as many rows, the FFN's gate and up), each task also
// gates the rows it computed: Y[0] = silu(Y[0]) * Y[1]. Returns whether it
// did.
bool matmul_gemv_group(const Exec &e, Scratch &sc, PassCost *cost, float *const *Y, const float *x, const TensorRef *const *W,
                       uint32_t n, bool glu = false) {
  GemvGroupTask task;
  task.k = e.k;
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
        e.k->quantize_act(sc.xq, x, w.cols);
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

// Y[j] = X W[j]^T for matrices sharing X: one group run for decode steps,
// else one mm call per matrix. With glu, true when the group run also gated
// Y[0] by Y[1] (matmul_gemv_group).
bool matmul_shared(const Exec &e, Scratch &sc, PassCost *cost, MatmulFn mm, float *const *Y, const float *X, uint32_t m,
                   const TensorRef *const *W, uint32_t n, bool glu = false) {
  bool same_cols = n <= kMaxGroup;
  for (uint32_t j = 1; j < n && same_cols; j++) same_cols = W[j]->cols == W[0]->cols;
  if (mm == matmul_gemv && same_cols) return matmul_gemv_group(e, sc, cost, Y, X, W, n, glu);
  sc.keep_input = true;
  for (uint32_t j = 0; j < n; j++) mm(e, sc, cost, Y[j], X, m, *W[j]);
  sc.keep_input = false;
  sc.xh_of = nullptr;
  sc.xq_of = nullptr;
  return false;
}

}  // namespace

void matmul_gemv(const Exec &e, Scratch &sc, PassCost *cost, float *y, const float *x, uint32_t m, const TensorRef &w) {
  (void)m;  // always 1
  const TensorRef *W[1] = {&w};
  matmul_gemv_group(e, sc, cost, &y, x, W, 1);
}

void scratch_carve(Scratch *sc, Arena &a, const Meta &c, const ScratchShape &sh) {
  const uint32_t qd = c.q_dim(), kvd = c.kv_dim(), xbw = qd > c.dim ? qd : c.dim;
  const uint32_t wide = c.hidden_dim > xbw ? c.hidden_dim : xbw;
  const size_t M = sh.m_max;
  memset(sc, 0, sizeof *sc);
  sc->m_max = sh.m_max;
  sc->x = a.array<float>(M * c.dim);
  sc->xb = a.array<float>(M * xbw);
  sc->xb2 = a.array<float>(M * c.dim);
  sc->hb = a.array<float>(M * c.hidden_dim);
  sc->hb2 = a.array<float>(M * c.hidden_dim);
  sc->q = a.array<float>(M * qd);
  sc->k = a.array<float>(M * kvd);
  sc->v = a.array<float>(M * kvd);
  sc->logit_rows = sh.logit_rows;
  sc->logits = a.array<float>((size_t)sh.logit_rows * c.vocab_size);
  sc->xq_stride = (wide + 31) / 32;
  sc->xq = a.array<gb_q8x_block>(M * sc->xq_stride);  // a whole chunk quantized at once (matmul_gemvm)
  sc->xh = a.array<float>(M * wide);
  sc->xh16 = a.array<uint16_t>(M * wide);
  if (sh.panel_slots) {
    sc->xa = a.array<float>(M * wide);
    sc->panel = a.array<float>((size_t)sh.panel_slots * sh.panel_rows * wide);
  }
  sc->attn = a.array<KvAttnScratch>(sh.attn_sets);
  for (uint32_t i = 0; i < sh.attn_sets; i++) {
    KvAttnScratch ws;
    kv_attn_scratch_carve(&ws, a, c.n_heads, c.head_dim, sh.attn_cap);
    if (sc->attn) sc->attn[i] = ws;
  }
  sc->attn_sets = sc->attn ? sh.attn_sets : 0;
  sc->attn_cap = sh.attn_cap;
}

namespace {

// The pass's per-position steps between the matrices, on the pool
// (run_positions) when a pass has many positions; each position's values
// are computed as on one thread.
struct RowsTask {
  float *x;          // residual streams (m, dim)
  const float *add;  // added to x first, or nullptr
  float *out;        // rmsnorm(x) * norm (may be x itself)
  const TensorRef *norm;
  uint32_t dim;
  float eps;
};

// x += add; out = rmsnorm(x) * norm, for positions [0, m).
void add_and_norm(const Exec &e, float *x, const float *add, float *out, const TensorRef *norm, uint32_t m, uint32_t dim,
                  float eps) {
  RowsTask task{x, add, out, norm, dim, eps};
  run_positions(
      e.pool, m, (uint64_t)m * dim,
      [](void *c, uint32_t, uint32_t i0, uint32_t i1) {
        const RowsTask *k = static_cast<const RowsTask *>(c);
        for (uint32_t i = i0; i < i1; i++) {
          float *xi = k->x + (size_t)i * k->dim;
          if (k->add) {
            const float *ai = k->add + (size_t)i * k->dim;
            for (uint32_t j = 0; j < k->dim; j++) xi[j] += ai[j];
          }
          rmsnorm(k->out + (size_t)i * k->dim, xi, *k->norm, k->dim, k->eps);
        }
      },
      &task);
}

struct AttnTask {
  KvPool *kv;
  const gb_kernels *k;
  const Scratch *sc;
  uint32_t layer, m, qd;
  const float *q;
  float *out;
};

// Each position's attention over the cache (the pass's later positions
// hidden from it). Positions of a pass attend at once on the pool, each
// task with its own scratch set and every n-th position (later positions
// have more tokens to read), when the pool gathers no importance (whose
// updates go position by position) and the work is worth a pool run.
void attend_positions(const Exec &e, Scratch &sc, KvPool *kv, uint32_t layer, uint32_t m, uint32_t pos, uint32_t qd) {
  constexpr uint64_t kMinWork = 1u << 18;  // query x key values
  uint32_t n = gb_port_pool_threads(e.pool);
  if (n > sc.attn_sets + 1) n = sc.attn_sets + 1;
  if (n > m) n = m;
  if (kv->plan.importance || kv->plan.cap > sc.attn_cap || (uint64_t)m * (pos + m) * qd < kMinWork) n = 1;
  if (n <= 1) {
    for (uint32_t i = 0; i < m; i++) kv_attend(kv, *e.k, layer, sc.q + (size_t)i * qd, sc.xb + (size_t)i * qd, m - 1 - i);
    return;
  }
  AttnTask task{kv, e.k, &sc, layer, m, qd, sc.q, sc.xb};
  gb_port_pool_run(
      e.pool, n,
      [](void *c, uint32_t t, uint32_t nt) {
        const AttnTask *a = static_cast<const AttnTask *>(c);
        for (uint32_t i = t; i < a->m; i += nt) {
          const float *q = a->q + (size_t)i * a->qd;
          float *o = a->out + (size_t)i * a->qd;
          if (t == 0)
            kv_attend(a->kv, *a->k, a->layer, q, o, a->m - 1 - i);
          else
            kv_attend_with(a->kv, *a->k, a->layer, q, o, a->m - 1 - i, a->sc->attn[t - 1]);
        }
      },
      &task);
}

struct GluTask {
  float *h;
  const float *h2;
  uint32_t hid;
};

// h = silu(h) * h2, for positions [0, m).
void swiglu(const Exec &e, float *h, const float *h2, uint32_t m, uint32_t hid) {
  GluTask task{h, h2, hid};
  run_positions(
      e.pool, m, (uint64_t)m * hid,
      [](void *c, uint32_t, uint32_t i0, uint32_t i1) {
        const GluTask *k = static_cast<const GluTask *>(c);
        silu_mul(k->h, k->h2, (size_t)i0 * k->hid, (size_t)i1 * k->hid);
      },
      &task);
}

}  // namespace

gb_status forward(const Weights &w, KvPool *kv, Scratch &sc, const Exec &e, const int32_t *tok, uint32_t m, uint32_t pos,
                  MatmulFn mm, bool want_logits, PassCost *cost) {
  const gb_model *mod = w.model;
  const Meta &c = mod->meta;
  const uint32_t dim = c.dim, hd = c.head_dim, qd = c.q_dim(), kvd = c.kv_dim(), hid = c.hidden_dim;
  const bool attn_only = w.base_mats != w.mats;
  float *X = sc.x, *XB = sc.xb, *XB2 = sc.xb2, *HB = sc.hb, *HB2 = sc.hb2;
  *cost = PassCost();
  GB_RETURN_IF(m == 0 || m > sc.m_max || (want_logits && m > sc.logit_rows), e.log, GB_ERR_INTERNAL,
               "forward: %u positions, scratch carved for %u (%u rows of logits)", m, sc.m_max, sc.logit_rows);
  // Places in the KV pool: one token as a decode step enters it (precision
  // of older tokens may step down, or the least important may be evicted,
  // per the policy); m tokens of a single-level policy at once, in order.
  if (m == 1) {
    GB_TRY(kv_begin(kv, *e.k, pos, e.log));
    kv->batch_slot[0] = kv->cur_slot;
  } else {
    GB_RETURN_IF(!kv_batchable(kv, m), e.log, GB_ERR_CONTEXT_FULL, "forward: no room for %u tokens in the KV pool", m);
    GB_TRY(kv_begin_batch(kv, *e.k, pos, m, e.log));
  }

  // Embedding rows (any stored format).
  for (uint32_t i = 0; i < m; i++)
    e.k->rows_to_f32[mod->embd.format](X + (size_t)i * dim, mod->embd.data, tok[i], (size_t)tok[i] + 1, dim);

  for (uint32_t l = 0; l < c.n_layers; l++) {
    const TensorRef *W = w.mats + (size_t)l * kMatsPerLayer;
    const TensorRef *Wb = attn_only ? w.base_mats + (size_t)l * kMatsPerLayer : W;

    // The previous layer's FFN output joins the residual stream here (and,
    // after the last layer, just before the output norm).
    add_and_norm(e, X, l ? XB2 : nullptr, XB, &mod->attn_norm[l], m, dim, c.norm_eps);
    {
      float *const Y[3] = {sc.q, sc.k, sc.v};
      const TensorRef *const Ws[3] = {&W[kMatQ], &W[kMatK], &W[kMatV]};
      matmul_shared(e, sc, cost, mm, Y, XB, m, Ws, 3);
    }
    if (mod->bias[0][l].data) add_bias(sc.q, qd, m, mod->bias[0][l]);
    if (mod->bias[1][l].data) add_bias(sc.k, kvd, m, mod->bias[1][l]);
    if (mod->bias[2][l].data) add_bias(sc.v, kvd, m, mod->bias[2][l]);
    for (uint32_t i = 0; i < m; i++) {
      float *q = sc.q + (size_t)i * qd, *k = sc.k + (size_t)i * kvd;
      rope(q, c.n_heads, hd, c.rope_dim, c.rope_type, e.rope_freq, pos + i);
      rope(k, c.n_kv_heads, hd, c.rope_dim, c.rope_type, e.rope_freq, pos + i);
      kv_store_slot(kv, l, kv->batch_slot[i], k, sc.v + (size_t)i * kvd);
    }
    // For each head h (kv head h / (n_heads / n_kv_heads)):
    //   xb_h = sum_t softmax_t(q_h . k_t / sqrt(head_dim)) v_t
    // over the cached tokens, read in place from the pool's buckets;
    // position i attends to t <= pos + i only (the pass's m - 1 - i later
    // tokens, already cached, are hidden from it).
    attend_positions(e, sc, kv, l, m, pos, qd);
    mm(e, sc, cost, XB2, XB, m, W[kMatO]);
    add_and_norm(e, X, XB2, XB, &mod->ffn_norm[l], m, dim, c.norm_eps);
    {
      float *const Y[2] = {HB, HB2};
      const TensorRef *const Ws[2] = {&Wb[kMat1], &Wb[kMat3]};
      if (!matmul_shared(e, sc, cost, mm, Y, XB, m, Ws, 2, true)) swiglu(e, HB, HB2, m, hid);
    }
    mm(e, sc, cost, XB2, HB, m, Wb[kMat2]);
  }

  for (uint32_t i = 0; i < m; i++) kv_end(kv);
  if (!want_logits) return GB_OK;
  add_and_norm(e, X, XB2, X, &mod->out_norm, m, dim, c.norm_eps);
  mm(e, sc, cost, sc.logits, X, m, *w.classifier);
  return GB_OK;
}

}  // namespace gb
