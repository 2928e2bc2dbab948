// test_monitor.cpp — the entropy monitor's rules on crafted sequences.
#include <math.h>

#include <vector>

#include <gtest/gtest.h>

#include "monitor.h"

namespace {

gb_monitor_options defaults() {
  gb_session_options so;
  gb_session_options_init(&so);
  return so.monitor;
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

}  // namespace
