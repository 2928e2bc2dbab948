// state.cpp — session state save / restore (gb_session_state_*).
//
// What is saved of each part of a session is declared once, next to the
// part's struct, as a field list (state_fields.h); this file expands those
// lists and adds what a list cannot say: variable-length contents (OWN
// fields) and the checks of values read back.
//
// Image format (version 2), every integer little-endian, floats as IEEE bits:
//
//   header (32 bytes)
//     +0  char[8] magic "GBSTATE\0"      +8  u32 version (2)      +12 u32 flags (0)
//     +16 u64 body_bytes                 +24 u32 CRC32 of the body +28 u32 reserved (0)
//   body: records, each u32 tag, u32 payload bytes, payload; in this order:
//     MODL  the model: u32 hash (CRC32 of the .gbx metadata fields and of
//           every section's kind, size and CRC), vocab, n_layers, n_heads,
//           n_kv_heads, head_dim
//     CURS  u32 n_ctx (when saved), then GB_CURSOR_FIELDS
//     GEAR  GB_GEARS_FIELDS; OWN: i32 gear of the next pass
//     MONI  GB_MONITOR_FIELDS; OWN: u32 window, f32 hist[window]
//     SAMP  GB_SAMPLER_FIELDS
//     CTRL  GB_CONTROL_FIELDS; OWN: i32 ring[window], u32 tail_n, tail bytes
//     KVPL  the KV pool: GB_KV_POOL_FIELDS (with GB_KV_PLAN_FIELDS and
//           GB_KV_OPTIONS_FIELDS nested), then its contents (below)
//     SPEC  only for GB_GEAR_SPEC: GB_SPEC_FIELDS; OWN: i32 hist[pos], then
//           the draft's pool as a KVPL record
//   Fields are written in list order, SAVE / MATCH / NEST entries only;
//   scalars at their size (bool and u8 1 byte, enums 4), arrays element by
//   element.
//
//   KV pool contents (after its fields):
//     u32 ks (slots ever used), u32 t, u32 tail[t]: the free-slot stack is
//           (cap-1, cap-2, ..., ks) then tail, so slots below ks are the
//           tail's or occupied; ks - t = n_tokens
//     f32 head_w[n_heads]
//     per occupied slot (increasing slot < ks): u32 pos, u64 birth,
//           [f32 wema, wsum, imp when importance], [f32 snap for SEED]
//     per layer: u32 kp (pages ever used), u32 t, u32 tail[t] (free pages,
//           as the slots), f32 head_ema[n_heads], u64 next_realloc;
//           per level of the plan: u32 count, u32 pages[ceil(count / tpp)],
//           u32 slots[count], the count records (rec bytes each, bucket order);
//           per occupied slot: u16 scales[2 * n_kv_heads] when quantized,
//           f32 ema when importance, f32 rank_ref + u8 rank_cnt for SEED.
//
// The stacks are stored relative to the slots and pages ever used, so an
// image loads into a pool with more slots or pages (a larger n_ctx): the new
// ones join the bottom of the stacks. Page and slot ids stay as saved
// (attention reads buckets in record order through their pages, so the runs
// stay the same and the results bit-identical).
//
// Loading parses the image twice: once only checking (into copies of the
// parts), once writing, so a failed load changes nothing. The KV checks use
// bitmaps in the KV pool's attention scratch (score_slot, scores), which
// holds nothing between calls.
#include <math.h>
#include <string.h>

#include "bytes.h"
#include "crc32.h"
#include "gears.h"
#include "session.h"
#include "state_fields.h"

namespace gb {
namespace {

constexpr char kMagic[8] = {'G', 'B', 'S', 'T', 'A', 'T', 'E', 0};
constexpr uint32_t kVersion = 2;
constexpr size_t kHeadBytes = 32;

// Record tags: four characters, read as a little-endian u32.
constexpr uint32_t tag(const char (&s)[5]) {
  return (uint32_t)(uint8_t)s[0] | (uint32_t)(uint8_t)s[1] << 8 | (uint32_t)(uint8_t)s[2] << 16 | (uint32_t)(uint8_t)s[3] << 24;
}
constexpr uint32_t kTagModel = tag("MODL"), kTagCursor = tag("CURS"), kTagGears = tag("GEAR"), kTagMonitor = tag("MONI"),
                   kTagSampler = tag("SAMP"), kTagControl = tag("CTRL"), kTagKv = tag("KVPL"), kTagSpec = tag("SPEC");
constexpr size_t kRecordHead = 8;

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

// The model a state belongs to.
struct ModelId {
  uint32_t hash, vocab, n_layers, n_heads, n_kv_heads, head_dim;
};
#define GB_MODEL_ID_FIELDS(F) \
  F(MATCH, hash) F(MATCH, vocab) F(MATCH, n_layers) F(MATCH, n_heads) F(MATCH, n_kv_heads) F(MATCH, head_dim)

ModelId model_id(const gb_model *m) {
  const Meta &c = m->meta;
  return ModelId{model_hash(m), c.vocab_size, c.n_layers, c.n_heads, c.n_kv_heads, c.head_dim};
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
  // A record: its tag and a length patched by end().
  size_t begin(uint32_t t) {
    u32(t);
    const size_t at = n;
    u32(0);
    return at;
  }
  void end(size_t at) {
    if (p) st_u32(p + at, (uint32_t)(n - at - 4));
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

// ---- field values on the wire ----
inline void put(W &w, bool v) { w.u8(v ? 1 : 0); }
inline void put(W &w, uint8_t v) { w.u8(v); }
inline void put(W &w, uint32_t v) { w.u32(v); }
inline void put(W &w, int32_t v) { w.i32(v); }
inline void put(W &w, uint64_t v) { w.u64(v); }
inline void put(W &w, float v) { w.f32(v); }
inline void put(W &w, double v) { w.f64(v); }
inline void put(W &w, gb_gear v) { w.i32(raw_enum(v)); }
template <class T, size_t N>
void put(W &w, const T (&a)[N]) {
  for (size_t i = 0; i < N; i++) put(w, a[i]);
}

// A bool must read 0 or 1: anything else is a corrupt image.
inline void get(R &r, bool *v) {
  const uint8_t b = r.u8();
  if (b > 1) r.bad = true;
  *v = b != 0;
}
inline void get(R &r, uint8_t *v) { *v = r.u8(); }
inline void get(R &r, uint32_t *v) { *v = r.u32(); }
inline void get(R &r, int32_t *v) { *v = r.i32(); }
inline void get(R &r, uint64_t *v) { *v = r.u64(); }
inline void get(R &r, float *v) { *v = r.f32(); }
inline void get(R &r, double *v) { *v = r.f64(); }
// Enums are read as their raw bits; the part's checks judge the value.
inline void get(R &r, gb_gear *v) {
  const int32_t x = r.i32();
  memcpy(v, &x, sizeof x);
}
template <class T, size_t N>
void get(R &r, T (*a)[N]) {
  for (size_t i = 0; i < N; i++) get(r, &(*a)[i]);
}

template <class T>
uint64_t wire_bytes(const T &) {
  return sizeof(T) == 1 ? 1 : sizeof(T) <= 4 ? 4 : 8;
}
template <class T, size_t N>
uint64_t wire_bytes(const T (&a)[N]) {
  return N * wire_bytes(a[0]);
}

// A MATCH field: whether the saved value equals this session's.
template <class T>
bool match(R &r, const T &cur) {
  T v;
  get(r, &v);
  return r.bad || v == cur;  // a short read is reported as truncation, not as a mismatch
}
template <class T, size_t N>
bool match(R &r, const T (&cur)[N]) {
  bool same = true;
  for (size_t i = 0; i < N; i++) same = match(r, cur[i]) && same;
  return same;
}

template <class T>
void assign(T *d, const T &s) {
  *d = s;
}
template <class T, size_t N>
void assign(T (*d)[N], const T (&s)[N]) {
  for (size_t i = 0; i < N; i++) (*d)[i] = s[i];
}

// The first MATCH field of a part whose saved value differs.
struct Mismatch {
  const char *field = nullptr;
  void note(const char *f) {
    if (!field) field = f;
  }
};

GB_STATE_FIELDS(ModelId, GB_MODEL_ID_FIELDS)
GB_STATE_FIELDS(Cursor, GB_CURSOR_FIELDS)
GB_STATE_FIELDS(Gears, GB_GEARS_FIELDS)
GB_STATE_FIELDS(Monitor, GB_MONITOR_FIELDS)
GB_STATE_FIELDS(Sampler, GB_SAMPLER_FIELDS)
GB_STATE_FIELDS(Control, GB_CONTROL_FIELDS)
GB_STATE_FIELDS(KvPlan, GB_KV_PLAN_FIELDS)
GB_STATE_FIELDS(gb_kv_options, GB_KV_OPTIONS_FIELDS)
GB_STATE_FIELDS(KvPool, GB_KV_POOL_FIELDS)
GB_STATE_FIELDS(Spec, GB_SPEC_FIELDS)

// Read a part's fields into *out (a copy of the part), comparing MATCH fields
// with cur: GB_ERR_CORRUPT when the record ends early, GB_ERR_INVALID_ARGUMENT
// naming the first field saved with another value.
template <class T>
gb_status read_fields(R &r, const T &cur, T *out, const Logger &log, const char *part) {
  Mismatch mm;
  get_fields(r, cur, out, &mm);
  GB_RETURN_IF(r.bad, log, GB_ERR_CORRUPT, "session state: the %s record is truncated or holds an invalid value", part);
  GB_RETURN_IF(mm.field, log, GB_ERR_INVALID_ARGUMENT,
               "session state: saved with another %s (field %s differs from this session's)", part, mm.field);
  return GB_OK;
}

// The payload of the next record, which must carry tag t.
gb_status open_record(R &r, uint32_t t, R *out, const Logger &log, const char *part) {
  const uint32_t got = r.u32(), len = r.u32();
  GB_RETURN_IF(r.bad, log, GB_ERR_CORRUPT, "session state: the image ends before the %s record", part);
  GB_RETURN_IF(got != t, log, GB_ERR_CORRUPT, "session state: record %08x where the %s record belongs", got, part);
  const uint8_t *q = r.take(len);
  GB_RETURN_IF(!q, log, GB_ERR_CORRUPT, "session state: the %s record (%u bytes) runs past the image", part, len);
  *out = R{q, len};
  return GB_OK;
}
gb_status close_record(const R &r, const Logger &log, const char *part) {
  GB_RETURN_IF(r.bad, log, GB_ERR_CORRUPT, "session state: the %s record is truncated", part);
  GB_RETURN_IF(r.at != r.n, log, GB_ERR_CORRUPT, "session state: %zu bytes after the %s record's last field", r.n - r.at, part);
  return GB_OK;
}

inline uint32_t pages_for(uint32_t count, uint32_t tpp) { return (count + tpp - 1) / tpp; }

// Length of the natural prefix of a stack (n-1, n-2, ... at its bottom).
uint32_t natural_prefix(const uint32_t *stack, uint32_t len, uint32_t n) {
  uint32_t p = 0;
  while (p < len && stack[p] == n - 1 - p) p++;
  return p;
}

inline bool finite(float v) { return isfinite(v) != 0; }
inline bool gear_ok(int32_t g) { return g >= 0 && g < GB_GEAR_COUNT; }
inline void bit_set(uint8_t *m, uint32_t i) { m[i >> 3] |= (uint8_t)(1u << (i & 7)); }
inline bool bit_get(const uint8_t *m, uint32_t i) { return m[i >> 3] >> (i & 7) & 1; }

// ---- the KV pool ----

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
  return n + layer * kv.n_layers;
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
  return close_record(r, log, which);
}

// ---- the session's parts ----

gb_status check_save(const gb_session *s) {
  GB_RETURN_IF(s->spec.on && s->spec.out_i < s->spec.out_n, s->log, GB_ERR_BAD_STATE,
               "session state: a spec session is in the middle of a round (%u of %u tokens handed out); decode on and save "
               "after the round",
               s->spec.out_i, s->spec.out_n);
  return GB_OK;
}

void save_body(W &w, const gb_session *s) {
  size_t r = w.begin(kTagModel);
  put_fields(w, model_id(s->model));
  w.end(r);
  r = w.begin(kTagCursor);
  w.u32(s->opt.n_ctx);
  put_fields(w, s->cur);
  w.end(r);
  r = w.begin(kTagGears);
  put_fields(w, s->gears);
  w.i32(raw_enum(s->gears.gear));
  w.end(r);
  const Monitor &m = s->monitor;
  r = w.begin(kTagMonitor);
  put_fields(w, m);
  w.u32(m.o.window);
  for (uint32_t i = 0; i < m.o.window; i++) w.f32(m.hist[i]);
  w.end(r);
  r = w.begin(kTagSampler);
  put_fields(w, s->sampler);
  w.end(r);
  const Control &ct = s->ctl;
  r = w.begin(kTagControl);
  put_fields(w, ct);
  for (uint32_t i = 0; i < ct.window; i++) w.i32(ct.ring[i]);
  w.u32(ct.tail_n);
  w.raw(ct.tail, ct.tail_n);
  w.end(r);
  save_kv(w, s->kv);
  if (s->spec.on) {
    r = w.begin(kTagSpec);
    put_fields(w, s->spec);
    for (uint32_t i = 0; i < s->cur.pos; i++) w.i32(s->spec.hist[i]);
    save_kv(w, s->spec.dkv);
    w.end(r);
  }
}

// Check (apply false) or restore (apply true) the body.
gb_status load_body(R &body, gb_session *s, bool apply) {
  const Logger &log = s->log;
  const uint32_t V = s->model->meta.vocab_size;
  R r{nullptr, 0};

  GB_TRY(open_record(body, kTagModel, &r, log, "model"));
  const ModelId id = model_id(s->model);
  ModelId saved = id;
  {
    Mismatch mm;
    get_fields(r, id, &saved, &mm);
    GB_RETURN_IF(r.bad, log, GB_ERR_CORRUPT, "session state: the model record is truncated");
    GB_RETURN_IF(mm.field, log, GB_ERR_INVALID_ARGUMENT,
                 "session state: saved from another model (its %s differs: this session's model has hash %08x, vocab %u, %u layers)",
                 mm.field, id.hash, id.vocab, id.n_layers);
  }
  GB_TRY(close_record(r, log, "model"));

  GB_TRY(open_record(body, kTagCursor, &r, log, "cursor"));
  const uint32_t n_ctx = r.u32();
  Cursor cur = s->cur;
  GB_TRY(read_fields(r, s->cur, &cur, log, "cursor"));
  GB_TRY(close_record(r, log, "cursor"));
  GB_RETURN_IF(cur.pos > n_ctx, log, GB_ERR_CORRUPT, "session state: position %u beyond its n_ctx %u", cur.pos, n_ctx);
  GB_RETURN_IF(cur.pos > s->opt.n_ctx, log, GB_ERR_CONTEXT_FULL,
               "session state: saved at position %u (n_ctx %u); this session's n_ctx is %u", cur.pos, n_ctx, s->opt.n_ctx);
  GB_RETURN_IF(cur.pending < -1 || cur.pending >= (int32_t)V || cur.last_out < -1 || cur.last_out >= (int32_t)V, log, GB_ERR_CORRUPT,
               "session state: pending token %d or last token %d out of range", cur.pending, cur.last_out);
  const uint32_t pos = cur.pos;

  GB_TRY(open_record(body, kTagGears, &r, log, "gear policy"));
  Gears gears = s->gears;
  GB_TRY(read_fields(r, s->gears, &gears, log, "gear policy"));
  const int32_t gear = r.i32();
  GB_TRY(close_record(r, log, "gear policy"));
  const Monitor &m = s->monitor;
  const bool locked = m.locked;
  GB_RETURN_IF(!gear_ok(gear) || (locked ? gear != (int32_t)s->gears.gear : gear > GB_GEAR_HIGH), log, GB_ERR_CORRUPT,
               "session state: gear %d invalid for this gear policy", gear);

  GB_TRY(open_record(body, kTagMonitor, &r, log, "monitor"));
  Monitor mon = m;
  GB_TRY(read_fields(r, m, &mon, log, "monitor"));
  const uint32_t mw = r.u32();
  GB_RETURN_IF(r.bad, log, GB_ERR_CORRUPT, "session state: monitor truncated");
  GB_RETURN_IF(mw != m.o.window, log, GB_ERR_INVALID_ARGUMENT, "session state: monitor window %u; this session's is %u", mw,
               m.o.window);
  GB_RETURN_IF(!finite(mon.th_low) || !finite(mon.th_high) || mon.count > mw || mon.head >= mw || !gear_ok(raw_enum(mon.gear)) ||
                   (locked ? mon.gear != m.gear : raw_enum(mon.gear) > GB_GEAR_HIGH) || !gear_ok(raw_enum(mon.predicted)),
               log, GB_ERR_CORRUPT, "session state: monitor fields out of range");
  const size_t hist_at = r.at;
  for (uint32_t i = 0; i < mw; i++) GB_RETURN_IF(!finite(r.f32()), log, GB_ERR_CORRUPT, "session state: monitor entropy not finite");
  GB_TRY(close_record(r, log, "monitor"));
  const R hist = R{r.p, r.n, hist_at};

  GB_TRY(open_record(body, kTagSampler, &r, log, "sampler"));
  Sampler smp = s->sampler;
  GB_TRY(read_fields(r, s->sampler, &smp, log, "sampler"));
  GB_TRY(close_record(r, log, "sampler"));

  GB_TRY(open_record(body, kTagControl, &r, log, "generation control"));
  const Control &ct = s->ctl;
  Control ctl = ct;
  GB_TRY(read_fields(r, ct, &ctl, log, "generation control"));
  const uint32_t cw = ct.window;
  GB_RETURN_IF(ctl.ring_n > cw || (cw ? ctl.ring_head >= cw : ctl.ring_head != 0), log, GB_ERR_CORRUPT,
               "session state: penalty ring out of range");
  const size_t ring_at = r.at;
  for (uint32_t i = 0; i < cw; i++) {
    const int32_t tk = r.i32();
    GB_RETURN_IF(i < ctl.ring_n && (tk < 0 || tk >= (int32_t)V), log, GB_ERR_CORRUPT, "session state: penalty ring token %d out of range",
                 tk);
  }
  const uint32_t tail_n = r.u32();
  GB_RETURN_IF(r.bad, log, GB_ERR_CORRUPT, "session state: truncated before the stop tail");
  GB_RETURN_IF(tail_n > (ct.stop_max ? ct.stop_max - 1 : 0), log, GB_ERR_CORRUPT, "session state: stop tail of %u bytes", tail_n);
  const uint8_t *tail = r.take(tail_n);
  GB_TRY(close_record(r, log, "generation control"));
  const R ring = R{r.p, r.n, ring_at};

  if (apply) {
    set_fields(&s->cur, cur);
    set_fields(&s->monitor, mon);
    R hr = hist;
    for (uint32_t i = 0; i < mw; i++) s->monitor.hist[i] = hr.f32();
    set_fields(&s->sampler, smp);
    set_fields(&s->ctl, ctl);
    hr = ring;
    for (uint32_t i = 0; i < cw; i++) s->ctl.ring[i] = hr.i32();
    s->ctl.tail_n = tail_n;
    if (tail_n) memcpy(s->ctl.tail, tail, tail_n);
  }
  GB_TRY(load_kv(body, &s->kv, apply, log, pos, "KV pool"));
  if (s->spec.on) {
    GB_TRY(open_record(body, kTagSpec, &r, log, "speculative gear"));
    Spec sp = s->spec;
    GB_TRY(read_fields(r, s->spec, &sp, log, "speculative gear"));
    GB_RETURN_IF(sp.dpos > pos || !isfinite(sp.succ) || !isfinite(sp.trials) || sp.succ < 0 || sp.trials < 0, log, GB_ERR_CORRUPT,
                 "session state: spec state out of range (draft position %u of %u)", sp.dpos, pos);
    const size_t h_at = r.at;
    for (uint32_t i = 0; i < pos; i++) {
      const int32_t tk = r.i32();
      GB_RETURN_IF(r.bad || tk < 0 || tk >= (int32_t)V, log, GB_ERR_CORRUPT, "session state: spec history token out of range");
    }
    if (apply) {
      set_fields(&s->spec, sp);
      s->spec.out_n = s->spec.out_i = 0;
      R hr{r.p, r.n, h_at};
      for (uint32_t i = 0; i < pos; i++) s->spec.hist[i] = hr.i32();
    }
    GB_TRY(load_kv(r, &s->spec.dkv, apply, log, sp.dpos, "draft KV pool"));
    GB_TRY(close_record(r, log, "speculative gear"));
  }
  GB_RETURN_IF(body.at != body.n, log, GB_ERR_CORRUPT, "session state: %zu bytes after the last record", body.n - body.at);
  if (apply) {
    if (gear != (int32_t)s->gears.gear) shift_gear(s, (gb_gear)gear);
    set_fields(&s->gears, gears);  // after the shift, which counts one
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
  // Every record's head and fields, and the most its OWN contents can hold.
  uint64_t n = kHeadBytes + 7 * kRecordHead + fields_bytes(model_id(s->model)) + 4 + fields_bytes(s->cur) +
               fields_bytes(s->gears) + 4 + fields_bytes(s->monitor) + 4 + 4ull * s->monitor.o.window + fields_bytes(s->sampler) +
               fields_bytes(s->ctl) + 4ull * s->ctl.window + 4 + s->ctl.stop_max + kv_max_bytes(s->kv);
  if (s->spec.on) n += kRecordHead + fields_bytes(s->spec) + 4ull * s->opt.n_ctx + kv_max_bytes(s->spec.dkv);
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
  GB_RETURN_IF(version != kVersion, s->log, GB_ERR_UNSUPPORTED_VERSION,
               "gb_session_state_load: version %u (this library reads %u; images of version 1 came from gearbx 0.1 and cannot be "
               "converted: save the session again)",
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
