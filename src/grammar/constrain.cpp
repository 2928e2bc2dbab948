// constrain.cpp — a session's grammar: the vocabulary index, the mask, and
// the committed parse state (constrain.h).
#include "grammar/constrain.h"

#include <math.h>

#include <algorithm>

#include "gearbx_port.h"
#include "grammar/gbnf.h"
#include "grammar/grammar_obj.h"
#include "model.h"

namespace gb {
namespace {

constexpr uint32_t kMaxRoomBytes = 64u << 20;
constexpr uint32_t kMaxTextLen = 0xFFFF;  // VocabEntry lengths are 16-bit

// The text a token adds to the output: its decoded bytes, as after any
// token other than BOS (a SentencePiece space prefix is kept). Control
// tokens have none.
bool token_text(const gb_tokenizer *tk, int32_t id, const uint8_t **p, size_t *n) {
  const char *s;
  if (gb_tokenizer_token_text(tk, -1, id, &s, n) != GB_OK) return false;
  *p = reinterpret_cast<const uint8_t *>(s);
  return true;
}

bool all_plain(const uint8_t *p, size_t n) {
  for (size_t i = 0; i < n; i++)
    if (!gb_plain_byte(p[i])) return false;
  return true;
}

// Sort a list whose entries point at their whole texts; then each entry's
// shared prefix with the one before, its suffix pointer (still into the
// tokenizer's text), its plain flag, and the first-byte ranges.
void sort_list(VocabList *list) {
  VocabEntry *e = list->e;
  const uint32_t n = list->n;
  std::sort(e, e + n, [](const VocabEntry &x, const VocabEntry &y) {
    const int r = memcmp(x.sfx, y.sfx, x.len < y.len ? x.len : y.len);
    return r != 0 ? r < 0 : (x.len != y.len ? x.len < y.len : x.id < y.id);
  });
  for (uint32_t i = n; i-- > 1;) {  // back to front: e[i - 1] still points at its whole text
    const uint32_t m = e[i].len < e[i - 1].len ? e[i].len : e[i - 1].len;
    uint32_t l = 0;
    while (l < m && e[i].sfx[l] == e[i - 1].sfx[l]) l++;
    e[i].lcp = (uint16_t)l;
    e[i].sfx += l;
    e[i].plain = all_plain(e[i].sfx, e[i].len - l) ? 1u : 0u;
  }
  if (n) e[0].plain = all_plain(e[0].sfx, e[0].len) ? 1u : 0u;
  for (uint32_t b = 0; b <= 256; b++) list->first[b] = n;
  for (uint32_t i = n; i-- > 0;)
    if (e[i].lcp == 0) list->first[e[i].sfx[0]] = i;
  for (uint32_t b = 256; b-- > 0;)  // a byte no text starts with: the next one's start
    if (list->first[b] > list->first[b + 1]) list->first[b] = list->first[b + 1];
}

}  // namespace

gb_status constraint_validate(const SessionConfig &o, const Logger &log) {
  GB_RETURN_IF(o.grammar_max_bytes > kMaxRoomBytes, log, GB_ERR_INVALID_ARGUMENT,
               "session options: grammar_max_bytes %u over 64 MiB", o.grammar_max_bytes);
  GB_RETURN_IF(o.grammar_max_stacks == 0 || o.grammar_max_stacks > 65536, log, GB_ERR_INVALID_ARGUMENT,
               "session options: grammar_max_stacks %u not in 1..65536", o.grammar_max_stacks);
  GB_RETURN_IF(o.grammar_max_depth == 0 || o.grammar_max_depth > 65536, log, GB_ERR_INVALID_ARGUMENT,
               "session options: grammar_max_depth %u not in 1..65536", o.grammar_max_depth);
  if (o.grammar) {
    GB_TRY(check_handle(o.grammar, kHandleGrammar, "gb_session_options.grammar"));
    const size_t bytes = o.grammar->n_words * sizeof(uint32_t);
    GB_RETURN_IF(o.grammar_max_bytes && bytes > o.grammar_max_bytes, log, GB_ERR_BUDGET_EXCEEDED,
                 "session options: the grammar's image of %zu bytes is over grammar_max_bytes %u", bytes, o.grammar_max_bytes);
  }
  return GB_OK;
}

void constraint_carve(Constraint *c, Arena &a, const gb_model *model, const SessionConfig &o) {
  c->reserved = o.grammar != nullptr || o.grammar_max_bytes > 0;
  if (!c->reserved) return;
  const size_t gwords = o.grammar ? o.grammar->n_words : 0;
  const size_t room = o.grammar_max_bytes ? ((size_t)o.grammar_max_bytes + 3) / 4 : gwords;
  c->room = (uint32_t)room;
  c->image = a.array<uint32_t>(room);
  // The index: every token with text (control tokens have none), those
  // that are not all plain bytes, and the end-of-generation tokens apart.
  const gb_tokenizer *tk = &model->tokenizer;
  c->tk = tk;
  const uint32_t V = model->meta.vocab_size;
  uint32_t n = 0, n_rest = 0, n_eog = 0, max_len = 0;
  size_t text_bytes = 0;
  for (uint32_t id = 0; id < V; id++) {
    int eog = 0;
    if (gb_tokenizer_is_eog(tk, (int32_t)id, &eog) == GB_OK && eog) {
      n_eog++;
      continue;
    }
    const uint8_t *p;
    size_t len;
    if (!token_text(tk, (int32_t)id, &p, &len) || len == 0 || len > kMaxTextLen) continue;
    n++;
    n_rest += all_plain(p, len) ? 0 : 1;
    text_bytes += len;
    if (len > max_len) max_len = (uint32_t)len;
  }
  c->vi.all.n = n;
  c->vi.rest.n = n_rest;
  c->vi.n_plain = n - n_rest;
  c->vi.n_eog = n_eog;
  c->vi.max_len = max_len;
  c->vi.all.e = a.array<VocabEntry>(n);
  c->vi.rest.e = a.array<VocabEntry>(n_rest);
  c->vi.sfx = a.array<uint8_t>(text_bytes, 8);  // the suffixes need at most the texts' bytes
  c->vi.plain = a.array<uint32_t>(V / 32 + 1);
  c->vi.eog = a.array<int32_t>(n_eog ? n_eog : 1);
  c->rows = o.gear == GB_GEAR_SPEC ? o.spec_k + 1 : 1;
  c->row_words = V / 32 + 1;
  c->allowed = a.array<uint32_t>((size_t)c->rows * c->row_words);
  c->st = a.array<GState>(c->rows);
  const uint32_t states = c->rows + 1;
  matcher_carve(&c->m, a, o.grammar_max_stacks, o.grammar_max_depth, max_len, states);
}

gb_status constraint_init(Constraint *c, const gb_model *model, const SessionConfig &o, const Logger *log) {
  c->m.log = log;
  if (!c->reserved) return GB_OK;
  const gb_tokenizer *tk = c->tk;
  const uint32_t V = model->meta.vocab_size, n = c->vi.all.n;
  uint32_t k = 0, kr = 0, ke = 0;
  memset(c->vi.plain, 0, ((size_t)V / 32 + 1) * sizeof(uint32_t));
  for (uint32_t id = 0; id < V; id++) {
    int eog = 0;
    if (gb_tokenizer_is_eog(tk, (int32_t)id, &eog) == GB_OK && eog) {
      c->vi.eog[ke++] = (int32_t)id;
      continue;
    }
    const uint8_t *p;
    size_t len;
    if (!token_text(tk, (int32_t)id, &p, &len) || len == 0 || len > kMaxTextLen) continue;
    c->vi.all.e[k++] = VocabEntry{p, (uint16_t)len, 0, id, 0};
    if (!all_plain(p, len)) c->vi.rest.e[kr++] = VocabEntry{p, (uint16_t)len, 0, id, 0};
    else c->vi.plain[id >> 5] |= 1u << (id & 31);
  }
  sort_list(&c->vi.all);
  sort_list(&c->vi.rest);
  // all's suffixes copied after one another, in walk order.
  VocabEntry *e = c->vi.all.e;
  size_t at = 0;
  for (uint32_t i = 0; i < n; i++) {
    const size_t bytes = (size_t)e[i].len - e[i].lcp;
    memcpy(c->vi.sfx + at, e[i].sfx, bytes);
    e[i].sfx = c->vi.sfx + at;
    at += bytes;
  }
  return constraint_set(c, o.grammar ? o.grammar->words : nullptr, o.grammar ? o.grammar->n_words : 0, *log);
}

gb_status constraint_set(Constraint *c, const uint32_t *img, size_t words, const Logger &log) {
  if (img) {
    GB_RETURN_IF(words > c->room, log, GB_ERR_BUDGET_EXCEEDED,
                 "gb_session_set_grammar: the grammar's image of %zu bytes is over the session's room of %zu bytes",
                 words * sizeof(uint32_t), (size_t)c->room * sizeof(uint32_t));
    GB_RETURN_IF(gbnf_check(img, words) != GB_OK, log, GB_ERR_CORRUPT, "gb_session_set_grammar: not a grammar image");
    memcpy(c->image, img, words * sizeof(uint32_t));
  }
  c->words = img ? (uint32_t)words : 0;
  c->on = img != nullptr;
  const gb_status st = constraint_restart(c);
  if (st != GB_OK) {  // its start outgrew the limits: no grammar rather than half of one
    c->on = false;
    c->words = 0;
    matcher_start(&c->m, nullptr);
  }
  return st;
}

gb_status constraint_restart(Constraint *c) {
  if (!c->reserved) return GB_OK;
  c->mask_ns = 0;
  return matcher_start(&c->m, c->on ? c->image : nullptr);
}

gb_status constraint_mask(Constraint *c, GState st, uint32_t vocab, uint32_t row) {
  const uint64_t t0 = gb_port_now_ns();
  GB_TRY(matcher_mask(&c->m, st, c->vi, vocab, c->allowed + (size_t)row * c->row_words, &c->n_allowed));
  c->mask_ns += gb_port_now_ns() - t0;
  return c->n_allowed == 0 ? GB_ERR_GRAMMAR_NO_TOKEN : GB_OK;
}

void constraint_apply(const Constraint &c, float *logits, uint32_t vocab, uint32_t row) {
  const uint32_t *a = c.allowed + (size_t)row * c.row_words;
  for (uint32_t i = 0; i < vocab; i++)
    if (!(a[i >> 5] >> (i & 31) & 1u)) logits[i] = -INFINITY;
}

gb_status constraint_after(Constraint *c, GState st, int32_t token, GState *out) {
  for (uint32_t j = 0; j < c->vi.n_eog; j++)
    if (c->vi.eog[j] == token) {
      *out = st;
      return GB_OK;
    }
  const uint8_t *p = nullptr;
  size_t n = 0;
  if (!token_text(c->tk, token, &p, &n) || n == 0) n = 0;
  GB_TRY(matcher_advance_bytes(&c->m, st, p, n, out));
  if (n == 0 || out->n == 0) {
    static const Logger quiet;
    return fail(c->m.log ? *c->m.log : quiet, GB_ERR_INTERNAL, "grammar: token %d was sampled outside the mask", token);
  }
  return GB_OK;
}

gb_status constraint_accept(Constraint *c, int32_t token) {
  if (!c->on) return GB_OK;
  GState ns;
  GB_TRY(constraint_after(c, c->m.cur, token, &ns));
  if (ns.h0 == c->m.cur.h0 && ns.n == c->m.cur.n) return GB_OK;  // end of generation: the state stays
  return matcher_commit(&c->m, ns);
}

}  // namespace gb
