// monitor.h — the entropy monitor of seed 000 §3: Shannon entropy of the
// logits in bits, a rolling window, gear classification with thresholds
// scaled by vocabulary size, hysteresis at the extreme gears and a minimum
// gear duration.
#pragma once

#include <stddef.h>
#include <stdint.h>

#include "common.h"

namespace gb {

// H = -sum p log2 p of softmax(logits), in the log-softmax form
// (l = z - logsumexp(z); H = -sum exp(l) * l / ln 2). Logits must be finite.
float entropy_bits(const float *logits, size_t n);

struct Monitor {
  gb_monitor_options o;
  float th_low = 0, th_high = 0;  // thresholds for this vocabulary (bits)
  float *hist = nullptr;          // (window) ring buffer of entropies
  uint32_t count = 0, head = 0;   // entries in the ring, next slot
  gb_gear gear = GB_GEAR_HIGH;    // gear of the next forward pass
  uint32_t tokens_in_gear = 0;    // passes run in `gear` since it was entered
  bool locked = false;            // fixed-gear policy: smooth and report, never shift
};

gb_status monitor_validate(const gb_monitor_options &o, const Logger &log);
size_t monitor_mem_size(const gb_monitor_options &o);
// mem: monitor_mem_size bytes (4-aligned) outliving the monitor.
void monitor_init(Monitor *m, const gb_monitor_options &o, uint32_t vocab, void *mem);
void monitor_reset(Monitor *m);

// Classify a smoothed entropy with hysteresis relative to the current gear.
gb_gear monitor_classify(const Monitor &m, float smoothed);

// Record one forward pass that ran in m->gear and produced entropy H:
// pushes H, computes the rolling mean (*smoothed), and returns the gear of the
// next pass (shifting only once min_gear_duration passes ran in the gear).
gb_gear monitor_update(Monitor *m, float H, float *smoothed);

}  // namespace gb
