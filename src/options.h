// options.h — a session's options as the library uses them: the stable
// gb_session_options and its experimental controls (gearbx.h) merged into
// one flat configuration, every field under its public name (session.cpp's
// read_options fills it and checks every value).
#pragma once

#include <stdint.h>

#include "gearbx.h"

namespace gb {

// gb_kv_options and gb_kv_experimental together.
struct KvConfig {
  gb_kv_policy policy;
  uint64_t pool_bytes;
  float beta;
  uint32_t evict, asymmetric, k_critical, k_tail, window;
  float gamma, gamma_head, recency_T, alpha, eps_importance;
  uint32_t f_base;
  float rank_threshold;
  uint32_t rank_intervals;
  float drift_kl;
};

// gb_session_options and gb_session_experimental together.
struct SessionConfig {
  uint32_t n_ctx;
  gb_gear gear;
  uint32_t n_threads;
  uint64_t mem_budget;
  gb_sampler_options sampler;
  gb_log_fn log;
  void *log_user;
  uint32_t deterministic;
  KvConfig kv;
  uint32_t prefill_batch;
  uint32_t spec_k;
  gb_gear spec_verify_gear, spec_draft_gear;
  float repeat_penalty, frequency_penalty, presence_penalty;
  uint32_t penalty_window;
  const gb_logit_bias *logit_bias;
  uint32_t n_logit_bias;
  const char *const *stop_strings;
  uint32_t n_stop_strings;
  gb_abort_fn abort_callback;
  void *abort_user;
  const gb_grammar *grammar;
  uint32_t grammar_max_bytes, grammar_max_stacks, grammar_max_depth;
  // Experimental.
  gb_managed_set managed;
  gb_gear base_gear;
  gb_monitor_options monitor;
  uint32_t lazy_tiers, release_steps, measure_residency;
  uint32_t prefill_panel_rows, prefill_blas;
  float spec_stop_entropy;
  uint32_t spec_adapt;
};

// The configuration of public options o and experimental controls x
// (every byte of *c written, padding included: a session keeps a copy in
// its arena).
void session_config(const gb_session_options &o, const gb_session_experimental &x, SessionConfig *c);

}  // namespace gb
