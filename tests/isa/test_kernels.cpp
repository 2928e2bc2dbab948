// test_kernels.cpp — kernels against references. The generic kernels are
// checked against a double-precision dequantize-then-dot reference (GGUF's
// block formats: dequantized by the converter's ggml decoder, the format
// table's decoder, which tests/test_gguf_fixtures.cpp holds to ggml's values
// bit for bit); every other kernel in
// arch/kernels.inc is checked against the generic kernel of its slot on
// random data (seed printed), with odd sizes, tails and canaries. The tests
// run over every format id (GB_FMT_COUNT), so a new kernels.inc line is
// tested without being named here. A kernel whose ISA the CPU has must run;
// one it lacks must not be chosen.
#include <math.h>
#include <string.h>

#include <random>
#include <string>
#include <vector>

#include <gtest/gtest.h>

#include "f16.h"
#include "format.h"
#include "gearbx_port.h"
#include "ggml_types.h"
#include "kernels.h"
#include "krows16.h"
#include "quant.h"
#include "test_util.h"

namespace {

const size_t kCols[] = {1, 3, 7, 15, 17, 31, 32, 33, 63, 64, 127, 129, 172, 256, 768};
const size_t kRows[] = {1, 2, 3, 5, 8, 17, 64};
constexpr uint8_t kCanary = 0xCD;

struct Matrix {
  uint32_t fmt;
  size_t rows, cols;
  std::vector<uint8_t> bytes;  // + 64 canary bytes
};

// q4r16, q4kr16, q6kr16 (16-row interleaved, the formats in memory only)
// need whole groups of 16 rows.
const size_t kRows16[] = {16, 32, 48, 64, 128};
bool is_r16(uint32_t fmt) { return gb::is_memory_only_format(fmt); }
bool is_kr16(uint32_t fmt) { return is_r16(fmt) && gb::is_gguf_format(fmt); }
std::vector<size_t> rows_for(uint32_t fmt) {
  return is_r16(fmt) ? std::vector<size_t>(std::begin(kRows16), std::end(kRows16))
                     : std::vector<size_t>(std::begin(kRows), std::end(kRows));
}
// Row ranges inside a matrix of `rows`, as a thread split could give them
// (q4r16: whole groups).
size_t range_begin(uint32_t fmt, size_t rows) { return is_r16(fmt) ? 16 * ((rows / 3) / 16) : rows / 3; }
size_t range_end(uint32_t fmt, size_t rows) { return is_r16(fmt) ? rows - 16 * ((rows / 4) / 16) : rows - rows / 4; }

// GGUF's block formats: the format table's row (the 16-row K layouts: their
// row-major format's row), whose GGUF type the converter decodes (the
// reference); nullptr for another format.
const gb::FormatInfo *gguf(uint32_t fmt) {
  const gb::FormatInfo *f = gb::format_info(gb::file_format(fmt));
  return f && f->gguf ? f : nullptr;
}

// Column counts a format is tested with: GGUF rows are whole blocks.
std::vector<size_t> cols_for(uint32_t fmt) {
  const gb::FormatInfo *g = gguf(fmt);
  if (!g) return std::vector<size_t>(std::begin(kCols), std::end(kCols));
  if (g->weights == 32) return {32, 64, 96, 256, 512, 768};
  return {256, 512, 768, 1024};
}

size_t row_bytes_of(uint32_t fmt, size_t cols) { return gb::row_bytes(fmt, cols); }

// Random GGUF blocks: random code and scale bytes, finite f16 scales; every
// fifth row and about one block in eight all zero. Scales are of a model's
// magnitude, or (wide) any sign and exponent up to 2^6, subnormals included.
void random_gguf_rows(const gb::FormatInfo &g, uint8_t *out, size_t rows, size_t cols, bool wide, std::mt19937 &rng) {
  std::uniform_real_distribution<float> mag(g.weights == 32 ? 0.005f : 0.0005f, g.weights == 32 ? 0.1f : 0.01f);
  const size_t nb = rows * (cols / g.weights);
  for (size_t b = 0; b < nb; b++) {
    uint8_t *blk = out + b * g.bytes;
    if ((b / (cols / g.weights)) % 5 == 4 || rng() % 8 == 0) {
      memset(blk, 0, g.bytes);
      continue;
    }
    for (uint32_t i = 0; i < g.bytes; i++) blk[i] = (uint8_t)rng();
    auto scale16 = [&]() -> uint16_t {
      const uint32_t sign = rng() % 2 ? 0x8000u : 0u;
      return wide ? (uint16_t)(sign | (rng() % 22) << 10 | (rng() & 0x3ff)) : (uint16_t)(sign | gb::f32_to_f16(mag(rng)));
    };
    for (int at : {g.d_at, g.m_at}) {
      if (at < 0) continue;
      const uint16_t h = scale16();
      blk[at] = (uint8_t)h;
      blk[at + 1] = (uint8_t)(h >> 8);
    }
    if (g.id == GB_FMT_IQ1M) {  // d: the top nibbles of the scale words at 48, 50, 52, 54
      const uint16_t h = scale16();
      for (int k = 0; k < 4; k++) blk[49 + 2 * k] = (uint8_t)((blk[49 + 2 * k] & 0x0f) | (((h >> (4 * k)) & 15) << 4));
    }
    if (g.id == GB_FMT_MXFP4)  // 2^(e - 128): a model's magnitudes (2^-12..2^-4), or (wide) 2^-40..2^8
      blk[0] = (uint8_t)(wide ? 88 + rng() % 49 : 116 + rng() % 9);
    if (g.id == GB_FMT_NVFP4 && !wide)  // UE4M3 group scales: exponents 1..4 (2^-7..2^-3 after halving); wide: any byte
      for (int k = 0; k < 4; k++) blk[k] = (uint8_t)(8 + rng() % 32);
  }
}

Matrix make_matrix(uint32_t fmt, size_t rows, size_t cols, std::mt19937 &rng, bool wide = false) {
  std::normal_distribution<float> nd(0.0f, 0.5f);
  Matrix m{fmt, rows, cols, {}};
  const uint32_t qfmt = gb::file_format(fmt);
  const size_t rb = row_bytes_of(qfmt, cols);
  m.bytes.assign(rows * rb + 64, kCanary);
  if (const gb::FormatInfo *g = gguf(fmt)) {
    random_gguf_rows(*g, m.bytes.data(), rows, cols, wide, rng);
    if (is_kr16(fmt)) {
      std::vector<uint8_t> rm(m.bytes.begin(), m.bytes.begin() + rows * rb);
      gb_krows16::from_rows(m.bytes.data(), rm.data(), rows, cols, g->bytes);
    }
    return m;
  }
  std::vector<float> row(cols);
  for (size_t r = 0; r < rows; r++) {
    for (auto &v : row) v = nd(rng);
    if (r % 5 == 4) std::fill(row.begin(), row.end(), 0.0f);  // zero blocks: scale 0
    gb::quantize_row(qfmt, m.bytes.data() + r * rb, row.data(), cols);
  }
  if (fmt == GB_FMT_Q4R16) {
    std::vector<uint8_t> rm(m.bytes.begin(), m.bytes.begin() + rows * rb);
    gb::q4_rows16_from_rows(m.bytes.data(), rm.data(), rows, cols);
  }
  return m;
}

// Row r of W as floats (any layout).
void dequant_row(const Matrix &W, size_t r, float *out) {
  if (is_kr16(W.fmt)) {
    const gb::FormatInfo *g = gguf(W.fmt);
    const size_t rb = row_bytes_of(W.fmt, W.cols);
    std::vector<uint8_t> rm(W.rows * rb);
    gb_krows16::to_rows(rm.data(), W.bytes.data(), W.rows, W.cols, g->bytes);
    gb::ggml_dequantize_row(g->ggml, rm.data() + r * rb, out, W.cols);
    return;
  }
  if (W.fmt == GB_FMT_Q4R16) {
    const size_t rb = gb::row_bytes(gb::kFmtQ4, W.cols);
    std::vector<uint8_t> rm(W.rows * rb);
    gb::q4_rows_from_rows16(rm.data(), W.bytes.data(), W.rows, W.cols);
    gb::dequantize_row(gb::kFmtQ4, out, rm.data() + r * rb, W.cols);
    return;
  }
  const uint8_t *row = W.bytes.data() + r * row_bytes_of(W.fmt, W.cols);
  if (const gb::FormatInfo *g = gguf(W.fmt)) {
    gb::ggml_dequantize_row(g->ggml, row, out, W.cols);
    return;
  }
  gb::dequantize_row(W.fmt, out, row, W.cols);
}

std::vector<float> make_vector(size_t n, std::mt19937 &rng) {
  std::normal_distribution<float> nd(0.0f, 1.0f);
  std::vector<float> x(n);
  for (auto &v : x) v = nd(rng);
  return x;
}

uint32_t seed_for(const char *name) {
  uint32_t h = 2166136261u;
  for (const char *p = name; *p; p++) h = (h ^ (uint8_t)*p) * 16777619u;
  return h;
}

double tol(double ref_abs_sum) { return 1e-5 * ref_abs_sum + 1e-6; }

// The fp16 folder's f16 gemv rounds every product and every partial sum of
// four products to binary16 (arch/arm64/fp16/gemv_f16.cpp): per block at
// most 4 u (1 + u)^4 sum|w x| (u = 2^-11) plus 2^-25 per product below
// binary16's normal range, on top of tol()'s f32 rounding. Its exact
// definition is checked bit for bit by Kernels.Fp16F16GemvIsItsDefinition.
double tol_for(const std::string &kernel, double ref_abs_sum, size_t cols) {
  if (kernel.find("f16_gemv__fp16") != std::string::npos)
    return ldexp(1.01, -9) * ref_abs_sum + (double)cols * ldexp(1.0, -25) + tol(ref_abs_sum);
  return tol(ref_abs_sum);
}

// Generic q8x quantizer: exact per its definition.
TEST(Kernels, GenericQuantizeActMatchesDefinition) {
  std::mt19937 rng(seed_for("quant_act"));
  for (size_t n : kCols) {
    std::vector<float> x = make_vector(n, rng);
    std::vector<gb_q8x_block> q((n + 31) / 32 + 1);
    memset(q.data(), kCanary, q.size() * sizeof(gb_q8x_block));
    gb_q8x_quantize__generic(q.data(), x.data(), n);
    for (size_t b = 0; b < (n + 31) / 32; b++) {
      float amax = 0;
      for (size_t j = 0; j < 32 && b * 32 + j < n; j++) amax = fmaxf(amax, fabsf(x[b * 32 + j]));
      EXPECT_FLOAT_EQ(q[b].d, amax / 127.0f);
      for (size_t j = 0; j < 32; j++) {
        const float v = b * 32 + j < n ? x[b * 32 + j] : 0.0f;
        const float want = amax > 0 ? roundf(v * (127.0f / amax)) : 0.0f;
        EXPECT_NEAR((float)q[b].qs[j], want, 1.0f);  // 1/d vs 127/amax may round apart at .5
      }
      int32_t sum = 0;
      for (size_t j = 0; j < 32; j++) sum += q[b].qs[j];
      EXPECT_EQ(q[b].sum, sum);
    }
    const uint8_t *tail = reinterpret_cast<const uint8_t *>(&q[(n + 31) / 32]);
    for (size_t i = 0; i < sizeof(gb_q8x_block); i++) ASSERT_EQ(tail[i], kCanary);
  }
}

// Generic GEMV of each format against a double dequantize-then-dot.
TEST(Kernels, GenericGemvMatchesDoubleReference) {
  gb_kernels generic;
  gb_kernels_select(&generic, GB_ISA_GENERIC);
  for (uint32_t fmt = 0; fmt < GB_FMT_COUNT; fmt++) {
    const gb_gemv_fn gemv = generic.gemv[fmt];
    ASSERT_NE(gemv, nullptr) << "fmt " << fmt;
    std::mt19937 rng(seed_for("gemv") + fmt);
    for (size_t cols : cols_for(fmt))
      for (size_t rows : rows_for(fmt)) {
        Matrix W = make_matrix(fmt, rows, cols, rng);
        std::vector<float> x = make_vector(cols, rng);
        std::vector<gb_q8x_block> xq((cols + 31) / 32);
        gb_q8x_quantize__generic(xq.data(), x.data(), cols);
        // Block formats multiply the quantized activations: reference uses them too.
        std::vector<float> xr(cols);
        for (size_t c = 0; c < cols; c++) xr[c] = fmt >= gb::kFmtQ8 ? xq[c / 32].d * xq[c / 32].qs[c % 32] : x[c];
        std::vector<float> y(rows + 16, -7.0f);
        gemv(y.data(), W.bytes.data(), x.data(), xq.data(), 0, rows, cols);
        std::vector<float> wr(cols);
        const size_t rb = row_bytes_of(fmt, cols);
        for (size_t r = 0; r < rows; r++) {
          dequant_row(W, r, wr.data());
          double ref = 0, mag = 0;
          for (size_t c = 0; c < cols; c++) {
            ref += (double)wr[c] * xr[c];
            mag += fabs((double)wr[c] * xr[c]);
          }
          ASSERT_NEAR(y[r], ref, tol(mag)) << "fmt " << fmt << " rows " << rows << " cols " << cols << " r " << r;
        }
        for (size_t r = rows; r < rows + 16; r++) ASSERT_EQ(y[r], -7.0f) << "wrote past the rows";
        for (size_t i = rows * rb; i < W.bytes.size(); i++) ASSERT_EQ(W.bytes[i], kCanary);
      }
  }
}

// The generic rows_to_f32 of every GGUF format, asked for any range of rows,
// gives those rows of the converter's one-row-at-a-time decoding bit for
// bit, with the block geometry the converter's GGUF type table reports, on
// model-like and on wide-ranging scales; nothing past the range's output is
// written. (That the decoder equals ggml's, value for value, is checked
// against gguf-py's dequantized values in test_gguf_fixtures.cpp.)
TEST(Kernels, GenericGgufRowRangesEqualWholeRowDecoding) {
  gb_kernels generic;
  gb_kernels_select(&generic, GB_ISA_GENERIC);
  for (const gb::FormatInfo &g : gb::kFormats) {
    if (!g.gguf || is_r16(g.id)) continue;  // GGUF's formats, row-major
    const gb::GgmlBlock gb_block = gb::ggml_block(g.ggml);
    EXPECT_EQ(gb_block.block, g.weights) << "fmt " << g.id;
    EXPECT_EQ(gb_block.bytes, g.bytes) << "fmt " << g.id;
    const gb_rows_to_f32_fn row = generic.rows_to_f32[g.id];
    ASSERT_NE(row, nullptr) << "fmt " << g.id;
    std::mt19937 rng(seed_for("gguf_rows") + g.id);
    for (bool wide : {false, true})
      for (size_t cols : cols_for(g.id)) {
        const size_t rows = 7;
        const Matrix W = make_matrix(g.id, rows, cols, rng, wide);
        std::vector<float> want(rows * cols);
        for (size_t r = 0; r < rows; r++)
          gb::ggml_dequantize_row(g.ggml, W.bytes.data() + r * row_bytes_of(g.id, cols), &want[r * cols], cols);
        const size_t ranges[][2] = {{0, rows}, {2, 5}, {rows - 1, rows}, {3, 4}};
        for (const auto &range : ranges) {
          const size_t n = (range[1] - range[0]) * cols;
          std::vector<float> got(n + 8, 5.0f);
          row(got.data(), W.bytes.data(), range[0], range[1], cols);
          ASSERT_EQ(0, memcmp(got.data(), &want[range[0] * cols], n * sizeof(float)))
              << "fmt " << g.id << " cols " << cols << (wide ? " wide scales" : "") << " rows " << range[0] << ".."
              << range[1];
          for (size_t i = n; i < n + 8; i++) ASSERT_EQ(got[i], 5.0f) << "fmt " << g.id << " wrote past its rows";
        }
      }
  }
}

// Row ranges: computing [a, b) touches only those rows.
TEST(Kernels, RowRangesAreIndependent) {
  std::mt19937 rng(seed_for("ranges"));
  for (uint32_t fmt = 0; fmt < GB_FMT_COUNT; fmt++) {
    const size_t cols = gguf(fmt) ? 3 * gguf(fmt)->weights : 100;
    gb_kernels k;
    gb_kernels_select(&k, GB_ISA_GENERIC);
    // q4r16 ranges are whole groups of 16 rows.
    const size_t u = is_r16(fmt) ? 16 : 1, rows = 37 * u;
    Matrix W = make_matrix(fmt, rows, cols, rng);
    std::vector<float> x = make_vector(cols, rng);
    std::vector<gb_q8x_block> xq((cols + 31) / 32);
    k.quantize_act(xq.data(), x.data(), cols);
    std::vector<float> full(rows), parts(rows, 99.0f);
    k.gemv[fmt](full.data(), W.bytes.data(), x.data(), xq.data(), 0, rows, cols);
    k.gemv[fmt](parts.data(), W.bytes.data(), x.data(), xq.data(), 0, 10 * u, cols);
    k.gemv[fmt](parts.data(), W.bytes.data(), x.data(), xq.data(), 10 * u, 11 * u, cols);
    k.gemv[fmt](parts.data(), W.bytes.data(), x.data(), xq.data(), 11 * u, rows, cols);
    EXPECT_EQ(0, memcmp(full.data(), parts.data(), rows * sizeof(float))) << "fmt " << fmt;
  }
}

// Every kernel of kernels.inc against the generic one of its slot.
struct Entry {
  std::string name;
  uint32_t req;
  int prio;
  int op;  // 0 gemv, 1 row, 2 quant_act, 3 gemm
  uint32_t fmt;
  gb_gemv_fn gemv;
  gb_rows_to_f32_fn row;
  gb_quantize_act_fn qa;
  gb_gemm_fn gemm = nullptr;
};

std::vector<Entry> all_kernels() {
  std::vector<Entry> v;
#define GB_GEMV(fmt, id, isa, req, prio) v.push_back({#fmt "_gemv__" #isa, req, prio, 0, (uint32_t)(id), gb_##fmt##_gemv__##isa, nullptr, nullptr});
#define GB_GEMVM(fmt, id, isa, req)
#define GB_ROW(fmt, id, isa, req, prio) \
  v.push_back({#fmt "_rows_to_f32__" #isa, req, prio, 1, (uint32_t)(id), nullptr, gb_##fmt##_rows_to_f32__##isa, nullptr});
#define GB_QUANT_ACT(isa, req, prio) v.push_back({"q8x_quantize__" #isa, req, prio, 2, 0, nullptr, nullptr, gb_q8x_quantize__##isa});
#define GB_ATTN(isa, req, prio)        // tests/test_attention.cpp
#define GB_KV_DEQUANT(isa, req, prio)  // tests/test_attention.cpp
#define GB_GEMM(fmt, id, isa, req, prio) v.push_back({#fmt "_gemm__" #isa, req, prio, 3, 0, nullptr, nullptr, nullptr, gb_##fmt##_gemm__##isa});
#include "kernels.inc"
#undef GB_GEMV
#undef GB_GEMVM
#undef GB_ROW
#undef GB_QUANT_ACT
#undef GB_ATTN
#undef GB_KV_DEQUANT
#undef GB_GEMM
  return v;
}

// The instruction-set folder of a kernel: its name after "__".
std::string isa_of(const char *name) {
  const char *p = strstr(name, "__");
  return p ? std::string(p + 2) : std::string();
}

TEST(Kernels, EverySimdVariantMatchesGeneric) {
  const uint32_t cpu = gb_port_cpu_features() | GB_ISA_GENERIC;
  const std::vector<Entry> ks = all_kernels();
  gb_kernels generic;  // the generic kernel of every slot
  gb_kernels_select(&generic, GB_ISA_GENERIC);
  const gb_gemv_fn *ggemv = generic.gemv;
  const gb_rows_to_f32_fn *grow = generic.rows_to_f32;
  int tested = 0;
  for (const Entry &e : ks) {
    if (e.req == GB_ISA_GENERIC) continue;
    if ((e.req & cpu) != e.req) {
      printf("skipping %s: this CPU lacks its ISA (features 0x%x)\n", e.name.c_str(), cpu);
      continue;
    }
    const uint32_t seed = seed_for(e.name.c_str());
    printf("testing %s (seed %u)\n", e.name.c_str(), seed);
    std::mt19937 rng(seed);
    tested++;
    if (e.op == 3) {
      for (size_t k : kCols)
        for (size_t n : kRows) {
          const size_t m = 1 + (k + n) % 9;
          std::vector<float> A = make_vector(m * k, rng), B = make_vector(n * k, rng);
          std::vector<float> a(m * n + 8, -3.0f), b(m * n + 8, -3.0f);
          gb_f32_gemm__generic(a.data(), n, A.data(), k, B.data(), k, m, n, k);
          e.gemm(b.data(), n, A.data(), k, B.data(), k, m, n, k);
          for (size_t i = 0; i < m * n; i++) ASSERT_NEAR(a[i], b[i], tol(4.0 * (double)k)) << e.name << " k " << k;
          for (size_t i = m * n; i < m * n + 8; i++) ASSERT_EQ(b[i], -3.0f) << e.name << " wrote past C";
        }
      continue;
    }
    size_t width_i = 0;
    for (size_t cols : e.op == 2 ? cols_for(GB_FMT_F32) : cols_for(e.fmt)) {
      std::vector<float> x = make_vector(cols, rng);
      // f16 kernels: every other width gets an x that f16 represents
      // exactly, as a session passes it (forward.cpp), which the AVX-512
      // gemv reads as f16 (its other path).
      if (e.fmt == gb::kFmtF16 && (width_i++ & 1))
        for (float &v : x) v = gb::f16_to_f32(gb::f32_to_f16(v));
      if (e.op == 2) {
        std::vector<gb_q8x_block> a((cols + 31) / 32 + 1), b((cols + 31) / 32 + 1);
        memset(a.data(), kCanary, a.size() * sizeof a[0]);
        memset(b.data(), kCanary, b.size() * sizeof b[0]);
        gb_q8x_quantize__generic(a.data(), x.data(), cols);
        e.qa(b.data(), x.data(), cols);
        ASSERT_EQ(0, memcmp(a.data(), b.data(), a.size() * sizeof a[0])) << e.name << " cols " << cols;
        continue;
      }
      for (size_t rows : rows_for(e.fmt)) {
        Matrix W = make_matrix(e.fmt, rows, cols, rng);
        if (e.op == 1) {
          // The last row alone, then a middle range of rows.
          std::vector<float> a(cols + 8, 5.0f), b(cols + 8, 5.0f);
          grow[e.fmt](a.data(), W.bytes.data(), rows - 1, rows, cols);
          e.row(b.data(), W.bytes.data(), rows - 1, rows, cols);
          ASSERT_EQ(0, memcmp(a.data(), b.data(), a.size() * sizeof(float))) << e.name;
          const size_t r0 = rows / 3, r1 = rows - rows / 4, n = (r1 - r0) * cols;
          std::vector<float> c(n + 8, 5.0f), d(n + 8, 5.0f);
          grow[e.fmt](c.data(), W.bytes.data(), r0, r1, cols);
          e.row(d.data(), W.bytes.data(), r0, r1, cols);
          ASSERT_EQ(0, memcmp(c.data(), d.data(), c.size() * sizeof(float))) << e.name << " rows " << r0 << ".." << r1;
          continue;
        }
        std::vector<gb_q8x_block> xq((cols + 31) / 32);
        gb_q8x_quantize__generic(xq.data(), x.data(), cols);
        std::vector<float> a(rows + 8, -3.0f), b(rows + 8, -3.0f);
        ggemv[e.fmt](a.data(), W.bytes.data(), x.data(), xq.data(), 0, rows, cols);
        e.gemv(b.data(), W.bytes.data(), x.data(), xq.data(), 0, rows, cols);
        std::vector<float> wr(cols);
        std::vector<double> mags(rows);
        for (size_t r = 0; r < rows; r++) {
          dequant_row(W, r, wr.data());
          double mag = 0;
          for (size_t c = 0; c < cols; c++) mag += fabs((double)wr[c] * x[c]);
          mags[r] = mag;
          ASSERT_NEAR(a[r], b[r], tol_for(e.name, mag, cols)) << e.name << " rows " << rows << " cols " << cols << " r " << r;
        }
        for (size_t r = rows; r < rows + 8; r++) ASSERT_EQ(b[r], -3.0f) << e.name << " wrote past its rows";
        // A row range not starting at 0 (how threads split a matrix): the
        // same rows, nothing outside the range written.
        const size_t r0 = range_begin(e.fmt, rows), r1 = range_end(e.fmt, rows);
        std::vector<float> c(rows + 8, -3.0f);
        e.gemv(c.data(), W.bytes.data(), x.data(), xq.data(), r0, r1, cols);
        for (size_t r = 0; r < rows + 8; r++) {
          if (r >= r0 && r < r1) {
            ASSERT_NEAR(c[r], a[r], tol_for(e.name, mags[r], cols)) << e.name << " range row " << r;
          } else {
            ASSERT_EQ(c[r], -3.0f) << e.name << " wrote outside [" << r0 << ", " << r1 << ") at " << r;
          }
        }
        // Split at a multiple of the row tile (how the session splits rows
        // between threads): bit-identical to one call over all the rows.
        const size_t cut = GB_GEMV_ROW_TILE * ((rows / 2) / GB_GEMV_ROW_TILE);
        std::vector<float> d(rows + 8, -3.0f);
        e.gemv(d.data(), W.bytes.data(), x.data(), xq.data(), 0, cut, cols);
        e.gemv(d.data(), W.bytes.data(), x.data(), xq.data(), cut, rows, cols);
        ASSERT_EQ(0, memcmp(b.data(), d.data(), d.size() * sizeof(float)))
            << e.name << " rows " << rows << " cols " << cols << ": split at row " << cut << " changes the result";
      }
    }
  }
  printf("%d non-generic kernels tested on this CPU\n", tested);
}

// ---- multi-position GEMV ----------------------------------------------------

struct GemvmEntry {
  std::string name;
  uint32_t req;
  uint32_t fmt;
  gb_gemvm_fn fn;
};

std::vector<GemvmEntry> all_gemvm() {
  std::vector<GemvmEntry> v;
#define GB_GEMV(fmt, id, isa, req, prio)
#define GB_GEMVM(fmt, id, isa, req) v.push_back({#fmt "_gemvm__" #isa, req, (uint32_t)(id), gb_##fmt##_gemvm__##isa});
#define GB_ROW(fmt, id, isa, req, prio)
#define GB_QUANT_ACT(isa, req, prio)
#include "kernels.inc"
#undef GB_GEMV
#undef GB_GEMVM
#undef GB_ROW
#undef GB_QUANT_ACT
  return v;
}

// The gemv of format fmt in folder isa (nullptr if none).
gb_gemv_fn gemv_of(uint32_t fmt, const std::string &isa) {
  for (const Entry &e : all_kernels())
    if (e.op == 0 && e.fmt == fmt && isa_of(e.name.c_str()) == isa) return e.gemv;
  return nullptr;
}

// Every gemvm against its own folder's gemv called once per position: equal
// bit for bit (the speculative verify must reproduce token-by-token decoding
// exactly), strided inputs and outputs, row ranges not starting at 0,
// canaries around every output row range.
TEST(Kernels, EveryGemvmMatchesItsGemvPerPosition) {
  const uint32_t cpu = gb_port_cpu_features() | GB_ISA_GENERIC;
  gb_kernels k;  // the session's quantizer, as forward.cpp quantizes x
  gb_kernels_select(&k, cpu);
  // Every row count to 17 (the tails of 4- and 16-row groups) and 64, at
  // 1, 2, 3, 4, 5, 8, 9 and 16 positions; under emulation (GB_TEST_SCALE <
  // 1) the row counts at the tails of each group size and the position
  // counts at the tails of 4 and 8.
  const bool full = gbt::test_scale() >= 1.0;
  const std::vector<size_t> kMs = full ? std::vector<size_t>{1, 2, 3, 4, 5, 8, 9, 16} : std::vector<size_t>{1, 3, 4, 5, 9, 16};
  std::vector<size_t> row_counts;
  if (full) {
    for (size_t r = 1; r <= 17; r++) row_counts.push_back(r);
  } else {
    row_counts = {1, 2, 3, 4, 5, 7, 8, 15, 16, 17};
  }
  row_counts.push_back(64);
  int tested = 0;
  for (const GemvmEntry &e : all_gemvm()) {
    if ((e.req & cpu) != e.req) {
      printf("skipping %s: this CPU lacks its ISA (features 0x%x)\n", e.name.c_str(), cpu);
      continue;
    }
    const gb_gemv_fn gemv = gemv_of(e.fmt, isa_of(e.name.c_str()));
    ASSERT_NE(gemv, nullptr) << e.name << " has no gemv in its folder";
    const uint32_t seed = seed_for(e.name.c_str());
    printf("testing %s (seed %u)\n", e.name.c_str(), seed);
    std::mt19937 rng(seed);
    tested++;
    const bool blocks = e.fmt >= gb::kFmtQ8;
    std::vector<size_t> cols_list = cols_for(e.fmt);
    // f16: one row longer than 2048 columns too, where the AVX-512 gemvm
    // reads the binary16 copy (and with a tail of 5 columns).
    if (e.fmt == gb::kFmtF16) cols_list.push_back(2085);
    for (size_t cols : cols_list) {
      const size_t nb = (cols + 31) / 32;
      const size_t ldx = cols + 5, ldxq = nb + 2;
      // Padding between positions: NaN floats and NaN-scaled blocks, so a
      // kernel reading past a position's vector cannot stay bit-identical.
      std::vector<float> X(GB_GEMVM_MAX_M * ldx, NAN), XE;
      std::vector<gb_q8x_block> XQ(GB_GEMVM_MAX_M * ldxq);
      memset(XQ.data(), 0xff, XQ.size() * sizeof XQ[0]);
      for (size_t i = 0; i < GB_GEMVM_MAX_M; i++) {
        std::vector<float> x = make_vector(cols, rng);
        // f16 kernels: odd positions hold values an f16 represents exactly,
        // as the session passes them (forward.cpp f16_activations), which
        // the AVX-512 gemv reads as f16; it must still equal the gemvm.
        if (e.fmt == gb::kFmtF16 && (i & 1))
          for (float &v : x) v = gb::f16_to_f32(gb::f32_to_f16(v));
        memcpy(&X[i * ldx], x.data(), cols * sizeof(float));
        k.quantize_act(&XQ[i * ldxq], x.data(), cols);
      }
      // And every position exact, as a session's f16 verify pass has them
      // (the AVX-512 gemvm reads one or two such positions as f16 too).
      const bool f16 = e.fmt == gb::kFmtF16;
      // The exact positions in binary16 as well, with their own stride
      // (what a session hands the f16 gemvm in XQ), NaN-padded in between.
      const size_t ldxh = cols + 3;
      std::vector<uint16_t> XH;
      if (f16) {
        XE = X;
        for (float &v : XE)
          if (v == v) v = gb::f16_to_f32(gb::f32_to_f16(v));
        XH.assign(GB_GEMVM_MAX_M * ldxh, 0x7e00);
        for (size_t i = 0; i < GB_GEMVM_MAX_M; i++)
          for (size_t c = 0; c < cols; c++) XH[i * ldxh + c] = gb::f32_to_f16(XE[i * ldx + c]);
      }
      for (size_t rows : is_r16(e.fmt) ? rows_for(e.fmt) : row_counts) {
        // f16: x as drawn, every position exact, and exact with the binary16 copy.
        for (int exact = 0; exact <= (f16 ? 2 : 0); exact++) {
          const float *Xp = blocks ? nullptr : exact ? XE.data() : X.data();
          const gb_q8x_block *XQp = blocks ? XQ.data() : nullptr;
          const gb_q8x_block *XQm = exact == 2 ? reinterpret_cast<const gb_q8x_block *>(XH.data()) : XQp;
          const size_t ldxqm = exact == 2 ? ldxh : ldxq;
          const Matrix W = make_matrix(e.fmt, rows, cols, rng);
          const size_t ranges[2][2] = {{0, rows}, {range_begin(e.fmt, rows), range_end(e.fmt, rows)}};
          for (const auto &range : ranges) {
            const size_t r0 = range[0], r1 = range[1];
            for (size_t m : kMs) {
              const size_t ldy = rows + 3;
              std::vector<float> want(m * ldy + 8, -3.0f), got(m * ldy + 8, -3.0f);
              for (size_t i = 0; i < m; i++)
                gemv(&want[i * ldy], W.bytes.data(), Xp ? Xp + i * ldx : nullptr, XQp ? XQp + i * ldxq : nullptr, r0, r1,
                     cols);
              e.fn(got.data(), ldy, W.bytes.data(), Xp, ldx, XQm, ldxqm, m, r0, r1, cols);
              if (memcmp(want.data(), got.data(), want.size() * sizeof(float)) != 0) {
                size_t j = 0;
                while (memcmp(&want[j], &got[j], sizeof(float)) == 0) j++;
                FAIL() << e.name << " cols " << cols << " rows " << rows << " range [" << r0 << ", " << r1 << ") m " << m
                       << ": first difference at position " << j / ldy << " row " << j % ldy << ": gemv " << want[j]
                       << ", gemvm " << got[j] << (j % ldy < r0 || j % ldy >= r1 || j >= m * ldy ? " (outside the range)" : "")
                       << (exact ? ", every position f16-exact" : "") << (exact == 2 ? ", binary16 copy" : "");
              }
            }
          }
        }
      }
    }
  }
  printf("%d gemvm kernels tested on this CPU\n", tested);
}

// K-quant rows longer than any kernel's chunk of arranged activations
// (the AVX-512 ones take up to 128 super-blocks at a time, 32768 columns):
// 130 super-blocks, so every kernel sums a row in more than one chunk. Each
// gemv within rounding of the generic one, each gemvm per position bit for
// bit its own folder's gemv.
TEST(Kernels, KQuantRowsLongerThanAChunk) {
  const uint32_t cpu = gb_port_cpu_features() | GB_ISA_GENERIC;
  gb_kernels generic;
  gb_kernels_select(&generic, GB_ISA_GENERIC);
  const size_t cols = 130 * GB_QK_K;
  int tested = 0;
  for (const Entry &e : all_kernels()) {
    const gb::FormatInfo *g = gguf(e.fmt);
    if (e.op != 0 || !g || g->weights != GB_QK_K || (e.req & cpu) != e.req) continue;
    std::mt19937 rng(seed_for(e.name.c_str()));
    const size_t rows = is_r16(e.fmt) ? 32 : 5;
    Matrix W = make_matrix(e.fmt, rows, cols, rng);
    const std::vector<float> x = make_vector(cols, rng);
    std::vector<gb_q8x_block> xq(cols / 32);
    gb_q8x_quantize__generic(xq.data(), x.data(), cols);
    std::vector<float> a(rows + 8, -3.0f), b(rows + 8, -3.0f), wr(cols);
    generic.gemv[e.fmt](a.data(), W.bytes.data(), x.data(), xq.data(), 0, rows, cols);
    e.gemv(b.data(), W.bytes.data(), x.data(), xq.data(), 0, rows, cols);
    for (size_t r = 0; r < rows; r++) {
      dequant_row(W, r, wr.data());
      double mag = 0;
      for (size_t c = 0; c < cols; c++) mag += fabs((double)wr[c] * x[c]);
      ASSERT_NEAR(a[r], b[r], tol(mag)) << e.name << " row " << r;
    }
    for (size_t r = rows; r < rows + 8; r++) ASSERT_EQ(b[r], -3.0f) << e.name << " wrote past its rows";
    for (const GemvmEntry &v : all_gemvm()) {
      if (v.fmt != e.fmt || isa_of(v.name.c_str()) != isa_of(e.name.c_str())) continue;
      const size_t m = 3, ldy = rows + 3;
      std::vector<gb_q8x_block> X3(m * xq.size());
      std::vector<float> xs(m * cols);
      for (size_t i = 0; i < m; i++) {
        const std::vector<float> xi = i == 0 ? x : make_vector(cols, rng);
        memcpy(xs.data() + i * cols, xi.data(), cols * sizeof(float));
        gb_q8x_quantize__generic(X3.data() + i * xq.size(), xi.data(), cols);
      }
      std::vector<float> Y(m * ldy, -3.0f);
      v.fn(Y.data(), ldy, W.bytes.data(), xs.data(), cols, X3.data(), xq.size(), m, 0, rows, cols);
      for (size_t i = 0; i < m; i++) {
        std::vector<float> y(rows, -3.0f);
        e.gemv(y.data(), W.bytes.data(), xs.data() + i * cols, X3.data() + i * xq.size(), 0, rows, cols);
        EXPECT_EQ(0, memcmp(y.data(), Y.data() + i * ldy, rows * sizeof(float))) << v.name << " position " << i;
        for (size_t r = rows; r < ldy && i * ldy + r < Y.size(); r++) EXPECT_EQ(Y[i * ldy + r], -3.0f) << v.name;
      }
    }
    tested++;
  }
  printf("%d K-quant gemv kernels tested at %zu columns\n", tested, cols);
  EXPECT_GE(tested, 2);
}

std::vector<GemvmEntry> all_pgemm() {
  std::vector<GemvmEntry> v;
#define GB_PGEMM(fmt, id, isa, req, prio) v.push_back({#fmt "_pgemm__" #isa, req, (uint32_t)(id), gb_##fmt##_pgemm__##isa});
#include "kernels.inc"
#undef GB_PGEMM
  return v;
}

// Every prefill GEMM against the generic gemv of its format, per position,
// within float rounding of a double reference's magnitude (it sums in
// another order); and each row's result bit for bit the same whatever the
// row range and the positions it is called with (threads and chunks split
// prefill that way). x as a session hands it (f16-exact, with and without
// the binary16 copy), NaN padding between positions, canaries around the
// rows written, m past GB_GEMVM_MAX_M and with every remainder of the tiles.
TEST(Kernels, EveryPrefillGemmMatchesTheGemvWithinRounding) {
  const uint32_t cpu = gb_port_cpu_features() | GB_ISA_GENERIC;
  gb_kernels generic;
  gb_kernels_select(&generic, GB_ISA_GENERIC);
  int tested = 0;
  for (const GemvmEntry &e : all_pgemm()) {
    if ((e.req & cpu) != e.req) {
      printf("skipping %s: this CPU lacks its ISA (features 0x%x)\n", e.name.c_str(), cpu);
      continue;
    }
    ASSERT_EQ(e.fmt, (uint32_t)gb::kFmtF16) << "a prefill GEMM of a new format needs its activations here";
    std::mt19937 rng(seed_for(e.name.c_str()));
    tested++;
    std::vector<size_t> cols_list = cols_for(e.fmt);
    cols_list.push_back(2085);
    for (size_t cols : cols_list) {
      const size_t M = 37, ldx = cols + 5, ldxh = cols + 3;
      std::vector<float> X(M * ldx, NAN);
      std::vector<uint16_t> XH(M * ldxh, 0x7e00);
      for (size_t i = 0; i < M; i++) {
        std::vector<float> x = make_vector(cols, rng);
        for (size_t c = 0; c < cols; c++) {
          XH[i * ldxh + c] = gb::f32_to_f16(x[c]);
          X[i * ldx + c] = gb::f16_to_f32(XH[i * ldxh + c]);
        }
      }
      for (size_t rows : {1, 3, 4, 6, 7, 16, 17, 33, 64}) {
        const Matrix W = make_matrix(e.fmt, rows, cols, rng);
        std::vector<float> wf(rows * cols);
        generic.rows_to_f32[e.fmt](wf.data(), W.bytes.data(), 0, rows, cols);
        // The whole range and all M positions: the reference for the rest.
        const size_t ldy = rows + 3;
        std::vector<float> full(M * ldy, -3.0f);
        e.fn(full.data(), ldy, W.bytes.data(), X.data(), ldx, nullptr, 0, M, 0, rows, cols);
        for (size_t i = 0; i < M; i++) {
          std::vector<float> g(rows);
          generic.gemv[e.fmt](g.data(), W.bytes.data(), &X[i * ldx], nullptr, 0, rows, cols);
          for (size_t r = 0; r < rows; r++) {
            double mag = 0;
            for (size_t c = 0; c < cols; c++) mag += fabs((double)wf[r * cols + c] * X[i * ldx + c]);
            ASSERT_NEAR(full[i * ldy + r], g[r], 2 * tol(mag)) << e.name << " cols " << cols << " rows " << rows
                                                             << " position " << i << " row " << r;
          }
        }
        for (int copy = 0; copy < 2; copy++)
          for (size_t m : {1, 2, 3, 4, 5, 7, 16, 17, 37}) {
            const size_t r0 = rows / 3, r1 = rows - rows / 4, p0 = M - m;
            std::vector<float> got(m * ldy + 8, -3.0f);
            const gb_q8x_block *xq = copy ? reinterpret_cast<const gb_q8x_block *>(&XH[p0 * ldxh]) : nullptr;
            e.fn(got.data(), ldy, W.bytes.data(), &X[p0 * ldx], ldx, xq, ldxh, m, r0, r1, cols);
            for (size_t i = 0; i < m; i++)
              for (size_t r = 0; r < ldy; r++) {
                const float want = r >= r0 && r < r1 ? full[(p0 + i) * ldy + r] : -3.0f;
                ASSERT_EQ(0, memcmp(&want, &got[i * ldy + r], sizeof(float)))
                    << e.name << " cols " << cols << " rows " << rows << " m " << m << " position " << i << " row " << r
                    << (copy ? " (binary16 copy)" : "") << ": " << got[i * ldy + r] << " vs " << want;
              }
            for (size_t k = m * ldy; k < got.size(); k++) ASSERT_EQ(got[k], -3.0f) << "wrote past the last position";
          }
      }
    }
  }
  printf("%d prefill GEMM kernel(s) tested\n", tested);
}

// For every combination of the ISA bits this build has kernels for, the
// dispatcher pairs each format's gemv with the gemvm of the same folder.
TEST(Kernels, DispatchPairsGemvmWithGemvOfTheSameFolder) {
  uint32_t bits = 0;
  for (const Entry &e : all_kernels()) bits |= e.req;
  for (const GemvmEntry &e : all_gemvm()) bits |= e.req;
  bits &= ~(uint32_t)GB_ISA_GENERIC;
  const std::vector<GemvmEntry> ms = all_gemvm();
  uint32_t s = 0;
  int masks = 0;
  do {  // every subset s of bits
    const uint32_t avail = s | GB_ISA_GENERIC;
    gb_kernels k;
    gb_kernels_select(&k, avail);
    EXPECT_EQ(k.isa_mask & ~avail, 0u) << "mask 0x" << std::hex << avail;
    for (uint32_t f = 0; f < GB_FMT_COUNT; f++) {
      ASSERT_NE(k.gemv[f], nullptr);
      ASSERT_NE(k.gemvm[f], nullptr) << k.name[f] << " has no gemvm (mask 0x" << std::hex << avail << ")";
      const std::string isa = isa_of(k.name[f]);
      EXPECT_EQ(isa, isa_of(k.gemvm_name[f])) << k.name[f] << " paired with " << k.gemvm_name[f];
      gb_gemvm_fn want = nullptr;
      for (const GemvmEntry &e : ms)
        if (e.fmt == f && isa_of(e.name.c_str()) == isa) want = e.fn;
      EXPECT_EQ(k.gemvm[f], want) << k.gemvm_name[f];
      EXPECT_EQ(k.gemv[f], gemv_of(f, isa)) << k.name[f];
    }
    masks++;
    s = (s - bits) & bits;
  } while (s != 0);
  printf("%d ISA masks checked\n", masks);
}

// The 16-row interleaved q4 layout: the interleave round-trips, and every
// q4r16 gemv / gemvm / row expansion this CPU can run gives bit for bit what
// the generic row-major q4 kernels give on the same weights (so a model
// converted either way decodes the same tokens).
TEST(Kernels, Q4Rows16EqualsRowMajorQ4BitForBit) {
  const uint32_t cpu = gb_port_cpu_features() | GB_ISA_GENERIC;
  std::mt19937 rng(seed_for("q4r16"));
  for (size_t cols : {32, 33, 100, 256, 1000, 2048})
    for (size_t rows : {16, 48, 256}) {
      const Matrix R = make_matrix(GB_FMT_Q4R16, rows, cols, rng);
      const size_t rb = gb::row_bytes(gb::kFmtQ4, cols);
      std::vector<uint8_t> rm(rows * rb), back(rows * rb);
      gb::q4_rows_from_rows16(rm.data(), R.bytes.data(), rows, cols);
      gb::q4_rows16_from_rows(back.data(), rm.data(), rows, cols);
      ASSERT_EQ(0, memcmp(back.data(), R.bytes.data(), rows * rb)) << "round trip, cols " << cols;
      const size_t nb = (cols + 31) / 32, m = 5;
      std::vector<gb_q8x_block> XQ(m * nb);
      for (size_t i = 0; i < m; i++) gb_q8x_quantize__generic(&XQ[i * nb], make_vector(cols, rng).data(), cols);
      std::vector<float> want(m * rows), got(m * rows);
      for (size_t i = 0; i < m; i++)
        gb_q4_gemv__generic(&want[i * rows], rm.data(), nullptr, &XQ[i * nb], 0, rows, cols);
      std::vector<float> fw(rows * cols), fg(rows * cols);
      gb_q4_rows_to_f32__generic(fw.data(), rm.data(), 0, rows, cols);
      for (const Entry &e : all_kernels()) {
        if (e.fmt != GB_FMT_Q4R16 || (e.req & cpu) != e.req) continue;
        if (e.op == 0) {
          std::fill(got.begin(), got.end(), -1.0f);
          for (size_t i = 0; i < m; i++) e.gemv(&got[i * rows], R.bytes.data(), nullptr, &XQ[i * nb], 0, rows, cols);
          ASSERT_EQ(0, memcmp(want.data(), got.data(), want.size() * sizeof(float))) << e.name << " cols " << cols;
        } else if (e.op == 1) {
          e.row(fg.data(), R.bytes.data(), 0, rows, cols);
          ASSERT_EQ(0, memcmp(fw.data(), fg.data(), fw.size() * sizeof(float))) << e.name << " cols " << cols;
        }
      }
      for (const GemvmEntry &e : all_gemvm()) {
        if (e.fmt != GB_FMT_Q4R16 || (e.req & cpu) != e.req) continue;
        std::fill(got.begin(), got.end(), -1.0f);
        e.fn(got.data(), rows, R.bytes.data(), nullptr, 0, XQ.data(), nb, m, 0, rows, cols);
        ASSERT_EQ(0, memcmp(want.data(), got.data(), want.size() * sizeof(float))) << e.name << " cols " << cols;
      }
    }
}

// FPCR (aarch64): read and write, for the flush-to-zero part of the test
// below. Elsewhere: 0, and nothing is written.
#if defined(__aarch64__)
uint64_t read_fpcr() {
  uint64_t v;
  __asm__ __volatile__("mrs %0, fpcr" : "=r"(v)::"memory");
  return v;
}
void write_fpcr(uint64_t v) { __asm__ __volatile__("msr fpcr, %0" ::"r"(v) : "memory"); }
constexpr bool kHasFpcr = true;
#else
uint64_t read_fpcr() { return 0; }
void write_fpcr(uint64_t) {}
constexpr bool kHasFpcr = false;
#endif

// Every q4r16 gemv and gemvm this CPU can run against the generic gemv, bit
// for bit (or both NaN), on the scales and activation scales that the
// kernels' scale conversions must get right: negative and positive, binary16
// subnormals, +-0, the largest; +-inf and NaN in some blocks (the arm64
// dotprod gemv then redoes the group with its FCVTL path); activation scales
// near 2^16 on both sides of the dotprod gemv's bound, 0 (with nonzero
// codes), f32 subnormals, inf and NaN; more than 512 blocks per row (the
// dotprod gemv's column chunks; special blocks in the second chunk only);
// row ranges not starting at 0, with canaries around them. On aarch64 also
// with FPCR.FZ set (flush-to-zero: the dotprod gemv must not use its scaled
// conversion, whose binary16 subnormals become f32 subnormals).
TEST(Kernels, Q4Rows16SpecialScalesEqualGenericBitForBit) {
  const uint32_t cpu = gb_port_cpu_features() | GB_ISA_GENERIC;
  const gb_gemv_fn generic = gemv_of(GB_FMT_Q4R16, "generic");
  ASSERT_NE(generic, nullptr);
  std::mt19937 rng(seed_for("q4r16 special scales"));
  const uint16_t kEdge[] = {0x0000, 0x8000, 0x0001, 0x8001, 0x03ff, 0x83ff, 0x0400, 0x8400, 0x7bff, 0xfbff, 0x3c00};
  const uint16_t kNonFinite[] = {0x7c00, 0xfc00, 0x7e00, 0xfe00, 0x7c01, 0xfd55};
  // A finite binary16: mostly any sign and exponent (subnormals included),
  // sometimes one of kEdge.
  auto finite_h = [&]() -> uint16_t {
    if (rng() % 6 == 0) return kEdge[rng() % (sizeof kEdge / sizeof kEdge[0])];
    return (uint16_t)((rng() % 2 ? 0x8000u : 0u) | (rng() % 31) << 10 | (rng() & 0x3ff));
  };
  auto same = [](float a, float b) { return memcmp(&a, &b, 4) == 0 || (isnan(a) && isnan(b)); };
  const float below = nextafterf(65536.0f, 0.0f);
  int checked = 0;
  for (size_t cols : {32, 33, 100, 1000, 512 * 32 + 100})
    for (size_t rows : {16, 48}) {
      if (cols > 1000 && rows > 32) continue;
      const size_t nb = (cols + 31) / 32, groups = rows / 16;
      const size_t late = nb > 512 ? 512 : 0;  // first block of the special cases
      std::vector<uint8_t> W(groups * nb * 288);
      for (uint8_t &v : W) v = (uint8_t)rng();
      auto set_scale = [&](size_t g, size_t b, size_t i, uint16_t h) {
        uint8_t *p = &W[(g * nb + b) * 288 + 2 * i];
        p[0] = (uint8_t)h;
        p[1] = (uint8_t)(h >> 8);
      };
      for (size_t g = 0; g < groups; g++)
        for (size_t b = 0; b < nb; b++)
          for (size_t i = 0; i < 16; i++) set_scale(g, b, i, finite_h());
      std::vector<gb_q8x_block> xa(nb), xb(nb);
      gb_q8x_quantize__generic(xa.data(), make_vector(cols, rng).data(), cols);
      gb_q8x_quantize__generic(xb.data(), make_vector(cols, rng).data(), cols);
      // xb: activation scales near the bound, 0 and subnormal (still the
      // dotprod gemv's scaled path).
      xb[late].d = 40000.0f;
      xb[nb - 1].d = below;
      if (nb > 1) xb[late + 1].d = 0.0f;
      if (nb > 2) xb[late + 2].d = 1e-40f;
      std::vector<gb_q8x_block> xc = xb;  // xc: one at 2^16 or beyond, inf or NaN (its FCVTL path)
      const float kBeyond[] = {65536.0f, 1e5f, INFINITY, NAN};
      xc[nb - 1].d = kBeyond[rng() % 4];
      std::vector<uint8_t> W_nonfinite = W;  // inf / NaN scales in one block of each group
      for (size_t g = 0; g < groups; g++) {
        const size_t b = late + rng() % (nb - late), i = rng() % 16;
        W_nonfinite[(g * nb + b) * 288 + 2 * i] = (uint8_t)kNonFinite[(g + i) % 6];
        W_nonfinite[(g * nb + b) * 288 + 2 * i + 1] = (uint8_t)(kNonFinite[(g + i) % 6] >> 8);
      }
      const size_t r0 = rows >= 48 ? 16 : 0, r1 = rows >= 48 ? rows - 16 : rows;
      for (const bool flush : {false, true}) {
        if (flush && !kHasFpcr) continue;  // FPCR.FZ is aarch64's
        const uint64_t saved = read_fpcr();
        // FPCR back as it was however the block ends (a failed ASSERT returns).
        struct Restore {
          uint64_t v;
          bool on;
          ~Restore() {
            if (on) write_fpcr(v);
          }
        } restore{saved, flush};
        if (flush) write_fpcr(saved | (1u << 24));
        for (const std::vector<uint8_t> *w : {&W, &W_nonfinite})
          for (int xi = 0; xi < 3; xi++) {
            const std::vector<gb_q8x_block> *x = xi == 0 ? &xa : xi == 1 ? &xb : &xc;
            std::vector<float> want(rows, -2.0f), got(rows);
            generic(want.data(), w->data(), nullptr, x->data(), r0, r1, cols);
            for (const Entry &e : all_kernels()) {
              if (e.op != 0 || e.fmt != GB_FMT_Q4R16 || (e.req & cpu) != e.req) continue;
              std::fill(got.begin(), got.end(), -2.0f);
              e.gemv(got.data(), w->data(), nullptr, x->data(), r0, r1, cols);
              for (size_t r = 0; r < rows; r++)
                ASSERT_TRUE(same(got[r], want[r]))
                    << e.name << " cols " << cols << " rows " << rows << " row " << r << (flush ? " FZ" : "")
                    << (w == &W ? "" : " inf/NaN scales") << " x " << "abc"[xi] << ": " << got[r]
                    << " vs " << want[r];
              checked++;
            }
            // gemvm: this x alone (m = 1: the gemv's path), then with xa before it
            std::vector<gb_q8x_block> two(2 * nb);
            std::copy(xa.begin(), xa.end(), two.begin());
            std::copy(x->begin(), x->end(), two.begin() + nb);
            std::vector<float> want_a(rows, -2.0f);
            generic(want_a.data(), w->data(), nullptr, xa.data(), r0, r1, cols);
            for (const GemvmEntry &e : all_gemvm()) {
              if (e.fmt != GB_FMT_Q4R16 || (e.req & cpu) != e.req) continue;
              for (size_t m : {1, 2}) {
                std::vector<float> Y(m * rows, -2.0f);
                e.fn(Y.data(), rows, w->data(), nullptr, 0, m == 1 ? x->data() : two.data(), nb, m, r0, r1, cols);
                for (size_t i = 0; i < m; i++)
                  for (size_t r = 0; r < rows; r++) {
                    const float want_ir = m == 2 && i == 0 ? want_a[r] : want[r];
                    ASSERT_TRUE(same(Y[i * rows + r], want_ir))
                        << e.name << " m " << m << " position " << i << " cols " << cols << " rows " << rows << " row "
                        << r << (flush ? " FZ" : "") << (w == &W ? "" : " inf/NaN scales") << " x " << "abc"[xi]
                        << ": " << Y[i * rows + r] << " vs " << want_ir;
                  }
                checked++;
              }
            }
          }
        if (flush) write_fpcr(saved);
        EXPECT_EQ(read_fpcr(), saved);
        restore.on = false;
      }
    }
  printf("%d q4r16 kernel runs checked (FPCR.FZ part %s)\n", checked, kHasFpcr ? "run" : "skipped: not aarch64");
}

// The 16-row K-quant layouts (krows16.h): the interleave round-trips, and
// the generic q4kr16 / q6kr16 gemv, gemvm and row expansion give bit for bit
// what the generic row-major q4k / q6k kernels give on the same weights (the
// SIMD ones are held to the generic ones by the tests above).
TEST(Kernels, KRows16GenericEqualsRowMajorBitForBit) {
  std::mt19937 rng(seed_for("krows16"));
  for (uint32_t fmt : {(uint32_t)GB_FMT_Q4KR16, (uint32_t)GB_FMT_Q6KR16}) {
    const gb::FormatInfo *g = gguf(fmt);
    gb_kernels generic;
    gb_kernels_select(&generic, GB_ISA_GENERIC);
    const uint32_t base = gb::file_format(fmt);
    for (size_t cols : {256, 768, 1024})
      for (size_t rows : {16, 48}) {
        const Matrix R = make_matrix(fmt, rows, cols, rng);
        const size_t rb = row_bytes_of(fmt, cols);
        std::vector<uint8_t> rm(rows * rb), back(rows * rb);
        gb_krows16::to_rows(rm.data(), R.bytes.data(), rows, cols, g->bytes);
        gb_krows16::from_rows(back.data(), rm.data(), rows, cols, g->bytes);
        ASSERT_EQ(0, memcmp(back.data(), R.bytes.data(), rows * rb)) << "round trip, fmt " << fmt << " cols " << cols;
        const size_t nb = cols / 32, m = 3;
        std::vector<gb_q8x_block> XQ(m * nb);
        for (size_t i = 0; i < m; i++) gb_q8x_quantize__generic(&XQ[i * nb], make_vector(cols, rng).data(), cols);
        std::vector<float> want(m * rows), got(m * rows, -1.0f), got_m(m * rows, -1.0f);
        for (size_t i = 0; i < m; i++) {
          generic.gemv[base](&want[i * rows], rm.data(), nullptr, &XQ[i * nb], 0, rows, cols);
          generic.gemv[fmt](&got[i * rows], R.bytes.data(), nullptr, &XQ[i * nb], 0, rows, cols);
        }
        generic.gemvm[fmt](got_m.data(), rows, R.bytes.data(), nullptr, 0, XQ.data(), nb, m, 0, rows, cols);
        ASSERT_EQ(0, memcmp(want.data(), got.data(), want.size() * sizeof(float))) << "gemv fmt " << fmt << " cols " << cols;
        ASSERT_EQ(0, memcmp(want.data(), got_m.data(), want.size() * sizeof(float))) << "gemvm fmt " << fmt << " cols " << cols;
        // Any row range expands as the row-major rows do.
        std::vector<float> fw((rows - 5) * cols), fg((rows - 5) * cols);
        generic.rows_to_f32[base](fw.data(), rm.data(), 3, rows - 2, cols);
        generic.rows_to_f32[fmt](fg.data(), R.bytes.data(), 3, rows - 2, cols);
        ASSERT_EQ(0, memcmp(fw.data(), fg.data(), fw.size() * sizeof(float))) << "rows fmt " << fmt << " cols " << cols;
      }
  }
}

// The generic GEMM against a double-precision reference, with strides wider
// than the shapes; any split of B's rows (how threads and panels divide a
// matrix) gives bit-identical outputs; nothing outside C is written.
TEST(Kernels, GenericGemmMatchesReferenceAndIsSplitInvariant) {
  std::mt19937 rng(seed_for("gemm"));
  for (size_t k : kCols)
    for (size_t m : {1, 2, 3, 4, 5, 7, 9, 32}) {
      const size_t n = 1 + (k * 7 + m) % 23, lda = k + 3, ldb = k + 1, ldc = n + 5;
      std::vector<float> A = make_vector(m * lda, rng), B = make_vector(n * ldb, rng);
      std::vector<float> C(m * ldc + 8, -3.0f), D(m * ldc + 8, -3.0f);
      gb_f32_gemm__generic(C.data(), ldc, A.data(), lda, B.data(), ldb, m, n, k);
      for (size_t i = 0; i < m; i++)
        for (size_t j = 0; j < ldc; j++) {
          if (j >= n) {
            ASSERT_EQ(C[i * ldc + j], -3.0f) << "wrote outside C";
            continue;
          }
          double ref = 0, mag = 0;
          for (size_t p = 0; p < k; p++) {
            ref += (double)A[i * lda + p] * B[j * ldb + p];
            mag += fabs((double)A[i * lda + p] * B[j * ldb + p]);
          }
          ASSERT_NEAR(C[i * ldc + j], ref, tol(mag)) << "m " << m << " n " << n << " k " << k;
        }
      // B's rows in pieces of 1, 2 and 3.
      for (size_t j = 0, piece = 1; j < n; j += piece, piece = piece % 3 + 1) {
        const size_t w = j + piece <= n ? piece : n - j;
        gb_f32_gemm__generic(D.data() + j, ldc, A.data(), lda, B.data() + j * ldb, ldb, m, w, k);
      }
      ASSERT_EQ(0, memcmp(C.data(), D.data(), C.size() * sizeof(float))) << "split changed the result, k " << k;
    }
}

// OpenBLAS (when linked) against the generic GEMM.
TEST(Kernels, BlasGemmMatchesGeneric) {
  const gb_gemm_fn blas = gb_gemm_blas();
  if (!blas) GTEST_SKIP() << "built without OpenBLAS";
  gb_gemm_blas_single_threaded();
  std::mt19937 rng(seed_for("blas"));
  for (size_t k : kCols)
    for (size_t m : {1, 3, 32}) {
      const size_t n = 1 + (k * 5 + m) % 67;
      std::vector<float> A = make_vector(m * k, rng), B = make_vector(n * k, rng);
      std::vector<float> a(m * n + 8, -3.0f), b(m * n + 8, -3.0f);
      gb_f32_gemm__generic(a.data(), n, A.data(), k, B.data(), k, m, n, k);
      blas(b.data(), n, A.data(), k, B.data(), k, m, n, k);
      for (size_t i = 0; i < m * n; i++) ASSERT_NEAR(a[i], b[i], tol(4.0 * (double)k)) << "k " << k;
      for (size_t i = m * n; i < m * n + 8; i++) ASSERT_EQ(b[i], -3.0f);
    }
}

// The dispatcher never picks a kernel whose ISA is missing, and picks the
// most specialised one that is available.
TEST(Kernels, DispatchRespectsCpuFeatures) {
  const uint32_t cpu = gb_port_cpu_features() | GB_ISA_GENERIC;
  gb_kernels k;
  gb_kernels_select(&k, cpu);
  EXPECT_EQ(k.isa_mask & ~cpu, 0u);
  for (int f = 0; f < GB_FMT_COUNT; f++) {
    ASSERT_NE(k.gemv[f], nullptr);
    ASSERT_NE(k.rows_to_f32[f], nullptr);
  }
  ASSERT_NE(k.quantize_act, nullptr);
  gb_kernels g;
  gb_kernels_select(&g, GB_ISA_GENERIC);
  EXPECT_EQ(g.isa_mask, (uint32_t)GB_ISA_GENERIC);
  EXPECT_EQ(g.gemv[GB_FMT_Q4], gb_q4_gemv__generic);
  // The available entry of highest priority of each slot is the one chosen.
  gb_gemv_fn want[GB_FMT_COUNT] = {};
  int best[GB_FMT_COUNT];
  for (int &b : best) b = -1;
  for (const Entry &e : all_kernels())
    if (e.op == 0 && (e.req & cpu) == e.req && e.prio > best[e.fmt]) {
      best[e.fmt] = e.prio;
      want[e.fmt] = e.gemv;
    }
  for (int f = 0; f < GB_FMT_COUNT; f++) EXPECT_EQ(k.gemv[f], want[f]) << "format " << f;
}

// ---- the fp16 folder's f16 kernels against their definition ----------------

// v rounded to the nearest binary16, ties to even (inf beyond 65504 + half
// a step), as a float. long double (IEEE binary128 on aarch64) holds every
// sum of a binary16 and a product of two exactly, so this is the single
// rounding of a fused binary16 multiply-add.
float round_f16(long double v) {
  if (v != v) return NAN;
  const long double a = fabsl(v);
  if (a >= 65520.0L) return v < 0 ? -INFINITY : INFINITY;
  const uint16_t h = gb::f32_to_f16((float)a);  // at most one step off
  uint16_t best = h;
  long double best_d = fabsl((long double)gb::f16_to_f32(h) - a);
  for (int step = -1; step <= 1; step += 2) {
    const int c = (int)h + step;
    if (c < 0 || c > 0x7bff) continue;
    const long double d = fabsl((long double)gb::f16_to_f32((uint16_t)c) - a);
    if (d < best_d || (d == best_d && (c & 1) == 0)) best = (uint16_t)c, best_d = d;
  }
  const float f = gb::f16_to_f32(best);
  return v < 0 || (v == 0 && signbit((double)v)) ? -f : f;
}

// The row . x the fp16 kernel defines (gemv_f16.cpp): per 32 columns and
// lane j, four binary16 roundings (the product, then three fused adds of
// the next products), the lane sums in f32, then the fixed final order.
float fp16_reference(const uint16_t *w, const float *x, size_t cols) {
  float L[4] = {0, 0, 0, 0};
  auto term = [&](size_t c) { return c < cols ? (long double)gb::f16_to_f32(w[c]) * (long double)x[c] : 0.0L; };
  for (size_t c0 = 0; c0 < cols; c0 += 32)
    for (size_t i = 0; i < 4; i++) {
      float a[2];
      for (size_t h = 0; h < 2; h++) {
        const size_t j = i + 4 * h;
        a[h] = round_f16(term(c0 + j));
        for (size_t q = 1; q < 4; q++) a[h] = round_f16((long double)a[h] + term(c0 + 8 * q + j));
      }
      L[i] = (L[i] + a[0]) + a[1];
    }
  return (L[0] + L[1]) + (L[2] + L[3]);
}

bool same_float(float a, float b) { return a == b || (isnan(a) && isnan(b)); }

// The fp16 gemv equals its definition bit for bit on f16-exact x (values
// from 2^-20 to 2^9, products down to binary16's subnormals), and the exact
// kernel (gb_f16_gemv__neon) where x has a value binary16 cannot hold or a
// row's binary16 sums overflow (or its weights hold inf); the gemvm equals
// the gemv per position with such positions and rows mixed in.
TEST(Kernels, Fp16F16GemvIsItsDefinition) {
  const gb_gemv_fn fp16 = gemv_of(GB_FMT_F16, "fp16"), neon = gemv_of(GB_FMT_F16, "neon");
  gb_gemvm_fn fp16m = nullptr;
  for (const GemvmEntry &e : all_gemvm())
    if (e.name == "f16_gemvm__fp16") fp16m = e.fn;
  // The reference's rounding first (on every CPU): for floats, round_f16 is
  // f16.h's f32 -> binary16 rounding, ties and overflow included.
  std::mt19937 rr(seed_for("round_f16"));
  for (uint32_t h = 0; h < 0x7c00; h++) {  // every step's midpoint and a quarter past it, both signs
    const float lo = gb::f16_to_f32((uint16_t)h), hi = gb::f16_to_f32((uint16_t)(h + 1));
    for (const float f : {lo, lo + (hi - lo) * 0.5f, lo + (hi - lo) * 0.25f, lo + (hi - lo) * 0.75f})
      for (const float v : {f, -f}) {
        const float want = gb::f16_to_f32(gb::f32_to_f16(v));
        ASSERT_TRUE(same_float(round_f16((long double)v), want) && signbit(round_f16((long double)v)) == signbit(want))
            << "round_f16(" << v << ")";
      }
  }
  for (int i = 0; i < 100000; i++) {
    uint32_t b = (uint32_t)rr();
    float v;
    memcpy(&v, &b, 4);
    if (isnan(v)) continue;
    ASSERT_TRUE(same_float(round_f16((long double)v), gb::f16_to_f32(gb::f32_to_f16(v)))) << "round_f16(" << v << ")";
  }
  if (!fp16 || !(gb_port_cpu_features() & GB_ISA_FP16)) {
    printf("no fp16 kernels in this build, or the CPU lacks half-precision arithmetic: the reference checked only\n");
    return;
  }
  ASSERT_NE(neon, nullptr);
  ASSERT_NE(fp16m, nullptr);
  std::mt19937 rng(seed_for("fp16 definition"));
  std::normal_distribution<float> nd(0.0f, 1.0f);
  std::uniform_int_distribution<int> ex(-20, 9);
  for (size_t cols : {1, 7, 31, 32, 33, 64, 100, 288, 2085})
    for (size_t rows : {1, 3, 4, 5, 17}) {
      std::vector<uint16_t> w(rows * cols);
      for (uint16_t &v : w) v = gb::f32_to_f16(nd(rng) * 0.05f);
      // a row of large weights: its binary16 sums overflow against large x
      const size_t big_row = rows / 2;
      for (size_t c = 0; c < cols; c++) w[big_row * cols + c] = gb::f32_to_f16(30000.0f + (float)c);
      std::vector<float> x(cols);
      for (float &v : x) v = gb::f16_to_f32(gb::f32_to_f16(ldexpf(nd(rng), ex(rng))));
      x[0] = 512.0f;  // 512 x 30000 overflows binary16 (65504)
      std::vector<float> y(rows + 4, -7.0f), want(rows + 4, -7.0f);
      fp16(y.data(), reinterpret_cast<const uint8_t *>(w.data()), x.data(), nullptr, 0, rows, cols);
      neon(want.data(), reinterpret_cast<const uint8_t *>(w.data()), x.data(), nullptr, big_row, big_row + 1, cols);
      for (size_t r = 0; r < rows; r++) {
        const float ref = r == big_row ? want[r] : fp16_reference(&w[r * cols], x.data(), cols);
        ASSERT_TRUE(same_float(y[r], ref)) << "cols " << cols << " rows " << rows << " r " << r << ": " << y[r] << " vs " << ref;
      }
      ASSERT_TRUE(std::isfinite(want[big_row])) << "the exact kernel's f32 sums hold the large row";
      for (size_t r = rows; r < rows + 4; r++) ASSERT_EQ(y[r], -7.0f) << "wrote past its rows";

      // x with a value binary16 cannot hold: every row as the exact kernel.
      std::vector<float> xb = x;
      xb[cols / 2] = 70000.0f;
      std::vector<float> yb(rows, -7.0f), wb(rows, -7.0f);
      fp16(yb.data(), reinterpret_cast<const uint8_t *>(w.data()), xb.data(), nullptr, 0, rows, cols);
      neon(wb.data(), reinterpret_cast<const uint8_t *>(w.data()), xb.data(), nullptr, 0, rows, cols);
      ASSERT_EQ(0, memcmp(yb.data(), wb.data(), rows * sizeof(float))) << "cols " << cols << ": x beyond binary16";

      // An inf weight: the exact kernel's answer (inf or NaN), not a finite one.
      std::vector<uint16_t> wi = w;
      wi[(rows - 1) * cols + cols - 1] = 0x7c00;
      std::vector<float> yi(rows), wi_want(rows);
      fp16(yi.data(), reinterpret_cast<const uint8_t *>(wi.data()), x.data(), nullptr, 0, rows, cols);
      neon(wi_want.data(), reinterpret_cast<const uint8_t *>(wi.data()), x.data(), nullptr, rows - 1, rows, cols);
      ASSERT_FALSE(std::isfinite(yi[rows - 1])) << "cols " << cols << ": inf weight";
      ASSERT_TRUE(same_float(yi[rows - 1], wi_want[rows - 1]));

      // gemvm: five positions (strided), the third one beyond binary16.
      const size_t m = 5, ldx = cols + 3, ldy = rows + 5;
      std::vector<float> X(m * ldx, NAN), Y(m * ldy, -7.0f);
      for (size_t i = 0; i < m; i++)
        for (size_t c = 0; c < cols; c++) X[i * ldx + c] = i == 2 ? xb[c] : gb::f16_to_f32(gb::f32_to_f16(x[c] * (float)(i + 1)));
      fp16m(Y.data(), ldy, reinterpret_cast<const uint8_t *>(w.data()), X.data(), ldx, nullptr, 0, m, 0, rows, cols);
      for (size_t i = 0; i < m; i++) {
        std::vector<float> g(rows, -7.0f);
        fp16(g.data(), reinterpret_cast<const uint8_t *>(w.data()), &X[i * ldx], nullptr, 0, rows, cols);
        for (size_t r = 0; r < rows; r++)
          ASSERT_TRUE(same_float(Y[i * ldy + r], g[r])) << "gemvm position " << i << " row " << r << " cols " << cols;
        for (size_t r = rows; r < ldy; r++) ASSERT_EQ(Y[i * ldy + r], -7.0f) << "gemvm wrote past position " << i;
      }
    }
}

// f16 conversion round trip and special values.
TEST(Kernels, F16Conversions) {
  for (uint32_t h = 0; h < 65536; h++) {
    const float f = gb::f16_to_f32((uint16_t)h);
    if (isnan(f)) continue;
    ASSERT_EQ(gb::f32_to_f16(f), h) << h;
  }
  EXPECT_EQ(gb::f32_to_f16(65520.0f), 0x7c00);  // rounds to inf
  EXPECT_EQ(gb::f32_to_f16(1e-8f), 0x0000);
  EXPECT_EQ(gb::f16_to_f32(0x3c00), 1.0f);
  EXPECT_TRUE(isnan(gb::f16_to_f32(gb::f32_to_f16(NAN))));
}

// q4 / q8 quantizers: error bounds and the GGUF Q4_0 convention.
TEST(Kernels, WeightQuantizersBoundTheError) {
  std::mt19937 rng(seed_for("quantizers"));
  std::vector<float> x = make_vector(1000, rng);
  std::vector<uint8_t> q4(gb::row_bytes(gb::kFmtQ4, 1000)), q8(gb::row_bytes(gb::kFmtQ8, 1000));
  gb::quantize_row_q4(q4.data(), x.data(), 1000);
  gb::quantize_row_q8(q8.data(), x.data(), 1000);
  std::vector<float> d4(1000), d8(1000);
  gb::dequantize_row(gb::kFmtQ4, d4.data(), q4.data(), 1000);
  gb::dequantize_row(gb::kFmtQ8, d8.data(), q8.data(), 1000);
  for (size_t b = 0; b * 32 < 1000; b++) {
    float amax = 0;
    for (size_t j = b * 32; j < b * 32 + 32 && j < 1000; j++) amax = fmaxf(amax, fabsf(x[j]));
    for (size_t j = b * 32; j < b * 32 + 32 && j < 1000; j++) {
      // Q4_0: d = (signed extreme) / -8, codes -8..7. Values on the extreme's
      // side round to within d/2; on the other side the top code is 7d, so a
      // value up to 8d clips by at most d.
      const float d = amax / 8.0f;
      const bool clipped = fabsf(x[j]) > 7.0f * d;
      EXPECT_LE(fabsf(d4[j] - x[j]), (clipped ? d : d * 0.5f) * 1.01f + 1e-6f);
      EXPECT_LE(fabsf(d8[j] - x[j]), amax / 127.0f * 0.5f * 1.01f + 1e-6f);
    }
  }
}

}  // namespace
