// kv.cpp — the KV pool (see kv.h): sizing, buckets of packed records,
// quantization, fused attention over the buckets, importance statistics and
// the token life cycle. The policies that choose which token steps down or
// leaves when the pool needs room are in kv_policy.cpp (WINDOW, RECENCY,
// eviction) and kv_seed.cpp (the SEED allocator).
#include "kv.h"

#include <math.h>
#include <string.h>

#include <algorithm>

#include "f16.h"
#include "kv_buckets.h"
#include "gearbx_port.h"
#include "model.h"

namespace gb {

using namespace kvb;

// ---- sizing ---------------------------------------------------------------

gb_status kv_plan(const Meta &c, const SessionConfig &o, const Logger &log, KvPlan *p) {
  const KvConfig &k = o.kv;
  memset(p, 0, sizeof *p);
  const int32_t pol = raw_enum(k.policy);
  GB_RETURN_IF(pol < 0 || pol > GB_KV_RECENCY, log, GB_ERR_INVALID_ARGUMENT, "kv options: policy %d unknown", pol);
  GB_RETURN_IF(!(k.beta >= 0.0f && k.beta <= 16.0f), log, GB_ERR_INVALID_ARGUMENT, "kv options: beta %g outside [0, 16]", (double)k.beta);
  GB_RETURN_IF(k.evict > 1 || k.asymmetric > 1, log, GB_ERR_INVALID_ARGUMENT, "kv options: evict and asymmetric must be 0 or 1");
  GB_RETURN_IF(!(k.gamma >= 0.0f && k.gamma < 1.0f) || !(k.gamma_head >= 0.0f && k.gamma_head < 1.0f), log,
               GB_ERR_INVALID_ARGUMENT, "kv options: gamma and gamma_head must be in [0, 1)");
  GB_RETURN_IF(!(k.alpha > 0.0f && k.alpha <= 1.0f), log, GB_ERR_INVALID_ARGUMENT, "kv options: alpha %g outside (0, 1]", (double)k.alpha);
  GB_RETURN_IF(!(k.recency_T > 0.0f), log, GB_ERR_INVALID_ARGUMENT, "kv options: recency_T must be > 0");
  GB_RETURN_IF(!(k.eps_importance >= 0.0f) || !(k.drift_kl >= 0.0f) || !(k.rank_threshold >= 0.0f && k.rank_threshold <= 1.0f), log,
               GB_ERR_INVALID_ARGUMENT, "kv options: eps_importance, drift_kl >= 0 and rank_threshold in [0, 1] required");
  GB_RETURN_IF(k.f_base == 0 || k.f_base > (1u << 20) || k.rank_intervals > 255, log, GB_ERR_INVALID_ARGUMENT,
               "kv options: f_base in [1, 2^20], rank_intervals <= 255 required");
  const bool budget = k.pool_bytes > 0 || k.beta > 0.0f;
  uint32_t policy = (uint32_t)pol;
  if (policy == GB_KV_DEFAULT) policy = budget ? GB_KV_WINDOW : GB_KV_F32;
  const char *const pname = gb_kv_policy_name((gb_kv_policy)policy);
  p->policy = policy;
  const bool quantized = policy != GB_KV_F32 && policy != GB_KV_F16;
  // Layers sharing another layer's cache hold none of their own.
  uint32_t n_ring = 0, n_conv = 0, n_delta = 0;
  const uint32_t n_shared = c.n_kv_shared();
  for (uint32_t l = 0; l < c.n_layers; l++) n_ring += c.swa_layer(l) && !c.kv_shared(l) ? 1 : 0;
  for (uint32_t l = 0; l < c.n_layers; l++) n_conv += c.conv_layer(l) ? 1 : 0;
  for (uint32_t l = 0; l < c.n_layers; l++) n_delta += c.delta_layer(l) ? 1 : 0;
  const uint32_t R = c.n_kv_heads, d = c.head_dim, L = c.n_layers - n_ring - n_conv - n_shared, n_ctx = o.n_ctx;
  // The sliding layers' heads (Gemma 4: their own size and count).
  const uint32_t Rs = c.swa_kv_heads(), ds = c.swa_head_dim();
  GB_RETURN_IF(L == 0, log, GB_ERR_UNSUPPORTED_TYPE, "kv pool: every layer of the model slides (no global layer): not supported");
  GB_RETURN_IF(quantized && (d % 8 != 0 || d > GB_KV_QUANT_MAX_HEAD_DIM || (n_ring && ds % 8 != 0)), log, GB_ERR_INVALID_ARGUMENT,
               "kv policy %s needs a head_dim that is a multiple of 8 and at most %u (model: %u)", pname,
               (unsigned)GB_KV_QUANT_MAX_HEAD_DIM, n_ring && ds % 8 != 0 ? ds : d);
  // Levels.
  switch (policy) {
    case GB_KV_F32: p->levels = 1u << kLv32; p->entry = p->min = kLv32; break;
    case GB_KV_F16: p->levels = 1u << kLv16; p->entry = p->min = kLv16; break;
    case GB_KV_UNIFORM8: p->levels = 1u << kLv8; p->entry = p->min = kLv8; break;
    case GB_KV_UNIFORM4: p->levels = 1u << kLv4; p->entry = p->min = kLv4; break;
    case GB_KV_UNIFORM3: p->levels = 1u << kLv3; p->entry = p->min = kLv3; break;
    case GB_KV_UNIFORM2: p->levels = 1u << kLv2; p->entry = p->min = kLv2; break;
    default: p->levels = (1u << kLv2) | (1u << kLv3) | (1u << kLv4) | (1u << kLv8); p->entry = kLv8; p->min = kLv2; break;
  }
  for (uint32_t lv = 0; lv < kLevels; lv++) {
    p->kbits[lv] = p->vbits[lv] = (uint8_t)kv_level_bits(lv);
    if (k.asymmetric && lv < kLv3) p->kbits[lv] = 3;
    if (p->levels >> lv & 1) p->rec[lv] = R * (d * p->kbits[lv] / 8 + d * p->vbits[lv] / 8);
  }
  p->unit = R * d / 8;
  const bool multi = kv_policy_multi_level(policy);
  p->page_bytes = multi ? 48 * p->unit : p->rec[p->entry];
  for (uint32_t lv = 0; lv < kLevels; lv++)
    if (p->rec[lv]) p->tpp[lv] = p->page_bytes / p->rec[lv];
  p->reserve = multi ? 1 : 0;
  p->scale_bytes = quantized ? 4 * R : 0;
  const uint32_t prot_want = multi ? k.k_critical + k.k_tail : 0;
  // Tokens n_pages hold with the protected at 8 bits and the rest at min.
  auto max_tokens = [&](uint32_t n_pages, uint32_t cap) -> uint32_t {
    if (n_pages <= p->reserve) return 0;
    const uint32_t usable = n_pages - p->reserve;
    uint64_t n;
    if (!multi) {
      n = (uint64_t)usable * p->tpp[p->min];
    } else {
      const uint32_t prot = prot_want < cap ? prot_want : cap;
      const uint32_t pp = pages_for(prot, p->tpp[kLv8]);
      n = pp > usable ? 0 : prot + (uint64_t)(usable - pp) * p->tpp[p->min];
    }
    return n < cap ? (uint32_t)n : cap;
  };
  // The sliding-window layers' rings: the window plus the longest run of
  // positions that enters at once or rolls back (a prefill chunk, a verify
  // pass or a draft of the spec gear), less one.
  const uint32_t chunk = o.prefill_batch > 1 && o.n_ctx > 1 && !multi ? o.prefill_batch : 1;
  const uint32_t spec = o.gear == GB_GEAR_SPEC ? o.spec_k + 1 : 1;
  const uint32_t run = chunk > spec ? chunk : spec;
  if (n_conv) {
    // The short-convolution layers' rows (kv.h, KvConv), held at f32 under
    // every policy: the state is a few rows per layer.
    p->conv_layers = n_conv;
    p->conv_taps = c.conv_kernel;
    p->conv_dim = c.conv_channels;
    p->conv_cap = c.conv_kernel - 1 + (o.gear == GB_GEAR_SPEC ? o.spec_k + 1 : 0);
    p->conv_bytes = (uint64_t)n_conv * p->conv_cap * c.conv_channels * 4;
  }
  if (n_delta) {
    // The Gated DeltaNet layers' matrices (kv.h, KvDelta), at f32 under
    // every policy; with the speculative gear (the one path that rolls
    // back) also a checkpoint and a log of one verify pass's positions.
    p->delta_layers = n_delta;
    p->delta_k_heads = c.gdn_k_heads;
    p->delta_v_heads = c.gdn_v_heads;
    p->delta_dim = c.gdn_state;
    p->delta_log = o.gear == GB_GEAR_SPEC ? o.spec_k + 1 : 0;
    const uint64_t st = (uint64_t)n_delta * p->delta_state() * 4;
    p->delta_bytes = st + (p->delta_log ? st + (uint64_t)p->delta_log * n_delta * p->delta_entry() * 4 : 0);
  }
  if (n_ring) {
    const uint64_t want = (uint64_t)c.swa_window + run - 1;
    p->ring_layers = n_ring;
    p->ring_window = c.swa_window;
    const uint64_t cap = want < n_ctx ? want : n_ctx;
    p->ring_cap = (uint32_t)((cap + kRingBlock - 1) / kRingBlock * kRingBlock);
    p->ring_level = p->entry;
    p->ring_kv_heads = Rs;
    p->ring_head_dim = ds;
    p->ring_rec = Rs * (ds * p->kbits[p->entry] / 8 + ds * p->vbits[p->entry] / 8);
    p->ring_scale_bytes = quantized ? 4 * Rs : 0;
    p->ring_bytes = (uint64_t)n_ring * p->ring_cap * (p->ring_rec + p->ring_scale_bytes);
  }
  // beta's reference: the cache the context needs at fp16 (the sliding
  // layers' rings included at their size, not the context's).
  const uint64_t fp16 = 2ull * ((uint64_t)L * n_ctx * R * d + (uint64_t)n_ring * p->ring_cap * Rs * ds) * 2;
  if (budget) {
    const uint64_t total = k.pool_bytes ? k.pool_bytes : (uint64_t)((double)k.beta * (double)fp16);
    const uint64_t fixed = p->ring_bytes + p->conv_bytes + p->delta_bytes;
    GB_RETURN_IF(total <= fixed, log, GB_ERR_BUDGET_EXCEEDED,
                 "KV pool of %llu bytes cannot hold the %u sliding-window layers' rings (%llu bytes: %u tokens each) and the %u "
                 "short-convolution layers' state (%llu bytes)",
                 (unsigned long long)total, n_ring, (unsigned long long)p->ring_bytes, p->ring_cap, n_conv,
                 (unsigned long long)p->conv_bytes);
    const uint64_t layer = (total - fixed) / L;
    uint64_t cap = layer / (p->rec[p->min] + p->scale_bytes);
    if (cap > n_ctx) cap = n_ctx;
    for (int it = 0; it < 8; it++) {  // slots that pages can never fill are given back as pages
      const uint64_t pages = layer > cap * p->scale_bytes ? (layer - cap * p->scale_bytes) / p->page_bytes : 0;
      p->n_pages = pages > 0x7fffffffu ? 0x7fffffffu : (uint32_t)pages;
      const uint32_t mt = max_tokens(p->n_pages, (uint32_t)cap);
      if (mt >= cap) break;
      cap = mt;
    }
    p->cap = (uint32_t)cap;
  } else {
    p->cap = n_ctx;
    p->n_pages = pages_for(n_ctx, p->tpp[p->entry]) + p->reserve;
  }
  p->max_tokens = max_tokens(p->n_pages, p->cap);
  p->layer_bytes = (uint64_t)p->cap * p->scale_bytes + (uint64_t)p->n_pages * p->page_bytes;
  p->pool_bytes = p->layer_bytes * L + p->ring_bytes + p->conv_bytes + p->delta_bytes;
  p->importance = multi || k.evict;
  // The smallest usable pool: the protected tokens at 8 bits plus one token at the minimum.
  const uint32_t need = (prot_want + 1 < n_ctx ? prot_want + 1 : n_ctx);
  if (p->max_tokens < need) {
    const uint64_t per_min = (uint64_t)p->rec[p->min] + p->scale_bytes;
    return fail(log, GB_ERR_BUDGET_EXCEEDED,
                "KV pool of %llu bytes (%u layers) cannot hold %u protected tokens at 8 bits plus one at %u bits "
                "(policy %s; a token costs %llu bytes per layer at the minimum, scales included; beta_min for %u tokens "
                "is %.4f)",
                (unsigned long long)(budget ? (k.pool_bytes ? k.pool_bytes : (uint64_t)((double)k.beta * (double)fp16)) : 0), L,
                prot_want, kv_level_bits(p->min), pname, (unsigned long long)per_min, n_ctx,
                (double)(per_min * L * n_ctx) / (double)fp16);
  }
  if (p->max_tokens < n_ctx)
    log.log(k.evict ? GB_LOG_INFO : GB_LOG_WARN,
            "KV pool (%s, %llu bytes) holds at most %u of the %u context tokens at minimum precision; then %s", pname,
            (unsigned long long)p->pool_bytes, p->max_tokens, n_ctx,
            k.evict ? "the least important unprotected tokens are evicted" : "decoding returns GB_ERR_CONTEXT_FULL");
  return GB_OK;
}

// ---- carving ----------------------------------------------------------------

void kv_carve(KvPool *kv, Arena &a, const Meta &c, const SessionConfig &o, const KvPlan &p) {
  kv->plan = p;
  kv->opt = o.kv;
  kv->n_model_layers = c.n_layers;
  kv->n_layers = c.n_layers - p.ring_layers - p.conv_layers - c.n_kv_shared();
  kv->n_heads = c.n_heads;
  kv->n_kv_heads = c.n_kv_heads;
  kv->head_dim = c.head_dim;
  kv->attn_scale = c.attn_scale;
  kv->n_ctx = o.n_ctx;
  const uint32_t L = kv->n_layers, H = c.n_heads, cap = p.cap, R = c.n_kv_heads, d = c.head_dim;
  const bool seed = p.policy == GB_KV_SEED;
  uint32_t *map = a.array<uint32_t>(c.n_layers);
  if (map)
    for (uint32_t l = 0, g = 0, r = 0, v = 0; l < c.n_layers; l++)
      map[l] = c.kv_shared(l) ? map[c.kv_source(l)] : c.conv_layer(l) ? kConvBit | v++ : c.swa_layer(l) ? kRingBit | r++ : g++;
  kv->layer_map = map;
  uint32_t *dmap = a.array<uint32_t>(c.n_layers);
  if (dmap)
    for (uint32_t l = 0, v = 0; l < c.n_layers; l++) dmap[l] = c.delta_layer(l) ? v++ : 0;
  kv->delta_map = dmap;
  memset(&kv->delta, 0, sizeof kv->delta);
  kv->delta_fn = nullptr;
  if (p.delta_layers) {
    const size_t st = (size_t)p.delta_layers * p.delta_state();
    kv->delta.s = a.array<float>(st);
    if (p.delta_log) {
      kv->delta.ck = a.array<float>(st);
      kv->delta.log = a.array<float>((size_t)p.delta_log * p.delta_layers * p.delta_entry());
    }
  }
  memset(&kv->conv, 0, sizeof kv->conv);
  if (p.conv_layers) {
    kv->conv.rows = a.array<float>((size_t)p.conv_layers * p.conv_cap * p.conv_dim);
    kv->conv.pos = a.array<uint32_t>(p.conv_cap);
  }
  memset(&kv->ring, 0, sizeof kv->ring);
  if (p.ring_layers) {
    const size_t n = (size_t)p.ring_layers * p.ring_cap;
    kv->ring.data = a.array<uint8_t>(n * p.ring_rec);
    kv->ring.scales = p.ring_scale_bytes ? a.array<uint16_t>(n * 2 * p.ring_kv_heads) : nullptr;
    kv->ring.pos = a.array<uint32_t>(p.ring_cap);
    kv->ring.ids = a.array<uint32_t>(p.ring_cap);
  }
  KvLayer *layers = a.array<KvLayer>(L);
  for (uint32_t l = 0; l < L; l++) {
    KvLayer t;
    memset(&t, 0, sizeof t);
    t.pages = a.array<uint8_t>((size_t)p.n_pages * p.page_bytes);
    t.scales = p.scale_bytes ? a.array<uint16_t>((size_t)cap * 2 * R) : nullptr;
    t.free_pages = a.array<uint32_t>(p.n_pages);
    t.level = a.array<uint8_t>(cap);
    t.index = a.array<uint32_t>(cap);
    for (uint32_t lv = 0; lv < kLevels; lv++) {
      if (!(p.levels >> lv & 1)) continue;
      t.bucket[lv].pages = a.array<uint32_t>(p.n_pages);
      t.bucket[lv].slots = a.array<uint32_t>(cap);
    }
    t.ema = p.importance ? a.array<float>(cap) : nullptr;
    t.head_ema = a.array<float>(H);
    t.rank_ref = seed ? a.array<float>(cap) : nullptr;
    t.rank_cnt = seed ? a.array<uint8_t>(cap) : nullptr;
    if (layers) layers[l] = t;
  }
  kv->layers = layers;
  kv->pos = a.array<uint32_t>(cap);
  kv->birth = a.array<uint64_t>(cap);
  kv->wema = p.importance ? a.array<float>(cap) : nullptr;
  kv->wsum = p.importance ? a.array<float>(cap) : nullptr;
  kv->imp = p.importance ? a.array<float>(cap) : nullptr;
  kv->snap = seed ? a.array<float>(cap) : nullptr;
  kv->free_slots = a.array<uint32_t>(cap);
  kv_attn_scratch_carve(&kv->att, a, H, d, kv_attn_cap(p));
  kv->mass = p.importance ? a.array<float>(cap) : nullptr;
  kv->wmass = p.importance ? a.array<float>(cap) : nullptr;
  kv->head_w = a.array<float>(H);
  kv->tmp = a.array<float>((size_t)2 * R * d);
  kv->planned = seed ? a.array<uint8_t>(cap) : nullptr;
  kv->order = seed ? a.array<uint32_t>(cap) : nullptr;
  kv->heap = seed ? a.array<KvPool::HeapItem>(cap) : nullptr;
  kv->batch_slot = a.array<uint32_t>(cap);
}

void kv_reset(KvPool *kv) {
  const KvPlan &p = kv->plan;
  const uint32_t cap = p.cap;
  for (uint32_t l = 0; l < kv->n_layers; l++) {
    KvLayer &y = kv->layers[l];
    y.n_free = p.n_pages;
    for (uint32_t i = 0; i < p.n_pages; i++) y.free_pages[i] = p.n_pages - 1 - i;  // pops 0, 1, 2, ...
    memset(y.level, kLvNone, cap);
    for (uint32_t lv = 0; lv < kLevels; lv++) y.bucket[lv].count = 0;
    if (y.ema) memset(y.ema, 0, sizeof(float) * cap);
    for (uint32_t h = 0; h < kv->n_heads; h++) y.head_ema[h] = 1.0f;  // heads start equal
    y.next_realloc = 0;
  }
  kv->n_free_slots = cap;
  for (uint32_t i = 0; i < cap; i++) kv->free_slots[i] = cap - 1 - i;
  kv->n_tokens = 0;
  kv->newest = 0;
  for (uint32_t h = 0; h < kv->n_heads; h++) kv->head_w[h] = 1.0f;
  kv->step = kv->reallocs = kv->requant = kv->evicted = kv->alloc_ns = 0;
  kv->cur_slot = 0;
  for (uint32_t i = 0; i < p.ring_cap; i++) {
    kv->ring.pos[i] = kRingEmpty;
    kv->ring.ids[i] = i;
  }
  for (uint32_t i = 0; i < p.conv_cap; i++) kv->conv.pos[i] = kRingEmpty;
  if (p.delta_layers) {
    memset(kv->delta.s, 0, sizeof(float) * p.delta_layers * p.delta_state());
    if (kv->delta.ck) memset(kv->delta.ck, 0, sizeof(float) * p.delta_layers * p.delta_state());
  }
  kv->delta.next = kv->delta.ck_pos = 0;
}

namespace {

// The update inputs of one logged position (kv.h, KvDelta) applied to the
// states st (delta_layers of them).
void delta_replay(const KvPool *kv, float *st, uint32_t pos) {
  const KvPlan &p = kv->plan;
  const uint32_t d = p.delta_dim, hk = p.delta_k_heads, hv = p.delta_v_heads;
  for (uint32_t l = 0; l < p.delta_layers; l++) {
    const float *e = kv->delta.log + ((size_t)(pos % p.delta_log) * p.delta_layers + l) * p.delta_entry();
    const float *k = e, *v = e + (size_t)hk * d, *g = v + (size_t)hv * d, *beta = g + hv;
    float *S = st + (size_t)l * p.delta_state();
    const gb_delta_rule_fn fn = kv->delta_fn ? kv->delta_fn : gb_delta_rule__generic;
    for (uint32_t h = 0; h < hv; h++)
      fn(S + (size_t)h * d * d, k + (size_t)(h % hk) * d, v + (size_t)h * d, nullptr, g[h], beta[h], d, nullptr);
  }
}

}  // namespace

void kv_conv_store(KvPool *kv, uint32_t model_layer, uint32_t pos, uint32_t m, const float *rows, size_t stride) {
  const KvPlan &p = kv->plan;
  const uint32_t first = m > p.conv_cap ? m - p.conv_cap : 0;
  float *base = kv->conv.rows + (size_t)(kv->layer_map[model_layer] & ~kConvBit) * p.conv_cap * p.conv_dim;
  for (uint32_t i = first; i < m; i++)
    memcpy(base + (size_t)((pos + i) % p.conv_cap) * p.conv_dim, rows + i * stride, sizeof(float) * p.conv_dim);
}

void kv_conv_mark(KvPool *kv, uint32_t pos, uint32_t m) {
  const KvPlan &p = kv->plan;
  if (!p.conv_layers) return;
  for (uint32_t i = m > p.conv_cap ? m - p.conv_cap : 0; i < m; i++) kv->conv.pos[(pos + i) % p.conv_cap] = pos + i;
}

gb_status kv_delta_begin(KvPool *kv, const gb_kernels &k, uint32_t pos, uint32_t m, const Logger &log) {
  const KvPlan &p = kv->plan;
  if (!p.delta_layers) return GB_OK;
  kv->delta_fn = k.delta_rule;
  GB_RETURN_IF(pos != kv->delta.next, log, GB_ERR_INTERNAL, "kv: a pass at position %u, the recurrent state is at %u", pos,
               kv->delta.next);
  kv->delta.unlogged = false;
  if (!p.delta_log) return GB_OK;
  // A pass longer than the log (a prompt chunk: never rolled back) is not
  // logged; the checkpoint becomes the state after it (kv_delta_end).
  if (m > p.delta_log) {
    kv->delta.unlogged = true;
    return GB_OK;
  }
  while (kv->delta.next + m - kv->delta.ck_pos > p.delta_log) delta_replay(kv, kv->delta.ck, kv->delta.ck_pos++);
  return GB_OK;
}

void kv_delta_end(KvPool *kv, uint32_t pos, uint32_t m) {
  const KvPlan &p = kv->plan;
  if (!p.delta_layers) return;
  kv->delta.next = pos + m;
  if (kv->delta.unlogged) {
    memcpy(kv->delta.ck, kv->delta.s, sizeof(float) * p.delta_layers * p.delta_state());
    kv->delta.ck_pos = kv->delta.next;
    kv->delta.unlogged = false;
  }
}

uint32_t kv_room(const KvPool *kv) {
  return kv->plan.max_tokens > kv->n_tokens ? kv->plan.max_tokens - kv->n_tokens : 0;
}

// ---- records -------------------------------------------------------------------

uint16_t kv_quantize_row(uint8_t *out, const float *x, uint32_t d, uint32_t bits) {
  const int32_t qmax = (1 << (bits - 1)) - 1, qmin = -qmax - 1;
  float amax = 0.0f;
  for (uint32_t j = 0; j < d; j++) {
    const float a = fabsf(x[j]);
    amax = a > amax ? a : amax;  // NaN compares false: ignored
  }
  float s = amax / (float)qmax;
  if (!(s >= 1e-8f)) s = 1e-8f;  // scale floor (an all-zero row would give 0)
  uint16_t h = f32_to_f16(s);
  if ((h & 0x7c00) == 0x7c00) h = 0x7bff;  // largest finite binary16
  const float sf = f16_to_f32(h);
  const float inv = sf > 0.0f ? 1.0f / sf : 0.0f;
  int8_t q[GB_KV_QUANT_MAX_HEAD_DIM];
  for (uint32_t j = 0; j < d; j++) {
    float v = roundf(x[j] * inv);
    if (v != v) v = 0.0f;
    v = v < (float)qmin ? (float)qmin : (v > (float)qmax ? (float)qmax : v);
    q[j] = (int8_t)v;
  }
  const int32_t off = qmax + 1;
  if (bits == 8) {
    memcpy(out, q, d);
  } else if (bits == 4) {
    const uint32_t hd = d / 2;
    for (uint32_t j = 0; j < hd; j++) out[j] = (uint8_t)((q[j] + off) | ((q[j + hd] + off) << 4));
  } else if (bits == 3) {
    const uint32_t qd = d / 4, e = d / 8;
    for (uint32_t j = 0; j < qd; j++) {
      uint8_t b = 0;
      for (uint32_t k = 0; k < 4; k++) b = (uint8_t)(b | (((q[j + k * qd] + off) & 3) << (2 * k)));
      out[j] = b;
    }
    for (uint32_t j = 0; j < e; j++) {
      uint8_t b = 0;
      for (uint32_t k = 0; k < 8; k++) b = (uint8_t)(b | ((((q[j + k * e] + off) >> 2) & 1) << k));
      out[qd + j] = b;
    }
  } else {
    const uint32_t qd = d / 4;
    for (uint32_t j = 0; j < qd; j++) {
      uint8_t b = 0;
      for (uint32_t k = 0; k < 4; k++) b = (uint8_t)(b | ((q[j + k * qd] + off) << (2 * k)));
      out[j] = b;
    }
  }
  return h;
}

namespace kvb {

void insert(KvPool *kv, KvLayer &y, uint32_t lv, uint32_t slot) {
  KvBucket &b = y.bucket[lv];
  const uint32_t j = b.count;
  if (j % kv->plan.tpp[lv] == 0) b.pages[j / kv->plan.tpp[lv]] = y.free_pages[--y.n_free];
  b.count = j + 1;
  b.slots[j] = slot;
  y.level[slot] = (uint8_t)lv;
  y.index[slot] = j;
}

void remove(KvPool *kv, KvLayer &y, uint32_t slot) {
  const uint32_t lv = y.level[slot], j = y.index[slot];
  KvBucket &b = y.bucket[lv];
  const uint32_t last = b.count - 1;
  if (j != last) {
    memcpy(record(kv, y, lv, j), record(kv, y, lv, last), kv->plan.rec[lv]);
    const uint32_t moved = b.slots[last];
    b.slots[j] = moved;
    y.index[moved] = j;
  }
  b.count = last;
  if (last % kv->plan.tpp[lv] == 0) y.free_pages[y.n_free++] = b.pages[last / kv->plan.tpp[lv]];
  y.level[slot] = kLvNone;
}

// Write K rows then V rows (R heads of d each, in kv->tmp layout) as a
// record of level lv at p, their scales (2 * R) at scales.
void write_record(const KvPool *kv, uint8_t *p, uint16_t *scales, uint32_t lv, const float *key, const float *value, uint32_t R,
                  uint32_t d) {
  for (uint32_t kvi = 0; kvi < 2; kvi++) {
    const float *x = kvi ? value : key;
    const uint32_t bits = kvi ? kv->plan.vbits[lv] : kv->plan.kbits[lv];
    const uint32_t rb = d * bits / 8;
    for (uint32_t r = 0; r < R; r++, p += rb) {
      const float *row = x + (size_t)r * d;
      if (bits == 32) {
        memcpy(p, row, (size_t)d * 4);
      } else if (bits == 16) {
        for (uint32_t j = 0; j < d; j++) {
          const uint16_t h = f32_to_f16(row[j]);
          memcpy(p + 2 * j, &h, 2);
        }
      } else {
        scales[kvi * R + r] = kv_quantize_row(p, row, d, bits);
      }
    }
  }
}

// Write K rows then V rows (kv_dim each, in kv->tmp layout) at the slot's level.
void write_rows(KvPool *kv, KvLayer &y, uint32_t slot, const float *key, const float *value) {
  const uint32_t lv = y.level[slot];
  write_record(kv, record(kv, y, lv, y.index[slot]), y.scales ? y.scales + (size_t)slot * 2 * kv->n_kv_heads : nullptr, lv,
               key, value, kv->n_kv_heads, kv->head_dim);
}

// Step a token of layer y down to level `to` (requantized from its stored values).
void step_down(KvPool *kv, const gb_kernels &k, KvLayer &y, uint32_t slot, uint32_t to) {
  const uint32_t lv = y.level[slot], R = kv->n_kv_heads, d = kv->head_dim;
  k.kv_dequant(kv->tmp, record(kv, y, lv, y.index[slot]), &slot, y.scales, 1, R, d, kv->plan.kbits[lv], kv->plan.vbits[lv]);
  remove(kv, y, slot);
  insert(kv, y, to, slot);
  write_rows(kv, y, slot, kv->tmp, kv->tmp + (size_t)R * d);
  kv->requant++;
}

}  // namespace kvb


gb_status kv_begin(KvPool *kv, const gb_kernels &k, uint32_t pos, const Logger &log) {
  const KvPlan &p = kv->plan;
  if (p.importance) kv_importance(kv);
  // Room in the pool: at most max_tokens tokens (the minimum precision for
  // all unprotected ones); beyond that evict or report the context full.
  kv->newest = pos;  // protection windows are relative to the incoming token
  while (kv->n_tokens + 1 > p.max_tokens || kv->n_free_slots == 0) {
    uint32_t victim = 0;
    if (!kv->opt.evict || !pick_evict(kv, &victim)) {
      kv->newest = pos > 0 ? pos - 1 : 0;
      return fail(log, GB_ERR_CONTEXT_FULL, "KV pool full: %u tokens cached, %llu bytes; no token can be added%s", kv->n_tokens,
                  (unsigned long long)p.pool_bytes, kv->opt.evict ? " (every cached token is protected)" : "");
    }
    evict(kv, victim);
  }
  // SEED clocks: per layer, plus an early run on importance drift.
  bool drift = false;
  if (p.policy == GB_KV_SEED && kv->n_tokens > 0) {
    drift = kv->opt.drift_kl > 0.0f && importance_drift(kv) > kv->opt.drift_kl;
  }
  const bool prot = pos < kv->opt.k_critical || kv->opt.k_tail > 0;
  const uint32_t slot = kv->free_slots[kv->n_free_slots - 1];
  bool snap = drift;
  for (uint32_t l = 0; l < kv->n_layers; l++) {
    KvLayer &y = kv->layers[l];
    if (p.policy == GB_KV_SEED && kv->n_tokens > 0 && (drift || kv->step >= y.next_realloc)) {
      snap = true;
      kv_seed_realloc(kv, k, l, 1);
      const uint64_t f1 = (uint64_t)kv->opt.f_base * (1 + l / 4), f2 = kv->n_tokens / 8 > 32 ? kv->n_tokens / 8 : 32;
      y.next_realloc = kv->step + (f1 > f2 ? f1 : f2);
    }
    uint32_t entry = p.entry;
    bool ok = make_room(kv, k, l, entry);
    while (!ok && !prot && next_down(p, entry) != kLvNone) {
      entry = next_down(p, entry);
      ok = make_room(kv, k, l, entry);
    }
    if (!ok) {  // not expected after the max_tokens check: undo this token's inserts
      for (uint32_t u = 0; u < l; u++) remove(kv, kv->layers[u], slot);
      kv->newest = pos > 0 ? pos - 1 : 0;
      return fail(log, GB_ERR_CONTEXT_FULL, "KV pool: layer %u has no room for another token (%u tokens, pages %u/%u, levels 2/3/4/8: %u/%u/%u/%u)", l,
                  kv->n_tokens, used_pages(kv, y), p.n_pages, y.bucket[0].count, y.bucket[1].count, y.bucket[2].count, y.bucket[3].count);
    }
    insert(kv, y, entry, slot);
    if (y.ema) y.ema[slot] = 0.0f;
    if (y.rank_ref) {
      y.rank_ref[slot] = -1.0f;
      y.rank_cnt[slot] = 0;
    }
  }
  if (snap)  // the distribution the next drift check compares against
    for (uint32_t s = 0; s < p.cap; s++) kv->snap[s] = kv->imp[s];
  kv->n_free_slots--;
  kv->n_tokens++;
  kv->pos[slot] = pos;
  kv->birth[slot] = kv->step;
  if (kv->wema) {
    kv->wema[slot] = 0.0f;
    kv->wsum[slot] = 0.0f;
    kv->imp[slot] = 0.0f;
  }
  if (kv->snap) kv->snap[slot] = 0.0f;
  kv->cur_slot = slot;
  if (p.ring_layers) kv->ring.pos[pos % p.ring_cap] = pos;  // replaces position pos - ring_cap
  return GB_OK;
}


void kv_attn_scratch_carve(KvAttnScratch *ws, Arena &a, uint32_t n_heads, uint32_t head_dim, uint32_t cap) {
  ws->scores = a.array<float>((size_t)n_heads * cap);
  ws->score_slot = a.array<uint32_t>(cap);
  ws->m = a.array<float>(n_heads);
  ws->l = a.array<float>(n_heads);
  ws->acc = a.array<float>((size_t)n_heads * head_dim);
  ws->q8 = a.array<int8_t>((size_t)n_heads * head_dim);
  ws->q8_d = a.array<float>(n_heads);
  ws->head_mean = a.array<float>(n_heads);
}

namespace {

// The streaming softmax's start for query q through ws: scales are the
// layer's (per slot or ring index); quantized: the query per head as int8
// for the integer key dot products.
void attn_start(const KvPool *kv, uint32_t R, uint32_t d, const uint16_t *scales, bool quantized, const float *q,
                const KvAttnScratch &ws, gb_attn_state &st) {
  const uint32_t H = kv->n_heads;
  st.n_heads = H;
  st.n_kv_heads = R;
  st.head_dim = d;
  st.scale = kv->attn_scale > 0.0f ? kv->attn_scale : 1.0f / sqrtf((float)d);
  st.q = q;
  st.q8 = ws.q8;
  st.q8_d = ws.q8_d;
  st.scales = scales;
  st.m = ws.m;
  st.l = ws.l;
  st.acc = ws.acc;
  st.scores = ws.scores;
  st.score_stride = kv_attn_cap(kv->plan);
  for (uint32_t h = 0; h < H; h++) {
    ws.m[h] = -INFINITY;
    ws.l[h] = 0.0f;
  }
  memset(ws.acc, 0, sizeof(float) * H * d);
  if (quantized) {
    for (uint32_t h = 0; h < H; h++) {
      const float *qh = q + (size_t)h * d;
      float amax = 0.0f;
      for (uint32_t j = 0; j < d; j++) amax = fabsf(qh[j]) > amax ? fabsf(qh[j]) : amax;
      const float dq = amax / 127.0f, inv = dq > 0.0f ? 1.0f / dq : 0.0f;
      ws.q8_d[h] = dq;
      for (uint32_t j = 0; j < d; j++) {
        // Casting NaN or a value out of range to an integer is undefined: a
        // non-finite query (NaN, inf times inv = 0) gives 0, and a subnormal
        // amax (inv = inf) is clamped to +-127.
        float v = roundf(qh[j] * inv);
        v = v != v ? 0.0f : v > 127.0f ? 127.0f : v < -127.0f ? -127.0f : v;
        ws.q8[(size_t)h * d + j] = (int8_t)v;
      }
    }
  }
}

constexpr uint32_t kQuantLevels = (1u << kLv2) | (1u << kLv3) | (1u << kLv4) | (1u << kLv8);

// The attention of one query through ws (streaming softmax over the
// layer's buckets); returns how many records it scored (their slots in
// ws.score_slot, masses in mass and wmass when given).
uint32_t attend(const KvPool *kv, const gb_kernels &k, uint32_t layer, const float *q, float *out, uint32_t hide,
                const KvAttnScratch &ws, float *mass, float *wmass) {
  const KvPlan &p = kv->plan;
  const KvLayer &y = kv->layers[layer];
  gb_attn_state st;
  attn_start(kv, kv->n_kv_heads, kv->head_dim, y.scales, (p.levels & kQuantLevels) != 0, q, ws, st);
  uint32_t n = 0;
  for (uint32_t lv = 0; lv < kLevels; lv++) {
    const KvBucket &b = y.bucket[lv];
    // A batch's later tokens are the newest records of the entry level.
    const uint32_t count = lv == p.entry && hide <= b.count ? b.count - hide : b.count;
    if (!(p.levels >> lv & 1) || count == 0) continue;
    const uint32_t tpp = p.tpp[lv];
    const bool joins = tpp * p.rec[lv] == p.page_bytes;  // consecutive pages read as one run
    for (uint32_t j = 0; j < count;) {
      const uint32_t pg = b.pages[j / tpp];
      uint32_t cnt = tpp < count - j ? tpp : count - j;
      while (joins && j + cnt < count && b.pages[(j + cnt) / tpp] == pg + cnt / tpp) {
        const uint32_t more = count - j - cnt;
        cnt += tpp < more ? tpp : more;
      }
      k.attn_run(&st, y.pages + (size_t)pg * p.page_bytes, b.slots + j, cnt, p.kbits[lv], p.vbits[lv], n);
      memcpy(ws.score_slot + n, b.slots + j, sizeof(uint32_t) * cnt);
      n += cnt;
      j += cnt;
    }
  }
  k.attn_finish(&st, n, kv->head_w, out, mass, wmass, ws.head_mean);
  return n;
}

// The attention of one query of sliding-window layer r (ring index) over
// the ring's records of positions (q - window, q], q = newest - hide, in
// position order, in runs of consecutive positions that end at every
// multiple of kRingBlock (ring_cap is one: a run never wraps).
void attend_ring(const KvPool *kv, const gb_kernels &k, uint32_t r, const float *q, float *out, uint32_t hide,
                 const KvAttnScratch &ws) {
  const KvPlan &p = kv->plan;
  const uint32_t cap = p.ring_cap, lv = p.ring_level, rec = p.ring_rec, R2 = 2 * p.ring_kv_heads;
  const uint16_t *scales = kv->ring.scales ? kv->ring.scales + (size_t)r * cap * R2 : nullptr;
  const uint8_t *data = kv->ring.data + (size_t)r * cap * rec;
  gb_attn_state st;
  attn_start(kv, p.ring_kv_heads, p.ring_head_dim, scales, (kQuantLevels >> lv & 1) != 0, q, ws, st);
  const uint32_t qpos = kv->newest >= hide ? kv->newest - hide : 0;
  const uint32_t lo = qpos + 1 > p.ring_window ? qpos + 1 - p.ring_window : 0;
  const uint32_t *pos = kv->ring.pos;
  uint32_t n = 0;
  for (uint64_t t = lo; t <= qpos;) {
    const uint32_t i = (uint32_t)(t % cap);
    if (pos[i] != t) {  // not entered (or an older position's record)
      t++;
      continue;
    }
    const uint64_t block_end = (t / kRingBlock + 1) * kRingBlock, end = block_end < (uint64_t)qpos + 1 ? block_end : (uint64_t)qpos + 1;
    uint64_t u = t + 1;
    while (u < end && pos[u % cap] == u) u++;
    const uint32_t cnt = (uint32_t)(u - t);
    k.attn_run(&st, data + (size_t)i * rec, kv->ring.ids + i, cnt, p.kbits[lv], p.vbits[lv], n);
    n += cnt;
    t = u;
  }
  k.attn_finish(&st, n, kv->head_w, out, nullptr, nullptr, ws.head_mean);
}

}  // namespace

void kv_attend_with(const KvPool *kv, const gb_kernels &k, uint32_t layer, const float *q, float *out, uint32_t hide,
                    const KvAttnScratch &ws) {
  const uint32_t li = kv->layer_map[layer];
  if (li & kRingBit)
    attend_ring(kv, k, li & ~kRingBit, q, out, hide, ws);
  else
    attend(kv, k, li, q, out, hide, ws, nullptr, nullptr);
}

void kv_attend(KvPool *kv, const gb_kernels &k, uint32_t model_layer, const float *q, float *out, uint32_t hide) {
  const uint32_t layer = kv->layer_map[model_layer];
  if (layer & kRingBit) {
    attend_ring(kv, k, layer & ~kRingBit, q, out, hide, kv->att);
    return;
  }
  const KvPlan &p = kv->plan;
  const uint32_t H = kv->n_heads;
  const uint32_t n = attend(kv, k, layer, q, out, hide, kv->att, kv->mass, kv->wmass);
  if (!p.importance) return;
  // EMA of each token's attention mass and of each head's mean attention.
  KvLayer &yw = kv->layers[layer];
  const float g = kv->opt.gamma, gh = kv->opt.gamma_head;
  for (uint32_t i = 0; i < n; i++) {
    const uint32_t s = kv->att.score_slot[i];
    yw.ema[s] = g * yw.ema[s] + (1.0f - g) * kv->mass[i];
    kv->wsum[s] += kv->wmass[i];
  }
  for (uint32_t h = 0; h < H; h++) yw.head_ema[h] = gh * yw.head_ema[h] + (1.0f - gh) * kv->att.head_mean[h];
}

void kv_end(KvPool *kv) {
  const KvPlan &p = kv->plan;
  kv->step++;
  if (!p.importance) return;
  const KvLayer &y0 = kv->layers[0];
  const float g = kv->opt.gamma, invL = 1.0f / (float)kv->n_layers;
  for (uint32_t s = 0; s < p.cap; s++) {
    if (y0.level[s] == kLvNone) continue;
    kv->wema[s] = g * kv->wema[s] + (1.0f - g) * kv->wsum[s] * invL;
    kv->wsum[s] = 0.0f;
  }
  // Head weights w_h: the layers' head EMAs, averaged, normalised by their mean.
  const uint32_t H = kv->n_heads;
  float mean = 0.0f;
  for (uint32_t h = 0; h < H; h++) {
    float e = 0.0f;
    for (uint32_t l = 0; l < kv->n_layers; l++) e += kv->layers[l].head_ema[h];
    kv->head_w[h] = e * invL;
    mean += kv->head_w[h];
  }
  mean /= (float)H;
  for (uint32_t h = 0; h < H; h++) kv->head_w[h] /= mean + 1e-8f;
}

bool kv_batchable(const KvPool *kv, uint32_t pos, uint32_t m) {
  const KvPlan &p = kv->plan;
  // The batch's last token replaces position pos + m - 1 - ring_cap, which
  // its first query (reading from pos - window + 1) must not need.
  const bool ring_ok = !p.ring_layers || (uint64_t)m + p.ring_window <= (uint64_t)p.ring_cap + 1 || (uint64_t)pos + m <= p.ring_cap;
  return !kv_policy_multi_level(p.policy) && kv_room(kv) >= m && kv->n_free_slots >= m && ring_ok;
}

gb_status kv_begin_batch(KvPool *kv, const gb_kernels &k, uint32_t pos, uint32_t m, const Logger &log) {
  for (uint32_t i = 0; i < m; i++) {
    const gb_status st = kv_begin(kv, k, pos + i, log);
    if (st != GB_OK) {
      kv_truncate(kv, pos);
      return st;
    }
    kv->batch_slot[i] = kv->cur_slot;
  }
  return GB_OK;
}

void kv_store_slot(KvPool *kv, uint32_t model_layer, uint32_t slot, const float *key, const float *value) {
  const uint32_t li = kv->layer_map[model_layer];
  if (!(li & kRingBit)) {
    write_rows(kv, kv->layers[li], slot, key, value);
    return;
  }
  const KvPlan &p = kv->plan;
  const size_t at = (size_t)(li & ~kRingBit) * p.ring_cap + kv->pos[slot] % p.ring_cap;
  write_record(kv, kv->ring.data + at * p.ring_rec, kv->ring.scales ? kv->ring.scales + at * 2 * p.ring_kv_heads : nullptr,
               p.ring_level, key, value, p.ring_kv_heads, p.ring_head_dim);
}

void kv_truncate(KvPool *kv, uint32_t pos) {
  // Newest first: in a single-level bucket each removal takes the last
  // record, so the others keep their places and order.
  const KvLayer &y0 = kv->layers[0];
  for (;;) {
    uint32_t best = UINT32_MAX, slot = 0;
    for (uint32_t s = 0; s < kv->plan.cap; s++)
      if (y0.level[s] != kLvNone && kv->pos[s] >= pos && (best == UINT32_MAX || kv->pos[s] > best)) {
        best = kv->pos[s];
        slot = s;
      }
    if (best == UINT32_MAX) break;
    for (uint32_t l = 0; l < kv->n_layers; l++) remove(kv, kv->layers[l], slot);
    kv->free_slots[kv->n_free_slots++] = slot;
    kv->n_tokens--;
  }
  for (uint32_t i = 0; i < kv->plan.ring_cap; i++)
    if (kv->ring.pos[i] != kRingEmpty && kv->ring.pos[i] >= pos) kv->ring.pos[i] = kRingEmpty;
  for (uint32_t i = 0; i < kv->plan.conv_cap; i++)
    if (kv->conv.pos[i] != kRingEmpty && kv->conv.pos[i] >= pos) kv->conv.pos[i] = kRingEmpty;
  // The Gated DeltaNet state: the checkpoint, then the logged positions up
  // to pos (a pool without a log is never rolled back: only the
  // speculative gear does, and its pools keep one).
  const KvPlan &dp = kv->plan;
  if (dp.delta_layers && pos < kv->delta.next && dp.delta_log && pos >= kv->delta.ck_pos) {
    memcpy(kv->delta.s, kv->delta.ck, sizeof(float) * dp.delta_layers * dp.delta_state());
    for (uint32_t q = kv->delta.ck_pos; q < pos; q++) delta_replay(kv, kv->delta.s, q);
    kv->delta.next = pos;
  }
  kv->newest = pos > 0 ? pos - 1 : 0;
}

void kv_stats(const KvPool *kv, KvStats *st) {
  const KvPlan &p = kv->plan;
  memset(st, 0, sizeof *st);
  st->pool_bytes = p.pool_bytes;
  st->tokens = kv->n_tokens;
  uint64_t used = 0;
  for (uint32_t l = 0; l < kv->n_layers; l++) {
    used += (uint64_t)kv->n_tokens * p.scale_bytes;
    for (uint32_t lv = 0; lv < kLevels; lv++) {
      const uint32_t c = kv->layers[l].bucket[lv].count;
      used += (uint64_t)c * p.rec[lv];
      st->at_bits[lv] += c;
    }
  }
  uint32_t in_ring = 0;
  for (uint32_t i = 0; i < p.ring_cap; i++) in_ring += kv->ring.pos[i] != kRingEmpty ? 1 : 0;
  used += (uint64_t)in_ring * p.ring_layers * (p.ring_rec + p.ring_scale_bytes);
  if (p.ring_layers) st->at_bits[p.ring_level] += in_ring * p.ring_layers;
  st->used_bytes = used;
  const double elems = ((double)kv->n_tokens * kv->n_layers * kv->n_kv_heads * kv->head_dim +
                        (double)in_ring * p.ring_layers * p.ring_kv_heads * p.ring_head_dim) *
                       2.0;
  st->bits_per_element = elems > 0 ? 8.0 * (double)used / elems : 0.0;
}

}  // namespace gb

