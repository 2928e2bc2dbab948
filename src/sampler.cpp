// sampler.cpp — next-token sampling: greedy, or temperature -> top-k ->
// softmax -> min-p -> top-p -> draw (inverse CDF or Gumbel-max), over the
// session's scratch buffers. The RNG is xoroshiro128+ seeded through
// splitmix64: integer-only, so a seed gives the same stream everywhere.
//
// Every selection and sort orders candidates by (probability desc, index
// asc), a strict total order: std::nth_element / std::sort then give the
// same result with any standard library, and ties never depend on the
// implementation.
#include "sampler.h"

#include <float.h>
#include <math.h>

#include <algorithm>

namespace gb {
namespace {

inline uint64_t rotl(uint64_t x, int k) { return (x << k) | (x >> (64 - k)); }

uint64_t splitmix64(uint64_t *x) {
  uint64_t z = (*x += 0x9E3779B97F4A7C15ull);
  z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
  z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
  return z ^ (z >> 31);
}

uint64_t next_u64(uint64_t *s) {
  const uint64_t s0 = s[0];
  uint64_t s1 = s[1];
  const uint64_t r = s0 + s1;
  s1 ^= s0;
  s[0] = rotl(s0, 24) ^ s1 ^ (s1 << 16);
  s[1] = rotl(s1, 37);
  return r;
}

inline bool before(const ProbIndex &a, const ProbIndex &b) { return a.p > b.p || (a.p == b.p && a.i < b.i); }

int32_t argmax(const float *x, uint32_t n) {
  uint32_t best = 0;
  for (uint32_t i = 1; i < n; i++)
    if (x[i] > x[best]) best = i;
  return (int32_t)best;
}

// Scale c[0..m) to sum to 1. The sum is never 0: every filter keeps the most
// probable candidate, whose p is > 0.
void normalize(ProbIndex *c, size_t m) {
  double sum = 0;
  for (size_t j = 0; j < m; j++) sum += c[j].p;
  const float inv = (float)(1.0 / sum);
  for (size_t j = 0; j < m; j++) c[j].p *= inv;
}

}  // namespace

gb_status sampler_validate(const gb_sampler_options &o, const Logger &log) {
  GB_RETURN_IF(!(o.temperature >= 0.0f) || !isfinite(o.temperature), log, GB_ERR_INVALID_ARGUMENT,
               "sampler: temperature %g must be finite and >= 0", (double)o.temperature);
  GB_RETURN_IF(!(o.top_p > 0.0f && o.top_p <= 1.0f), log, GB_ERR_INVALID_ARGUMENT,
               "sampler: top_p %g must be in (0, 1]", (double)o.top_p);
  GB_RETURN_IF(!(o.min_p >= 0.0f && o.min_p < 1.0f), log, GB_ERR_INVALID_ARGUMENT,
               "sampler: min_p %g must be in [0, 1)", (double)o.min_p);
  GB_RETURN_IF((uint32_t)raw_enum(o.method) > (uint32_t)GB_SAMPLE_GUMBEL, log, GB_ERR_INVALID_ARGUMENT,
               "sampler: method %d unknown", raw_enum(o.method));
  return GB_OK;
}

size_t sampler_mem_size(uint32_t n_vocab) { return (size_t)n_vocab * (sizeof(ProbIndex) + sizeof(float)); }

void sampler_init(Sampler *s, const gb_sampler_options &o, uint32_t n_vocab, void *mem) {
  s->opt = o;
  s->n_vocab = n_vocab;
  s->scratch = static_cast<ProbIndex *>(mem);
  s->work = reinterpret_cast<float *>(s->scratch + n_vocab);
  sampler_reset(s);
}

void sampler_reset(Sampler *s) {
  uint64_t x = s->opt.seed;
  s->rng[0] = splitmix64(&x);
  s->rng[1] = splitmix64(&x);
  if ((s->rng[0] | s->rng[1]) == 0) s->rng[0] = 1;  // the one state xoroshiro cannot leave
}

float sampler_uniform(Sampler *s) { return (float)(next_u64(s->rng) >> 40) * (1.0f / 16777216.0f); }

void nan_guard(float *logits, size_t n) {
  for (size_t i = 0; i < n; i++) {
    const float v = logits[i];
    if (isnan(v)) logits[i] = 0.0f;
    else if (isinf(v)) logits[i] = v > 0 ? 1e4f : -1e4f;
  }
}

namespace {

// The candidates of a temperature > 0 draw: s->scratch[0..m) holds the kept
// tokens with their normalized probabilities, s->work the scaled logits and
// *mx_out their maximum. Returns m.
size_t candidates(Sampler *s, const float *logits, float *mx_out) {
  const uint32_t n = s->n_vocab;
  const gb_sampler_options &o = s->opt;

  // Scaled logits; a tiny temperature must not turn them into inf or NaN.
  float *x = s->work;
  for (uint32_t i = 0; i < n; i++) x[i] = fminf(fmaxf(logits[i] / o.temperature, -FLT_MAX), FLT_MAX);

  ProbIndex *c = s->scratch;
  for (uint32_t i = 0; i < n; i++) c[i].p = x[i], c[i].i = (int32_t)i;
  size_t m = n;
  if (o.top_k > 0 && o.top_k < n) {
    std::nth_element(c, c + (o.top_k - 1), c + n, before);
    m = o.top_k;
  }

  float mx = -FLT_MAX;
  for (size_t j = 0; j < m; j++) mx = fmaxf(mx, c[j].p);
  for (size_t j = 0; j < m; j++) c[j].p = expf(c[j].p - mx);
  normalize(c, m);

  if (o.min_p > 0.0f) {
    float pmax = 0;
    for (size_t j = 0; j < m; j++) pmax = fmaxf(pmax, c[j].p);
    const float thr = o.min_p * pmax;
    size_t k = 0;
    for (size_t j = 0; j < m; j++)
      if (c[j].p >= thr) c[k++] = c[j];
    m = k;
    normalize(c, m);
  }

  if (o.top_p < 1.0f && m > 1) {
    // Only the most probable token can be in the nucleus with p below
    // (1 - top_p) / (m - 1): the others after it would weigh less than
    // 1 - top_p. So sort just the tokens above that cutoff.
    const float cutoff = (1.0f - o.top_p) / (float)(m - 1);
    size_t top = 0;
    for (size_t j = 1; j < m; j++)
      if (before(c[j], c[top])) top = j;
    const ProbIndex best = c[top];
    size_t k = 0;
    for (size_t j = 0; j < m; j++)
      if (c[j].p >= cutoff) c[k++] = c[j];
    if (k == 0) c[k++] = best;
    std::sort(c, c + k, before);
    double cum = 0;
    size_t keep = k;
    for (size_t j = 0; j < k; j++) {
      cum += c[j].p;
      if (cum >= (double)o.top_p) {
        keep = j + 1;
        break;
      }
    }
    m = keep;
    normalize(c, m);
  }
  *mx_out = mx;
  return m;
}

}  // namespace

int32_t sampler_sample(Sampler *s, const float *logits) {
  const uint32_t n = s->n_vocab;
  if (n == 0) return -1;
  const gb_sampler_options &o = s->opt;
  if (o.temperature == 0.0f) return argmax(logits, n);
  float mx = 0.0f;
  const size_t m = candidates(s, logits, &mx);
  const float *x = s->work;
  const ProbIndex *c = s->scratch;
  if (o.method == GB_SAMPLE_GUMBEL) {
    // argmax of log p_i + G_i; log p_i is x_i minus a constant, which does
    // not move the argmax, so the exact scaled logit is used.
    float best = -INFINITY;
    int32_t tok = c[0].i;
    for (size_t j = 0; j < m; j++) {
      const float u = sampler_uniform(s);
      const float g = -logf(-logf(u + 1e-20f));
      const float v = x[c[j].i] - mx + g;
      if (v > best) best = v, tok = c[j].i;
    }
    return tok;
  }
  const float r = sampler_uniform(s);
  float cdf = 0;
  size_t last = 0;  // the last candidate with weight (banned tokens have none)
  for (size_t j = 0; j < m; j++) {
    if (c[j].p > 0.0f) last = j;
    cdf += c[j].p;
    if (r < cdf) return c[j].i;
  }
  return c[last].i;  // rounding: r landed past the last partial sum
}

void sampler_probs(Sampler *s, const float *logits, float *probs) {
  const uint32_t n = s->n_vocab;
  for (uint32_t i = 0; i < n; i++) probs[i] = 0.0f;
  if (n == 0) return;
  if (s->opt.temperature == 0.0f) {
    probs[argmax(logits, n)] = 1.0f;
    return;
  }
  float mx = 0.0f;
  const size_t m = candidates(s, logits, &mx);
  for (size_t j = 0; j < m; j++) probs[s->scratch[j].i] = s->scratch[j].p;
}

int32_t sampler_draw(Sampler *s, const float *probs) {
  const uint32_t n = s->n_vocab;
  double total = 0.0;
  for (uint32_t i = 0; i < n; i++) total += probs[i];
  int32_t last = -1;
  if (total > 0.0) {
    const double r = (double)sampler_uniform(s) * total;
    double cdf = 0.0;
    for (uint32_t i = 0; i < n; i++) {
      if (probs[i] <= 0.0f) continue;
      cdf += probs[i];
      last = (int32_t)i;
      if (r < cdf) return (int32_t)i;
    }
  }
  return last >= 0 ? last : argmax(probs, n);
}

}  // namespace gb
