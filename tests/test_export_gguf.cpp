// test_export_gguf.cpp — `gb_convert_to_gguf` (gearbx convert --to-gguf):
// every tier of both shared models written as GGUF and imported again gives
// the same tensors bit for bit; a GGUF fixture (Q4_K_M, llama and qwen2)
// converted and exported gives back the fixture's own tensor bytes and the
// same tokenizer; tiers GGUF cannot hold and misuse get statuses.
#include <gtest/gtest.h>

#include <stdint.h>
#include <string.h>
#include <unistd.h>

#include <string>
#include <vector>

#include "bytes.h"
#include "convert_util.h"
#include "format.h"
#include "gearbx.h"
#include "gearbx_convert.h"
#include "gguf_parse.h"
#include "model.h"
#include "test_util.h"

namespace {

gb_convert_options quiet_convert() {
  gb_convert_options o;
  gb_convert_default_options(&o);
  o.log = gbt::quiet_log;
  return o;
}

gb_model *open_model(const std::string &path) {
  gb_model_options mo = gbt::quiet_model_options();
  gb_model *m = nullptr;
  EXPECT_EQ(gb_model_open_file(path.c_str(), &mo, &m), GB_OK) << path;
  return m;
}

bool same(const gb::TensorRef &a, const gb::TensorRef &b) {
  return a.format == b.format && a.rows == b.rows && a.cols == b.cols && a.nbytes == b.nbytes &&
         (a.data == nullptr) == (b.data == nullptr) && (!a.data || memcmp(a.data, b.data, a.nbytes) == 0);
}

// Tier g of a and the tier of b it landed in hold the same tensors.
void expect_same_tier(const gb_model *a, uint32_t ga, const gb_model *b, uint32_t gb_, const char *what) {
  ASSERT_EQ(a->meta.n_layers, b->meta.n_layers);
  EXPECT_TRUE(same(a->embd, b->embd)) << what << ": embedding " << gb::format_name(a->embd.format) << " "
                                      << gb::format_name(b->embd.format) << " " << a->embd.nbytes << " " << b->embd.nbytes;
  EXPECT_TRUE(same(a->out_norm, b->out_norm)) << what;
  EXPECT_TRUE(same(a->classifier[ga], b->classifier[gb_]))
      << what << ": classifier " << gb::format_name(a->classifier[ga].format) << " " << a->classifier[ga].rows << "x"
      << a->classifier[ga].cols << " vs " << gb::format_name(b->classifier[gb_].format) << " " << b->classifier[gb_].rows << "x"
      << b->classifier[gb_].cols;
  EXPECT_TRUE(same(a->rope_freqs, b->rope_freqs)) << what << ": rope_freqs";
  for (uint32_t l = 0; l < a->meta.n_layers; l++) {
    EXPECT_TRUE(same(a->attn_norm[l], b->attn_norm[l])) << what << " layer " << l;
    EXPECT_TRUE(same(a->ffn_norm[l], b->ffn_norm[l])) << what << " layer " << l;
    for (int k = 0; k < 3; k++) EXPECT_TRUE(same(a->bias[k][l], b->bias[k][l])) << what << " layer " << l << " bias " << k;
    for (uint32_t i = 0; i < gb::kMatsPerLayer; i++)
      EXPECT_TRUE(same(a->mats[ga][(size_t)l * gb::kMatsPerLayer + i], b->mats[gb_][(size_t)l * gb::kMatsPerLayer + i]))
          << what << " layer " << l << " matrix " << i;
  }
  const gb::Meta &x = a->meta, &y = b->meta;
  EXPECT_TRUE(x.arch == y.arch && x.dim == y.dim && x.hidden_dim == y.hidden_dim && x.n_heads == y.n_heads &&
              x.n_kv_heads == y.n_kv_heads && x.head_dim == y.head_dim && x.vocab_size == y.vocab_size &&
              x.seq_len == y.seq_len && x.rope_type == y.rope_type && x.rope_dim == y.rope_dim && x.rope_theta == y.rope_theta &&
              x.norm_eps == y.norm_eps && x.bos == y.bos && x.eos == y.eos)
      << what << ": hyper-parameters";
}

// The same ids for a few texts through both models' tokenizers.
void expect_same_tokens(const gb_model *a, const gb_model *b) {
  for (const char *text : {"Once upon a time, there was a little girl.", "  two  spaces\nand a line", "caf\xc3\xa9"}) {
    const size_t len = strlen(text);
    std::vector<int32_t> x(GB_TOKENIZE_CAPACITY(len)), y(GB_TOKENIZE_CAPACITY(len));
    size_t nx = 0, ny = 0;
    ASSERT_EQ(gb_tokenize(a, text, len, GB_TOKENIZE_ADD_BOS, x.data(), x.size(), &nx), GB_OK);
    ASSERT_EQ(gb_tokenize(b, text, len, GB_TOKENIZE_ADD_BOS, y.data(), y.size(), &ny), GB_OK);
    x.resize(nx);
    y.resize(ny);
    EXPECT_EQ(x, y) << text;
  }
}

std::string tmp(const std::string &name) { return gbt::temp_dir() + "/export-" + name; }

}  // namespace

TEST(ExportGguf, EveryTierOfTheStoriesModelsRoundTrips) {
  struct Model {
    const std::string *path;
    const char *name;
  } models[] = {{&gbt::stories260k_gbx(), "stories260K"}, {&gbt::stories5m_gbx(), "stories5M"}};
  const gb_convert_options co = quiet_convert();
  for (const Model &md : models) {
    gb_model *a = open_model(*md.path);
    ASSERT_NE(a, nullptr);
    for (uint32_t g = 0; g < GB_GEAR_COUNT; g++) {
      if (!(a->gears >> g & 1)) continue;
      const std::string what = std::string(md.name) + " " + gb_gear_name((gb_gear)g);
      const std::string gguf = tmp(std::string(md.name) + ".gguf"), back = tmp(std::string(md.name) + ".gbx");
      const gb_status st = gb_convert_to_gguf(md.path->c_str(), gguf.c_str(), (gb_gear)g, &co);
      // GGUF's Q4_0 / Q8_0 hold whole 32-weight blocks: stories260K's FFN
      // width (172) is not, so its q4 and q8 tiers cannot be written.
      if (a->meta.hidden_dim % 32 != 0 && (g == GB_GEAR_LOW || g == GB_GEAR_MID)) {
        EXPECT_EQ(st, GB_ERR_UNSUPPORTED_TYPE) << what;
        EXPECT_NE(access(gguf.c_str(), F_OK), 0) << what << ": nothing written";
        continue;
      }
      ASSERT_EQ(st, GB_OK) << what;
      // The importer rounds a float embedding to f16 unless told to keep f32.
      gb_convert_options ci = co;
      if (a->embd.format == gb::kFmtF32) ci.embd = GB_CONVERT_EMBD_F32;
      ASSERT_EQ(gb_convert_gguf(gguf.c_str(), back.c_str(), &ci), GB_OK) << what;
      gb_model *b = open_model(back);
      ASSERT_NE(b, nullptr);
      ASSERT_TRUE(b->gears >> g & 1) << what << ": the tier comes back in its own slot";
      expect_same_tier(a, g, b, g, what.c_str());
      expect_same_tokens(a, b);
      gb_model_close(b);
      unlink(gguf.c_str());
      unlink(back.c_str());
    }
    gb_model_close(a);
  }
}

TEST(ExportGguf, FixtureFilesComeBackByteForByte) {
  const gb_convert_options co = quiet_convert();
  // The shared fixtures, then the repository's (tests/fixtures/).
  for (const char *name : {"stories5M-Q4_K_M", "qwen2-tiny-Q4_K_M", "llama3-tiny-F32", "stories5M-Q8_0", "qwen3-tiny-Q4_K_M",
                           "smollm3-tiny-Q4_K_M", "phi3-tiny-Q4_K_M"}) {
    const bool own = strstr(name, "qwen3") || strstr(name, "smollm3") || strstr(name, "phi3");
    const std::string src = own ? std::string(GB_TEST_SOURCE_DIR) + "/fixtures/" + name + ".gguf"
                                : gbt::shared_path((std::string("fixtures/") + name + ".gguf").c_str());
    const std::string gbx = tmp(std::string(name) + ".gbx"), out = tmp(std::string(name) + ".out.gguf");
    ASSERT_EQ(gb_convert_gguf(src.c_str(), gbx.c_str(), &co), GB_OK) << name;
    ASSERT_EQ(gb_convert_to_gguf(gbx.c_str(), out.c_str(), name[0] == 'l' ? GB_GEAR_F32 : GB_GEAR_DEFAULT, &co), GB_OK) << name;
    // Every tensor of the fixture is in the export with the same type, shape
    // and bytes (the importer's 16-row interleave undone).
    gb::Logger log;
    log.fn = gbt::quiet_log;
    gb::InputFile fa, fb;
    ASSERT_EQ(fa.open(src.c_str(), log, "fixture"), GB_OK);
    ASSERT_EQ(fb.open(out.c_str(), log, "export"), GB_OK);
    gb::GgufFile ga, gx;
    ASSERT_EQ(gb::gguf_parse(fa, log, &ga), GB_OK);
    ASSERT_EQ(gb::gguf_parse(fb, log, &gx), GB_OK) << name;
    const std::vector<uint8_t> ba = gbt::read_file(src), bx = gbt::read_file(out);
    size_t compared = 0;
    auto find = [&](const std::string &n) -> const gb::GgufTensor * {
      for (const gb::GgufTensor &c : gx.tensors)
        if (c.name == n) return &c;
      return nullptr;
    };
    for (const gb::GgufTensor &t : ga.tensors) {
      const gb::GgufTensor *u = find(t.name);
      const size_t fused = t.name.find("attn_qkv.weight");
      if (!u && fused != std::string::npos) {
        // A fused Q/K/V comes back as attn_q, attn_k, attn_v: its rows, in
        // that order, byte for byte.
        uint64_t at = 0, rows = 0;
        for (const char *part : {"attn_q", "attn_k", "attn_v"}) {
          const gb::GgufTensor *p = find(t.name.substr(0, fused) + part + ".weight");
          ASSERT_NE(p, nullptr) << name << ": " << t.name << " as " << part;
          EXPECT_EQ(p->type, t.type) << name << ": " << part;
          ASSERT_LE(at + p->nbytes, t.nbytes) << name << ": " << part;
          EXPECT_EQ(memcmp(&bx[p->offset], &ba[t.offset + at], p->nbytes), 0) << name << ": " << part << " bytes differ";
          at += p->nbytes;
          rows += p->ne[1];
          compared++;
        }
        EXPECT_EQ(at, t.nbytes) << name << ": " << t.name;
        EXPECT_EQ(rows, t.ne[1]) << name << ": " << t.name;
        continue;
      }
      ASSERT_NE(u, nullptr) << name << ": " << t.name << " missing";
      EXPECT_EQ(u->type, t.type) << name << ": " << t.name;
      EXPECT_EQ(u->ne[0], t.ne[0]) << name << ": " << t.name;
      EXPECT_EQ(u->ne[1], t.ne[1]) << name << ": " << t.name;
      ASSERT_EQ(u->nbytes, t.nbytes) << name << ": " << t.name;
      EXPECT_EQ(memcmp(&bx[u->offset], &ba[t.offset], t.nbytes), 0) << name << ": " << t.name << " bytes differ";
      compared++;
    }
    EXPECT_EQ(compared, gx.tensors.size()) << name << ": no extra tensors";
    // The tokenizer: the same tokens, types, scores, merges and template.
    EXPECT_EQ(gx.tokens, ga.tokens) << name;
    EXPECT_EQ(gx.token_types, ga.token_types) << name;
    EXPECT_EQ(gx.merges, ga.merges) << name;
    if (ga.has_scores) {
      EXPECT_EQ(gx.scores, ga.scores) << name;
    }
    EXPECT_EQ(gx.chat_template, ga.chat_template) << name;
    // And its converted .gbx has the same TOKENIZER bytes as the first one.
    const std::string again = tmp(std::string(name) + ".again.gbx");
    ASSERT_EQ(gb_convert_gguf(out.c_str(), again.c_str(), &co), GB_OK) << name;
    gb_model *a = open_model(gbx), *b = open_model(again);
    ASSERT_TRUE(a && b);
    expect_same_tokens(a, b);
    gb_tokenizer_info ia, ib;
    ia.struct_size = ib.struct_size = sizeof ia;
    const gb_tokenizer *ta, *tb;
    gb_model_tokenizer(a, &ta);
    gb_model_tokenizer(b, &tb);
    gb_tokenizer_get_info(ta, &ia);
    gb_tokenizer_get_info(tb, &ib);
    EXPECT_EQ(memcmp(&ia, &ib, sizeof ia), 0) << name << ": tokenizer info differs";
    gb_model_close(a);
    gb_model_close(b);
    unlink(gbx.c_str());
    unlink(out.c_str());
    unlink(again.c_str());
  }
}

TEST(ExportGguf, Misuse) {
  const gb_convert_options co = quiet_convert();
  const std::string out = tmp("misuse.gguf");
  EXPECT_EQ(gb_convert_to_gguf(nullptr, out.c_str(), GB_GEAR_DEFAULT, &co), GB_ERR_NULL_POINTER);
  EXPECT_EQ(gb_convert_to_gguf(gbt::stories260k_gbx().c_str(), nullptr, GB_GEAR_DEFAULT, &co), GB_ERR_NULL_POINTER);
  EXPECT_EQ(gb_convert_to_gguf("/nonexistent.gbx", out.c_str(), GB_GEAR_DEFAULT, &co), GB_ERR_FILE_NOT_FOUND);
  EXPECT_EQ(gb_convert_to_gguf(gbt::shared_path("models/stories260K.gguf").c_str(), out.c_str(), GB_GEAR_DEFAULT, &co),
            GB_ERR_BAD_MAGIC);
  EXPECT_EQ(gb_convert_to_gguf(gbt::stories260k_gbx().c_str(), out.c_str(), GB_GEAR_AUTO, &co), GB_ERR_INVALID_ARGUMENT);
  // A tier the file does not have.
  const std::string q8 = tmp("q8only.gbx");
  ASSERT_EQ(gb_convert_gguf(gbt::shared_path("fixtures/stories5M-Q8_0.gguf").c_str(), q8.c_str(), &co), GB_OK);
  EXPECT_EQ(gb_convert_to_gguf(q8.c_str(), out.c_str(), GB_GEAR_HIGH, &co), GB_ERR_UNAVAILABLE);
  // An existing output stays as it was when the export fails.
  ASSERT_TRUE(gbt::write_file(out, std::vector<uint8_t>{1, 2, 3}));
  EXPECT_EQ(gb_convert_to_gguf(q8.c_str(), out.c_str(), GB_GEAR_F32, &co), GB_ERR_UNAVAILABLE);
  EXPECT_EQ(gbt::read_file(out), (std::vector<uint8_t>{1, 2, 3}));
  EXPECT_NE(access((out + ".tmp").c_str(), F_OK), 0);
  unlink(out.c_str());
  unlink(q8.c_str());
}
