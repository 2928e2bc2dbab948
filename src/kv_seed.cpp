// kv_seed.cpp — the SEED allocator: at each layer's clock (or a drift of
// the importance distribution, or when room runs out) a marginal-gain greedy
// heap re-plans every token of the layer from the minimum level up the
// chain, capped by its current level (data below it is gone), within the
// layer's pages (kv.h, kv_policy.cpp).
#include <math.h>
#include <string.h>

#include <algorithm>

#include "gearbx_port.h"
#include "kv_buckets.h"

namespace gb {
namespace {

using namespace kvb;


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

void kv_seed_realloc(KvPool *kv, const gb_kernels &k, uint32_t layer, uint32_t extra_entry) {
  const uint64_t t0 = gb_port_now_ns();
  const KvPlan &p = kv->plan;
  const KvConfig &o = kv->opt;
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

namespace kvb {

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

}  // namespace kvb
}  // namespace gb
