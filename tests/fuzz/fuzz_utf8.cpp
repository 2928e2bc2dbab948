// fuzz_utf8.cpp — fuzz target for the streaming UTF-8 assembler
// (gb_utf8_stream_*, src/utf8_stream.cpp). Input: byte 0 seeds the split of
// the rest into pushes (1..16 bytes each, some empty) and whether some
// pushes are first tried with a capacity one byte short; bit 7 of byte 0
// also runs the bytes through a stream whose state is bytes 1..8 of the
// input (a state never initialised: refused or accepted, never a crash).
// Checks: every push and the flush succeed within GB_UTF8_STREAM_CAPACITY;
// a capacity one short is refused with the size and leaves the stream as it
// was; the text is the same however the bytes are split, is well-formed
// UTF-8, and equals a reference written here from Unicode's table of
// well-formed sequences (one U+FFFD per maximal ill-formed subpart). Any
// failure aborts.
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <string>
#include <vector>

#include "gearbx.h"
#include "sample_files.h"

static const char kFuzzName[] = "fuzz_utf8";
#include "fuzz/fuzz_util.h"
#include "utf8_check.h"

namespace {

// The whole input at once: well-formed sequences copied, each maximal
// ill-formed subpart replaced by EF BF BD.
std::string reference(const uint8_t *p, size_t n) {
  std::string o;
  size_t i = 0;
  while (i < n) {
    const uint8_t b = p[i];
    if (b < 0x80) {
      o += (char)b;
      i++;
      continue;
    }
    uint8_t lo, hi;
    const size_t k = gbt::utf8_lead(b, &lo, &hi);
    if (k == 0) {
      o += "\xef\xbf\xbd";
      i++;
      continue;
    }
    size_t j = 1;
    while (j < k && i + j < n && p[i + j] >= (j == 1 ? lo : 0x80) && p[i + j] <= (j == 1 ? hi : 0xbf)) j++;
    if (j == k) {
      o.append(reinterpret_cast<const char *>(p + i), k);
    } else {
      o += "\xef\xbf\xbd";
    }
    i += j;
  }
  return o;
}

struct Lcg {
  uint32_t x;
  uint32_t next() {
    x = x * 1664525u + 1013904223u;
    return x >> 24;
  }
};

// Push the bytes in pieces; returns the text (pushes and the flush).
std::string streamed(const uint8_t *p, size_t n, uint8_t mode) {
  gb_utf8_stream s;
  gb_utf8_stream_init(&s);
  Lcg rng{mode * 2654435761u + 1};
  std::string text;
  std::vector<char> out;
  size_t at = 0;
  for (;;) {
    const bool flush = at == n;
    size_t len = flush ? 0 : rng.next() % 17;
    if (len > n - at) len = n - at;
    const size_t cap = GB_UTF8_STREAM_CAPACITY(len);
    out.assign(cap + 8, '\x77');
    size_t got = 0;
    const char *bytes = len ? reinterpret_cast<const char *>(p + at) : nullptr;
    if (rng.next() % 4 == 0) {
      // Ask with too little room first: refused, the stream unchanged.
      size_t need = 0;
      const gb_status st = flush ? gb_utf8_stream_flush(&s, nullptr, 0, &need) : gb_utf8_stream_push(&s, bytes, len, nullptr, 0, &need);
      if (st == GB_OK) {
        // Nothing to write: the bytes were taken (held or empty).
        if (need != 0) fuzz_fail("nothing written but a length reported");
        if (flush) break;
        at += len;
        continue;
      } else if (st != GB_ERR_BUFFER_TOO_SMALL || need == 0 || need > cap) {
        fuzz_fail("a zero capacity gave the wrong status or size");
      } else {
        const size_t short_cap = need - 1;
        size_t need2 = 0;
        const gb_status st2 = flush ? gb_utf8_stream_flush(&s, short_cap ? out.data() : nullptr, short_cap, &need2)
                                    : gb_utf8_stream_push(&s, bytes, len, short_cap ? out.data() : nullptr, short_cap, &need2);
        if (st2 != GB_ERR_BUFFER_TOO_SMALL || need2 != need) fuzz_fail("a capacity one short is not refused with the size");
        for (char c : out)
          if (c != '\x77') fuzz_fail("written although the capacity was too small");
      }
    }
    const gb_status st = flush ? gb_utf8_stream_flush(&s, out.data(), cap, &got) : gb_utf8_stream_push(&s, bytes, len, out.data(), cap, &got);
    if (st != GB_OK) fuzz_fail(flush ? "flush failed" : "push failed");
    if (got > cap) fuzz_fail("more than the capacity reported");
    for (size_t i = cap; i < out.size(); i++)
      if (out[i] != '\x77') fuzz_fail("wrote past the capacity");
    text.append(out.data(), got);
    if (flush) break;
    at += len;
  }
  return text;
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  if (size == 0) return 0;
  g_in = data;
  g_in_size = size;
  const uint8_t mode = data[0];
  const uint8_t *p = data + 1;
  const size_t n = size - 1;
  const std::string want = reference(p, n);
  if (!gbt::utf8_well_formed(want)) fuzz_fail("the reference is not well-formed (fuzz target bug)");
  const std::string a = streamed(p, n, mode);
  if (a != want) fuzz_fail("streamed text differs from the reference");
  // One push of everything.
  gb_utf8_stream s;
  gb_utf8_stream_init(&s);
  std::vector<char> out(GB_UTF8_STREAM_CAPACITY(n));
  size_t got = 0, tail = 0;
  if (gb_utf8_stream_push(&s, n ? reinterpret_cast<const char *>(p) : nullptr, n, out.data(), out.size(), &got) != GB_OK)
    fuzz_fail("one push failed");
  char end[3];
  if (gb_utf8_stream_flush(&s, end, sizeof end, &tail) != GB_OK) fuzz_fail("flush failed");
  if (std::string(out.data(), got) + std::string(end, tail) != want) fuzz_fail("one push differs from the reference");
  // A state that was never initialised: any status but a crash.
  if ((mode & 0x80) && n >= 8) {
    gb_utf8_stream junk;
    memcpy(&junk, p, sizeof junk);
    size_t k = 0;
    const gb_status st = gb_utf8_stream_push(&junk, reinterpret_cast<const char *>(p), n, out.data(), out.size(), &k);
    if (st != GB_OK && st != GB_ERR_BAD_STATE) fuzz_fail("a forged state gave an unexpected status");
    if (st == GB_OK && k > out.size()) fuzz_fail("a forged state overflowed");
    const gb_status fs = gb_utf8_stream_flush(&junk, end, sizeof end, &k);
    if (fs != GB_OK && fs != GB_ERR_BAD_STATE) fuzz_fail("flush of a forged state gave an unexpected status");
  }
  return 0;
}

// Seeds: well-formed text of every length, each kind of ill-formed subpart
// (lone continuation bytes, C0/C1/F5..FF, overlong and surrogate forms,
// truncated sequences, sequences broken by ASCII or by a new lead byte).
void gb_fuzz_seeds(std::vector<gb::FuzzSeed> *seeds) {
  static const char *const kTexts[] = {
      "plain ASCII text\n",
      "caf\xc3\xa9 \xe2\x82\xac \xf0\x9f\x98\x80 \xf4\x8f\xbf\xbf \xee\x80\x80",
      "\x80\xbf\xc0\xc1\xf5\xff\xfe",
      "\xe0\x80\xaf \xed\xa0\x80 \xf0\x80\x80\xaf \xf4\x90\x80\x80",
      "\xe2\x82 \xf0\x9f\x98 \xc3",
      "\xe2\x82\xe2\x82\xac\xf0\x9f\xc3\xa9",
      "\xf0\x9f\x98",
  };
  for (uint8_t mode : {0, 1, 7, 0x80, 0x93})
    for (const char *t : kTexts) {
      std::vector<uint8_t> b(1, mode);
      b.insert(b.end(), t, t + strlen(t));
      seeds->push_back(gb::FuzzSeed{b, b.size(), 1});
    }
}
