// cmd_tokenize.cpp — `gearbx tokenize` and `gearbx detokenize`: text on
// stdin to token ids on stdout and back, with the tokenizer of a .gbx model
// or of a GGUF file (any GGUF with tokenizer.ggml.* keys, vocabulary-only
// ones included; recognised by its "GGUF" magic, not by its name).
//
// tokenize prints the ids on one line, separated by single spaces. With
// --lines SEP the input is cut at every SEP (C escapes \n \t \r \\ in SEP)
// and each piece gives one line with a space before every id — the format of
// llama.cpp's vocabulary test files (*.gguf.inp / *.gguf.out): SEP ends a
// piece, and a last piece without SEP after it counts only if it is not empty.
//
// detokenize reads whitespace-separated decimal ids and writes their text
// exactly, without a newline of its own, so that
// `tokenize --no-bos | detokenize` gives the text back. A SentencePiece
// vocabulary's space prefix (the space the tokenizer puts before the text)
// is dropped from the first piece with text, as llama.cpp's detokenizer
// does. With --lines SEP every input line is one id sequence and its text is
// written followed by SEP (the inverse of tokenize --lines SEP).
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include <string>
#include <vector>

#include "cli.h"
#include "gearbx_convert.h"

namespace {

int tok_usage(bool detok) {
  if (detok)
    fprintf(stderr,
            "usage: gearbx detokenize -m MODEL.gbx|VOCAB.gguf [--special] [--lines SEP] < IDS\n"
            "  --special    control tokens (<s>, <|eot_id|>) give their text (default: nothing)\n"
            "  --lines SEP  one id sequence per input line; each text is written followed by SEP\n"
            "               (C escapes \\n \\t \\r \\\\)\n");
  else
    fprintf(stderr,
            "usage: gearbx tokenize -m MODEL.gbx|VOCAB.gguf [--no-bos] [--parse-special] [--lines SEP] < TEXT\n"
            "  --no-bos         no BOS id first (default: as the tokenizer wants, its add_bos)\n"
            "  --parse-special  control tokens written in the text (<s>, <|eot_id|>) become their ids\n"
            "  --lines SEP      tokenize each piece of the input ended by SEP separately, one line\n"
            "                   each, a space before every id (C escapes \\n \\t \\r \\\\ in SEP)\n");
  return 1;
}

// A tokenizer from a .gbx model (owned by the model) or from a GGUF file's
// tokenizer keys (an image converted here, opened without a model).
struct TokSource {
  gb_model *model = nullptr;
  gb_tokenizer *own = nullptr;
  void *image = nullptr;
  const gb_tokenizer *tok = nullptr;
  ~TokSource() {
    gb_tokenizer_close(own);
    gb_convert_free(image);
    gb_model_close(model);
  }
};

bool open_tokenizer(const char *C, const char *path, TokSource *ts) {
  FILE *f = fopen(path, "rb");
  if (!f) return cli_error(C, "cannot open '%s': %s", path, strerror(errno)), false;
  char magic[4] = {0, 0, 0, 0};
  const size_t got = fread(magic, 1, 4, f);
  fclose(f);
  if (got == 4 && !memcmp(magic, "GGUF", 4)) {
    gb_convert_options co;
    gb_convert_default_options(&co);
    co.log = cli_log;
    size_t size = 0;
    gb_status st = gb_convert_gguf_tokenizer(path, &co, &ts->image, &size);
    if (st != GB_OK) return cli_error(C, "cannot read the tokenizer of '%s': %s", path, cli_detail(st)), false;
    gb_model_options mo;
    gb_model_options_init(&mo);
    mo.log = cli_log;
    st = gb_tokenizer_open_memory(ts->image, size, &mo, &ts->own);
    if (st != GB_OK) return cli_error(C, "cannot open the tokenizer of '%s': %s", path, cli_detail(st)), false;
    ts->tok = ts->own;
    return true;
  }
  ts->model = cli_open_model(C, path);
  if (!ts->model) return false;
  const gb_status st = gb_model_tokenizer(ts->model, &ts->tok);
  if (st != GB_OK) return cli_error(C, "'%s' has no tokenizer: %s", path, cli_detail(st)), false;
  return true;
}

// SEP with C escapes; false (printed) on a bad escape or an empty result.
bool parse_sep(const char *C, const char *s, std::string *out) {
  out->clear();
  for (const char *p = s; *p; p++) {
    if (*p != '\\') {
      out->push_back(*p);
      continue;
    }
    switch (*++p) {
      case 'n': out->push_back('\n'); break;
      case 't': out->push_back('\t'); break;
      case 'r': out->push_back('\r'); break;
      case '\\': out->push_back('\\'); break;
      default: return cli_error(C, "--lines: unknown escape '\\%.1s' in '%s' (\\n \\t \\r \\\\)", p, s), false;
    }
  }
  if (out->empty()) return cli_error(C, "--lines needs a non-empty separator"), false;
  return true;
}

bool read_stdin(const char *C, std::string *out) {
  char buf[65536];
  size_t n;
  while ((n = fread(buf, 1, sizeof buf, stdin)) > 0) out->append(buf, n);
  if (ferror(stdin)) return cli_error(C, "cannot read standard input: %s", strerror(errno)), false;
  return true;
}

// Cut text into the pieces SEP ends (a last piece without SEP counts when
// not empty).
std::vector<std::string> split_pieces(const std::string &text, const std::string &sep) {
  std::vector<std::string> pieces;
  size_t at = 0;
  for (;;) {
    const size_t e = text.find(sep, at);
    if (e == std::string::npos) break;
    pieces.push_back(text.substr(at, e - at));
    at = e + sep.size();
  }
  if (at < text.size()) pieces.push_back(text.substr(at));
  return pieces;
}

bool write_out(const char *C, const std::string &s) {
  if (fwrite(s.data(), 1, s.size(), stdout) != s.size() || fflush(stdout) != 0)
    return cli_error(C, "cannot write standard output: %s", strerror(errno)), false;
  return true;
}

struct TokArgs {
  const char *model = nullptr, *lines = nullptr;
  bool no_bos = false, parse_special = false, special = false;
};

// Common option parsing; returns -1 to go on, else the exit status.
int parse_args(const char *C, bool detok, int argc, char **argv, TokArgs *a) {
  for (int i = 1; i < argc; i++) {
    const char *o = argv[i];
    const char *v = i + 1 < argc ? argv[i + 1] : nullptr;
    if (!strcmp(o, "--help")) return tok_usage(detok), 0;
    if (!detok && !strcmp(o, "--no-bos")) { a->no_bos = true; continue; }
    if (!detok && !strcmp(o, "--parse-special")) { a->parse_special = true; continue; }
    if (detok && !strcmp(o, "--special")) { a->special = true; continue; }
    if (strcmp(o, "-m") != 0 && strcmp(o, "--lines") != 0) return cli_error(C, "unknown option '%s'", o);
    if (!v) return cli_error(C, "option %s needs a value", o);
    if (!strcmp(o, "-m")) a->model = v;
    else a->lines = v;
    i++;
  }
  if (!a->model) return cli_error(C, "-m MODEL.gbx|VOCAB.gguf is required");
  return -1;
}

// What both commands start with: arguments, the --lines separator, the
// tokenizer and its info. -1 to go on, else the exit status.
int prepare(const char *C, bool detok, int argc, char **argv, TokArgs *a, std::string *sep, TokSource *ts,
            gb_tokenizer_info *ti) {
  const int pr = parse_args(C, detok, argc, argv, a);
  if (pr >= 0) return pr;
  if (a->lines && !parse_sep(C, a->lines, sep)) return 1;
  if (!open_tokenizer(C, a->model, ts)) return 1;
  memset(ti, 0, sizeof *ti);
  ti->struct_size = sizeof *ti;
  const gb_status st = gb_tokenizer_get_info(ts->tok, ti);
  if (st != GB_OK) return cli_error(C, "%s", cli_detail(st));
  return -1;
}

}  // namespace

int gb_cli_tokenize(int argc, char **argv) {
  const char *C = "tokenize";
  TokArgs a;
  std::string sep;
  TokSource ts;
  gb_tokenizer_info ti;
  const int pr = prepare(C, false, argc, argv, &a, &sep, &ts, &ti);
  if (pr >= 0) return pr;
  gb_status st;
  uint32_t flags = 0;
  if (ti.add_bos && !a.no_bos) flags |= GB_TOKENIZE_ADD_BOS;
  if (a.parse_special) flags |= GB_TOKENIZE_PARSE_SPECIAL;

  std::string text;
  if (!read_stdin(C, &text)) return 1;
  std::vector<std::string> pieces;
  if (a.lines) pieces = split_pieces(text, sep);
  else pieces.push_back(text);

  std::string out;
  std::vector<int32_t> ids;
  char num[16];
  for (const std::string &p : pieces) {
    const size_t cap = GB_TOKENIZE_CAPACITY(p.size());
    if (ids.size() < cap) ids.resize(cap);
    size_t n = 0;
    st = gb_tokenizer_encode(ts.tok, p.data(), p.size(), flags, ids.data(), ids.size(), &n);
    if (st != GB_OK) return cli_error(C, "%s", cli_detail(st));
    for (size_t i = 0; i < n; i++) {
      const int k = snprintf(num, sizeof num, "%d", ids[i]);
      if (a.lines || i > 0) out.push_back(' ');
      out.append(num, (size_t)k);
    }
    out.push_back('\n');
  }
  return write_out(C, out) ? 0 : 1;
}

int gb_cli_detokenize(int argc, char **argv) {
  const char *C = "detokenize";
  TokArgs a;
  std::string sep;
  TokSource ts;
  gb_tokenizer_info ti;
  const int pr = prepare(C, true, argc, argv, &a, &sep, &ts, &ti);
  if (pr >= 0) return pr;
  gb_status st;
  uint32_t flags = 0;
  if (a.special) flags |= GB_DETOKENIZE_SPECIAL;
  // The SentencePiece space prefix: tokenize puts it before the text (after
  // BOS), so the text read back drops it.
  if (ti.kind == GB_TOKENIZER_SPM || ti.kind == GB_TOKENIZER_LLAMA2C) flags |= GB_DETOKENIZE_STRIP_SPACE;

  std::string in;
  if (!read_stdin(C, &in)) return 1;
  // Sequences: the whole input, or one per line.
  std::vector<std::string> seqs;
  if (a.lines) seqs = split_pieces(in, "\n");
  else seqs.push_back(in);

  std::string out, buf;
  std::vector<int32_t> ids;
  size_t line = 0;
  for (const std::string &s : seqs) {
    line++;
    ids.clear();
    const char *p = s.c_str(), *end = p + s.size();
    while (p < end) {
      while (p < end && strchr(" \t\r\n\f\v", *p) && *p) p++;
      if (p >= end) break;
      const char *q = p;
      while (q < end && !strchr(" \t\r\n\f\v", *q) && *q) q++;
      const std::string word(p, (size_t)(q - p));
      const char *where = a.lines ? " on line " : "";
      char lno[24] = "";
      if (a.lines) snprintf(lno, sizeof lno, "%zu", line);
      if (q == p || word.find_first_not_of("0123456789") != std::string::npos)
        return cli_error(C, "'%s'%s%s is not a token id (a decimal number)", word.c_str(), where, lno);
      errno = 0;
      const unsigned long long v = strtoull(word.c_str(), nullptr, 10);
      if (errno || v >= ti.n_tokens)
        return cli_error(C, "token id %s%s%s is out of range (the vocabulary has %u tokens)", word.c_str(), where, lno,
                         ti.n_tokens);
      ids.push_back((int32_t)v);
      p = q;
    }
    if (ids.empty()) {
      if (a.lines) out += sep;
      continue;
    }
    size_t need = 0;
    st = gb_tokenizer_decode(ts.tok, ids.data(), ids.size(), flags, nullptr, 0, &need);
    if (st == GB_ERR_BUFFER_TOO_SMALL) {
      buf.resize(need);
      st = gb_tokenizer_decode(ts.tok, ids.data(), ids.size(), flags, &buf[0], buf.size(), &need);
    }
    if (st != GB_OK) return cli_error(C, "%s", cli_detail(st));
    out.append(buf.data(), need);
    if (a.lines) out += sep;
  }
  return write_out(C, out) ? 0 : 1;
}
