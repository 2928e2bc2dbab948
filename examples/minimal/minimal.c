/* minimal.c — gearbx the embedded way, in one fixed block of memory: the
 * model is mapped (weights stay in the file), the session lives in a static
 * arena sized at build time, and nothing is allocated after start-up.
 *   usage: minimal MODEL.gbx [PROMPT]   (prints up to 48 generated tokens) */
#include <stdint.h>
#include <stdio.h>
#include <string.h>

#include "gearbx.h"

#define ARENA_BYTES (8u << 20) /* session: KV pool, scratch, state (gearbx info --ctx 256) */
#define MAX_PROMPT 256         /* bytes of prompt text */
static _Alignas(64) uint8_t arena[ARENA_BYTES];
static int32_t ids[GB_TOKENIZE_CAPACITY(MAX_PROMPT)];

int main(int argc, char **argv) {
  const char *prompt = argc > 2 ? argv[2] : "Once upon a time";
  gb_model *model = NULL;
  gb_session *s = NULL;
  const gb_tokenizer *tok = NULL;
  gb_session_options o;
  size_t need = 0, n = 0;
  gb_status st;
  if (argc < 2 || strlen(prompt) > MAX_PROMPT) return fprintf(stderr, "usage: minimal MODEL.gbx [PROMPT]\n"), 2;
  gb_session_options_init(&o);
  o.n_ctx = 256;
  o.gear = GB_GEAR_DEFAULT;      /* the file's default tier */
  o.kv.beta = 0.5f;              /* KV pool: half an fp16 cache of n_ctx tokens */
  o.sampler.temperature = 0.0f;  /* greedy */
  if ((st = gb_model_open_file(argv[1], NULL, &model)) != GB_OK) goto fail;
  if ((st = gb_session_mem_size(model, &o, &need)) != GB_OK) goto fail;
  if (need > sizeof arena) {
    fprintf(stderr, "minimal: the session needs %zu bytes, the arena has %zu\n", need, sizeof arena);
    gb_model_close(model);
    return 1;
  }
  if ((st = gb_session_create(model, &o, arena, sizeof arena, &s)) != GB_OK) goto fail;
  if ((st = gb_tokenize(model, prompt, strlen(prompt), GB_TOKENIZE_ADD_BOS, ids, sizeof ids / sizeof ids[0], &n)) != GB_OK) goto fail;
  if ((st = gb_prefill(s, ids, n)) != GB_OK) goto fail;
  gb_model_tokenizer(model, &tok);
  fputs(prompt, stdout);
  for (int32_t i = 0, prev = ids[n - 1], t; i < 48 && gb_decode_step(s, &t, NULL) == GB_OK; i++, prev = t) {
    const char *text;
    size_t len;
    int end = 0;
    if (gb_tokenizer_is_eog(tok, t, &end) != GB_OK || end) break;
    if (gb_token_to_text(model, prev, t, &text, &len) == GB_OK) fwrite(text, 1, len, stdout);
  }
  putchar('\n');
  gb_session_destroy(s);
  gb_model_close(model);
  return 0;
fail:
  fprintf(stderr, "minimal: %s\n", gb_status_str(st));
  gb_session_destroy(s);
  gb_model_close(model);
  return 1;
}
