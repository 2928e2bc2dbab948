/* simple.c — the gearbx API in a few lines of C: open, create, prefill, decode. */
#include <stdio.h>
#include <string.h>

#include "gearbx.h"

int main(int argc, char **argv) {
  if (argc < 2) { fprintf(stderr, "usage: simple MODEL.gbx [PROMPT]\n"); return 2; }
  const char *prompt = argc > 2 ? argv[2] : "Once upon a time";
  gb_model *model;
  gb_session *s;
  gb_session_options o;
  int32_t toks[256], tok, prev;
  size_t n;
  gb_session_options_init(&o);
  o.sampler.temperature = 0.0f; /* greedy */
  if (gb_model_open_file(argv[1], NULL, &model) != GB_OK) return 1;
  if (gb_tokenize(model, prompt, strlen(prompt), GB_TOKENIZE_ADD_BOS, toks, 256, &n) != GB_OK ||
      gb_session_create(model, &o, NULL, 0, &s) != GB_OK || gb_prefill(s, toks, n) != GB_OK) {
    gb_model_close(model);
    return 1;
  }
  fputs(prompt, stdout);
  prev = toks[n - 1];
  for (int i = 0; i < 64 && gb_decode_step(s, &tok, NULL) == GB_OK; i++, prev = tok) {
    const char *piece;
    size_t len;
    if (gb_token_to_text(model, prev, tok, &piece, &len) == GB_OK) fwrite(piece, 1, len, stdout);
  }
  putchar('\n');
  gb_session_destroy(s);
  gb_model_close(model);
  return 0;
}
