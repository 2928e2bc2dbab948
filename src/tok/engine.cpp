// engine.cpp — SentencePiece and byte-level BPE encoding and decoding (see
// engine.h for the contracts).
//
// The encoders follow llama.cpp's sessions: the text is first cut at the
// special tokens that may appear in it (longest text first); each remaining
// piece is split into symbols (UTF-8 characters for SPM and UTF-8 BPE, bytes
// for byte-level BPE), adjacent symbols are merged best pair first (SPM:
// highest score of the token the pair spells, BPE: lowest merge rank;
// leftmost on ties), and the final symbols become tokens (SPM and UTF-8 BPE:
// unknown symbols fall back to <0xHH> tokens; byte-level BPE: to single-byte
// tokens). llama.cpp keeps every candidate pair
// in a priority queue and drops stale ones when popped; here each symbol has
// at most one candidate (with its right neighbour) in an indexed heap,
// which pops the same pairs in the same order with bounded memory.
#include "tok/engine.h"

#include <string.h>

#include <algorithm>

#include "bytes.h"
#include "tok/pretok.h"
#include "tok/unicode.h"

namespace gb {
namespace {

// ---- memory carving (counting mode when base is null) ---------------------------
struct Carver {
  uint8_t *base;
  size_t off = 0;
  template <class T>
  T *take(size_t count) {
    off = (off + 7) & ~(size_t)7;
    T *p = base ? reinterpret_cast<T *>(base + off) : nullptr;
    off += count * sizeof(T);
    return p;
  }
};

uint32_t pow2_at_least(uint64_t n) {
  uint32_t p = 1;
  while (p < n) p <<= 1;
  return p;
}

inline uint32_t fnv_step(uint32_t h, uint8_t b) { return (h ^ b) * 16777619u; }
constexpr uint32_t kFnvSeed = 2166136261u;

inline uint32_t pair_hash(uint32_t a, uint32_t b) {
  uint64_t x = ((uint64_t)a << 32) | b;
  x ^= x >> 33;
  x *= 0xff51afd7ed558ccdull;
  x ^= x >> 33;
  return (uint32_t)x;
}

const uint8_t kUnkText[3] = {0xE2, 0x96, 0x85};  // U+2585, llama.cpp's text for an unknown token

int hex_value(uint8_t c) {
  if (c >= '0' && c <= '9') return c - '0';
  if (c >= 'A' && c <= 'F') return c - 'A' + 10;
  if (c >= 'a' && c <= 'f') return c - 'a' + 10;
  return -1;
}

}  // namespace

// Decoded text of one piece into out (when not null), at most cap bytes of
// it; returns its whole length.
size_t tok_decode_piece(uint32_t kind, uint8_t type, const uint8_t *s, uint32_t n, uint8_t *out, size_t cap) {
  size_t w = 0;
  auto put = [&](uint8_t b) {
    if (out && w < cap) out[w] = b;
    w++;
  };
  if (type == kTokTypeControl || (type == kTokTypeUserDefined && kind != kTokKindSpm) ||
      (type == kTokTypeUnknown && kind == kTokKindBpeUtf8)) {
    for (uint32_t k = 0; k < n; k++) put(s[k]);
    return w;
  }
  if (kind == kTokKindSpm || kind == kTokKindBpeUtf8) {
    if (type == kTokTypeNormal || (type == kTokTypeUserDefined && kind == kTokKindSpm)) {
      for (uint32_t k = 0; k < n; k++) {
        if (k + 2 < n && s[k] == 0xE2 && s[k + 1] == 0x96 && s[k + 2] == 0x81) {
          put(' ');
          k += 2;
        } else {
          put(s[k]);
        }
      }
    } else if (type == kTokTypeByte) {
      if (n == 6 && s[0] == '<' && s[1] == '0' && s[2] == 'x' && s[5] == '>' && hex_value(s[3]) >= 0 && hex_value(s[4]) >= 0)
        put((uint8_t)(hex_value(s[3]) * 16 + hex_value(s[4])));
    } else if (type == kTokTypeUnknown && kind == kTokKindSpm) {
      for (uint8_t b : kUnkText) put(b);
    }
    return w;
  }
  if (type != kTokTypeNormal) return 0;
  for (uint32_t k = 0; k < n;) {
    size_t adv;
    const uint32_t cp = utf8_decode(s + k, n - k, &adv);
    const int b = bytelevel_byte(cp);
    if (b >= 0 && !(cp == 0xFFFD && adv == 1)) {
      put((uint8_t)b);
    } else {
      for (size_t j = 0; j < adv; j++) put(s[k + j]);
    }
    k += (uint32_t)adv;
  }
  return w;
}

namespace {

// Decoded text of token i (tok_decode_piece).
size_t decode_token(const TokView &v, uint32_t i, uint8_t *out, size_t cap) {
  uint32_t n;
  const uint8_t *s = v.piece(i, &n);
  return tok_decode_piece(v.kind, v.type(i), s, n, out, cap);
}

struct Layout {
  int32_t *piece_hash;
  uint32_t piece_slots;
  int32_t *merge_hash;
  uint32_t merge_slots;
  uint32_t *dec_off;
  uint8_t *dec;
  size_t dec_bytes;
  int32_t *special;
  size_t total;
};

Layout carve_counts(uint32_t n_tokens, uint32_t n_merges, size_t dec_bytes, uint8_t *base) {
  Layout l;
  Carver c{base};
  l.piece_slots = pow2_at_least(2ull * n_tokens);
  l.piece_hash = c.take<int32_t>(l.piece_slots);
  l.merge_slots = pow2_at_least(2ull * n_merges + 1);
  l.merge_hash = c.take<int32_t>(l.merge_slots);
  l.dec_off = c.take<uint32_t>((size_t)n_tokens + 1);
  l.dec_bytes = dec_bytes;
  l.dec = c.take<uint8_t>(l.dec_bytes);
  l.special = c.take<int32_t>(n_tokens);
  l.total = c.off;
  return l;
}

Layout carve(const TokView &v, uint8_t *base) {
  size_t dec_bytes = 0;
  for (uint32_t i = 0; i < v.n_tokens; i++) dec_bytes += decode_token(v, i, nullptr, 0);
  return carve_counts(v.n_tokens, v.n_merges, dec_bytes, base);
}

bool is_special_candidate(uint8_t type) {
  return type == kTokTypeControl || type == kTokTypeUserDefined || type == kTokTypeUnknown;
}

// Piece lookup over a byte source: plain bytes, or the byte-level (GPT-2)
// spelling of raw bytes.
struct PlainSrc {
  const uint8_t *p;
  size_t n;
  size_t length() const { return n; }
  template <class F>
  bool each(F f) const {
    for (size_t i = 0; i < n; i++)
      if (!f(p[i])) return false;
    return true;
  }
};
struct ByteLevelSrc {
  const uint8_t *p;
  size_t n;
  size_t length() const {
    size_t m = 0;
    for (size_t i = 0; i < n; i++) m += bytelevel_cp(p[i]) < 0x80 ? 1 : 2;
    return m;
  }
  template <class F>
  bool each(F f) const {
    for (size_t i = 0; i < n; i++) {
      uint8_t u[4];
      const size_t k = utf8_encode(bytelevel_cp(p[i]), u);
      for (size_t j = 0; j < k; j++)
        if (!f(u[j])) return false;
    }
    return true;
  }
};

template <class Src>
int32_t find_in(const TokView &v, const int32_t *tab, uint32_t mask, const Src &src) {
  const size_t n = src.length();
  if (n == 0 || n > v.max_piece) return -1;
  uint32_t h = kFnvSeed;
  src.each([&](uint8_t b) {
    h = fnv_step(h, b);
    return true;
  });
  for (uint32_t s = h & mask;; s = (s + 1) & mask) {
    const int32_t id = tab[s];
    if (id < 0) return -1;
    uint32_t len;
    const uint8_t *q = v.piece((uint32_t)id, &len);
    if (len != n) continue;
    size_t k = 0;
    if (src.each([&](uint8_t b) { return q[k++] == b; })) return id;
  }
}

int32_t merge_rank(const Tok &t, int32_t a, int32_t b) {
  if (a < 0 || b < 0 || !t.v.n_merges) return -1;
  for (uint32_t s = pair_hash((uint32_t)a, (uint32_t)b) & t.merge_mask;; s = (s + 1) & t.merge_mask) {
    const int32_t r = t.merge_hash[s];
    if (r < 0) return -1;
    uint32_t l, rr;
    int32_t res;
    t.v.merge((uint32_t)r, &l, &rr, &res);
    if (l == (uint32_t)a && rr == (uint32_t)b) return r;
  }
}

// ---- the encoder ---------------------------------------------------------------
//
// Work area, after the output region of the caller's buffer (S = the largest
// piece of text in bytes, at most 3 * len + 3):
//   uint8_t stream[S]       the piece being merged (SPM: escaped; BPE: cleaned word)
//   int32_t off[S + 1]      symbol i starts at stream[off[i]]
//   int32_t prev[S + 1], next[S + 1]   the live symbol list (-1 ends it)
//   int32_t id[S + 1]       BPE: the symbol's token (or -1)
//   uint32_t key[S + 1]     the candidate pair (i, next[i]): rank, or score bits
//   int32_t hpos[S + 1]     position of i in the heap, -1 when i has no candidate
//   int32_t heap[S + 1]     min-heap of symbols by candidate (best first)
constexpr size_t kSymArrays = 7;

size_t out_region(size_t len) { return 6 * len + 8; }
size_t stream_max(size_t len) { return 3 * len + 3; }

struct Enc {
  const Tok &t;
  const uint8_t *text;
  bool parse_special, space_prefix;
  int32_t *out;
  size_t n_out = 0, out_cap;
  bool prev_special = true;  // SPM: the next piece gets the space prefix

  bool bpe = t.v.kind != kTokKindSpm;  // merges by rank (both BPE kinds)
  uint8_t *stream = nullptr;
  int32_t *off = nullptr, *prev = nullptr, *next = nullptr, *id = nullptr, *hpos = nullptr, *heap = nullptr;
  uint32_t *key = nullptr;
  size_t stream_len = 0;
  int32_t n_sym = 0, heap_n = 0;

  gb_status emit(int32_t tok) {
    if (tok < 0) return GB_OK;
    if (n_out >= out_cap) return GB_ERR_INTERNAL;  // the capacity rule rules this out
    out[n_out++] = tok;
    return GB_OK;
  }

  size_t sym_end(int32_t i) const { return next[i] >= 0 ? (size_t)off[next[i]] : stream_len; }

  // Heap order: SPM best score first, BPE lowest rank first; lower index on ties.
  bool better(int32_t a, int32_t b) const {
    if (key[a] != key[b]) {
      if (bpe) return key[a] < key[b];
      float fa, fb;
      memcpy(&fa, &key[a], 4);
      memcpy(&fb, &key[b], 4);
      if (fa != fb) return fa > fb;
    }
    return a < b;
  }
  void heap_set(int32_t pos, int32_t s) {
    heap[pos] = s;
    hpos[s] = pos;
  }
  void sift_up(int32_t pos) {
    const int32_t s = heap[pos];
    while (pos > 0) {
      const int32_t parent = (pos - 1) / 2;
      if (!better(s, heap[parent])) break;
      heap_set(pos, heap[parent]);
      pos = parent;
    }
    heap_set(pos, s);
  }
  void sift_down(int32_t pos) {
    const int32_t s = heap[pos];
    for (;;) {
      int32_t c = 2 * pos + 1;
      if (c >= heap_n) break;
      if (c + 1 < heap_n && better(heap[c + 1], heap[c])) c++;
      if (!better(heap[c], s)) break;
      heap_set(pos, heap[c]);
      pos = c;
    }
    heap_set(pos, s);
  }
  void heap_remove(int32_t s) {
    const int32_t pos = hpos[s];
    if (pos < 0) return;
    hpos[s] = -1;
    const int32_t last = heap[--heap_n];
    if (pos == heap_n) return;
    heap_set(pos, last);
    sift_up(pos);
    sift_down(hpos[last]);
  }
  // (Re)compute symbol i's candidate pair with its right neighbour.
  void update(int32_t i) {
    if (i < 0) return;
    heap_remove(i);
    const int32_t j = next[i];
    if (j < 0) return;
    if (bpe) {
      const int32_t r = merge_rank(t, id[i], id[j]);
      if (r < 0) return;
      key[i] = (uint32_t)r;
    } else {
      const size_t a = (size_t)off[i], b = sym_end(j);
      const int32_t tok = find_in(t.v, t.piece_hash, t.piece_mask, PlainSrc{stream + a, b - a});
      if (tok < 0) return;
      const float sc = t.v.score((uint32_t)tok);
      memcpy(&key[i], &sc, 4);
    }
    heap_set(heap_n++, i);
    sift_up(heap_n - 1);
  }

  // Symbols over stream[0..stream_len): SPM and UTF-8 BPE characters by lead
  // byte, byte-level BPE bytes; a BPE symbol carries its token (or -1).
  void build_symbols() {
    n_sym = 0;
    heap_n = 0;
    for (size_t p = 0; p < stream_len;) {
      size_t n = t.v.kind == kTokKindBpe ? 1 : utf8_lead_len(stream[p]);
      if (n > stream_len - p) n = stream_len - p;
      off[n_sym] = (int32_t)p;
      prev[n_sym] = n_sym - 1;
      next[n_sym] = p + n < stream_len ? n_sym + 1 : -1;
      id[n_sym] = t.v.kind == kTokKindBpe       ? t.byte_tok[stream[p]]
                  : t.v.kind == kTokKindBpeUtf8 ? find_in(t.v, t.piece_hash, t.piece_mask, PlainSrc{stream + p, n})
                                                : -1;
      hpos[n_sym] = -1;
      n_sym++;
      p += n;
    }
    for (int32_t i = 0; i + 1 < n_sym; i++) update(i);
  }

  void merge_all() {
    while (heap_n > 0) {
      const int32_t l = heap[0];
      const int32_t r = next[l];
      heap_remove(l);
      if (bpe) {
        uint32_t a, b;
        int32_t res;
        t.v.merge(key[l], &a, &b, &res);
        id[l] = res;
      }
      heap_remove(r);
      next[l] = next[r];
      if (next[r] >= 0) prev[next[r]] = l;
      update(prev[l]);
      update(l);
    }
  }

  gb_status emit_symbols() {
    for (int32_t i = n_sym > 0 ? 0 : -1; i >= 0; i = next[i]) {
      const size_t a = (size_t)off[i], b = sym_end(i);
      if (t.v.kind == kTokKindSpm) {
        const int32_t tok = find_in(t.v, t.piece_hash, t.piece_mask, PlainSrc{stream + a, b - a});
        if (tok >= 0) {
          GB_TRY(emit(tok));
          continue;
        }
        for (size_t k = a; k < b; k++) {
          const int32_t bt = t.byte_tok[stream[k]];
          GB_TRY(emit(bt >= 0 ? bt : t.v.special[kTokUnk]));
        }
      } else if (t.v.kind == kTokKindBpeUtf8) {
        if (id[i] >= 0) {
          GB_TRY(emit(id[i]));
          continue;
        }
        for (size_t k = a; k < b; k++) GB_TRY(emit(t.byte_tok[stream[k]]));  // a byte without a token is dropped
      } else {
        if (id[i] >= 0) {
          GB_TRY(emit(id[i]));
          continue;
        }
        for (size_t k = a; k < b; k++) {
          uint8_t u[4];
          const size_t m = utf8_encode(bytelevel_cp(stream[k]), u);
          for (size_t j = 0; j < m; j++) GB_TRY(emit(t.single_tok[u[j]]));
        }
      }
    }
    return GB_OK;
  }

  // A space as SentencePiece writes it (U+2581), at the end of the stream.
  void put_space() {
    stream[stream_len++] = 0xE2;
    stream[stream_len++] = 0x96;
    stream[stream_len++] = 0x81;
  }

  // SPM: one piece of raw text.
  gb_status spm_piece(size_t begin, size_t end) {
    stream_len = 0;
    if (space_prefix && prev_special) put_space();
    for (size_t i = begin; i < end; i++) {
      if (text[i] == ' ') put_space();
      else stream[stream_len++] = text[i];
    }
    prev_special = false;
    build_symbols();
    merge_all();
    return emit_symbols();
  }

  // BPE: one pre-tokenized word.
  gb_status bpe_word(size_t begin, size_t end) {
    stream_len = 0;
    for (size_t i = begin; i < end;) {
      size_t adv;
      const uint32_t cp = utf8_decode(text + i, end - i, &adv);
      stream_len += utf8_encode(cp, stream + stream_len);
      i += adv;
    }
    if (t.v.flags & kTokFlagIgnoreMerges) {
      const int32_t whole = find_in(t.v, t.piece_hash, t.piece_mask, ByteLevelSrc{stream, stream_len});
      if (whole >= 0) return emit(whole);
    }
    build_symbols();
    merge_all();
    return emit_symbols();
  }

  // UTF-8 BPE: one pre-tokenized word (a run of newlines, or of anything
  // else), spaces as U+2581 and ill-formed bytes as U+FFFD; a run of
  // newlines that is itself a token stays whole.
  gb_status utf8_word(size_t begin, size_t end) {
    stream_len = 0;
    for (size_t i = begin; i < end;) {
      size_t adv;
      const uint32_t cp = utf8_decode(text + i, end - i, &adv);
      if (cp == ' ') put_space();
      else stream_len += utf8_encode(cp, stream + stream_len);
      i += adv;
    }
    if (stream_len > 0 && stream[0] == '\n') {
      const int32_t whole = find_in(t.v, t.piece_hash, t.piece_mask, PlainSrc{stream, stream_len});
      if (whole >= 0) return emit(whole);
    }
    build_symbols();
    merge_all();
    return emit_symbols();
  }

  gb_status raw_piece(size_t begin, size_t end) {
    if (begin >= end) return GB_OK;
    if (t.v.kind == kTokKindSpm) return spm_piece(begin, end);
    // Words are offsets into text, so pre-tokenize the piece in place.
    struct Shift {
      Enc *e;
      size_t base;
      static gb_status cb(void *ctx, size_t b, size_t en) {
        Shift *s = static_cast<Shift *>(ctx);
        return s->e->t.v.kind == kTokKindBpeUtf8 ? s->e->utf8_word(s->base + b, s->base + en)
                                                 : s->e->bpe_word(s->base + b, s->base + en);
      }
    } sh{this, begin};
    return pretok_split(t.v.pre, text + begin, end - begin, Shift::cb, &sh);
  }

  gb_status special_token(int32_t tok) {
    prev_special = true;
    return emit(tok);
  }

  bool usable(uint32_t k) const {
    const uint8_t type = t.v.type((uint32_t)t.special[k]);
    return parse_special || type == kTokTypeUserDefined;
  }

  // First occurrence of special k's text in text[from..end), or end.
  size_t find(uint32_t k, size_t from, size_t end) const {
    uint32_t n;
    const uint8_t *s = t.v.piece((uint32_t)t.special[k], &n);
    if (n == 0 || end - from < n) return end;
    const size_t last = end - n;
    for (size_t p = from; p <= last;) {
      const void *hit = memchr(text + p, s[0], last - p + 1);
      if (!hit) return end;
      p = (size_t)(static_cast<const uint8_t *>(hit) - text);
      if (memcmp(text + p, s, n) == 0) return p;
      p++;
    }
    return end;
  }

  // llama.cpp's special-token partition: the candidates in order (longest
  // text first) each cut every piece left by the ones before.
  gb_status partition(size_t begin, size_t end, uint32_t k) {
    while (begin < end) {
      uint32_t j = k;
      size_t at = end;
      for (; j < t.n_special; j++) {
        if (!usable(j)) continue;
        at = find(j, begin, end);
        if (at < end) break;
      }
      if (j >= t.n_special) return raw_piece(begin, end);
      uint32_t n;
      t.v.piece((uint32_t)t.special[j], &n);
      GB_TRY(partition(begin, at, j + 1));
      GB_TRY(special_token(t.special[j]));
      begin = at + n;
      k = j;  // the rest may hold more of token j, and none of those before it
    }
    return GB_OK;
  }
};

}  // namespace

size_t tok_mem_size(const TokView &v) { return carve(v, nullptr).total; }

size_t tok_mem_size_counts(uint32_t n_tokens, uint32_t n_merges, size_t decoded_bytes) {
  return carve_counts(n_tokens, n_merges, decoded_bytes, nullptr).total;
}

gb_status tok_init(Tok *t, const TokView &v, void *mem, size_t mem_bytes, const Logger &log) {
  GB_RETURN_IF(!t || !mem, log, GB_ERR_NULL_POINTER, "tok_init: null tokenizer or memory");
  GB_RETURN_IF(((uintptr_t)mem & 7) != 0, log, GB_ERR_ALIGNMENT, "tok_init: memory not 8-byte aligned");
  GB_RETURN_IF(!v.n_tokens || !v.piece_off || !v.types || !v.scores, log, GB_ERR_CORRUPT, "tok_init: empty or unvalidated view");
  // The decoded texts' size is counted from the image again: an image that
  // changed since mem was sized (a model file rewritten while it is opened)
  // must not make the tables outgrow it.
  Layout l = carve(v, static_cast<uint8_t *>(mem));
  GB_RETURN_IF(l.total > mem_bytes, log, GB_ERR_CORRUPT, "tok_init: the tables need %zu bytes, %zu given (did the data change?)",
               l.total, mem_bytes);
  Tok r;
  r.v = v;
  // piece -> id (the last of equal texts wins)
  for (uint32_t s = 0; s < l.piece_slots; s++) l.piece_hash[s] = -1;
  const uint32_t pmask = l.piece_slots - 1;
  for (uint32_t i = 0; i < v.n_tokens; i++) {
    uint32_t n;
    const uint8_t *p = v.piece(i, &n);
    if (n == 0) continue;
    uint32_t h = kFnvSeed;
    for (uint32_t k = 0; k < n; k++) h = fnv_step(h, p[k]);
    for (uint32_t s = h & pmask;; s = (s + 1) & pmask) {
      const int32_t o = l.piece_hash[s];
      if (o < 0) {
        l.piece_hash[s] = (int32_t)i;
        break;
      }
      uint32_t on;
      const uint8_t *q = v.piece((uint32_t)o, &on);
      if (on == n && memcmp(p, q, n) == 0) {
        l.piece_hash[s] = (int32_t)i;
        break;
      }
    }
  }
  r.piece_hash = l.piece_hash;
  r.piece_mask = pmask;
  // merge pair -> rank (the first of equal pairs wins)
  for (uint32_t s = 0; s < l.merge_slots; s++) l.merge_hash[s] = -1;
  const uint32_t mmask = l.merge_slots - 1;
  for (uint32_t m = 0; m < v.n_merges; m++) {
    uint32_t a, b;
    int32_t res;
    v.merge(m, &a, &b, &res);
    for (uint32_t s = pair_hash(a, b) & mmask;; s = (s + 1) & mmask) {
      const int32_t o = l.merge_hash[s];
      if (o < 0) {
        l.merge_hash[s] = (int32_t)m;
        break;
      }
      uint32_t oa, ob;
      int32_t ores;
      v.merge((uint32_t)o, &oa, &ob, &ores);
      if (oa == a && ob == b) break;
    }
  }
  r.merge_hash = l.merge_hash;
  r.merge_mask = mmask;
  // decoded texts
  size_t w = 0;
  for (uint32_t i = 0; i < v.n_tokens; i++) {
    l.dec_off[i] = (uint32_t)w;
    w += decode_token(v, i, l.dec + w, l.dec_bytes - w);
    w = w < l.dec_bytes ? w : l.dec_bytes;  // equal, unless the image changed while it was read
  }
  l.dec_off[v.n_tokens] = (uint32_t)w;
  r.dec_off = l.dec_off;
  r.dec = l.dec;
  // special-token candidates, longest text first
  uint32_t ns = 0;
  for (uint32_t i = 0; i < v.n_tokens; i++) {
    uint32_t n;
    v.piece(i, &n);
    if (n > 0 && is_special_candidate(v.type(i))) l.special[ns++] = (int32_t)i;
  }
  // A heap sort (the same order: the key is total): unlike std::sort it
  // stays inside the array even if the lengths it compares change under it.
  const auto longer = [&v](int32_t a, int32_t b) {
    uint32_t na, nb;
    v.piece((uint32_t)a, &na);
    v.piece((uint32_t)b, &nb);
    return na != nb ? na > nb : a < b;
  };
  std::make_heap(l.special, l.special + ns, longer);
  std::sort_heap(l.special, l.special + ns, longer);
  r.special = l.special;
  r.n_special = ns;
  // byte tables
  for (int b = 0; b < 256; b++) {
    const uint8_t byte = (uint8_t)b;
    if (v.kind == kTokKindSpm || v.kind == kTokKindBpeUtf8) {
      static const char kHex[] = "0123456789ABCDEF";
      const uint8_t name[6] = {'<', '0', 'x', (uint8_t)kHex[b >> 4], (uint8_t)kHex[b & 15], '>'};
      int32_t id = find_in(v, r.piece_hash, pmask, PlainSrc{name, 6});
      if (id < 0 && v.kind == kTokKindSpm) id = find_in(v, r.piece_hash, pmask, PlainSrc{&byte, 1});
      r.byte_tok[b] = id;
      r.single_tok[b] = -1;
    } else {
      r.byte_tok[b] = find_in(v, r.piece_hash, pmask, ByteLevelSrc{&byte, 1});
      r.single_tok[b] = find_in(v, r.piece_hash, pmask, PlainSrc{&byte, 1});
    }
  }
  *t = r;
  return GB_OK;
}

size_t tok_encode_capacity(size_t len) {
  if (len > (SIZE_MAX / 4 - 64) / 32) return SIZE_MAX;
  const size_t s = stream_max(len);
  return out_region(len) + (s + 3) / 4 + kSymArrays * (s + 1) + 8;
}

gb_status tok_encode(const Tok &t, const char *text, size_t len, uint32_t flags, int32_t *out, size_t cap,
                     size_t *n_out) {
  if (!n_out) return GB_ERR_NULL_POINTER;
  *n_out = 0;
  if ((!text && len) || (!out && cap)) return GB_ERR_NULL_POINTER;
  if (flags & ~kTokEncAll) return GB_ERR_INVALID_ARGUMENT;
  if (!t.piece_hash) return GB_ERR_BAD_STATE;
  const size_t need = tok_encode_capacity(len);
  if (cap < need) {
    *n_out = need;
    return GB_ERR_BUFFER_TOO_SMALL;
  }
  Enc e{t, reinterpret_cast<const uint8_t *>(text), (flags & kTokEncParseSpecial) != 0,
        t.v.kind == kTokKindSpm && (t.v.flags & kTokFlagAddSpacePrefix) && !(flags & kTokEncNoSpacePrefix), out, 0,
        out_region(len)};
  const size_t s = stream_max(len);
  int32_t *w = out + out_region(len);
  e.stream = reinterpret_cast<uint8_t *>(w);
  w += (s + 3) / 4;
  e.off = w; w += s + 1;
  e.prev = w; w += s + 1;
  e.next = w; w += s + 1;
  e.id = w; w += s + 1;
  e.key = reinterpret_cast<uint32_t *>(w); w += s + 1;
  e.hpos = w; w += s + 1;
  e.heap = w;
  if ((flags & kTokEncAddBos) && t.v.special[kTokBos] >= 0) GB_TRY(e.emit(t.v.special[kTokBos]));
  GB_TRY(e.partition(0, len, 0));
  if ((flags & kTokEncAddEos) && t.v.special[kTokEos] >= 0) GB_TRY(e.emit(t.v.special[kTokEos]));
  *n_out = e.n_out;
  return GB_OK;
}

gb_status tok_piece(const Tok &t, int32_t id, uint32_t flags, const char **out, size_t *len) {
  if (!out || !len) return GB_ERR_NULL_POINTER;
  if (flags & ~kTokDecAll) return GB_ERR_INVALID_ARGUMENT;
  if (!t.dec_off) return GB_ERR_BAD_STATE;
  if (id < 0 || (uint32_t)id >= t.v.n_tokens) return GB_ERR_TOKEN_OUT_OF_RANGE;
  const uint32_t a = t.dec_off[id], b = t.dec_off[id + 1];
  *out = reinterpret_cast<const char *>(t.dec + a);
  *len = b - a;
  const uint8_t type = t.v.type((uint32_t)id);
  if ((type == kTokTypeControl || (type == kTokTypeUnknown && t.v.kind == kTokKindBpeUtf8)) && !(flags & kTokDecSpecial)) *len = 0;
  return GB_OK;
}

gb_status tok_decode(const Tok &t, const int32_t *ids, size_t n, uint32_t flags, char *out, size_t cap, size_t *n_out) {
  if (!n_out) return GB_ERR_NULL_POINTER;
  *n_out = 0;
  if ((!ids && n) || (!out && cap)) return GB_ERR_NULL_POINTER;
  if (flags & ~kTokDecAll) return GB_ERR_INVALID_ARGUMENT;
  size_t need = 0;
  bool strip = (flags & kTokDecStripSpace) && t.v.kind == kTokKindSpm && (t.v.flags & kTokFlagAddSpacePrefix);
  for (size_t i = 0; i < n; i++) {
    const char *p;
    size_t m;
    GB_TRY(tok_piece(t, ids[i], flags & kTokDecSpecial, &p, &m));
    if (strip && m) {  // the first piece with text (after BOS, say)
      strip = false;
      if (p[0] == ' ') {
        p++;
        m--;
      }
    }
    if (need + m <= cap && m) memcpy(out + need, p, m);
    need += m;
  }
  *n_out = need;
  return need <= cap ? GB_OK : GB_ERR_BUFFER_TOO_SMALL;
}

int32_t tok_find_piece(const Tok &t, const uint8_t *p, size_t n) {
  if (!t.piece_hash || (!p && n)) return -1;
  return find_in(t.v, t.piece_hash, t.piece_mask, PlainSrc{p, n});
}

}  // namespace gb
