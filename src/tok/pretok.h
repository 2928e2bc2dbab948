// pretok.h — byte-level BPE pre-tokenizers: hand-written matchers equivalent
// to the regular expressions llama.cpp applies for each tokenizer.ggml.pre
// name. A pre-tokenizer is a list of stages; each stage splits every piece
// the previous one produced into its matches and the text between them
// (as a regex iterator does), so a word never crosses a stage's boundary.
// Matching is on code points decoded with utf8_decode (a bad byte is one
// U+FFFD); positions are byte offsets into the caller's text. No allocation;
// recursion depth is the number of stages (at most 6).
// gemma4 is the one name whose BPE runs on raw UTF-8 instead of GPT-2's
// byte alphabet (tokenizer kind kTokKindBpeUtf8, tokdata.h): its only stage
// cuts newline runs from the rest. Other raw-UTF-8 names (sarvam-moe,
// whitespace) are unknown here: the converter refuses them.
#pragma once

#include <stddef.h>
#include <stdint.h>

#include "common.h"

namespace gb {

enum PretokId : uint32_t {
  kPreNone = 0,         // SentencePiece: no pre-tokenizer
  kPreDefault = 1,      // "default" (llama.cpp's fallback regex list)
  kPreGpt2 = 2,         // gpt-2 and its aliases
  kPreLlama3 = 3,       // llama-bpe / llama3 (Llama 3)
  kPreQwen2 = 4,        // qwen2
  kPreStarcoder = 5,    // starcoder, smollm, refact, command-r, codeshell, exaone
  kPreFalcon = 6,       // falcon
  kPreDeepseekLlm = 7,  // deepseek-llm
  kPreDeepseekCoder = 8,  // deepseek-coder
  kPreGpt4o = 9,        // gpt-4o, llama4, kanana2, talkie, minimax-m2 (Phi-4-mini)
  kPreTekken = 10,      // tekken (Mistral Nemo, Ministral)
  kPreQwen35 = 11,      // qwen35 (Qwen3.5): qwen2 with marks in words
  kPreSeedCoder = 12,   // seed-coder
  kPreMinicpm5 = 13,    // minicpm5
  kPreLaguna = 14,      // laguna: lines, then qwen2
  kPreJais2 = 15,       // jais-2: llama3 with cascading white space
  kPreDeepseekV3 = 16,  // deepseek-v3, hunyuan-dense, joyai-llm
  kPreYoutu = 17,       // youtu
  kPreBloom = 18,       // bloom, poro-chat, gpt3-finnish
  kPreViking = 19,      // viking
  kPreChameleon = 20,   // chameleon
  kPreGraniteMulti = 21,  // granite-embed-multi-97m: gpt-4o with marks
  kPreTinyAya = 22,     // tiny_aya, cohere2moe
  kPreKimiK2 = 23,      // kimi-k2
  kPreSuperbpe = 24,    // superbpe
  kPreAfmoe = 25,       // afmoe
  kPreExaoneMoe = 26,   // exaone-moe
  kPreGemma4 = 27,      // gemma4: runs of newlines and runs of anything else (raw UTF-8 BPE)
  kPreCount = 28,
};

struct PretokInfo {
  int32_t id = -1;             // PretokId, or -1 for an unknown name
  bool ignore_merges = false;  // a word that is itself a token is not merged
  bool add_bos = false;        // llama.cpp's BOS default for the name
};

// The pre-tokenizer named by tokenizer.ggml.pre (exact spelling); id -1 when
// the name is unknown (the converter refuses it, naming it).
PretokInfo pretok_from_name(const char *name);
const char *pretok_name(uint32_t id);

// Called once per word, in text order, with byte offsets [begin, end).
typedef gb_status (*PretokWordFn)(void *ctx, size_t begin, size_t end);

// Split text[0..n) into words for pre-tokenizer `id` (kPreDefault..).
// Returns the first non-OK status of fn, or GB_ERR_INVALID_ARGUMENT for an
// id out of range.
gb_status pretok_split(uint32_t id, const uint8_t *text, size_t n, PretokWordFn fn, void *ctx);

}  // namespace gb
