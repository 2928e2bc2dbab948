// state.cpp — session state save / restore (gb_session_state_*).
//
// Image format (version 1), every integer little-endian, floats as IEEE bits:
//
//   header (32 bytes)
//     +0  char[8] magic "GBSTATE\0"      +8  u32 version (1)      +12 u32 flags (0)
//     +16 u64 body_bytes                 +24 u32 CRC32 of the body +28 u32 reserved (0)
//   body (body_bytes)
//     model:   u32 model hash (CRC32 of the .gbx metadata fields and of every
//              section's kind, size and CRC), vocab, n_layers, n_heads, n_kv_heads, head_dim
//     session: u32 n_ctx, pos; i32 pending, last_out; i32 gear policy (opt.gear),
//              spec_k, spec_verify_gear, spec_draft_gear; i32 gear of the next pass; u64 shifts
//     monitor: u32 window, f32 th_low, th_high, u32 count, head, i32 gear, u32 tokens_in_gear,
//              u8 calibrated, i32 predicted, u8 catastrophic, u32 hot_run, f32 hist[window]
//     sampler: u64 rng[2]
//     control: u32 window, ring_n, ring_head, i32 ring[window]; u32 stop_max, tail_n, tail bytes
//     kv pool  (below)
//     u8 spec; when 1: u32 dpos, f64 sp_succ, sp_trials, u32 sp_idle, sp_pos0, sp_drafted,
//              sp_accepted, i32 hist[pos], then the draft's kv pool
//   kv pool:
//     plan: u32 policy, levels, u8 entry, min, u8 kbits[6], vbits[6], u32 rec[6], tpp[6],
//           page_bytes, n_pages, reserve, cap, max_tokens, scale_bytes, u8 importance
//     options: u32 evict, k_critical, k_tail, window, f32 gamma, gamma_head, recency_T, alpha,
//           eps_importance, u32 f_base, f32 rank_threshold, u32 rank_intervals, f32 drift_kl
//     u32 n_tokens, newest, cur_slot; u64 step, reallocs, requant, evicted
//     free slots: u32 p, t, u32 tail[t]. The stack is its natural prefix
//           (cap-1, cap-2, ..., cap-p: slots never used) then tail. Slots below
//           ks = cap - p are the tail's or occupied; ks - t = n_tokens.
//     f32 head_w[n_heads]
//     per occupied slot (increasing slot < ks): u32 pos, u64 birth,
//           [f32 wema, wsum, imp when importance], [f32 snap for SEED]
//     per layer: free pages u32 p, t, tail[t] (natural prefix of n_pages-1, ...;
//           kp = n_pages - p), f32 head_ema[n_heads], u64 next_realloc;
//           per level of the plan: u32 count, u32 pages[ceil(count / tpp)],
//           u32 slots[count], the count records (rec bytes each, bucket order);
//           per occupied slot: u16 scales[2 * n_kv_heads] when quantized,
//           f32 ema when importance, f32 rank_ref + u8 rank_cnt for SEED.
//
// The natural prefixes make the image independent of cap / n_pages, so it
// loads into a pool with more slots or pages (a larger n_ctx): the new ones
// join the bottom of the stacks. Page and slot ids stay as saved (attention
// reads buckets in record order through their pages, so the runs stay the
// same and the results bit-identical).
//
// Loading parses the image twice: once only checking (into no state), once
// writing, so a failed load changes nothing. The checks use bitmaps in the
// KV pool's attention scratch (score_slot, scores), which holds nothing
// between calls.
#include <math.h>
#include <string.h>

#include "bytes.h"
#include "crc32.h"
#include "gears.h"
#include "session.h"

namespace gb {
namespace {

constexpr char kMagic[8] = {'G', 'B', 'S', 'T', 'A', 'T', 'E', 0};
constexpr uint32_t kVersion = 1;
constexpr size_t kHeadBytes = 32;

uint32_t model_hash(const gb_model *m) {
  const Meta &c = m->meta;
  uint8_t b[4];
  uint32_t h = 0;
  auto put = [&](uint32_t v) {
    st_u32(b, v);
    h = crc32_update(h, b, 4);
  };
  put(c.version);
  put(c.arch);
  put(c.dim);
  put(c.hidden_dim);
  put(c.n_layers);
  put(c.n_heads);
  put(c.n_kv_heads);
  put(c.head_dim);
  put(c.vocab_size);
  put(c.seq_len);
  put(m->n_sections);
  for (uint32_t i = 0; i < m->n_sections; i++) {
    put(m->sections[i].kind);
    put((uint32_t)m->sections[i].size);
    put((uint32_t)(m->sections[i].size >> 32));
    put(m->sections[i].crc);
  }
  return h;
}

// ---- writing (counting when p is null) ----
struct W {
  uint8_t *p = nullptr;
  size_t n = 0;
  void raw(const void *v, size_t k) {
    if (p && k) memcpy(p + n, v, k);
    n += k;
  }
  void u8(uint8_t v) { raw(&v, 1); }
  void u16(uint16_t v) {
    uint8_t b[2];
    st_u16(b, v);
    raw(b, 2);
  }
  void u32(uint32_t v) {
    uint8_t b[4];
    st_u32(b, v);
    raw(b, 4);
  }
  void i32(int32_t v) { u32((uint32_t)v); }
  void u64(uint64_t v) {
    uint8_t b[8];
    st_u64(b, v);
    raw(b, 8);
  }
  void f32(float v) {
    uint32_t u;
    memcpy(&u, &v, 4);
    u32(u);
  }
  void f64(double v) {
    uint64_t u;
    memcpy(&u, &v, 8);
    u64(u);
  }
};

// ---- reading: a failed read latches `bad` and yields zeros ----
struct R {
  const uint8_t *p;
  size_t n, at = 0;
  bool bad = false;
  const uint8_t *take(size_t k) {
    if (bad || k > n - at) {
      bad = true;
      return nullptr;
    }
    const uint8_t *q = p + at;
    at += k;
    return q;
  }
  uint8_t u8() {
    const uint8_t *q = take(1);
    return q ? q[0] : 0;
  }
  uint16_t u16() {
    const uint8_t *q = take(2);
    return q ? ld_u16(q) : 0;
  }
  uint32_t u32() {
    const uint8_t *q = take(4);
    return q ? ld_u32(q) : 0;
  }
  int32_t i32() { return (int32_t)u32(); }
  uint64_t u64() {
    const uint8_t *q = take(8);
    return q ? ld_u64(q) : 0;
  }
  float f32() {
    const uint32_t u = u32();
    float f;
    memcpy(&f, &u, 4);
    return f;
  }
  double f64() {
    const uint64_t u = u64();
    double f;
    memcpy(&f, &u, 8);
    return f;
  }
};

inline uint32_t pages_for(uint32_t count, uint32_t tpp) { return (count + tpp - 1) / tpp; }

// Length of the natural prefix of a stack (n-1, n-2, ... at its bottom).
uint32_t natural_prefix(const uint32_t *stack, uint32_t len, uint32_t n) {
  uint32_t p = 0;
  while (p < len && stack[p] == n - 1 - p) p++;
  return p;
}

// ---- the KV pool ----
void save_kv(W &w, const KvPool &kv) {
  const KvPlan &p = kv.plan;
  w.u32(p.policy);
  w.u32(p.levels);
  w.u8(p.entry);
  w.u8(p.min);
  for (uint32_t i = 0; i < kLevels; i++) w.u8(p.kbits[i]);
  for (uint32_t i = 0; i < kLevels; i++) w.u8(p.vbits[i]);
  for (uint32_t i = 0; i < kLevels; i++) w.u32(p.rec[i]);
  for (uint32_t i = 0; i < kLevels; i++) w.u32(p.tpp[i]);
  w.u32(p.page_bytes);
  w.u32(p.n_pages);
  w.u32(p.reserve);
  w.u32(p.cap);
  w.u32(p.max_tokens);
  w.u32(p.scale_bytes);
  w.u8(p.importance ? 1 : 0);
  const gb_kv_options &o = kv.opt;
  w.u32(o.evict);
  w.u32(o.k_critical);
  w.u32(o.k_tail);
  w.u32(o.window);
  w.f32(o.gamma);
  w.f32(o.gamma_head);
  w.f32(o.recency_T);
  w.f32(o.alpha);
  w.f32(o.eps_importance);
  w.u32(o.f_base);
  w.f32(o.rank_threshold);
  w.u32(o.rank_intervals);
  w.f32(o.drift_kl);
  w.u32(kv.n_tokens);
  w.u32(kv.newest);
  w.u32(kv.cur_slot);
  w.u64(kv.step);
  w.u64(kv.reallocs);
  w.u64(kv.requant);
  w.u64(kv.evicted);
  const uint32_t sp = natural_prefix(kv.free_slots, kv.n_free_slots, p.cap);
  const uint32_t ks = p.cap - sp;
  w.u32(sp);
  w.u32(kv.n_free_slots - sp);
  for (uint32_t i = sp; i < kv.n_free_slots; i++) w.u32(kv.free_slots[i]);
  for (uint32_t h = 0; h < kv.n_heads; h++) w.f32(kv.head_w[h]);
  const KvLayer &y0 = kv.layers[0];
  const bool seed = p.policy == GB_KV_SEED;
  for (uint32_t s = 0; s < ks; s++) {
    if (y0.level[s] == kLvNone) continue;
    w.u32(kv.pos[s]);
    w.u64(kv.birth[s]);
    if (p.importance) {
      w.f32(kv.wema[s]);
      w.f32(kv.wsum[s]);
      w.f32(kv.imp[s]);
    }
    if (seed) w.f32(kv.snap[s]);
  }
  const uint32_t R2 = 2 * kv.n_kv_heads;
  for (uint32_t l = 0; l < kv.n_layers; l++) {
    const KvLayer &y = kv.layers[l];
    const uint32_t pp = natural_prefix(y.free_pages, y.n_free, p.n_pages);
    w.u32(pp);
    w.u32(y.n_free - pp);
    for (uint32_t i = pp; i < y.n_free; i++) w.u32(y.free_pages[i]);
    for (uint32_t h = 0; h < kv.n_heads; h++) w.f32(y.head_ema[h]);
    w.u64(y.next_realloc);
    for (uint32_t lv = 0; lv < kLevels; lv++) {
      if (!(p.levels >> lv & 1)) continue;
      const KvBucket &b = y.bucket[lv];
      w.u32(b.count);
      const uint32_t np = pages_for(b.count, p.tpp[lv]);
      for (uint32_t i = 0; i < np; i++) w.u32(b.pages[i]);
      for (uint32_t i = 0; i < b.count; i++) w.u32(b.slots[i]);
      for (uint32_t j = 0; j < b.count; j++)
        w.raw(y.pages + (size_t)b.pages[j / p.tpp[lv]] * p.page_bytes + (size_t)(j % p.tpp[lv]) * p.rec[lv], p.rec[lv]);
    }
    for (uint32_t s = 0; s < ks; s++) {
      if (y0.level[s] == kLvNone) continue;
      if (p.scale_bytes)
        for (uint32_t i = 0; i < R2; i++) w.u16(y.scales[(size_t)s * R2 + i]);
      if (p.importance) w.f32(y.ema[s]);
      if (seed) {
        w.f32(y.rank_ref[s]);
        w.u8(y.rank_cnt[s]);
      }
    }
  }
}

// Upper bound of save_kv's bytes for any state of the pool.
uint64_t kv_max_bytes(const KvPool &kv) {
  const KvPlan &p = kv.plan;
  const uint64_t cap = p.cap, H = kv.n_heads;
  uint64_t n = 512 + 4 * cap + 4 * H;                     // plan, options, counters, free-slot tail, head_w
  n += cap * (4 + 8 + 12 + 4);                             // per slot
  uint64_t rec_max = 0;
  for (uint32_t lv = 0; lv < kLevels; lv++) rec_max = p.rec[lv] > rec_max ? p.rec[lv] : rec_max;
  uint64_t layer = 32 + 4ull * p.n_pages + 4 * H + 8;      // free pages, head_ema
  layer += kLevels * (4 + 4ull) + 4ull * (cap + kLevels) + 4 * cap + cap * rec_max;  // buckets
  layer += cap * ((uint64_t)p.scale_bytes + 4 + 5);        // per slot
  return n + layer * kv.n_layers;
}

inline bool finite(float v) { return isfinite(v) != 0; }
inline void bit_set(uint8_t *m, uint32_t i) { m[i >> 3] |= (uint8_t)(1u << (i & 7)); }
inline bool bit_get(const uint8_t *m, uint32_t i) { return m[i >> 3] >> (i & 7) & 1; }

// Read a pool image into kv (apply) or only check it against kv (!apply).
gb_status load_kv(R &r, KvPool *kv, bool apply, const Logger &log, uint32_t pos_limit, const char *which) {
  const KvPlan &t = kv->plan;
  KvPlan p;
  memset(&p, 0, sizeof p);
  p.policy = r.u32();
  p.levels = r.u32();
  p.entry = r.u8();
  p.min = r.u8();
  for (uint32_t i = 0; i < kLevels; i++) p.kbits[i] = r.u8();
  for (uint32_t i = 0; i < kLevels; i++) p.vbits[i] = r.u8();
  for (uint32_t i = 0; i < kLevels; i++) p.rec[i] = r.u32();
  for (uint32_t i = 0; i < kLevels; i++) p.tpp[i] = r.u32();
  p.page_bytes = r.u32();
  p.n_pages = r.u32();
  p.reserve = r.u32();
  p.cap = r.u32();
  p.max_tokens = r.u32();
  p.scale_bytes = r.u32();
  p.importance = r.u8() != 0;
  gb_kv_options o;
  memset(&o, 0, sizeof o);
  o.evict = r.u32();
  o.k_critical = r.u32();
  o.k_tail = r.u32();
  o.window = r.u32();
  o.gamma = r.f32();
  o.gamma_head = r.f32();
  o.recency_T = r.f32();
  o.alpha = r.f32();
  o.eps_importance = r.f32();
  o.f_base = r.u32();
  o.rank_threshold = r.f32();
  o.rank_intervals = r.u32();
  o.drift_kl = r.f32();
  if (r.bad) return fail(log, GB_ERR_CORRUPT, "session state: %s KV pool header truncated", which);
  // The layout must be the target's (bit levels, records, pages); only the
  // numbers of slots and pages may differ.
  bool same = p.policy == t.policy && p.levels == t.levels && p.entry == t.entry && p.min == t.min &&
              p.page_bytes == t.page_bytes && p.reserve == t.reserve && p.scale_bytes == t.scale_bytes &&
              p.importance == t.importance;
  for (uint32_t i = 0; i < kLevels; i++)
    same = same && p.kbits[i] == t.kbits[i] && p.vbits[i] == t.vbits[i] && p.rec[i] == t.rec[i] && p.tpp[i] == t.tpp[i];
  GB_RETURN_IF(!same, log, GB_ERR_INVALID_ARGUMENT,
               "session state: the %s KV pool was saved with policy %s and another layout (levels 0x%x, page %u bytes) than "
               "this session's (%s, levels 0x%x, page %u bytes)",
               which, p.policy <= GB_KV_RECENCY ? gb_kv_policy_name((gb_kv_policy)p.policy) : "?", p.levels, p.page_bytes,
               gb_kv_policy_name((gb_kv_policy)t.policy), t.levels, t.page_bytes);
  const gb_kv_options &k = kv->opt;
  const bool same_opt = o.evict == k.evict && o.k_critical == k.k_critical && o.k_tail == k.k_tail && o.window == k.window &&
                        o.gamma == k.gamma && o.gamma_head == k.gamma_head && o.recency_T == k.recency_T &&
                        o.alpha == k.alpha && o.eps_importance == k.eps_importance && o.f_base == k.f_base &&
                        o.rank_threshold == k.rank_threshold && o.rank_intervals == k.rank_intervals &&
                        o.drift_kl == k.drift_kl;
  GB_RETURN_IF(!same_opt, log, GB_ERR_INVALID_ARGUMENT,
               "session state: the %s KV pool's options (evict, k_critical, k_tail, window, gamma, recency_T, SEED "
               "parameters) differ from this session's",
               which);
  // Sanity of the layout fields (equal to the target's, so already sane).
  const uint32_t n_tokens = r.u32(), newest = r.u32(), cur_slot = r.u32();
  const uint64_t step = r.u64(), reallocs = r.u64(), requant = r.u64(), evicted = r.u64();
  const uint32_t sp = r.u32(), st = r.u32();
  GB_RETURN_IF(r.bad, log, GB_ERR_CORRUPT, "session state: %s KV pool truncated", which);
  GB_RETURN_IF(sp > p.cap || st > p.cap - sp, log, GB_ERR_CORRUPT, "session state: %s KV pool free-slot stack (%u + %u) exceeds its %u slots",
               which, sp, st, p.cap);
  const uint32_t ks = p.cap - sp;  // slots ever used
  GB_RETURN_IF(ks - st != n_tokens, log, GB_ERR_CORRUPT, "session state: %s KV pool holds %u tokens, its free slots say %u", which,
               n_tokens, ks - st);
  GB_RETURN_IF(n_tokens > pos_limit || newest > pos_limit, log, GB_ERR_CORRUPT,
               "session state: %s KV pool counters (tokens %u, newest %u) beyond the position %u", which, n_tokens, newest,
               pos_limit);
  GB_RETURN_IF(ks > t.cap || n_tokens > t.max_tokens, log, GB_ERR_BUDGET_EXCEEDED,
               "session state: the %s KV pool holds %u tokens in slots up to %u; this session's pool has %u slots and holds "
               "%u tokens",
               which, n_tokens, ks, t.cap, t.max_tokens);
  // Bitmaps in the attention scratch: free slots, slots seen in a layer, pages.
  const uint32_t cap = t.cap;
  uint8_t *free_map = reinterpret_cast<uint8_t *>(kv->att.score_slot);
  uint8_t *seen = free_map + (cap + 7) / 8;
  uint8_t *page_map = reinterpret_cast<uint8_t *>(kv->att.scores);
  const uint32_t page_map_bits = 32u * kv->n_heads * cap;
  memset(free_map, 0, (cap + 7) / 8);
  const size_t tail_at = r.at;
  for (uint32_t i = 0; i < st; i++) {
    const uint32_t s = r.u32();
    GB_RETURN_IF(r.bad, log, GB_ERR_CORRUPT, "session state: %s KV pool truncated in its free slots", which);
    GB_RETURN_IF(s >= ks || bit_get(free_map, s), log, GB_ERR_CORRUPT, "session state: %s KV pool free slot %u invalid or repeated",
                 which, s);
    bit_set(free_map, s);
  }
  if (apply) {
    // The target's natural prefix, then the saved tail.
    kv->n_free_slots = 0;
    for (uint32_t s = cap; s-- > ks;) kv->free_slots[kv->n_free_slots++] = s;
    R tr = r;
    tr.at = tail_at;
    for (uint32_t i = 0; i < st; i++) kv->free_slots[kv->n_free_slots++] = tr.u32();
    kv->n_tokens = n_tokens;
    kv->newest = newest;
    kv->cur_slot = cur_slot < cap ? cur_slot : 0;
    kv->step = step;
    kv->reallocs = reallocs;
    kv->requant = requant;
    kv->evicted = evicted;
  }
  for (uint32_t h = 0; h < kv->n_heads; h++) {
    const float v = r.f32();
    GB_RETURN_IF(!finite(v), log, GB_ERR_CORRUPT, "session state: %s KV pool head weight not finite", which);
    if (apply) kv->head_w[h] = v;
  }
  const bool seed = p.policy == GB_KV_SEED;
  for (uint32_t s = 0; s < ks; s++) {
    if (bit_get(free_map, s)) continue;
    const uint32_t ps = r.u32();
    const uint64_t birth = r.u64();
    float wema = 0, wsum = 0, imp = 0, snap = 0;
    if (p.importance) {
      wema = r.f32();
      wsum = r.f32();
      imp = r.f32();
    }
    if (seed) snap = r.f32();
    GB_RETURN_IF(r.bad, log, GB_ERR_CORRUPT, "session state: %s KV pool truncated in its slots", which);
    GB_RETURN_IF(ps >= pos_limit || birth > step || !finite(wema) || !finite(wsum) || !finite(imp) || !finite(snap), log,
                 GB_ERR_CORRUPT, "session state: %s KV pool slot %u: position %u, birth or statistics out of range", which, s, ps);
    if (apply) {
      kv->pos[s] = ps;
      kv->birth[s] = birth;
      if (p.importance) {
        kv->wema[s] = wema;
        kv->wsum[s] = wsum;
        kv->imp[s] = imp;
      }
      if (seed) kv->snap[s] = snap;
    }
  }
  const uint32_t R2 = 2 * kv->n_kv_heads;
  for (uint32_t l = 0; l < kv->n_layers; l++) {
    KvLayer &y = kv->layers[l];
    const uint32_t pp = r.u32(), pt = r.u32();
    GB_RETURN_IF(r.bad, log, GB_ERR_CORRUPT, "session state: %s KV pool truncated at layer %u", which, l);
    GB_RETURN_IF(pp > p.n_pages || pt > p.n_pages - pp, log, GB_ERR_CORRUPT,
                 "session state: %s KV pool layer %u free-page stack (%u + %u) exceeds its %u pages", which, l, pp, pt, p.n_pages);
    const uint32_t kp = p.n_pages - pp;  // pages ever used
    GB_RETURN_IF(kp > ks + kLevels || kp > page_map_bits, log, GB_ERR_CORRUPT,
                 "session state: %s KV pool layer %u used %u pages for %u slots", which, l, kp, ks);
    GB_RETURN_IF(kp > t.n_pages || kp - pt > t.n_pages - t.reserve, log, GB_ERR_BUDGET_EXCEEDED,
                 "session state: the %s KV pool's layer %u uses pages up to %u; this session's pool has %u", which, l, kp,
                 t.n_pages);
    memset(page_map, 0, (kp + 7) / 8);
    const size_t ptail_at = r.at;
    for (uint32_t i = 0; i < pt; i++) {
      const uint32_t g = r.u32();
      GB_RETURN_IF(r.bad, log, GB_ERR_CORRUPT, "session state: %s KV pool truncated in layer %u's free pages", which, l);
      GB_RETURN_IF(g >= kp || bit_get(page_map, g), log, GB_ERR_CORRUPT,
                   "session state: %s KV pool layer %u free page %u invalid or repeated", which, l, g);
      bit_set(page_map, g);
    }
    if (apply) {
      y.n_free = 0;
      for (uint32_t g = t.n_pages; g-- > kp;) y.free_pages[y.n_free++] = g;
      R tr = r;
      tr.at = ptail_at;
      for (uint32_t i = 0; i < pt; i++) y.free_pages[y.n_free++] = tr.u32();
      memset(y.level, kLvNone, cap);
    }
    for (uint32_t h = 0; h < kv->n_heads; h++) {
      const float v = r.f32();
      GB_RETURN_IF(!finite(v), log, GB_ERR_CORRUPT, "session state: %s KV pool layer %u head EMA not finite", which, l);
      if (apply) y.head_ema[h] = v;
    }
    const uint64_t next_realloc = r.u64();
    if (apply) y.next_realloc = next_realloc;
    memset(seen, 0, (cap + 7) / 8);
    uint32_t tokens = 0, pages = 0;
    for (uint32_t lv = 0; lv < kLevels; lv++) {
      if (!(p.levels >> lv & 1)) continue;
      const uint32_t count = r.u32();
      GB_RETURN_IF(r.bad || count > n_tokens - tokens, log, GB_ERR_CORRUPT,
                   "session state: %s KV pool layer %u level %u: %u records, more than its tokens", which, l, lv, count);
      tokens += count;
      const uint32_t np = pages_for(count, p.tpp[lv]);
      pages += np;
      GB_RETURN_IF(pages > kp - pt, log, GB_ERR_CORRUPT, "session state: %s KV pool layer %u: buckets use more pages than it has",
                   which, l);
      KvBucket &b = y.bucket[lv];
      for (uint32_t i = 0; i < np; i++) {
        const uint32_t g = r.u32();
        GB_RETURN_IF(r.bad || g >= kp || bit_get(page_map, g), log, GB_ERR_CORRUPT,
                     "session state: %s KV pool layer %u level %u: page %u invalid or repeated", which, l, lv, g);
        bit_set(page_map, g);
        if (apply) b.pages[i] = g;
      }
      for (uint32_t i = 0; i < count; i++) {
        const uint32_t s = r.u32();
        GB_RETURN_IF(r.bad || s >= ks || bit_get(free_map, s) || bit_get(seen, s), log, GB_ERR_CORRUPT,
                     "session state: %s KV pool layer %u level %u: slot %u invalid, free or repeated", which, l, lv, s);
        bit_set(seen, s);
        if (apply) {
          b.slots[i] = s;
          y.level[s] = (uint8_t)lv;
          y.index[s] = i;
        }
      }
      const uint8_t *recs = r.take((size_t)count * p.rec[lv]);
      GB_RETURN_IF(!recs, log, GB_ERR_CORRUPT, "session state: %s KV pool layer %u level %u: records truncated", which, l, lv);
      if (apply) {
        b.count = count;
        for (uint32_t j = 0; j < count; j++)
          memcpy(y.pages + (size_t)b.pages[j / p.tpp[lv]] * p.page_bytes + (size_t)(j % p.tpp[lv]) * p.rec[lv],
                 recs + (size_t)j * p.rec[lv], p.rec[lv]);
      }
    }
    GB_RETURN_IF(tokens != n_tokens || pages != kp - pt, log, GB_ERR_CORRUPT,
                 "session state: %s KV pool layer %u: %u records in %u pages, expected %u tokens in %u", which, l, tokens, pages,
                 n_tokens, kp - pt);
    if (apply)
      for (uint32_t lv = 0; lv < kLevels; lv++)
        if (!(p.levels >> lv & 1)) y.bucket[lv].count = 0;
    for (uint32_t s = 0; s < ks; s++) {
      if (bit_get(free_map, s)) continue;
      const uint8_t *sc = p.scale_bytes ? r.take((size_t)R2 * 2) : nullptr;
      const float ema = p.importance ? r.f32() : 0.0f;
      const float rref = seed ? r.f32() : 0.0f;
      const uint8_t rcnt = seed ? r.u8() : 0;
      GB_RETURN_IF(r.bad, log, GB_ERR_CORRUPT, "session state: %s KV pool layer %u truncated in its slots", which, l);
      GB_RETURN_IF(!finite(ema) || !finite(rref), log, GB_ERR_CORRUPT, "session state: %s KV pool layer %u slot %u statistics not finite",
                   which, l, s);
      if (!apply) continue;
      if (sc)
        for (uint32_t i = 0; i < R2; i++) y.scales[(size_t)s * R2 + i] = ld_u16(sc + 2 * i);
      if (p.importance) y.ema[s] = ema;
      if (seed) {
        y.rank_ref[s] = rref;
        y.rank_cnt[s] = rcnt;
      }
    }
  }
  return GB_OK;
}

gb_status check_save(const gb_session *s) {
  GB_RETURN_IF(s->spec.on && s->spec.out_i < s->spec.out_n, s->log, GB_ERR_BAD_STATE,
               "session state: a spec session is in the middle of a round (%u of %u tokens handed out); decode on and save "
               "after the round",
               s->spec.out_i, s->spec.out_n);
  return GB_OK;
}

void save_body(W &w, const gb_session *s) {
  const Meta &c = s->model->meta;
  w.u32(model_hash(s->model));
  w.u32(c.vocab_size);
  w.u32(c.n_layers);
  w.u32(c.n_heads);
  w.u32(c.n_kv_heads);
  w.u32(c.head_dim);
  w.u32(s->opt.n_ctx);
  w.u32(s->cur.pos);
  w.i32(s->cur.pending);
  w.i32(s->cur.last_out);
  w.i32((int32_t)s->opt.gear);
  w.i32((int32_t)s->opt.spec_k);
  w.i32((int32_t)s->opt.spec_verify_gear);
  w.i32((int32_t)s->opt.spec_draft_gear);
  w.i32((int32_t)s->gears.gear);
  w.u64(s->gears.shifts);
  const Monitor &m = s->monitor;
  w.u32(m.o.window);
  w.f32(m.th_low);
  w.f32(m.th_high);
  w.u32(m.count);
  w.u32(m.head);
  w.i32((int32_t)m.gear);
  w.u32(m.tokens_in_gear);
  w.u8(m.calibrated ? 1 : 0);
  w.i32((int32_t)m.predicted);
  w.u8(m.catastrophic ? 1 : 0);
  w.u32(m.hot_run);
  for (uint32_t i = 0; i < m.o.window; i++) w.f32(m.hist[i]);
  w.u64(s->sampler.rng[0]);
  w.u64(s->sampler.rng[1]);
  const Control &ct = s->ctl;
  w.u32(ct.window);
  w.u32(ct.ring_n);
  w.u32(ct.ring_head);
  for (uint32_t i = 0; i < ct.window; i++) w.i32(ct.ring[i]);
  w.u32(ct.stop_max);
  w.u32(ct.tail_n);
  w.raw(ct.tail, ct.tail_n);
  save_kv(w, s->kv);
  w.u8(s->spec.on ? 1 : 0);
  if (s->spec.on) {
    w.u32(s->spec.dpos);
    w.f64(s->spec.succ);
    w.f64(s->spec.trials);
    w.u32(s->spec.idle);
    w.u32(s->spec.pos0);
    w.u32(s->spec.drafted);
    w.u32(s->spec.accepted);
    for (uint32_t i = 0; i < s->cur.pos; i++) w.i32(s->spec.hist[i]);
    save_kv(w, s->spec.dkv);
  }
}

bool gear_ok(int32_t g) { return g >= 0 && g < GB_GEAR_COUNT; }

// Check (apply false) or restore (apply true) the body.
gb_status load_body(R &r, gb_session *s, bool apply) {
  const Logger &log = s->log;
  const Meta &c = s->model->meta;
  const uint32_t V = c.vocab_size;
  const uint32_t hash = r.u32(), vocab = r.u32(), nl = r.u32(), nh = r.u32(), nkv = r.u32(), hd = r.u32();
  GB_RETURN_IF(r.bad, log, GB_ERR_CORRUPT, "session state: body truncated");
  GB_RETURN_IF(hash != model_hash(s->model) || vocab != V || nl != c.n_layers || nh != c.n_heads || nkv != c.n_kv_heads ||
                   hd != c.head_dim,
               log, GB_ERR_INVALID_ARGUMENT,
               "session state: saved from another model (hash %08x, vocab %u, %u layers; this session's model: %08x, %u, %u)",
               hash, vocab, nl, model_hash(s->model), V, c.n_layers);
  const uint32_t n_ctx = r.u32(), pos = r.u32();
  const int32_t pending = r.i32(), last_out = r.i32();
  const int32_t gpol = r.i32(), spk = r.i32(), svg = r.i32(), sdg = r.i32(), gear = r.i32();
  const uint64_t shifts = r.u64();
  GB_RETURN_IF(r.bad, log, GB_ERR_CORRUPT, "session state: body truncated");
  GB_RETURN_IF(pos > n_ctx, log, GB_ERR_CORRUPT, "session state: position %u beyond its n_ctx %u", pos, n_ctx);
  GB_RETURN_IF(pos > s->opt.n_ctx, log, GB_ERR_CONTEXT_FULL,
               "session state: saved at position %u (n_ctx %u); this session's n_ctx is %u", pos, n_ctx, s->opt.n_ctx);
  GB_RETURN_IF(pending < -1 || pending >= (int32_t)V || last_out < -1 || last_out >= (int32_t)V, log, GB_ERR_CORRUPT,
               "session state: pending token %d or last token %d out of range", pending, last_out);
  const bool spec = s->spec.on;
  GB_RETURN_IF(gpol != (int32_t)s->opt.gear || (spec && (spk != (int32_t)s->opt.spec_k || svg != (int32_t)s->opt.spec_verify_gear ||
                                                         sdg != (int32_t)s->opt.spec_draft_gear)),
               log, GB_ERR_INVALID_ARGUMENT,
               "session state: saved with gear policy %d (spec_k %d, verify %d, draft %d); this session runs %d", gpol, spk, svg,
               sdg, (int32_t)s->opt.gear);
  const Monitor &m = s->monitor;
  const bool locked = m.locked;
  GB_RETURN_IF(!gear_ok(gear) || (locked ? gear != (int32_t)s->gears.gear : gear > GB_GEAR_HIGH), log, GB_ERR_CORRUPT,
               "session state: gear %d invalid for this gear policy", gear);
  const uint32_t mw = r.u32();
  const float thl = r.f32(), thh = r.f32();
  const uint32_t mcount = r.u32(), mhead = r.u32();
  const int32_t mgear = r.i32();
  const uint32_t tig = r.u32();
  const uint8_t calibrated = r.u8();
  const int32_t predicted = r.i32();
  const uint8_t catastrophic = r.u8();
  const uint32_t hot_run = r.u32();
  GB_RETURN_IF(r.bad, log, GB_ERR_CORRUPT, "session state: monitor truncated");
  GB_RETURN_IF(mw != m.o.window, log, GB_ERR_INVALID_ARGUMENT, "session state: monitor window %u; this session's is %u", mw,
               m.o.window);
  GB_RETURN_IF(!finite(thl) || !finite(thh) || mcount > mw || mhead >= mw || !gear_ok(mgear) ||
                   (locked ? mgear != (int32_t)m.gear : mgear > GB_GEAR_HIGH) || !gear_ok(predicted) || calibrated > 1 ||
                   catastrophic > 1,
               log, GB_ERR_CORRUPT, "session state: monitor fields out of range");
  const size_t hist_at = r.at;
  for (uint32_t i = 0; i < mw; i++) GB_RETURN_IF(!finite(r.f32()), log, GB_ERR_CORRUPT, "session state: monitor entropy not finite");
  const uint64_t rng0 = r.u64(), rng1 = r.u64();
  const Control &ct = s->ctl;
  const uint32_t cw = r.u32(), ring_n = r.u32(), ring_head = r.u32();
  GB_RETURN_IF(r.bad, log, GB_ERR_CORRUPT, "session state: truncated before the penalty ring");
  GB_RETURN_IF(cw != ct.window, log, GB_ERR_INVALID_ARGUMENT, "session state: penalty window %u; this session's is %u", cw,
               ct.window);
  GB_RETURN_IF(ring_n > cw || (cw ? ring_head >= cw : ring_head != 0), log, GB_ERR_CORRUPT, "session state: penalty ring out of range");
  const size_t ring_at = r.at;
  for (uint32_t i = 0; i < cw; i++) {
    const int32_t tk = r.i32();
    GB_RETURN_IF(i < ring_n && (tk < 0 || tk >= (int32_t)V), log, GB_ERR_CORRUPT, "session state: penalty ring token %d out of range", tk);
  }
  const uint32_t stop_max = r.u32(), tail_n = r.u32();
  GB_RETURN_IF(r.bad, log, GB_ERR_CORRUPT, "session state: truncated before the stop tail");
  GB_RETURN_IF(stop_max != ct.stop_max, log, GB_ERR_INVALID_ARGUMENT,
               "session state: longest stop string %u bytes; this session's is %u", stop_max, ct.stop_max);
  GB_RETURN_IF(tail_n > (stop_max ? stop_max - 1 : 0), log, GB_ERR_CORRUPT, "session state: stop tail of %u bytes", tail_n);
  const uint8_t *tail = r.take(tail_n);
  GB_RETURN_IF(r.bad, log, GB_ERR_CORRUPT, "session state: stop tail truncated");
  if (apply) {
    s->cur.pos = pos;
    s->cur.pending = pending;
    s->cur.last_out = last_out;
    Monitor &mm = s->monitor;
    mm.th_low = thl;
    mm.th_high = thh;
    mm.count = mcount;
    mm.head = mhead;
    mm.gear = (gb_gear)mgear;
    mm.tokens_in_gear = tig;
    mm.calibrated = calibrated != 0;
    mm.predicted = (gb_gear)predicted;
    mm.catastrophic = catastrophic != 0;
    mm.hot_run = hot_run;
    R hr = r;
    hr.at = hist_at;
    for (uint32_t i = 0; i < mw; i++) mm.hist[i] = hr.f32();
    s->sampler.rng[0] = rng0;
    s->sampler.rng[1] = rng1;
    Control &cc = s->ctl;
    cc.ring_n = ring_n;
    cc.ring_head = ring_head;
    hr.at = ring_at;
    for (uint32_t i = 0; i < cw; i++) cc.ring[i] = hr.i32();
    cc.tail_n = tail_n;
    if (tail_n) memcpy(cc.tail, tail, tail_n);
  }
  GB_TRY(load_kv(r, &s->kv, apply, log, pos, "main"));
  const uint8_t sflag = r.u8();
  GB_RETURN_IF(r.bad || sflag != (spec ? 1 : 0), log, GB_ERR_CORRUPT, "session state: spec flag %u does not match its gear policy",
               sflag);
  if (spec) {
    const uint32_t dpos = r.u32();
    const double succ = r.f64(), trials = r.f64();
    const uint32_t idle = r.u32(), pos0 = r.u32(), drafted = r.u32(), accepted = r.u32();
    GB_RETURN_IF(r.bad, log, GB_ERR_CORRUPT, "session state: spec state truncated");
    GB_RETURN_IF(dpos > pos || !isfinite(succ) || !isfinite(trials) || succ < 0 || trials < 0, log, GB_ERR_CORRUPT,
                 "session state: spec state out of range (draft position %u of %u)", dpos, pos);
    const size_t h_at = r.at;
    for (uint32_t i = 0; i < pos; i++) {
      const int32_t tk = r.i32();
      GB_RETURN_IF(r.bad || tk < 0 || tk >= (int32_t)V, log, GB_ERR_CORRUPT, "session state: spec history token out of range");
    }
    if (apply) {
      s->spec.dpos = dpos;
      s->spec.succ = succ;
      s->spec.trials = trials;
      s->spec.idle = idle;
      s->spec.pos0 = pos0;
      s->spec.drafted = drafted;
      s->spec.accepted = accepted;
      s->spec.out_n = s->spec.out_i = 0;
      R hr = r;
      hr.at = h_at;
      for (uint32_t i = 0; i < pos; i++) s->spec.hist[i] = hr.i32();
    }
    GB_TRY(load_kv(r, &s->spec.dkv, apply, log, dpos, "draft"));
  }
  GB_RETURN_IF(r.at != r.n, log, GB_ERR_CORRUPT, "session state: %zu bytes after the last field", r.n - r.at);
  if (apply) {
    if (gear != (int32_t)s->gears.gear) shift_gear(s, (gb_gear)gear);
    s->gears.shifts = shifts;
  }
  return GB_OK;
}

}  // namespace
}  // namespace gb

using namespace gb;

extern "C" gb_status gb_session_state_size(const gb_session *s, size_t *out_bytes) {
  GB_TRY(gb::check_handle(s, gb::kHandleSession, "gb_session_state_size"));
  if (!out_bytes) return gb::null_arg(s->log, "gb_session_state_size", "out_bytes");
  GB_TRY(check_save(s));
  W w;
  save_body(w, s);
  *out_bytes = kHeadBytes + w.n;
  return GB_OK;
}

extern "C" gb_status gb_session_state_max_size(const gb_session *s, size_t *out_bytes) {
  GB_TRY(gb::check_handle(s, gb::kHandleSession, "gb_session_state_max_size"));
  if (!out_bytes) return gb::null_arg(s->log, "gb_session_state_max_size", "out_bytes");
  uint64_t n = kHeadBytes + 256 + 4ull * s->monitor.o.window + 4ull * s->ctl.window + s->ctl.stop_max + kv_max_bytes(s->kv);
  if (s->spec.on) n += 64 + 4ull * s->opt.n_ctx + kv_max_bytes(s->spec.dkv);
  *out_bytes = (size_t)n;
  return GB_OK;
}

extern "C" gb_status gb_session_state_save(const gb_session *s, void *buf, size_t cap, size_t *n_out) {
  GB_TRY(gb::check_handle(s, gb::kHandleSession, "gb_session_state_save"));
  if (!n_out) return gb::null_arg(s->log, "gb_session_state_save", "n_out");
  if (!buf && cap) return gb::null_arg(s->log, "gb_session_state_save", "buf (with cap > 0)");
  GB_TRY(check_save(s));
  W count;
  save_body(count, s);
  const size_t need = kHeadBytes + count.n;
  if (cap < need) {
    *n_out = need;
    return fail(s->log, GB_ERR_BUFFER_TOO_SMALL, "gb_session_state_save: %zu bytes given, %zu needed", cap, need);
  }
  uint8_t *b = static_cast<uint8_t *>(buf);
  W w;
  w.p = b + kHeadBytes;
  save_body(w, s);
  memcpy(b, kMagic, 8);
  st_u32(b + 8, kVersion);
  st_u32(b + 12, 0);
  st_u64(b + 16, w.n);
  st_u32(b + 24, crc32_update(0, b + kHeadBytes, w.n));
  st_u32(b + 28, 0);
  *n_out = need;
  return GB_OK;
}

extern "C" gb_status gb_session_state_load(gb_session *s, const void *buf, size_t len) {
  GB_TRY(gb::check_handle(s, gb::kHandleSession, "gb_session_state_load"));
  if (!buf) return gb::null_arg(s->log, "gb_session_state_load", "buf");
  const uint8_t *b = static_cast<const uint8_t *>(buf);
  GB_RETURN_IF(len < 8 || memcmp(b, kMagic, 8) != 0, s->log, GB_ERR_BAD_MAGIC, "gb_session_state_load: not a session state image");
  GB_RETURN_IF(len < kHeadBytes, s->log, GB_ERR_TRUNCATED, "gb_session_state_load: %zu bytes, shorter than the header", len);
  const uint32_t version = ld_u32(b + 8);
  GB_RETURN_IF(version != kVersion, s->log, GB_ERR_UNSUPPORTED_VERSION, "gb_session_state_load: version %u (this library reads %u)",
               version, kVersion);
  GB_RETURN_IF(ld_u32(b + 12) != 0 || ld_u32(b + 28) != 0, s->log, GB_ERR_CORRUPT, "gb_session_state_load: reserved header fields set");
  const uint64_t body = ld_u64(b + 16);
  GB_RETURN_IF(body > len - kHeadBytes, s->log, GB_ERR_TRUNCATED, "gb_session_state_load: the body needs %llu bytes, %zu given",
               (unsigned long long)body, len - kHeadBytes);
  GB_RETURN_IF(body < len - kHeadBytes, s->log, GB_ERR_CORRUPT, "gb_session_state_load: %zu bytes after the image's %llu",
               (size_t)(len - kHeadBytes - body), (unsigned long long)body);
  GB_RETURN_IF(crc32_update(0, b + kHeadBytes, (size_t)body) != ld_u32(b + 24), s->log, GB_ERR_CHECKSUM,
               "gb_session_state_load: body CRC32 mismatch");
  R check{b + kHeadBytes, (size_t)body};
  GB_TRY(load_body(check, s, false));
  R apply{b + kHeadBytes, (size_t)body};
  const gb_status st = load_body(apply, s, true);
  if (st != GB_OK) return fail(s->log, GB_ERR_INTERNAL, "gb_session_state_load: the image passed its checks and then failed");
  s->log.log(GB_LOG_INFO, "session state loaded: position %u, %u KV tokens", s->cur.pos, s->kv.n_tokens);
  return GB_OK;
}
