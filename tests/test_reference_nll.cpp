// test_reference_nll.cpp — the library's f32 path against an independent,
// straightforward double-precision Llama implementation written here, which
// reads the llama2.c checkpoint itself (no library code involved but the
// tokenizer, which only supplies the token ids both sides score).
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <string>
#include <vector>

#include <gtest/gtest.h>

#include "bytes.h"
#include "format.h"
#include "test_util.h"

namespace {

struct RefModel {
  int dim, hidden, layers, heads, kv_heads, vocab, seq_len, hd;
  bool shared;
  std::vector<double> emb, rms_att, wq, wk, wv, wo, rms_ffn, w1, w2, w3, rms_final, wcls;
};

bool load_llama2c(const std::string &path, RefModel *m) {
  std::vector<uint8_t> f = gbt::read_file(path);
  if (f.size() < 28) return false;
  int32_t h[7];
  memcpy(h, f.data(), 28);
  m->dim = h[0]; m->hidden = h[1]; m->layers = h[2]; m->heads = h[3]; m->kv_heads = h[4];
  m->shared = h[5] > 0; m->vocab = h[5] > 0 ? h[5] : -h[5]; m->seq_len = h[6];
  m->hd = m->dim / m->heads;
  const int kvd = m->kv_heads * m->hd;
  size_t off = 28;
  auto take = [&](std::vector<double> &v, size_t n) {
    v.resize(n);
    for (size_t i = 0; i < n; i++) {
      float x;
      memcpy(&x, &f[off + 4 * i], 4);
      v[i] = x;
    }
    off += 4 * n;
  };
  const size_t L = m->layers, D = m->dim, H = m->hidden;
  take(m->emb, (size_t)m->vocab * D);
  take(m->rms_att, L * D);
  take(m->wq, L * D * D);
  take(m->wk, L * kvd * D);
  take(m->wv, L * kvd * D);
  take(m->wo, L * D * D);
  take(m->rms_ffn, L * D);
  take(m->w1, L * H * D);
  take(m->w2, L * D * H);
  take(m->w3, L * H * D);
  take(m->rms_final, D);
  off += 2 * 4 * (size_t)m->seq_len * (m->hd / 2);  // freq_cis_real / imag: unused here
  if (m->shared) m->wcls = m->emb; else take(m->wcls, (size_t)m->vocab * D);
  return off == f.size();
}

void matvec(std::vector<double> &y, const double *W, const std::vector<double> &x, int rows, int cols) {
  y.assign(rows, 0.0);
  for (int r = 0; r < rows; r++) {
    double a = 0;
    for (int c = 0; c < cols; c++) a += W[(size_t)r * cols + c] * x[c];
    y[r] = a;
  }
}

void rmsnorm(std::vector<double> &o, const std::vector<double> &x, const double *w) {
  double ss = 0;
  for (double v : x) ss += v * v;
  const double s = 1.0 / sqrt(ss / x.size() + 1e-5);
  o.resize(x.size());
  for (size_t i = 0; i < x.size(); i++) o[i] = w[i] * x[i] * s;
}

struct RopeCfg {
  bool neox = false;  // pairs (i, i + rope_dim/2) instead of (2i, 2i+1)
  int rope_dim = 0;   // 0: head_dim
  double theta = 10000.0;
};

// Rotate each head of v (n_heads x hd) by position pos.
void rope_ref(std::vector<double> &v, int n_heads, int hd, const RopeCfg &r, int pos) {
  const int rd = r.rope_dim ? r.rope_dim : hd;
  for (int h = 0; h < n_heads; h++)
    for (int i = 0; i < rd / 2; i++) {
      const double a = pos * pow(r.theta, -2.0 * i / rd);
      const int x0 = h * hd + (r.neox ? i : 2 * i), x1 = h * hd + (r.neox ? i + rd / 2 : 2 * i + 1);
      const double v0 = v[x0], v1 = v[x1];
      v[x0] = v0 * cos(a) - v1 * sin(a);
      v[x1] = v0 * sin(a) + v1 * cos(a);
    }
}

// Mean NLL (nats) of tokens[1..] given the prefix, single context.
double reference_nll(const RefModel &m, const std::vector<int32_t> &tokens, const RopeCfg &rope = RopeCfg()) {
  const int D = m.dim, hd = m.hd, kvd = m.kv_heads * hd, T = (int)tokens.size();
  std::vector<std::vector<double>> kc(m.layers, std::vector<double>((size_t)T * kvd)), vc = kc;
  double nll = 0;
  for (int pos = 0; pos + 1 < T; pos++) {
    std::vector<double> x(m.emb.begin() + (size_t)tokens[pos] * D, m.emb.begin() + (size_t)(tokens[pos] + 1) * D), xb, q, k, v, o, h1, h3,
        t;
    for (int l = 0; l < m.layers; l++) {
      rmsnorm(xb, x, &m.rms_att[(size_t)l * D]);
      matvec(q, &m.wq[(size_t)l * D * D], xb, D, D);
      matvec(k, &m.wk[(size_t)l * kvd * D], xb, kvd, D);
      matvec(v, &m.wv[(size_t)l * kvd * D], xb, kvd, D);
      rope_ref(q, m.heads, hd, rope, pos);
      rope_ref(k, m.kv_heads, hd, rope, pos);
      std::copy(k.begin(), k.end(), kc[l].begin() + (size_t)pos * kvd);
      std::copy(v.begin(), v.end(), vc[l].begin() + (size_t)pos * kvd);
      std::vector<double> att(pos + 1);
      xb.assign(D, 0.0);
      for (int h = 0; h < m.heads; h++) {
        const int kh = h / (m.heads / m.kv_heads);
        double mx = -1e300;
        for (int s = 0; s <= pos; s++) {
          double d = 0;
          for (int i = 0; i < hd; i++) d += q[h * hd + i] * kc[l][(size_t)s * kvd + kh * hd + i];
          att[s] = d / sqrt((double)hd);
          mx = std::max(mx, att[s]);
        }
        double sum = 0;
        for (int s = 0; s <= pos; s++) sum += (att[s] = exp(att[s] - mx));
        for (int s = 0; s <= pos; s++)
          for (int i = 0; i < hd; i++) xb[h * hd + i] += att[s] / sum * vc[l][(size_t)s * kvd + kh * hd + i];
      }
      matvec(o, &m.wo[(size_t)l * D * D], xb, D, D);
      for (int i = 0; i < D; i++) x[i] += o[i];
      rmsnorm(xb, x, &m.rms_ffn[(size_t)l * D]);
      matvec(h1, &m.w1[(size_t)l * m.hidden * D], xb, m.hidden, D);
      matvec(h3, &m.w3[(size_t)l * m.hidden * D], xb, m.hidden, D);
      for (int i = 0; i < m.hidden; i++) h1[i] = h1[i] / (1.0 + exp(-h1[i])) * h3[i];
      matvec(o, &m.w2[(size_t)l * D * m.hidden], h1, D, m.hidden);
      for (int i = 0; i < D; i++) x[i] += o[i];
    }
    rmsnorm(xb, x, m.rms_final.data());
    matvec(t, m.wcls.data(), xb, m.vocab, D);
    double mx = -1e300;
    for (double z : t) mx = std::max(mx, z);
    double s = 0;
    for (double z : t) s += exp(z - mx);
    nll += mx + log(s) - t[tokens[pos + 1]];
  }
  return nll / (T - 1);
}

// Tokens of the first ~1500 bytes of the TinyStories excerpt (BOS first).
std::vector<int32_t> text_tokens(gb_model *m, size_t max_tokens) {
  std::vector<uint8_t> text = gbt::read_file(gbt::shared_path("data/tinystories_valid_excerpt.txt"));
  const size_t len = text.size() < 1500 ? text.size() : 1500;
  std::vector<int32_t> toks(GB_TOKENIZE_CAPACITY(len));
  size_t n = 0;
  if (gb_tokenize(m, (const char *)text.data(), len, GB_TOKENIZE_ADD_BOS, toks.data(), toks.size(), &n) != GB_OK) n = 0;
  toks.resize(n < max_tokens ? n : max_tokens);
  return toks;
}

// Mean NLL of the library's f32 path, teacher-forced over toks.
double library_nll(gb_model *m, const std::vector<int32_t> &toks) {
  gb_session_options o;
  gb_session_options_init(&o);
  o.gear = GB_GEAR_F32;
  gb_session *s = nullptr;
  if (gb_session_create(m, &o, nullptr, 0, &s) != GB_OK) return NAN;
  double nll = 0;
  for (size_t i = 0; i + 1 < toks.size(); i++) {
    gb_step_info info;
    info.struct_size = sizeof info;
    if (gb_feed(s, toks[i], &info) != GB_OK) {
      nll = NAN;
      break;
    }
    double mx = -1e300, sum = 0;
    for (uint32_t j = 0; j < info.n_vocab; j++) mx = std::max(mx, (double)info.logits[j]);
    for (uint32_t j = 0; j < info.n_vocab; j++) sum += exp(info.logits[j] - mx);
    nll += mx + log(sum) - info.logits[toks[i + 1]];
  }
  gb_session_destroy(s);
  return nll / (double)(toks.size() - 1);
}

// Split-half (NeoX) RoPE over part of each head with another base frequency:
// the stories260K .gbx with its META edited (rope_type, rope_dim,
// rope_theta), against the reference with the same settings. The model was
// not trained that way, so only the agreement matters.
TEST(ReferenceNll, NeoxPartialRopeMatchesReference) {
  RefModel ref;
  ASSERT_TRUE(load_llama2c(gbt::shared_path("models/stories260K.bin"), &ref));
  std::vector<uint8_t> img = gbt::read_file(gbt::stories260k_gbx());
  ASSERT_GE(img.size(), 64u);
  const uint32_t ns = gb::ld_u32(&img[16]);
  size_t meta = 0;
  for (uint32_t i = 0; i < ns; i++) {
    const uint8_t *e = &img[64 + 32 * i];
    if (gb::ld_u32(e) == gb::kSecMeta) meta = (size_t)gb::ld_u64(e + 8);
  }
  ASSERT_NE(meta, 0u);
  const RopeCfg rope{true, 4, 500.0};
  gb::st_u32(&img[meta + 40], GB_ROPE_NEOX);
  gb::st_u32(&img[meta + 44], (uint32_t)rope.rope_dim);
  float theta = (float)rope.theta;
  uint32_t tb;
  memcpy(&tb, &theta, 4);
  gb::st_u32(&img[meta + 48], tb);
  gbt::gbx_fix_crcs(img);
  void *buf = nullptr;
  ASSERT_EQ(posix_memalign(&buf, 64, img.size()), 0);
  memcpy(buf, img.data(), img.size());
  gb_model *m = nullptr;
  ASSERT_EQ(gb_model_open_memory(buf, img.size(), nullptr, &m), GB_OK);
  gb_model_info mi;
  mi.struct_size = sizeof mi;
  ASSERT_EQ(gb_model_get_info(m, &mi), GB_OK);
  EXPECT_EQ(mi.rope_type, (uint32_t)GB_ROPE_NEOX);
  EXPECT_EQ(mi.rope_dim, 4u);
  const std::vector<int32_t> toks = text_tokens(m, 200);
  ASSERT_GE(toks.size(), 150u);
  const double nll = library_nll(m, toks), want = reference_nll(ref, toks, rope),
               adjacent = reference_nll(ref, toks, RopeCfg{false, 4, 500.0});
  printf("NeoX rope_dim 4 theta 500: library %.7f, reference %.7f (adjacent pairing would give %.7f)\n", nll, want, adjacent);
  EXPECT_NEAR(nll, want, 1e-4);
  EXPECT_GT(fabs(adjacent - want), 1e-3);  // the pairing matters, so the test can tell them apart
  gb_model_close(m);
  free(buf);
}

TEST(ReferenceNll, F32PathMatchesDoublePrecisionReference) {
  RefModel ref;
  ASSERT_TRUE(load_llama2c(gbt::shared_path("models/stories260K.bin"), &ref));
  gb_model *m = nullptr;
  ASSERT_EQ(gb_model_open_file(gbt::stories260k_gbx().c_str(), nullptr, &m), GB_OK);
  const std::vector<int32_t> toks = text_tokens(m, 400);  // a few hundred tokens
  ASSERT_GE(toks.size(), 300u);
  const double nll = library_nll(m, toks), want = reference_nll(ref, toks);
  printf("tokens %zu: library f32 NLL %.7f, double reference %.7f, diff %.2e nats/token\n", toks.size(), nll, want, fabs(nll - want));
  EXPECT_NEAR(nll, want, 1e-4);
  EXPECT_GT(nll, 0.5);
  EXPECT_LT(nll, 3.0);
  gb_model_close(m);
}

}  // namespace
