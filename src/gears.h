// gears.h — the weight tiers a session runs on, and moving between them.
//
// A .gbx holds every managed matrix as tiers (low q4, mid q8, high f16, f32).
// A session's gear policy decides which tiers it may enter (policy_tiers);
// the tiers the file lacks can be quantized into the arena on first entry
// (lazy tiers). A gear shift points the session's matrices at another tier
// (set_gear: no copy), hints the new tier in, and queues the tiers left
// behind for release: their pages go back to the OS a slice per decode step,
// and a mapped file re-reads them on demand. The monitor's forecast may
// pre-warm a tier before the shift; residency is measured from the OS.
#pragma once

#include <stdint.h>

#include "arena.h"
#include "forward.h"
#include "model.h"

struct gb_session;

namespace gb {

// The gear machinery's part of a session.
struct Gears {
  gb_gear policy;  // the session's gear: a tier, GB_GEAR_AUTO or GB_GEAR_SPEC
  gb_gear gear;    // gear of the next forward pass (w is its tier)
  Weights w;     // the current gear's tier (set_gear)
  // Lazy tiers: tiers the file lacks, quantized from its f32 / high tier into
  // the arena on first entry and cached (never re-quantized on re-entry).
  TensorRef *lazy_mats[GB_GEAR_COUNT];  // (n_layers * kMatsPerLayer), nullptr = not lazy
  TensorRef lazy_cls[GB_GEAR_COUNT];
  bool lazy_ready[GB_GEAR_COUNT];
  float *lazy_row;                      // (max cols) dequantized source row
  // Residency of the tiers (mapped files only).
  gb_gear prewarmed;                    // tier last hinted in (WILLNEED), GB_GEAR_COUNT = none
  uint64_t resident_bytes;              // weight tiers resident, measured at creation / completed releases
  uint32_t release_pending;             // bit t: tier t is being returned to the OS, a slice per step
  bool resident_stale;                  // a release completed: re-measure after the next pass
  uint64_t release_off[GB_GEAR_COUNT];  // bytes of tier t released so far
  uint64_t shifts;                      // gear shifts since creation
};
// What a saved session state holds of it (state.cpp): every field once, in
// order; SAVE written and restored, MATCH configuration a state must have
// been saved with, NEST a struct with a list of its own, OWN contents the
// part's own code in state.cpp writes, SKIP not part of the state.
#define GB_GEARS_FIELDS(F)                                                                                        \
  F(MATCH, policy) F(OWN, gear) F(SKIP, w) F(SKIP, lazy_mats) F(SKIP, lazy_cls) F(SKIP, lazy_ready) F(SKIP, lazy_row) \
  F(SKIP, prewarmed) F(SKIP, resident_bytes) F(SKIP, release_pending) F(SKIP, resident_stale) F(SKIP, release_off)   \
  F(SAVE, shifts)

// Tiers (bit 1u << tier) the managed matrices may run on under o's gear
// policy: the fixed gear; low, mid and high for auto; the draft and the
// verifying tier for spec. o must have passed read_options' checks.
uint32_t policy_tiers(const SessionConfig &o);

// Weight-tier bytes a session with options o may hold resident at once (the
// budget check's view): for auto the largest managed tier (plus the base
// tier when only attention is managed); otherwise the policy's tiers plus the
// base tier (for spec only when only attention is managed).
uint64_t resident_tier_bytes(const gb_model *m, const SessionConfig &o);

// Tier a lazy tier is quantized from: f32 when the file has it, else high;
// -1 when the file has neither.
int lazy_source(const gb_model *m);
// Whether tier g is built lazily by a session with options o: a low or mid
// tier the file lacks, with lazy_tiers on and a source tier present.
bool lazy_tier(const gb_model *m, const SessionConfig &o, uint32_t g);
// Carve the lazy tiers the policy may enter (counting when a is counting)
// into g->lazy_mats / lazy_cls (quantized on first entry); whether there
// is any (the caller then carves lazy_row).
bool lazy_carve(Gears *g, Arena &a, const gb_model *m, const SessionConfig &o);
// Quantize a lazy tier from its source tier (first entry; logs a warning
// when the source looks already quantized).
void lazy_quantize(gb_session *s, gb_gear g);

// The Weights of tier g (no copy; a lazy tier is built on its first use):
// the managed matrices on g, the others on the base gear's tier.
Weights tier_weights(gb_session *s, gb_gear g);
// Run the next passes on gear g: s->gears.gear and s->gears.w.
void set_gear(gb_session *s, gb_gear g);
// The precision manager's shift: set_gear, hint the new tier in (unless it
// was pre-warmed) and queue the tiers no longer in use for release.
void shift_gear(gb_session *s, gb_gear g);
// Return the next slice of each queued tier to the OS (one decode step's
// share: 1/release_steps of the tier); `all` releases everything queued.
// When the queue empties, residency is re-measured at the end of the next
// decode step (measure_residency), once the new tier has been read.
void release_work(gb_session *s, bool all);
// After a decode pass whose monitor chose `next`: shift if it differs, this
// step's release slice, the residency measurement once a release completed,
// and pre-warming of the monitor's forecast tier when the forecast changes.
void gears_after_step(gb_session *s, gb_gear next);
// Weight-tier bytes resident in this process (0 when the port cannot tell).
uint64_t measure_resident(const gb_session *s);

}  // namespace gb
