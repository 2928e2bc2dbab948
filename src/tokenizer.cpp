// tokenizer.cpp — byte-fallback BPE over a VocabView, with llama2.c's
// encode()/decode() semantics: optional BOS, a dummy " " prefix, one unit per
// UTF-8 codepoint (invalid sequences split into bytes), byte fallback for
// units that are not pieces, then repeated merging of the adjacent pair whose
// concatenation is the best-scoring piece (leftmost on ties).
//
// Only Normal and UserDefined pieces take part in encoding ("mergeable");
// byte, control, unknown and unused tokens are never produced by a lookup and
// never merge.
//
// Encoding works entirely inside the caller's output buffer plus a few KB of
// stack; see tokenize() for the layout.
#include "tokenizer.h"

#include <math.h>
#include <string.h>

#include <algorithm>

#include "format.h"

namespace gb {
namespace {

// Every byte value once, so a byte token's text can point at its byte.
struct ByteTable {
  uint8_t b[256];
  constexpr ByteTable() : b() {
    for (int i = 0; i < 256; i++) b[i] = (uint8_t)i;
  }
};
constexpr ByteTable kAllBytes;

constexpr uint32_t kNoMerge = 0xFFFFFFu;  // 24-bit "no merge" in a slot word
constexpr size_t kMaxBlocks = 256;
constexpr size_t kNpos = (size_t)-1;

inline bool mergeable(uint8_t type) { return type == kTokNormal || type == kTokUserDefined; }

int cmp_bytes(const uint8_t *a, size_t al, const uint8_t *b, size_t bl) {
  const size_t m = al < bl ? al : bl;
  const int c = m ? memcmp(a, b, m) : 0;
  if (c) return c;
  return al < bl ? -1 : (al > bl ? 1 : 0);
}

int hex_digit(uint8_t c) {
  if (c >= '0' && c <= '9') return c - '0';
  if (c >= 'A' && c <= 'F') return c - 'A' + 10;
  if (c >= 'a' && c <= 'f') return c - 'a' + 10;
  return -1;
}

// The byte of a "<0xHH>" piece, or -1.
int parse_byte_piece(const uint8_t *p, size_t len) {
  if (len != 6 || p[0] != '<' || p[1] != '0' || p[2] != 'x' || p[5] != '>') return -1;
  const int hi = hex_digit(p[3]), lo = hex_digit(p[4]);
  return hi < 0 || lo < 0 ? -1 : hi * 16 + lo;
}

// tokenizer_init's memory: sorted[n]; then an open-addressing hash table of
// the mergeable pieces (hash_slots(n) ids, kEmpty when free) that the encoder
// uses for its lookups (`sorted` is the byte-ordered index the interface
// promises, and what the table is built from); then kPairBytes of bits, bit
// (x << 8 | y) set when the bytes x, y are adjacent inside some mergeable
// piece. Where a text has adjacent bytes x, y whose bit is clear, no token can
// ever span them: the encoder cuts its segments there.
constexpr uint32_t kEmpty = 0xFFFFFFFFu;

size_t hash_slots(uint32_t n) {
  size_t h = 16;
  while (h < 2 * (size_t)n) h <<= 1;
  return h;
}

inline uint32_t hash_bytes(const uint8_t *s, size_t len) {
  uint32_t h = 2166136261u;  // FNV-1a
  for (size_t i = 0; i < len; i++) h = (h ^ s[i]) * 16777619u;
  return h ^ (h >> 15);
}

constexpr size_t kPairBytes = 65536 / 8;

inline const uint32_t *hash_table(const Tokenizer &t) { return t.sorted + t.v.n; }
inline const uint8_t *pair_bits(const Tokenizer &t) {
  return reinterpret_cast<const uint8_t *>(hash_table(t) + hash_slots(t.v.n));
}
inline bool pair_in_piece(const uint8_t *bits, uint8_t x, uint8_t y) {
  const unsigned k = (unsigned)x << 8 | y;
  return (bits[k >> 3] >> (k & 7)) & 1;
}

// Lowest id of a mergeable piece equal to s, or -1.
int32_t find_piece(const Tokenizer &t, const uint8_t *s, size_t len) {
  const uint32_t *tab = hash_table(t);
  const size_t mask = hash_slots(t.v.n) - 1;
  for (size_t i = hash_bytes(s, len) & mask;; i = (i + 1) & mask) {
    const uint32_t id = tab[i];
    if (id == kEmpty) return -1;
    size_t pl;
    const uint8_t *p = t.v.piece(id, &pl);
    if (pl == len && memcmp(p, s, len) == 0) return (int32_t)id;
  }
}

// Length of the UTF-8 unit at p: a whole well-formed codepoint, else 1.
size_t unit_len(const uint8_t *p, size_t avail) {
  const uint8_t c = p[0];
  if (c < 0x80) return 1;
  size_t more;
  uint8_t lo = 0x80, hi = 0xBF;  // allowed range of the second byte
  if (c >= 0xC2 && c <= 0xDF) more = 1;
  else if (c == 0xE0) more = 2, lo = 0xA0;           // no over-long forms
  else if (c == 0xED) more = 2, hi = 0x9F;           // no surrogates
  else if (c >= 0xE1 && c <= 0xEF) more = 2;
  else if (c == 0xF0) more = 3, lo = 0x90;
  else if (c >= 0xF1 && c <= 0xF3) more = 3;
  else if (c == 0xF4) more = 3, hi = 0x8F;           // <= U+10FFFF
  else return 1;
  if (avail <= more || p[1] < lo || p[1] > hi) return 1;
  for (size_t k = 2; k <= more; k++)
    if ((p[k] & 0xC0) != 0x80) return 1;
  return more + 1;
}

// The text being encoded: an optional dummy ' ' followed by the caller's bytes.
struct VText {
  const uint8_t *text;
  size_t len;
  size_t dummy;  // 0 or 1

  // Contiguous bytes of [pos, pos + n); buf (>= kMaxPieceBytes) is used
  // only when the span starts at the dummy space. n <= kMaxPieceBytes.
  const uint8_t *span(size_t pos, size_t n, uint8_t *buf) const {
    if (pos >= dummy) return text + (pos - dummy);
    buf[0] = ' ';
    memcpy(buf + 1, text, n - 1);
    return buf;
  }
};

// One segment being merged in place. Slot j (a uint32 of the output buffer)
// stands for byte j of the segment. A token covering [s, e) keeps in slot s
// its length - 1 (low 8 bits; pieces are <= 256 bytes) and, in the upper 24
// bits, the id of the piece it forms with its right neighbour (kNoMerge if
// none); slot e - 1 also holds length - 1 so the previous token can be found
// from a token's start. Slots inside a token are unused. Token ids are looked
// up again from their bytes at the end, so one word per byte is enough: the
// buffer holds len + 3 words and the segment never needs more than its bytes.
//
// Finding the best pair: the segment is cut into at most kMaxBlocks blocks
// of 2^shift slots (about sqrt(n)); each block caches its best pair and its
// first token start. A merge rescans only the blocks it touched, so a merge
// costs O(sqrt(n)) (O(n / kMaxBlocks) past 64K bytes) instead of O(n).
struct Segment {
  static constexpr uint32_t kNoOff = 0xFFFFFFFFu;
  const Tokenizer *t;
  const VText *vt;
  size_t v0;     // position of slot 0 in the virtual text
  size_t n;      // bytes (slots)
  uint32_t *sl;  // slots
  unsigned shift;
  size_t nb;
  float bscore[kMaxBlocks];    // score of the block's best pair, -inf if none
  uint32_t bbest[kMaxBlocks];  // its left token, as an offset in the block
  uint32_t bfirst[kMaxBlocks]; // the block's first token start (offset), or kNoOff

  size_t len_at(size_t s) const { return (sl[s] & 0xFFu) + 1; }
  size_t prev_of(size_t s) const { return s - ((sl[s - 1] & 0xFFu) + 1); }

  int32_t lookup(size_t s, size_t len) const {
    uint8_t buf[kMaxPieceBytes];
    return find_piece(*t, vt->span(v0 + s, len, buf), len);
  }

  // Recompute what the token at s forms with its right neighbour.
  void update_pair(size_t s) {
    uint32_t m = kNoMerge;
    const size_t r = s + len_at(s);
    if (r < n) {
      const size_t e = r + len_at(r);
      if (e - s <= t->v.max_piece_bytes) {
        const int32_t id = lookup(s, e - s);
        if (id >= 0) m = (uint32_t)id;
      }
    }
    sl[s] = (sl[s] & 0xFFu) | (m << 8);
  }

  void scan_block(size_t k) {
    const size_t b0 = k << shift;
    const size_t b1 = std::min(n, b0 + ((size_t)1 << shift));
    float best = -INFINITY;
    uint32_t pos = kNoOff;
    if (bfirst[k] != kNoOff) {
      for (size_t s = b0 + bfirst[k]; s < b1; s += len_at(s)) {
        const uint32_t m = sl[s] >> 8;
        if (m == kNoMerge) continue;
        const float sc = t->v.score(m);
        if (sc > best) best = sc, pos = (uint32_t)(s - b0);
      }
    }
    bscore[k] = best;
    bbest[k] = pos;
  }

  // Merge until no pair forms a piece; write the ids to out (which may
  // overlap the slots: out[i] is written only after slot i was read).
  size_t run(int32_t *out) {
    shift = 0;
    while (((n - 1) >> shift) >= kMaxBlocks || ((n - 1) >> (2 * shift)) != 0) shift++;
    nb = ((n - 1) >> shift) + 1;
    for (size_t k = 0; k < nb; k++) bscore[k] = -INFINITY, bbest[k] = kNoOff, bfirst[k] = kNoOff;
    for (size_t s = 0; s < n; s += len_at(s)) {
      update_pair(s);
      const size_t k = s >> shift;
      const uint32_t off = (uint32_t)(s - (k << shift));
      if (bfirst[k] == kNoOff) bfirst[k] = off;
      const uint32_t m = sl[s] >> 8;
      if (m == kNoMerge) continue;
      const float sc = t->v.score(m);
      if (sc > bscore[k]) bscore[k] = sc, bbest[k] = off;
    }
    for (;;) {
      size_t kb = kNpos;
      float best = -INFINITY;
      for (size_t k = 0; k < nb; k++)
        if (bscore[k] > best) best = bscore[k], kb = k;
      if (kb == kNpos) break;
      const size_t s = (kb << shift) + bbest[kb];
      const size_t r = s + len_at(s);
      const size_t len = len_at(s) + len_at(r);
      sl[s] = (uint32_t)(len - 1);
      sl[s + len - 1] = (uint32_t)(len - 1);
      update_pair(s);
      size_t p = kNpos;
      if (s > 0) {
        p = prev_of(s);
        update_pair(p);
      }
      const size_t ks = s >> shift, kr = r >> shift;
      if (bfirst[kr] == r - (kr << shift)) {  // r was its block's first token
        const size_t e = s + len;
        bfirst[kr] = (e < n && (e >> shift) == kr) ? (uint32_t)(e - (kr << shift)) : kNoOff;
      }
      scan_block(ks);
      if (kr != ks) scan_block(kr);
      if (p != kNpos && (p >> shift) != ks) scan_block(p >> shift);
    }
    size_t cnt = 0;
    for (size_t s = 0; s < n;) {
      const size_t len = len_at(s);
      const int32_t id = lookup(s, len);
      // Always found, unless the vocabulary was rewritten under the mapping
      // since the pair was looked up: then any id in range will do.
      out[cnt++] = id >= 0 ? id : t->v.unk >= 0 ? t->v.unk : 0;
      s += len;
    }
    return cnt;
  }
};

}  // namespace

size_t tokenizer_mem_size(uint32_t n) { return ((size_t)n + hash_slots(n)) * sizeof(uint32_t) + kPairBytes; }

gb_status tokenizer_init(Tokenizer *t, const VocabView &v, void *mem, const Logger &log) {
  if (!t || !mem) return GB_ERR_NULL_POINTER;
  GB_RETURN_IF(v.n == 0 || !v.scores || !v.offsets || !v.types || !v.blob, log, GB_ERR_CORRUPT,
               "tokenizer: empty vocabulary");
  GB_RETURN_IF(v.n >= kNoMerge, log, GB_ERR_CORRUPT, "tokenizer: %u tokens is too many for the encoder", v.n);
  GB_RETURN_IF(v.max_piece_bytes > kMaxPieceBytes, log, GB_ERR_CORRUPT, "tokenizer: max piece length %u > %u",
               v.max_piece_bytes, kMaxPieceBytes);
  const int32_t specials[3] = {v.bos, v.eos, v.unk};
  for (int32_t id : specials)
    GB_RETURN_IF(id < -1 || id >= (int32_t)v.n, log, GB_ERR_CORRUPT, "tokenizer: special token id %d out of range",
                 id);

  Tokenizer r;
  r.v = v;
  for (int i = 0; i < 256; i++) r.byte_token[i] = -1, r.byte_in_merge[i] = 0;
  uint32_t *sorted = static_cast<uint32_t *>(mem);
  bool single[128] = {};  // ASCII bytes that are one-byte mergeable pieces
  for (uint32_t i = 0; i < v.n; i++) {
    size_t len;
    const uint8_t *p = v.piece(i, &len);
    const uint8_t type = v.type(i);
    GB_RETURN_IF(len > v.max_piece_bytes, log, GB_ERR_CORRUPT, "tokenizer: token %u is %zu bytes (max %u)", i, len,
                 v.max_piece_bytes);
    GB_RETURN_IF(type < kTokNormal || type > kTokByte, log, GB_ERR_CORRUPT, "tokenizer: token %u has type %u", i,
                 type);
    if (type == kTokByte) {
      const int b = parse_byte_piece(p, len);
      GB_RETURN_IF(b < 0, log, GB_ERR_CORRUPT, "tokenizer: byte token %u is not of the form <0xHH>", i);
      if (r.byte_token[b] < 0) r.byte_token[b] = (int32_t)i;
    } else if (mergeable(type)) {
      GB_RETURN_IF(len == 0, log, GB_ERR_CORRUPT, "tokenizer: token %u is an empty piece", i);
      GB_RETURN_IF(!isfinite(v.score(i)), log, GB_ERR_CORRUPT, "tokenizer: token %u score not finite", i);
      if (len > 1)
        for (size_t k = 0; k < len; k++) r.byte_in_merge[p[k]] = 1;
      else if (p[0] < 128)
        single[p[0]] = true;
    }
    sorted[i] = i;
  }
  // An ASCII byte is always a unit of its own; any other byte may have to
  // fall back (inside an unknown codepoint), so it needs a byte token or unk.
  for (int b = 0; b < 256; b++)
    GB_RETURN_IF(r.byte_token[b] < 0 && v.unk < 0 && !(b < 128 && single[b]), log, GB_ERR_CORRUPT,
                 "tokenizer: byte 0x%02X has no byte token and the vocabulary has no unknown token", b);
  // A heap sort (the same order: the key is total): unlike std::sort it
  // stays inside the array even if the pieces it compares change under it
  // (a model file rewritten while it is being opened).
  const auto before = [&v](uint32_t a, uint32_t b) {
    size_t al, bl;
    const uint8_t *pa = v.piece(a, &al), *pb = v.piece(b, &bl);
    const int c = cmp_bytes(pa, al, pb, bl);
    if (c) return c < 0;
    const bool ma = mergeable(v.type(a)), mb = mergeable(v.type(b));
    if (ma != mb) return ma;
    return a < b;
  };
  std::make_heap(sorted, sorted + v.n, before);
  std::sort_heap(sorted, sorted + v.n, before);
  r.sorted = sorted;
  // Hash the mergeable pieces in byte order, so the first of equal pieces
  // (the lowest id, by the sort) is the one stored.
  uint32_t *tab = sorted + v.n;
  const size_t mask = hash_slots(v.n) - 1;
  for (size_t k = 0; k <= mask; k++) tab[k] = kEmpty;
  for (uint32_t k = 0; k < v.n; k++) {
    const uint32_t id = sorted[k];
    if (!mergeable(v.type(id))) continue;
    size_t len;
    const uint8_t *p = v.piece(id, &len);
    if (find_piece(r, p, len) >= 0) continue;
    size_t i = hash_bytes(p, len) & mask;
    while (tab[i] != kEmpty) i = (i + 1) & mask;
    tab[i] = id;
  }
  uint8_t *bits = reinterpret_cast<uint8_t *>(tab + mask + 1);
  memset(bits, 0, kPairBytes);
  for (uint32_t id = 0; id < v.n; id++) {
    if (!mergeable(v.type(id))) continue;
    size_t len;
    const uint8_t *p = v.piece(id, &len);
    for (size_t k = 0; k + 1 < len; k++) {
      const unsigned pr = (unsigned)p[k] << 8 | p[k + 1];
      bits[pr >> 3] = (uint8_t)(bits[pr >> 3] | 1u << (pr & 7));
    }
  }
  r.space_token = find_piece(r, reinterpret_cast<const uint8_t *>(" "), 1);
  *t = r;
  return GB_OK;
}

// Layout of the encoder in `out` (cap >= len + 3): [BOS] then, per segment,
// one slot per byte of the (dummy-prefixed) text. A segment is a run of units
// that are mergeable pieces. It ends before a unit that can never merge (one
// that falls back to byte tokens, or a single byte b with byte_in_merge[b] ==
// 0: a merged piece is > 1 byte and would contain b), and between two units
// whose facing bytes are adjacent in no mergeable piece. No token can span
// such a cut, and merges on either side never touch each other, so the
// per-segment leftmost-best order gives exactly the whole-text result.
// Finished tokens are written at `w`, which never passes the start of the
// current segment's slots (each token covers at least one byte).
gb_status tokenize(const Tokenizer &t, const char *text, size_t len, uint32_t flags, int32_t *out, size_t cap,
                   size_t *n_out) {
  if (!n_out || !out || (!text && len)) return GB_ERR_NULL_POINTER;
  if (flags & ~(GB_TOKENIZE_ADD_BOS | GB_TOKENIZE_NO_DUMMY_PREFIX)) return GB_ERR_INVALID_ARGUMENT;
  if (len > (size_t)-1 - 3) return GB_ERR_INVALID_ARGUMENT;
  // Block offsets are 32-bit: a segment of n bytes has blocks of about
  // n / kMaxBlocks, so texts stop at 2^39 bytes.
  if ((uint64_t)len >= (uint64_t)1 << 39) return GB_ERR_INVALID_ARGUMENT;
  if (cap < tokenize_capacity(len)) {
    *n_out = tokenize_capacity(len);
    return GB_ERR_BUFFER_TOO_SMALL;
  }
  if (!t.sorted) return GB_ERR_BAD_STATE;
  const bool bos = (flags & GB_TOKENIZE_ADD_BOS) != 0;
  if (bos && t.v.bos < 0) return GB_ERR_UNAVAILABLE;

  VText vt;
  vt.text = reinterpret_cast<const uint8_t *>(text);
  vt.len = len;
  vt.dummy = (len > 0 && !(flags & GB_TOKENIZE_NO_DUMMY_PREFIX)) ? 1 : 0;
  const size_t vlen = vt.dummy + len;
  const uint8_t *bits = pair_bits(t);

  size_t w = 0;
  if (bos) out[w++] = t.v.bos;
  Segment seg;
  seg.t = &t;
  seg.vt = &vt;
  seg.n = 0;
  uint8_t last = 0;  // last byte of the segment so far
  uint32_t *const words = reinterpret_cast<uint32_t *>(out);
  static const uint8_t kSpace = ' ';
  for (size_t pos = 0; pos < vlen;) {
    const uint8_t *p;
    size_t u;
    if (pos < vt.dummy) {
      p = &kSpace;
      u = 1;
    } else {
      p = vt.text + (pos - vt.dummy);
      u = unit_len(p, vlen - pos);
    }
    const int32_t id = find_piece(t, p, u);
    if (id >= 0 && (u > 1 || t.byte_in_merge[p[0]])) {
      if (seg.n && !pair_in_piece(bits, last, p[0])) {
        w += seg.run(out + w);
        seg.n = 0;
      }
      if (seg.n == 0) {
        seg.v0 = pos;
        seg.sl = words + w;
      }
      seg.sl[seg.n] = (uint32_t)(u - 1) | (kNoMerge << 8);
      if (u > 1) seg.sl[seg.n + u - 1] = (uint32_t)(u - 1);
      seg.n += u;
      pos += u;
      last = p[u - 1];
      continue;
    }
    if (seg.n) {
      w += seg.run(out + w);
      seg.n = 0;
    }
    if (id >= 0) {
      out[w++] = id;
    } else {
      for (size_t k = 0; k < u; k++) {
        const int32_t b = t.byte_token[p[k]];
        out[w++] = b >= 0 ? b : t.v.unk;
      }
    }
    pos += u;
  }
  if (seg.n) w += seg.run(out + w);
  *n_out = w;
  return GB_OK;
}

gb_status token_to_text(const Tokenizer &t, int32_t prev, int32_t token, const char **out, size_t *len) {
  if (!out || !len) return GB_ERR_NULL_POINTER;
  if (!t.sorted) return GB_ERR_BAD_STATE;
  if (token < 0 || (uint32_t)token >= t.v.n) return GB_ERR_TOKEN_OUT_OF_RANGE;
  const uint8_t type = t.v.type((uint32_t)token);
  const uint8_t *p = kAllBytes.b;
  size_t n = 0;
  if (type == kTokByte) {
    size_t pl;
    const uint8_t *piece = t.v.piece((uint32_t)token, &pl);
    const int b = parse_byte_piece(piece, pl);  // checked by tokenizer_init
    if (b >= 0) p = kAllBytes.b + b, n = 1;
  } else if (mergeable(type)) {
    p = t.v.piece((uint32_t)token, &n);
  }
  // The encoder's dummy prefix: SentencePiece strips it after BOS.
  if (prev >= 0 && prev == t.v.bos && n > 0 && p[0] == ' ') p++, n--;
  *out = reinterpret_cast<const char *>(p);
  *len = n;
  return GB_OK;
}

}  // namespace gb
