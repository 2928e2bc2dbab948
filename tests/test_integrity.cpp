// test_integrity.cpp — model files that change under an open model, and
// damaged files refused at open with the section named in the log.
//   - a mapped file truncated, or rewritten in place, between steps: the
//     next step returns GB_ERR_FILE_CHANGED (nothing run, no SIGBUS, no
//     silent garbage), and keeps doing so;
//   - reads of a truncated mapping past its new end (what a pass that meets
//     the truncation does), in any thread: zeros, no SIGBUS, the mapping
//     marked faulted and every later call GB_ERR_FILE_CHANGED;
//   - another process truncating or rewriting the file at random moments
//     while passes run back to back: the step that meets the change returns
//     GB_ERR_FILE_CHANGED and no token computed from changed bytes is handed
//     out (tests/filechange/ does the same at the real timing, on a 714 MB
//     model);
//   - a file replaced by renaming another over its path: harmless (the
//     mapping keeps the old file), decoding goes on unchanged;
//   - a vocabulary rewritten in place with random bytes (both kinds: VOCAB,
//     TOKENIZER): every piece stays inside its array, and tokenizing and
//     token texts answer without reading out of bounds;
//   - GB_MODEL_LOAD_COPY: truncating or rewriting the file changes nothing;
//   - a CRC, a size or a directory entry that is wrong: refused at open, the
//     log line names the section.
#include <fcntl.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <string>
#include <thread>
#include <vector>

#include <gtest/gtest.h>

#include "bytes.h"
#include "format.h"
#include "gearbx_convert.h"
#include "gearbx_port.h"
#include "model.h"
#include "test_util.h"

namespace {

struct Log {
  std::vector<std::string> lines;
  static void fn(void *u, gb_log_level, const char *msg) { static_cast<Log *>(u)->lines.push_back(msg); }
  bool has(const char *needle) const {
    for (const auto &l : lines)
      if (l.find(needle) != std::string::npos) return true;
    return false;
  }
};

// A private copy of a .gbx (stories260K's by default) whose modification
// time is set far in the past, so any later write moves it whatever the
// clock's granularity.
std::string fresh_copy(const char *name, const std::string &source = gbt::stories260k_gbx()) {
  const std::string path = gbt::temp_dir() + "/" + name;
  EXPECT_TRUE(gbt::write_file(path, gbt::read_file(source)));
  const struct timespec old[2] = {{1000000000, 0}, {1000000000, 0}};
  EXPECT_EQ(utimensat(AT_FDCWD, path.c_str(), old, 0), 0);
  return path;
}

struct Live {
  gb_model *m = nullptr;
  gb_session *s = nullptr;
  Log log;
  gb_status open(const std::string &path, gb_model_load load, gb_gear gear = GB_GEAR_HIGH, uint32_t n_ctx = 64,
                 const std::vector<int32_t> &prompt = {1, 403, 407}) {
    gb_model_options mo;
    gb_model_options_init(&mo);
    mo.log = Log::fn;
    mo.log_user = &log;
    mo.load = load;
    gb_status st = gb_model_open_file(path.c_str(), &mo, &m);
    if (st != GB_OK) return st;
    gb_session_options so;
    gb_session_options_init(&so);
    so.gear = gear;
    so.sampler.temperature = 0.0f;
    so.n_ctx = n_ctx;
    so.log = Log::fn;
    so.log_user = &log;
    st = gb_session_create(m, &so, nullptr, 0, &s);
    if (st != GB_OK) return st;
    return gb_prefill(s, prompt.data(), prompt.size());
  }
  // n greedy tokens; stops at the first error, whose status it returns.
  gb_status decode(int n, std::vector<int32_t> *out) {
    for (int i = 0; i < n; i++) {
      int32_t t = -1;
      const gb_status st = gb_decode_step(s, &t, nullptr);
      if (st != GB_OK) return st;
      out->push_back(t);
    }
    return GB_OK;
  }
  ~Live() {
    gb_session_destroy(s);
    gb_model_close(m);
  }
};

std::vector<int32_t> reference(int n) {
  Live r;
  EXPECT_EQ(r.open(gbt::stories260k_gbx(), GB_MODEL_LOAD_MAP), GB_OK);
  std::vector<int32_t> toks;
  EXPECT_EQ(r.decode(n, &toks), GB_OK);
  return toks;
}

void truncate_to_half(const std::string &path) {
  struct stat st;
  ASSERT_EQ(stat(path.c_str(), &st), 0);
  ASSERT_EQ(truncate(path.c_str(), st.st_size / 2), 0);
}

// Rewrite the file in place (same inode, same size): every byte after the
// header becomes zero.
void zero_in_place(const std::string &path) {
  std::vector<uint8_t> b = gbt::read_file(path);
  ASSERT_GT(b.size(), 4096u);
  memset(b.data() + 4096, 0, b.size() - 4096);
  const int fd = open(path.c_str(), O_WRONLY);
  ASSERT_GE(fd, 0);
  ASSERT_EQ(pwrite(fd, b.data(), b.size(), 0), (ssize_t)b.size());
  close(fd);
}

}  // namespace

void truncated_file_stops_the_step(gb_model_load load) {
  const std::string path = fresh_copy("trunc.gbx");
  Live r;
  ASSERT_EQ(r.open(path, load), GB_OK);
  std::vector<int32_t> toks;
  ASSERT_EQ(r.decode(4, &toks), GB_OK);
  truncate_to_half(path);
  uint32_t pos0 = 0, pos1 = 0;
  ASSERT_EQ(gb_session_position(r.s, &pos0, nullptr), GB_OK);
  // Every pass-running call refuses, again and again, without touching the
  // mapping (which would raise SIGBUS past the new end of the file).
  for (int k = 0; k < 3; k++) {
    r.log.lines.clear();
    int32_t t = -7;
    EXPECT_EQ(gb_decode_step(r.s, &t, nullptr), GB_ERR_FILE_CHANGED);
    EXPECT_EQ(t, -7) << "nothing written";
    EXPECT_TRUE(r.log.has("gb_decode_step: the model file was truncated or written")) << "log line";
    EXPECT_EQ(gb_feed(r.s, 5, nullptr), GB_ERR_FILE_CHANGED);
    const int32_t more[] = {5, 6, 7};
    EXPECT_EQ(gb_prefill(r.s, more, 3), GB_ERR_FILE_CHANGED);
  }
  ASSERT_EQ(gb_session_position(r.s, &pos1, nullptr), GB_OK);
  EXPECT_EQ(pos1, pos0) << "nothing ran";
}

// A locked mapping (GB_MODEL_LOAD_LOCK) is still a mapping of the file:
// truncating it is caught the same way.
TEST(Integrity, TruncatedMappedFileStopsTheStepWithAStatus) { truncated_file_stops_the_step(GB_MODEL_LOAD_MAP); }
TEST(Integrity, TruncatedLockedFileStopsTheStepWithAStatus) { truncated_file_stops_the_step(GB_MODEL_LOAD_LOCK); }

void reads_past_the_end_give_zeros(gb_model_load load) {
  const std::string path = fresh_copy("faulted.gbx");
  Live r;
  ASSERT_EQ(r.open(path, load), GB_OK);
  std::vector<int32_t> toks;
  ASSERT_EQ(r.decode(2, &toks), GB_OK);
  const gb_port_mapping &map = r.m->mapping;
  ASSERT_EQ(gb_port_mapping_faulted(&map), 0);
  ASSERT_EQ(truncate(path.c_str(), 0), 0);
  // What a pass does when a truncation lands inside it, here from a thread
  // of its own: read pages past the new end. Without the port's guard the
  // first read raises SIGBUS and ends this process.
  const volatile uint8_t *p = static_cast<const volatile uint8_t *>(map.data);
  uint32_t sum = 0;
  std::thread reader([&] {
    for (size_t i = 0; i < map.size; i += 1024) sum += p[i];
  });
  reader.join();
  EXPECT_EQ(sum, 0u) << "the whole mapping reads as zeros";
  EXPECT_EQ(gb_port_mapping_faulted(&map), 1);
  for (int k = 0; k < 2; k++) {
    r.log.lines.clear();
    EXPECT_EQ(gb_decode_step(r.s, nullptr, nullptr), GB_ERR_FILE_CHANGED);
    EXPECT_TRUE(r.log.has("gb_decode_step: the model file could not be read: a read of its mapping faulted")) << "log line";
  }
  EXPECT_EQ(gb_model_verify(r.m), GB_ERR_FILE_CHANGED);
  // The tokenizer's tables in the mapping are zeros now: calls still answer.
  int32_t ids[64];
  size_t n = 0;
  EXPECT_EQ(gb_tokenize(r.m, "Once upon a time", 16, GB_TOKENIZE_ADD_BOS, ids, 64, &n), GB_OK);
  for (int32_t id = 0; id < 512; id++) {
    const char *t;
    size_t len;
    EXPECT_EQ(gb_token_to_text(r.m, -1, id, &t, &len), GB_OK);
  }
  // Nothing else in the process is touched: a model opened again decodes.
  const std::vector<int32_t> want = reference(4);
  EXPECT_EQ(std::vector<int32_t>(want.begin(), want.begin() + 2), toks);
}

TEST(Integrity, ReadsPastTheEndOfATruncatedMappingGiveZerosAndAStatus) { reads_past_the_end_give_zeros(GB_MODEL_LOAD_MAP); }
TEST(Integrity, ReadsPastTheEndOfATruncatedLockedMappingGiveZerosAndAStatus) {
  reads_past_the_end_give_zeros(GB_MODEL_LOAD_LOCK);
}

// Passes of about a millisecond back to back (a 15 MB synthetic model on
// its q4 tier) while a child process, a random few milliseconds into the
// decoding, truncates the file or rewrites it in place: most changes land
// inside a pass. Every trial must end with GB_ERR_FILE_CHANGED, the tokens
// handed out before it equal to an untouched run's.
TEST(Integrity, ChangesDuringPassesEndWithTheStatus) {
  const std::string model = gbt::temp_dir() + "/passes.gbx";
  gb_convert_options co;
  gb_convert_default_options(&co);
  co.tiers = 1u << GB_GEAR_LOW;
  co.log = gbt::quiet_log;
  ASSERT_EQ(gb_convert_synthetic("dim=512,layers=8,hidden=1408,heads=8,kv_heads=8,vocab=512,seq_len=1024", model.c_str(), &co), GB_OK);
  std::vector<int32_t> want;
  {
    Live r;
    ASSERT_EQ(r.open(model, GB_MODEL_LOAD_MAP, GB_GEAR_LOW, 1024, {1}), GB_OK);
    ASSERT_EQ(r.decode(200, &want), GB_OK);
  }
  struct stat info;
  ASSERT_EQ(stat(model.c_str(), &info), 0);
  const uint64_t model_bytes = (uint64_t)info.st_size;
  const int trials = gbt::test_scale() < 1.0 ? 6 : 12;
  int in_pass = 0;
  uint64_t rng = 12345;
  for (int kind = 0; kind < 2; kind++)
    for (int trial = 0; trial < trials; trial++) {
      const std::string path = fresh_copy("passes-work.gbx", model);
      Live r;
      ASSERT_EQ(r.open(path, GB_MODEL_LOAD_MAP, GB_GEAR_LOW, 1024, {1}), GB_OK);
      rng = rng * 6364136223846793005ull + 1442695040888963407ull;
      const useconds_t delay = (useconds_t)(1000 + (rng >> 33) % 8000);
      fflush(nullptr);
      const pid_t pid = fork();
      if (pid == 0) {  // another process changes the file
        usleep(delay);
        if (kind == 0) {
          if (truncate(path.c_str(), (off_t)(model_bytes / 3)) != 0) _exit(1);
        } else {
          const int fd = open(path.c_str(), O_WRONLY);
          std::vector<uint8_t> junk(model_bytes - 4096, 0x5A);
          if (fd < 0 || pwrite(fd, junk.data(), junk.size(), 4096) != (ssize_t)junk.size()) _exit(1);
          close(fd);
        }
        _exit(0);
      }
      ASSERT_GT(pid, 0);
      std::vector<int32_t> got;
      gb_status st = GB_OK;
      uint32_t p0 = 0, p1 = 0;
      for (int i = 0; i < 200 && st == GB_OK; i++) {
        gb_session_position(r.s, &p0, nullptr);
        int32_t t = -1;
        st = gb_decode_step(r.s, &t, nullptr);
        if (st == GB_OK) got.push_back(t);
      }
      gb_session_position(r.s, &p1, nullptr);
      int status = 0;
      ASSERT_EQ(waitpid(pid, &status, 0), pid);
      ASSERT_TRUE(WIFEXITED(status) && WEXITSTATUS(status) == 0);
      if (st == GB_OK) st = gb_decode_step(r.s, nullptr, nullptr);  // the change came after 200 steps
      EXPECT_EQ(st, GB_ERR_FILE_CHANGED) << "kind " << kind << " trial " << trial;
      ASSERT_LE(got.size(), want.size());
      EXPECT_TRUE(std::equal(got.begin(), got.end(), want.begin())) << "a token computed from changed bytes was handed out";
      EXPECT_EQ(gb_decode_step(r.s, nullptr, nullptr), GB_ERR_FILE_CHANGED) << "and again";
      in_pass += p1 > p0 || r.log.has("a read of its mapping faulted");
    }
  // Most trials meet the change inside a pass; at least one must, or this
  // test shows nothing about passes.
  EXPECT_GE(in_pass, 1);
  printf("changes met inside a pass: %d of %d\n", in_pass, 2 * trials);
}

TEST(Integrity, ARewrittenVocabularyIsReadInBounds) {
  for (const std::string &source : {gbt::stories260k_gbx(), gbt::stories260k_gguf_gbx()}) {
    const std::string path = fresh_copy("vocab-rewritten.gbx", source);
    Live r;
    ASSERT_EQ(r.open(path, GB_MODEL_LOAD_MAP), GB_OK);
    // Random bytes over the tokenizer's section, in place: offsets, ids and
    // lengths become anything.
    const bool gguf = r.m->tokenizer.kind != GB_TOKENIZER_LLAMA2C;
    const gb::SectionRef *sec = nullptr;
    for (uint32_t i = 0; i < r.m->n_sections; i++)
      if (r.m->sections[i].kind == (gguf ? (uint32_t)gb::kSecTokenizer : (uint32_t)gb::kSecVocab)) sec = &r.m->sections[i];
    ASSERT_NE(sec, nullptr);
    std::vector<uint8_t> junk(sec->size);
    uint64_t x = 88172645463325252ull;
    for (uint8_t &b : junk) {
      x ^= x << 13, x ^= x >> 7, x ^= x << 17;
      b = (uint8_t)x;
    }
    const int fd = open(path.c_str(), O_WRONLY);
    ASSERT_GE(fd, 0);
    ASSERT_EQ(pwrite(fd, junk.data(), junk.size(), (off_t)sec->offset), (ssize_t)junk.size());
    close(fd);
    if (gguf) {
      const gb::TokView &v = r.m->tokenizer.tok.v;
      for (uint32_t i = 0; i < v.n_tokens; i++) {
        uint32_t n;
        const uint8_t *p = v.piece(i, &n);
        ASSERT_TRUE(p >= v.piece_bytes && p + n <= v.piece_bytes + v.piece_bytes_len) << "piece " << i;
      }
    } else {
      const gb::VocabView &v = r.m->vocab;
      for (uint32_t i = 0; i < v.n; i++) {
        size_t n;
        const uint8_t *p = v.piece(i, &n);
        ASSERT_TRUE(p >= v.blob && p + n <= v.blob + v.blob_bytes) << "piece " << i;
      }
    }
    const gb_tokenizer *tk = nullptr;
    ASSERT_EQ(gb_model_tokenizer(r.m, &tk), GB_OK);
    std::string text;
    for (int k = 0; k < 200; k++) text += "Once upon a time, <s> a little girl \xe2\x96\x81 named Lily. ";
    std::vector<int32_t> ids(GB_TOKENIZE_CAPACITY(text.size()));
    size_t n = 0;
    EXPECT_EQ(gb_tokenize(r.m, text.c_str(), text.size(), GB_TOKENIZE_ADD_BOS, ids.data(), ids.size(), &n), GB_OK);
    for (int32_t id = 0; id < 512; id++) {
      const char *t;
      size_t len;
      EXPECT_EQ(gb_token_to_text(r.m, -1, id, &t, &len), GB_OK);
    }
    std::vector<char> out(1 << 16);
    size_t w = 0;
    std::vector<int32_t> all(512);
    for (int32_t id = 0; id < 512; id++) all[id] = id;
    EXPECT_EQ(gb_tokenizer_decode(tk, all.data(), all.size(), 0, out.data(), out.size(), &w), GB_OK);
    // The file's status moved: the next step says so.
    EXPECT_EQ(gb_decode_step(r.s, nullptr, nullptr), GB_ERR_FILE_CHANGED);
  }
}

TEST(Integrity, FileRewrittenInPlaceIsNoticedNotDecodedSilently) {
  const std::string path = fresh_copy("rewrite.gbx");
  Live r;
  ASSERT_EQ(r.open(path, GB_MODEL_LOAD_MAP), GB_OK);
  std::vector<int32_t> toks;
  ASSERT_EQ(r.decode(2, &toks), GB_OK);
  zero_in_place(path);
  EXPECT_EQ(gb_decode_step(r.s, nullptr, nullptr), GB_ERR_FILE_CHANGED);
  EXPECT_TRUE(r.log.has("the model file was truncated or written"));
}

TEST(Integrity, FileReplacedByRenameDecodesOnUnchanged) {
  const std::vector<int32_t> want = reference(12);
  const std::string path = fresh_copy("renamed.gbx");
  Live r;
  ASSERT_EQ(r.open(path, GB_MODEL_LOAD_MAP), GB_OK);
  std::vector<int32_t> toks;
  ASSERT_EQ(r.decode(6, &toks), GB_OK);
  // Another file (zeros) renamed over the path: the mapping keeps the
  // original inode, so the session must go on exactly as before.
  const std::string other = path + ".new";
  ASSERT_TRUE(gbt::write_file(other, std::vector<uint8_t>(gbt::read_file(path).size(), 0)));
  ASSERT_EQ(rename(other.c_str(), path.c_str()), 0);
  ASSERT_EQ(r.decode(6, &toks), GB_OK);
  EXPECT_EQ(toks, want);
}

TEST(Integrity, LoadedCopyIgnoresChangesToTheFile) {
  const std::vector<int32_t> want = reference(12);
  const std::string path = fresh_copy("copy.gbx");
  Live r;
  ASSERT_EQ(r.open(path, GB_MODEL_LOAD_COPY), GB_OK);
  std::vector<int32_t> toks;
  ASSERT_EQ(r.decode(4, &toks), GB_OK);
  zero_in_place(path);
  ASSERT_EQ(r.decode(4, &toks), GB_OK);
  truncate_to_half(path);
  ASSERT_EQ(r.decode(4, &toks), GB_OK);
  EXPECT_EQ(toks, want);
  EXPECT_EQ(gb_model_verify(r.m), GB_OK) << "the copy is intact";
  // Gear shifts on a copy must not release pages (that would zero them).
  ASSERT_EQ(gb_session_reset(r.s), GB_OK);
}

TEST(Integrity, LoadedCopyRunsAutoGearsLikeTheMapping) {
  // An auto session shifts gears and, on a mapping, releases the tiers it
  // leaves; on a copy it must not (DONTNEED on anonymous memory zeroes it).
  auto run = [](gb_model_load load) {
    gb_model_options mo = gbt::quiet_model_options();
    mo.load = load;
    gb_model *m = nullptr;
    EXPECT_EQ(gb_model_open_file(gbt::stories260k_gbx().c_str(), &mo, &m), GB_OK);
    gb_session_options so;
    gb_session_options_init(&so);
    so.gear = GB_GEAR_AUTO;
    so.sampler.temperature = 0.0f;
    gbt::x(so).release_steps = 1;
    so.log = gbt::quiet_log;
    gb_session *s = nullptr;
    EXPECT_EQ(gb_session_create(m, &so, nullptr, 0, &s), GB_OK);
    const int32_t prompt[] = {1, 403};
    EXPECT_EQ(gb_prefill(s, prompt, 2), GB_OK);
    std::vector<int32_t> toks;
    uint32_t shifts = 0;
    for (int i = 0; i < 120; i++) {
      int32_t t;
      gb_step_info info;
      info.struct_size = sizeof info;
      EXPECT_EQ(gb_decode_step(s, &t, &info), GB_OK);
      toks.push_back(t);
      shifts += info.shifted;
    }
    gb_session_destroy(s);
    gb_model_close(m);
    return std::make_pair(toks, shifts);
  };
  const auto mapped = run(GB_MODEL_LOAD_MAP), copied = run(GB_MODEL_LOAD_COPY);
  EXPECT_GT(mapped.second, 0u) << "the run shifts gears, or this test shows nothing";
  EXPECT_EQ(copied.first, mapped.first);
}

TEST(Integrity, LoadOptionIsValidated) {
  gb_model_options mo = gbt::quiet_model_options();
  Log log;
  mo.log = Log::fn;
  mo.log_user = &log;
  mo.load = (gb_model_load)3;
  gb_model *m = reinterpret_cast<gb_model *>(0x1);
  EXPECT_EQ(gb_model_open_file(gbt::stories260k_gbx().c_str(), &mo, &m), GB_ERR_INVALID_ARGUMENT);
  EXPECT_EQ(m, reinterpret_cast<gb_model *>(0x1));
  EXPECT_FALSE(log.lines.empty());
  mo.load = GB_MODEL_LOAD_COPY;
  EXPECT_EQ(gb_model_open_file((gbt::temp_dir() + "/absent.gbx").c_str(), &mo, &m), GB_ERR_FILE_NOT_FOUND);
}

// Damage that open must refuse, and the section its log line must name.
TEST(Integrity, DamagedFilesAreRefusedNamingTheSection) {
  const std::vector<uint8_t> good = gbt::read_file(gbt::stories260k_gbx());
  const uint32_t n = gb::ld_u32(&good[16]);
  auto entry = [](std::vector<uint8_t> &b, uint32_t i) { return &b[gb::kHeaderFixedBytes + i * gb::kSectionEntryBytes]; };
  const std::string path = gbt::temp_dir() + "/damaged.gbx";
  auto open_log = [&](const std::vector<uint8_t> &img, Log *log) {
    EXPECT_TRUE(gbt::write_file(path, img));
    gb_model_options mo;
    gb_model_options_init(&mo);
    mo.verify = GB_VERIFY_ALL;
    mo.log = Log::fn;
    mo.log_user = log;
    gb_model *m = nullptr;
    const gb_status st = gb_model_open_file(path.c_str(), &mo, &m);
    gb_model_close(m);
    return st;
  };
  std::vector<uint8_t> copy = good;
  uint32_t checked = 0;
  for (uint32_t i = 0; i < n; i++) {
    std::vector<uint8_t> b = good;
    const uint32_t kind = gb::ld_u32(entry(b, i));
    const uint64_t off = gb::ld_u64(entry(b, i) + 8), size = gb::ld_u64(entry(b, i) + 16);
    if (size == 0) continue;
    // A flipped byte in the middle of the section: its CRC.
    b[off + size / 2] ^= 0x10;
    Log log;
    EXPECT_EQ(open_log(b, &log), GB_ERR_CHECKSUM) << "section kind " << kind;
    // Its size grown past the end of the file: the directory.
    std::vector<uint8_t> c = good;
    gb::st_u64(entry(c, i) + 16, c.size());
    gbt::gbx_fix_crcs(c);
    Log log2;
    EXPECT_EQ(open_log(c, &log2), GB_ERR_TRUNCATED) << "section kind " << kind;
    // Both log lines name the section the same way.
    ASSERT_FALSE(log.lines.empty());
    ASSERT_FALSE(log2.lines.empty());
    const std::string &l1 = log.lines.front(), &l2 = log2.lines.front();
    const size_t p1 = l1.find("section "), p2 = l2.find("(");
    ASSERT_NE(p1, std::string::npos) << l1;
    ASSERT_NE(p2, std::string::npos) << l2;
    const std::string name = l1.substr(p1 + 8, l1.find(' ', p1 + 8) - (p1 + 8));
    EXPECT_FALSE(name.empty());
    EXPECT_NE(l2.find("(" + name + ")"), std::string::npos) << l1 << " / " << l2;
    checked++;
  }
  EXPECT_GE(checked, 4u) << "META, VOCAB or TOKENIZER, TENSORS, common and gear sections";
  // The directory itself: a section count that disagrees with the header size.
  copy[16] ^= 1;
  Log log;
  EXPECT_NE(open_log(copy, &log), GB_OK);
  EXPECT_FALSE(log.lines.empty());
}
