// grammar_obj.h — the gb_grammar handle's layout (for the session, which
// copies its image).
#pragma once

#include <stddef.h>
#include <stdint.h>

#include "common.h"
#include "grammar/matcher.h"

struct gb_grammar {
  uint32_t handle = gb::kHandleGrammar;  // first: see gb::HandleKind
  gb::Logger log;
  uint32_t *words = nullptr;  // the image at words[0..n_words)
  size_t n_words = 0;
  gb::Matcher m;              // gb_grammar_match's work space
  bool owned = false;         // the memory came from the library
};
