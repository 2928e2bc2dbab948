// test_parsers_malformed.cpp — the converter's parsers against a malformed
// corpus generated here from small valid files (sample_files.h): llama2.c
// checkpoints, tokenizer.bin files and GGUF files, truncated at every
// structure boundary and at random points, with absurd counts and lengths,
// bad magic / versions / alignments, inconsistent or wrong shapes, missing and
// duplicate tensors, unsupported types and non-finite values. Every case
// expects its specific status, exactly one error log line, and an existing
// output file that is still intact (and no OUT.tmp) afterwards.
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include <functional>
#include <random>
#include <string>
#include <vector>

#include <gtest/gtest.h>

#include "bytes.h"
#include "convert.h"
#include "format.h"
#include "sample_files.h"
#include "test_util.h"

namespace {

using namespace gb;
using Bytes = std::vector<uint8_t>;

const Bytes kSentinel = {'o', 'l', 'd', ' ', 'o', 'u', 't', 'p', 'u', 't'};

// (Empty inputs are part of the corpus: written without fwrite(NULL, ...).)
bool put(const std::string &p, const Bytes &b) { return write_file_bytes(p, b.data(), b.size()); }

std::string path(const char *name) {
  const std::string d = gbt::temp_dir() + "/malformed";
  mkdir(d.c_str(), 0700);
  return d + "/" + name;
}

void count_errors(void *user, gb_log_level lv, const char *) {
  if (lv == GB_LOG_ERROR) ++*static_cast<int *>(user);
}

// Run a conversion into an OUT that already holds kSentinel; a failure must
// leave it as it was, remove OUT.tmp and log exactly one error line.
gb_status guarded(const std::function<gb_status(const char *out, const ConvertOptions &)> &run, uint32_t tiers = 0xF) {
  const std::string out = path("out.gbx");
  EXPECT_TRUE(put(out, kSentinel));
  int errors = 0;
  ConvertOptions o;
  o.page_align = 64;
  o.tiers = tiers;
  o.log.fn = count_errors;
  o.log.user = &errors;
  const gb_status st = run(out.c_str(), o);
  if (st != GB_OK) {
    EXPECT_TRUE(gbt::read_file(out) == kSentinel) << "output damaged";
    EXPECT_EQ(errors, 1) << "error log lines";
  } else {
    EXPECT_EQ(errors, 0);
  }
  EXPECT_NE(access((out + ".tmp").c_str(), F_OK), 0) << "OUT.tmp left behind";
  return st;
}

gb_status l2c(const Bytes &ck, const Bytes &tok) {
  const std::string c = path("in.bin"), t = path("tok.bin");
  EXPECT_TRUE(put(c, ck));
  EXPECT_TRUE(put(t, tok));
  return guarded([&](const char *out, const ConvertOptions &o) { return convert_llama2c(c.c_str(), t.c_str(), out, o); });
}

gb_status gguf(const Bytes &img, uint32_t tiers = 0xF) {
  const std::string in = path("in.gguf");
  EXPECT_TRUE(put(in, img));
  return guarded([&](const char *out, const ConvertOptions &o) { return convert_gguf(in.c_str(), out, o); }, tiers);
}

Bytes cut(const Bytes &b, size_t n) { return Bytes(b.begin(), b.begin() + (long)n); }

// ---- llama2.c checkpoint ---------------------------------------------------------

struct MalformedLlama2c : ::testing::Test {
  SampleDims d;
  Bytes ck = sample_llama2c_checkpoint(d);
  Bytes tok = sample_llama2c_tokenizer(d.vocab);
  Bytes with_field(int i, int32_t v) const {
    Bytes b = ck;
    st_u32(&b[4 * i], (uint32_t)v);
    return b;
  }
};

TEST_F(MalformedLlama2c, ValidSampleConverts) {
  EXPECT_EQ(l2c(ck, tok), GB_OK);
  SampleDims s = d;
  s.shared_classifier = false;
  EXPECT_EQ(l2c(sample_llama2c_checkpoint(s), tok), GB_OK);
}

TEST_F(MalformedLlama2c, TruncatedAnywhere) {
  std::vector<size_t> sizes;
  for (size_t n = 0; n <= 28; n++) sizes.push_back(n);
  for (uint64_t o : sample_llama2c_offsets(d)) {
    for (long delta : {-5L, -1L, 0L, 1L, 4L}) {
      const long n = (long)o + delta;
      if (n >= 0 && (size_t)n < ck.size()) sizes.push_back((size_t)n);
    }
  }
  std::mt19937 rng(1234);
  for (int i = 0; i < 40; i++) sizes.push_back(rng() % ck.size());
  for (size_t n : sizes) EXPECT_EQ(l2c(cut(ck, n), tok), GB_ERR_TRUNCATED) << "cut at " << n;
}

TEST_F(MalformedLlama2c, TrailingGarbage) {
  for (size_t extra : {1u, 4u, 1000u}) {
    Bytes b = ck;
    b.resize(b.size() + extra, 0);
    EXPECT_EQ(l2c(b, tok), GB_ERR_CORRUPT) << extra;
  }
}

TEST_F(MalformedLlama2c, AbsurdAndNegativeHeaderFields) {
  for (int f = 0; f < 7; f++)
    for (int32_t v : {0, -1, -7, INT32_MIN, INT32_MAX, 1 << 24})
      EXPECT_EQ(l2c(with_field(f, v), tok), GB_ERR_CORRUPT) << "field " << f << " = " << v;
}

TEST_F(MalformedLlama2c, InconsistentDims) {
  EXPECT_EQ(l2c(with_field(3, 3), tok), GB_ERR_CORRUPT);  // dim 16 % n_heads 3
  EXPECT_EQ(l2c(with_field(4, 3), tok), GB_ERR_CORRUPT);  // n_heads 4 % n_kv_heads 3
  EXPECT_EQ(l2c(with_field(4, 8), tok), GB_ERR_CORRUPT);  // n_kv_heads > n_heads
  Bytes odd = with_field(0, 12);                          // head_dim 3: no RoPE pairs
  EXPECT_EQ(l2c(odd, tok), GB_ERR_CORRUPT);
  EXPECT_EQ(l2c(with_field(5, 2), sample_llama2c_tokenizer(2 + 257)), GB_ERR_CORRUPT);  // vocab < 3
}

// Valid headers that announce a different model than the data holds.
TEST_F(MalformedLlama2c, WrongShapes) {
  EXPECT_EQ(l2c(with_field(1, 41), tok), GB_ERR_TRUNCATED);  // hidden_dim
  EXPECT_EQ(l2c(with_field(1, 39), tok), GB_ERR_CORRUPT);
  EXPECT_EQ(l2c(with_field(2, 3), tok), GB_ERR_TRUNCATED);   // n_layers
  EXPECT_EQ(l2c(with_field(2, 1), tok), GB_ERR_CORRUPT);
  EXPECT_EQ(l2c(with_field(5, -300), tok), GB_ERR_TRUNCATED);  // separate classifier expected
  EXPECT_EQ(l2c(with_field(6, 17), tok), GB_ERR_TRUNCATED);    // seq_len sizes freq_cis
  EXPECT_EQ(l2c(with_field(0, 4096), tok), GB_ERR_TRUNCATED);
  EXPECT_EQ(l2c(with_field(5, 4000000), tok), GB_ERR_TRUNCATED);
  // The tokenizer must hold exactly the checkpoint's vocabulary.
  EXPECT_EQ(l2c(ck, sample_llama2c_tokenizer(299)), GB_ERR_SHAPE_MISMATCH);
  EXPECT_EQ(l2c(ck, sample_llama2c_tokenizer(301)), GB_ERR_SHAPE_MISMATCH);
}

TEST_F(MalformedLlama2c, NonFiniteWeights) {
  const std::vector<uint64_t> off = sample_llama2c_offsets(d);  // embd .. rms_final, freq_real, freq_imag, end
  const uint32_t bad[3] = {0x7fc00000u, 0x7f800000u, 0xff800000u};
  for (size_t a = 0; a + 1 < off.size(); a++) {
    for (uint32_t v : bad) {
      Bytes b = ck;
      st_u32(&b[off[a] + 4 * ((off[a + 1] - off[a]) / 8)], v);  // middle of the array
      const bool unused = a == 11 || a == 12;                   // freq_cis is never read
      EXPECT_EQ(l2c(b, tok), unused ? GB_OK : GB_ERR_CORRUPT) << "array " << a;
    }
  }
  SampleDims s = d;
  s.shared_classifier = false;
  Bytes sep = sample_llama2c_checkpoint(s);
  st_u32(&sep[sep.size() - 8], bad[0]);  // wcls
  EXPECT_EQ(l2c(sep, tok), GB_ERR_CORRUPT);
}

TEST_F(MalformedLlama2c, MissingFiles) {
  const std::string t = path("tok-ok.bin"), c = path("ck-ok.bin");
  ASSERT_TRUE(put(t, tok));
  ASSERT_TRUE(put(c, ck));
  const std::string none = path("does-not-exist.bin");
  EXPECT_EQ(guarded([&](const char *out, const ConvertOptions &o) { return convert_llama2c(none.c_str(), t.c_str(), out, o); }),
            GB_ERR_FILE_NOT_FOUND);
  EXPECT_EQ(guarded([&](const char *out, const ConvertOptions &o) { return convert_llama2c(c.c_str(), none.c_str(), out, o); }),
            GB_ERR_FILE_NOT_FOUND);
  const std::string dir = gbt::temp_dir();
  EXPECT_EQ(guarded([&](const char *out, const ConvertOptions &o) { return convert_llama2c(dir.c_str(), t.c_str(), out, o); }),
            GB_ERR_IO);
}

// ---- tokenizer.bin --------------------------------------------------------------

struct MalformedTokenizer : MalformedLlama2c {
  // Start of each token entry, then the end of the file.
  std::vector<size_t> entries() const {
    std::vector<size_t> e;
    size_t at = 4;
    for (uint32_t i = 0; i < d.vocab; i++) {
      e.push_back(at);
      at += 8 + ld_u32(&tok[at + 4]);
    }
    e.push_back(at);
    return e;
  }
};

TEST_F(MalformedTokenizer, TruncatedAnywhere) {
  const std::vector<size_t> e = entries();
  ASSERT_EQ(e.back(), tok.size());
  auto expect = [&](size_t n) {
    if (n < 4) return GB_ERR_TRUNCATED;
    for (size_t i = 0; i + 1 < e.size(); i++)
      if (e[i] == n) return GB_ERR_SHAPE_MISMATCH;  // ends cleanly after i tokens
    return GB_ERR_TRUNCATED;
  };
  std::vector<size_t> sizes = {0, 1, 2, 3};
  for (size_t n = e[0]; n <= e[2]; n++) sizes.push_back(n);  // every byte of the first entries
  for (size_t i = 2; i + 1 < e.size(); i += 37) sizes.insert(sizes.end(), {e[i], e[i] + 3, e[i] + 8});
  sizes.insert(sizes.end(), {e[e.size() - 2], e.back() - 1});
  std::mt19937 rng(99);
  for (int i = 0; i < 40; i++) sizes.push_back(rng() % tok.size());
  for (size_t n : sizes) EXPECT_EQ(l2c(ck, cut(tok, n)), expect(n)) << "cut at " << n;
}

TEST_F(MalformedTokenizer, BadLengthsAndValues) {
  const std::vector<size_t> e = entries();
  auto with = [&](size_t at, uint32_t v) {
    Bytes b = tok;
    st_u32(&b[at], v);
    return b;
  };
  EXPECT_EQ(l2c(ck, with(0, 0xFFFFFFFFu)), GB_ERR_CORRUPT);  // max_token_length -1
  EXPECT_EQ(l2c(ck, with(0, 2)), GB_ERR_CORRUPT);            // shorter than "<unk>"
  EXPECT_EQ(l2c(ck, with(e[5] + 4, 0xFFFFFFFFu)), GB_ERR_CORRUPT);   // len -1
  EXPECT_EQ(l2c(ck, with(e[5] + 4, 0x7FFFFFFFu)), GB_ERR_CORRUPT);   // len > max_token_length
  EXPECT_EQ(l2c(ck, with(e[5] + 4, 0x80000000u)), GB_ERR_CORRUPT);   // len INT32_MIN
  Bytes big = with(0, 0x7FFFFFFFu);
  st_u32(&big[e[5] + 4], 0x7FFFFFFFu);  // allowed by the file, past EOF
  EXPECT_EQ(l2c(ck, big), GB_ERR_UNSUPPORTED_TYPE);
  st_u32(&big[e[5] + 4], kMaxPieceBytes + 1);  // one over the format's limit
  EXPECT_EQ(l2c(ck, big), GB_ERR_UNSUPPORTED_TYPE);
  Bytes last_long = with(0, 0x7FFFFFFFu);  // the last piece runs past EOF
  st_u32(&last_long[e[d.vocab - 1] + 4], 200);
  EXPECT_EQ(l2c(ck, last_long), GB_ERR_TRUNCATED);
  for (uint32_t v : {0x7fc00000u, 0x7f800000u, 0xff800000u}) EXPECT_EQ(l2c(ck, with(e[7], v)), GB_ERR_CORRUPT);  // score
  Bytes tail = tok;
  tail.resize(tail.size() + 3, 'x');
  EXPECT_EQ(l2c(ck, tail), GB_ERR_CORRUPT);
  EXPECT_EQ(l2c(ck, Bytes()), GB_ERR_TRUNCATED);
  Bytes t2;  // the last token an empty piece
  for (size_t i = 0; i < e[300 - 1]; i++) t2.push_back(tok[i]);
  const uint8_t empty_entry[8] = {0, 0, 0, 0, 0, 0, 0, 0};
  t2.insert(t2.end(), empty_entry, empty_entry + 8);
  EXPECT_EQ(l2c(ck, t2), GB_ERR_CORRUPT);  // an empty normal piece: unusable for merges
}

TEST_F(MalformedTokenizer, RealTokenizerAgainstOtherVocab) {
  // tok512.bin against a 300-token checkpoint: too many tokens.
  EXPECT_EQ(l2c(ck, gbt::read_file(gbt::shared_path("models/tok512.bin"))), GB_ERR_SHAPE_MISMATCH);
}

// ---- GGUF ------------------------------------------------------------------------

void put_u32(Bytes &b, uint32_t v) {
  const size_t n = b.size();
  b.resize(n + 4);
  st_u32(&b[n], v);
}
void put_u64(Bytes &b, uint64_t v) {
  const size_t n = b.size();
  b.resize(n + 8);
  st_u64(&b[n], v);
}
void put_str(Bytes &b, const std::string &s) {
  put_u64(b, s.size());
  b.insert(b.end(), s.begin(), s.end());
}

struct MalformedGguf : ::testing::Test {
  SampleDims d;
  GgufSpec s = sample_gguf_spec(d, 0);
  GgufLayout lay;
  Bytes img = gguf_serialize(s, &lay);

  // Offset of the value of key-value pair i (after key and type).
  size_t value_off(size_t i) const { return lay.kv_off[i] + 8 + ld_u64(&img[lay.kv_off[i]]) + 4; }
  size_t kv_index(const char *key) const {
    for (size_t i = 0; i < s.kv.size(); i++)
      if (s.kv[i].key == key) return i;
    return SIZE_MAX;
  }
  gb_status with(GgufSpec t, uint32_t tiers = 0xF) { return gguf(gguf_serialize(t), tiers); }
  // The sample's token array (n tokens), with piece `at` replaced.
  Bytes tokens(uint32_t n, const std::string &special = "", size_t at = SIZE_MAX) const {
    Bytes b;
    put_u32(b, 8);
    put_u64(b, n);
    for (uint32_t i = 0; i < n; i++) {
      char buf[16];
      snprintf(buf, sizeof buf, "<0x%02X>", (i - 3) & 0xFF);
      const std::string p = i == 0 ? "<unk>" : i == 1 ? "<s>" : i == 2 ? "</s>" : i < 259 ? buf : "x" + std::to_string(i);
      put_str(b, i == at ? special : p);
    }
    return b;
  }
};

TEST_F(MalformedGguf, ValidSamplesConvert) {
  EXPECT_EQ(gguf(img), GB_OK);
  GgufSpec v2 = s;
  v2.version = 2;
  EXPECT_EQ(with(v2), GB_OK);
  SampleDims q = d;
  q.dim = 32;
  q.hidden = 64;
  q.shared_classifier = false;
  for (uint32_t type : {1u, 2u, 8u}) EXPECT_EQ(with(sample_gguf_spec(q, type)), GB_OK) << type;
  GgufSpec extra = s;  // tensors a llama model does not use are ignored
  extra.tensors.push_back(GgufTensorSpec{"rope_freqs.weight", {2}, 0, Bytes(8, 0)});
  EXPECT_EQ(with(extra), GB_OK);
}

TEST_F(MalformedGguf, TruncatedAnywhere) {
  std::vector<size_t> sizes;
  for (size_t n = 0; n <= 24; n++) sizes.push_back(n);
  for (size_t o : lay.kv_off) sizes.insert(sizes.end(), {o, o + 4, o + 9, o + 20});
  for (size_t o : lay.tensor_info_off) sizes.insert(sizes.end(), {o, o + 10, o + 16, o + 30});
  sizes.insert(sizes.end(), {lay.infos_end - 1, lay.infos_end, lay.data_start, lay.data_start + 1, img.size() - 1});
  for (size_t i = 0; i < s.tensors.size(); i += 3) sizes.push_back(lay.data_start + (size_t)(i * 64));
  std::mt19937 rng(4321);
  for (int i = 0; i < 60; i++) sizes.push_back(rng() % img.size());
  for (size_t n : sizes) {
    if (n >= img.size()) continue;
    EXPECT_EQ(gguf(cut(img, n)), GB_ERR_TRUNCATED) << "cut at " << n;
  }
}

TEST_F(MalformedGguf, BadMagicAndVersion) {
  for (const char *m : {"GGUX", "XGUF", "ggml", "\0\0\0\0"}) {
    Bytes b = img;
    memcpy(b.data(), m, 4);
    EXPECT_EQ(gguf(b), GB_ERR_BAD_MAGIC) << m;
  }
  EXPECT_EQ(gguf(Bytes{'G', 'G', 'X'}), GB_ERR_BAD_MAGIC);
  EXPECT_EQ(gguf(Bytes{'G', 'G', 'U'}), GB_ERR_TRUNCATED);
  EXPECT_EQ(gguf(sample_llama2c_checkpoint(SampleDims())), GB_ERR_BAD_MAGIC);
  for (uint32_t v : {0u, 1u, 4u, 0x03000000u, 0xFFFFFFFFu}) {
    Bytes b = img;
    st_u32(&b[4], v);
    EXPECT_EQ(gguf(b), GB_ERR_UNSUPPORTED_VERSION) << v;
  }
}

TEST_F(MalformedGguf, AbsurdCountsAndLengths) {
  const uint64_t huge[] = {1ull << 63, ~0ull, 0xFFFFFFFFull, img.size()};
  for (uint64_t v : huge) {
    Bytes b = img;
    st_u64(&b[lay.counts_off], v);  // tensor_count
    EXPECT_EQ(gguf(b), GB_ERR_TRUNCATED) << "tensor_count " << v;
    b = img;
    st_u64(&b[lay.counts_off + 8], v);  // kv_count
    EXPECT_EQ(gguf(b), GB_ERR_TRUNCATED) << "kv_count " << v;
    b = img;
    st_u64(&b[lay.kv_off[0]], v);  // first key's length
    EXPECT_EQ(gguf(b), GB_ERR_TRUNCATED) << "key length " << v;
    b = img;
    st_u64(&b[value_off(kv_index("general.name"))], v);  // a string value
    EXPECT_EQ(gguf(b), GB_ERR_TRUNCATED) << "string length " << v;
    b = img;
    st_u64(&b[value_off(kv_index("tokenizer.ggml.tokens")) + 4], v);  // array count
    EXPECT_EQ(gguf(b), GB_ERR_TRUNCATED) << "array count " << v;
    b = img;
    st_u64(&b[value_off(kv_index("tokenizer.ggml.tokens")) + 12], v);  // first token's length
    EXPECT_EQ(gguf(b), GB_ERR_TRUNCATED) << "token length " << v;
    b = img;
    st_u64(&b[lay.tensor_info_off[3]], v);  // a tensor name's length
    EXPECT_EQ(gguf(b), GB_ERR_TRUNCATED) << "name length " << v;
  }
  // A string that ends exactly one byte past EOF.
  Bytes b = img;
  const size_t at = value_off(kv_index("general.name"));
  st_u64(&b[at], b.size() - (at + 8) + 1);
  EXPECT_EQ(gguf(b), GB_ERR_TRUNCATED);
}

TEST_F(MalformedGguf, BadValueTypesAndKeys) {
  GgufSpec t = s;
  t.set("custom.key", 13, Bytes(8, 0));
  EXPECT_EQ(with(t), GB_ERR_CORRUPT);  // unknown value type
  t = s;
  t.set("general.name", 99, Bytes(8, 0));
  EXPECT_EQ(with(t), GB_ERR_CORRUPT);
  Bytes arr;  // array of element type 13
  put_u32(arr, 13);
  put_u64(arr, 1);
  t = s;
  t.set("custom.arr", 9, arr);
  EXPECT_EQ(with(t), GB_ERR_CORRUPT);
  // Nested arrays: depth 2 is skipped; deeper nesting is refused.
  auto nest = [](int depth) {
    Bytes b;
    for (int i = 0; i < depth - 1; i++) {
      put_u32(b, 9);
      put_u64(b, 1);
    }
    put_u32(b, 4);
    put_u64(b, 2);
    put_u32(b, 7);
    put_u32(b, 8);
    return b;
  };
  t = s;
  t.set("custom.nested", 9, nest(2));
  EXPECT_EQ(with(t), GB_OK);
  t = s;
  t.set("custom.nested", 9, nest(6));
  EXPECT_EQ(with(t), GB_ERR_CORRUPT);
  t = s;
  t.kv.push_back(t.kv[3]);  // a duplicate key
  EXPECT_EQ(with(t), GB_ERR_CORRUPT);
  Bytes u32s;
  put_u32(u32s, 4);
  put_u64(u32s, d.vocab);
  for (uint32_t i = 0; i < d.vocab; i++) put_u32(u32s, i);
  t = s;
  t.set("tokenizer.ggml.tokens", 9, u32s);  // tokens that are not strings
  EXPECT_EQ(with(t), GB_ERR_CORRUPT);
  Bytes u32arr = u32s;
  st_u32(&u32arr[0], 5);
  t = s;
  t.set("tokenizer.ggml.scores", 9, u32arr);  // scores that are not floats
  EXPECT_EQ(with(t), GB_ERR_CORRUPT);
  t = s;
  t.set_u32("tokenizer.ggml.tokens", 5);  // not an array at all
  EXPECT_EQ(with(t), GB_ERR_CORRUPT);
}

TEST_F(MalformedGguf, Alignment) {
  for (uint32_t a : {0u, 3u, 48u, 1u << 30}) {
    GgufSpec t = s;
    t.set_u32("general.alignment", a);
    EXPECT_EQ(with(t), GB_ERR_CORRUPT) << a;
  }
  GgufSpec t = s;
  t.set_str("general.alignment", "64");
  EXPECT_EQ(with(t), GB_ERR_CORRUPT);
  t = s;
  t.set_u32("general.alignment", 4096);  // data laid out for 32: offsets misaligned
  EXPECT_EQ(with(t), GB_ERR_CORRUPT);
  for (uint32_t a : {8u, 64u, 256u}) {
    t = s;
    t.set_u32("general.alignment", a);
    t.layout_alignment = a;
    EXPECT_EQ(with(t), GB_OK) << a;
  }
}

TEST_F(MalformedGguf, BadTensorInfos) {
  GgufSpec t = s;
  t.tensor("blk.0.attn_q.weight")->ne = {16, 16, 1, 1, 1};
  EXPECT_EQ(with(t), GB_ERR_CORRUPT);  // 5 dimensions
  t = s;
  t.tensor("blk.0.attn_q.weight")->ne = {};
  EXPECT_EQ(with(t), GB_ERR_CORRUPT);
  t = s;
  t.tensor("blk.0.attn_q.weight")->ne = {16, 0};
  EXPECT_EQ(with(t), GB_ERR_CORRUPT);
  t = s;
  t.tensor("blk.0.attn_q.weight")->ne = {1ull << 41, 1};
  EXPECT_EQ(with(t), GB_ERR_CORRUPT);
  t = s;
  t.tensor("blk.0.attn_q.weight")->ne = {1ull << 30, 1ull << 30};
  EXPECT_EQ(with(t), GB_ERR_CORRUPT);  // element count overflow guard
  t = s;
  t.tensors.push_back(t.tensors[5]);  // duplicate name
  EXPECT_EQ(with(t), GB_ERR_CORRUPT);
  t = s;
  t.tensors[4].fixed_offset = true;
  t.tensors[4].offset = 4;  // not aligned
  EXPECT_EQ(with(t), GB_ERR_CORRUPT);
  for (uint64_t off : {1ull << 40, ~0ull - 31}) {
    t = s;
    t.tensors[4].fixed_offset = true;
    t.tensors[4].offset = off;  // aligned, past EOF
    t.tensors[4].data.clear();
    EXPECT_EQ(with(t), GB_ERR_TRUNCATED) << off;
  }
  t = s;
  t.tensors[4].fixed_offset = true;
  t.tensors[4].offset = 0;  // the same bytes as tensor 0
  t.tensors[4].data.clear();
  EXPECT_EQ(with(t), GB_ERR_CORRUPT);
  for (uint32_t type : {15u /* Q8_K */, 34u /* TQ1_0 */, 35u /* TQ2_0 */, 43u, 999u}) {
    t = s;
    t.tensor("blk.1.attn_v.weight")->type = type;
    EXPECT_EQ(with(t), GB_ERR_UNSUPPORTED_TYPE) << type;
  }
  for (uint32_t type : {3u /* Q4_1 */, 14u /* Q6_K: 256-value super-blocks */, 23u /* IQ4_XS: the same */,
                        16u /* IQ2_XXS: the same */, 29u /* IQ1_M: the same */, 39u /* MXFP4: 32-value blocks */,
                        41u /* Q1_0: 128-value blocks */, 42u /* Q2_0: 64-value blocks */, 40u /* NVFP4: the same */}) {
    t = s;  // supported types, but the rows are not whole blocks
    t.tensor("blk.1.attn_v.weight")->type = type;
    EXPECT_EQ(with(t), GB_ERR_CORRUPT) << type;
  }
  t = s;  // Q4_0 rows of 16 columns: not whole blocks
  t.tensor("blk.1.attn_v.weight")->type = 2;
  EXPECT_EQ(with(t), GB_ERR_CORRUPT);
}

TEST_F(MalformedGguf, MissingAndMisshapenTensors) {
  for (const char *name : {"token_embd.weight", "output_norm.weight", "blk.0.attn_q.weight", "blk.1.ffn_up.weight",
                           "blk.1.attn_norm.weight", "blk.0.ffn_down.weight"}) {
    GgufSpec t = s;
    t.remove_tensor(name);
    EXPECT_EQ(with(t), GB_ERR_MISSING_TENSOR) << name;
  }
  struct Case {
    const char *name;
    std::vector<uint64_t> ne;
  } cases[] = {{"blk.0.attn_q.weight", {16, 8}},  {"blk.0.attn_k.weight", {8, 16}}, {"blk.1.attn_norm.weight", {8}},
               {"blk.0.ffn_gate.weight", {40, 16}}, {"blk.0.attn_output.weight", {16, 4, 4}},
               {"output_norm.weight", {16, 2}}};
  for (const Case &c : cases) {
    GgufSpec t = s;
    GgufTensorSpec *x = t.tensor(c.name);
    x->ne = c.ne;
    uint64_t n = 1;
    for (uint64_t v : c.ne) n *= v;
    x->data.assign(n * 4, 0);
    EXPECT_EQ(with(t), GB_ERR_SHAPE_MISMATCH) << c.name;
  }
  GgufSpec t = s;  // a separate classifier of the wrong vocabulary
  t.tensors.push_back(GgufTensorSpec{"output.weight", {16, 299}, 0, Bytes(16 * 299 * 4, 0)});
  EXPECT_EQ(with(t), GB_ERR_SHAPE_MISMATCH);
}

TEST_F(MalformedGguf, Hyperparameters) {
  struct Case {
    const char *key;
    int kind;  // 0 u32, 1 string, 2 f32, 3 remove
    uint32_t u;
    const char *str;
    float f;
    gb_status want;
  } cases[] = {
      {"general.architecture", 1, 0, "gpt2", 0, GB_ERR_UNSUPPORTED_TYPE},
      {"general.architecture", 3, 0, nullptr, 0, GB_ERR_CORRUPT},
      {"general.architecture", 0, 7, nullptr, 0, GB_ERR_CORRUPT},
      {"llama.embedding_length", 3, 0, nullptr, 0, GB_ERR_CORRUPT},
      {"llama.embedding_length", 1, 0, "16", 0, GB_ERR_CORRUPT},
      {"llama.embedding_length", 0, 32, nullptr, 0, GB_ERR_SHAPE_MISMATCH},
      {"llama.feed_forward_length", 0, 0xFFFFFFFFu, nullptr, 0, GB_ERR_CORRUPT},
      {"llama.block_count", 0, 0, nullptr, 0, GB_ERR_CORRUPT},
      {"llama.block_count", 0, 3, nullptr, 0, GB_ERR_MISSING_TENSOR},
      {"llama.attention.head_count", 0, 3, nullptr, 0, GB_ERR_CORRUPT},
      {"llama.attention.head_count", 0, 0, nullptr, 0, GB_ERR_CORRUPT},
      {"llama.attention.head_count_kv", 0, 3, nullptr, 0, GB_ERR_CORRUPT},
      {"llama.attention.head_count_kv", 0, 8, nullptr, 0, GB_ERR_CORRUPT},
      {"llama.rope.dimension_count", 0, 3, nullptr, 0, GB_ERR_CORRUPT},
      {"llama.rope.dimension_count", 0, 8, nullptr, 0, GB_ERR_CORRUPT},
      {"llama.attention.layer_norm_rms_epsilon", 0, 1, nullptr, 0, GB_ERR_CORRUPT},
      {"llama.attention.layer_norm_rms_epsilon", 2, 0, nullptr, -1.0f, GB_ERR_CORRUPT},
      {"llama.rope.freq_base", 2, 0, nullptr, 0.0f, GB_ERR_CORRUPT},
      {"llama.context_length", 0, 0, nullptr, 0, GB_ERR_CORRUPT},
      {"llama.vocab_size", 0, 301, nullptr, 0, GB_ERR_SHAPE_MISMATCH},
  };
  for (const Case &c : cases) {
    GgufSpec t = s;
    if (c.kind == 0) t.set_u32(c.key, c.u);
    if (c.kind == 1) t.set_str(c.key, c.str);
    if (c.kind == 2) t.set_f32(c.key, c.f);
    if (c.kind == 3) t.remove(c.key);
    EXPECT_EQ(with(t), c.want) << c.key;
  }
  GgufSpec t = s;  // optional keys have defaults
  t.remove("llama.attention.head_count_kv");
  t.remove("llama.rope.dimension_count");
  t.remove("llama.context_length");
  t.remove("llama.attention.layer_norm_rms_epsilon");
  // head_count_kv defaults to head_count: the k/v tensors are then misshapen.
  EXPECT_EQ(with(t), GB_ERR_SHAPE_MISMATCH);
}

TEST_F(MalformedGguf, Vocabulary) {
  GgufSpec t = s;
  t.remove("tokenizer.ggml.tokens");
  EXPECT_EQ(with(t), GB_ERR_CORRUPT);
  t = s;
  t.set("tokenizer.ggml.tokens", 9, tokens(d.vocab - 1));
  EXPECT_EQ(with(t), GB_ERR_CORRUPT);  // fewer tokens than scores
  t = s;
  t.set("tokenizer.ggml.tokens", 9, tokens(d.vocab));
  EXPECT_EQ(with(t), GB_OK);
  t = s;
  t.set("tokenizer.ggml.tokens", 9, tokens(d.vocab, std::string(300, 'x'), 270));
  EXPECT_EQ(with(t), GB_ERR_UNSUPPORTED_TYPE);  // longer than kMaxPieceBytes
  t = s;
  t.set("tokenizer.ggml.tokens", 9, tokens(d.vocab, std::string(5000, 'x'), 270));
  EXPECT_EQ(with(t), GB_ERR_UNSUPPORTED_TYPE);
  // Pieces the .gbx tokenizer would refuse are refused here already.
  t = s;
  t.set("tokenizer.ggml.tokens", 9, tokens(d.vocab, "<0xZZ>", 40));  // a byte token naming no byte
  EXPECT_EQ(with(t), GB_ERR_CORRUPT);
  t = s;
  t.set("tokenizer.ggml.tokens", 9, tokens(d.vocab, "", 270));  // an empty normal piece
  EXPECT_EQ(with(t), GB_ERR_CORRUPT);
  t = s;
  t.set("tokenizer.ggml.tokens", 9, tokens(d.vocab, "", 1));  // an empty control piece is fine
  EXPECT_EQ(with(t), GB_OK);
  t = s;  // byte 0x27 without a byte token, and no unknown token to fall back to
  t.set("tokenizer.ggml.tokens", 9, tokens(d.vocab, "<0x28>", 3 + 0x27));
  t.set_u32("tokenizer.ggml.unknown_token_id", 0xFFFFFFFFu);
  EXPECT_EQ(with(t), GB_ERR_CORRUPT);
  t = s;  // 100 x U+2581 (300 bytes) becomes 100 spaces: fits
  std::string spaces;
  for (int i = 0; i < 100; i++) spaces += "\xE2\x96\x81";
  t.set("tokenizer.ggml.tokens", 9, tokens(d.vocab, spaces, 270));
  EXPECT_EQ(with(t), GB_OK);
  Bytes sc;
  put_u32(sc, 6);
  put_u64(sc, d.vocab - 1);
  for (uint32_t i = 0; i + 1 < d.vocab; i++) put_u32(sc, 0);
  t = s;
  t.set("tokenizer.ggml.scores", 9, sc);
  EXPECT_EQ(with(t), GB_ERR_CORRUPT);
  Bytes sc_nan;
  put_u32(sc_nan, 6);
  put_u64(sc_nan, d.vocab);
  for (uint32_t i = 0; i < d.vocab; i++) put_u32(sc_nan, i == 9 ? 0x7fc00000u : 0);
  t = s;
  t.set("tokenizer.ggml.scores", 9, sc_nan);
  EXPECT_EQ(with(t), GB_ERR_CORRUPT);
  for (uint32_t bad : {0u, 7u, 0xFFFFFFFFu}) {
    Bytes ty;
    put_u32(ty, 5);
    put_u64(ty, d.vocab);
    for (uint32_t i = 0; i < d.vocab; i++) put_u32(ty, i == 11 ? bad : 1);
    t = s;
    t.set("tokenizer.ggml.token_type", 9, ty);
    EXPECT_EQ(with(t), GB_ERR_CORRUPT) << bad;
  }
  t = s;
  t.set_str("tokenizer.ggml.model", "gpt2");
  EXPECT_EQ(with(t), GB_ERR_CORRUPT);  // byte-level BPE without merges
  t.set_str("tokenizer.ggml.model", "rwkv");
  EXPECT_EQ(with(t), GB_ERR_UNSUPPORTED_TYPE);
  for (const char *k : {"tokenizer.ggml.bos_token_id", "tokenizer.ggml.eos_token_id", "tokenizer.ggml.unknown_token_id"}) {
    t = s;
    t.set_u32(k, d.vocab);
    EXPECT_EQ(with(t), GB_ERR_CORRUPT) << k;
    t = s;
    t.set_str(k, "1");
    EXPECT_EQ(with(t), GB_ERR_CORRUPT) << k;
    t = s;
    t.set_u32(k, 0xFFFFFFFFu);  // "none"
    EXPECT_EQ(with(t), GB_OK) << k;
  }
}

TEST_F(MalformedGguf, NonFiniteValues) {
  GgufSpec t = s;
  st_u32(&t.tensor("blk.1.attn_v.weight")->data[12], 0x7fc00000u);
  EXPECT_EQ(with(t), GB_ERR_CORRUPT);
  SampleDims q = d;
  q.dim = 32;
  q.hidden = 64;
  GgufSpec h = sample_gguf_spec(q, 1);  // f16 with an infinity
  st_u32(&h.tensor("token_embd.weight")->data[64], 0x7c00u);
  EXPECT_EQ(with(h), GB_ERR_CORRUPT);
  // Quantized blocks passed through unchanged: a bad scale is still caught.
  GgufSpec q4 = sample_gguf_spec(q, 2);
  st_u32(&q4.tensor("blk.0.ffn_up.weight")->data[18 * 3], 0x7c00u);
  EXPECT_EQ(with(q4, 1u << GB_GEAR_LOW), GB_ERR_CORRUPT);
  GgufSpec q8 = sample_gguf_spec(q, 8);
  st_u32(&q8.tensor("blk.1.attn_k.weight")->data[34 * 2], 0x7e00u);
  EXPECT_EQ(with(q8, 1u << GB_GEAR_MID), GB_ERR_CORRUPT);
  EXPECT_EQ(with(q8, 1u << GB_GEAR_HIGH), GB_ERR_CORRUPT);  // dequantized: NaN weights
}

}  // namespace
