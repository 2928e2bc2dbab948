// test_convert.cpp — the converter end to end: llama2.c and GGUF inputs of
// the same model give byte-identical tensor sections, the layout and CRCs
// follow format.h, synthetic tiers agree with each other, quantized GGUF
// tensors pass through unchanged, and a failed conversion leaves an
// existing output untouched.
#include <math.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

#include <string>
#include <vector>

#include <gtest/gtest.h>

#include "bytes.h"
#include "convert.h"
#include "crc32.h"
#include "format.h"
#include "models/arch.h"
#include "gearbx_convert.h"
#include "quant.h"
#include "sample_files.h"
#include "test_util.h"

namespace {

using namespace gb;

struct Sec {
  uint32_t kind;
  uint64_t offset, size;
  uint32_t crc;
};
struct Entry {
  uint32_t kind, layer, tier, fmt, layout, rows, cols, section;
  uint64_t offset, nbytes;
};
struct Gbx {
  bool want_rows16 = true;  // converted with the default q4 layout
  std::vector<uint8_t> b;
  uint32_t page_align = 0;
  std::vector<Sec> secs;
  std::vector<Entry> tensors;
  const Sec *sec(uint32_t kind) const {
    for (const Sec &s : secs)
      if (s.kind == kind) return &s;
    return nullptr;
  }
  const uint8_t *meta() const { return b.data() + sec(kSecMeta)->offset; }
  const Entry *find(uint32_t kind, uint32_t layer, uint32_t tier) const {
    for (const Entry &e : tensors)
      if (e.kind == kind && e.layer == layer && e.tier == tier) return &e;
    return nullptr;
  }
  const uint8_t *data(const Entry &e) const { return b.data() + secs[e.section].offset + e.offset; }
  std::vector<uint8_t> section_bytes(uint32_t kind) const {
    const Sec *s = sec(kind);
    return s ? std::vector<uint8_t>(b.begin() + (long)s->offset, b.begin() + (long)(s->offset + s->size)) : std::vector<uint8_t>();
  }
};

// Parse with gtest assertions on everything format.h promises.
void load(const std::string &path, Gbx *g) {
  g->b = gbt::read_file(path);
  const std::vector<uint8_t> &b = g->b;
  ASSERT_GE(b.size(), 64u);
  ASSERT_EQ(memcmp(b.data(), kGbxMagic, 8), 0);
  EXPECT_EQ(ld_u32(&b[8]), kGbxVersion);
  const uint32_t n = ld_u32(&b[16]), hb = ld_u32(&b[12]);
  ASSERT_EQ(hb, kHeaderFixedBytes + n * kSectionEntryBytes);
  g->page_align = ld_u32(&b[20]);
  EXPECT_EQ(ld_u64(&b[24]), b.size());
  EXPECT_EQ(ld_u32(&b[32]), 0u);
  std::vector<uint8_t> h(b.begin(), b.begin() + hb);
  st_u32(&h[36], 0);
  EXPECT_EQ(crc32_update(0, h.data(), h.size()), ld_u32(&b[36])) << "header CRC";
  for (size_t i = 40; i < 64; i++) EXPECT_EQ(b[i], 0) << "reserved header byte " << i;
  uint64_t prev_end = hb;
  for (uint32_t i = 0; i < n; i++) {
    const uint8_t *e = &b[kHeaderFixedBytes + i * kSectionEntryBytes];
    Sec s{ld_u32(e), ld_u64(e + 8), ld_u64(e + 16), ld_u32(e + 24)};
    ASSERT_TRUE(in_range(s.offset, s.size, b.size()));
    const bool data = s.kind == kSecCommon || s.kind >= kSecGearBase;
    EXPECT_EQ(s.offset % (data ? g->page_align : kMetaAlign), 0u) << "section " << i;
    EXPECT_GE(s.offset, prev_end);
    for (uint64_t k = prev_end; k < s.offset; k++) ASSERT_EQ(b[k], 0) << "gap before section " << i;
    prev_end = s.offset + s.size;
    EXPECT_EQ(crc32_update(0, b.data() + s.offset, s.size), s.crc) << "CRC of section " << i;
    g->secs.push_back(s);
  }
  EXPECT_EQ(prev_end, b.size());
  const Sec *t = g->sec(kSecTensors);
  ASSERT_NE(t, nullptr);
  const uint8_t *p = b.data() + t->offset;
  const uint32_t nt = ld_u32(p);
  ASSERT_EQ(ld_u32(p + 4), kTensorEntryBytes);
  ASSERT_EQ(t->size, 16 + (uint64_t)nt * kTensorEntryBytes);
  for (uint32_t i = 0; i < nt; i++) {
    const uint8_t *e = p + 16 + i * kTensorEntryBytes;
    Entry x{ld_u32(e), ld_u32(e + 4), ld_u32(e + 8), ld_u32(e + 12), ld_u32(e + 16), ld_u32(e + 20), ld_u32(e + 24),
            ld_u32(e + 28), ld_u64(e + 32), ld_u64(e + 40)};
    ASSERT_LT(x.section, g->secs.size());
    EXPECT_EQ(x.offset % 64, 0u);
    // The default conversion interleaves the low tier's q4 matrices by 16
    // rows wherever the row count allows; nothing else.
    const bool r16 = x.tier == GB_GEAR_LOW && x.fmt == kFmtQ4 && x.rows % 16 == 0;
    EXPECT_EQ(x.layout, g->want_rows16 && r16 ? (uint32_t)kLayoutRows16 : (uint32_t)kLayoutRowMajor)
        << "tensor " << i << " kind " << x.kind << " tier " << x.tier << " rows " << x.rows;
    EXPECT_EQ(x.nbytes, (uint64_t)x.rows * row_bytes(x.fmt, x.cols));
    EXPECT_TRUE(in_range(x.offset, x.nbytes, g->secs[x.section].size));
    g->tensors.push_back(x);
  }
  // The tests below read rows in row-major order: undo the interleave in
  // the in-memory copy (the CRCs above were checked on the file's bytes).
  for (const Entry &x : g->tensors)
    if (x.layout == kLayoutRows16) {
      uint8_t *d = g->b.data() + g->secs[x.section].offset + x.offset;
      std::vector<uint8_t> ilv(d, d + x.nbytes);
      q4_rows_from_rows16(d, ilv.data(), x.rows, x.cols);
    }
}

ConvertOptions quiet_opts() {
  ConvertOptions o;
  o.page_align = 4096;
  o.log.fn = gbt::quiet_log;
  return o;
}

std::string tmp(const char *name) { return gbt::temp_dir() + "/conv-" + name; }
bool exists(const std::string &p) { return access(p.c_str(), F_OK) == 0; }

const std::string &l2c_out() {
  static std::string p;
  if (p.empty()) {
    p = tmp("l2c.gbx");
    EXPECT_EQ(convert_llama2c(gbt::shared_path("models/stories260K.bin").c_str(), gbt::shared_path("models/tok512.bin").c_str(),
                              p.c_str(), quiet_opts()),
              GB_OK);
  }
  return p;
}
const std::string &gguf_out() {
  static std::string p;
  if (p.empty()) {
    p = tmp("gguf.gbx");
    EXPECT_EQ(convert_gguf(gbt::shared_path("models/stories260K.gguf").c_str(), p.c_str(), quiet_opts()), GB_OK);
  }
  return p;
}

TEST(Convert, Llama2cAndGgufGiveIdenticalTensorSections) {
  Gbx a, b;
  ASSERT_NO_FATAL_FAILURE(load(l2c_out(), &a));
  ASSERT_NO_FATAL_FAILURE(load(gguf_out(), &b));
  ASSERT_EQ(a.secs.size(), 8u);
  ASSERT_EQ(b.secs.size(), 9u);  // and the GGUF's TOKENIZER
  EXPECT_EQ(a.sec(kSecTokenizer), nullptr);
  ASSERT_NE(b.sec(kSecTokenizer), nullptr);
  const uint32_t kinds[] = {kSecCommon, kSecGearBase + 0, kSecGearBase + 1, kSecGearBase + 2, kSecGearBase + 3};
  for (uint32_t k : kinds) {
    ASSERT_NE(a.sec(k), nullptr) << k;
    EXPECT_TRUE(a.section_bytes(k) == b.section_bytes(k)) << "section kind " << k << " differs";
  }
  // The tensor tables agree entry by entry; each names its section by index,
  // which the TOKENIZER shifts by one: compare the kinds they point at.
  ASSERT_EQ(a.tensors.size(), b.tensors.size());
  for (size_t i = 0; i < a.tensors.size(); i++) {
    const Entry &x = a.tensors[i], &y = b.tensors[i];
    EXPECT_TRUE(x.kind == y.kind && x.layer == y.layer && x.tier == y.tier && x.fmt == y.fmt && x.layout == y.layout &&
                x.rows == y.rows && x.cols == y.cols && x.offset == y.offset && x.nbytes == y.nbytes)
        << "tensor " << i;
    EXPECT_EQ(a.secs[x.section].kind, b.secs[y.section].kind) << "tensor " << i;
  }
  // Hyper-parameters agree; only the name, the source, the classifier flag
  // (GGUF stores output.weight) and the context length differ.
  for (int off = 8; off < 36; off += 4) EXPECT_EQ(ld_u32(a.meta() + off), ld_u32(b.meta() + off)) << "META +" << off;
  for (int off = 40; off < 72; off += 4) EXPECT_EQ(ld_u32(a.meta() + off), ld_u32(b.meta() + off)) << "META +" << off;
  EXPECT_EQ(ld_u32(a.meta() + 36), 512u);   // llama2.c seq_len
  EXPECT_EQ(ld_u32(b.meta() + 36), 2048u);  // llama.context_length
  EXPECT_EQ(ld_u32(a.meta() + 72), 1u);
  EXPECT_EQ(ld_u32(b.meta() + 72), 0u);
  EXPECT_EQ(ld_u32(a.meta() + 76), (uint32_t)kSourceLlama2c);
  EXPECT_EQ(ld_u32(b.meta() + 76), (uint32_t)kSourceGguf);
  EXPECT_STREQ((const char *)a.meta() + 80, "stories260K");
}

TEST(Convert, MetaAndDirectoryFollowTheFormat) {
  Gbx g;
  ASSERT_NO_FATAL_FAILURE(load(l2c_out(), &g));
  const uint8_t *m = g.meta();
  EXPECT_EQ(ld_u32(m), kMetaBytes);
  EXPECT_EQ(ld_u32(m + 4), gb::arch_by_name("llama")->id);
  const uint32_t want[] = {64, 172, 5, 8, 4, 8, 512, 512, 0, 8};  // dim .. rope_dim
  for (int i = 0; i < 10; i++) EXPECT_EQ(ld_u32(m + 8 + 4 * i), want[i]) << "META field " << i;
  EXPECT_FLOAT_EQ(ld_f32(m + 48), 10000.0f);
  EXPECT_FLOAT_EQ(ld_f32(m + 52), 1e-5f);
  EXPECT_EQ(ld_i32(m + 56), 1);
  EXPECT_EQ(ld_i32(m + 60), 2);
  EXPECT_EQ(ld_i32(m + 64), 0);
  EXPECT_EQ(ld_i32(m + 68), -1);
  // Version 3: default gear mid; tiers rounded once from float weights,
  // the f32 tier the source's own values; not a quantized source.
  EXPECT_EQ(ld_u32(m + 144), (uint32_t)GB_GEAR_MID);
  const uint8_t origin[4] = {GB_TIER_ORIGIN_ROUNDED, GB_TIER_ORIGIN_ROUNDED, GB_TIER_ORIGIN_ROUNDED, GB_TIER_ORIGIN_SOURCE};
  for (int t = 0; t < 4; t++) EXPECT_EQ(m[148 + t], origin[t]) << "tier " << t;
  EXPECT_EQ(ld_u32(m + 152), 0u);
  // Version 5: no NoPE layers; version 6: no trained context of its own (no
  // long RoPE factors), the rotation unscaled.
  EXPECT_EQ(ld_u32(m + 156), 0u);
  EXPECT_EQ(ld_u32(m + 160), 0u);
  EXPECT_EQ(ld_f32(m + 164), 1.0f);
  // Version 7: no sliding window, the embedding unscaled, logits uncapped,
  // a SwiGLU FFN.
  EXPECT_EQ(ld_u32(m + 168), 0u);
  EXPECT_EQ(ld_u32(m + 172), 0u);
  EXPECT_EQ(ld_f32(m + 176), 0.0f);
  EXPECT_EQ(ld_f32(m + 180), 1.0f);
  EXPECT_EQ(ld_f32(m + 184), 0.0f);
  EXPECT_EQ(ld_u32(m + 188), (uint32_t)kFfnSilu);
  for (uint32_t i = 192; i < kMetaBytes; i++) ASSERT_EQ(m[i], 0);
  // Section order, then the directory: COMMON first, then each tier in order.
  const uint32_t order[] = {kSecMeta, kSecVocab, kSecTensors, kSecCommon, 32, 33, 34, 35};
  for (size_t i = 0; i < 8; i++) EXPECT_EQ(g.secs[i].kind, order[i]);
  ASSERT_EQ(g.tensors.size(), 1 + 2 * 5 + 1 + 4 * (5 * 7 + 1));
  EXPECT_EQ(g.tensors[0].kind, (uint32_t)kTokEmbd);
  EXPECT_EQ(g.tensors[0].fmt, (uint32_t)kFmtF32);
  EXPECT_EQ(g.tensors[0].tier, kTierCommon);
  EXPECT_EQ(g.tensors[11].kind, (uint32_t)kOutNorm);
  size_t i = 12;
  const uint32_t fmts[4] = {kFmtQ4, kFmtQ8, kFmtF16, kFmtF32};
  for (uint32_t gear = 0; gear < 4; gear++) {
    for (uint32_t l = 0; l < 5; l++)
      for (uint32_t k : kLayerMatrices) {
        const Entry &e = g.tensors[i++];
        EXPECT_EQ(e.kind, k);
        EXPECT_EQ(e.layer, l);
        EXPECT_EQ(e.tier, gear);
        EXPECT_EQ(e.fmt, fmts[gear]);
        EXPECT_EQ(e.section, 4 + gear);
      }
    const Entry &c = g.tensors[i++];
    EXPECT_EQ(c.kind, (uint32_t)kClassifier);
    EXPECT_EQ(c.rows, 512u);
    EXPECT_EQ(c.cols, 64u);
  }
  // Shapes, including the w2 whose rows are not a multiple of 32 wide.
  const Entry *w2 = g.find(kW2, 3, 0);
  ASSERT_NE(w2, nullptr);
  EXPECT_EQ(w2->rows, 64u);
  EXPECT_EQ(w2->cols, 172u);
  EXPECT_EQ(w2->nbytes, 64u * 6 * kQ4BlockBytes);
  EXPECT_EQ(g.find(kWk, 0, 2)->rows, 32u);
  EXPECT_EQ(g.find(kWo, 0, 2)->cols, 64u);
}

TEST(Convert, Llama2cTensorsMatchTheCheckpoint) {
  Gbx g;
  ASSERT_NO_FATAL_FAILURE(load(l2c_out(), &g));
  const std::vector<uint8_t> ck = gbt::read_file(gbt::shared_path("models/stories260K.bin"));
  ASSERT_EQ(ck.size(), 1056540u);
  const uint64_t embd = 28, wq = 28 + 4 * (512 * 64 + 5 * 64);
  const Entry *e = g.find(kTokEmbd, 0, kTierCommon);
  EXPECT_EQ(memcmp(g.data(*e), &ck[embd], 512 * 64 * 4), 0);
  const Entry *q2 = g.find(kWq, 2, GB_GEAR_F32);
  EXPECT_EQ(memcmp(g.data(*q2), &ck[wq + 2 * 64 * 64 * 4], 64 * 64 * 4), 0);
  // Shared classifier: each tier holds the embedding in that tier's format.
  EXPECT_EQ(memcmp(g.data(*g.find(kClassifier, 0, GB_GEAR_F32)), &ck[embd], 512 * 64 * 4), 0);
  std::vector<float> row(64);
  std::vector<uint8_t> q(row_bytes(kFmtQ4, 64));
  for (uint32_t r = 0; r < 512; r += 97) {
    for (int c = 0; c < 64; c++) row[c] = ld_f32(&ck[embd + (r * 64 + c) * 4]);
    quantize_row_q4(q.data(), row.data(), 64);
    const Entry *cls = g.find(kClassifier, 0, GB_GEAR_LOW);
    EXPECT_EQ(memcmp(g.data(*cls) + r * q.size(), q.data(), q.size()), 0) << "row " << r;
  }
}

struct VocabView {
  uint32_t n;
  std::vector<std::string> pieces;
  std::vector<uint8_t> types;
  std::vector<float> scores;
};
VocabView vocab_of(const Gbx &g) {
  const uint8_t *p = g.b.data() + g.sec(kSecVocab)->offset;
  VocabView v;
  v.n = ld_u32(p);
  const uint8_t *scores = p + 16, *offs = scores + 4 * v.n, *types = offs + 4 * (v.n + 1);
  const uint8_t *blob = types + (v.n + 3) / 4 * 4;
  for (uint32_t i = 0; i < v.n; i++) {
    const uint32_t a = ld_u32(offs + 4 * i), b = ld_u32(offs + 4 * i + 4);
    v.pieces.emplace_back((const char *)blob + a, b - a);
    v.types.push_back(types[i]);
    v.scores.push_back(ld_f32(scores + 4 * i));
  }
  return v;
}

TEST(Convert, VocabularyTypesAndSpaces) {
  Gbx a, b;
  ASSERT_NO_FATAL_FAILURE(load(l2c_out(), &a));
  ASSERT_NO_FATAL_FAILURE(load(gguf_out(), &b));
  const VocabView va = vocab_of(a), vb = vocab_of(b);
  ASSERT_EQ(va.n, 512u);
  ASSERT_EQ(vb.n, 512u);
  EXPECT_EQ(va.types[0], kTokUnknown);
  EXPECT_EQ(va.types[1], kTokControl);
  EXPECT_EQ(va.types[2], kTokControl);
  EXPECT_EQ(va.pieces[1], "\n<s>\n");
  for (int i = 3; i < 259; i++) EXPECT_EQ(va.types[i], kTokByte) << i;
  EXPECT_EQ(va.pieces[3 + 0x41], "<0x41>");
  for (int i = 259; i < 512; i++) EXPECT_EQ(va.types[i], kTokNormal) << i;
  // GGUF: types from token_type, U+2581 replaced by ' ', same merges.
  EXPECT_EQ(vb.types[0], kTokUnknown);
  EXPECT_EQ(vb.types[1], kTokControl);
  EXPECT_EQ(vb.pieces[1], "<s>");
  size_t with_space = 0;
  for (uint32_t i = 3; i < 512; i++) {
    EXPECT_EQ(vb.pieces[i].find("\xE2\x96\x81"), std::string::npos) << i;
    EXPECT_EQ(va.pieces[i], vb.pieces[i]) << i;
    EXPECT_EQ(va.types[i], vb.types[i]) << i;
    with_space += vb.pieces[i].find(' ') != std::string::npos;
  }
  EXPECT_GT(with_space, 50u);
  const uint8_t *p = a.b.data() + a.sec(kSecVocab)->offset;
  uint32_t longest = 0;
  for (const std::string &s : va.pieces) longest = s.size() > longest ? (uint32_t)s.size() : longest;
  EXPECT_EQ(ld_u32(p + 4), longest);
}

TEST(Convert, ConvertedFilesOpenWithFullVerification) {
  for (const std::string &path : {l2c_out(), gguf_out()}) {
    gb_model_options o = gbt::quiet_model_options();
    gb_model *m = nullptr;
    ASSERT_EQ(gb_model_open_file(path.c_str(), &o, &m), GB_OK) << path;
    gb_model_info info;
    info.struct_size = sizeof info;
    ASSERT_EQ(gb_model_get_info(m, &info), GB_OK);
    EXPECT_EQ(info.gears, 0xFu);
    EXPECT_EQ(info.vocab_size, 512u);
    gb_model_close(m);
  }
}

const char kTinySpec[] = "dim=64,layers=2,hidden=100,heads=4,kv_heads=2,vocab=300,seed=5,seq_len=64";

// Relative RMS error of one tier's tensor against the f32 tier's.
double rel_err(const Gbx &g, const Entry &t, const Entry &ref) {
  std::vector<float> x(t.cols), y(t.cols);
  double num = 0, den = 0;
  for (uint32_t r = 0; r < t.rows; r++) {
    dequantize_row(t.fmt, x.data(), g.data(t) + r * row_bytes(t.fmt, t.cols), t.cols);
    dequantize_row(kFmtF32, y.data(), g.data(ref) + r * row_bytes(kFmtF32, t.cols), t.cols);
    for (uint32_t c = 0; c < t.cols; c++) {
      num += (double)(x[c] - y[c]) * (x[c] - y[c]);
      den += (double)y[c] * y[c];
    }
  }
  return sqrt(num / den);
}

TEST(Convert, SyntheticTiersAgree) {
  const std::string out = tmp("synth.gbx");
  ConvertOptions o = quiet_opts();
  ASSERT_EQ(convert_synthetic(kTinySpec, out.c_str(), o), GB_OK);
  Gbx g;
  ASSERT_NO_FATAL_FAILURE(load(out, &g));
  EXPECT_EQ(g.find(kTokEmbd, 0, kTierCommon)->fmt, (uint32_t)kFmtF16);  // synthetic default
  EXPECT_EQ(ld_u32(g.meta() + 76), (uint32_t)kSourceSynthetic);
  EXPECT_EQ(ld_u32(g.meta() + 36), 64u);
  const double limit[3] = {0.12, 0.01, 0.001};  // q4, q8, f16
  for (const Entry &t : g.tensors) {
    if (t.tier >= GB_GEAR_F32) continue;
    const Entry *ref = g.find(t.kind, t.layer, GB_GEAR_F32);
    ASSERT_NE(ref, nullptr);
    EXPECT_LT(rel_err(g, t, *ref), limit[t.tier]) << "kind " << t.kind << " layer " << t.layer << " tier " << t.tier;
    EXPECT_GT(rel_err(g, t, *ref), 0.0) << "tier " << t.tier;
  }
  // Weights lie in [-1/sqrt(cols), 1/sqrt(cols)]; norms are 1.
  const Entry *w2 = g.find(kW2, 1, GB_GEAR_F32);
  float lo = 1, hi = -1;
  for (uint64_t i = 0; i < (uint64_t)w2->rows * w2->cols; i++) {
    const float v = ld_f32(g.data(*w2) + 4 * i);
    lo = v < lo ? v : lo;
    hi = v > hi ? v : hi;
  }
  EXPECT_LE(hi, 0.1f);
  EXPECT_GE(lo, -0.1f);
  EXPECT_GT(hi, 0.09f);
  EXPECT_EQ(ld_f32(g.data(*g.find(kAttnNorm, 1, kTierCommon))), 1.0f);
  const VocabView v = vocab_of(g);
  EXPECT_EQ(v.pieces[0], "<unk>");
  EXPECT_EQ(v.types[2], kTokControl);
  EXPECT_EQ(v.pieces[3 + 255], "<0xFF>");
  EXPECT_EQ(v.types[258], kTokByte);
  EXPECT_EQ(v.pieces[299], "tok299");
  EXPECT_GT(v.scores[260], v.scores[299]);
}

TEST(Convert, SyntheticIsDeterministicPerSeed) {
  ConvertOptions o = quiet_opts();
  o.tiers = 1u << GB_GEAR_LOW;
  const std::string a = tmp("det-a.gbx"), b = tmp("det-b.gbx"), c = tmp("det-c.gbx");
  ASSERT_EQ(convert_synthetic(kTinySpec, a.c_str(), o), GB_OK);
  ASSERT_EQ(convert_synthetic(kTinySpec, b.c_str(), o), GB_OK);
  ASSERT_EQ(convert_synthetic("dim=64,layers=2,hidden=100,heads=4,kv_heads=2,vocab=300,seed=6,seq_len=64", c.c_str(), o), GB_OK);
  EXPECT_TRUE(gbt::read_file(a) == gbt::read_file(b));
  EXPECT_FALSE(gbt::read_file(a) == gbt::read_file(c));
  Gbx g;
  ASSERT_NO_FATAL_FAILURE(load(a, &g));
  ASSERT_EQ(g.secs.size(), 5u);  // META VOCAB TENSORS COMMON GEAR_LOW
  EXPECT_EQ(g.secs[4].kind, kSecGearBase + GB_GEAR_LOW);
}

// q4grid = 1: the low tier (q4, and the q4r16 it is stored as) expands to
// exactly the high tier's fp16 weights and the f32 tier's floats; noise moves
// the high tier off the grid by at most noise/1000 of a block's step.
TEST(Convert, SyntheticQ4GridLowEqualsHigh) {
  for (const int noise : {0, 200}) {
    const std::string out = tmp(noise ? "grid-noise.gbx" : "grid.gbx");
    ConvertOptions o = quiet_opts();
    const std::string spec = std::string(kTinySpec) + ",q4grid=1,noise=" + std::to_string(noise);
    ASSERT_EQ(convert_synthetic(spec.c_str(), out.c_str(), o), GB_OK);
    Gbx g;
    ASSERT_NO_FATAL_FAILURE(load(out, &g));
    int compared = 0;
    for (const Entry &t : g.tensors) {
      if (t.tier != GB_GEAR_LOW) continue;
      const Entry *hi = g.find(t.kind, t.layer, GB_GEAR_HIGH), *f = g.find(t.kind, t.layer, GB_GEAR_F32);
      ASSERT_TRUE(hi && f);
      std::vector<uint8_t> rowmajor;
      const uint8_t *lo = g.data(t);
      if (t.fmt == kFmtQ4R16) {
        rowmajor.resize((size_t)t.rows * row_bytes(kFmtQ4, t.cols));
        q4_rows_from_rows16(rowmajor.data(), lo, t.rows, t.cols);
        lo = rowmajor.data();
      } else {
        ASSERT_EQ(t.fmt, (uint32_t)kFmtQ4);
      }
      std::vector<float> a(t.cols), b(t.cols), c(t.cols);
      double max_off = 0, step = 0;
      for (uint32_t r = 0; r < t.rows; r++) {
        dequantize_row(kFmtQ4, a.data(), lo + r * row_bytes(kFmtQ4, t.cols), t.cols);
        dequantize_row(kFmtF16, b.data(), g.data(*hi) + r * row_bytes(kFmtF16, t.cols), t.cols);
        dequantize_row(kFmtF32, c.data(), g.data(*f) + r * row_bytes(kFmtF32, t.cols), t.cols);
        for (uint32_t j = 0; j < t.cols; j++) {
          if (noise == 0) {
            ASSERT_EQ(a[j], b[j]) << "kind " << t.kind << " row " << r << " col " << j;
            ASSERT_EQ(a[j], c[j]) << "kind " << t.kind << " row " << r << " col " << j;
          }
          max_off = fmax(max_off, fabs((double)a[j] - b[j]));
          step = fmax(step, fabs((double)a[j]) / 8);
        }
      }
      if (noise) {
        EXPECT_GT(max_off, 0.0) << "kind " << t.kind;
        EXPECT_LT(max_off, 0.5 * step) << "kind " << t.kind;  // within the noise (+-0.2 d) plus d's shift
      }
      compared++;
    }
    EXPECT_GE(compared, 7 * 2 + 1) << "every matrix of every layer and the classifier";
  }
}

TEST(Convert, SyntheticSpecErrors) {
  const std::string out = tmp("bad-spec.gbx");
  const char *bad[] = {"",
                       "tinyllama-7b",
                       "dim=64,layers=2,hidden=100,heads=4,kv_heads=2",               // no vocab
                       "dim=64,layers=2,hidden=100,heads=4,kv_heads=2,vocab=300,x=1",  // unknown key
                       "dim=6x4,layers=2,hidden=100,heads=4,kv_heads=2,vocab=300",     // bad number
                       "dim=-64,layers=2,hidden=100,heads=4,kv_heads=2,vocab=300",
                       "dim=64,layers=2,hidden=100,heads=5,kv_heads=1,vocab=300",      // dim % heads
                       "dim=64,layers=2,hidden=100,heads=4,kv_heads=3,vocab=300",      // heads % kv_heads
                       "dim=64,layers=0,hidden=100,heads=4,kv_heads=2,vocab=300",
                       "dim=64,layers=2,hidden=100,heads=4,kv_heads=2,vocab=100",      // < 259
                       "dim=64,layers=2,hidden=100,heads=4,kv_heads=2,vocab=300,seq_len=99999999999",
                       "dim=64,layers=2,hidden=100,heads=4,kv_heads=2,vocab=300,tinyllama-1.1b",
                       "dim=64,layers=2,hidden=100,heads=4,kv_heads=2,vocab=300,q4grid=2",
                       "dim=64,layers=2,hidden=100,heads=4,kv_heads=2,vocab=300,q4grid=1,noise=100001"};
  for (const char *spec : bad) {
    EXPECT_EQ(convert_synthetic(spec, out.c_str(), quiet_opts()), GB_ERR_INVALID_ARGUMENT) << spec;
    EXPECT_FALSE(exists(out)) << spec;
    EXPECT_FALSE(exists(out + ".tmp")) << spec;
  }
  EXPECT_EQ(convert_synthetic(nullptr, out.c_str(), quiet_opts()), GB_ERR_INVALID_ARGUMENT);
}

// Logits of `steps` greedy low-gear steps after a prompt (batched prefill,
// then one-token decoding).
std::vector<float> low_gear_logits(const std::string &path, uint32_t steps) {
  std::vector<float> out;
  gb_model *m = nullptr;
  gb_model_options mo = gbt::quiet_model_options();
  EXPECT_EQ(gb_model_open_file(path.c_str(), &mo, &m), GB_OK);
  if (!m) return out;
  gb_session_options o;
  gb_session_options_init(&o);
  o.log = gbt::quiet_log;
  o.gear = GB_GEAR_LOW;
  o.sampler.temperature = 0.0f;
  gb_session *s = nullptr;
  EXPECT_EQ(gb_session_create(m, &o, nullptr, 0, &s), GB_OK);
  const int32_t prompt[6] = {1, 17, 42, 7, 99, 3};
  if (s && gb_prefill(s, prompt, 6) == GB_OK) {
    for (uint32_t i = 0; i < steps; i++) {
      gb_step_info info;
      info.struct_size = sizeof info;
      int32_t tok = -1;
      if (gb_decode_step(s, &tok, &info) != GB_OK) break;
      out.insert(out.end(), info.logits, info.logits + info.n_vocab);
    }
  }
  gb_session_destroy(s);
  gb_model_close(m);
  return out;
}

// --q4-layout: the 16-row interleaved low tier holds the row-major tier's
// bytes in another order (matrices whose row count is not a multiple of 16
// stay row-major: this model has both), and decodes to identical logits.
TEST(Convert, Q4LayoutsHoldTheSameWeightsAndDecodeIdentically) {
  const std::string a = tmp("ilv.gbx"), b = tmp("rowmajor.gbx");
  ConvertOptions o = quiet_opts();
  ASSERT_EQ(convert_synthetic(kTinySpec, a.c_str(), o), GB_OK);
  o.q4_layout = kLayoutRowMajor;
  ASSERT_EQ(convert_synthetic(kTinySpec, b.c_str(), o), GB_OK);
  Gbx ga, gr;
  gr.want_rows16 = false;
  load(a, &ga);
  load(b, &gr);
  uint32_t interleaved = 0, plain = 0;
  for (const Entry &e : ga.tensors)
    if (e.tier == GB_GEAR_LOW) (e.layout == kLayoutRows16 ? interleaved : plain)++;
  EXPECT_GT(interleaved, 0u);
  EXPECT_GT(plain, 0u);
  EXPECT_TRUE(ga.section_bytes(kSecGearBase + GB_GEAR_LOW) == gr.section_bytes(kSecGearBase + GB_GEAR_LOW));
  const std::vector<float> la = low_gear_logits(a, 12), lr = low_gear_logits(b, 12);
  ASSERT_EQ(la.size(), (size_t)12 * 300);
  ASSERT_EQ(la.size(), lr.size());
  EXPECT_EQ(0, memcmp(la.data(), lr.data(), la.size() * sizeof(float)));
}

TEST(Convert, OptionsAreValidated) {
  const std::string out = tmp("bad-opt.gbx");
  ConvertOptions o = quiet_opts();
  o.tiers = 0x10;
  EXPECT_EQ(convert_synthetic(kTinySpec, out.c_str(), o), GB_ERR_INVALID_ARGUMENT);
  o = quiet_opts();
  o.page_align = 100;
  EXPECT_EQ(convert_gguf(gbt::shared_path("models/stories260K.gguf").c_str(), out.c_str(), o), GB_ERR_INVALID_ARGUMENT);
  o = quiet_opts();
  o.q4_layout = kLayoutCount;
  EXPECT_EQ(convert_synthetic(kTinySpec, out.c_str(), o), GB_ERR_INVALID_ARGUMENT);
  o = quiet_opts();
  o.embd_format = kFmtQ4;
  EXPECT_EQ(convert_llama2c(gbt::shared_path("models/stories260K.bin").c_str(), gbt::shared_path("models/tok512.bin").c_str(),
                            out.c_str(), o),
            GB_ERR_INVALID_ARGUMENT);
  EXPECT_FALSE(exists(out));
  EXPECT_EQ(convert_gguf(nullptr, out.c_str(), quiet_opts()), GB_ERR_NULL_POINTER);
}

// The tools interface (gearbx_convert.h): defaults, NULL options, and a
// status with a log line for every option out of range, before any file is
// written.
TEST(Convert, ToolsInterfaceChecksItsOptions) {
  const std::string out = tmp("tools-api.gbx");
  gb_convert_options o;
  gb_convert_default_options(&o);
  EXPECT_EQ(o.tiers, 0u);
  EXPECT_EQ(o.embd, GB_CONVERT_EMBD_AUTO);
  EXPECT_EQ(o.q4_layout, GB_CONVERT_Q4_ROWS16);
  EXPECT_EQ(o.log_level, GB_LOG_WARN);
  gb_convert_default_options(nullptr);  // no effect, no crash
  std::string logged;  // every line, appended
  o.log = [](void *u, gb_log_level, const char *msg) { *static_cast<std::string *>(u) += std::string(msg) + "\n"; };
  o.log_user = &logged;
  const gb_convert_options good = o;
  o.tiers = 1u << GB_GEAR_COUNT;
  EXPECT_EQ(gb_convert_synthetic(kTinySpec, out.c_str(), &o), GB_ERR_INVALID_ARGUMENT);
  EXPECT_NE(logged.find("tiers"), std::string::npos) << logged;
  o = good;
  const int bad_embd = 7, bad_layout = -1;  // as a C caller may store them
  memcpy(&o.embd, &bad_embd, sizeof bad_embd);
  EXPECT_EQ(gb_convert_synthetic(kTinySpec, out.c_str(), &o), GB_ERR_INVALID_ARGUMENT);
  EXPECT_NE(logged.find("embd 7"), std::string::npos) << logged;
  o = good;
  memcpy(&o.q4_layout, &bad_layout, sizeof bad_layout);
  EXPECT_EQ(gb_convert_gguf(gbt::shared_path("models/stories260K.gguf").c_str(), out.c_str(), &o), GB_ERR_INVALID_ARGUMENT);
  EXPECT_NE(logged.find("q4_layout -1"), std::string::npos) << logged;
  o = good;
  o.page_align = 96;
  EXPECT_EQ(gb_convert_llama2c(gbt::shared_path("models/stories260K.bin").c_str(), gbt::shared_path("models/tok512.bin").c_str(),
                               out.c_str(), &o),
            GB_ERR_INVALID_ARGUMENT);
  EXPECT_NE(logged.find("page_align 96"), std::string::npos) << logged;
  EXPECT_FALSE(exists(out));
  EXPECT_EQ(gb_convert_gguf(nullptr, out.c_str(), &good), GB_ERR_NULL_POINTER);
  EXPECT_EQ(gb_convert_synthetic(kTinySpec, nullptr, &good), GB_ERR_NULL_POINTER);
  // Good options (and NULL options: the defaults) convert; the two files agree.
  o = good;
  o.tiers = 1u << GB_GEAR_LOW;
  ASSERT_EQ(gb_convert_synthetic(kTinySpec, out.c_str(), &o), GB_OK);
  Gbx g;
  ASSERT_NO_FATAL_FAILURE(load(out, &g));
  ASSERT_EQ(g.secs.back().kind, kSecGearBase + GB_GEAR_LOW);
  const std::string out2 = tmp("tools-api-defaults.gbx");
  ASSERT_EQ(gb_convert_synthetic(kTinySpec, out2.c_str(), nullptr), GB_OK);
  Gbx d;
  ASSERT_NO_FATAL_FAILURE(load(out2, &d));
  EXPECT_EQ(d.secs.size(), g.secs.size() + 3);  // low, mid, high and f32
  unlink(out.c_str());
  unlink(out2.c_str());
}

TEST(Convert, EmbeddingFormatAndPageAlignOptions) {
  const std::string out = tmp("embd16.gbx");
  ConvertOptions o = quiet_opts();
  o.embd_format = kFmtF16;
  o.page_align = 64;
  o.tiers = (1u << GB_GEAR_MID) | (1u << GB_GEAR_HIGH);
  ASSERT_EQ(convert_llama2c(gbt::shared_path("models/stories260K.bin").c_str(), gbt::shared_path("models/tok512.bin").c_str(),
                            out.c_str(), o),
            GB_OK);
  Gbx g;
  ASSERT_NO_FATAL_FAILURE(load(out, &g));
  EXPECT_EQ(g.page_align, 64u);
  EXPECT_EQ(g.find(kTokEmbd, 0, kTierCommon)->fmt, (uint32_t)kFmtF16);
  ASSERT_EQ(g.secs.size(), 6u);
  EXPECT_EQ(g.secs[4].kind, kSecGearBase + GB_GEAR_MID);
  EXPECT_EQ(g.secs[5].kind, kSecGearBase + GB_GEAR_HIGH);
}

// Q4_0 and Q8_0 blocks are our q4 / q8 blocks: they pass through as the
// file's only tier (and embedding) by default; other tiers only on request,
// with warnings that measure the second rounding.
TEST(Convert, GgufQuantizedTensorsPassThrough) {
  SampleDims d;
  d.dim = 64;
  d.hidden = 96;
  d.heads = 4;
  d.kv_heads = 2;
  d.vocab = 260;
  for (uint32_t type : {2u /* Q4_0 */, 8u /* Q8_0 */}) {
    GgufSpec s = sample_gguf_spec(d, type);
    const std::vector<uint8_t> img = gguf_serialize(s);
    const std::string in = tmp("q.gguf"), out = tmp("q.gbx");
    ASSERT_TRUE(gbt::write_file(in, img));
    const uint32_t fmt = type == 2 ? kFmtQ4 : kFmtQ8, gear = type == 2 ? GB_GEAR_LOW : GB_GEAR_MID;
    for (uint32_t tiers : {0u, 0xFu}) {
      std::vector<std::string> logs;
      ConvertOptions o = quiet_opts();
      o.tiers = tiers;
      o.log.fn = [](void *u, gb_log_level lv, const char *m) {
        if (lv <= GB_LOG_WARN) static_cast<std::vector<std::string> *>(u)->push_back(m);
      };
      o.log.user = &logs;
      ASSERT_EQ(convert_gguf(in.c_str(), out.c_str(), o), GB_OK);
      Gbx g;
      ASSERT_NO_FATAL_FAILURE(load(out, &g));
      EXPECT_EQ(ld_u32(g.meta() + 144), gear) << "default gear: the source's own";
      EXPECT_EQ(ld_u32(g.meta() + 152), 1u) << "quantized source";
      EXPECT_EQ(g.meta()[148 + gear], (uint8_t)GB_TIER_ORIGIN_SOURCE);
      EXPECT_EQ(g.find(kTokEmbd, 0, kTierCommon)->fmt, fmt);  // the embedding as stored, too
      const Entry *q = g.find(kW2, 1, gear);
      ASSERT_NE(q, nullptr);
      EXPECT_EQ(q->fmt, fmt);
      EXPECT_EQ(memcmp(g.data(*q), s.tensor("blk.1.ffn_down.weight")->data.data(), q->nbytes), 0);
      const Entry *cls = g.find(kClassifier, 0, gear);  // shared: the embedding's blocks
      EXPECT_EQ(memcmp(g.data(*cls), s.tensor("token_embd.weight")->data.data(), cls->nbytes), 0);
      EXPECT_EQ(ld_u32(g.meta() + 72), 1u);
      EXPECT_STREQ((const char *)g.meta() + 80, "sample");
      if (tiers == 0) {
        // By default: the source's own tier only, and nothing to warn about.
        EXPECT_EQ(g.secs.size(), 6u);  // META, VOCAB, TOKENIZER, TENSORS, COMMON, the tier
        EXPECT_TRUE(logs.empty()) << logs[0];
        continue;
      }
      // On request: the two narrower-than-f32 tiers that are not the source's
      // own are rounded again (one warning, then one measurement each); the
      // f32 tier holds the exact dequantized blocks.
      ASSERT_EQ(logs.size(), 3u);
      EXPECT_NE(logs[0].find("re-quantizing"), std::string::npos) << logs[0];
      for (int i = 1; i < 3; i++) EXPECT_NE(logs[i].find("relative RMS error"), std::string::npos) << logs[i];
      for (uint32_t t = 0; t < GB_GEAR_COUNT; t++)
        EXPECT_EQ(g.meta()[148 + t], t == gear || t == GB_GEAR_F32 ? GB_TIER_ORIGIN_SOURCE : GB_TIER_ORIGIN_REQUANTIZED) << t;
      const Entry *f = g.find(kW2, 1, GB_GEAR_F32);
      std::vector<float> row(f->cols);
      dequantize_row(q->fmt, row.data(), g.data(*q), f->cols);
      EXPECT_EQ(memcmp(g.data(*f), row.data(), 4 * f->cols), 0);
    }
  }
}

TEST(Convert, FailureLeavesExistingOutputUntouched) {
  const std::string out = tmp("precious.gbx");
  const std::vector<uint8_t> precious = {'k', 'e', 'e', 'p', ' ', 'm', 'e'};
  ASSERT_TRUE(gbt::write_file(out, precious));
  // A truncated checkpoint, a GGUF without one tensor, an unwritable output.
  std::vector<uint8_t> ck = gbt::read_file(gbt::shared_path("models/stories260K.bin"));
  ck.resize(ck.size() - 4);
  const std::string bad_ck = tmp("trunc.bin");
  ASSERT_TRUE(gbt::write_file(bad_ck, ck));
  EXPECT_EQ(convert_llama2c(bad_ck.c_str(), gbt::shared_path("models/tok512.bin").c_str(), out.c_str(), quiet_opts()),
            GB_ERR_TRUNCATED);
  EXPECT_TRUE(gbt::read_file(out) == precious);
  EXPECT_FALSE(exists(out + ".tmp"));

  SampleDims d;
  GgufSpec s = sample_gguf_spec(d, 0);
  s.remove_tensor("blk.1.ffn_up.weight");
  const std::string bad_gguf = tmp("missing.gguf");
  ASSERT_TRUE(gbt::write_file(bad_gguf, gguf_serialize(s)));
  EXPECT_EQ(convert_gguf(bad_gguf.c_str(), out.c_str(), quiet_opts()), GB_ERR_MISSING_TENSOR);
  EXPECT_TRUE(gbt::read_file(out) == precious);
  EXPECT_FALSE(exists(out + ".tmp"));

  // A non-finite weight found while streaming: the .tmp is already written
  // in part and must be removed.
  std::vector<uint8_t> nan_ck = sample_llama2c_checkpoint(d);
  const std::vector<uint64_t> offs = sample_llama2c_offsets(d);
  st_u32(&nan_ck[offs[9] + 40], 0x7fc00000u);  // NaN in w3
  const std::string nan_path = tmp("nan.bin"), tok = tmp("tok300.bin");
  ASSERT_TRUE(gbt::write_file(nan_path, nan_ck));
  ASSERT_TRUE(gbt::write_file(tok, sample_llama2c_tokenizer(d.vocab)));
  EXPECT_EQ(convert_llama2c(nan_path.c_str(), tok.c_str(), out.c_str(), quiet_opts()), GB_ERR_CORRUPT);
  EXPECT_TRUE(gbt::read_file(out) == precious);
  EXPECT_FALSE(exists(out + ".tmp"));

  const std::string nowhere = gbt::temp_dir() + "/no/such/dir/out.gbx";
  EXPECT_EQ(convert_synthetic(kTinySpec, nowhere.c_str(), quiet_opts()), GB_ERR_IO);

  // And a successful conversion replaces it.
  ASSERT_EQ(convert_synthetic(kTinySpec, out.c_str(), quiet_opts()), GB_OK);
  EXPECT_FALSE(gbt::read_file(out) == precious);
  EXPECT_FALSE(exists(out + ".tmp"));
}

TEST(Convert, Stories5MConvertsAndOpens) {
  const std::string out = tmp("s5m.gbx");
  ConvertOptions o = quiet_opts();
  o.tiers = 1u << GB_GEAR_LOW;
  ASSERT_EQ(convert_llama2c(gbt::shared_path("models/stories5M_distilled.bin").c_str(), gbt::shared_path("models/tok512.bin").c_str(),
                            out.c_str(), o),
            GB_OK);
  Gbx g;
  ASSERT_NO_FATAL_FAILURE(load(out, &g));
  EXPECT_EQ(ld_u32(g.meta() + 8), 256u);
  EXPECT_EQ(g.find(kW1, 5, GB_GEAR_LOW)->rows, 768u);
  gb_model_options mo = gbt::quiet_model_options();
  gb_model *m = nullptr;
  ASSERT_EQ(gb_model_open_file(out.c_str(), &mo, &m), GB_OK);
  gb_model_close(m);
}

}  // namespace
