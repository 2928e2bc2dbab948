// convert_api.cpp — gearbx_convert.h over the converter's C++ entry points.
#include "gearbx_convert.h"

#include <stdlib.h>
#include <string.h>

#include <vector>

#include "convert.h"
#include "format.h"

namespace {

// Translation; 0 selects the default of tiers and page_align. The enums are
// checked here (GB_ERR_INVALID_ARGUMENT with a log line); every range is
// checked again by the converter itself (check_options).
gb_status to_internal(const gb_convert_options *in, gb::ConvertOptions *out) {
  gb_convert_options o;
  if (in) {
    o = *in;
  } else {
    gb_convert_default_options(&o);
  }
  out->log.fn = o.log;
  out->log.user = o.log_user;
  out->log.level = o.log_level;
  if (o.tiers != 0) out->tiers = o.tiers;
  // The enums are read as the ints a C caller (or FFI) may have stored, so an
  // out-of-range value is a status, not undefined behaviour.
  int embd, q4_layout;
  static_assert(sizeof(o.embd) == sizeof(int) && sizeof(o.q4_layout) == sizeof(int), "int-sized enums");
  memcpy(&embd, &o.embd, sizeof embd);
  memcpy(&q4_layout, &o.q4_layout, sizeof q4_layout);
  switch (embd) {
    case GB_CONVERT_EMBD_AUTO: out->embd_format = -1; break;
    case GB_CONVERT_EMBD_F32: out->embd_format = gb::kFmtF32; break;
    case GB_CONVERT_EMBD_F16: out->embd_format = gb::kFmtF16; break;
    default: return gb::fail(out->log, GB_ERR_INVALID_ARGUMENT, "convert options: embd %d is not a gb_convert_embd", embd);
  }
  switch (q4_layout) {
    case GB_CONVERT_Q4_ROWS16: out->q4_layout = gb::kLayoutRows16; break;
    case GB_CONVERT_Q4_ROW_MAJOR: out->q4_layout = gb::kLayoutRowMajor; break;
    default:
      return gb::fail(out->log, GB_ERR_INVALID_ARGUMENT, "convert options: q4_layout %d is not a gb_convert_q4_layout",
                      q4_layout);
  }
  if (o.page_align != 0) out->page_align = o.page_align;
  out->progress = o.progress != 0;
  return GB_OK;
}

}  // namespace

extern "C" void gb_convert_default_options(gb_convert_options *opt) {
  if (!opt) return;
  memset(opt, 0, sizeof(*opt));
  opt->embd = GB_CONVERT_EMBD_AUTO;
  opt->q4_layout = GB_CONVERT_Q4_ROWS16;
  opt->log_level = GB_LOG_WARN;
}

extern "C" gb_status gb_convert_llama2c(const char *checkpoint_path, const char *tokenizer_path, const char *out_path,
                                        const gb_convert_options *opt) {
  gb::ConvertOptions o;
  const gb_status st = to_internal(opt, &o);
  if (st != GB_OK) return st;
  return gb::convert_llama2c(checkpoint_path, tokenizer_path, out_path, o);
}

extern "C" gb_status gb_convert_gguf(const char *gguf_path, const char *out_path, const gb_convert_options *opt) {
  gb::ConvertOptions o;
  const gb_status st = to_internal(opt, &o);
  if (st != GB_OK) return st;
  return gb::convert_gguf(gguf_path, out_path, o);
}

extern "C" gb_status gb_convert_synthetic(const char *spec, const char *out_path, const gb_convert_options *opt) {
  gb::ConvertOptions o;
  const gb_status st = to_internal(opt, &o);
  if (st != GB_OK) return st;
  if (!spec) return gb::null_arg(o.log, "gb_convert_synthetic", "spec");
  if (!out_path) return gb::null_arg(o.log, "gb_convert_synthetic", "out_path");
  return gb::convert_synthetic(spec, out_path, o);
}

extern "C" gb_status gb_convert_gguf_tokenizer(const char *gguf_path, const gb_convert_options *opt, void **image, size_t *size) {
  gb::ConvertOptions o;
  GB_TRY(to_internal(opt, &o));
  if (!image || !size) return gb::null_arg(o.log, "gb_convert_gguf_tokenizer", !image ? "image" : "size");
  std::vector<uint8_t> img;
  GB_TRY(gb::gguf_tokenizer(gguf_path, o.log, &img));
  void *p = malloc(img.size());
  GB_RETURN_IF(!p, o.log, GB_ERR_OUT_OF_MEMORY, "gguf: cannot allocate %zu bytes for the tokenizer", img.size());
  memcpy(p, img.data(), img.size());
  *image = p;
  *size = img.size();
  return GB_OK;
}

extern "C" void gb_convert_free(void *p) { free(p); }

extern "C" gb_status gb_convert_to_gguf(const char *gbx_path, const char *out_path, gb_gear tier, const gb_convert_options *opt) {
  gb::ConvertOptions o;
  GB_TRY(to_internal(opt, &o));
  int t;
  static_assert(sizeof(tier) == sizeof(int), "int-sized enum");
  memcpy(&t, &tier, sizeof t);  // a C caller's int, checked before use
  if (t == GB_GEAR_DEFAULT) t = -1;
  else if (t < 0 || t >= GB_GEAR_COUNT)
    return gb::fail(o.log, GB_ERR_INVALID_ARGUMENT, "export: tier %d is not low, mid, high, f32 or default", t);
  return gb::export_gguf(gbx_path, out_path, t, o.log);
}
