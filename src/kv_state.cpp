// kv_state.cpp — the KV pool's record of a saved session state (the format
// is in state.cpp's header comment).
#include "format.h"
#include "kv.h"
#include "state_fields.h"
#include "state_io.h"

namespace gb {
namespace state {
namespace {

constexpr uint32_t kTagKv = tag("KVPL");

GB_STATE_FIELDS(KvPlan, GB_KV_PLAN_FIELDS)
GB_STATE_FIELDS(KvConfig, GB_KV_OPTIONS_FIELDS)
GB_STATE_FIELDS(KvPool, GB_KV_POOL_FIELDS)

inline uint32_t pages_for(uint32_t count, uint32_t tpp) { return (count + tpp - 1) / tpp; }

// Length of the natural prefix of a stack (n-1, n-2, ... at its bottom).
uint32_t natural_prefix(const uint32_t *stack, uint32_t len, uint32_t n) {
  uint32_t p = 0;
  while (p < len && stack[p] == n - 1 - p) p++;
  return p;
}

inline void bit_set(uint8_t *m, uint32_t i) { m[i >> 3] |= (uint8_t)(1u << (i & 7)); }
inline bool bit_get(const uint8_t *m, uint32_t i) { return m[i >> 3] >> (i & 7) & 1; }

}  // namespace

void save_kv(W &w, const KvPool &kv) {
  const size_t rec = w.begin(kTagKv);
  put_fields(w, kv);
  const KvPlan &p = kv.plan;
  const uint32_t sp = natural_prefix(kv.free_slots, kv.n_free_slots, p.cap);
  const uint32_t ks = p.cap - sp;
  w.u32(ks);
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
    w.u32(p.n_pages - pp);
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
  // The rings: the occupied indexes with their positions, then per ring
  // their records and scales.
  if (p.ring_layers) {
    uint32_t occupied = 0;
    for (uint32_t i = 0; i < p.ring_cap; i++) occupied += kv.ring.pos[i] != kRingEmpty ? 1 : 0;
    w.u32(occupied);
    for (uint32_t i = 0; i < p.ring_cap; i++)
      if (kv.ring.pos[i] != kRingEmpty) {
        w.u32(i);
        w.u32(kv.ring.pos[i]);
      }
    const uint32_t rb = p.ring_rec, RR2 = 2 * p.ring_kv_heads;
    for (uint32_t r = 0; r < p.ring_layers; r++)
      for (uint32_t i = 0; i < p.ring_cap; i++) {
        if (kv.ring.pos[i] == kRingEmpty) continue;
        const size_t at = (size_t)r * p.ring_cap + i;
        w.raw(kv.ring.data + at * rb, rb);
        if (kv.ring.scales)
          for (uint32_t j = 0; j < RR2; j++) w.u16(kv.ring.scales[at * RR2 + j]);
      }
  }
  // The short-convolution layers: the positions a next one reads (the
  // newest conv_taps - 1 held), ascending, then per layer their rows.
  if (p.conv_layers) {
    uint32_t keep[kMaxConvKernel], n = 0;
    for (uint32_t back = p.conv_taps - 1; back >= 1; back--) {
      if (kv.n_tokens == 0 || kv.newest + 1 < back) continue;
      const uint32_t ps = kv.newest + 1 - back;
      if (kv.conv.pos[ps % p.conv_cap] == ps) keep[n++] = ps;
    }
    w.u32(n);
    for (uint32_t i = 0; i < n; i++) w.u32(keep[i]);
    for (uint32_t l = 0; l < p.conv_layers; l++)
      for (uint32_t i = 0; i < n; i++)
        for (uint32_t c = 0; c < p.conv_dim; c++)
          w.f32(kv.conv.rows[((size_t)l * p.conv_cap + keep[i] % p.conv_cap) * p.conv_dim + c]);
  }
  // The Gated DeltaNet layers: the position the states stand at, then the
  // states (the checkpoint and log are rebuilt from them at load).
  if (p.delta_layers) {
    w.u32(kv.delta.next);
    const size_t n = (size_t)p.delta_layers * p.delta_state();
    for (size_t i = 0; i < n; i++) w.f32(kv.delta.s[i]);
  }
  w.end(rec);
}

// Upper bound of save_kv's bytes for any state of the pool.
uint64_t kv_max_bytes(const KvPool &kv) {
  const KvPlan &p = kv.plan;
  const uint64_t cap = p.cap, H = kv.n_heads;
  uint64_t n = kRecordHead + fields_bytes(kv) + 8 + 4 * cap + 4 * H;  // fields, free-slot tail, head_w
  n += cap * (4 + 8 + 12 + 4);                                        // per slot
  uint64_t rec_max = 0;
  for (uint32_t lv = 0; lv < kLevels; lv++) rec_max = p.rec[lv] > rec_max ? p.rec[lv] : rec_max;
  uint64_t layer = 8 + 4ull * p.n_pages + 4 * H + 8;  // free pages, head_ema
  layer += kLevels * (4 + 4ull) + 4ull * (cap + kLevels) + 4 * cap + cap * rec_max;  // buckets
  layer += cap * ((uint64_t)p.scale_bytes + 4 + 5);  // per slot
  const uint64_t rings = 4 + 8ull * p.ring_cap + (uint64_t)p.ring_layers * p.ring_cap * ((uint64_t)p.ring_rec + p.ring_scale_bytes);
  const uint64_t conv = p.conv_layers ? 4 + 4ull * p.conv_taps + (uint64_t)p.conv_layers * p.conv_taps * p.conv_dim * 4 : 0;
  const uint64_t delta = p.delta_layers ? 4 + 4ull * p.delta_layers * p.delta_state() : 0;
  return n + layer * kv.n_layers + rings + conv + delta;
}

// Read a pool record into kv (apply) or only check it against kv (!apply).
// pos_limit: positions the session holds (every token's position is below).
gb_status load_kv(R &outer, KvPool *kv, bool apply, const Logger &log, uint32_t pos_limit, const char *which) {
  R r{nullptr, 0};
  GB_TRY(open_record(outer, kTagKv, &r, log, which));
  KvPool in = *kv;
  GB_TRY(read_fields(r, *kv, &in, log, which));
  const KvPlan &t = kv->plan;
  const uint32_t n_tokens = in.n_tokens, newest = in.newest;
  const uint32_t ks = r.u32(), st = r.u32();  // slots ever used, free-slot tail
  GB_RETURN_IF(r.bad, log, GB_ERR_CORRUPT, "session state: %s truncated", which);
  GB_RETURN_IF(n_tokens > pos_limit || newest > pos_limit, log, GB_ERR_CORRUPT,
               "session state: %s counters (tokens %u, newest %u) beyond the position %u", which, n_tokens, newest, pos_limit);
  GB_RETURN_IF(st > ks || ks - st != n_tokens, log, GB_ERR_CORRUPT,
               "session state: %s holds %u tokens, its free slots say %u of %u", which, n_tokens, ks - st, ks);
  GB_RETURN_IF(ks > t.cap || n_tokens > t.max_tokens, log, GB_ERR_BUDGET_EXCEEDED,
               "session state: %s holds %u tokens in slots up to %u; this session's pool has %u slots and holds %u tokens",
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
    GB_RETURN_IF(r.bad, log, GB_ERR_CORRUPT, "session state: %s truncated in its free slots", which);
    GB_RETURN_IF(s >= ks || bit_get(free_map, s), log, GB_ERR_CORRUPT, "session state: %s free slot %u invalid or repeated",
                 which, s);
    bit_set(free_map, s);
  }
  if (apply) {
    set_fields(kv, in);
    // The target's natural prefix, then the saved tail.
    kv->n_free_slots = 0;
    for (uint32_t s = cap; s-- > ks;) kv->free_slots[kv->n_free_slots++] = s;
    R tr = r;
    tr.at = tail_at;
    for (uint32_t i = 0; i < st; i++) kv->free_slots[kv->n_free_slots++] = tr.u32();
    if (kv->cur_slot >= cap) kv->cur_slot = 0;
  }
  for (uint32_t h = 0; h < kv->n_heads; h++) {
    const float v = r.f32();
    GB_RETURN_IF(!finite(v), log, GB_ERR_CORRUPT, "session state: %s head weight not finite", which);
    if (apply) kv->head_w[h] = v;
  }
  const KvPlan &p = t;  // the layout is the saved one (its MATCH fields)
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
    GB_RETURN_IF(r.bad, log, GB_ERR_CORRUPT, "session state: %s truncated in its slots", which);
    GB_RETURN_IF(ps >= pos_limit || birth > in.step || !finite(wema) || !finite(wsum) || !finite(imp) || !finite(snap), log,
                 GB_ERR_CORRUPT, "session state: %s slot %u: position %u, birth or statistics out of range", which, s, ps);
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
    const uint32_t kp = r.u32(), pt = r.u32();  // pages ever used, free-page tail
    GB_RETURN_IF(r.bad, log, GB_ERR_CORRUPT, "session state: %s truncated at layer %u", which, l);
    GB_RETURN_IF(pt > kp, log, GB_ERR_CORRUPT, "session state: %s layer %u: %u free pages of %u used", which, l, pt, kp);
    GB_RETURN_IF(kp > ks + kLevels || kp > page_map_bits, log, GB_ERR_CORRUPT, "session state: %s layer %u used %u pages for %u slots",
                 which, l, kp, ks);
    GB_RETURN_IF(kp > t.n_pages || kp - pt > t.n_pages - t.reserve, log, GB_ERR_BUDGET_EXCEEDED,
                 "session state: %s layer %u uses pages up to %u; this session's pool has %u", which, l, kp, t.n_pages);
    memset(page_map, 0, (kp + 7) / 8);
    const size_t ptail_at = r.at;
    for (uint32_t i = 0; i < pt; i++) {
      const uint32_t g = r.u32();
      GB_RETURN_IF(r.bad, log, GB_ERR_CORRUPT, "session state: %s truncated in layer %u's free pages", which, l);
      GB_RETURN_IF(g >= kp || bit_get(page_map, g), log, GB_ERR_CORRUPT, "session state: %s layer %u free page %u invalid or repeated",
                   which, l, g);
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
      GB_RETURN_IF(!finite(v), log, GB_ERR_CORRUPT, "session state: %s layer %u head EMA not finite", which, l);
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
                   "session state: %s layer %u level %u: %u records, more than its tokens", which, l, lv, count);
      tokens += count;
      const uint32_t np = pages_for(count, p.tpp[lv]);
      pages += np;
      GB_RETURN_IF(pages > kp - pt, log, GB_ERR_CORRUPT, "session state: %s layer %u: buckets use more pages than it has", which, l);
      KvBucket &b = y.bucket[lv];
      for (uint32_t i = 0; i < np; i++) {
        const uint32_t g = r.u32();
        GB_RETURN_IF(r.bad || g >= kp || bit_get(page_map, g), log, GB_ERR_CORRUPT,
                     "session state: %s layer %u level %u: page %u invalid or repeated", which, l, lv, g);
        bit_set(page_map, g);
        if (apply) b.pages[i] = g;
      }
      for (uint32_t i = 0; i < count; i++) {
        const uint32_t s = r.u32();
        GB_RETURN_IF(r.bad || s >= ks || bit_get(free_map, s) || bit_get(seen, s), log, GB_ERR_CORRUPT,
                     "session state: %s layer %u level %u: slot %u invalid, free or repeated", which, l, lv, s);
        bit_set(seen, s);
        if (apply) {
          b.slots[i] = s;
          y.level[s] = (uint8_t)lv;
          y.index[s] = i;
        }
      }
      const uint8_t *recs = r.take((size_t)count * p.rec[lv]);
      GB_RETURN_IF(!recs, log, GB_ERR_CORRUPT, "session state: %s layer %u level %u: records truncated", which, l, lv);
      if (apply) {
        b.count = count;
        for (uint32_t j = 0; j < count; j++)
          memcpy(y.pages + (size_t)b.pages[j / p.tpp[lv]] * p.page_bytes + (size_t)(j % p.tpp[lv]) * p.rec[lv],
                 recs + (size_t)j * p.rec[lv], p.rec[lv]);
      }
    }
    GB_RETURN_IF(tokens != n_tokens || pages != kp - pt, log, GB_ERR_CORRUPT,
                 "session state: %s layer %u: %u records in %u pages, expected %u tokens in %u", which, l, tokens, pages, n_tokens,
                 kp - pt);
    if (apply)
      for (uint32_t lv = 0; lv < kLevels; lv++)
        if (!(p.levels >> lv & 1)) y.bucket[lv].count = 0;
    for (uint32_t s = 0; s < ks; s++) {
      if (bit_get(free_map, s)) continue;
      const uint8_t *sc = p.scale_bytes ? r.take((size_t)R2 * 2) : nullptr;
      const float ema = p.importance ? r.f32() : 0.0f;
      const float rref = seed ? r.f32() : 0.0f;
      const uint8_t rcnt = seed ? r.u8() : 0;
      GB_RETURN_IF(r.bad, log, GB_ERR_CORRUPT, "session state: %s layer %u truncated in its slots", which, l);
      GB_RETURN_IF(!finite(ema) || !finite(rref), log, GB_ERR_CORRUPT, "session state: %s layer %u slot %u statistics not finite", which,
                   l, s);
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
  if (p.ring_layers) {
    // Occupied ring indexes, ascending, each holding a position of its
    // residue class below the session's position.
    const uint32_t occupied = r.u32();
    GB_RETURN_IF(r.bad || occupied > p.ring_cap, log, GB_ERR_CORRUPT, "session state: %s ring: %u records for %u indexes", which,
                 occupied, p.ring_cap);
    if (apply)
      for (uint32_t i = 0; i < p.ring_cap; i++) kv->ring.pos[i] = kRingEmpty;
    uint32_t prev = 0;
    for (uint32_t j = 0; j < occupied; j++) {
      const uint32_t i = r.u32(), ps = r.u32();
      GB_RETURN_IF(r.bad, log, GB_ERR_CORRUPT, "session state: %s ring truncated", which);
      GB_RETURN_IF((j > 0 && i <= prev) || i >= p.ring_cap || ps >= pos_limit || ps % p.ring_cap != i, log, GB_ERR_CORRUPT,
                   "session state: %s ring index %u holds position %u: out of order or range", which, i, ps);
      prev = i;
      if (apply) kv->ring.pos[i] = ps;
    }
    const uint32_t rec = p.ring_rec, RR2 = 2 * p.ring_kv_heads;
    for (uint32_t l = 0; l < p.ring_layers; l++) {
      // The records in index order (as written); applied at the occupied indexes.
      uint32_t i = 0;
      for (uint32_t j = 0; j < occupied; j++) {
        const uint8_t *src = r.take(rec);
        const uint8_t *sc = p.ring_scale_bytes ? r.take((size_t)RR2 * 2) : nullptr;
        GB_RETURN_IF(!src || (p.ring_scale_bytes && !sc), log, GB_ERR_CORRUPT, "session state: %s ring layer %u truncated", which, l);
        if (!apply) continue;
        while (kv->ring.pos[i] == kRingEmpty) i++;
        const size_t at = (size_t)l * p.ring_cap + i++;
        memcpy(kv->ring.data + at * rec, src, rec);
        if (sc)
          for (uint32_t k = 0; k < RR2; k++) kv->ring.scales[at * RR2 + k] = ld_u16(sc + 2 * k);
      }
    }
  }
  if (p.conv_layers) {
    // The newest positions' rows of the short convolutions: fewer than
    // conv_taps positions, ascending, below the session's position (so
    // that no two share an index of any conv_cap >= conv_taps - 1).
    const uint32_t n = r.u32();
    GB_RETURN_IF(r.bad || n >= p.conv_taps, log, GB_ERR_CORRUPT, "session state: %s convolution state: %u rows for %u taps", which, n,
                 p.conv_taps);
    uint32_t ps[kMaxConvKernel];
    for (uint32_t i = 0; i < n; i++) {
      ps[i] = r.u32();
      GB_RETURN_IF(r.bad || ps[i] >= pos_limit || (i > 0 && ps[i] != ps[i - 1] + 1), log,
                   GB_ERR_CORRUPT, "session state: %s convolution row of position %u out of order or range", which, ps[i]);
    }
    if (apply)
      for (uint32_t i = 0; i < p.conv_cap; i++) kv->conv.pos[i] = kRingEmpty;
    for (uint32_t l = 0; l < p.conv_layers; l++)
      for (uint32_t i = 0; i < n; i++) {
        const uint8_t *src = r.take((size_t)p.conv_dim * 4);
        GB_RETURN_IF(!src, log, GB_ERR_CORRUPT, "session state: %s convolution layer %u truncated", which, l);
        for (uint32_t c = 0; c < p.conv_dim; c++)
          GB_RETURN_IF(!finite(ld_f32(src + 4 * c)), log, GB_ERR_CORRUPT, "session state: %s convolution layer %u not finite", which, l);
        if (!apply) continue;
        kv->conv.pos[ps[i] % p.conv_cap] = ps[i];
        memcpy(kv->conv.rows + ((size_t)l * p.conv_cap + ps[i] % p.conv_cap) * p.conv_dim, src, (size_t)p.conv_dim * 4);
      }
  }
  if (p.delta_layers) {
    const uint32_t next = r.u32();
    GB_RETURN_IF(r.bad || next > pos_limit, log, GB_ERR_CORRUPT, "session state: %s recurrent state at position %u beyond %u", which,
                 next, pos_limit);
    const size_t n = (size_t)p.delta_layers * p.delta_state();
    const uint8_t *src = r.take(n * 4);
    GB_RETURN_IF(!src, log, GB_ERR_CORRUPT, "session state: %s recurrent state truncated", which);
    for (size_t i = 0; i < n; i++)
      GB_RETURN_IF(!finite(ld_f32(src + 4 * i)), log, GB_ERR_CORRUPT, "session state: %s recurrent state not finite", which);
    if (apply) {
      memcpy(kv->delta.s, src, n * 4);
      if (kv->delta.ck) memcpy(kv->delta.ck, src, n * 4);
      kv->delta.next = kv->delta.ck_pos = next;
    }
  }
  return close_record(r, log, which);
}

}  // namespace state
}  // namespace gb
