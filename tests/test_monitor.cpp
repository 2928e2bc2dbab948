// test_monitor.cpp — the entropy monitor's rules on crafted sequences.
#include <math.h>

#include <string>
#include <vector>

#include <gtest/gtest.h>

#include "monitor.h"

namespace {

gb_monitor_options defaults() {
  gb_session_experimental x;
  gb_session_experimental_init(&x);
  return x.monitor;
}

struct M {
  gb::Monitor m;
  std::vector<float> mem;
  M(gb_monitor_options o, uint32_t vocab) : mem(o.window) { gb::monitor_init(&m, o, vocab, mem.data()); }
};

TEST(Monitor, EntropyOfKnownDistributions) {
  std::vector<float> uniform(512, 0.3f);
  EXPECT_NEAR(gb::entropy_bits(uniform.data(), 512), 9.0, 1e-5);
  std::vector<float> peaked(512, -1e4f);
  peaked[17] = 10.0f;
  EXPECT_NEAR(gb::entropy_bits(peaked.data(), 512), 0.0, 1e-6);
  // Two equally likely tokens: 1 bit, whatever the offset.
  std::vector<float> two(100, -1e4f);
  two[3] = 50.0f;
  two[70] = 50.0f;
  EXPECT_NEAR(gb::entropy_bits(two.data(), 100), 1.0, 1e-6);
  // p = (0.5, 0.25, 0.25): 1.5 bits.
  float z[3] = {logf(0.5f), logf(0.25f), logf(0.25f)};
  EXPECT_NEAR(gb::entropy_bits(z, 3), 1.5, 1e-6);
  // Tokens masked to -inf have probability 0 and add nothing (not NaN).
  float masked[4] = {2.0f, -INFINITY, 2.0f, -INFINITY};
  EXPECT_NEAR(gb::entropy_bits(masked, 4), 1.0, 1e-6);
  // Against the definition, summed term by term, on a spread of logits.
  std::vector<float> spread(1000);
  for (size_t i = 0; i < spread.size(); i++) spread[i] = 8.0f * sinf(0.37f * (float)i) - 0.01f * (float)i;
  double mx = -1e30, s = 0.0, h = 0.0;
  for (float v : spread) mx = v > mx ? v : mx;
  for (float v : spread) s += exp((double)v - mx);
  for (float v : spread) {
    const double p = exp((double)v - mx) / s;
    h -= p * log2(p);
  }
  EXPECT_NEAR(gb::entropy_bits(spread.data(), spread.size()), h, 1e-5);
}

TEST(Monitor, VocabularyScaling) {
  gb_monitor_options o = defaults();
  M a(o, 32768), b(o, 512), c(o, 128000);
  EXPECT_FLOAT_EQ(a.m.th_low, 1.8f);
  EXPECT_FLOAT_EQ(a.m.th_high, 3.5f);
  EXPECT_NEAR(b.m.th_low, 1.8 * 9.0 / 15.0, 1e-6);
  EXPECT_NEAR(b.m.th_high, 3.5 * 9.0 / 15.0, 1e-6);
  EXPECT_NEAR(c.m.th_high, 3.5 * log2(128000.0) / 15.0, 1e-5);
}

TEST(Monitor, RollingWindowMean) {
  gb_monitor_options o = defaults();
  o.window = 3;
  M t(o, 32768);
  float s;
  gb::monitor_update(&t.m, 1.0f, &s);
  EXPECT_FLOAT_EQ(s, 1.0f);
  gb::monitor_update(&t.m, 2.0f, &s);
  EXPECT_FLOAT_EQ(s, 1.5f);
  gb::monitor_update(&t.m, 3.0f, &s);
  EXPECT_FLOAT_EQ(s, 2.0f);
  gb::monitor_update(&t.m, 7.0f, &s);  // 1.0 leaves the window
  EXPECT_FLOAT_EQ(s, 4.0f);
}

TEST(Monitor, HysteresisAtTheBoundaries) {
  gb_monitor_options o = defaults();
  o.window = 1;
  o.min_gear_duration = 0;
  M t(o, 32768);  // thresholds 1.8 / 3.5, margin 0.1
  t.m.gear = GB_GEAR_LOW;
  EXPECT_EQ(gb::monitor_classify(t.m, 1.85f), GB_GEAR_LOW);   // inside the margin
  EXPECT_EQ(gb::monitor_classify(t.m, 1.95f), GB_GEAR_MID);
  EXPECT_EQ(gb::monitor_classify(t.m, 3.6f), GB_GEAR_HIGH);   // straight to high
  t.m.gear = GB_GEAR_HIGH;
  EXPECT_EQ(gb::monitor_classify(t.m, 3.45f), GB_GEAR_HIGH);  // inside the margin
  EXPECT_EQ(gb::monitor_classify(t.m, 3.35f), GB_GEAR_MID);
  EXPECT_EQ(gb::monitor_classify(t.m, 1.0f), GB_GEAR_LOW);
  t.m.gear = GB_GEAR_MID;  // no margin from the middle gear
  EXPECT_EQ(gb::monitor_classify(t.m, 1.8f), GB_GEAR_LOW);
  EXPECT_EQ(gb::monitor_classify(t.m, 1.81f), GB_GEAR_MID);
  EXPECT_EQ(gb::monitor_classify(t.m, 3.5f), GB_GEAR_HIGH);
  EXPECT_EQ(gb::monitor_classify(t.m, 3.49f), GB_GEAR_MID);
}

TEST(Monitor, MinimumGearDuration) {
  gb_monitor_options o = defaults();
  o.window = 1;
  o.min_gear_duration = 4;
  o.initial_gear = GB_GEAR_HIGH;
  M t(o, 32768);
  // Low entropy from the start: the high gear is held for 4 passes.
  std::vector<gb_gear> gears;
  for (int i = 0; i < 4; i++) gears.push_back(gb::monitor_update(&t.m, 0.2f, nullptr));
  const std::vector<gb_gear> want = {GB_GEAR_HIGH, GB_GEAR_HIGH, GB_GEAR_HIGH, GB_GEAR_LOW};
  EXPECT_EQ(gears, want);
  // Now high entropy: low is held 4 passes again before the shift.
  gears.clear();
  for (int i = 0; i < 5; i++) gears.push_back(gb::monitor_update(&t.m, 6.0f, nullptr));
  const std::vector<gb_gear> want2 = {GB_GEAR_LOW, GB_GEAR_LOW, GB_GEAR_LOW, GB_GEAR_HIGH, GB_GEAR_HIGH};
  EXPECT_EQ(gears, want2);
}

TEST(Monitor, OscillationIsSuppressed) {
  // Entropy alternating around theta_low: the window and hysteresis keep the gear.
  gb_monitor_options o = defaults();
  o.initial_gear = GB_GEAR_LOW;
  o.min_gear_duration = 1;
  M t(o, 32768);
  int shifts = 0;
  gb_gear g = GB_GEAR_LOW;
  for (int i = 0; i < 200; i++) {
    const gb_gear n = gb::monitor_update(&t.m, i % 2 ? 2.0f : 1.7f, nullptr);  // window means <= 1.88 < 1.8 + 0.1
    shifts += n != g;
    g = n;
  }
  EXPECT_EQ(shifts, 0);
  // Without hysteresis and window the same signal flips every step.
  o.hysteresis = 0.0f;
  o.window = 1;
  M u(o, 32768);
  shifts = 0;
  g = GB_GEAR_LOW;
  for (int i = 0; i < 200; i++) {
    const gb_gear n = gb::monitor_update(&u.m, i % 2 ? 2.0f : 1.7f, nullptr);
    shifts += n != g;
    g = n;
  }
  EXPECT_GT(shifts, 150);
}

TEST(Monitor, LockedMonitorNeverShifts) {
  gb_monitor_options o = defaults();
  o.min_gear_duration = 0;
  M t(o, 512);
  t.m.gear = GB_GEAR_MID;
  t.m.locked = true;
  for (int i = 0; i < 20; i++) EXPECT_EQ(gb::monitor_update(&t.m, i % 2 ? 0.0f : 9.0f, nullptr), GB_GEAR_MID);
}

TEST(Monitor, ValidateRejectsBadOptions) {
  gb::Logger quiet;
  quiet.fn = [](void *, gb_log_level, const char *) {};
  gb_monitor_options o = defaults();
  EXPECT_EQ(gb::monitor_validate(o, quiet), GB_OK);
  o.window = 0;
  EXPECT_EQ(gb::monitor_validate(o, quiet), GB_ERR_INVALID_ARGUMENT);
  o = defaults();
  o.theta_high = NAN;
  EXPECT_EQ(gb::monitor_validate(o, quiet), GB_ERR_INVALID_ARGUMENT);
  o = defaults();
  o.hysteresis = -1;
  EXPECT_EQ(gb::monitor_validate(o, quiet), GB_ERR_INVALID_ARGUMENT);
  o = defaults();
  o.vocab_ref = 1;
  EXPECT_EQ(gb::monitor_validate(o, quiet), GB_ERR_INVALID_ARGUMENT);
  o = defaults();
  o.initial_gear = GB_GEAR_F32;
  EXPECT_EQ(gb::monitor_validate(o, quiet), GB_ERR_INVALID_ARGUMENT);
}

// Logits over V tokens whose softmax has (close to) the given entropy in
// bits: k equally likely tokens give log2(k) bits.
std::vector<float> logits_with_entropy_of(uint32_t V, uint32_t k) {
  std::vector<float> z(V, -1e4f);
  for (uint32_t i = 0; i < k; i++) z[i] = 0.0f;
  return z;
}

// Catastrophic fallback: two consecutive entropies above 0.9 log2 V
// (crafted logits: all 512 tokens equally likely = 9 bits) force high, even
// though the smoothed mean of a long window still says low; one alone does not.
TEST(Monitor, CatastrophicEntropyFallsBackToHigh) {
  gb_monitor_options o = defaults();
  o.initial_gear = GB_GEAR_LOW;
  o.min_gear_duration = 1;
  o.window = 20;
  o.lookahead = 0;
  const std::vector<float> calm = logits_with_entropy_of(512, 1), chaos = logits_with_entropy_of(512, 512);
  const float h0 = gb::entropy_bits(calm.data(), 512), h9 = gb::entropy_bits(chaos.data(), 512);
  EXPECT_NEAR(h9, 9.0, 1e-4);
  M t(o, 512);
  for (int i = 0; i < 30; i++) EXPECT_EQ(gb::monitor_update(&t.m, h0, nullptr), GB_GEAR_LOW);
  float sm = 0;
  EXPECT_EQ(gb::monitor_update(&t.m, h9, &sm), GB_GEAR_LOW);  // mean 0.45 bits: low
  EXPECT_FALSE(t.m.catastrophic);
  EXPECT_EQ(gb::monitor_update(&t.m, h9, &sm), GB_GEAR_HIGH);  // mean 0.9: still low, but two in a row
  EXPECT_LT(sm, t.m.th_low);
  EXPECT_TRUE(t.m.catastrophic);
  // Just under the line (0.9 * 9 = 8.1 bits) never fires.
  M w(o, 512);
  for (int i = 0; i < 30; i++) gb::monitor_update(&w.m, h0, nullptr);
  for (int i = 0; i < 2; i++) EXPECT_EQ(gb::monitor_update(&w.m, 8.09f, nullptr), GB_GEAR_LOW);
  EXPECT_FALSE(w.m.catastrophic);
  // Switched off: the same spikes stay low.
  o.catastrophic_frac = 0.0f;
  M u(o, 512);
  for (int i = 0; i < 30; i++) gb::monitor_update(&u.m, h0, nullptr);
  for (int i = 0; i < 2; i++) EXPECT_EQ(gb::monitor_update(&u.m, h9, nullptr), GB_GEAR_LOW);
  EXPECT_FALSE(u.m.catastrophic);
}

// Slope forecast: rising entropy predicts the higher gear before the
// smoothed mean gets there.
TEST(Monitor, SlopeForecastLeadsTheSmoothedGear) {
  gb_monitor_options o = defaults();
  o.initial_gear = GB_GEAR_LOW;
  o.min_gear_duration = 1;
  o.hysteresis = 0.0f;
  M t(o, 32768);  // scale 1: theta 1.8 / 3.5
  for (float h : {1.0f, 1.2f, 1.4f, 1.6f, 1.8f}) gb::monitor_update(&t.m, h, nullptr);
  // mean 1.4 -> low; slope 0.2/step, forecast 1.4 + 2*0.2 = 1.8 -> low (<= 1.8).
  EXPECT_EQ(t.m.gear, GB_GEAR_LOW);
  gb::monitor_update(&t.m, 2.2f, nullptr);  // window 1.2..2.2: mean 1.64, slope 0.25 -> 2.14: mid
  EXPECT_EQ(t.m.gear, GB_GEAR_LOW);
  EXPECT_EQ(t.m.predicted, GB_GEAR_MID);
  // Falling entropy: the forecast drops first.
  M u(o, 32768);
  u.m.gear = GB_GEAR_HIGH;
  for (float h : {5.0f, 4.6f, 4.2f, 3.8f, 3.4f}) gb::monitor_update(&u.m, h, nullptr);
  // mean 4.2 -> high; forecast 4.2 - 2*0.4 = 3.4 -> mid.
  EXPECT_EQ(u.m.gear, GB_GEAR_HIGH);
  EXPECT_EQ(u.m.predicted, GB_GEAR_MID);
  // lookahead 0: the forecast is the classification itself.
  o.lookahead = 0;
  M v(o, 32768);
  v.m.gear = GB_GEAR_HIGH;
  for (float h : {5.0f, 4.6f, 4.2f, 3.8f, 3.4f}) gb::monitor_update(&v.m, h, nullptr);
  EXPECT_EQ(v.m.predicted, GB_GEAR_HIGH);
}

// Calibration: percentiles, caps, the minimum band, too few samples.
TEST(Monitor, CalibrationPercentilesCapsAndBand) {
  gb_monitor_options o = defaults();
  o.calib_cap_low = 0.5f;  // caps out of the way first: 7.5 / 15 bits at V = 32768
  o.calib_cap_high = 1.0f;
  M t(o, 32768);
  std::vector<float> e = {10, 9, 8, 7, 6, 5, 4, 3, 2, 1};  // sorted: 1..10
  ASSERT_TRUE(gb::monitor_calibrate(&t.m, e.data(), e.size()));
  EXPECT_FLOAT_EQ(t.m.th_low, 3.0f);   // e[floor(10*0.3) - 1] = e[2]
  EXPECT_FLOAT_EQ(t.m.th_high, 7.0f);  // e[min(9, floor(10*0.6))] = e[6]
  EXPECT_TRUE(t.m.calibrated);
  // Default caps at V = 32768: 0.06 * 15 = 0.9 and 0.12 * 15 = 1.8 bits.
  M c(defaults(), 32768);
  e = {10, 9, 8, 7, 6, 5, 4, 3, 2, 1};
  ASSERT_TRUE(gb::monitor_calibrate(&c.m, e.data(), e.size()));
  EXPECT_FLOAT_EQ(c.m.th_low, 0.9f);
  EXPECT_FLOAT_EQ(c.m.th_high, 1.8f);
  // A flat sample widens to the minimum band (0.2 bits) around its centre.
  M b(o, 32768);
  e.assign(8, 2.0f);
  ASSERT_TRUE(gb::monitor_calibrate(&b.m, e.data(), e.size()));
  EXPECT_NEAR(b.m.th_low, 1.9f, 1e-6);
  EXPECT_NEAR(b.m.th_high, 2.1f, 1e-6);
  // Zeros and NaNs are not samples; fewer than 5 positive ones: no change.
  M z(o, 32768);
  const float lo = z.m.th_low, hi = z.m.th_high;
  e = {0.0f, 0.0f, 1.0f, NAN, 2.0f, 3.0f, 4.0f};
  EXPECT_FALSE(gb::monitor_calibrate(&z.m, e.data(), e.size()));
  EXPECT_EQ(z.m.th_low, lo);
  EXPECT_EQ(z.m.th_high, hi);
  EXPECT_FALSE(z.m.calibrated);
  // The floor: theta_low is at least 0.01 bits.
  M f(o, 32768);
  e = {0.001f, 0.001f, 0.001f, 0.001f, 0.001f, 5.0f, 5.0f, 5.0f, 5.0f, 5.0f};
  ASSERT_TRUE(gb::monitor_calibrate(&f.m, e.data(), e.size()));
  EXPECT_FLOAT_EQ(f.m.th_low, 0.01f);
  EXPECT_FLOAT_EQ(f.m.th_high, 5.0f);
}

// Cold-start prompt classifier scores and its two thresholds.
TEST(Monitor, PromptClassifier) {
  const gb_monitor_options o = defaults();
  float sc = -1;
  // 4 math symbols (^ + * =) = 8, "solve" = 1.5, 6 words (Solve x^2 + 3*x = 10).
  EXPECT_EQ(gb_classify_prompt("Solve x^2 + 3*x = 10", 20, &o, &sc), GB_GEAR_HIGH);
  EXPECT_NEAR(sc, 9.5f + 0.3f * 6 / 50, 1e-5);
  EXPECT_EQ(gb_classify_prompt("Once upon a time", 16, &o, &sc), GB_GEAR_LOW);
  EXPECT_NEAR(sc, 0.3f * 4 / 50, 1e-6);
  // One code keyword: 1.5 + 0.012 -> mid.
  EXPECT_EQ(gb_classify_prompt("def foo", 7, &o, &sc), GB_GEAR_MID);
  EXPECT_NEAR(sc, 1.5f + 0.3f * 2 / 50, 1e-6);
  // Long words (mean > 6.5 letters): +1.5 -> mid.
  EXPECT_EQ(gb_classify_prompt("Internationalization considerations", 35, &o, &sc), GB_GEAR_MID);
  // Word count term saturates at 3 * 0.3 = 0.9 (150+ words).
  std::string many;
  for (int i = 0; i < 400; i++) many += "cat ";
  gb_classify_prompt(many.c_str(), many.size(), &o, &sc);
  EXPECT_NEAR(sc, 0.9f, 1e-6);
  // Thresholds are options.
  gb_monitor_options p = o;
  p.classify_mid = 0.5f;
  p.classify_high = 0.8f;
  EXPECT_EQ(gb_classify_prompt(many.c_str(), many.size(), &p, nullptr), GB_GEAR_HIGH);
  EXPECT_EQ(gb_classify_prompt(nullptr, 0, nullptr, &sc), GB_GEAR_LOW);
  EXPECT_EQ(sc, 0.0f);
}

}  // namespace
