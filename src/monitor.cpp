// monitor.cpp — see monitor.h. Rules (seed 000):
//  §3.2 smoothed = mean of the last `window` entropies;
//  §3.3 low <= theta_low < mid < theta_high <= high; leaving low needs
//       smoothed > theta_low + h, leaving high needs smoothed < theta_high - h;
//  §3.4 thresholds scale by log2(V) / log2(vocab_ref);
//  §10.2 a gear is held for at least min_gear_duration passes.
#include "monitor.h"

#include <math.h>
#include <string.h>

namespace gb {

float entropy_bits(const float *z, size_t n) {
  float mx = z[0];
  for (size_t i = 1; i < n; i++) mx = z[i] > mx ? z[i] : mx;
  double s = 0.0;
  for (size_t i = 0; i < n; i++) s += exp((double)(z[i] - mx));
  const double lse = (double)mx + log(s);
  double h = 0.0;
  for (size_t i = 0; i < n; i++) {
    const double l = (double)z[i] - lse;
    const double p = exp(l);
    h -= p * l;
  }
  h /= log(2.0);
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
  return GB_OK;
}

size_t monitor_mem_size(const gb_monitor_options &o) { return sizeof(float) * o.window; }

void monitor_init(Monitor *m, const gb_monitor_options &o, uint32_t vocab, void *mem) {
  m->o = o;
  const double scale = log2((double)(vocab > 1 ? vocab : 2)) / log2((double)o.vocab_ref);
  m->th_low = (float)(o.theta_low * scale);
  m->th_high = (float)(o.theta_high * scale);
  m->hist = static_cast<float *>(mem);
  monitor_reset(m);
}

void monitor_reset(Monitor *m) {
  m->count = 0;
  m->head = 0;
  m->gear = m->o.initial_gear;
  m->tokens_in_gear = 0;
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
  m->hist[m->head] = H;
  m->head = (m->head + 1) % m->o.window;
  if (m->count < m->o.window) m->count++;
  double sum = 0.0;
  for (uint32_t i = 0; i < m->count; i++) sum += m->hist[i];
  const float s = (float)(sum / m->count);
  if (smoothed) *smoothed = s;
  m->tokens_in_gear++;
  const gb_gear want = monitor_classify(*m, s);
  if (!m->locked && want != m->gear && m->tokens_in_gear >= m->o.min_gear_duration) {
    m->gear = want;
    m->tokens_in_gear = 0;
  }
  return m->gear;
}

}  // namespace gb
