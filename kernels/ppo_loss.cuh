// The recurrent-PPO loss on the device (CPU twin: policy/ppo_loss.cpp, the
// reference for every formula and every rounding choice below):
//   L = -mean(min(ρÂ, clip(ρ, 1-ε, 1+ε)Â)) + c_v·mean((V - R)²)/2 - c_e·mean(entropy)
// over the M tokens of one minibatch, Â normalised over those tokens, and
// the derivatives w.r.t. the head outputs, the values and log σ.
//
// Six launches, no atomics (bitwise reproducible):
//   1. kPpoBlocks blocks: partial sums of Â and Â² in double over fixed row ranges;
//   2. one thread: those partials in block order -> the totals Σ Â, Σ Â², tokens;
//   3. one thread per token (each block first derives the advantage mean and
//      std from the totals): log-prob, entropy, ratio, the per-token loss
//      terms into a (M, kPpoTerms) scratch, dhead, dvalues and, for a
//      Gaussian head, the per-token d/d log σ into a (M, A) scratch;
//   4. kPpoBlocks blocks: partial sums of the token terms in double;
//   5. one block: the partials in block order -> the term totals, and
//      d/d log σ added into the gradient;
//   6. one thread: the totals over the tokens -> the metrics and a
//      non-finite-loss flag.
// A data-parallel learner sums the two totals across its replicas between
// 2 and 3 and between 5 and 6 (`across`, enqueued on the same stream): the
// advantages are then normalised over, and the metrics and the 1/tokens of
// the gradient taken over, the whole minibatch of every replica. Without
// one the totals are this learner's own, the same bits as before the split.
// (One block walking all M tokens took 30 + 75 µs at M = 16384 on an H200.)
// Actions are validated by the caller (a categorical action must be an
// integer in [0, A)); the kernels do not check them.
#pragma once

#include <cuda_runtime.h>

#include <cstddef>
#include <functional>

namespace mambarl::cuda {

// Per-token loss terms kept for the reduction: -min(surr1, surr2), (V-R)²,
// entropy, approx-KL (ρ-1) - log ρ, clipped (0/1).
constexpr int kPpoTerms = 5;
// The metrics written, in this order (doubles): loss, pg_loss, v_loss,
// entropy, approx_kl, clip_frac (PpoLossMetrics' fields).
constexpr int kPpoMetrics = 6;
// Blocks of the partial-sum passes, and the layout of PpoScratch::stats (doubles):
// [advantage mean, std][kPpoBlocks x (Σ Â, Σ Â²)][kPpoBlocks x kPpoTerms term sums]
// [advantage totals: Σ Â, Σ Â², tokens][kPpoTerms term totals].
constexpr int kPpoBlocks = 64;
constexpr int kPpoAdvPartials = 2;
constexpr int kPpoTermPartials = kPpoAdvPartials + 2 * kPpoBlocks;
constexpr int kPpoAdvTotals = kPpoTermPartials + kPpoTerms * kPpoBlocks;
constexpr int kPpoAdvTotalsDoubles = 3;
constexpr int kPpoTermTotals = kPpoAdvTotals + kPpoAdvTotalsDoubles;
constexpr int kPpoStatsDoubles = kPpoTermTotals + kPpoTerms;

// Enqueues an in-place sum of n device doubles across the data-parallel
// replicas on the given stream (policy/allreduce.hpp); empty: one learner.
using DeviceSum = std::function<void(double* x, size_t n, cudaStream_t stream)>;

struct PpoDims {
  int M = 0;  // tokens
  int A = 0;  // head width: logits or Gaussian mean
  bool discrete = true;
};

struct PpoCoefs {
  double clip_eps = 0.2, vf_coef = 0.5, ent_coef = 0.01;
  bool normalize_advantages = true;
};

struct PpoInputs {
  const float* head = nullptr;        // (M, A) f W_π^T, without the bias
  const float* pi_b = nullptr;        // (A)
  const float* values = nullptr;      // (M) f w_v^T, without the bias
  const float* v_b = nullptr;         // (1)
  const float* log_std = nullptr;     // (A) Gaussian only, else null
  const float* actions = nullptr;     // (M, act_width)
  const float* old_logp = nullptr;    // (M)
  const float* advantages = nullptr;  // (M)
  const float* returns = nullptr;     // (M)
};

struct PpoOutputs {
  float* dhead = nullptr;          // (M, A) written
  float* dvalues = nullptr;        // (M) written
  float* dlog_std = nullptr;       // (A) gradient, ADDED to (Gaussian only)
  double* metrics = nullptr;       // (kPpoMetrics) written
  int* loss_not_finite = nullptr;  // written: 1 when the loss is NaN/Inf, else 0
};

struct PpoScratch {
  double* stats = nullptr;          // (kPpoStatsDoubles): advantage mean, std + 1e-8, then partial sums
  float* terms = nullptr;           // (M, kPpoTerms)
  float* dlog_std_terms = nullptr;  // (M, A) Gaussian only
};

void ppo_loss(const PpoDims& dims, const PpoCoefs& coefs, const PpoInputs& in, const PpoScratch& scratch,
              const PpoOutputs& out, cudaStream_t stream, const DeviceSum& across = {});

}  // namespace mambarl::cuda
