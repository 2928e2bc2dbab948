// utf8_stream.h — the streaming UTF-8 assembler behind gb_utf8_stream_*:
// token bytes in, only complete well-formed sequences out, U+FFFD for each
// maximal ill-formed subpart (Unicode chapter 3). The state lives inside the
// caller's gb_utf8_stream; nothing allocates.
#pragma once

#include <stddef.h>
#include <stdint.h>

#include "common.h"

namespace gb {

// The private view of gb_utf8_stream::opaque_.
struct Utf8State {
  uint8_t held[4];  // the incomplete sequence so far: held[0] is its lead byte
  uint8_t n_held;   // 0..3
  uint8_t need;     // its full length (2..4); 0 when nothing is held
  uint8_t magic;    // kUtf8Magic once initialised
  uint8_t reserved;
};
static_assert(sizeof(Utf8State) <= sizeof(gb_utf8_stream), "state fits the public struct");

constexpr uint8_t kUtf8Magic = 0xb5;

// Feed len bytes: appends the finished text to out (writes only when out is
// not nullptr) and returns its byte count. st is updated either way.
size_t utf8_stream_feed(Utf8State &st, const uint8_t *bytes, size_t len, char *out);

// End of input: U+FFFD for a held sequence (returns 3) or nothing (0).
size_t utf8_stream_finish(Utf8State &st, char *out);

}  // namespace gb
