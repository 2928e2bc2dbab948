// Generic Gated DeltaNet state update and read-out (kernels.h,
// gb_delta_rule_fn): row by row, each sum in index order.
#include <math.h>

#include "../kernels.h"

extern "C" void gb_delta_rule__generic(float *S, const float *k, const float *v, const float *q, float g, float beta, uint32_t d,
                                       float *o) {
  const float decay = expf(g);
  for (uint32_t j = 0; j < d; j++) {
    float *row = S + (size_t)j * d;
    float sk = 0.0f;
    for (uint32_t i = 0; i < d; i++) {
      row[i] *= decay;
      sk += row[i] * k[i];
    }
    const float dj = (v[j] - sk) * beta;
    if (!o) {
      for (uint32_t i = 0; i < d; i++) row[i] += k[i] * dj;
      continue;
    }
    float sq = 0.0f;
    for (uint32_t i = 0; i < d; i++) {
      row[i] += k[i] * dj;
      sq += row[i] * q[i];
    }
    o[j] = sq;
  }
}
