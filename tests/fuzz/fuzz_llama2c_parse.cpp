// fuzz_llama2c_parse.cpp — fuzz target for the llama2.c readers alone, fast
// enough for long campaigns: the checkpoint header (every field, the arrays'
// total size against the file's) and the tokenizer.bin reader with the
// vocabulary checks, all from memory, nothing converted or written.
// Input: the 28-byte header, one byte choosing the checkpoint's size, then
// the tokenizer file's bytes. The size is the one the header's arrays need
// (computed here independently of the reader, in 128-bit arithmetic), one
// byte less, one byte more, or the next eight input bytes as a raw u64.
// Checks: a header the reader accepts has the size computed here, with
// fields within the reader's bounds; a tokenizer it accepts holds exactly
// the header's vocabulary; a piece is never longer than the tokenizer's
// max_token_length. Any failure aborts.
#include <stdint.h>
#include <stdio.h>
#include <string.h>

#include <string>
#include <vector>

#include "bytes.h"
#include "convert_util.h"
#include "sample_files.h"

static const char kFuzzName[] = "fuzz_llama2c_parse";
#include "fuzz/fuzz_util.h"

namespace {

void quiet(void *, gb_log_level, const char *) {}

// The checkpoint bytes a header asks for (llama2.c's layout), or 0 when a
// field is not positive (vocab_size: not zero; negative means an own
// classifier) or dim is not a multiple of n_heads.
unsigned __int128 wanted_size(const uint8_t *h) {
  int32_t v[7];
  for (int i = 0; i < 7; i++) v[i] = gb::ld_i32(h + 4 * i);
  for (int i = 0; i < 7; i++)
    if (i == 5 ? v[i] == 0 : v[i] <= 0) return 0;
  if (v[0] % v[3] != 0) return 0;
  typedef unsigned __int128 U;
  const U dim = (U)v[0], hid = (U)v[1], L = (U)v[2], head = (U)(v[0] / v[3]), kv = (U)v[4] * head, seq = (U)v[6];
  const U V = v[5] < 0 ? (U)(-(int64_t)v[5]) : (U)v[5];
  const U n = V * dim + L * dim + L * dim * dim * 2 + L * kv * dim * 2 + L * dim + L * hid * dim * 3 + dim +
              seq * (head / 2) * 2 + (v[5] < 0 ? V * dim : 0);
  return 28 + n * 4;
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  g_in = data;
  g_in_size = size;
  if (size < 29) return 0;
  const uint8_t *h = data;
  const uint8_t mode = data[28];
  const uint8_t *tok = data + 29;
  size_t tok_n = size - 29;
  const unsigned __int128 want = wanted_size(h);
  const uint64_t cap = ~(uint64_t)0;
  const uint64_t w = want > cap ? cap : (uint64_t)want;
  uint64_t file_size = w;
  switch (mode % 4) {
    case 1: file_size = w ? w - 1 : 0; break;
    case 2: file_size = w < cap ? w + 1 : w; break;
    case 3:
      if (tok_n >= 8) {
        file_size = gb::ld_u64(tok);
        tok += 8;
        tok_n -= 8;
      }
      break;
    default: break;
  }
  const gb::Logger log{quiet, nullptr, GB_LOG_ERROR};
  gb::GbxModelDesc d;
  const gb_status hs = gb::parse_llama2c_header(h, file_size, "fuzz.bin", log, &d);
  if (hs == GB_OK) {
    if (want == 0 || want > cap || file_size != (uint64_t)want) fuzz_fail("a header accepted at a size it does not ask for");
    if (d.dim == 0 || d.dim > gb::kMaxDim || d.hidden_dim == 0 || d.hidden_dim > gb::kMaxHidden || d.n_layers == 0 ||
        d.n_layers > gb::kMaxLayers || d.vocab_size < 3 || d.vocab_size > gb::kMaxVocab || d.seq_len == 0 ||
        d.seq_len > gb::kMaxSeqLen || d.n_heads == 0 || d.dim % d.n_heads != 0 || d.n_kv_heads == 0 ||
        d.n_heads % d.n_kv_heads != 0 || d.head_dim % 2 != 0)
      fuzz_fail("a header accepted with a field out of bounds");
  }
  // The tokenizer, against the header's vocabulary when it was accepted,
  // else against a size taken from the input (small, so that the reader's
  // per-token checks run).
  const uint32_t n_vocab = hs == GB_OK ? d.vocab_size : 3 + (uint32_t)(mode >> 2) % 61;
  gb::InputFile f;
  f.open_memory(tok, tok_n, "fuzz-tokenizer.bin");
  gb::GbxVocab v;
  if (gb::read_llama2c_tokenizer(f, n_vocab, log, &v) == GB_OK) {
    if (v.pieces.size() != n_vocab || v.scores.size() != n_vocab || v.types.size() != n_vocab)
      fuzz_fail("a tokenizer accepted with another number of tokens");
    const int32_t max_len = tok_n >= 4 ? gb::ld_i32(tok) : -1;
    for (const std::string &p : v.pieces)
      if ((int64_t)p.size() > (int64_t)max_len) fuzz_fail("a piece longer than max_token_length");
    if (hs == GB_OK) (void)gb::check_vocab(v, d, log, "tokenizer");
  }
  return 0;
}

// Seeds: the headers of small checkpoints made here and of the shared
// stories260K / stories5M, each with its tokenizer (made here, or the
// shared tok512.bin), in the four size modes.
void gb_fuzz_seeds(std::vector<gb::FuzzSeed> *seeds) {
  struct Pair {
    std::vector<uint8_t> header;  // 28 bytes
    uint64_t size;                // the checkpoint's bytes
    std::vector<uint8_t> tok;
  };
  std::vector<Pair> pairs;
  auto add = [&](const std::vector<uint8_t> &ckpt, const std::vector<uint8_t> &tok) {
    if (ckpt.size() >= 28 && !tok.empty()) pairs.push_back({std::vector<uint8_t>(ckpt.begin(), ckpt.begin() + 28), ckpt.size(), tok});
  };
  gb::SampleDims d;
  d.vocab = 300;
  d.dim = 8;
  d.hidden = 12;
  d.heads = 2;
  d.kv_heads = 1;
  d.layers = 1;
  d.seq_len = 4;
  add(gb::sample_llama2c_checkpoint(d), gb::sample_llama2c_tokenizer(300));
  d.shared_classifier = false;
  d.vocab = 40;
  d.layers = 2;
  d.kv_heads = 2;
  add(gb::sample_llama2c_checkpoint(d), gb::sample_llama2c_tokenizer(40));
  const std::vector<uint8_t> t512 = read_all(std::string(GB_SHARED_DIR) + "/models/tok512.bin");
  for (const char *name : {"stories260K.bin", "stories5M_distilled.bin"})
    add(read_all(std::string(GB_SHARED_DIR) + "/models/" + name), t512);
  for (const Pair &p : pairs) {
    for (uint8_t mode : {0, 1, 2, 3}) {
      std::vector<uint8_t> in = p.header;
      in.push_back(mode);
      if (mode == 3) {
        uint8_t sz[8];
        gb::st_u64(sz, p.size);
        in.insert(in.end(), sz, sz + 8);
      }
      in.insert(in.end(), p.tok.begin(), p.tok.end());
      seeds->push_back(gb::FuzzSeed{in, 29 + 64, 1});  // focus: the header, the size, the first tokens
    }
  }
}
