// main.cpp — the gearbx command-line tool: convert, info, run, perplexity.
#include <string.h>

#include "cli.h"

static int usage(FILE *f) {
  fprintf(f,
          "gearbx %s — entropy-routed LLM decoding\n"
          "usage:\n"
          "  gearbx convert IN.bin --tokenizer TOK.bin -o OUT.gbx   llama2.c checkpoint\n"
          "  gearbx convert IN.gguf -o OUT.gbx                      GGUF (llama)\n"
          "  gearbx convert --synthetic SPEC -o OUT.gbx             random weights\n"
          "  gearbx info MODEL.gbx\n"
          "  gearbx run -m MODEL.gbx [-p PROMPT] [-n TOKENS] [--gear low|mid|high|f32|auto]\n"
          "             [--temp T] [--top-k K] [--top-p P] [--min-p P] [--seed S] [--trace FILE.csv]\n"
          "             [--plot FILE.svg] [--deterministic]\n"
          "  gearbx perplexity -m MODEL.gbx -f TEXT [--policy low|mid|high|f32|auto] [--ctx N] [--json FILE]\n"
          "  gearbx plan -m MODEL.gbx --budget SIZE [--ctx N]          the best session for a byte budget\n"
          "             [--managed all|attn] [--no-kl] [--max-tokens N]\n"
          "  gearbx tokenize -m MODEL.gbx|VOCAB.gguf [--no-bos] [--parse-special] [--lines SEP] < TEXT\n"
          "  gearbx detokenize -m MODEL.gbx|VOCAB.gguf [--special] [--lines SEP] < IDS\n"
          "  gearbx chat -m MODEL.gbx [--system TEXT] [--template NAME] [-n TOKENS] [--temp T] [--seed S]\n"
          "             [--ctx N] [--threads N] [--show-prompt]     one user message per input line\n"
          "run 'gearbx COMMAND --help' for a command's options.\n",
          gb_version_string());
  return f == stdout ? 0 : 2;
}

int main(int argc, char **argv) {
  if (argc < 2) return usage(stderr);
  const char *cmd = argv[1];
  if (!strcmp(cmd, "-h") || !strcmp(cmd, "--help") || !strcmp(cmd, "help")) return usage(stdout);
  if (!strcmp(cmd, "--version")) {
    printf("gearbx %s\n", gb_version_string());
    return 0;
  }
  if (gb_version() != GB_VERSION_NUMBER) {
    fprintf(stderr, "gearbx: error: header %d and library %u versions differ\n", GB_VERSION_NUMBER, gb_version());
    return 1;
  }
  if (!strcmp(cmd, "convert")) return gb_cli_convert(argc - 1, argv + 1);
  if (!strcmp(cmd, "info")) return gb_cli_info(argc - 1, argv + 1);
  if (!strcmp(cmd, "run")) return gb_cli_run(argc - 1, argv + 1);
  if (!strcmp(cmd, "perplexity")) return gb_cli_perplexity(argc - 1, argv + 1);
  if (!strcmp(cmd, "plan")) return gb_cli_plan(argc - 1, argv + 1);
  if (!strcmp(cmd, "tokenize")) return gb_cli_tokenize(argc - 1, argv + 1);
  if (!strcmp(cmd, "detokenize")) return gb_cli_detokenize(argc - 1, argv + 1);
  if (!strcmp(cmd, "chat")) return gb_cli_chat(argc - 1, argv + 1);
  fprintf(stderr, "gearbx: error: unknown command '%s'\n", cmd);
  usage(stderr);
  return 1;
}
