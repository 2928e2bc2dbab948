// sampler.h — next-token sampling over a logits vector: greedy, temperature,
// top-k, top-p, min-p, inverse-CDF or Gumbel-max, with a seedable RNG that
// gives the same tokens for the same seed on every platform. No allocation:
// scratch comes from the session arena.
#pragma once

#include <stddef.h>
#include <stdint.h>

#include "common.h"

namespace gb {

struct ProbIndex {
  float p;
  int32_t i;
};

struct Sampler {
  gb_sampler_options opt;
  uint32_t n_vocab = 0;
  uint64_t rng[2];              // xoroshiro128+ style state, seeded from opt.seed
  ProbIndex *scratch = nullptr;  // (n_vocab)
  float *work = nullptr;         // (n_vocab)
};
// What a saved session state holds of it (state.cpp): every field once, in
// order; SAVE written and restored, MATCH configuration a state must have
// been saved with, NEST a struct with a list of its own, OWN contents the
// part's own code in state.cpp writes, SKIP not part of the state.
#define GB_SAMPLER_FIELDS(F) F(SKIP, opt) F(SKIP, n_vocab) F(SAVE, rng) F(SKIP, scratch) F(SKIP, work)

// Validate options (temperature >= 0 and finite, top_p in (0,1], min_p in
// [0,1), method known); log and return GB_ERR_INVALID_ARGUMENT otherwise.
gb_status sampler_validate(const gb_sampler_options &o, const Logger &log);

// Scratch bytes for a vocabulary of n tokens.
size_t sampler_mem_size(uint32_t n_vocab);

// mem: sampler_mem_size bytes, 8-aligned, outliving the sampler.
void sampler_init(Sampler *s, const gb_sampler_options &o, uint32_t n_vocab, void *mem);

// Re-seed from opt.seed (the same sequence again).
void sampler_reset(Sampler *s);

// NaN/inf guard for the logits, in place: NaN -> 0, +inf -> 1e4, -inf -> -1e4.
void nan_guard(float *logits, size_t n);

// Pick the next token from guarded logits (not modified).
int32_t sampler_sample(Sampler *s, const float *logits);

// The distribution sampler_sample draws from, as a dense vector of n_vocab
// probabilities (zero outside the kept candidates; one-hot at the argmax for
// temperature 0). Speculative decoding compares the draft's and the
// verifier's distributions with it.
void sampler_probs(Sampler *s, const float *logits, float *probs);

// Draw a token from non-negative weights (normalized here) by inverse CDF
// with the sampler's RNG; the argmax if they are all zero.
int32_t sampler_draw(Sampler *s, const float *probs);

// Uniform float in [0, 1) from the sampler's RNG (24 random bits).
float sampler_uniform(Sampler *s);

}  // namespace gb
