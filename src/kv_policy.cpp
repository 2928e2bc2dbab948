// kv_policy.cpp — which token loses precision, or leaves, when the KV pool
// needs room for the next one (the pool itself: kv.cpp).
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

#include "gearbx_port.h"
#include "kv_buckets.h"

namespace gb {
namespace kvb {
namespace {

// Relative squared error of a level's rows (step^2 ~ 1 / qmax^2).
const float kErr[kLevels] = {1.0f, 1.0f / 9.0f, 1.0f / 49.0f, 1.0f / 16129.0f, 0.0f, 0.0f};

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

}  // namespace

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

bool make_room(KvPool *kv, const gb_kernels &k, uint32_t layer, uint32_t entry) {
  KvLayer &y = kv->layers[layer];
  const KvPlan &p = kv->plan;
  const uint32_t limit = p.n_pages - p.reserve;
  if (used_pages(kv, y) + insert_cost(kv, y, entry) <= limit) return true;
  if (!kv_policy_multi_level(p.policy)) return false;
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

}  // namespace kvb

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

}  // namespace gb
