// test_util.h — shared helpers for the test suite: paths of the shared
// models and data, converted test models (made once per test binary run),
// and the allocation counter of alloc_hook.cpp.
#pragma once

#include <stddef.h>
#include <stdint.h>

#include <string>
#include <vector>

#include "gearbx.h"

// tests/c_caller.c: the naming functions called from C, where an enum
// parameter may hold any int.
extern "C" const char *gbt_c_status_str(int value);
extern "C" const char *gbt_c_gear_name(int value);
extern "C" const char *gbt_c_kv_policy_name(int value);
extern "C" const char *gbt_c_chat_template_name(int value);
extern "C" gb_status gbt_c_chat_apply(int t, const gb_chat_message *msgs, size_t n, int gen, char *buf, size_t cap,
                                      size_t *n_out);
extern "C" gb_status gbt_c_chat_eot_strings(int t, const char *const **strings, size_t *count);

namespace gbt {

std::string shared_path(const char *rel);  // GB_SHARED_DIR "/" rel
std::string temp_dir();                    // one per process, created on demand, removed at exit (GB_TEST_KEEP_TMP=1 keeps it)
std::vector<uint8_t> read_file(const std::string &path);
bool write_file(const std::string &path, const std::vector<uint8_t> &data);

// Converted models (paths inside temp_dir(), converted on first use).
const std::string &stories260k_gbx();       // from stories260K.bin + tok512.bin
const std::string &stories260k_gguf_gbx();  // from stories260K.gguf
const std::string &stories5m_gbx();         // from stories5M_distilled.bin + tok512.bin

// False when GB_TEST_NO_THREADS is set (the aarch64 toolchain's emulator
// command sets it unless the executables are linked statically: Debian 12's
// qemu-user hangs in pthread_create of dynamic programs): tests that start
// worker threads then skip or use one thread.
bool threads_available();

// GB_TEST_SCALE in (0, 1] (tests/run.sh sets it for the emulated aarch64
// runs): the share of their token / sample counts the long tests run; 1 on
// native runs.
double test_scale();

// The experimental controls of so, made writable: a fresh copy (of those so
// points to, or of the defaults) that so then points to, so that copies of so
// taken before keep theirs. The copies live in static storage until the
// process exits (no heap: the allocation counter sees nothing).
gb_session_experimental &x(gb_session_options &so);

// The session's state image (gb_session_state_save into a buffer of
// gb_session_state_size bytes), its sizes checked (gtest expectations:
// written as announced, within gb_session_state_max_size).
std::vector<uint8_t> save_state(gb_session *s);

// A log callback that swallows everything (malformed-input tests).
void quiet_log(void *, gb_log_level, const char *);
gb_model_options quiet_model_options();

// Recompute the header CRC and every section CRC of a .gbx image in place
// (so a test can plant an inconsistency behind valid checksums).
void gbx_fix_crcs(std::vector<uint8_t> &img);

// The gearbx tool (GB_CLI_PATH) run with `args`, stdin from stdin_path
// (empty: /dev/null), stdout and stderr captured; status -1 if it did not exit.
struct CliOut {
  int status;
  std::string out, err;
};
CliOut run_cli(const std::string &args, const std::string &stdin_path = "");
// A file's bytes as a string; text written to a file in temp_dir() (its path).
std::string slurp(const std::string &path);
std::string write_temp(const std::string &name, const std::string &text);
size_t count_lines(const std::string &s);

// Allocation counter (tests/alloc_hook.cpp): counts malloc/calloc/realloc/
// posix_memalign/aligned_alloc calls made from code linked into the test
// binary, including the library's, while counting is on.
void alloc_count_start();
uint64_t alloc_count_stop();

}  // namespace gbt
