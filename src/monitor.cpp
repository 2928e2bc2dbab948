// monitor.cpp — see monitor.h. Rules:
//  smoothing: smoothed = mean of the last `window` entropies;
//  gears: low <= theta_low < mid < theta_high <= high; leaving low needs
//       smoothed > theta_low + h, leaving high needs smoothed < theta_high - h;
//  vocabulary scaling: thresholds scale by log2(V) / log2(vocab_ref);
//  minimum duration: a gear is held for at least min_gear_duration passes;
//  forecast: H_s + L * (H_last - H_first) / (|W| - 1) classified
//       like the smoothed entropy (the predicted gear, for pre-warming);
//       catastrophic fallback: the last `catastrophic_run` entropies above
//       catastrophic_frac * log2 V make the wanted gear high (the minimum
//       duration still applies: the fallback sets the wanted gear, and the
//       shift waits for the duration like any other);
//  calibration: p30 / p60 of the sorted positive samples, band widened
//       to calib_min_band around its centre, capped at 0.06 / 0.12 log2 V;
//  cold start: prompt_score / prompt_gear pick the first gear from the prompt text.
#include "monitor.h"

#include <math.h>
#include <string.h>

namespace gb {

float entropy_bits(const float *z, size_t n) {
  float mx = z[0];
  for (size_t i = 1; i < n; i++) mx = z[i] > mx ? z[i] : mx;
  // One pass of exponentials: with e_i = exp(z_i - mx), s = sum e_i and
  // t = sum e_i (z_i - mx), p_i = e_i / s and
  //   H = -sum p_i log p_i = log s - t / s   (nats).
  double s = 0.0, t = 0.0;
  for (size_t i = 0; i < n; i++) {
    const double d = (double)(z[i] - mx), e = exp(d);
    s += e;
    t += e > 0.0 ? e * d : 0.0;  // a -inf logit: probability 0, no 0 x inf
  }
  const double h = (log(s) - t / s) / log(2.0);
  return h > 0.0 ? (float)h : 0.0f;
}

gb_status monitor_validate(const gb_monitor_options &o, const Logger &log) {
  GB_RETURN_IF(o.window == 0 || o.window > 4096, log, GB_ERR_INVALID_ARGUMENT, "monitor.window %u must be in 1..4096", o.window);
  GB_RETURN_IF(!(o.theta_low >= 0.0f) || !(o.theta_high > o.theta_low) || !isfinite(o.theta_high), log, GB_ERR_INVALID_ARGUMENT,
               "monitor thresholds need 0 <= theta_low (%g) < theta_high (%g)", o.theta_low, o.theta_high);
  GB_RETURN_IF(!(o.hysteresis >= 0.0f) || !isfinite(o.hysteresis), log, GB_ERR_INVALID_ARGUMENT, "monitor.hysteresis %g invalid",
               o.hysteresis);
  GB_RETURN_IF(o.vocab_ref < 2, log, GB_ERR_INVALID_ARGUMENT, "monitor.vocab_ref %u must be >= 2", o.vocab_ref);
  GB_RETURN_IF((uint32_t)raw_enum(o.initial_gear) > GB_GEAR_HIGH, log, GB_ERR_INVALID_ARGUMENT, "monitor.initial_gear must be low, mid or high");
  GB_RETURN_IF(o.lookahead > 1024, log, GB_ERR_INVALID_ARGUMENT, "monitor.lookahead %u > 1024", o.lookahead);
  GB_RETURN_IF(o.prewarm > 1 || o.calibrate > 1, log, GB_ERR_INVALID_ARGUMENT, "monitor.prewarm / calibrate must be 0 or 1");
  GB_RETURN_IF(!(o.catastrophic_frac >= 0.0f && o.catastrophic_frac <= 1.0f), log, GB_ERR_INVALID_ARGUMENT,
               "monitor.catastrophic_frac %g must be in [0, 1]", (double)o.catastrophic_frac);
  GB_RETURN_IF(o.catastrophic_run == 0 || o.catastrophic_run > 4096, log, GB_ERR_INVALID_ARGUMENT,
               "monitor.catastrophic_run %u must be in 1..4096", o.catastrophic_run);
  GB_RETURN_IF(!(o.calib_p_low > 0.0f && o.calib_p_low < o.calib_p_high && o.calib_p_high < 1.0f), log, GB_ERR_INVALID_ARGUMENT,
               "monitor calibration percentiles need 0 < p_low (%g) < p_high (%g) < 1", (double)o.calib_p_low, (double)o.calib_p_high);
  GB_RETURN_IF(!(o.calib_cap_low > 0.0f && o.calib_cap_high > o.calib_cap_low && o.calib_cap_high <= 1.0f), log,
               GB_ERR_INVALID_ARGUMENT, "monitor calibration caps need 0 < cap_low < cap_high <= 1");
  GB_RETURN_IF(!(o.calib_min_band >= 0.0f && o.calib_min_band < 64.0f), log, GB_ERR_INVALID_ARGUMENT, "monitor.calib_min_band invalid");
  GB_RETURN_IF(o.calib_min_samples < 2, log, GB_ERR_INVALID_ARGUMENT, "monitor.calib_min_samples must be >= 2");
  GB_RETURN_IF(!(o.classify_mid <= o.classify_high) || !isfinite(o.classify_mid) || !isfinite(o.classify_high), log,
               GB_ERR_INVALID_ARGUMENT, "monitor classifier thresholds need classify_mid <= classify_high");
  return GB_OK;
}

size_t monitor_mem_size(const gb_monitor_options &o) { return sizeof(float) * o.window; }

void monitor_init(Monitor *m, const gb_monitor_options &o, uint32_t vocab, void *mem) {
  m->o = o;
  const double scale = log2((double)(vocab > 1 ? vocab : 2)) / log2((double)o.vocab_ref);
  m->th_low = (float)(o.theta_low * scale);
  m->th_high = (float)(o.theta_high * scale);
  m->log2v = (float)log2((double)(vocab > 1 ? vocab : 2));
  m->calibrated = false;
  m->hist = static_cast<float *>(mem);
  monitor_reset(m);
}

void monitor_reset(Monitor *m) {
  m->count = 0;
  m->head = 0;
  m->gear = m->o.initial_gear;
  m->tokens_in_gear = 0;
  m->predicted = m->gear;
  m->catastrophic = false;
  m->hot_run = 0;
  if (m->hist) memset(m->hist, 0, sizeof(float) * m->o.window);
}

gb_gear monitor_classify(const Monitor &m, float s) {
  const float h = m.o.hysteresis;
  auto plain = [&](float v) { return v <= m.th_low ? GB_GEAR_LOW : (v >= m.th_high ? GB_GEAR_HIGH : GB_GEAR_MID); };
  switch (m.gear) {
    case GB_GEAR_LOW: return s > m.th_low + h ? plain(s) : GB_GEAR_LOW;
    case GB_GEAR_HIGH: return s < m.th_high - h ? plain(s) : GB_GEAR_HIGH;
    default: return plain(s);
  }
}

gb_gear monitor_update(Monitor *m, float H, float *smoothed) {
  const uint32_t w = m->o.window;
  m->hist[m->head] = H;
  m->head = (m->head + 1) % w;
  if (m->count < w) m->count++;
  double sum = 0.0;
  for (uint32_t i = 0; i < m->count; i++) sum += m->hist[i];
  const float s = (float)(sum / m->count);
  if (smoothed) *smoothed = s;
  m->tokens_in_gear++;
  gb_gear want = monitor_classify(*m, s);

  // Slope forecast over the window, oldest to newest entry.
  m->predicted = want;
  if (m->o.lookahead > 0 && m->count >= 2) {
    const float first = m->hist[(m->head + w - m->count) % w], last = H;
    const float slope = (last - first) / (float)(m->count - 1);
    m->predicted = monitor_classify(*m, s + (float)m->o.lookahead * slope);
  }
  // Catastrophic entropy: the last `run` raw entropies all near log2 V.
  m->hot_run = m->o.catastrophic_frac > 0.0f && H > m->o.catastrophic_frac * m->log2v ? m->hot_run + 1 : 0;
  m->catastrophic = m->hot_run >= m->o.catastrophic_run;
  if (m->catastrophic) want = m->predicted = GB_GEAR_HIGH;

  if (!m->locked && want != m->gear && m->tokens_in_gear >= m->o.min_gear_duration) {
    m->gear = want;
    m->tokens_in_gear = 0;
  }
  return m->gear;
}

bool monitor_calibrate(Monitor *m, float *e, size_t n) {
  // Keep the positive samples, sorted.
  size_t k = 0;
  for (size_t i = 0; i < n; i++)
    if (e[i] > 0.0f && isfinite(e[i])) e[k++] = e[i];
  if (k < m->o.calib_min_samples) return false;
  for (size_t i = 1; i < k; i++) {  // insertion sort: prompts are short, no allocation
    const float v = e[i];
    size_t j = i;
    for (; j > 0 && e[j - 1] > v; j--) e[j] = e[j - 1];
    e[j] = v;
  }
  const long il = (long)floor((double)k * m->o.calib_p_low) - 1;
  const size_t ih = (size_t)floor((double)k * m->o.calib_p_high);
  float lo = fmaxf(e[il < 0 ? 0 : il], 0.01f);
  float hi = e[ih < k - 1 ? ih : k - 1];
  const float band = m->o.calib_min_band;
  if (hi - lo < band) {
    const float c = 0.5f * (lo + hi);
    lo = fmaxf(c - 0.5f * band, 0.01f);
    hi = lo + band;
  }
  lo = fminf(lo, m->o.calib_cap_low * m->log2v);
  hi = fminf(hi, m->o.calib_cap_high * m->log2v);
  if (hi <= lo) hi = lo + fmaxf(band, 0.01f);  // the caps may cross a wide band
  m->th_low = lo;
  m->th_high = hi;
  m->calibrated = true;
  return true;
}

namespace {
bool is_word_char(unsigned char c) { return c > ' ' && c != 0x7f; }
bool word_is(const char *w, size_t n, const char *kw) { return strlen(kw) == n && memcmp(w, kw, n) == 0; }
// Programming and reasoning keywords (lower-case ASCII; the word is lowered).
const char *const kCodeWords[] = {"def", "class", "return", "import", "function", "const", "void", "int", "struct", "lambda",
                                  "printf", "print", "include", "while", "for", "if", "else", "var", "let", "select",
                                  "code", "program", "algorithm", "compile", "debug", "proof", "prove", "derive", "solve",
                                  "compute", "calculate", "equation", "theorem", "integral", "derivative", "why", "explain"};
}  // namespace

float prompt_score(const char *text, size_t len) {
  // Math symbols: ASCII operators and a few UTF-8 ones (each counts once).
  static const char kMathAscii[] = "+-*/=^<>%";
  static const char *const kMathUtf8[] = {"\xe2\x88\x91", "\xe2\x88\xab", "\xe2\x88\x9a", "\xcf\x80",
                                          "\xe2\x89\xa4", "\xe2\x89\xa5", "\xe2\x89\xa0", "\xe2\x88\x9e"};
  uint32_t n_math = 0, n_code = 0, n_words = 0;
  uint64_t word_chars = 0;
  for (size_t i = 0; i < len; i++) {
    const char c = text[i];
    if (c && strchr(kMathAscii, c)) n_math++;
    for (const char *u : kMathUtf8) {
      const size_t ul = strlen(u);
      if (i + ul <= len && memcmp(text + i, u, ul) == 0) n_math++;
    }
  }
  size_t i = 0;
  while (i < len) {
    while (i < len && !is_word_char((unsigned char)text[i])) i++;
    const size_t b = i;
    while (i < len && is_word_char((unsigned char)text[i])) i++;
    if (i == b) break;
    n_words++;
    word_chars += i - b;
    // Letters of the word, lowered, without surrounding punctuation.
    char w[32];
    size_t wn = 0;
    for (size_t j = b; j < i && wn < sizeof w; j++) {
      char c = text[j];
      if (c >= 'A' && c <= 'Z') c = (char)(c - 'A' + 'a');
      if ((c >= 'a' && c <= 'z') || c == '_') w[wn++] = c;
    }
    for (const char *kw : kCodeWords)
      if (word_is(w, wn, kw)) {
        n_code++;
        break;
      }
  }
  const double mean_len = n_words ? (double)word_chars / n_words : 0.0;
  const double words = n_words / 50.0 < 3.0 ? n_words / 50.0 : 3.0;
  return (float)(2.0 * n_math + 1.5 * n_code + 0.3 * words + (mean_len > 6.5 ? 1.5 : 0.0));
}

gb_gear prompt_gear(float score, const gb_monitor_options &o) {
  return score >= o.classify_high ? GB_GEAR_HIGH : score >= o.classify_mid ? GB_GEAR_MID : GB_GEAR_LOW;
}

}  // namespace gb
