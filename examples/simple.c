/* simple.c — the gearbx API in a few lines of C: open, create, prefill, decode. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "gearbx.h"

int main(int argc, char **argv) {
  if (argc < 2) { fprintf(stderr, "usage: simple MODEL.gbx [PROMPT]\n"); return 2; }
  const char *prompt = argc > 2 ? argv[2] : "Once upon a time";
  gb_model *model;
  gb_session *s;
  gb_session_options o;
  const gb_tokenizer *tk;
  int32_t *toks, tok, prev;
  size_t n, cap = GB_TOKENIZE_CAPACITY(strlen(prompt));
  gb_session_options_init(&o);
  o.sampler.temperature = 0.0f; /* greedy */
  if (gb_model_open_file(argv[1], NULL, &model) != GB_OK) return 1;
  toks = malloc(cap * sizeof *toks); /* the tokenizer's work space too */
  if (!toks || gb_tokenize(model, prompt, strlen(prompt), GB_TOKENIZE_ADD_BOS, toks, cap, &n) != GB_OK || n == 0 ||
      gb_session_create(model, &o, NULL, 0, &s) != GB_OK || gb_prefill(s, toks, n) != GB_OK) {
    free(toks);
    gb_model_close(model);
    return 1;
  }
  gb_model_tokenizer(model, &tk);
  fputs(prompt, stdout);
  prev = toks[n - 1];
  for (int i = 0; i < 64 && gb_decode_step(s, &tok, NULL) == GB_OK; i++, prev = tok) {
    const char *piece;
    size_t len;
    int eog = 0;
    if (gb_tokenizer_is_eog(tk, tok, &eog) == GB_OK && eog) break; /* end of text / turn */
    if (gb_token_to_text(model, prev, tok, &piece, &len) == GB_OK) fwrite(piece, 1, len, stdout);
  }
  putchar('\n');
  free(toks);
  gb_session_destroy(s);
  gb_model_close(model);
  return 0;
}
