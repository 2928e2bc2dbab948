// matcher.cpp — the grammar's parse stacks over bytes, and the token mask
// (matcher.h).
#include "grammar/matcher.h"

#include "grammar/gbnf.h"

namespace gb {
namespace {

// Work done by one expansion before it is called runaway (a grammar whose
// alternatives multiply without reading anything).
constexpr uint32_t kMaxExpandSteps = 1u << 20;

gb_status limit(const Matcher &m, const char *what) {
  if (!m.log) return GB_ERR_GRAMMAR_LIMIT;  // a walk that will retry another way
  return fail(*m.log, GB_ERR_GRAMMAR_LIMIT, "grammar: %s (max_stacks %u, max_depth %u)", what, m.max_stacks,
              m.max_depth);
}

bool same_chain(const Matcher &m, uint32_t a, uint32_t b) {
  while (a != b) {
    if (a == kGNil || b == kGNil) return false;
    const GNode &x = m.node[a], &y = m.node[b];
    if (x.pos != y.pos || x.partial != y.partial) return false;
    a = x.parent, b = y.parent;
  }
  return true;
}

gb_status new_node(Matcher *m, uint32_t pos, uint32_t parent, uint32_t partial, uint32_t *out) {
  if (m->node_top >= m->node_cap) return limit(*m, "parse state larger than its node pool");
  const uint32_t depth = parent == kGNil ? 1 : m->node[parent].depth + 1;
  if (depth > m->max_depth) return limit(*m, "rules nested deeper than max_depth");
  m->node[m->node_top] = GNode{pos, parent, partial, depth};
  *out = m->node_top++;
  return GB_OK;
}

// Add a head (a node, or kGDone) to the state being built at head_top,
// unless an equal one is there.
gb_status add_head(Matcher *m, GState *st, uint32_t h) {
  for (uint32_t i = 0; i < st->n; i++) {
    const uint32_t o = m->head[st->h0 + i];
    if (o == h || (o != kGDone && h != kGDone && same_chain(*m, o, h))) return GB_OK;
  }
  if (st->n >= m->max_stacks) return limit(*m, "more parse stacks than max_stacks");
  if (st->h0 + st->n >= m->head_cap) return limit(*m, "parse states larger than their head array");
  m->head[st->h0 + st->n++] = h;
  m->head_top = st->h0 + st->n;
  return GB_OK;
}

// Continue at word pos with `parent` below: push heads for every way the
// grammar can go on to read a byte there (or kGDone).
gb_status expand(Matcher *m, uint32_t pos, uint32_t parent, GState *st) {
  const uint32_t *w = m->img;
  uint32_t sp = 0, steps = 0;
  m->work[sp++] = pos, m->work[sp++] = parent;
  while (sp > 0) {
    if (++steps > kMaxExpandSteps) return limit(*m, "expansion without end");
    const uint32_t par = m->work[--sp], p = m->work[--sp];
    const uint32_t k = gbnf_kind(w[p]);
    if (k == kGbByte || k == kGbClass) {
      uint32_t h;
      GB_TRY(new_node(m, p, par, 0, &h));
      GB_TRY(add_head(m, st, h));
    } else if (k == kGbEndAlt) {
      if (par == kGNil) {
        GB_TRY(add_head(m, st, kGDone));
      } else {
        if (sp + 2 > m->work_cap) return limit(*m, "expansion stack full");
        m->work[sp++] = m->node[par].pos, m->work[sp++] = m->node[par].parent;
      }
    } else if (k == kGbRef) {
      // Where the rule's caller continues: directly the parent when the
      // reference ends its alternative.
      uint32_t cont = par;
      if (gbnf_kind(w[p + 1]) != kGbEndAlt) GB_TRY(new_node(m, p + 1, par, 0, &cont));
      uint32_t a = w[m->table + gbnf_arg(w[p])];
      // Each alternative of the rule, in reverse so the first is expanded first.
      uint32_t starts = 0;
      for (uint32_t q = a;; q++) {
        // q: start of an alternative; skip its elements to its kGbEndAlt.
        if (sp + 2 > m->work_cap) return limit(*m, "expansion stack full");
        m->work[sp++] = q, m->work[sp++] = cont;
        starts++;
        while (gbnf_kind(w[q]) != kGbEndAlt) q += gbnf_kind(w[q]) == kGbClass ? 1 + 2 * gbnf_arg(w[q]) : 1;
        if (gbnf_kind(w[q + 1]) == kGbEndRule) break;
      }
      // Reverse the pushed starts so they pop in grammar order.
      for (uint32_t i = 0, j = starts - 1; i < j; i++, j--) {
        const uint32_t x = sp - 2 * (starts - i), y = sp - 2 * (starts - j);
        const uint32_t t0 = m->work[x], t1 = m->work[x + 1];
        m->work[x] = m->work[y], m->work[x + 1] = m->work[y + 1];
        m->work[y] = t0, m->work[y + 1] = t1;
      }
    } else {
      return fail(m->log ? *m->log : Logger(), GB_ERR_INTERNAL, "grammar: bad element at word %u", p);
    }
  }
  return GB_OK;
}

bool in_class(const uint32_t *e, uint32_t cp) {
  const uint32_t n = gbnf_arg(e[0]);
  uint32_t lo = 0, hi = n;  // binary search over the sorted ranges
  while (lo < hi) {
    const uint32_t mid = (lo + hi) / 2;
    if (cp < e[1 + 2 * mid]) hi = mid;
    else if (cp > e[2 + 2 * mid]) lo = mid + 1;
    else return true;
  }
  return false;
}

// Whether one range of the class holds all of [lo, hi].
bool class_holds(const uint32_t *e, uint32_t lo, uint32_t hi) {
  const uint32_t n = gbnf_arg(e[0]);
  uint32_t a = 0, b = n;
  while (a < b) {
    const uint32_t mid = (a + b) / 2;
    if (lo < e[1 + 2 * mid]) b = mid;
    else if (lo > e[2 + 2 * mid]) a = mid + 1;
    else return hi <= e[2 + 2 * mid];
  }
  return false;
}

bool class_meets(const uint32_t *e, uint32_t lo, uint32_t hi) {
  const uint32_t n = gbnf_arg(e[0]);
  for (uint32_t j = 0; j < n; j++) {
    const uint32_t a = e[1 + 2 * j], b = e[2 + 2 * j];
    if (a > hi) return false;
    if (b >= lo) return true;
  }
  return false;
}

// The code points whose UTF-8 form of `total` bytes starts with the bits
// read so far (`v`, with `left` bytes to come), as [lo, hi]; false if none
// is valid (an overlong form or beyond U+10FFFF).
bool prefix_range(uint32_t total, uint32_t left, uint32_t v, uint32_t *lo, uint32_t *hi) {
  static const uint32_t kMin[5] = {0, 0, 0x80, 0x800, 0x10000};
  const uint32_t shift = 6 * left;
  uint32_t a = v << shift, b = a | ((1u << shift) - 1);
  if (a < kMin[total]) a = kMin[total];
  if (b > 0x10FFFF) b = 0x10FFFF;
  *lo = a, *hi = b;
  return a <= b;
}

}  // namespace

void matcher_carve(Matcher *m, Arena &a, uint32_t max_stacks, uint32_t max_depth, uint32_t max_len, uint32_t states) {
  m->max_stacks = max_stacks;
  m->max_depth = max_depth;
  m->level_cap = max_len + 1;
  // Heads: the committed state, each depth of the mask walk, the kept states.
  m->head_cap = max_stacks * (max_len + states + 3);
  // Nodes: the committed state at its limits (no sharing), and per kept
  // state and walk depth room for every stack to renew a few nodes.
  const uint64_t nodes = (uint64_t)max_stacks * max_depth + (uint64_t)max_stacks * 8 * (max_len + states + 3);
  m->node_cap = nodes > 0x7fffffffu ? 0x7fffffffu : (uint32_t)nodes;
  m->work_cap = 2 * (max_stacks * 8 + 64) > max_depth + 64 ? 2 * (max_stacks * 8 + 64) : max_depth + 64;
  m->node = a.array<GNode>(m->node_cap);
  m->fwd = a.array<uint32_t>(m->node_cap);
  m->head = a.array<uint32_t>(m->head_cap);
  m->work = a.array<uint32_t>(m->work_cap);
  m->level = a.array<Matcher::Level>(m->level_cap);
  m->known = a.array<Matcher::Known>(kGKnownMax);
  m->next = a.array<uint16_t>((size_t)kGKnownMax * 256);
  m->plain_loop = a.array<uint8_t>(kGKnownMax);
  m->kst = a.array<uint16_t>(m->level_cap);
  if (m->fwd)
    for (uint32_t i = 0; i < m->node_cap; i++) m->fwd[i] = kGNil;
}

gb_status matcher_start(Matcher *m, const uint32_t *img) {
  m->img = img;
  m->node_top = m->head_top = 0;
  m->base_nodes = 0;
  m->cur = GState{};
  if (!img) return GB_OK;
  m->table = img[5];
  m->root = img[4];
  // The root's alternatives, as if referenced at the end of an alternative
  // with nothing below.
  GState st{0, 0};
  const uint32_t *w = img;
  for (uint32_t q = w[m->table + m->root];; q++) {
    GB_TRY(expand(m, q, kGNil, &st));
    while (gbnf_kind(w[q]) != kGbEndAlt) q += gbnf_kind(w[q]) == kGbClass ? 1 + 2 * gbnf_arg(w[q]) : 1;
    if (gbnf_kind(w[q + 1]) == kGbEndRule) break;
  }
  m->cur = st;
  m->base_nodes = m->node_top;
  m->head_top = st.n;
  return GB_OK;
}

gb_status matcher_advance(Matcher *m, GState st, uint8_t b, GState *out) {
  GState ns{m->head_top, 0};
  const uint32_t *w = m->img;
  for (uint32_t i = 0; i < st.n; i++) {
    const uint32_t h = m->head[st.h0 + i];
    if (h == kGDone) continue;
    const GNode nd = m->node[h];
    const uint32_t *e = w + nd.pos;
    const uint32_t k = gbnf_kind(e[0]);
    const uint32_t next = k == kGbClass ? nd.pos + 1 + 2 * gbnf_arg(e[0]) : nd.pos + 1;
    if (k == kGbByte) {
      if (gbnf_arg(e[0]) == b) GB_TRY(expand(m, next, nd.parent, &ns));
      continue;
    }
    // A class: one code point over 1-4 bytes.
    uint32_t total, left, v;
    if (nd.partial == 0) {
      if (b < 0x80) {
        if (in_class(e, b)) GB_TRY(expand(m, next, nd.parent, &ns));
        continue;
      }
      if (b >= 0xC2 && b <= 0xDF) total = 2, v = b & 0x1Fu;
      else if (b >= 0xE0 && b <= 0xEF) total = 3, v = b & 0x0Fu;
      else if (b >= 0xF0 && b <= 0xF4) total = 4, v = b & 0x07u;
      else continue;  // a continuation byte or one no UTF-8 form starts with
      left = total - 1;
    } else if (nd.partial & kGPartialFree) {
      // Every completion is a valid character of the class: only the
      // number of continuation bytes matters.
      if ((b & 0xC0) != 0x80) continue;
      left = (nd.partial >> 24 & 3u) - 1;
      if (left == 0) {
        GB_TRY(expand(m, next, nd.parent, &ns));
      } else {
        uint32_t h2;
        GB_TRY(new_node(m, nd.pos, nd.parent, kGPartialFree | left << 24, &h2));
        GB_TRY(add_head(m, &ns, h2));
      }
      continue;
    } else {
      if ((b & 0xC0) != 0x80) continue;
      total = nd.partial >> 26, left = (nd.partial >> 24 & 3u) - 1, v = (nd.partial & 0xFFFFFFu) << 6 | (b & 0x3Fu);
    }
    uint32_t lo, hi;
    if (!prefix_range(total, left, v, &lo, &hi) || !class_meets(e, lo, hi)) continue;
    if (left == 0) {
      GB_TRY(expand(m, next, nd.parent, &ns));  // lo == hi == v, in the class
    } else {
      // When every completion of these bytes is a valid character in the
      // class, the bytes read so far no longer matter: one state for all
      // of them (so a walk over a vocabulary meets few distinct states).
      const uint32_t a = v << (6 * left), z = a | ((1u << (6 * left)) - 1);
      static const uint32_t kMin[5] = {0, 0, 0x80, 0x800, 0x10000};
      const bool free = a >= kMin[total] && z <= 0x10FFFF && !(a <= 0xDFFF && z >= 0xD800) && class_holds(e, a, z);
      uint32_t h2;
      GB_TRY(new_node(m, nd.pos, nd.parent, free ? kGPartialFree | left << 24 : total << 26 | left << 24 | v, &h2));
      GB_TRY(add_head(m, &ns, h2));
    }
  }
  m->head_top = ns.h0 + ns.n;
  *out = ns;
  return GB_OK;
}

gb_status matcher_advance_bytes(Matcher *m, GState st, const uint8_t *p, size_t n, GState *out) {
  for (size_t i = 0; i < n && st.n > 0; i++) GB_TRY(matcher_advance(m, st, p[i], &st));
  *out = st;
  return GB_OK;
}

bool matcher_done(const Matcher &m, GState st) {
  for (uint32_t i = 0; i < st.n; i++)
    if (m.head[st.h0 + i] == kGDone) return true;
  return false;
}

gb_status matcher_commit(Matcher *m, GState st) {
  // Copy the chains st reaches above the pools' tops, bottom node first,
  // then move them down to the start of the pool.
  const uint32_t base = m->node_top;
  uint32_t top = base;
  for (uint32_t i = 0; i < st.n; i++) {
    uint32_t h = m->head[st.h0 + i];
    if (h == kGDone) continue;
    // Walk down to the first node already copied (or the bottom), noting
    // the way in the work stack, then copy upward.
    uint32_t sp = 0;
    for (uint32_t x = h; x != kGNil && m->fwd[x] == kGNil; x = m->node[x].parent) {
      if (sp >= m->work_cap) return limit(*m, "parse state deeper than the work stack");
      m->work[sp++] = x;
    }
    while (sp > 0) {
      const uint32_t x = m->work[--sp];
      if (top >= m->node_cap) return limit(*m, "parse state larger than its node pool");
      GNode c = m->node[x];
      if (c.parent != kGNil) c.parent = m->fwd[c.parent] - base;
      m->node[top] = c;
      m->fwd[x] = top++;
    }
  }
  // New head list at the start of head[] (st lies above it: copy forward).
  uint32_t n = 0;
  for (uint32_t i = 0; i < st.n; i++) {
    const uint32_t h = m->head[st.h0 + i];
    m->head[n++] = h == kGDone ? kGDone : m->fwd[h] - base;
  }
  for (uint32_t x = 0; x < base; x++) m->fwd[x] = kGNil;
  const uint32_t count = top - base;
  for (uint32_t j = 0; j < count; j++) m->node[j] = m->node[base + j];
  m->cur = GState{0, n};
  m->base_nodes = count;
  m->node_top = count;
  m->head_top = n;
  return GB_OK;
}

void matcher_restore_begin(Matcher *m, const uint32_t *img) {
  m->img = img;
  m->node_top = m->head_top = m->base_nodes = 0;
  m->cur = GState{};
  if (img) m->table = img[5], m->root = img[4];
}

uint32_t matcher_restore_node(Matcher *m, uint32_t pos, uint32_t parent, uint32_t partial) {
  const uint32_t depth = parent == kGNil ? 1 : m->node[parent].depth + 1;
  m->node[m->node_top] = GNode{pos, parent, partial, depth};
  return m->node_top++;
}

void matcher_restore_head(Matcher *m, uint32_t h) { m->head[m->head_top++] = h; }

void matcher_restore_end(Matcher *m) {
  m->cur = GState{0, m->head_top};
  m->base_nodes = m->node_top;
}

void matcher_rollback(Matcher *m) {
  m->node_top = m->base_nodes;
  m->head_top = m->cur.h0 + m->cur.n;
}

namespace {

// The walk without the memo (when the states outgrow it).
gb_status mask_plain(Matcher *m, GState st, const VocabList &vi, uint32_t vocab_size, uint32_t *allowed,
                     uint32_t *n_allowed) {
  memset(allowed, 0, ((size_t)vocab_size + 31) / 32 * sizeof(uint32_t));
  uint32_t count = 0;
  const uint32_t node0 = m->node_top, head0 = m->head_top;
  m->level[0] = Matcher::Level{st, node0, head0};
  uint32_t cur = 0;                // states known for depths 0..cur of the current text
  uint32_t dead = 0xFFFFFFFFu;     // a depth <= cur whose state is empty
  for (uint32_t i = 0; i < vi.n; i++) {
    const VocabEntry &e = vi.e[i];
    if (e.lcp < cur) {
      cur = e.lcp;
      m->node_top = m->level[cur].node_top;
      m->head_top = m->level[cur].head_top;
      if (dead > cur) dead = 0xFFFFFFFFu;
    }
    if (dead != 0xFFFFFFFFu) continue;  // starts with a refused prefix
    while (cur < e.len) {
      GState ns;
      gb_status s = matcher_advance(m, m->level[cur].st, e.sfx[cur - e.lcp], &ns);
      if (s != GB_OK) {
        m->node_top = node0, m->head_top = head0;
        return s;
      }
      cur++;
      m->level[cur] = Matcher::Level{ns, m->node_top, m->head_top};
      if (ns.n == 0) {
        dead = cur;
        break;
      }
    }
    if (dead == 0xFFFFFFFFu) {
      allowed[(uint32_t)e.id >> 5] |= 1u << (e.id & 31);
      count++;
    }
  }
  m->node_top = node0, m->head_top = head0;
  *n_allowed = count;
  return GB_OK;
}


uint64_t state_hash(const Matcher &m, GState st) {
  uint64_t h = 1469598103934665603ull ^ st.n;
  auto mix = [&](uint32_t v) { h = (h ^ v) * 1099511628211ull; };
  for (uint32_t i = 0; i < st.n; i++) {
    const uint32_t x0 = m.head[st.h0 + i];
    mix(0xFFFFFFFFu);
    if (x0 == kGDone) {
      mix(0xDDDDDDDDu);
      continue;
    }
    for (uint32_t x = x0; x != kGNil; x = m.node[x].parent) mix(m.node[x].pos), mix(m.node[x].partial);
  }
  return h;
}

bool same_state(const Matcher &m, GState a, GState b) {
  if (a.n != b.n) return false;
  for (uint32_t i = 0; i < a.n; i++) {
    const uint32_t x = m.head[a.h0 + i], y = m.head[b.h0 + i];
    if (x == kGDone || y == kGDone) {
      if (x != y) return false;
    } else if (!same_chain(m, x, y)) {
      return false;
    }
  }
  return true;
}

// The number of state st among the known ones, adding it; kGNil when the
// memo is full.
uint32_t know(Matcher *m, GState st, bool *added) {
  const uint64_t h = state_hash(*m, st);
  *added = false;
  for (uint32_t k = 0; k < m->n_known; k++)
    if (m->known[k].hash == h && same_state(*m, m->known[k].st, st)) return k;
  if (m->n_known >= kGKnownMax) return kGNil;
  const uint32_t k = m->n_known++;
  m->known[k] = Matcher::Known{st, h};
  for (uint32_t b = 0; b < 256; b++) m->next[(size_t)k * 256 + b] = kGNextUnknown;
  m->plain_loop[k] = 0;
  *added = true;
  return k;
}

// The state known state k goes to on byte b (a known state's number or
// kGNextDead), computing and remembering it when new.
gb_status step_known(Matcher *m, uint32_t k, uint8_t b, uint16_t *out) {
  uint16_t &nx = m->next[(size_t)k * 256 + b];
  if (nx == kGNextUnknown) {
    const uint32_t node_mark = m->node_top, head_mark = m->head_top;
    GState ns;
    GB_TRY(matcher_advance(m, m->known[k].st, b, &ns));
    if (ns.n == 0) {
      nx = kGNextDead;
      m->node_top = node_mark, m->head_top = head_mark;
    } else {
      bool added;
      const uint32_t kn = know(m, ns, &added);
      if (kn == kGNil) return GB_ERR_GRAMMAR_LIMIT;
      if (!added) m->node_top = node_mark, m->head_top = head_mark;  // equal to a known state
      nx = (uint16_t)kn;
    }
  }
  *out = nx;
  return GB_OK;
}

// Whether every plain byte leads known state k back to k.
gb_status loops_on_plain(Matcher *m, uint32_t k, bool *out) {
  if (m->plain_loop[k] == 0) {
    bool all = true;
    for (uint32_t b = 0x20; b <= 0x7E && all; b++) {
      if (!gb_plain_byte((uint8_t)b)) continue;
      uint16_t nx;
      GB_TRY(step_known(m, k, (uint8_t)b, &nx));
      all = nx == k;
    }
    m->plain_loop[k] = all ? 1 : 2;
  }
  *out = m->plain_loop[k] == 1;
  return GB_OK;
}

// The walk with the memo. Known states stay in the pools until the walk
// ends; a state found equal to a known one gives its nodes back at once.
// GB_ERR_GRAMMAR_LIMIT when the memo or the pools are outgrown (the caller
// then walks without the memo).
gb_status mask_memo(Matcher *m, GState st, const VocabIndex &vx, uint32_t vocab_size, uint32_t *allowed,
                    uint32_t *n_allowed) {
  uint32_t count = 0;
  m->n_known = 0;
  bool added;
  const uint32_t k0 = know(m, st, &added);
  if (k0 == kGNil) return GB_ERR_GRAMMAR_LIMIT;
  // A start state that every plain byte leads back to takes every plain
  // token as it is: their bits at once, then the walk over the others.
  bool loops0;
  GB_TRY(loops_on_plain(m, k0, &loops0));
  const VocabList &vi = loops0 ? vx.rest : vx.all;
  if (loops0) {
    memcpy(allowed, vx.plain, ((size_t)vocab_size + 31) / 32 * sizeof(uint32_t));
    count = vx.n_plain;
  }
  uint16_t *kst = m->kst;  // known state after each byte of the current text (kst[0]: st)
  kst[0] = (uint16_t)k0;
  uint32_t cur = 0;                // kst[0..cur] hold the current text's states
  uint32_t dead = 0xFFFFFFFFu;     // a depth <= cur whose state is empty
  // A plain text read in one go leaves its depths (run_lo, run_hi] at
  // state run_k without writing them; the next text writes the ones it
  // shares.
  bool run = false;
  uint32_t run_lo = 0, run_hi = 0;
  uint16_t run_k = 0;
  const uint32_t n = vi.n;
  for (uint32_t i = 0; i < n; i++) {
    const VocabEntry &e = vi.e[i];
    const uint32_t lcp = e.lcp;
    if (run) {
      const uint32_t to = lcp < run_hi ? lcp : run_hi;
      for (uint32_t d = run_lo + 1; d <= to; d++) kst[d] = run_k;
      run = false;
    }
    if (lcp < cur) {
      cur = lcp;
      if (dead > cur) dead = 0xFFFFFFFFu;
    }
    if (dead != 0xFFFFFFFFu) continue;
    // Plain bytes from a state they all lead back to: the text is read
    // without looking at its bytes.
    if (e.plain && cur < e.len) {
      bool loops;
      GB_TRY(loops_on_plain(m, kst[cur], &loops));
      if (loops) {
        run = true, run_lo = cur, run_hi = e.len, run_k = kst[cur];
        cur = e.len;
      }
    }
    while (cur < e.len) {
      uint16_t nx;
      GB_TRY(step_known(m, kst[cur], e.sfx[cur - lcp], &nx));
      cur++;
      if (nx == kGNextDead) {
        dead = cur;
        break;
      }
      kst[cur] = nx;
    }
    if (dead == 1) {
      // A first byte no stack takes: skip every text that starts with it.
      i = vi.first[e.sfx[0] + 1] - 1;
      continue;
    }
    if (dead == 0xFFFFFFFFu) {
      allowed[(uint32_t)e.id >> 5] |= 1u << (e.id & 31);
      count++;
    }
  }
  *n_allowed = count;
  return GB_OK;
}

}  // namespace

gb_status matcher_mask(Matcher *m, GState st, const VocabIndex &vi, uint32_t vocab_size, uint32_t *allowed,
                       uint32_t *n_allowed) {
  const uint32_t node0 = m->node_top, head0 = m->head_top;
  memset(allowed, 0, ((size_t)vocab_size + 31) / 32 * sizeof(uint32_t));
  const Logger *log = m->log;
  m->log = nullptr;  // the memo's overflow is not an error
  gb_status s = mask_memo(m, st, vi, vocab_size, allowed, n_allowed);
  m->log = log;
  m->node_top = node0, m->head_top = head0;
  if (s == GB_ERR_GRAMMAR_LIMIT) s = mask_plain(m, st, vi.all, vocab_size, allowed, n_allowed);
  GB_TRY(s);
  if (matcher_done(*m, st))
    for (uint32_t j = 0; j < vi.n_eog; j++) {
      const uint32_t id = (uint32_t)vi.eog[j];
      if (!(allowed[id >> 5] >> (id & 31) & 1u)) ++*n_allowed;
      allowed[id >> 5] |= 1u << (id & 31);
    }
  return GB_OK;
}

}  // namespace gb
