// monitor.h — the entropy monitor that routes each pass to a precision gear: Shannon
// entropy of the logits in bits, a rolling window, gear classification with
// thresholds scaled by vocabulary size, hysteresis at the extreme gears, a
// minimum gear duration, the slope forecast (pre-warming), the
// catastrophic-entropy fallback, percentile calibration and the cold-start
// prompt classifier.
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
  float log2v = 0;                // log2 of the vocabulary size
  bool calibrated = false;        // thresholds came from calibration
  gb_gear predicted = GB_GEAR_HIGH;  // slope forecast after the last update
  bool catastrophic = false;      // the fallback fired at the last update
  uint32_t hot_run = 0;           // consecutive entropies above the catastrophic line
};
// What a saved session state holds of it (state.cpp): every field once, in
// order; SAVE written and restored, MATCH configuration a state must have
// been saved with, NEST a struct with a list of its own, OWN contents the
// part's own code in state.cpp writes, SKIP not part of the state.
#define GB_MONITOR_FIELDS(F)                                                                                          \
  F(SKIP, o) F(SAVE, th_low) F(SAVE, th_high) F(OWN, hist) F(SAVE, count) F(SAVE, head) F(SAVE, gear)                  \
  F(SAVE, tokens_in_gear) F(SKIP, locked) F(SKIP, log2v) F(SAVE, calibrated) F(SAVE, predicted) F(SAVE, catastrophic) \
  F(SAVE, hot_run)

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

// Percentile calibration from n entropies (e.g. of the prefill), with the
// caps (calib_cap_low / calib_cap_high times log2 V) and the minimum band.
// Sorts `samples` in place. Returns false (thresholds unchanged) when fewer
// than calib_min_samples are positive.
bool monitor_calibrate(Monitor *m, float *samples, size_t n);

// Cold-start prompt score and the gear it selects (formula: gb_classify_prompt in gearbx.h).
float prompt_score(const char *text, size_t len);
gb_gear prompt_gear(float score, const gb_monitor_options &o);

}  // namespace gb
