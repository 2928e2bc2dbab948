// forward.cpp — m tokens through a Llama-family decoder (forward.h), read
// top to bottom as the model's specification; for each position i < m at
// position pos + i:
//
//   x = embed[token] * embed_scale                (gemma3, gemma4: sqrt(dim); else 1)
//   gemma4: each layer's per-layer inputs pl[l] (ple_dim values each) =
//         (rmsnorm(P x / sqrt(dim)) * proj_norm + E_ple[token][l] * sqrt(ple_dim)) / sqrt(2)
//   for each layer l (gemma4: each with its own head size, KV heads and
//   FFN width):
//     xb = rmsnorm(x) * attn_norm[l]
//     a short-convolution layer (lfm2) mixes positions by its gated
//         convolution instead of attention (short_conv: B, C, X = W_in xb;
//         xb2 = W_out (C * sum over the last conv_kernel positions of
//         taps * B * X)), then joins the FFN below; every other layer:
//     q = Wq xb, k = Wk xb, v = Wv xb          (GEMV on the active tier;
//         gemma4: a layer sharing an earlier layer's cache computes q only,
//         and v is rmsnorm'd per head without a weight;
//         phi3's Wq, Wk, Wv are row ranges of one fused matrix, as are W1, W3)
//         (+ bq, bk, bv where the model has biases: qwen2)
//     each head of q and k = rmsnorm(head) * q_norm[l] / k_norm[l], where
//         the model has per-head norms (qwen3, gemma3)
//     rotate q and k by position (RoPE: adjacent pairs or NeoX halves,
//         over the first rope_dim dimensions of each head; phi3: 48 of 64,
//         the pair frequencies divided by the model's factors, the rotated
//         dimensions times its attention factor), except in the model's
//         NoPE layers (smollm3: every fourth); sliding-window layers
//         (gemma3, gemma4) rotate with their own base and no factors
//     cache k, v at pos + i (in the KV pool, at the token's precision;
//         gemma4's sharing layers cache nothing and read their source's)
//     for each head h (kv head h / (n_heads / n_kv_heads)):
//       att = softmax(q_h . k_t / sqrt(head_dim)) over the cached t <= pos + i
//             (gemma4: q_h . k_t times the model's scale, 1)
//             (a sliding-window layer: t > pos + i - window only)
//       xb_h = sum_t att_t v_t
//     x += Wo xb                (gemma3: rmsnorm(Wo xb) * post_attn_norm[l])
//     xb = rmsnorm(x) * ffn_norm[l]
//     x += W2 (silu(W1 xb) * (W3 xb))
//         (gemma3: gelu in place of silu, and the sum rmsnorm'd by
//         post_ffn_norm[l] before it joins x)
//     gemma4: x += rmsnorm(W_proj (gelu(W_gate x) * pl[l])) * post_norm[l],
//         then x *= the layer's output scale where it has one
//   logits = Wcls rmsnorm(x) * out_norm
//         (then c * tanh(logits / c) where the model caps them)
#include "forward.h"

#include <math.h>
#include <string.h>

#include "f16.h"
#include "format.h"

namespace gb {

void rmsnorm(float *out, const float *x, const TensorRef &w, uint32_t n, float eps) {
  double ss = 0.0;
  for (uint32_t i = 0; i < n; i++) ss += (double)x[i] * x[i];
  const float scale = 1.0f / sqrtf((float)(ss / n) + eps);
  const float *g = reinterpret_cast<const float *>(w.data);  // F32, 64-byte aligned in the file
  for (uint32_t i = 0; i < n; i++) out[i] = g[i] * (x[i] * scale);
}

// x = x / rms(x), in place (an RMSNorm without a weight: Gemma 4's values).
void rms_plain(float *x, uint32_t n, float eps) {
  double ss = 0.0;
  for (uint32_t i = 0; i < n; i++) ss += (double)x[i] * x[i];
  const float scale = 1.0f / sqrtf((float)(ss / n) + eps);
  for (uint32_t i = 0; i < n; i++) x[i] *= scale;
}

// y[i][j] += b[j] for m rows of n (a bias of the file, F32).
void add_bias(float *y, uint32_t n, uint32_t m, const TensorRef &b) {
  const float *bv = reinterpret_cast<const float *>(b.data);
  for (uint32_t i = 0; i < m; i++)
    for (uint32_t j = 0; j < n; j++) y[(size_t)i * n + j] += bv[j];
}

void rope(float *vec, uint32_t n_heads, uint32_t head_dim, uint32_t rope_dim, uint32_t type, const float *freq, float scale,
          uint32_t pos) {
  const uint32_t half = rope_dim / 2;
  for (uint32_t i = 0; i < half; i++) {
    const float angle = (float)pos * freq[i];
    const float c = cosf(angle) * scale, sn = sinf(angle) * scale;
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

void scratch_carve(Scratch *sc, Arena &a, const Meta &c, const ScratchShape &sh) {
  const uint32_t qd = c.q_dim(), kvd = c.max_kv_dim(), xbw = qd > c.dim ? qd : c.dim;
  uint32_t wide = c.hidden_dim > xbw ? c.hidden_dim : xbw;
  bool delta = false;
  for (uint32_t l = 0; l < c.n_layers; l++) delta = delta || c.delta_layer(l);
  if (delta && c.gdn_v_dim() > wide) wide = c.gdn_v_dim();  // W_out's input
  if (c.ple_dim > wide) wide = c.ple_dim;                     // a per-layer input block's projection's input
  const size_t M = sh.m_max;
  memset(sc, 0, sizeof *sc);
  sc->m_max = sh.m_max;
  sc->x = a.array<float>(M * c.dim);
  sc->xb = a.array<float>(M * xbw);
  sc->xb2 = a.array<float>(M * c.dim);
  sc->hb = a.array<float>(M * c.hidden_dim);
  sc->hb2 = a.array<float>(M * c.hidden_dim);
  sc->q = a.array<float>(M * qd * (c.attn_gate ? 2 : 1));  // gated attention: queries and gates, then compacted
  sc->gate = c.attn_gate ? a.array<float>(M * qd) : nullptr;
  const size_t nple = (size_t)c.n_layers * c.ple_dim;
  sc->ple = nple ? a.array<float>(M * nple) : nullptr;
  sc->ple_p = nple ? a.array<float>(M * nple) : nullptr;
  sc->k = a.array<float>(M * kvd);
  sc->v = a.array<float>(M * kvd);
  const uint32_t convw = 3 * c.dim > c.conv_channels ? 3 * c.dim : c.conv_channels;
  sc->conv = c.conv_kernel ? a.array<float>(M * convw) : nullptr;
  sc->gdn_z = delta ? a.array<float>(M * c.gdn_v_dim()) : nullptr;
  sc->gdn_o = delta ? a.array<float>(M * c.gdn_v_dim()) : nullptr;
  sc->gdn_u = delta ? a.array<float>(M * c.conv_channels) : nullptr;
  sc->gdn_ab = delta ? a.array<float>(M * 4 * c.gdn_v_heads) : nullptr;
  sc->logit_rows = sh.logit_rows;
  sc->logits = a.array<float>((size_t)sh.logit_rows * c.vocab_size);
  sc->xq_stride = (wide + 31) / 32;
  sc->xq = a.array<gb_q8x_block>(M * sc->xq_stride);  // a whole chunk quantized at once (the multi-position GEMV)
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
  if (kv->plan.importance || kv_attn_cap(kv->plan) > sc.attn_cap || (uint64_t)m * (pos + m) * qd < kMinWork) n = 1;
  if (n <= 1) {
    for (uint32_t i = 0; i < m; i++) kv_attend(kv, e.k, layer, sc.q + (size_t)i * qd, sc.xb + (size_t)i * qd, m - 1 - i);
    return;
  }
  AttnTask task{kv, &e.k, &sc, layer, m, qd, sc.q, sc.xb};
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
  const uint16_t *gelu;  // the model's GELU table (geglu)
};

// The tanh approximation of GELU of x rounded to binary16, the result
// rounded to binary16 again (the model's table over binary16 inputs): how
// the reference implementation evaluates GeGLU on CPUs, so that logits agree
// with its to the last digits; beyond +-10 the function is 0 or x.
inline float gelu_b16(const uint16_t *table, float x) {
  if (x <= -10.0f) return 0.0f;
  if (x >= 10.0f) return x;
  return f16_to_f32(table[f32_to_f16(x)]);
}

// h = gelu(h) * h2, for positions [0, m).
void geglu(const Exec &e, const uint16_t *table, float *h, const float *h2, uint32_t m, uint32_t hid) {
  GluTask task{h, h2, hid, table};
  run_positions(
      e.pool, m, (uint64_t)m * hid,
      [](void *c, uint32_t, uint32_t i0, uint32_t i1) {
        const GluTask *k = static_cast<const GluTask *>(c);
        for (size_t j = (size_t)i0 * k->hid; j < (size_t)i1 * k->hid; j++) k->h[j] = gelu_b16(k->gelu, k->h[j]) * k->h2[j];
      },
      &task);
}

// x = rmsnorm(x) * w, for positions [0, m) (the post-attention and
// post-FFN norms).
void norm_rows(const Exec &e, float *x, const TensorRef &w, uint32_t m, uint32_t dim, float eps) {
  RowsTask task{x, nullptr, x, &w, dim, eps};
  run_positions(
      e.pool, m, (uint64_t)m * dim,
      [](void *c, uint32_t, uint32_t i0, uint32_t i1) {
        const RowsTask *k = static_cast<const RowsTask *>(c);
        for (uint32_t i = i0; i < i1; i++) rmsnorm(k->x + (size_t)i * k->dim, k->x + (size_t)i * k->dim, *k->norm, k->dim, k->eps);
      },
      &task);
}

// h = silu(h) * h2, for positions [0, m).
void swiglu(const Exec &e, float *h, const float *h2, uint32_t m, uint32_t hid) {
  GluTask task{h, h2, hid, nullptr};
  run_positions(
      e.pool, m, (uint64_t)m * hid,
      [](void *c, uint32_t, uint32_t i0, uint32_t i1) {
        const GluTask *k = static_cast<const GluTask *>(c);
        silu_mul(k->h, k->h2, (size_t)i0 * k->hid, (size_t)i1 * k->hid);
      },
      &task);
}

// The rows a recurrent layer's convolution reads for position p of a pass
// of m positions at pos: the taps' positions p - taps + 1 .. p, those of the
// pass from its scratch rows (stride apart), older ones from the pool;
// positions before 0 (or no longer held) read as nullptr, i.e. zeros.
void conv_taps(const KvPool *kv, uint32_t l, uint32_t taps, uint32_t pos, uint32_t p, const float *scratch, size_t stride,
               const float **rows) {
  for (uint32_t j = 0; j < taps; j++) {
    if (p + j + 1 < taps) {
      rows[j] = nullptr;
      continue;
    }
    const uint32_t q = p + j + 1 - taps;
    rows[j] = q >= pos ? scratch + (size_t)(q - pos) * stride : kv_conv_find(kv, l, q);
  }
}

// The mixer of short-convolution layer l (lfm2.cpp): xb's positions in,
// sc.xb2 out. Each position's product B * X (in place of its B rows) is its
// convolution input; the convolution reads, per channel, the inputs of the
// conv_kernel positions ending at its own (oldest tap first, positions
// before 0 counting as 0, summed in that order in f32), and gates the
// result by C before the output projection; the pass's last inputs then
// enter the pool.
void short_conv(const Exec &e, Scratch &sc, PassKind kind, PassCost *cost, KvPool *kv, const gb_model *mod, const TensorRef *W,
                uint32_t l, uint32_t m, uint32_t pos) {
  const uint32_t dim = mod->meta.dim, taps = mod->meta.conv_kernel;
  const size_t stride = 3 * (size_t)dim;
  matmul(e, sc, kind, cost, sc.conv, sc.xb, m, W[kMatQ]);
  for (uint32_t i = 0; i < m; i++) {
    float *bcx = sc.conv + i * stride;
    for (uint32_t c = 0; c < dim; c++) bcx[c] = bcx[c] * bcx[2 * dim + c];
  }
  const float *w = reinterpret_cast<const float *>(mod->conv_kernel[l].data);  // (dim, taps), F32
  const float *rows[kMaxConvKernel];
  for (uint32_t i = 0; i < m; i++) {
    conv_taps(kv, l, taps, pos, pos + i, sc.conv, stride, rows);
    const float *cg = sc.conv + i * stride + dim;
    float *out = sc.xb + (size_t)i * dim;
    for (uint32_t c = 0; c < dim; c++) {
      float sum = 0.0f;
      for (uint32_t j = 0; j < taps; j++)
        if (rows[j]) sum += rows[j][c] * w[(size_t)c * taps + j];
      out[c] = cg[c] * sum;
    }
  }
  kv_conv_store(kv, l, pos, m, sc.conv, stride);
  matmul(e, sc, kind, cost, sc.xb2, sc.xb, m, W[kMatO]);
}

inline float sigmoidf(float x) { return 1.0f / (1.0f + expf(-x)); }

// The mixer of Gated DeltaNet layer l (qwen35.cpp): xb's positions in,
// sc.xb2 out. Each position's q, k, v rows (before their convolution) are
// its convolution inputs, read as the short convolution reads its own (the
// pass's last ones then enter the pool). Then each value head runs its positions in order
// through the state update and read-out (the kernel table's delta_rule),
// heads shared among the pool's threads (a head's bits do not depend on the
// split); the update inputs are logged when the pool keeps a log, so that a
// rollback can replay them.
struct DeltaTask {
  const gb_kernels *k;
  const Meta *c;
  float *S;
  const float *u, *z, *g, *beta;  // (m, conv_channels), (m, v_dim), (m, v_heads) x2
  float *o;                       // (m, v_dim)
  const TensorRef *norm;
  uint32_t m;
};

void delta_heads(void *ctx, uint32_t t, uint32_t nt) {
  const DeltaTask *a = static_cast<const DeltaTask *>(ctx);
  const Meta &c = *a->c;
  const uint32_t d = c.gdn_state, hk = c.gdn_k_heads, hv = c.gdn_v_heads, C = c.conv_channels, qk = c.gdn_qk_dim(),
                 vd = c.gdn_v_dim();
  const uint32_t h0 = (uint32_t)((uint64_t)hv * t / nt), h1 = (uint32_t)((uint64_t)hv * (t + 1) / nt);
  for (uint32_t h = h0; h < h1; h++) {
    float *Sh = a->S + (size_t)h * d * d;
    for (uint32_t i = 0; i < a->m; i++) {
      const float *u = a->u + (size_t)i * C, *q = u + (size_t)(h % hk) * d, *k = u + qk + (size_t)(h % hk) * d;
      const float *v = u + 2 * qk + (size_t)h * d;
      float *oh = a->o + (size_t)i * vd + (size_t)h * d;
      a->k->delta_rule(Sh, k, v, q, a->g[(size_t)i * hv + h], a->beta[(size_t)i * hv + h], d, oh);
      rmsnorm(oh, oh, *a->norm, d, c.norm_eps);
      const float *z = a->z + (size_t)i * vd + (size_t)h * d;
      for (uint32_t j = 0; j < d; j++) oh[j] *= z[j] / (1.0f + expf(-z[j]));  // silu(z)
    }
  }
}

void delta_net(const Exec &e, Scratch &sc, PassKind kind, PassCost *cost, KvPool *kv, const gb_model *mod, const TensorRef *W,
               uint32_t l, uint32_t m, uint32_t pos) {
  const Meta &c = mod->meta;
  const uint32_t C = c.conv_channels, taps = c.conv_kernel, d = c.gdn_state, hk = c.gdn_k_heads, hv = c.gdn_v_heads;
  const uint32_t qk = c.gdn_qk_dim(), vd = c.gdn_v_dim();
  matmul(e, sc, kind, cost, sc.conv, sc.xb, m, W[kMatQ]);
  matmul(e, sc, kind, cost, sc.gdn_z, sc.xb, m, W[kMatK]);
  // The decay and rate projections (a few rows, stored in any format): the
  // same products as every matrix, activations rounded as the format's
  // kernels round them.
  float *alpha = sc.gdn_ab, *brate = alpha + (size_t)m * hv, *g = brate + (size_t)m * hv, *beta = g + (size_t)m * hv;
  matmul(e, sc, kind, cost, alpha, sc.xb, m, mod->gdn[0][l]);
  matmul(e, sc, kind, cost, brate, sc.xb, m, mod->gdn[1][l]);
  const float *dt = reinterpret_cast<const float *>(mod->gdn[2][l].data), *A = reinterpret_cast<const float *>(mod->gdn[3][l].data);
  const float *w = reinterpret_cast<const float *>(mod->conv_kernel[l].data);  // (C, taps), F32
  const float qscale = 1.0f / sqrtf((float)d);
  const float *rows[kMaxConvKernel];
  for (uint32_t i = 0; i < m; i++) {
    const uint32_t p = pos + i;
    conv_taps(kv, l, taps, pos, p, sc.conv, C, rows);
    float *u = sc.gdn_u + (size_t)i * C;
    for (uint32_t ch = 0; ch < C; ch++) {
      float sum = 0.0f;
      for (uint32_t j = 0; j < taps; j++)
        if (rows[j]) sum += rows[j][ch] * w[(size_t)ch * taps + j];
      u[ch] = sum / (1.0f + expf(-sum));  // silu
    }
    // Each key head of q and k L2-normalized (eps: the model's norm eps); q
    // scaled by 1/sqrt(d).
    for (uint32_t h = 0; h < 2 * hk; h++) {
      float *x = u + (size_t)h * d;
      double ss = 0.0;
      for (uint32_t t = 0; t < d; t++) ss += (double)x[t] * x[t];
      const float scale = 1.0f / fmaxf(sqrtf((float)ss), c.norm_eps);
      for (uint32_t t = 0; t < d; t++) x[t] *= scale;
    }
    for (uint32_t t = 0; t < qk; t++) u[t] *= qscale;
    float *gi = g + (size_t)i * hv, *bi = beta + (size_t)i * hv;
    for (uint32_t h = 0; h < hv; h++) {
      const float a = alpha[(size_t)i * hv + h] + dt[h];
      gi[h] = A[h] * (a > 20.0f ? a : logf(1.0f + expf(a)));  // softplus
      bi[h] = sigmoidf(brate[(size_t)i * hv + h]);
    }
    if (float *entry = kv_delta_entry(kv, l, p)) {
      memcpy(entry, u + qk, sizeof(float) * (qk + vd));  // k, then v
      memcpy(entry + qk + vd, gi, sizeof(float) * hv);
      memcpy(entry + qk + vd + hv, bi, sizeof(float) * hv);
    }
  }
  kv_conv_store(kv, l, pos, m, sc.conv, C);
  DeltaTask task{&e.k, &c, kv_delta_state(kv, l), sc.gdn_u, sc.gdn_z, g, beta, sc.gdn_o, &mod->gdn[4][l], m};
  // One task per thread when the heads' work is worth a pool run.
  uint32_t n = gb_port_pool_threads(e.pool);
  if (n > hv) n = hv;
  if ((uint64_t)m * hv * d * d < 16384) n = 1;
  gb_port_pool_run(e.pool, n, delta_heads, &task);
  matmul(e, sc, kind, cost, sc.xb2, sc.gdn_o, m, W[kMatO]);
}

// Gemma 4's per-layer inputs of positions [0, m) into sc.ple (forward.cpp's
// header): each layer's ple_dim values are
//   (rmsnorm(P x / sqrt(dim)) * proj_norm + E_ple[token] * sqrt(ple_dim)) / sqrt(2)
// with x the scaled embedding rows in sc.x and P the model's projection.
void per_layer_inputs(const Exec &e, Scratch &sc, PassKind kind, PassCost *cost, const gb_model *mod, const int32_t *tok,
                      uint32_t m) {
  const Meta &c = mod->meta;
  const uint32_t P = c.ple_dim, NL = c.n_layers * P;
  matmul(e, sc, kind, cost, sc.ple_p, sc.x, m, mod->ple_model_proj);
  const float tscale = sqrtf((float)P), pscale = 1.0f / sqrtf((float)c.dim), half = 1.0f / sqrtf(2.0f);
  for (uint32_t i = 0; i < m; i++) {
    float *row = sc.ple + (size_t)i * NL, *pr = sc.ple_p + (size_t)i * NL;
    e.k.rows_to_f32[mod->ple_embd.format](row, mod->ple_embd.data, tok[i], (size_t)tok[i] + 1, NL);
    for (uint32_t j = 0; j < NL; j++) pr[j] *= pscale;
    for (uint32_t l = 0; l < c.n_layers; l++) rmsnorm(pr + (size_t)l * P, pr + (size_t)l * P, mod->ple_proj_norm, P, c.norm_eps);
    for (uint32_t j = 0; j < NL; j++) row[j] = (pr[j] + row[j] * tscale) * half;
  }
}

// Layer l's per-layer input block (gemma4): with x the layer's output,
//   x += rmsnorm(W_proj (gelu(W_gate x) * inputs_l)) * post_norm
// (GELU as GeGLU's, gelu_b16).
void per_layer_block(const Exec &e, Scratch &sc, PassKind kind, PassCost *cost, const gb_model *mod, uint32_t l, uint32_t m) {
  const Meta &c = mod->meta;
  const uint32_t P = c.ple_dim, NL = c.n_layers * P;
  float *g = sc.ple_p;  // (m, P): the projection is no longer needed
  matmul(e, sc, kind, cost, g, sc.x, m, mod->ple[0][l]);
  for (uint32_t i = 0; i < m; i++) {
    const float *in = sc.ple + (size_t)i * NL + (size_t)l * P;
    float *gi = g + (size_t)i * P;
    for (uint32_t j = 0; j < P; j++) gi[j] = gelu_b16(mod->gelu_f16, gi[j]) * in[j];
  }
  matmul(e, sc, kind, cost, sc.xb2, g, m, mod->ple[1][l]);
  norm_rows(e, sc.xb2, mod->ple[2][l], m, c.dim, c.norm_eps);
  for (size_t j = 0; j < (size_t)m * c.dim; j++) sc.x[j] += sc.xb2[j];
}

}  // namespace

gb_status forward(const Weights &w, KvPool *kv, Scratch &sc, const Exec &e, const int32_t *tok, uint32_t m, uint32_t pos,
                  PassKind kind, bool want_logits, PassCost *cost) {
  const gb_model *mod = w.model;
  const Meta &c = mod->meta;
  const uint32_t dim = c.dim;
  const bool attn_only = w.base_mats != w.mats;
  float *X = sc.x, *XB = sc.xb, *XB2 = sc.xb2, *HB = sc.hb, *HB2 = sc.hb2;
  *cost = PassCost();
  GB_RETURN_IF(m == 0 || m > sc.m_max || (want_logits && m > sc.logit_rows), e.log, GB_ERR_INTERNAL,
               "forward: %u positions, scratch carved for %u (%u rows of logits)", m, sc.m_max, sc.logit_rows);
  // Places in the KV pool: one token as a decode step enters it (precision
  // of older tokens may step down, or the least important may be evicted,
  // per the policy); m tokens of a single-level policy at once, in order.
  if (m == 1) {
    GB_TRY(kv_begin(kv, e.k, pos, e.log));
    kv->batch_slot[0] = kv->cur_slot;
  } else {
    GB_RETURN_IF(!kv_batchable(kv, pos, m), e.log, GB_ERR_CONTEXT_FULL, "forward: no room for %u tokens in the KV pool", m);
    GB_TRY(kv_begin_batch(kv, e.k, pos, m, e.log));
  }
  GB_TRY(kv_delta_begin(kv, e.k, pos, m, e.log));

  // Embedding rows (any stored format).
  for (uint32_t i = 0; i < m; i++) {
    float *xi = X + (size_t)i * dim;
    e.k.rows_to_f32[mod->embd.format](xi, mod->embd.data, tok[i], (size_t)tok[i] + 1, dim);
    if (c.embed_scale != 1.0f)
      for (uint32_t j = 0; j < dim; j++) xi[j] *= c.embed_scale;
  }
  if (c.ple_dim) per_layer_inputs(e, sc, kind, cost, mod, tok, m);
  // The output of the previous layer's FFN, added to the residual stream
  // when the next layer (or the output norm) normalizes it; nullptr once
  // added (a layer ending in a per-layer input block or scale adds it
  // itself).
  const float *pending = nullptr;

  for (uint32_t l = 0; l < c.n_layers; l++) {
    const TensorRef *W = w.mats + (size_t)l * kMatsPerLayer;
    const TensorRef *Wb = attn_only ? w.base_mats + (size_t)l * kMatsPerLayer : W;
    // This layer's attention shape and FFN width (Gemma 4's differ between layers).
    const uint32_t hd = c.layer_head_dim(l), qd = c.layer_q_dim(l), kvd = c.layer_kv_dim(l), kvh = c.layer_kv_heads(l);
    const uint32_t hid = c.layer_hidden(l), rdim = c.layer_rope_dim(l);
    const bool own_kv = !c.kv_shared(l);

    // The previous layer's FFN output joins the residual stream here (and,
    // after the last layer, just before the output norm).
    add_and_norm(e, X, pending, XB, &mod->attn_norm[l], m, dim, c.norm_eps);
    if (c.shortconv_layer(l)) {
      short_conv(e, sc, kind, cost, kv, mod, W, l, m, pos);
    } else if (c.delta_layer(l)) {
      delta_net(e, sc, kind, cost, kv, mod, W, l, m, pos);
    } else {
      {
        // A layer sharing an earlier layer's cache computes its queries only.
        float *const Y[3] = {sc.q, sc.k, sc.v};
        const TensorRef *const Ws[3] = {&W[kMatQ], &W[kMatK], &W[kMatV]};
        matmul_shared(e, sc, kind, cost, Y, XB, m, Ws, own_kv ? 3 : 1);
      }
      if (c.attn_gate) {
        // Gated attention: each head's query rows, then its gate rows; the
        // gates aside, the queries compacted to the usual layout.
        for (uint32_t i = 0; i < m; i++)
          for (uint32_t h = 0; h < c.n_heads; h++) {
            const float *src = sc.q + (size_t)i * 2 * qd + (size_t)h * 2 * hd;
            memcpy(sc.gate + (size_t)i * qd + (size_t)h * hd, src + hd, sizeof(float) * hd);
            memmove(sc.q + (size_t)i * qd + (size_t)h * hd, src, sizeof(float) * hd);
          }
      }
      if (mod->bias[0][l].data) add_bias(sc.q, qd, m, mod->bias[0][l]);
      if (mod->bias[1][l].data) add_bias(sc.k, kvd, m, mod->bias[1][l]);
      if (mod->bias[2][l].data) add_bias(sc.v, kvd, m, mod->bias[2][l]);
      const bool qk_norm = mod->qk_norm[0][l].data != nullptr, rotate = c.rope_layer(l), slide = c.swa_layer(l);
      const float *freq = slide ? e.rope_freq_swa : e.rope_freq;
      const float rscale = slide ? 1.0f : e.rope_scale;
      for (uint32_t i = 0; i < m; i++) {
        float *q = sc.q + (size_t)i * qd, *k = sc.k + (size_t)i * kvd;
        if (qk_norm)
          for (uint32_t h = 0; h < c.n_heads; h++)
            rmsnorm(q + (size_t)h * hd, q + (size_t)h * hd, mod->qk_norm[0][l], hd, c.norm_eps);
        if (rotate) rope(q, c.n_heads, hd, rdim, c.rope_type, freq, rscale, pos + i);
        if (!own_kv) continue;
        float *v = sc.v + (size_t)i * kvd;
        if (qk_norm)
          for (uint32_t h = 0; h < kvh; h++) rmsnorm(k + (size_t)h * hd, k + (size_t)h * hd, mod->qk_norm[1][l], hd, c.norm_eps);
        if (c.v_norm)
          for (uint32_t h = 0; h < kvh; h++) rms_plain(v + (size_t)h * hd, hd, c.norm_eps);
        if (rotate) rope(k, kvh, hd, rdim, c.rope_type, freq, rscale, pos + i);
        kv_store_slot(kv, l, kv->batch_slot[i], k, v);
      }
      // For each head h (kv head h / (n_heads / n_kv_heads)):
      //   xb_h = sum_t softmax_t(q_h . k_t / sqrt(head_dim)) v_t
      // over the cached tokens, read in place from the pool's buckets;
      // position i attends to t <= pos + i only (the pass's m - 1 - i later
      // tokens, already cached, are hidden from it).
      attend_positions(e, sc, kv, l, m, pos, qd);
      if (c.attn_gate)
        for (size_t j = 0; j < (size_t)m * qd; j++) XB[j] *= sigmoidf(sc.gate[j]);
      matmul(e, sc, kind, cost, XB2, XB, m, W[kMatO]);
    }
    if (mod->post_norm[0][l].data) norm_rows(e, XB2, mod->post_norm[0][l], m, dim, c.norm_eps);
    add_and_norm(e, X, XB2, XB, &mod->ffn_norm[l], m, dim, c.norm_eps);
    {
      float *const Y[2] = {HB, HB2};
      const TensorRef *const Ws[2] = {&Wb[kMat1], &Wb[kMat3]};
      if (c.ffn_act == kFfnGelu) {
        matmul_shared(e, sc, kind, cost, Y, XB, m, Ws, 2, false);
        geglu(e, mod->gelu_f16, HB, HB2, m, hid);
      } else if (!matmul_shared(e, sc, kind, cost, Y, XB, m, Ws, 2, true)) {
        swiglu(e, HB, HB2, m, hid);
      }
    }
    matmul(e, sc, kind, cost, XB2, HB, m, Wb[kMat2]);
    if (mod->post_norm[1][l].data) norm_rows(e, XB2, mod->post_norm[1][l], m, dim, c.norm_eps);
    pending = XB2;
    if (c.ple_dim || mod->ple[3][l].data) {
      for (size_t j = 0; j < (size_t)m * dim; j++) X[j] += XB2[j];
      pending = nullptr;
      if (c.ple_dim) per_layer_block(e, sc, kind, cost, mod, l, m);
      if (mod->ple[3][l].data) {
        const float s = *reinterpret_cast<const float *>(mod->ple[3][l].data);
        for (size_t j = 0; j < (size_t)m * dim; j++) X[j] *= s;
      }
    }
  }

  for (uint32_t i = 0; i < m; i++) kv_end(kv);
  kv_conv_mark(kv, pos, m);
  kv_delta_end(kv, pos, m);
  if (!want_logits) return GB_OK;
  add_and_norm(e, X, pending, X, &mod->out_norm, m, dim, c.norm_eps);
  matmul(e, sc, kind, cost, sc.logits, X, m, *w.classifier);
  if (c.logit_softcap > 0.0f) {
    const float cap = c.logit_softcap, inv = 1.0f / cap;
    float *lg = sc.logits;
    for (size_t j = 0; j < (size_t)m * c.vocab_size; j++) lg[j] = cap * tanhf(lg[j] * inv);
  }
  return GB_OK;
}

}  // namespace gb
