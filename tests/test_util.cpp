// test_util.cpp — see test_util.h.
#include "test_util.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <ftw.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>

#include <gtest/gtest.h>

#include "bytes.h"
#include "convert.h"
#include "crc32.h"
#include "format.h"

namespace gbt {

gb_session_experimental &x(gb_session_options &so) {
  static gb_session_experimental slots[8192];
  static std::atomic<size_t> used{0};
  const size_t i = used++;
  if (i >= sizeof slots / sizeof slots[0]) abort();  // a test asks for far more than any does
  gb_session_experimental &e = slots[i];
  if (so.experimental)
    e = *so.experimental;
  else
    gb_session_experimental_init(&e);
  so.experimental = &e;
  return e;
}

std::string shared_path(const char *rel) { return std::string(GB_SHARED_DIR) + "/" + rel; }

namespace {
std::string g_temp_dir;
pid_t g_temp_owner = 0;

int remove_entry(const char *path, const struct stat *, int, struct FTW *) { return remove(path); }

// ctest runs every test in its own process, so each process removes its
// directory (converted models, up to ~100 MB) when it exits. Forked children
// inherit the atexit handler but not the ownership.
void remove_temp_dir() {
  if (!g_temp_dir.empty() && getpid() == g_temp_owner && !getenv("GB_TEST_KEEP_TMP"))
    nftw(g_temp_dir.c_str(), remove_entry, 16, FTW_DEPTH | FTW_PHYS);
}
}  // namespace

std::string temp_dir() {
  if (g_temp_dir.empty()) {
    std::string tmpl = ::testing::TempDir() + "gearbx-test-XXXXXX";
    std::vector<char> buf(tmpl.begin(), tmpl.end());
    buf.push_back(0);
    if (!mkdtemp(buf.data())) abort();
    g_temp_dir = buf.data();
    g_temp_owner = getpid();
    atexit(remove_temp_dir);
  }
  return g_temp_dir;
}

std::vector<uint8_t> save_state(gb_session *s) {
  size_t need = 0, mx = 0, n = 0;
  EXPECT_EQ(gb_session_state_size(s, &need), GB_OK);
  EXPECT_EQ(gb_session_state_max_size(s, &mx), GB_OK);
  EXPECT_LE(need, mx);
  std::vector<uint8_t> img(need);
  EXPECT_EQ(gb_session_state_save(s, img.data(), img.size(), &n), GB_OK);
  EXPECT_EQ(n, need);
  return img;
}

std::vector<uint8_t> read_file(const std::string &path) {
  std::vector<uint8_t> out;
  FILE *f = fopen(path.c_str(), "rb");
  if (!f) return out;
  uint8_t buf[1 << 16];
  size_t n;
  while ((n = fread(buf, 1, sizeof buf, f)) > 0) out.insert(out.end(), buf, buf + n);
  fclose(f);
  return out;
}

bool write_file(const std::string &path, const std::vector<uint8_t> &data) {
  FILE *f = fopen(path.c_str(), "wb");
  if (!f) return false;
  const bool ok = fwrite(data.data(), 1, data.size(), f) == data.size();
  return fclose(f) == 0 && ok;
}

bool threads_available() {
  const char *e = getenv("GB_TEST_NO_THREADS");
  return !(e && *e && strcmp(e, "0") != 0);
}

double test_scale() {
  const char *e = getenv("GB_TEST_SCALE");
  const double v = e ? atof(e) : 1.0;
  return v > 0.0 && v <= 1.0 ? v : 1.0;
}

void quiet_log(void *, gb_log_level, const char *) {}

gb_model_options quiet_model_options() {
  gb_model_options o;
  gb_model_options_init(&o);
  o.log = quiet_log;
  o.verify = GB_VERIFY_ALL;
  return o;
}

namespace {
std::string convert_once(const char *name, int kind) {
  const std::string out = temp_dir() + "/" + name;
  gb::ConvertOptions opt;
  opt.page_align = 4096;  // small test files
  gb_status st = GB_ERR_INTERNAL;
  if (kind == 0) st = gb::convert_llama2c(shared_path("models/stories260K.bin").c_str(), shared_path("models/tok512.bin").c_str(), out.c_str(), opt);
  if (kind == 1) st = gb::convert_gguf(shared_path("models/stories260K.gguf").c_str(), out.c_str(), opt);
  if (kind == 2) st = gb::convert_llama2c(shared_path("models/stories5M_distilled.bin").c_str(), shared_path("models/tok512.bin").c_str(), out.c_str(), opt);
  if (st != GB_OK) {
    fprintf(stderr, "test setup: converting %s failed: %s\n", name, gb_status_str(st));
    abort();
  }
  return out;
}
}  // namespace

const std::string &stories260k_gbx() {
  static const std::string p = convert_once("stories260K.gbx", 0);
  return p;
}
const std::string &stories260k_gguf_gbx() {
  static const std::string p = convert_once("stories260K_gguf.gbx", 1);
  return p;
}
const std::string &stories5m_gbx() {
  static const std::string p = convert_once("stories5M.gbx", 2);
  return p;
}

void gbx_fix_crcs(std::vector<uint8_t> &img) {
  using namespace gb;
  if (img.size() < kHeaderFixedBytes) return;
  const uint32_t n = ld_u32(&img[16]);
  const uint32_t hb = kHeaderFixedBytes + n * kSectionEntryBytes;
  if (n > kMaxSections || hb > img.size()) return;
  for (uint32_t i = 0; i < n; i++) {
    uint8_t *e = &img[kHeaderFixedBytes + i * kSectionEntryBytes];
    const uint64_t off = ld_u64(e + 8), size = ld_u64(e + 16);
    if (in_range(off, size, img.size())) st_u32(e + 24, crc32_update(0, img.data() + off, size));
  }
  st_u32(&img[36], 0);
  st_u32(&img[36], crc32_update(0, img.data(), hb));
}

CliOut run_cli(const std::string &args, const std::string &stdin_path) {
  const std::string dir = temp_dir(), o = dir + "/cli.out", e = dir + "/cli.err";
  const std::string cmd = std::string(GB_CLI_PATH) + " " + args + " <" + (stdin_path.empty() ? "/dev/null" : stdin_path) + " >" +
                          o + " 2>" + e;
  const int rc = system(cmd.c_str());
  CliOut r;
  r.status = WIFEXITED(rc) ? WEXITSTATUS(rc) : -1;
  r.out = slurp(o);
  r.err = slurp(e);
  return r;
}

std::string slurp(const std::string &path) {
  const std::vector<uint8_t> b = read_file(path);
  return std::string(b.begin(), b.end());
}

std::string write_temp(const std::string &name, const std::string &text) {
  const std::string p = temp_dir() + "/" + name;
  EXPECT_TRUE(write_file(p, std::vector<uint8_t>(text.begin(), text.end()))) << p;
  return p;
}

size_t count_lines(const std::string &s) { return (size_t)std::count(s.begin(), s.end(), '\n'); }

}  // namespace gbt
