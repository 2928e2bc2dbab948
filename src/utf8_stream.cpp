// utf8_stream.cpp — streaming UTF-8 assembly (see utf8_stream.h, gearbx.h).
//
// Well-formed sequences (Unicode Table 3-7): 00..7F; C2..DF + 1 tail;
// E0 A0..BF, E1..EC, ED 80..9F, EE..EF + 2 tails; F0 90..BF, F1..F3,
// F4 80..8F + 3 tails; a tail is 80..BF. The lead byte fixes the length and
// the range of the second byte. A byte that breaks a held sequence ends it:
// the held bytes (a maximal subpart) become one U+FFFD and the byte is read
// again as the start of what follows. A byte that cannot start a sequence
// (80..BF, C0, C1, F5..FF) is one U+FFFD by itself.
#include "utf8_stream.h"

#include <string.h>

namespace gb {
namespace {

const char kReplacement[3] = {'\xef', '\xbf', '\xbd'};

// Sequence length for a lead byte; 0 when it cannot start one (or is ASCII).
uint8_t seq_len(uint8_t b) {
  if (b >= 0xc2 && b <= 0xdf) return 2;
  if (b >= 0xe0 && b <= 0xef) return 3;
  if (b >= 0xf0 && b <= 0xf4) return 4;
  return 0;
}

// Whether b may follow held[0..n) (n >= 1) in a well-formed sequence.
bool fits(const uint8_t *held, uint8_t n, uint8_t b) {
  uint8_t lo = 0x80, hi = 0xbf;
  if (n == 1) {
    switch (held[0]) {
      case 0xe0: lo = 0xa0; break;  // no overlong 3-byte forms
      case 0xed: hi = 0x9f; break;  // no surrogates
      case 0xf0: lo = 0x90; break;  // no overlong 4-byte forms
      case 0xf4: hi = 0x8f; break;  // nothing above U+10FFFF
      default: break;
    }
  }
  return b >= lo && b <= hi;
}

struct Sink {
  char *out;
  size_t n = 0;
  void put(const void *p, size_t k) {
    if (out) memcpy(out + n, p, k);
    n += k;
  }
};

}  // namespace

size_t utf8_stream_feed(Utf8State &st, const uint8_t *bytes, size_t len, char *out) {
  Sink s{out};
  size_t i = 0;
  while (i < len) {
    const uint8_t b = bytes[i];
    if (st.need) {
      if (fits(st.held, st.n_held, b)) {
        st.held[st.n_held++] = b;
        if (st.n_held == st.need) {
          s.put(st.held, st.need);
          st.n_held = st.need = 0;
        }
        i++;
      } else {
        s.put(kReplacement, 3);  // the held prefix; b is read again below
        st.n_held = st.need = 0;
      }
      continue;
    }
    if (b < 0x80) {
      s.put(&b, 1);
    } else if (const uint8_t k = seq_len(b)) {
      st.held[0] = b;
      st.n_held = 1;
      st.need = k;
    } else {
      s.put(kReplacement, 3);
    }
    i++;
  }
  return s.n;
}

size_t utf8_stream_finish(Utf8State &st, char *out) {
  if (!st.need) return 0;
  if (out) memcpy(out, kReplacement, 3);
  st.n_held = st.need = 0;
  return 3;
}

}  // namespace gb

// ---- C API ------------------------------------------------------------------

namespace {

gb::Utf8State load(const gb_utf8_stream *s) {
  gb::Utf8State st;
  memcpy(&st, s, sizeof st);
  return st;
}

void store(gb_utf8_stream *s, const gb::Utf8State &st) { memcpy(s, &st, sizeof st); }

// A state gb_utf8_stream_init made and the functions below kept consistent.
bool valid(const gb::Utf8State &st) {
  if (st.magic != gb::kUtf8Magic) return false;
  if (st.need == 0) return st.n_held == 0;
  return st.need >= 2 && st.need <= 4 && st.n_held >= 1 && st.n_held < st.need &&
         gb::seq_len(st.held[0]) == st.need;
}

}  // namespace

extern "C" void gb_utf8_stream_init(gb_utf8_stream *s) {
  if (!s) return;
  gb::Utf8State st;
  memset(&st, 0, sizeof st);
  st.magic = gb::kUtf8Magic;
  memset(s, 0, sizeof *s);
  store(s, st);
}

extern "C" gb_status gb_utf8_stream_push(gb_utf8_stream *s, const char *bytes, size_t len, char *out, size_t cap,
                                         size_t *n_out) {
  if (!s || !n_out || (!bytes && len > 0) || (!out && cap > 0))
    return gb::api_result("gb_utf8_stream_push", GB_ERR_NULL_POINTER, "s, n_out, bytes (len > 0) or out (cap > 0) is NULL");
  gb::Utf8State st = load(s);
  if (!valid(st)) return gb::api_result("gb_utf8_stream_push", GB_ERR_BAD_STATE, "the stream was not initialised");
  const uint8_t *in = reinterpret_cast<const uint8_t *>(bytes);
  gb::Utf8State probe = st;
  const size_t need = gb::utf8_stream_feed(probe, in, len, nullptr);
  if (need > cap) {
    *n_out = need;
    return GB_ERR_BUFFER_TOO_SMALL;
  }
  const size_t wrote = gb::utf8_stream_feed(st, in, len, out);
  GB_DASSERT(wrote == need);
  store(s, st);
  *n_out = wrote;
  return GB_OK;
}

extern "C" gb_status gb_utf8_stream_flush(gb_utf8_stream *s, char *out, size_t cap, size_t *n_out) {
  if (!s || !n_out || (!out && cap > 0))
    return gb::api_result("gb_utf8_stream_flush", GB_ERR_NULL_POINTER, "s, n_out or out (cap > 0) is NULL");
  gb::Utf8State st = load(s);
  if (!valid(st)) return gb::api_result("gb_utf8_stream_flush", GB_ERR_BAD_STATE, "the stream was not initialised");
  const size_t need = st.need ? 3 : 0;
  if (need > cap) {
    *n_out = need;
    return GB_ERR_BUFFER_TOO_SMALL;
  }
  *n_out = gb::utf8_stream_finish(st, out);
  store(s, st);
  return GB_OK;
}
