// gears.cpp — see gears.h.
#include "gears.h"

#include <math.h>

#include <new>

#include "format.h"
#include "gearbx_port.h"
#include "quant.h"
#include "session.h"

namespace gb {

uint32_t policy_tiers(const SessionConfig &o) {
  if (o.gear == GB_GEAR_SPEC) return 1u << o.spec_verify_gear | 1u << o.spec_draft_gear;
  if ((uint32_t)o.gear < GB_GEAR_COUNT) return 1u << o.gear;
  return 1u << GB_GEAR_LOW | 1u << GB_GEAR_MID | 1u << GB_GEAR_HIGH;  // auto
}

uint64_t resident_tier_bytes(const gb_model *m, const SessionConfig &o) {
  const uint32_t tiers = policy_tiers(o), base = o.managed == GB_MANAGED_ALL ? 0u : 1u << o.base_gear;
  const bool attn_only = o.managed == GB_MANAGED_ATTENTION;
  // A tier's resident bytes. The streamed table lies in the file's tier (a
  // GGUF opened in place): read a row per token, it is not resident.
  auto tier = [m](uint32_t g) -> uint64_t {
    const uint64_t size = m->gear_section[g].size, streamed = g == m->meta.default_gear ? streamed_bytes(m) : 0;
    return size > streamed ? size - streamed : 0;
  };
  uint64_t bytes = 0;
  if (o.gear == GB_GEAR_AUTO) {
    // One managed tier resident at a time (a shift releases the others).
    for (uint32_t g = 0; g < GB_GEAR_COUNT; g++)
      if ((tiers >> g & 1) && tier(g) > bytes) bytes = tier(g);
    return attn_only ? bytes + tier(o.base_gear) : bytes;
  }
  const uint32_t held = o.gear == GB_GEAR_SPEC && !attn_only ? tiers : tiers | base;
  for (uint32_t g = 0; g < GB_GEAR_COUNT; g++)
    if (held >> g & 1) bytes += tier(g);
  return bytes;
}

int lazy_source(const gb_model *m) {
  // From already quantized weights a lazy tier would round them again: the
  // file holds only what it can give honestly (convert --tiers derives more).
  if (m->meta.quantized_source) return -1;
  return (m->gears >> GB_GEAR_F32 & 1) ? GB_GEAR_F32 : (m->gears >> GB_GEAR_HIGH & 1) ? GB_GEAR_HIGH : -1;
}

bool lazy_tier(const gb_model *m, const SessionConfig &o, uint32_t g) {
  return o.lazy_tiers && g <= GB_GEAR_MID && !(m->gears >> g & 1) && lazy_source(m) >= 0;
}

// Every managed matrix (and the classifier when it follows the gear) of each
// lazy tier the policy may enter, in the tier's format.
bool lazy_carve(Gears *t, Arena &a, const gb_model *m, const SessionConfig &o) {
  const Meta &c = m->meta;
  const uint32_t enters = policy_tiers(o);
  bool any_lazy = false;
  for (uint32_t g = 0; g < GB_GEAR_COUNT; g++) {
    t->lazy_mats[g] = nullptr;
    t->lazy_ready[g] = false;
    if (!(enters >> g & 1) || !lazy_tier(m, o, g)) continue;
    any_lazy = true;
    const uint32_t fmt = g == GB_GEAR_LOW ? kFmtQ4 : kFmtQ8;
    const size_t nm = (size_t)c.n_layers * kMatsPerLayer;
    TensorRef *refs = a.array<TensorRef>(nm);
    if (refs)
      for (size_t i = 0; i < nm; i++) new (&refs[i]) TensorRef();
    const TensorRef *src = m->mats[lazy_source(m)];
    for (size_t i = 0; i < nm; i++) {
      const bool follows = o.managed == GB_MANAGED_ALL || i % kMatsPerLayer <= kMatO;
      if (!follows) continue;
      const uint64_t nb = (uint64_t)src[i].rows * row_bytes(fmt, src[i].cols);
      uint8_t *d = static_cast<uint8_t *>(a.alloc(nb, 64));
      if (refs) refs[i] = TensorRef{d, fmt, src[i].rows, src[i].cols, nb};
    }
    t->lazy_mats[g] = refs;
    t->lazy_cls[g] = TensorRef();
    if (o.managed == GB_MANAGED_ALL) {
      const TensorRef &cs = m->classifier[lazy_source(m)];
      const uint64_t nb = (uint64_t)cs.rows * row_bytes(fmt, cs.cols);
      uint8_t *d = static_cast<uint8_t *>(a.alloc(nb, 64));
      t->lazy_cls[g] = TensorRef{d, fmt, cs.rows, cs.cols, nb};
    }
  }
  return any_lazy;
}

Weights tier_weights(gb_session *s, gb_gear g) {
  const gb_model *m = s->model;
  const bool all = s->opt.managed == GB_MANAGED_ALL;
  Weights w;
  w.model = m;
  if (s->gears.lazy_mats[g]) {
    if (!s->gears.lazy_ready[g]) lazy_quantize(s, g);
    w.mats = s->gears.lazy_mats[g];
    w.classifier = all ? &s->gears.lazy_cls[g] : &m->classifier[s->opt.base_gear];
  } else {
    w.mats = m->mats[g];
    w.classifier = &m->classifier[all ? g : s->opt.base_gear];
  }
  w.base_mats = all ? w.mats : m->mats[s->opt.base_gear];
  return w;
}

void set_gear(gb_session *s, gb_gear g) {
  s->gears.gear = g;
  s->gears.w = tier_weights(s, g);
}

namespace {
// Double-quantization check on a few source rows: blocks of 32 with at
// most 16 distinct values look 4-bit quantized; blocks whose values all sit
// on the grid amax/127 (within f16 rounding) look 8-bit quantized.
void check_double_quantization(gb_session *s, const TensorRef *src, uint32_t n_layers) {
  uint32_t blocks = 0, q4_like = 0, q8_like = 0;
  float *row = s->gears.lazy_row;
  for (uint32_t l = 0; l < n_layers; l++) {
    const TensorRef &W = src[(size_t)l * kMatsPerLayer + kMatQ];
    const uint64_t rb = row_bytes(W.format, W.cols);
    for (uint32_t r = 0; r < W.rows && r < 4; r++) {
      dequantize_row(W.format, row, W.data + r * rb, W.cols);
      for (uint32_t b = 0; b + kBlock <= W.cols; b += kBlock) {
        const float *x = row + b;
        float amax = 0;
        for (uint32_t j = 0; j < kBlock; j++) amax = fabsf(x[j]) > amax ? fabsf(x[j]) : amax;
        if (amax == 0.0f) continue;
        blocks++;
        uint32_t distinct = 0;
        for (uint32_t j = 0; j < kBlock; j++) {
          bool seen = false;
          for (uint32_t k = 0; k < j && !seen; k++) seen = x[k] == x[j];
          distinct += !seen;
        }
        q4_like += distinct <= 16;
        const float d = amax / 127.0f;
        bool grid = true;
        for (uint32_t j = 0; j < kBlock && grid; j++) grid = fabsf(x[j] / d - rintf(x[j] / d)) < 0.07f;
        q8_like += grid;
      }
    }
  }
  if (blocks && 2 * q4_like > blocks)
    s->log.log(GB_LOG_WARN, "lazy tier: %u of %u sampled source blocks have <= 16 distinct values: the source weights look already "
               "4-bit quantized, re-quantizing compounds the error", q4_like, blocks);
  else if (blocks && 2 * q8_like > blocks)
    s->log.log(GB_LOG_WARN, "lazy tier: %u of %u sampled source blocks lie on an 8-bit grid: the source weights look already "
               "8-bit quantized, re-quantizing compounds the error", q8_like, blocks);
}
}  // namespace

void lazy_quantize(gb_session *s, gb_gear g) {
  const gb_model *m = s->model;
  const int srcg = lazy_source(m);  // present: lazy_tier() required it
  const TensorRef *src = m->mats[srcg];
  const uint64_t t0 = gb_port_now_ns();
  check_double_quantization(s, src, m->meta.n_layers);
  auto convert = [&](const TensorRef &from, const TensorRef &to) {
    if (!to.data) return;
    const uint64_t rs = row_bytes(from.format, from.cols), rd = row_bytes(to.format, to.cols);
    uint8_t *out = const_cast<uint8_t *>(to.data);  // arena memory this session owns
    for (uint32_t r = 0; r < from.rows; r++) {
      dequantize_row(from.format, s->gears.lazy_row, from.data + r * rs, from.cols);
      quantize_row(to.format, out + r * rd, s->gears.lazy_row, to.cols);
    }
  };
  const size_t nm = (size_t)m->meta.n_layers * kMatsPerLayer;
  for (size_t i = 0; i < nm; i++) convert(src[i], s->gears.lazy_mats[g][i]);
  convert(m->classifier[srcg], s->gears.lazy_cls[g]);
  s->gears.lazy_ready[g] = true;
  s->log.log(GB_LOG_INFO, "lazy tier %s quantized from the %s tier in %.1f ms", gb_gear_name((gb_gear)g),
             gb_gear_name((gb_gear)srcg), (double)(gb_port_now_ns() - t0) * 1e-6);
}

uint64_t measure_resident(const gb_session *s) {
  const gb_model *m = s->model;
  uint64_t total = 0;
  for (uint32_t g = 0; g < GB_GEAR_COUNT; g++) {
    if (!(m->gears >> g & 1)) continue;
    const int64_t r = gb_port_resident_bytes(m->base + m->gear_section[g].offset, section_span_in_file(m, m->gear_section[g]));
    if (r < 0) return 0;
    total += (uint64_t)r;
  }
  return total;
}

void shift_gear(gb_session *s, gb_gear g) {
  const gb_model *m = s->model;
  const gb_gear old = s->gears.gear;
  set_gear(s, g);
  s->gears.shifts++;
  // Hints only for a file mapping: on a caller's (anonymous) buffer
  // DONTNEED would discard the contents.
  if (!model_mapped(m)) return;
  // Tiers in use: the new gear's, the base gear's (unmanaged matrices when
  // only attention is managed) and a pre-warmed forecast. The others are
  // queued for release: their pages leave this process a slice per decode
  // step (release_work), and a mapped file re-reads them on demand. The
  // shift itself is the pointer swap plus, unless the forecast already
  // hinted it, one WILLNEED on the new tier.
  for (uint32_t t = 0; t < GB_GEAR_COUNT; t++) {
    if (!(m->gears >> t & 1)) continue;
    const bool base = s->opt.managed == GB_MANAGED_ATTENTION && t == (uint32_t)s->opt.base_gear;
    const bool used = t == (uint32_t)g || base || (t == (uint32_t)s->gears.prewarmed && s->gears.prewarmed != old);
    if (used) {
      s->gears.release_pending &= ~(1u << t);  // back in use: what was released re-faults on touch
      if (t == (uint32_t)g && s->gears.prewarmed != g && !base)
        gb_port_advise(m->base + m->gear_section[t].offset, section_span_in_file(m, m->gear_section[t]), GB_PORT_ADVISE_WILLNEED);
    } else if (!(s->gears.release_pending >> t & 1)) {
      s->gears.release_pending |= 1u << t;
      s->gears.release_off[t] = 0;
    }
  }
  s->gears.prewarmed = GB_GEAR_COUNT;
  if (s->opt.release_steps <= 1) release_work(s, true);
}

void release_work(gb_session *s, bool all) {
  const gb_model *m = s->model;
  if (model_mapped(m)) {
    const uint64_t page = gb_port_page_size(), steps = s->opt.release_steps ? s->opt.release_steps : 1;
    for (uint32_t t = 0; t < GB_GEAR_COUNT; t++) {
      if (!(s->gears.release_pending >> t & 1)) continue;
      const SectionRef &sec = m->gear_section[t];
      const uint64_t span = section_span_in_file(m, sec);
      // Slices of whole pages (sections are page-aligned in the file); the
      // port rounds inward, so a slice never touches a neighbour's page.
      uint64_t n = all ? span : (span / steps + page - 1) / page * page;
      if (n > span - s->gears.release_off[t]) n = span - s->gears.release_off[t];
      gb_port_advise(m->base + sec.offset + s->gears.release_off[t], n, GB_PORT_ADVISE_DONTNEED);
      s->gears.release_off[t] += n;
      if (s->gears.release_off[t] >= span) s->gears.release_pending &= ~(1u << t);
    }
  } else {
    s->gears.release_pending = 0;
  }
  if (!s->gears.release_pending) s->gears.resident_stale = true;  // measured at the end of the next step
}

void gears_after_step(gb_session *s, gb_gear next) {
  if (next != s->gears.gear) shift_gear(s, next);  // a pointer swap; fixed policies never shift
  if (s->gears.release_pending) release_work(s, false);  // this step's slice of the tiers left behind
  if (s->gears.resident_stale && s->opt.measure_residency) {
    s->gears.resident_bytes = measure_resident(s);
    s->gears.resident_stale = false;
  }
  // Pre-warming: hint the forecast tier in once, when the forecast changes.
  const gb_gear pred = s->monitor.predicted;
  if (s->opt.monitor.prewarm && !s->monitor.locked && pred != s->gears.gear && pred != s->gears.prewarmed && model_mapped(s->model)) {
    const SectionRef &t = s->model->gear_section[pred];
    gb_port_advise(s->model->base + t.offset, section_span_in_file(s->model, t), GB_PORT_ADVISE_WILLNEED);
    s->gears.release_pending &= ~(1u << pred);  // wanted again: stop releasing it
    s->gears.prewarmed = pred;
  }
}

}  // namespace gb
