// kv.cpp — the KV pool (see kv.h): sizing, buckets of packed records,
// quantization, fused attention over the buckets, importance statistics and
// the allocation policies.
//
// Policies, as they decide which token loses precision when the pool needs
// room for the next one (every decision is page-exact; see kv.h):
//   uniform / f16 / f32: one level; no room left = context full (or evict).
//   WINDOW:  step down (one link of the chain 8 -> 4 -> 3 -> 2) the token
//            outside the recent window with the least importance x error
//            increase per byte saved, error(b) ~ 1 / qmax(b)^2 (the squared
//            step of this symmetric quantizer, = 4^-b up to a constant for
//            b >= 3, harsher for the ternary 2-bit level).
//   RECENCY: the same with importance = exp(-age / T) (no attention).
//   SEED:    at each layer's clock (or a drift of the importance
//            distribution, or when room runs out) the marginal-gain
//            greedy heap re-plans every token from the minimum up the
//            chain, capped by its current level (data below it is gone).
//
// Why one spare (transit) page is enough: a step-down removes a record
// (which may free a page) and then inserts a smaller one (which may take
// one). From a state using at most n_pages - 1, k consecutive step-downs
// from level a to level b take at most ceil(k / tpp_b) pages and free at
// least floor(k / tpp_a), with tpp_b > tpp_a, so the state never needs
// more than n_pages.
#include "kv.h"

#include <math.h>
#include <string.h>

#include <algorithm>

#include "f16.h"
#include "gearbx_port.h"
#include "model.h"

namespace gb {
namespace {

bool multi_level(uint32_t policy) { return kv_policy_multi_level(policy); }

// Relative squared error of a level's rows (step^2 ~ 1 / qmax^2).
const float kErr[kLevels] = {1.0f, 1.0f / 9.0f, 1.0f / 49.0f, 1.0f / 16129.0f, 0.0f, 0.0f};

inline uint32_t pages_for(uint32_t count, uint32_t tpp) { return (count + tpp - 1) / tpp; }

}  // namespace

// ---- sizing ---------------------------------------------------------------

gb_status kv_plan(const Meta &c, const gb_session_options &o, const Logger &log, KvPlan *p) {
  const gb_kv_options &k = o.kv;
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
  const uint32_t R = c.n_kv_heads, d = c.head_dim, L = c.n_layers, n_ctx = o.n_ctx;
  GB_RETURN_IF(quantized && (d % 8 != 0 || d > GB_KV_QUANT_MAX_HEAD_DIM), log, GB_ERR_INVALID_ARGUMENT,
               "kv policy %s needs a head_dim that is a multiple of 8 and at most %u (model: %u)", pname,
               (unsigned)GB_KV_QUANT_MAX_HEAD_DIM, d);
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
  const bool multi = multi_level(policy);
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
  const uint64_t fp16 = 2ull * L * n_ctx * R * d * 2;
  if (budget) {
    const uint64_t total = k.pool_bytes ? k.pool_bytes : (uint64_t)((double)k.beta * (double)fp16);
    const uint64_t layer = total / L;
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
  p->pool_bytes = p->layer_bytes * L;
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

void kv_carve(KvPool *kv, Arena &a, const Meta &c, const gb_session_options &o, const KvPlan &p) {
  kv->plan = p;
  kv->opt = o.kv;
  kv->n_layers = c.n_layers;
  kv->n_heads = c.n_heads;
  kv->n_kv_heads = c.n_kv_heads;
  kv->head_dim = c.head_dim;
  kv->n_ctx = o.n_ctx;
  const uint32_t L = c.n_layers, H = c.n_heads, cap = p.cap, R = c.n_kv_heads, d = c.head_dim;
  const bool seed = p.policy == GB_KV_SEED;
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
  kv_attn_scratch_carve(&kv->att, a, H, d, cap);
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

namespace {

inline uint8_t *record(const KvPool *kv, const KvLayer &y, uint32_t lv, uint32_t j) {
  const KvPlan &p = kv->plan;
  return y.pages + (size_t)y.bucket[lv].pages[j / p.tpp[lv]] * p.page_bytes + (size_t)(j % p.tpp[lv]) * p.rec[lv];
}

inline uint32_t used_pages(const KvPool *kv, const KvLayer &y) { return kv->plan.n_pages - y.n_free; }

// Pages gained (+1), or not, by adding a record to level lv.
inline uint32_t insert_cost(const KvPool *kv, const KvLayer &y, uint32_t lv) {
  return y.bucket[lv].count % kv->plan.tpp[lv] == 0 ? 1u : 0u;
}
// Page balance of moving one record from level a to level b.
inline int32_t move_delta(const KvPool *kv, const KvLayer &y, uint32_t a, uint32_t b) {
  const int32_t freed = (y.bucket[a].count - 1) % kv->plan.tpp[a] == 0 ? 1 : 0;
  return (int32_t)insert_cost(kv, y, b) - freed;
}

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

// Write K rows then V rows (kv_dim each, in kv->tmp layout) at the slot's level.
void write_rows(KvPool *kv, KvLayer &y, uint32_t slot, const float *key, const float *value) {
  const uint32_t lv = y.level[slot], R = kv->n_kv_heads, d = kv->head_dim;
  uint8_t *p = record(kv, y, lv, y.index[slot]);
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
        y.scales[(size_t)slot * 2 * R + kvi * R + r] = kv_quantize_row(p, row, d, bits);
      }
    }
  }
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

inline uint32_t next_down(const KvPlan &p, uint32_t lv) {
  while (lv > 0) {
    lv--;
    if (p.levels >> lv & 1) return lv;
  }
  return kLvNone;
}
inline uint32_t next_up(const KvPlan &p, uint32_t lv) {
  for (uint32_t u = lv + 1; u < kLevels; u++)
    if (p.levels >> u & 1) return u;
  return kLvNone;
}

// Protection by position, not token id (no tokenizer needed): the first k_critical
// tokens and the k_tail most recent ones, relative to the newest token.
inline bool is_protected(const KvPool *kv, uint32_t pos) {
  return pos < kv->opt.k_critical || (uint64_t)pos + kv->opt.k_tail > kv->newest;
}
inline bool in_window(const KvPool *kv, uint32_t pos) { return (uint64_t)pos + kv->opt.window > kv->newest; }

// WINDOW / RECENCY / SEED fallback: the cheapest single step-down of layer y
// that the pages allow: importance x error increase per byte saved, over
// every source level and every lower level (the next link of the chain is
// by far the cheapest per byte whenever it is possible; a longer drop is
// taken when the chain's next bucket would need a page the pool lacks).
bool pick_step_down(KvPool *kv, const KvLayer &y, bool allow_window, uint32_t *slot_out, uint32_t *to_out) {
  const KvPlan &p = kv->plan;
  float best = INFINITY;
  bool found = false;
  for (uint32_t lv = 0; lv < kLevels; lv++) {
    if (!(p.levels >> lv & 1) || y.bucket[lv].count == 0 || next_down(p, lv) == kLvNone) continue;
    // The least important eligible token of this level.
    const KvBucket &b = y.bucket[lv];
    uint32_t cand = 0, eligible = 0;
    bool have = false;
    float ci = 0.0f;
    for (uint32_t j = 0; j < b.count; j++) {
      const uint32_t s = b.slots[j], pos = kv->pos[s];
      if (is_protected(kv, pos) || (!allow_window && in_window(kv, pos))) continue;
      eligible++;
      const float ii = kv->imp[s] > kv->opt.eps_importance ? kv->imp[s] : kv->opt.eps_importance;  // importance floor
      if (!have || ii < ci) {
        cand = s;
        ci = ii;
        have = true;
      }
    }
    if (!have) continue;
    for (uint32_t to = next_down(p, lv); to != kLvNone; to = next_down(p, to)) {
      const int64_t after = (int64_t)used_pages(kv, y) + move_delta(kv, y, lv, to);
      if (after > (int64_t)p.n_pages) continue;
      // Taking the last spare page is safe only if this bucket can then
      // empty its own last page into the destination's new one (every
      // further move from it frees, or needs no, page): the drain rule.
      if (after == (int64_t)p.n_pages && after > (int64_t)used_pages(kv, y) && eligible < (b.count - 1) % p.tpp[lv] + 1) continue;
      const float sc = ci * (kErr[to] - kErr[lv]) / (float)(p.rec[lv] - p.rec[to]);
      if (!found || sc < best) {
        best = sc;
        found = true;
        *slot_out = cand;
        *to_out = to;
      }
    }
  }
  return found;
}

// ---- SEED allocator (marginal-gain greedy re-plan) --------------------------------

inline float utility(float bits, float alpha) { return powf(bits, alpha); }

void heap_push(KvPool *kv, uint32_t *n, float score, uint32_t slot) {
  KvPool::HeapItem *h = kv->heap;
  uint32_t i = (*n)++;
  while (i > 0) {
    const uint32_t parent = (i - 1) / 2;
    if (h[parent].score >= score) break;
    h[i] = h[parent];
    i = parent;
  }
  h[i].score = score;
  h[i].slot = slot;
}

KvPool::HeapItem heap_pop(KvPool *kv, uint32_t *n) {
  KvPool::HeapItem *h = kv->heap;
  const KvPool::HeapItem top = h[0];
  const KvPool::HeapItem last = h[--(*n)];
  uint32_t i = 0;
  for (;;) {
    uint32_t c = 2 * i + 1;
    if (c >= *n) break;
    if (c + 1 < *n && h[c + 1].score > h[c].score) c++;
    if (h[c].score <= last.score) break;
    h[i] = h[c];
    i = c;
  }
  if (*n > 0) h[i] = last;
  return top;
}

uint32_t plan_pages(const KvPlan &p, const uint32_t *counts) {
  uint32_t n = 0;
  for (uint32_t lv = 0; lv < kLevels; lv++)
    if (p.levels >> lv & 1) n += pages_for(counts[lv], p.tpp[lv]);
  return n;
}

}  // namespace

uint32_t kv_pages_used(const KvPool *kv, uint32_t layer) { return used_pages(kv, kv->layers[layer]); }

void kv_seed_realloc(KvPool *kv, const gb_kernels &k, uint32_t layer, uint32_t extra_entry) {
  const uint64_t t0 = gb_port_now_ns();
  const KvPlan &p = kv->plan;
  const gb_kv_options &o = kv->opt;
  KvLayer &y = kv->layers[layer];
  kv->reallocs++;
  // Resident tokens of this layer.
  uint32_t n = 0;
  for (uint32_t lv = 0; lv < kLevels; lv++)
    for (uint32_t j = 0; j < y.bucket[lv].count; j++) kv->order[n++] = y.bucket[lv].slots[j];
  if (n == 0) return;
  // Hysteresis: percentile ranks by importance; a token may move
  // only after its rank moved >= r for m consecutive checks.
  const float *imp = kv->imp;
  std::sort(kv->order, kv->order + n, [imp](uint32_t a, uint32_t b) { return imp[a] < imp[b] || (imp[a] == imp[b] && a < b); });
  uint8_t *plan = kv->planned;
  uint32_t counts[kLevels] = {0};
  for (uint32_t i = 0; i < n; i++) {
    const uint32_t s = kv->order[i];
    const float pr = n > 1 ? (float)i / (float)(n - 1) : 0.0f;
    bool eligible;
    if (y.rank_ref[s] < 0.0f) {
      eligible = true;
    } else {
      y.rank_cnt[s] = fabsf(pr - y.rank_ref[s]) >= o.rank_threshold ? (uint8_t)(y.rank_cnt[s] + 1) : 0;
      eligible = y.rank_cnt[s] >= o.rank_intervals;
    }
    if (eligible) {
      y.rank_ref[s] = pr;
      y.rank_cnt[s] = 0;
    }
    const bool fixed = is_protected(kv, kv->pos[s]);
    plan[s] = fixed || !eligible ? y.level[s] : p.min;
    counts[plan[s]]++;
  }
  const uint32_t limit = p.n_pages - p.reserve;
  counts[p.entry] += extra_entry;
  bool pinned = true;
  if (plan_pages(p, counts) > limit) {  // the pinned tokens do not leave room: everyone may move
    pinned = false;
    memset(counts, 0, sizeof counts);
    counts[p.entry] += extra_entry;
    for (uint32_t i = 0; i < n; i++) {
      const uint32_t s = kv->order[i];
      plan[s] = is_protected(kv, kv->pos[s]) ? y.level[s] : p.min;
      counts[plan[s]]++;
    }
  }
  // Marginal-gain greedy: upgrades up the chain, capped at the current level.
  uint32_t hn = 0;
  auto score = [&](uint32_t s, uint32_t from) {
    const uint32_t to = next_up(p, from);
    const float b0 = (float)kv_level_bits(from), b1 = (float)kv_level_bits(to);
    const float ii = imp[s] > o.eps_importance ? imp[s] : o.eps_importance;
    return ii * (utility(b1, o.alpha) - utility(b0, o.alpha)) / (b1 - b0);
  };
  for (uint32_t i = 0; i < n; i++) {
    const uint32_t s = kv->order[i];
    if (plan[s] < y.level[s] && (!pinned || plan[s] == p.min)) heap_push(kv, &hn, score(s, plan[s]), s);
  }
  while (hn > 0) {
    const KvPool::HeapItem it = heap_pop(kv, &hn);
    const uint32_t s = it.slot, from = plan[s], to = next_up(p, from);
    if (to == kLvNone || to > y.level[s]) continue;
    counts[from]--;
    counts[to]++;
    if (plan_pages(p, counts) > limit) {  // does not fit: skip this candidate
      counts[to]--;
      counts[from]++;
      continue;
    }
    plan[s] = (uint8_t)to;
    if (to < y.level[s]) heap_push(kv, &hn, score(s, to), s);
  }
  // Apply the step-downs (requantize directly to the planned level); a move
  // the pages do not allow yet waits for a later pass.
  for (int pass = 0; pass < 4; pass++) {
    bool left = false;
    for (uint32_t i = 0; i < n; i++) {
      const uint32_t s = kv->order[i];
      if (plan[s] >= y.level[s]) continue;
      if ((int64_t)used_pages(kv, y) + move_delta(kv, y, y.level[s], plan[s]) > (int64_t)p.n_pages) {
        left = true;
        continue;
      }
      step_down(kv, k, y, s, plan[s]);
    }
    if (!left) break;
  }
  kv->alloc_ns += gb_port_now_ns() - t0;
}

// ---- importance (layer mean, recency, head weighting) -------------------------------

void kv_importance(KvPool *kv) {
  const KvLayer &y0 = kv->layers[0];
  const uint32_t cap = kv->plan.cap, L = kv->n_layers;
  const float T = kv->opt.recency_T;
  if (kv->plan.policy == GB_KV_RECENCY) {
    for (uint32_t s = 0; s < cap; s++)
      if (y0.level[s] != kLvNone) kv->imp[s] = expf(-(float)(kv->step - kv->birth[s]) / T);
    return;
  }
  double sum = 0.0, wsum = 0.0;
  uint32_t n = 0;
  for (uint32_t s = 0; s < cap; s++) {
    if (y0.level[s] == kLvNone) continue;
    float a = 0.0f;
    for (uint32_t l = 0; l < L; l++) a += kv->layers[l].ema[s];
    kv->imp[s] = a / (float)L;
    sum += kv->imp[s];
    wsum += kv->wema[s];
    n++;
  }
  if (n == 0) return;
  const float inv = (float)(1.0 / (sum / n + 1e-8)), winv = (float)(1.0 / (wsum / n + 1e-8));
  for (uint32_t s = 0; s < cap; s++) {
    if (y0.level[s] == kLvNone) continue;
    const float rec = expf(-(float)(kv->step - kv->birth[s]) / T);
    kv->imp[s] = 0.7f * kv->imp[s] * inv * rec + 0.3f * kv->wema[s] * winv;
  }
}

// ---- the token life cycle ---------------------------------------------------------------

namespace {

// Least important unprotected token outside the window (eviction victim).
bool pick_evict(const KvPool *kv, uint32_t *slot_out) {
  const KvLayer &y0 = kv->layers[0];
  float best = INFINITY;
  bool found = false;
  for (uint32_t s = 0; s < kv->plan.cap; s++) {
    if (y0.level[s] == kLvNone) continue;
    const uint32_t pos = kv->pos[s];
    if (is_protected(kv, pos) || in_window(kv, pos)) continue;
    if (!found || kv->imp[s] < best) {
      best = kv->imp[s];
      found = true;
      *slot_out = s;
    }
  }
  return found;
}

void evict(KvPool *kv, uint32_t slot) {
  for (uint32_t l = 0; l < kv->n_layers; l++) remove(kv, kv->layers[l], slot);
  kv->free_slots[kv->n_free_slots++] = slot;
  kv->n_tokens--;
  kv->evicted++;
}

// KL(current || snapshot) of the importance distributions (the SEED drift trigger),
// over the tokens both contain (new tokens are not drift).
float importance_drift(KvPool *kv) {
  const KvLayer &y0 = kv->layers[0];
  double a = 0.0, b = 0.0;
  for (uint32_t s = 0; s < kv->plan.cap; s++)
    if (y0.level[s] != kLvNone && kv->snap[s] > 0.0f) {
      a += kv->imp[s];
      b += kv->snap[s];
    }
  if (a <= 0.0 || b <= 0.0) return 0.0f;
  double kl = 0.0;
  for (uint32_t s = 0; s < kv->plan.cap; s++) {
    if (y0.level[s] == kLvNone || !(kv->snap[s] > 0.0f)) continue;
    const double p = kv->imp[s] / a, q = kv->snap[s] / b;
    if (p > 0.0) kl += p * log(p / q);
  }
  return (float)kl;
}

bool make_room(KvPool *kv, const gb_kernels &k, uint32_t layer, uint32_t entry) {
  KvLayer &y = kv->layers[layer];
  const KvPlan &p = kv->plan;
  const uint32_t limit = p.n_pages - p.reserve;
  if (used_pages(kv, y) + insert_cost(kv, y, entry) <= limit) return true;
  if (!multi_level(p.policy)) return false;
  const uint64_t t0 = gb_port_now_ns();
  if (p.policy == GB_KV_SEED) kv_seed_realloc(kv, k, layer, 1);
  bool ok = used_pages(kv, y) + insert_cost(kv, y, entry) <= limit;
  while (!ok) {
    uint32_t s = 0, to = 0;
    const bool window = p.policy != GB_KV_SEED;
    if (!pick_step_down(kv, y, !window, &s, &to) && !(window && pick_step_down(kv, y, true, &s, &to))) break;
    step_down(kv, k, y, s, to);
    ok = used_pages(kv, y) + insert_cost(kv, y, entry) <= limit;
  }
  kv->alloc_ns += gb_port_now_ns() - t0;
  return ok;
}

}  // namespace

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
  return GB_OK;
}

void kv_store(KvPool *kv, uint32_t layer, const float *key, const float *value) {
  write_rows(kv, kv->layers[layer], kv->cur_slot, key, value);
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

// The attention of one query through ws (streaming softmax over the
// layer's buckets); returns how many records it scored (their slots in
// ws.score_slot, masses in mass and wmass when given).
uint32_t attend(const KvPool *kv, const gb_kernels &k, uint32_t layer, const float *q, float *out, uint32_t hide,
                const KvAttnScratch &ws, float *mass, float *wmass) {
  const KvPlan &p = kv->plan;
  const KvLayer &y = kv->layers[layer];
  const uint32_t H = kv->n_heads, d = kv->head_dim;
  gb_attn_state st;
  st.n_heads = H;
  st.n_kv_heads = kv->n_kv_heads;
  st.head_dim = d;
  st.scale = 1.0f / sqrtf((float)d);
  st.q = q;
  st.q8 = ws.q8;
  st.q8_d = ws.q8_d;
  st.scales = y.scales;
  st.m = ws.m;
  st.l = ws.l;
  st.acc = ws.acc;
  st.scores = ws.scores;
  st.score_stride = p.cap;
  for (uint32_t h = 0; h < H; h++) {
    ws.m[h] = -INFINITY;
    ws.l[h] = 0.0f;
  }
  memset(ws.acc, 0, sizeof(float) * H * d);
  if (p.levels & ((1u << kLv2) | (1u << kLv3) | (1u << kLv4) | (1u << kLv8))) {
    // The query per head as int8 for the integer key dot products.
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

}  // namespace

void kv_attend_with(const KvPool *kv, const gb_kernels &k, uint32_t layer, const float *q, float *out, uint32_t hide,
                    const KvAttnScratch &ws) {
  attend(kv, k, layer, q, out, hide, ws, nullptr, nullptr);
}

void kv_attend(KvPool *kv, const gb_kernels &k, uint32_t layer, const float *q, float *out, uint32_t hide) {
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

bool kv_batchable(const KvPool *kv, uint32_t m) {
  return !multi_level(kv->plan.policy) && kv_room(kv) >= m && kv->n_free_slots >= m;
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

void kv_store_slot(KvPool *kv, uint32_t layer, uint32_t slot, const float *key, const float *value) {
  write_rows(kv, kv->layers[layer], slot, key, value);
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
  st->used_bytes = used;
  const double elems = (double)kv->n_tokens * kv->n_layers * 2.0 * kv->n_kv_heads * kv->head_dim;
  st->bits_per_element = elems > 0 ? 8.0 * (double)used / elems : 0.0;
}

}  // namespace gb
