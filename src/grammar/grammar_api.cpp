// grammar_api.cpp — the public gb_grammar object: a compiled GBNF image in
// one block of memory, plus a small matcher for gb_grammar_match.
#include <new>

#include "arena.h"
#include "gearbx_port.h"
#include "grammar/gbnf.h"
#include "grammar/matcher.h"
#include "grammar/grammar_obj.h"

using namespace gb;

namespace {

constexpr uint32_t kDefaultStacks = 64, kDefaultDepth = 128;

gb_status read_grammar_options(const gb_grammar_options *in, gb_grammar_options *o, Logger *log, const char *fn) {
  gb_grammar_options_init(o);
  if (in) {
    if (in->struct_size < offsetof(gb_grammar_options, max_stacks) || in->struct_size > sizeof *o)
      return api_result(fn, GB_ERR_STRUCT_SIZE, "gb_grammar_options struct_size not supported");
    memcpy(o, in, in->struct_size);
    o->struct_size = sizeof *o;
  }
  if (o->log) log->fn = o->log, log->user = o->log_user;
  if (!o->root) o->root = "root";
  GB_RETURN_IF(o->max_stacks == 0 || o->max_stacks > 65536, *log, GB_ERR_INVALID_ARGUMENT, "%s: max_stacks %u not in 1..65536",
               fn, o->max_stacks);
  GB_RETURN_IF(o->max_depth == 0 || o->max_depth > 65536, *log, GB_ERR_INVALID_ARGUMENT, "%s: max_depth %u not in 1..65536", fn,
               o->max_depth);
  return GB_OK;
}

// The layout of a grammar's memory (counting when a counts): the object,
// the compile's words (the image at their start), the matcher.
gb_grammar *carve(Arena &a, size_t words, const gb_grammar_options &o) {
  gb_grammar *g = a.array<gb_grammar>(1, 8);
  gb_grammar tmp;
  gb_grammar *t = g ? new (g) gb_grammar() : &tmp;
  t->words = a.array<uint32_t>(words, 8);
  t->n_words = words;
  matcher_carve(&t->m, a, o.max_stacks, o.max_depth, 0, 1);
  return g;
}

gb_status size_of(const char *text, size_t len, const gb_grammar_options &o, const Logger &log, const char *fn,
                  size_t *words, size_t *bytes) {
  if (!text && len) return null_arg(log, fn, "text (with len > 0)");
  GB_RETURN_IF(len > kGbnfMaxText, log, GB_ERR_INVALID_ARGUMENT, "%s: grammar text of %zu bytes (at most 16 MiB)", fn, len);
  GB_TRY(gbnf_compile(text ? text : "", len, o.root, nullptr, 0, words, nullptr, log));
  Arena counter;
  carve(counter, *words, o);
  *bytes = counter.used();
  return GB_OK;
}

}  // namespace

extern "C" void gb_grammar_options_init(gb_grammar_options *o) {
  if (!o) return;
  memset(o, 0, sizeof *o);
  o->struct_size = sizeof *o;
  o->max_stacks = kDefaultStacks;
  o->max_depth = kDefaultDepth;
}

extern "C" gb_status gb_grammar_mem_size(const char *text, size_t len, const gb_grammar_options *opts, size_t *out) {
  gb_grammar_options o;
  Logger log;
  GB_TRY(read_grammar_options(opts, &o, &log, "gb_grammar_mem_size"));
  if (!out) return null_arg(log, "gb_grammar_mem_size", "out_bytes");
  size_t words;
  return size_of(text, len, o, log, "gb_grammar_mem_size", &words, out);
}

extern "C" gb_status gb_grammar_create(const char *text, size_t len, const gb_grammar_options *opts, void *mem,
                                       size_t mem_bytes, gb_grammar **out) {
  gb_grammar_options o;
  Logger log;
  GB_TRY(read_grammar_options(opts, &o, &log, "gb_grammar_create"));
  if (!out) return null_arg(log, "gb_grammar_create", "out");
  size_t words = 0, need = 0;
  GB_TRY(size_of(text, len, o, log, "gb_grammar_create", &words, &need));
  bool owned = false;
  GB_TRY(obtain_memory(log, "gb_grammar_create", mem, mem_bytes, need, 8, &mem, &owned));
  if (owned) mem_bytes = need;
  Arena arena(mem, mem_bytes);
  gb_grammar *g = carve(arena, words, o);
  size_t image = 0;
  const gb_status st = gbnf_compile(text ? text : "", len, o.root, g->words, words, nullptr, &image, log);
  if (st != GB_OK) {
    g->handle = kHandleDead;
    if (owned) gb_port_aligned_free(mem);
    return st;
  }
  g->n_words = image;
  g->log = log;
  g->owned = owned;
  g->m.log = &g->log;
  *out = g;
  return GB_OK;
}

extern "C" void gb_grammar_destroy(gb_grammar *g) {
  if (!g || check_handle(g, kHandleGrammar, "gb_grammar_destroy") != GB_OK) return;
  g->handle = kHandleDead;
  if (g->owned) gb_port_aligned_free(g);
}

extern "C" gb_status gb_grammar_image_size(const gb_grammar *g, size_t *out) {
  GB_TRY(check_handle(g, kHandleGrammar, "gb_grammar_image_size"));
  if (!out) return null_arg(g->log, "gb_grammar_image_size", "out_bytes");
  *out = g->n_words * sizeof(uint32_t);
  return GB_OK;
}

extern "C" gb_status gb_grammar_match(gb_grammar *g, const char *text, size_t len, gb_grammar_match_result *out) {
  GB_TRY(check_handle(g, kHandleGrammar, "gb_grammar_match"));
  if (!out) return null_arg(g->log, "gb_grammar_match", "out");
  if (!text && len) return null_arg(g->log, "gb_grammar_match", "text (with len > 0)");
  GB_TRY(matcher_start(&g->m, g->words));
  GState st = g->m.cur;
  for (size_t i = 0; i < len && st.n > 0; i++) {
    // Each byte's state replaces the last: drop what the previous states used.
    GState ns;
    GB_TRY(matcher_advance(&g->m, st, (uint8_t)text[i], &ns));
    GB_TRY(matcher_commit(&g->m, ns));
    st = g->m.cur;
  }
  *out = st.n == 0 ? GB_GRAMMAR_MATCH_NONE : matcher_done(g->m, st) ? GB_GRAMMAR_MATCH_COMPLETE : GB_GRAMMAR_MATCH_PREFIX;
  return GB_OK;
}
