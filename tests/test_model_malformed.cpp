// test_model_malformed.cpp — the .gbx reader against a malformed-file corpus
// generated here from a good file: truncations, flipped bytes (CRC), and
// planted inconsistencies behind valid CRCs. Each case expects its specific
// status, and opening from memory never reads outside the buffer (ASan).
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <random>
#include <vector>

#include <gtest/gtest.h>

#include "bytes.h"
#include "convert.h"
#include "format.h"
#include "test_util.h"

namespace {

using gb::ld_u32;
using gb::ld_u64;
using gb::st_u32;
using gb::st_u64;

// Opens an image from a tightly sized heap copy (ASan sees any over-read).
gb_status open_image(const std::vector<uint8_t> &img) {
  const size_t n = img.size();
  void *buf = aligned_alloc(64, (n + 63) / 64 * 64 + 64);
  // Place the image flush against the end of an exact-size region when aligned.
  if (n) memcpy(buf, img.data(), n);
  gb_model_options o = gbt::quiet_model_options();
  gb_model *m = nullptr;
  const gb_status st = gb_model_open_memory(buf, n, &o, &m);
  if (st == GB_OK) gb_model_close(m);
  free(buf);
  return st;
}

struct Image {
  std::vector<uint8_t> b;
  uint32_t n_sections() const { return ld_u32(&b[16]); }
  uint8_t *entry(uint32_t i) { return &b[gb::kHeaderFixedBytes + i * gb::kSectionEntryBytes]; }
  uint8_t *section(uint32_t kind) {
    for (uint32_t i = 0; i < n_sections(); i++)
      if (ld_u32(entry(i)) == kind) return &b[ld_u64(entry(i) + 8)];
    return nullptr;
  }
  uint8_t *tensor(uint32_t i) { return section(gb::kSecTensors) + 16 + i * gb::kTensorEntryBytes; }
  uint32_t n_tensors() { return ld_u32(section(gb::kSecTensors)); }
  int find_tensor(uint32_t kind, uint32_t tier) {
    for (uint32_t i = 0; i < n_tensors(); i++)
      if (ld_u32(tensor(i)) == kind && ld_u32(tensor(i) + 8) == tier) return (int)i;
    return -1;
  }
};

class Malformed : public ::testing::Test {
 protected:
  void SetUp() override {
    good_.b = gbt::read_file(gbt::stories260k_gbx());
    ASSERT_GT(good_.b.size(), 4096u);
    ASSERT_EQ(open_image(good_.b), GB_OK);
  }
  // Apply f to a copy, fix the CRCs, and expect status `want`.
  template <typename F>
  void expect_planted(gb_status want, F f, const char *what) {
    Image img = good_;
    f(img);
    gbt::gbx_fix_crcs(img.b);
    EXPECT_EQ(open_image(img.b), want) << what;
  }
  Image good_;
};

TEST_F(Malformed, EmptyAndTiny) {
  EXPECT_EQ(open_image({}), GB_ERR_TRUNCATED);
  EXPECT_EQ(open_image({'G', 'E', 'A'}), GB_ERR_TRUNCATED);
  EXPECT_EQ(open_image({'X', 'Y', 'Z', 'W', 0, 0, 0, 0, 0, 0}), GB_ERR_BAD_MAGIC);
}

TEST_F(Malformed, EveryTruncationIsRejected) {
  // Every structure boundary, plus a sweep of points through the file.
  std::vector<size_t> cuts = {1, 8, 12, 16, 24, 36, 40, 63, 64, 65};
  for (uint32_t i = 0; i < good_.n_sections(); i++) {
    const uint64_t off = ld_u64(good_.entry(i) + 8), size = ld_u64(good_.entry(i) + 16);
    cuts.push_back(gb::kHeaderFixedBytes + i * gb::kSectionEntryBytes + 4);
    cuts.push_back(off);
    cuts.push_back(off + size / 2);
    if (off + size < good_.b.size()) cuts.push_back(off + size);
  }
  for (size_t c = 97; c < good_.b.size(); c += good_.b.size() / 53) cuts.push_back(c);
  cuts.push_back(good_.b.size() - 1);
  for (size_t c : cuts) {
    if (c >= good_.b.size()) continue;
    std::vector<uint8_t> t(good_.b.begin(), good_.b.begin() + c);
    const gb_status st = open_image(t);
    EXPECT_EQ(st, c < 8 ? GB_ERR_TRUNCATED : (c < 64 ? GB_ERR_TRUNCATED : GB_ERR_TRUNCATED)) << "cut at " << c;
  }
}

TEST_F(Malformed, TrailingBytesAreCorrupt) {
  Image img = good_;
  img.b.push_back(0);
  EXPECT_EQ(open_image(img.b), GB_ERR_CORRUPT);
}

TEST_F(Malformed, FlippedBytesFailTheirChecksum) {
  std::mt19937 rng(1234);
  for (int k = 0; k < 60; k++) {
    Image img = good_;
    const size_t at = 64 + rng() % (img.b.size() - 64);
    // Padding between sections is not covered by any CRC; pick covered bytes.
    bool covered = at < gb::kHeaderFixedBytes + img.n_sections() * gb::kSectionEntryBytes;
    for (uint32_t i = 0; i < img.n_sections() && !covered; i++) {
      const uint64_t off = ld_u64(img.entry(i) + 8), size = ld_u64(img.entry(i) + 16);
      covered = at >= off && at < off + size;
    }
    if (!covered) continue;
    img.b[at] ^= (uint8_t)(1u << (rng() % 8));
    EXPECT_EQ(open_image(img.b), GB_ERR_CHECKSUM) << "flip at " << at;
  }
  Image img = good_;
  img.b[20] ^= 1;  // header field without fixing the header CRC
  EXPECT_NE(open_image(img.b), GB_OK);
}

TEST_F(Malformed, HeaderFields) {
  expect_planted(GB_ERR_BAD_MAGIC, [](Image &i) { i.b[3] = 'x'; }, "magic");
  expect_planted(GB_ERR_UNSUPPORTED_VERSION, [](Image &i) { st_u32(&i.b[8], 99); }, "version");
  expect_planted(GB_ERR_CORRUPT, [](Image &i) { st_u32(&i.b[16], 0); }, "zero sections");
  expect_planted(GB_ERR_CORRUPT, [](Image &i) { st_u32(&i.b[16], 0xFFFFFFFF); }, "huge section count");
  expect_planted(GB_ERR_CORRUPT, [](Image &i) { st_u32(&i.b[12], 1000); }, "header_bytes");
  expect_planted(GB_ERR_CORRUPT, [](Image &i) { st_u32(&i.b[20], 3000); }, "page_align not a power of two");
  expect_planted(GB_ERR_CORRUPT, [](Image &i) { st_u32(&i.b[20], 0); }, "page_align zero");
  expect_planted(GB_ERR_TRUNCATED, [](Image &i) { st_u64(&i.b[24], i.b.size() + 10); }, "file_size larger");
  expect_planted(GB_ERR_CORRUPT, [](Image &i) { st_u64(&i.b[24], i.b.size() - 10); }, "file_size smaller");
}

TEST_F(Malformed, SectionTable) {
  expect_planted(GB_ERR_TRUNCATED, [](Image &i) { st_u64(i.entry(1) + 16, 1ull << 62); }, "section size huge");
  expect_planted(GB_ERR_TRUNCATED, [](Image &i) { st_u64(i.entry(1) + 8, UINT64_MAX - 63); }, "offset overflow");
  expect_planted(GB_ERR_CORRUPT, [](Image &i) { st_u64(i.entry(1) + 8, ld_u64(i.entry(1) + 8) + 4); }, "misaligned offset");
  expect_planted(GB_ERR_CORRUPT, [](Image &i) { st_u32(i.entry(2), gb::kSecMeta); }, "duplicate kind");
  expect_planted(GB_ERR_CORRUPT, [](Image &i) { st_u32(i.entry(0), 99); }, "META missing");
  expect_planted(GB_ERR_CORRUPT, [](Image &i) { st_u64(i.entry(2) + 8, ld_u64(i.entry(1) + 8)); }, "overlapping sections");
}

TEST_F(Malformed, MetaFields) {
  auto meta = [](Image &i) { return i.section(gb::kSecMeta); };
  expect_planted(GB_ERR_UNSUPPORTED_TYPE, [&](Image &i) { st_u32(meta(i) + 4, 10); }, "arch");  // one past the table's ids
  expect_planted(GB_ERR_CORRUPT, [&](Image &i) { st_u32(meta(i) + 8, 0); }, "dim 0");
  expect_planted(GB_ERR_CORRUPT, [&](Image &i) { st_u32(meta(i) + 16, 0); }, "layers 0");
  expect_planted(GB_ERR_CORRUPT, [&](Image &i) { st_u32(meta(i) + 24, 3); }, "heads % kv_heads");
  expect_planted(GB_ERR_CORRUPT, [&](Image &i) { st_u32(meta(i) + 28, 7); }, "odd head_dim");
  expect_planted(GB_ERR_CORRUPT, [&](Image &i) { st_u32(meta(i) + 44, 10); }, "rope_dim > head_dim");
  expect_planted(GB_ERR_CORRUPT, [&](Image &i) { st_u32(meta(i) + 40, 5); }, "rope type");
  expect_planted(GB_ERR_CORRUPT, [&](Image &i) { gb::st_f32(meta(i) + 52, -1.0f); }, "eps");
  expect_planted(GB_ERR_CORRUPT, [&](Image &i) { st_u32(meta(i) + 56, 5000); }, "bos id");
  expect_planted(GB_ERR_CORRUPT, [&](Image &i) { st_u32(meta(i) + 32, 511); }, "vocab vs VOCAB");
  // A dimension change the tensors do not follow.
  expect_planted(GB_ERR_SHAPE_MISMATCH, [&](Image &i) { st_u32(meta(i) + 12, 200); }, "hidden_dim vs tensors");
}

TEST_F(Malformed, VocabFields) {
  auto v = [](Image &i) { return i.section(gb::kSecVocab); };
  expect_planted(GB_ERR_CORRUPT, [&](Image &i) { st_u32(v(i) + 4, 100000); }, "max piece");
  expect_planted(GB_ERR_CORRUPT, [&](Image &i) { st_u32(v(i) + 8, 0x7FFFFFFF); }, "blob size");
  const uint32_t n = 512;
  expect_planted(GB_ERR_CORRUPT, [&](Image &i) { st_u32(v(i) + 16 + 4 * n + 4 * 300, 0xFFFFFF); }, "offset past blob");
  expect_planted(GB_ERR_CORRUPT, [&](Image &i) { v(i)[16 + 8 * n + 4 + 10] = 0; }, "token type 0");
  expect_planted(GB_ERR_CORRUPT, [&](Image &i) { st_u32(v(i) + 16 + 4 * 7, 0x7FC00000); }, "NaN score");
}

TEST_F(Malformed, TensorDirectory) {
  expect_planted(GB_ERR_CORRUPT, [](Image &i) { st_u32(i.section(gb::kSecTensors), 0x10000000); }, "tensor count");
  expect_planted(GB_ERR_CORRUPT, [](Image &i) { st_u32(i.section(gb::kSecTensors) + 4, 32); }, "entry size");
  expect_planted(GB_ERR_MISSING_TENSOR, [](Image &i) { st_u32(i.section(gb::kSecTensors), i.n_tensors() - 1); }, "last tensor dropped");
  expect_planted(GB_ERR_CORRUPT, [](Image &i) { st_u32(i.tensor(3), 99); }, "kind");
  expect_planted(GB_ERR_CORRUPT, [](Image &i) { st_u32(i.tensor(3) + 4, 1000); }, "layer");
  expect_planted(GB_ERR_UNSUPPORTED_TYPE, [](Image &i) { st_u32(i.tensor(3) + 16, 5); }, "layout");
  // The 16-row interleaved layout: q4 tier matrices with whole groups only.
  expect_planted(GB_ERR_UNSUPPORTED_TYPE, [](Image &i) { st_u32(i.tensor(i.find_tensor(gb::kWq, GB_GEAR_HIGH)) + 16, 1); },
                 "rows16 on an f16 matrix");
  expect_planted(GB_ERR_UNSUPPORTED_TYPE, [](Image &i) { st_u32(i.tensor(i.find_tensor(gb::kTokEmbd, 255)) + 16, 1); },
                 "rows16 on the embedding");
  expect_planted(GB_ERR_CORRUPT, [](Image &i) {
    const int t = i.find_tensor(gb::kW1, GB_GEAR_LOW);  // stories260K: 172 rows
    ASSERT_NE(ld_u32(i.tensor(t) + 20) % 16, 0u);
    st_u32(i.tensor(t) + 16, 1);
  }, "rows16 on a matrix of 172 rows");
  expect_planted(GB_ERR_UNSUPPORTED_TYPE, [](Image &i) { st_u32(i.tensor(3) + 12, 77); }, "format");
  expect_planted(GB_ERR_SHAPE_MISMATCH, [](Image &i) { st_u32(i.tensor(3) + 20, ld_u32(i.tensor(3) + 20) + 1); }, "rows");
  expect_planted(GB_ERR_CORRUPT, [](Image &i) { st_u64(i.tensor(3) + 40, ld_u64(i.tensor(3) + 40) + 1); }, "nbytes");
  expect_planted(GB_ERR_CORRUPT, [](Image &i) { st_u64(i.tensor(3) + 32, 1ull << 40); }, "offset past section");
  expect_planted(GB_ERR_CORRUPT, [](Image &i) { st_u64(i.tensor(3) + 32, ld_u64(i.tensor(3) + 32) + 2); }, "misaligned tensor");
  expect_planted(GB_ERR_CORRUPT, [](Image &i) { st_u32(i.tensor(3) + 28, 200); }, "section index");
  expect_planted(GB_ERR_CORRUPT, [](Image &i) {
    // Duplicate: entry 5 rewritten as a copy of entry 4.
    memcpy(i.tensor(5), i.tensor(4), gb::kTensorEntryBytes);
  }, "duplicate tensor");
  expect_planted(GB_ERR_UNSUPPORTED_TYPE, [](Image &i) {
    const int t = i.find_tensor(gb::kWq, GB_GEAR_LOW);
    st_u32(&i.b[8], 2);  // before version 3 a tier has one format
    st_u32(i.tensor(t) + 16, gb::kLayoutRowMajor);
    st_u32(i.tensor(t) + 12, gb::kFmtQ8);  // a q8 matrix in the q4 tier
  }, "tier format (version 2)");
  // Format ids: 4 is q4r16, an in-memory id only; the GGUF formats need
  // version 3 and rows of whole blocks (stories260K: 64 columns, not 256).
  expect_planted(GB_ERR_UNSUPPORTED_TYPE, [](Image &i) { st_u32(i.tensor(3) + 12, gb::kFmtQ4R16); }, "format 4 in a file");
  expect_planted(GB_ERR_UNSUPPORTED_TYPE, [](Image &i) {
    st_u32(&i.b[8], 2);
    st_u32(i.tensor(i.find_tensor(gb::kWq, GB_GEAR_MID)) + 12, gb::kFmtQ4_1);
  }, "GGUF format in a version 2 file");
  expect_planted(GB_ERR_CORRUPT, [](Image &i) { st_u32(i.tensor(i.find_tensor(gb::kWq, GB_GEAR_MID)) + 12, gb::kFmtQ4K); },
                 "q4k row of 64 columns");
  expect_planted(GB_ERR_CORRUPT, [](Image &i) { st_u32(i.tensor(i.find_tensor(gb::kWq, GB_GEAR_MID)) + 12, gb::kFmtQ5_0); },
                 "q5_0 matrix with q8's byte count");
}

// The version 3 META fields, and files of version 2 that have none.
TEST_F(Malformed, Version3MetaFields) {
  auto meta = [](Image &i) { return i.section(gb::kSecMeta); };
  expect_planted(GB_ERR_CORRUPT, [&](Image &i) { st_u32(meta(i) + 144, 4); }, "default gear 4");
  expect_planted(GB_ERR_CORRUPT, [&](Image &i) { st_u32(meta(i) + 144, 0x80000001u); }, "default gear negative");
  expect_planted(GB_ERR_CORRUPT, [&](Image &i) { meta(i)[148 + 2] = 4; }, "tier origin 4");
  expect_planted(GB_ERR_CORRUPT, [&](Image &i) { st_u32(meta(i) + 152, 2); }, "quantized_source 2");
  // A default tier the file lacks (a file with the high tier only).
  const std::string high = gbt::temp_dir() + "/malformed-high-only.gbx";
  gb::ConvertOptions co;
  co.tiers = 1u << GB_GEAR_HIGH;
  co.page_align = 4096;
  co.log.fn = gbt::quiet_log;
  ASSERT_EQ(gb::convert_llama2c(gbt::shared_path("models/stories260K.bin").c_str(), gbt::shared_path("models/tok512.bin").c_str(),
                                high.c_str(), co),
            GB_OK);
  Image h;
  h.b = gbt::read_file(high);
  unlink(high.c_str());
  ASSERT_EQ(ld_u32(h.section(gb::kSecMeta) + 144), (uint32_t)GB_GEAR_HIGH);  // the only tier is the default
  ASSERT_EQ(open_image(h.b), GB_OK);
  st_u32(h.section(gb::kSecMeta) + 144, GB_GEAR_MID);
  gbt::gbx_fix_crcs(h.b);
  EXPECT_EQ(open_image(h.b), GB_ERR_CORRUPT) << "default gear absent";
  // Version 2: the fields are ignored (no origins, mid is the default).
  Image v2 = good_;
  st_u32(&v2.b[8], 2);
  st_u32(v2.section(gb::kSecMeta) + 144, 0);
  gbt::gbx_fix_crcs(v2.b);
  EXPECT_EQ(open_image(v2.b), GB_OK);
}

TEST_F(Malformed, RandomCorruptionBehindValidCrcsNeverCrashes) {
  // Random field damage in the metadata sections, CRCs recomputed: any
  // status is fine, a crash or an ASan report is not. Accepted images must
  // also decode a few tokens without faults.
  std::mt19937 rng(99);
  int rejected = 0;
  for (int k = 0; k < 400; k++) {
    Image img = good_;
    const uint32_t kinds[3] = {gb::kSecMeta, gb::kSecVocab, gb::kSecTensors};
    uint8_t *sec = img.section(kinds[k % 3]);
    uint64_t size = 0;
    for (uint32_t i = 0; i < img.n_sections(); i++)
      if (ld_u32(img.entry(i)) == kinds[k % 3]) size = ld_u64(img.entry(i) + 16);
    const uint64_t at = rng() % (size > 256 ? 256 : size) + (k % 2 ? rng() % size : 0);
    if (at + 4 > size) continue;
    const uint32_t vals[] = {0u, 1u, 0xFFFFFFFFu, 0x80000000u, (uint32_t)rng(), 64u, 4096u};
    st_u32(sec + (at & ~3ull), vals[rng() % 7]);
    gbt::gbx_fix_crcs(img.b);
    gb_model_options o = gbt::quiet_model_options();
    gb_model *m = nullptr;
    void *buf = aligned_alloc(64, (img.b.size() + 63) / 64 * 64);
    memcpy(buf, img.b.data(), img.b.size());
    if (gb_model_open_memory(buf, img.b.size(), &o, &m) == GB_OK) {
      gb_session_options so;
      gb_session_options_init(&so);
      so.log = gbt::quiet_log;
      so.gear = GB_GEAR_LOW;
      gb_session *s = nullptr;
      if (gb_session_create(m, &so, nullptr, 0, &s) == GB_OK) {
        int32_t toks[64];
        size_t n;
        if (gb_tokenize(m, "Once upon", 9, GB_TOKENIZE_ADD_BOS, toks, 64, &n) == GB_OK && gb_prefill(s, toks, n) == GB_OK)
          for (int i = 0; i < 3; i++) gb_decode_step(s, nullptr, nullptr);
        gb_session_destroy(s);
      }
      gb_model_close(m);
    } else {
      rejected++;
    }
    free(buf);
  }
  EXPECT_GT(rejected, 100);
}

}  // namespace
