// state.cpp — session state save / restore (gb_session_state_*).
//
// What is saved of each part of a session is declared once, next to the
// part's struct, as a field list (state_fields.h); this file expands those
// lists and adds what a list cannot say: variable-length contents (OWN
// fields) and the checks of values read back.
//
// Image format (version 3: version 2 plus the sliding-window rings), every integer little-endian, floats as IEEE bits:
//
//   header (32 bytes)
//     +0  char[8] magic "GBSTATE\0"      +8  u32 version (3)      +12 u32 flags (0)
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
//     GRAM  only for a session with room for a grammar: GB_CONSTRAINT_FIELDS;
//           OWN: u32 on, u32 words, u32 image[words], u32 heads, per head
//           u32 depth (0: the start rule complete) and depth x (u32 word,
//           u32 partial character), top of the stack first
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
//     with sliding-window layers: u32 n (occupied ring indexes), n x (u32
//           index ascending, u32 position, position % ring_cap == index),
//           then per ring its n records (index order), each followed by its
//           u16 scales[2 * n_kv_heads] when quantized.
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
#include "grammar/gbnf.h"
#include "session.h"
#include "state_fields.h"
#include "state_io.h"

namespace gb {
namespace {

using namespace state;

constexpr char kMagic[8] = {'G', 'B', 'S', 'T', 'A', 'T', 'E', 0};
constexpr uint32_t kVersion = 3;
constexpr size_t kHeadBytes = 32;

constexpr uint32_t kTagModel = tag("MODL"), kTagCursor = tag("CURS"), kTagGears = tag("GEAR"), kTagMonitor = tag("MONI"),
                   kTagSampler = tag("SAMP"), kTagControl = tag("CTRL"), kTagSpec = tag("SPEC"), kTagGrammar = tag("GRAM");

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

GB_STATE_FIELDS(ModelId, GB_MODEL_ID_FIELDS)
GB_STATE_FIELDS(Cursor, GB_CURSOR_FIELDS)
GB_STATE_FIELDS(Gears, GB_GEARS_FIELDS)
GB_STATE_FIELDS(Monitor, GB_MONITOR_FIELDS)
GB_STATE_FIELDS(Sampler, GB_SAMPLER_FIELDS)
GB_STATE_FIELDS(Control, GB_CONTROL_FIELDS)
GB_STATE_FIELDS(Spec, GB_SPEC_FIELDS)
GB_STATE_FIELDS(Constraint, GB_CONSTRAINT_FIELDS)

// A saved image's words, read in place (little-endian, any alignment).
struct WordsLE {
  const uint8_t *p;
  uint32_t operator[](size_t i) const { return ld_u32(p + 4 * i); }
};

void save_grammar(W &w, const Constraint &c) {
  const size_t r = w.begin(kTagGrammar);
  put_fields(w, c);
  w.u32(c.on ? 1u : 0u);
  w.u32(c.words);
  for (uint32_t i = 0; i < c.words; i++) w.u32(c.image[i]);
  const GState st = c.on ? c.m.cur : GState{};
  w.u32(st.n);
  for (uint32_t i = 0; i < st.n; i++) {
    const uint32_t h = c.m.head[st.h0 + i];
    if (h == kGDone) {
      w.u32(0);
      continue;
    }
    w.u32(c.m.node[h].depth);
    for (uint32_t x = h; x != kGNil; x = c.m.node[x].parent) w.u32(c.m.node[x].pos), w.u32(c.m.node[x].partial);
  }
  w.end(r);
}

// Check (apply false) or restore the GRAM record.
gb_status load_grammar(R &body, Constraint *c, bool apply, const Logger &log) {
  R r{nullptr, 0};
  GB_TRY(open_record(body, kTagGrammar, &r, log, "grammar"));
  Constraint cc = *c;
  GB_TRY(read_fields(r, *c, &cc, log, "grammar"));
  const uint32_t on = r.u32(), words = r.u32();
  GB_RETURN_IF(r.bad || on > 1 || words > c->room || (on == 0) != (words == 0), log, GB_ERR_CORRUPT,
               "session state: grammar record out of range (%u words, room %u)", words, c->room);
  const uint8_t *img = r.take((size_t)words * 4);
  GB_RETURN_IF(r.bad, log, GB_ERR_CORRUPT, "session state: grammar image truncated");
  const WordsLE iw{img};
  GB_RETURN_IF(on && gbnf_check(iw, words) != GB_OK, log, GB_ERR_CORRUPT, "session state: not a grammar image");
  const uint32_t heads = r.u32();
  GB_RETURN_IF(r.bad || heads > c->m.max_stacks || (on && heads == 0) || (!on && heads != 0), log, GB_ERR_CORRUPT,
               "session state: %u grammar stacks (max_stacks %u)", heads, c->m.max_stacks);
  const size_t heads_at = r.at;
  uint64_t nodes = 0;
  for (uint32_t i = 0; i < heads; i++) {
    const uint32_t depth = r.u32();
    GB_RETURN_IF(r.bad || depth > c->m.max_depth, log, GB_ERR_CORRUPT, "session state: grammar stack of depth %u (max_depth %u)",
                 depth, c->m.max_depth);
    nodes += depth;
    for (uint32_t j = 0; j < depth; j++) {
      const uint32_t pos = r.u32(), partial = r.u32();
      GB_RETURN_IF(r.bad || !gbnf_element_start(iw, words, pos), log, GB_ERR_CORRUPT, "session state: grammar stack at word %u",
                   pos);
      const uint32_t k = gbnf_kind(iw[pos]);
      const bool free = (partial & kGPartialFree) != 0;
      const uint32_t total = free ? 4 : partial >> 26, left = partial >> 24 & 3u;
      GB_RETURN_IF(j == 0 && k != kGbByte && k != kGbClass, log, GB_ERR_CORRUPT,
                   "session state: a grammar stack's top is not a character");
      GB_RETURN_IF(partial != 0 && (j != 0 || k != kGbClass || total < 2 || total > 4 || left < 1 || left >= total ||
                                    (free && (partial & ~(kGPartialFree | 3u << 24)) != 0)),
                   log,
                   GB_ERR_CORRUPT, "session state: a grammar stack's partial character is out of range");
    }
  }
  GB_RETURN_IF(nodes > c->m.node_cap, log, GB_ERR_CORRUPT, "session state: %llu grammar nodes (room for %u)",
               (unsigned long long)nodes, c->m.node_cap);
  GB_TRY(close_record(r, log, "grammar"));
  if (!apply) return GB_OK;
  for (uint32_t i = 0; i < words; i++) c->image[i] = iw[i];
  c->words = words;
  c->on = on != 0;
  matcher_restore_begin(&c->m, c->on ? c->image : nullptr);
  R hr{r.p, r.n, heads_at};
  for (uint32_t i = 0; i < heads; i++) {
    const uint32_t depth = hr.u32();
    if (depth == 0) {
      matcher_restore_head(&c->m, kGDone);
      continue;
    }
    // The chain is stored top first: build it bottom first.
    const size_t at = hr.at;
    uint32_t below = kGNil;
    for (uint32_t j = depth; j-- > 0;) {
      R e{r.p, r.n, at + (size_t)j * 8};
      const uint32_t pos = e.u32(), partial = e.u32();
      below = matcher_restore_node(&c->m, pos, below, partial);
    }
    hr.at = at + (size_t)depth * 8;
    matcher_restore_head(&c->m, below);
  }
  matcher_restore_end(&c->m);
  return GB_OK;
}

inline bool gear_ok(int32_t g) { return g >= 0 && g < GB_GEAR_COUNT; }

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
  if (s->cons.reserved) save_grammar(w, s->cons);
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
  if (s->cons.reserved) GB_TRY(load_grammar(body, &s->cons, apply, log));
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
using namespace gb::state;

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
  if (s->cons.reserved)
    n += kRecordHead + fields_bytes(s->cons) + 12 + 4ull * s->cons.room +
         4ull * s->cons.m.max_stacks * (1 + 2ull * s->cons.m.max_depth);
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
               "gb_session_state_load: version %u (this library reads %u; images of earlier versions came from earlier "
               "releases and cannot be converted: save the session again)",
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
