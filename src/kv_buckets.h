// kv_buckets.h — the KV pool's insides shared by its files: records in
// buckets of pages (kv.cpp), the policies that choose step-downs and
// evictions (kv_policy.cpp) and the SEED allocator (kv_seed.cpp). Not part of
// kv.h's interface.
#pragma once

#include <stdint.h>

#include "kernels.h"
#include "kv.h"

namespace gb {
namespace kvb {

inline uint32_t pages_for(uint32_t count, uint32_t tpp) { return (count + tpp - 1) / tpp; }

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

// Add the slot's record to level lv (taking a page from the free stack when
// the bucket's last page is full), or remove it (the bucket's last record
// moves into its place; an emptied page returns to the stack).
void insert(KvPool *kv, KvLayer &y, uint32_t lv, uint32_t slot);
void remove(KvPool *kv, KvLayer &y, uint32_t slot);
// Write K rows then V rows (kv_dim each, in kv->tmp layout) at the slot's level.
void write_rows(KvPool *kv, KvLayer &y, uint32_t slot, const float *key, const float *value);
// Step a token of layer y down to level `to` (requantized from its stored values).
void step_down(KvPool *kv, const gb_kernels &k, KvLayer &y, uint32_t slot, uint32_t to);

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

// ---- the policies (kv_policy.cpp, kv_seed.cpp) ----
// Make room in layer `layer` for one record at level `entry`: nothing to do
// when the pages allow it; else the policy's step-downs (a SEED re-plan
// first). Whether there is room now.
bool make_room(KvPool *kv, const gb_kernels &k, uint32_t layer, uint32_t entry);
// The eviction victim: the least important unprotected token outside the
// window; false when there is none.
bool pick_evict(const KvPool *kv, uint32_t *slot_out);
void evict(KvPool *kv, uint32_t slot);
// KL(current || snapshot) of the importance distributions (the SEED drift
// trigger), over the tokens both contain (new tokens are not drift).
float importance_drift(KvPool *kv);

}  // namespace kvb
}  // namespace gb
