// kv.h — the KV pool: a fixed byte budget holding each cached token at a per-token precision.
//
// A fixed number of bytes per layer inside the session arena holds every
// cached token's keys and values at one precision level (2, 3, 4, 8 bits
// per element with an fp16 scale per head, or fp16 / f32 rows). Per layer:
//
//   scales (cap, 2, n_kv_heads) fp16   one entry per token slot
//   pages  (n_pages, page_bytes)       payload records, one level per page
//
// A level's tokens form a bucket: records packed contiguously in the
// bucket's pages (page_bytes is a multiple of every record size, so a page
// holds whole records and a bucket's consecutive pages read as one run).
// Removing a token moves the bucket's last record into its place, so a
// bucket stays dense; a page empties back to the layer's free list.
// Byte accounting is exact: a layer holds a state iff
//   sum over levels of ceil(count / tokens_per_page) <= n_pages.
// Multi-level policies keep one page free in steady state (the transit
// page): a step-down first removes a record then inserts the smaller one,
// and with one spare page any sequence of step-downs along the chain can
// always proceed (see kv.cpp).
//
// Sliding-window layers (Meta::swa_layer) do not take part in any of this:
// they keep the newest tokens in a ring of ring_cap records per layer, at
// the entry level of the policy (f32, f16, uniformN: that level; the
// multi-level policies: 8 bits), the record of position p at index
// p % ring_cap. A query at position q reads the records of positions
// (q - window, q]. ring_cap is the window plus the longest run of positions
// that may enter at once or be rolled back (a prefill chunk, a speculative
// verify pass, a draft) less one, so a batch never overwrites a key one of
// its own queries reads and a rollback never needs a key already
// overwritten, rounded up to a multiple of kRingBlock. Attention reads the
// visible records in position order, in runs that end at every multiple of
// kRingBlock: the runs, and so the bits of the result, depend on the
// positions alone, not on ring_cap, the batch that wrote them, a restored
// state or a rolled-back draft. The budget is spent on the rings first; the policies (step-downs,
// eviction, importance) act on the global layers' pool. Slot numbers,
// kv->n_layers and the per-layer arrays below are the global layers';
// kv_attend and kv_store_slot take the model's layer index.
//
// Importance (how much attention a token receives) is gathered by the
// attention kernel's finish step (mass of each token, head-weighted mass,
// head means) into per-layer EMAs; the allocator policies read the
// cross-layer aggregate (kv_importance).
#pragma once

#include <stddef.h>
#include <stdint.h>

#include "arena.h"
#include "common.h"
#include "options.h"
#include "kernels.h"

namespace gb {

struct Meta;

// Levels in chain order (lower index = fewer bits).
enum KvLevel : uint8_t { kLv2 = 0, kLv3, kLv4, kLv8, kLv16, kLv32, kLevels, kLvNone = 255 };

struct KvBucket {
  uint32_t count;     // records
  uint32_t *pages;    // (n_pages) page ids in bucket order
  uint32_t *slots;    // (cap) slot of each record, in bucket order
};

struct KvLayer {
  uint8_t *pages;        // (n_pages, page_bytes)
  uint16_t *scales;      // (cap, 2 * n_kv_heads)
  uint32_t *free_pages;  // (n_pages) stack
  uint32_t n_free;
  uint8_t *level;        // (cap) level of each slot, kLvNone when empty
  uint32_t *index;       // (cap) index of the slot's record in its bucket
  KvBucket bucket[kLevels];
  float *ema;            // (cap) EMA (decay gamma) of the token's attention mass here
  float *head_ema;       // (n_heads) EMA (decay gamma_head) of each head's mean attention
  uint64_t next_realloc; // SEED: step of this layer's next scheduled run (per-layer clock)
  float *rank_ref;       // SEED: (cap) percentile rank at the last accepted move
  uint8_t *rank_cnt;     // SEED: (cap) consecutive checks the rank moved >= r
};

// Sizes derived from the options (pure; used counting and placing).
struct KvPlan {
  uint32_t policy;                 // resolved gb_kv_policy (never DEFAULT)
  uint32_t levels;                 // bit mask of the levels the policy uses
  uint8_t entry, min;              // level a new token enters at / lowest
  uint8_t kbits[kLevels], vbits[kLevels];
  uint32_t unit;                   // bytes per bit of a record: n_kv_heads * head_dim / 8
  uint32_t rec[kLevels];           // record bytes per level (0 = unused)
  uint32_t tpp[kLevels];           // records per page
  uint32_t page_bytes, n_pages, reserve;
  uint32_t cap;                    // token slots
  uint32_t max_tokens;             // tokens held with the unprotected at min
  uint32_t scale_bytes;            // per slot: 2 * n_kv_heads * 2 (0 for f16/f32)
  uint64_t layer_bytes;            // cap * scale_bytes + n_pages * page_bytes
  uint64_t pool_bytes;             // layer_bytes * n_layers + ring_bytes
  bool importance;                 // attention statistics are gathered
  // Sliding-window layers (0 of them: no ring).
  uint32_t ring_layers;            // how many
  uint32_t ring_window;            // the positions a query of theirs sees
  uint32_t ring_cap;               // records per ring
  uint8_t ring_level;              // the level of every ring record
  uint64_t ring_bytes;             // ring_layers * ring_cap * (ring_rec + ring_scale_bytes)
  // The sliding layers' heads may differ from the global layers' (Gemma 4):
  // their own KV heads and head size, record and scale bytes.
  uint32_t ring_kv_heads, ring_head_dim, ring_rec, ring_scale_bytes;
  // Short-convolution layers (0 of them: none): their state.
  uint32_t conv_layers;            // how many
  uint32_t conv_taps;              // the model's conv_kernel
  uint32_t conv_dim;               // floats per row (the model's dim)
  uint32_t conv_cap;               // rows per layer
  uint64_t conv_bytes;             // conv_layers * conv_cap * conv_dim * 4
  // Gated DeltaNet layers (0 of them: none): their matrices of state.
  uint32_t delta_layers;           // how many
  uint32_t delta_k_heads, delta_v_heads, delta_dim;  // the model's gdn_k_heads, gdn_v_heads, gdn_state
  uint32_t delta_log;              // positions of update inputs kept for rollback (0: none, no checkpoint)
  uint64_t delta_bytes;            // the states, the checkpoint and the log
  uint32_t delta_state() const { return delta_v_heads * delta_dim * delta_dim; }       // floats per layer
  uint32_t delta_entry() const { return (delta_k_heads + delta_v_heads) * delta_dim + 2 * delta_v_heads; }  // per position and layer
};
// What a saved session state holds of it (state.cpp): every field once, in
// order; SAVE written and restored, MATCH configuration a state must have
// been saved with, NEST a struct with a list of its own, OWN contents the
// part's own code in state.cpp writes, SKIP not part of the state. A state
// loads into a pool of the same layout with more slots or pages.
#define GB_KV_PLAN_FIELDS(F)                                                                                         \
  F(MATCH, policy) F(MATCH, levels) F(MATCH, entry) F(MATCH, min) F(MATCH, kbits) F(MATCH, vbits) F(SKIP, unit)       \
  F(MATCH, rec) F(MATCH, tpp) F(MATCH, page_bytes) F(SKIP, n_pages) F(MATCH, reserve) F(SKIP, cap) F(SKIP, max_tokens) \
  F(MATCH, scale_bytes) F(SKIP, layer_bytes) F(SKIP, pool_bytes) F(MATCH, importance) F(MATCH, ring_layers)            \
  F(MATCH, ring_window) F(MATCH, ring_cap) F(MATCH, ring_level) F(SKIP, ring_bytes) F(SKIP, ring_kv_heads)                   \
  F(SKIP, ring_head_dim) F(SKIP, ring_rec) F(SKIP, ring_scale_bytes) F(SKIP, conv_layers) F(SKIP, conv_taps)                   \
  F(SKIP, conv_dim) F(SKIP, conv_cap) F(SKIP, conv_bytes) F(SKIP, delta_layers) F(SKIP, delta_k_heads) F(SKIP, delta_v_heads)       \
  F(SKIP, delta_dim) F(SKIP, delta_log) F(SKIP, delta_bytes)
// The pool options (KvConfig: gb_kv_options and gb_kv_experimental) a state
// must have been saved with (the others are resolved into the plan, or size
// the pool).
#define GB_KV_OPTIONS_FIELDS(F)                                                                                     \
  F(SKIP, policy) F(SKIP, pool_bytes) F(SKIP, beta) F(MATCH, evict) F(SKIP, asymmetric) F(MATCH, k_critical)         \
  F(MATCH, k_tail) F(MATCH, window) F(MATCH, gamma) F(MATCH, gamma_head) F(MATCH, recency_T) F(MATCH, alpha)         \
  F(MATCH, eps_importance) F(MATCH, f_base) F(MATCH, rank_threshold) F(MATCH, rank_intervals) F(MATCH, drift_kl)

// The working buffers of one attention (kv_attend: the pool's own set;
// kv_attend_with: one set per query attending at the same time). Sized for
// a pool of `cap` slots; the importance buffers are the pool's.
struct KvAttnScratch {
  float *scores;         // (n_heads, cap)
  uint32_t *score_slot;  // (cap)
  float *m, *l, *acc;    // (n_heads), (n_heads), (n_heads, head_dim)
  int8_t *q8;            // (n_heads, head_dim)
  float *q8_d;           // (n_heads)
  float *head_mean;      // (n_heads)
};
// The sliding-window layers' rings (kv.h's header comment).
struct KvRing {
  uint8_t *data;         // (ring_layers, ring_cap, record bytes)
  uint16_t *scales;      // (ring_layers, ring_cap, 2 * n_kv_heads) binary16; nullptr for f16/f32
  uint32_t *pos;         // (ring_cap) position of the token at each index; kRingEmpty
  uint32_t *ids;         // (ring_cap) 0, 1, ...: the attention kernel's scale indexes
};
// The recurrent layers' convolution state: each such layer's convolution
// inputs (lfm2: the products B * X; qwen35: the q, k, v rows) of the newest
// positions, the row of position p at index p % conv_cap. A position reads
// the rows of itself and the conv_taps - 1 positions before it: those of a
// pass's own positions from the pass's scratch, the older ones from here. A
// pass stores its last conv_cap rows (kv_conv_store). conv_cap is
// conv_taps - 1, plus the longest run of positions that may be rolled back
// (the speculative gear's verify pass) where one may be: a rollback then
// finds the rows before its target intact, and a rejected draft leaves the
// state as if the drafted tokens never ran.
struct KvConv {
  float *rows;           // (conv_layers, conv_cap, conv_dim)
  uint32_t *pos;         // (conv_cap) position of the row at each index; kRingEmpty
};
// The Gated DeltaNet layers' state: per layer and value head a delta_dim x
// delta_dim matrix (row j: value dimension j over the key dimensions), as
// of the positions before `next`. Rolling back (speculative decoding) needs
// the state of an earlier position: sessions that may roll back keep a
// checkpoint (the state before position ck_pos) and a log of each later
// position's update inputs (its key, value, decay and rate: delta_entry
// floats per layer, position p at p % delta_log); a rollback copies the
// checkpoint and replays the log up to the target, with the very function
// that made the updates, so the state is the one those positions left bit
// for bit. The checkpoint advances by replaying its oldest entries when a
// pass needs their room: each update runs twice, once live and once on the
// checkpoint, in sessions that may roll back; the others keep neither.
struct KvDelta {
  float *s;      // (delta_layers, delta_state) the state after positions < next
  float *ck;     // (delta_layers, delta_state) the state after positions < ck_pos; nullptr without a log
  float *log;    // (delta_log, delta_layers, delta_entry)
  uint32_t next, ck_pos;
  bool unlogged;  // the pass under way is longer than the log (not logged)
};
constexpr uint32_t kRingEmpty = 0xffffffffu;
constexpr uint32_t kRingBlock = 32;

struct KvPool {
  KvPlan plan;
  KvConfig opt;
  uint32_t n_layers, n_heads, n_kv_heads, head_dim, n_ctx;  // the global layers' heads (the rings': plan.ring_*)
  float attn_scale;        // the attention logits' scale (the model's, else 1 / sqrt(head size))
  uint32_t n_model_layers;
  uint32_t *layer_map;   // (n_model_layers) index among the global layers, kRingBit | index among the rings, or kConvBit | index among the short-convolution layers; a layer sharing another's cache: that layer's
  KvRing ring;
  KvConv conv;
  KvDelta delta;
  gb_delta_rule_fn delta_fn;  // the passes' state update (kv_delta_begin); nullptr before the first
  uint32_t *delta_map;   // (n_model_layers) index among the Gated DeltaNet layers (others: 0)
  KvLayer *layers;       // (n_layers)
  // Per slot, shared by the layers.
  uint32_t *pos;         // (cap) position of the token in the slot
  uint64_t *birth;       // (cap) step the token entered (recency exp(-age / T))
  float *wema;           // (cap) EMA of head-weighted mass, mean over layers
  float *wsum;           // (cap) this step's head-weighted mass, summed over layers
  float *imp;            // (cap) aggregated importance (the policies' input)
  float *snap;           // (cap) SEED drift: importance at the last run
  uint32_t *free_slots;  // (cap) stack
  uint32_t n_free_slots, n_tokens;
  uint32_t newest;       // position of the last token that entered
  // Attention scratch (one layer at a time).
  KvAttnScratch att;     // kv_attend's (score_slot: slot of each scored position)
  float *mass, *wmass;   // (cap)
  float *head_w;         // (n_heads) head weights w_h: layer-mean head EMA / its mean over heads
  float *tmp;            // (2 * kv_dim) a token's dequantized K and V
  // SEED scratch.
  uint8_t *planned;      // (cap)
  uint32_t *order;       // (cap)
  struct HeapItem { float score; uint32_t slot; };
  HeapItem *heap;        // (cap)
  uint32_t cur_slot;     // slot of the token being run
  uint32_t *batch_slot;  // (cap) slots of a batch's tokens (kv_begin_batch)
  // Telemetry.
  uint64_t step, reallocs, requant, evicted;
  uint64_t alloc_ns;     // time inside allocator decisions (bench)
};
// What a saved session state holds of it (state.cpp): every field once, in
// order; SAVE written and restored, MATCH configuration a state must have
// been saved with, NEST a struct with a list of its own, OWN contents the
// part's own code in state.cpp writes, SKIP not part of the state. OWN: the
// tokens' slots, pages and records (state.cpp's kv codec).
#define GB_KV_POOL_FIELDS(F)                                                                                          \
  F(NEST, plan) F(NEST, opt) F(SKIP, n_layers) F(SKIP, n_heads) F(SKIP, n_kv_heads) F(SKIP, head_dim) F(SKIP, n_ctx)    \
  F(SKIP, attn_scale)                                                                                                  \
  F(SKIP, n_model_layers) F(SKIP, layer_map) F(OWN, ring) F(OWN, conv) F(OWN, delta) F(SKIP, delta_fn) F(SKIP, delta_map) F(OWN, layers) F(OWN, pos) F(OWN, birth) F(OWN, wema) F(OWN, wsum) F(OWN, imp) F(OWN, snap) F(OWN, free_slots)       \
  F(OWN, n_free_slots) F(SAVE, n_tokens) F(SAVE, newest) F(SKIP, att) F(SKIP, mass) F(SKIP, wmass) F(OWN, head_w)      \
  F(SKIP, tmp) F(SKIP, planned) F(SKIP, order) F(SKIP, heap) F(SAVE, cur_slot) F(SKIP, batch_slot) F(SAVE, step)       \
  F(SAVE, reallocs) F(SAVE, requant) F(SAVE, evicted) F(SKIP, alloc_ns)

// Sizes for these options; logs and fails when the pool is unusable
// (GB_ERR_INVALID_ARGUMENT; GB_ERR_BUDGET_EXCEEDED when the protected tokens
// at 8 bits plus one token at the minimum do not fit).
gb_status kv_plan(const Meta &c, const SessionConfig &o, const Logger &log, KvPlan *plan);
// Carve the pool from the arena (counting or placing). kv is always a real
// object; nothing is written through arena pointers while counting.
void kv_carve(KvPool *kv, Arena &a, const Meta &c, const SessionConfig &o, const KvPlan &plan);
// Forget every token (after carving, and on session reset).
void kv_reset(KvPool *kv);
// Tokens that can still be added without eviction.
uint32_t kv_room(const KvPool *kv);
// Make room for the token at position pos in every layer (step-downs per
// policy, eviction when asked) and give it a slot. GB_ERR_CONTEXT_FULL when
// it cannot fit (nothing is evicted then; step-downs may have happened).
gb_status kv_begin(KvPool *kv, const gb_kernels &k, uint32_t pos, const Logger &log);
// Attention of the query heads q (n_heads, head_dim) over the layer's
// cache into out (n_heads, head_dim), gathering importance. hide: the
// newest tokens of a batch not visible to this query (kv_begin_batch).
void kv_attend(KvPool *kv, const gb_kernels &k, uint32_t layer, const float *q, float *out, uint32_t hide = 0);
void kv_attn_scratch_carve(KvAttnScratch *ws, Arena &a, uint32_t n_heads, uint32_t head_dim, uint32_t cap);
// kv_attend through ws, which may run beside other queries' kv_attend_with
// (each with its own ws) on the same layer: the cache is only read. Needs a
// pool that gathers no importance (!plan.importance) and ws sized for at
// least its plan.cap.
void kv_attend_with(const KvPool *kv, const gb_kernels &k, uint32_t layer, const float *q, float *out, uint32_t hide,
                    const KvAttnScratch &ws);

// ---- batches and rollback (batched prefill, speculative verification) ----
// Whether m tokens can enter as one batch: a single-level policy (f32, f16,
// uniformN: every token stays at the entry level, so each layer's bucket
// holds the tokens in position order) with room for all m without
// eviction. Then a batch gives exactly what m single tokens would.
// Policies that move tokens between precisions (SEED and after): they decide
// token by token, so a prefill under them never batches.
inline bool kv_policy_multi_level(uint32_t policy) { return policy >= GB_KV_SEED; }
// With sliding-window layers, also: the m tokens entering at pos overwrite
// no ring record one of their queries reads.
bool kv_batchable(const KvPool *kv, uint32_t pos, uint32_t m);
// Slots of attention scratch a query needs (the larger of the pool's and a ring's).
inline uint32_t kv_attn_cap(const KvPlan &p) { return p.ring_cap > p.cap ? p.ring_cap : p.cap; }
constexpr uint32_t kRingBit = 0x80000000u;
constexpr uint32_t kConvBit = 0x40000000u;
// After a pass of m positions at pos: recurrent layer model_layer's
// convolution inputs of those positions (rows of conv_dim floats, stride
// apart) enter the pool, the last conv_cap of them; then, once every layer
// stored its rows, kv_conv_mark records their positions (until then the
// pool's older rows stay readable by the pass's later layers).
void kv_conv_store(KvPool *kv, uint32_t model_layer, uint32_t pos, uint32_t m, const float *rows, size_t stride);
void kv_conv_mark(KvPool *kv, uint32_t pos, uint32_t m);
// Before a pass of m positions at pos on Gated DeltaNet layers: pos must be
// the state's next position (GB_ERR_INTERNAL otherwise); the log makes room
// for m entries (the checkpoint advances), or, for a pass longer than the
// log, the pass goes unlogged; the pool keeps k.delta_rule, the update its
// replays use (the pass's own, so that they repeat its bits). After the
// pass, kv_delta_end: the state stands at pos + m (after an unlogged pass
// the checkpoint is that state).
gb_status kv_delta_begin(KvPool *kv, const gb_kernels &k, uint32_t pos, uint32_t m, const Logger &log);
void kv_delta_end(KvPool *kv, uint32_t pos, uint32_t m);
// The state of layer model_layer, and the log entry of position pos to
// write (nullptr without a log).
inline float *kv_delta_state(KvPool *kv, uint32_t model_layer) {
  return kv->delta.s + (size_t)kv->delta_map[model_layer] * kv->plan.delta_state();
}
inline float *kv_delta_entry(KvPool *kv, uint32_t model_layer, uint32_t pos) {
  const KvPlan &p = kv->plan;
  if (!p.delta_log || kv->delta.unlogged) return nullptr;
  return kv->delta.log + ((size_t)(pos % p.delta_log) * p.delta_layers + kv->delta_map[model_layer]) * p.delta_entry();
}
// The same row to read; nullptr when the pool does not hold position pos
// (before the first position, or not entered).
inline const float *kv_conv_find(const KvPool *kv, uint32_t model_layer, uint32_t pos) {
  const KvPlan &p = kv->plan;
  if (kv->conv.pos[pos % p.conv_cap] != pos) return nullptr;
  return kv->conv.rows + ((size_t)(kv->layer_map[model_layer] & ~kConvBit) * p.conv_cap + pos % p.conv_cap) * p.conv_dim;
}
// Begin the m tokens at positions pos..pos+m-1 (kv_batchable holds): their
// slots go to kv->batch_slot. Position i then stores with kv_store_slot and
// attends with hide = m - 1 - i; kv_end once per token afterwards.
gb_status kv_begin_batch(KvPool *kv, const gb_kernels &k, uint32_t pos, uint32_t m, const Logger &log);
void kv_store_slot(KvPool *kv, uint32_t layer, uint32_t slot, const float *key, const float *value);
// Forget every token at a position >= pos (speculative rollback). Only for
// single-level policies, where it restores exactly the state before those
// tokens entered (up to slot numbering, which no result depends on).
void kv_truncate(KvPool *kv, uint32_t pos);
// After all layers of a token ran: fold the step's statistics.
void kv_end(KvPool *kv);

struct KvStats {
  uint64_t used_bytes, pool_bytes;
  uint32_t tokens;
  uint32_t at_bits[6];
  double bits_per_element;
};
void kv_stats(const KvPool *kv, KvStats *st);

// Bits per element of a level (K's bits when asymmetric).
inline uint32_t kv_level_bits(uint32_t lv) {
  static const uint8_t b[kLevels] = {2, 3, 4, 8, 16, 32};
  return lv < kLevels ? b[lv] : 0;
}

// --- building blocks exposed for the unit tests ---
// Quantize one row of d floats at bits (2, 3, 4, 8) into the packed layout
// of kernels.h; returns the fp16 scale.
uint16_t kv_quantize_row(uint8_t *out, const float *x, uint32_t d, uint32_t bits);
// Run the SEED allocator on layer `layer` now (tests, bench).
void kv_seed_realloc(KvPool *kv, const gb_kernels &k, uint32_t layer, uint32_t extra_entry);
// Recompute the aggregated importance kv->imp: 0.7 x the layer-mean attention
// EMA (normalised by its mean) x recency exp(-age / T) + 0.3 x the head-weighted
// EMA (normalised by its mean); RECENCY: the recency term alone.
void kv_importance(KvPool *kv);

}  // namespace gb
