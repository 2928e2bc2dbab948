// matcher.h — running a grammar image (gbnf.h) over bytes, and the token
// mask built from it.
//
// The parse state is a set of stacks, as in a pushdown automaton: each
// stack is a chain of nodes, the top one at the element to match next (a
// byte or a character class, with the UTF-8 bytes of a character read so
// far), the ones below at where each enclosing rule continues. Stacks
// share their lower parts. A reference at the end of an alternative does
// not push (the rule's caller continues directly), so a repetition, which
// is a right-recursive rule, runs in constant depth. A special head
// (kGDone) says the start rule may end here.
//
// All nodes live in one pool and all state head lists in one array, both
// fixed at creation: advancing appends to them, a token-mask search rolls
// them back, and accepting a token compacts the new state to the bottom.
// Nothing allocates.
//
// The mask: the vocabulary's token texts sorted by bytes (VocabIndex), each
// with the length of the prefix it shares with the one before; a depth-first
// walk keeps the state after every byte of the current text, so a shared
// prefix is parsed once, and a prefix no stack survives rules out every
// token that starts with it without reading them. A walk meets few
// distinct states (inside a JSON string every ordinary character leads back
// to the same one), so it remembers them, up to kGKnownMax, with the state
// each byte leads to: after the first few tokens most bytes cost one table
// read instead of running the stacks. A state that every plain byte
// (printable ASCII but the quote and the backslash) leads back to allows
// every token made of them at once (a precomputed bit set), and the walk
// then reads only the other tokens. A first byte no stack takes skips every
// token that starts with it.
#pragma once

#include <stddef.h>
#include <stdint.h>

#include "arena.h"
#include "common.h"

namespace gb {

struct GNode {
  uint32_t pos;      // word of the image: the element this stack matches next
  uint32_t parent;   // node below, kGNil at the bottom
  uint32_t partial;  // UTF-8 character being read at a class: 0, or
                     // (total bytes << 26) | (bytes left << 24) | bits so far,
                     // or kGPartialFree | (bytes left << 24) when every
                     // completion is a character of the class
  uint32_t depth;    // nodes in the chain, this one included
};
constexpr uint32_t kGNil = 0xFFFFFFFFu;
constexpr uint32_t kGKnownMax = 128;            // states a mask walk remembers
constexpr uint16_t kGNextUnknown = 0xFFFF, kGNextDead = 0xFFFE;
constexpr uint32_t kGDone = 0xFFFFFFFEu;  // a head: the start rule is complete
constexpr uint32_t kGPartialFree = 1u << 31;

// A state: heads [h0, h0 + n) of Matcher::head.
struct GState {
  uint32_t h0 = 0, n = 0;
};

// One token of the vocabulary index.
struct VocabEntry {
  const uint8_t *sfx;  // text[lcp..len): the bytes after the shared prefix
  uint16_t len;        // of the whole text
  uint16_t lcp;        // bytes shared with the previous entry's text
  uint32_t id : 31;
  uint32_t plain : 1;  // every byte of sfx is printable ASCII other than " and \ (kGPlain)
};

// The bytes a "plain" suffix is made of: printable ASCII except the quote
// and the backslash, which is what the text inside a JSON string, or any
// loop over a negated class, repeats without leaving its state.
inline bool gb_plain_byte(uint8_t b) { return b >= 0x20 && b <= 0x7E && b != '"' && b != '\\'; }

// Tokens sorted by text, for the mask walk.
struct VocabList {
  VocabEntry *e = nullptr;   // (n) sorted by text bytes
  uint32_t n = 0;
  uint32_t first[257] = {};  // entries whose text starts with byte b: [first[b], first[b + 1])
};

struct VocabIndex {
  VocabList all;             // every token with text (control tokens have none)
  VocabList rest;            // those whose text is not all plain bytes; their
                             // suffixes point into the tokenizer's texts
  uint8_t *sfx = nullptr;    // all's suffixes back to back, in order (the
                             // walk reads them front to back)
  uint32_t *plain = nullptr; // (vocab / 32 + 1) bits: tokens whose text is all plain bytes
  uint32_t n_plain = 0;
  uint32_t max_len = 0;      // longest text
  int32_t *eog = nullptr;    // (n_eog) end-of-generation tokens
  uint32_t n_eog = 0;
};

struct Matcher {
  const uint32_t *img = nullptr;  // the grammar image, nullptr: none
  uint32_t table = 0, root = 0;
  GNode *node = nullptr;  // (node_cap)
  uint32_t node_cap = 0, node_top = 0;
  uint32_t *head = nullptr;  // (head_cap)
  uint32_t head_cap = 0, head_top = 0;
  uint32_t *work = nullptr;  // (work_cap) expansion stack: (pos, parent) pairs
  uint32_t work_cap = 0;
  uint32_t *fwd = nullptr;   // (node_cap) compaction map, kGNil between uses
  struct Level {
    GState st;
    uint32_t node_top, head_top;
  } *level = nullptr;        // (level_cap) the mask walk's state per byte depth
  uint32_t level_cap = 0;
  uint32_t max_stacks = 0, max_depth = 0;
  // The mask walk's memo: states met during one walk, told apart by their
  // structure (the chains of their stacks), and the state each byte leads
  // to from each of them.
  struct Known {
    GState st;
    uint64_t hash;
  } *known = nullptr;        // (kGKnownMax)
  uint16_t *next = nullptr;  // (kGKnownMax, 256) a known state's number, kGNextUnknown or kGNextDead
  uint8_t *plain_loop = nullptr;  // (kGKnownMax) 0 unknown, 1: every plain byte leads the state to itself, 2: not
  uint16_t *kst = nullptr;        // (level_cap) the memo walk's known state per byte depth
  uint32_t n_known = 0;
  GState cur;                // the committed state: heads [0, n), nodes [0, base_nodes)
  uint32_t base_nodes = 0;
  const Logger *log = nullptr;
};

// Carve a matcher's arrays for these limits, texts of up to max_len bytes,
// and `states` states kept at once above the committed one (the
// speculative gear's drafts).
void matcher_carve(Matcher *m, Arena &a, uint32_t max_stacks, uint32_t max_depth, uint32_t max_len, uint32_t states);

// Start the grammar image img (checked by gbnf_check) from its root.
// img nullptr: no grammar. Errors: GB_ERR_GRAMMAR_LIMIT.
gb_status matcher_start(Matcher *m, const uint32_t *img);

// st advanced by one byte into *out (appended to the pools). Errors:
// GB_ERR_GRAMMAR_LIMIT.
gb_status matcher_advance(Matcher *m, GState st, uint8_t byte, GState *out);

// st advanced by bytes p[0..n) (empty *out when some byte is refused).
gb_status matcher_advance_bytes(Matcher *m, GState st, const uint8_t *p, size_t n, GState *out);

// Whether the start rule may end in st.
bool matcher_done(const Matcher &m, GState st);

// Make st (appended above the committed state) the committed one.
gb_status matcher_commit(Matcher *m, GState st);

// Drop everything appended above the committed state.
void matcher_rollback(Matcher *m);

// Restoring a saved state: start over with image img and no heads; add
// nodes bottom first (each returns its index) and heads; finish makes them
// the committed state. The caller has checked the counts against the
// limits (node_cap, max_stacks, max_depth) and every position.
void matcher_restore_begin(Matcher *m, const uint32_t *img);
uint32_t matcher_restore_node(Matcher *m, uint32_t pos, uint32_t parent, uint32_t partial);
void matcher_restore_head(Matcher *m, uint32_t head);
void matcher_restore_end(Matcher *m);

// Set bit id of allowed (vocab_size bits, zeroed here) for each token that
// st can read whole, and for the end-of-generation tokens when the start
// rule may end. *n_allowed: how many. Errors: GB_ERR_GRAMMAR_LIMIT.
gb_status matcher_mask(Matcher *m, GState st, const VocabIndex &vi, uint32_t vocab_size, uint32_t *allowed,
                       uint32_t *n_allowed);

}  // namespace gb
