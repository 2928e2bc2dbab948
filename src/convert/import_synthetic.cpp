// import_synthetic.cpp — models with random weights from a spec string, for
// benchmarks and tests at shapes no small real model has (the 1.1B preset
// writes ~4 GB). Every row is generated from its own PRNG state, so the
// writer can pull any row range at any time and memory stays bounded.
#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <string>

#include "convert.h"
#include "convert_util.h"
#include "gbx_writer.h"

namespace gb {
namespace {

uint64_t splitmix64(uint64_t *s) {
  uint64_t z = (*s += 0x9E3779B97F4A7C15ull);
  z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
  z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
  return z ^ (z >> 31);
}

enum { kDim, kLayers, kHidden, kHeads, kKvHeads, kVocab, kSeed, kSeqLen, kQ4Grid, kNoise, kKeys };
const char *const kKeyNames[kKeys] = {"dim",  "layers",  "hidden", "heads", "kv_heads",
                                      "vocab", "seed", "seq_len", "q4grid", "noise"};
struct Spec {
  uint64_t v[kKeys];
  bool set[kKeys];
};

struct Preset {
  const char *name;
  uint64_t v[kKeys];
};
const Preset kPresets[] = {
    {"tinyllama-1.1b", {2048, 22, 5632, 32, 4, 32000, 1, 2048, 0, 0}},
};

gb_status parse_spec(const char *spec, const Logger &log, Spec *s, std::string *name) {
  memset(s, 0, sizeof *s);
  s->v[kSeed] = 1;
  s->v[kSeqLen] = 2048;
  s->set[kSeed] = s->set[kSeqLen] = s->set[kQ4Grid] = s->set[kNoise] = true;
  *name = "synthetic";
  GB_RETURN_IF(!spec || !*spec, log, GB_ERR_INVALID_ARGUMENT, "synthetic: empty spec");
  const std::string all = spec;
  size_t at = 0;
  bool first = true;
  while (at <= all.size()) {
    size_t end = all.find(',', at);
    if (end == std::string::npos) end = all.size();
    const std::string item = all.substr(at, end - at);
    at = end + 1;
    const size_t eq = item.find('=');
    if (eq == std::string::npos) {
      // A preset name, allowed only first; later keys override its values.
      const Preset *p = nullptr;
      for (const Preset &q : kPresets)
        if (item == q.name) p = &q;
      GB_RETURN_IF(!first || !p, log, GB_ERR_INVALID_ARGUMENT, "synthetic: '%.64s' is not a preset (known: tinyllama-1.1b) or key=value",
                   item.c_str());
      for (int k = 0; k < kKeys; k++) {
        s->v[k] = p->v[k];
        s->set[k] = true;
      }
      *name = p->name;
      first = false;
      continue;
    }
    first = false;
    const std::string key = item.substr(0, eq), val = item.substr(eq + 1);
    int k = -1;
    for (int i = 0; i < kKeys; i++)
      if (key == kKeyNames[i]) k = i;
    GB_RETURN_IF(k < 0, log, GB_ERR_INVALID_ARGUMENT,
                 "synthetic: unknown key '%.64s' (dim, layers, hidden, heads, kv_heads, vocab, seed, seq_len, q4grid, noise)", key.c_str());
    char *e = nullptr;
    errno = 0;
    const unsigned long long x = strtoull(val.c_str(), &e, 10);
    GB_RETURN_IF(val.empty() || val[0] < '0' || val[0] > '9' || errno != 0 || *e != 0, log, GB_ERR_INVALID_ARGUMENT,
                 "synthetic: %s = '%.64s' is not a non-negative integer", key.c_str(), val.c_str());
    GB_RETURN_IF(k != kSeed && x > 0xFFFFFFFFull, log, GB_ERR_INVALID_ARGUMENT, "synthetic: %s = %llu is too large", key.c_str(), x);
    GB_RETURN_IF(k == kQ4Grid && x > 1, log, GB_ERR_INVALID_ARGUMENT, "synthetic: q4grid = %llu is not 0 or 1", x);
    GB_RETURN_IF(k == kNoise && x > 100000, log, GB_ERR_INVALID_ARGUMENT, "synthetic: noise = %llu is over 100000 (per mille of a block's step)", x);
    s->v[k] = x;
    s->set[k] = true;
  }
  for (int k = 0; k < kKeys; k++)
    GB_RETURN_IF(!s->set[k], log, GB_ERR_INVALID_ARGUMENT, "synthetic: spec '%.128s' lacks key '%s'", spec, kKeyNames[k]);
  return GB_OK;
}

// Weights: uniform in +-1/sqrt(cols), or with q4grid = 1 on the q4 grid:
// every 32-weight block is d * (q - 8) with d = +-(1 + k/4) 2^e (k in 0..3,
// random sign) near the uniform weights' step, one anchor code q = 0 (the
// block's largest magnitude, 8|d|) and the others uniform in 1..15 (values
// -7..7: zero mean, as the uniform weights; codes 0..15 would give every row
// the same negative mean and a degenerate model). Every weight has at most 6
// significant bits, so fp16 holds it exactly, and the q4 quantizer (scale =
// the value of largest magnitude / -8) gives back d and q: the low tier
// equals the high tier exactly. noise = N then adds uniform noise of
// +-N/1000 of the block's d to every weight (both tiers are made from the
// noisy values), which sets how often the low tier's greedy token differs from
// the high tier's: the speculative gear's acceptance.
class SyntheticSource : public TensorSource {
 public:
  // The seed is scrambled first so nearby seeds give unrelated streams.
  SyntheticSource(uint64_t seed, const GbxModelDesc &d, bool q4grid, uint32_t noise)
      : seed_(splitmix64(&seed)), d_(d), q4grid_(q4grid), noise_((float)noise / 1000.0f) {}
  gb_status read_f32(uint32_t kind, uint32_t layer, uint32_t row0, uint32_t n_rows, float *out) override {
    uint32_t rows, cols;
    tensor_shape(d_, kind, &rows, &cols);
    if (kind == kAttnNorm || kind == kFfnNorm || kind == kOutNorm) {
      for (size_t i = 0; i < (size_t)n_rows * cols; i++) out[i] = 1.0f;
      return GB_OK;
    }
    const float a = 1.0f / sqrtf((float)cols);
    const int e = (int)floorf(log2f(a / 8.0f));
    for (uint32_t r = 0; r < n_rows; r++) {
      uint64_t st = seed_ ^ ((uint64_t)kind << 56) ^ ((uint64_t)layer << 40) ^ (uint64_t)(row0 + r);
      st = splitmix64(&st);
      float *o = out + (size_t)r * cols;
      if (!q4grid_) {
        for (uint32_t c = 0; c < cols; c++) o[c] = (2.0f * unit(&st) - 1.0f) * a;
        continue;
      }
      for (uint32_t c0 = 0; c0 < cols; c0 += 32) {
        const uint64_t z = splitmix64(&st);
        const float d = ldexpf((z & 4 ? -1.0f : 1.0f) * (1.0f + (float)(z & 3) / 4.0f), e);
        const uint32_t n = cols - c0 < 32 ? cols - c0 : 32, anchor = (uint32_t)(z >> 8) % n;
        for (uint32_t j = 0; j < n; j++) {
          const uint64_t q = j == anchor ? 0 : 1 + splitmix64(&st) % 15;
          o[c0 + j] = d * (float)((int)q - 8);
          if (noise_ > 0.0f) o[c0 + j] += d * noise_ * (2.0f * unit(&st) - 1.0f);
        }
      }
    }
    return GB_OK;
  }

 private:
  static float unit(uint64_t *st) { return (float)(splitmix64(st) >> 40) * (1.0f / 16777216.0f); }  // [0, 1)
  uint64_t seed_;
  const GbxModelDesc &d_;
  bool q4grid_;
  float noise_;
};

}  // namespace

gb_status convert_synthetic(const char *spec, const char *out_path, const ConvertOptions &opt) {
  const Logger &log = opt.log;
  GB_TRY(check_options(opt, "synthetic"));
  GB_RETURN_IF(!out_path, log, GB_ERR_NULL_POINTER, "synthetic: output path is required");
  Spec s;
  std::string name;
  GB_TRY(parse_spec(spec, log, &s, &name));
  GbxModelDesc d;
  d.dim = (uint32_t)s.v[kDim];
  d.n_layers = (uint32_t)s.v[kLayers];
  d.hidden_dim = (uint32_t)s.v[kHidden];
  d.n_heads = (uint32_t)s.v[kHeads];
  d.n_kv_heads = (uint32_t)s.v[kKvHeads];
  d.vocab_size = (uint32_t)s.v[kVocab];
  d.seq_len = (uint32_t)s.v[kSeqLen];
  GB_RETURN_IF(d.n_heads == 0 || d.dim % d.n_heads != 0, log, GB_ERR_INVALID_ARGUMENT,
               "synthetic: dim %u is not a multiple of heads %u", d.dim, d.n_heads);
  d.head_dim = d.dim / d.n_heads;
  d.rope_type = GB_ROPE_ADJACENT;
  d.rope_dim = d.head_dim;
  d.source = kSourceSynthetic;
  d.name = name;
  GB_TRY(check_model_desc(d, log, GB_ERR_INVALID_ARGUMENT, "synthetic"));
  GB_RETURN_IF(d.vocab_size < 259, log, GB_ERR_INVALID_ARGUMENT,
               "synthetic: vocab %u too small (3 special and 256 byte tokens need 259)", d.vocab_size);

  GbxVocab v;
  v.pieces.resize(d.vocab_size);
  v.scores.assign(d.vocab_size, 0.0f);
  v.types.assign(d.vocab_size, kTokNormal);
  v.pieces[0] = "<unk>";
  v.types[0] = kTokUnknown;
  v.pieces[1] = "<s>";
  v.pieces[2] = "</s>";
  v.types[1] = v.types[2] = kTokControl;
  for (uint32_t i = 3; i < d.vocab_size; i++) {
    char buf[32];
    if (i < 259) {
      snprintf(buf, sizeof buf, "<0x%02X>", i - 3);
      v.types[i] = kTokByte;
    } else {
      snprintf(buf, sizeof buf, "tok%u", i);
      v.scores[i] = -(float)(i - 259);  // earlier merges first, as in SentencePiece
    }
    v.pieces[i] = buf;
  }
  ConvertOptions o = opt;
  if (o.embd_format < 0) o.embd_format = kFmtF16;
  SyntheticSource src(s.v[kSeed], d, s.v[kQ4Grid] != 0, (uint32_t)s.v[kNoise]);
  return write_gbx(out_path, d, v, src, o);
}

}  // namespace gb
