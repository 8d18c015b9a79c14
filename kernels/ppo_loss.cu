#include "kernels/block_reduce.cuh"
#include "kernels/cuda_check.cuh"
#include "kernels/ppo_loss.cuh"

namespace mambarl::cuda {

namespace {

constexpr int kThreads = 256;
// distributions.hpp's DiagGaussian constants, rounded to float the same way.
constexpr double kLog2Pi = 1.8378770664093453;
constexpr float kHalfLog2Pi = static_cast<float>(0.5 * kLog2Pi);
constexpr float kEntropyConst = static_cast<float>(0.5 * (1.0 + kLog2Pi));

// Block g of kPpoBlocks sums rows [g R, (g+1) R) of each column in double
// (R = ceil(M / kPpoBlocks)), so that the one-block reductions that follow
// add kPpoBlocks partials instead of walking all M rows with one block.
__device__ __forceinline__ void block_rows(int M, int& lo, int& hi) {
  const int R = (M + kPpoBlocks - 1) / kPpoBlocks;
  lo = min(M, static_cast<int>(blockIdx.x) * R);
  hi = min(M, lo + R);
}

// Partial Σ Â and Σ Â² of the advantages, per block.
__global__ void advantage_partials_kernel(int M, const float* __restrict__ adv, double* __restrict__ part) {
  __shared__ double scratch[32];
  int lo = 0, hi = 0;
  block_rows(M, lo, hi);
  double s = 0, q = 0;
  for (int i = lo + static_cast<int>(threadIdx.x); i < hi; i += blockDim.x) {
    const double v = adv[i];
    s += v;
    q += v * v;
  }
  s = block_sum(s, scratch);
  q = block_sum(q, scratch);
  if (threadIdx.x == 0) {
    part[2 * blockIdx.x] = s;
    part[2 * blockIdx.x + 1] = q;
  }
}

// One thread: the partials summed in block order -> tot = (Σ Â, Σ Â², tokens).
__global__ void advantage_totals_kernel(int M, const double* __restrict__ part, double* __restrict__ tot) {
  double s = 0, q = 0;
  for (int g = 0; g < kPpoBlocks; ++g) {
    s += part[2 * g];
    q += part[2 * g + 1];
  }
  tot[0] = s;
  tot[1] = q;
  tot[2] = M;
}

// Mean and std (population, as the CPU) of the advantages from their
// totals (tot[2] tokens; every replica's, with a data-parallel learner).
__device__ __forceinline__ void advantage_stats(const double* tot, double& mean, double& std) {
  const double s = tot[0], q = tot[1], n = tot[2];
  mean = s / n;
  // E[Â²] - mean² in double: the float inputs carry 24 bits, the difference keeps
  // ~50 of the 53 unless |mean| >> std, which normalised advantages never are.
  const double var = fmax(q / n - mean * mean, 0.0);
  // 1e-8 as CleanRL/SB3: a constant-advantage minibatch gives zero policy gradient, not NaN.
  std = sqrt(var) + 1e-8;
}

__global__ void token_loss_kernel(PpoDims d, PpoCoefs c, PpoInputs in, double* __restrict__ stats,
                                  float* __restrict__ dhead, float* __restrict__ dvalues,
                                  float* __restrict__ terms, float* __restrict__ dlog_std_terms) {
  __shared__ double adv_mean, adv_std;
  if (threadIdx.x == 0) {
    advantage_stats(stats + kPpoAdvTotals, adv_mean, adv_std);
    if (blockIdx.x == 0) {
      stats[0] = adv_mean;
      stats[1] = adv_std;
    }
  }
  __syncthreads();
  const int i = static_cast<int>(blockIdx.x * blockDim.x + threadIdx.x);
  if (i >= d.M) return;
  const int A = d.A;
  const float* hr = in.head + static_cast<size_t>(i) * A;
  float* dh = dhead + static_cast<size_t>(i) * A;
  // 1 / tokens of the whole minibatch (every replica's): the loss is a mean over it.
  const float inv_M = 1.f / static_cast<float>(stats[kPpoAdvTotals + 2]);
  const float eps = static_cast<float>(c.clip_eps);
  const float ce = static_cast<float>(c.ent_coef) * inv_M;
  const float A_i = c.normalize_advantages
                        ? static_cast<float>((in.advantages[i] - adv_mean) / adv_std)
                        : in.advantages[i];

  // Log-prob of the taken action and the entropy (distributions.hpp).
  float lp = 0.f, ent = 0.f, lz = 0.f;
  int a = 0;
  if (d.discrete) {
    float m = hr[0] + in.pi_b[0];
    for (int j = 1; j < A; ++j) m = fmaxf(m, hr[j] + in.pi_b[j]);
    float z = 0.f;
    for (int j = 0; j < A; ++j) z += expf(hr[j] + in.pi_b[j] - m);
    lz = m + logf(z);
    a = static_cast<int>(in.actions[i]);
    lp = hr[a] + in.pi_b[a] - lz;
    for (int j = 0; j < A; ++j) {
      const float lpj = hr[j] + in.pi_b[j] - lz;
      ent -= expf(lpj) * lpj;
    }
  } else {
    const float* act = in.actions + static_cast<size_t>(i) * A;
    for (int j = 0; j < A; ++j) {
      const float z = (act[j] - (hr[j] + in.pi_b[j])) * expf(-in.log_std[j]);
      lp += -0.5f * z * z - in.log_std[j] - kHalfLog2Pi;
      ent += in.log_std[j] + kEntropyConst;
    }
  }

  const float log_ratio = lp - in.old_logp[i];
  const float ratio = expf(log_ratio);
  const float clipped = fminf(fmaxf(ratio, 1.f - eps), 1.f + eps);
  const float surr1 = ratio * A_i, surr2 = clipped * A_i;
  // d(-min)/dlp: the unclipped branch when it is the minimum (ties included, as PyTorch).
  const float dlp = (surr1 <= surr2 ? -A_i * ratio : 0.f) * inv_M;
  const float v_err = (in.values[i] + in.v_b[0]) - in.returns[i];
  float* t = terms + static_cast<size_t>(i) * kPpoTerms;
  t[0] = -fminf(surr1, surr2);
  t[1] = v_err * v_err;
  t[2] = ent;
  t[3] = (ratio - 1.f) - log_ratio;
  t[4] = fabsf(ratio - 1.f) > eps ? 1.f : 0.f;
  dvalues[i] = static_cast<float>(c.vf_coef) * v_err * inv_M;

  if (d.discrete) {
    // dlp/dlogit_j = [j==a] - p_j;  dH/dlogit_j = -p_j (log p_j + H).
    for (int j = 0; j < A; ++j) {
      const float lpj = hr[j] + in.pi_b[j] - lz;
      const float p = expf(lpj);
      const float dlp_dz = (j == a ? 1.f : 0.f) - p;
      const float dH_dz = -p * (lpj + ent);
      dh[j] = dlp * dlp_dz - ce * dH_dz;
    }
  } else {
    // dlp/dμ = z/σ, dlp/dlogσ = z² - 1; dH/dlogσ = 1.
    const float* act = in.actions + static_cast<size_t>(i) * A;
    float* dls = dlog_std_terms + static_cast<size_t>(i) * A;
    for (int j = 0; j < A; ++j) {
      const float sigma = expf(in.log_std[j]);
      const float z = (act[j] - (hr[j] + in.pi_b[j])) / sigma;
      dh[j] = dlp * z / sigma;
      dls[j] = dlp * (z * z - 1.f) - ce;
    }
  }
}

// Partial column sums of the token terms, per block, in double.
__global__ void term_partials_kernel(int M, const float* __restrict__ terms, double* __restrict__ part) {
  __shared__ double scratch[32];
  int lo = 0, hi = 0;
  block_rows(M, lo, hi);
  double sums[kPpoTerms] = {};
  for (int i = lo + static_cast<int>(threadIdx.x); i < hi; i += blockDim.x)
#pragma unroll
    for (int k = 0; k < kPpoTerms; ++k) sums[k] += terms[static_cast<size_t>(i) * kPpoTerms + k];
#pragma unroll
  for (int k = 0; k < kPpoTerms; ++k) {
    const double s = block_sum(sums[k], scratch);
    if (threadIdx.x == 0) part[static_cast<size_t>(blockIdx.x) * kPpoTerms + k] = s;
  }
}

// One block: the term partials summed in block order -> the term totals;
// and (Gaussian heads) d/d log σ summed over this learner's tokens into the
// gradient (a data-parallel learner sums it with the rest of the gradient).
__global__ void loss_totals_kernel(PpoDims d, const double* __restrict__ term_part,
                                   const float* __restrict__ dlog_std_terms, float* __restrict__ dlog_std,
                                   double* __restrict__ term_tot) {
  __shared__ double scratch[32];
  if (!d.discrete)
    for (int j = 0; j < d.A; ++j) {
      double s = 0;
      for (int i = threadIdx.x; i < d.M; i += blockDim.x)
        s += dlog_std_terms[static_cast<size_t>(i) * d.A + j];
      s = block_sum(s, scratch);
      if (threadIdx.x == 0) dlog_std[j] += static_cast<float>(s);
    }
  if (threadIdx.x != 0) return;
  double sums[kPpoTerms] = {};
  for (int g = 0; g < kPpoBlocks; ++g)
    for (int k = 0; k < kPpoTerms; ++k) sums[k] += term_part[g * kPpoTerms + k];
  for (int k = 0; k < kPpoTerms; ++k) term_tot[k] = sums[k];
}

// One thread: the term totals over the tokens -> the metrics and the
// non-finite flag (the same on every replica: the totals are global).
__global__ void loss_metrics_kernel(PpoCoefs c, const double* __restrict__ stats, double* __restrict__ metrics,
                                    int* __restrict__ loss_not_finite) {
  const double tokens = stats[kPpoAdvTotals + 2];
  double sums[kPpoTerms];
  for (int k = 0; k < kPpoTerms; ++k) sums[k] = stats[kPpoTermTotals + k] / tokens;
  const double pg = sums[0], v = 0.5 * sums[1], ent = sums[2];
  const double loss = pg + c.vf_coef * v - c.ent_coef * ent;
  metrics[0] = loss;
  metrics[1] = pg;
  metrics[2] = v;
  metrics[3] = ent;
  metrics[4] = sums[3];
  metrics[5] = sums[4];
  *loss_not_finite = isfinite(loss) ? 0 : 1;
}

}  // namespace

void ppo_loss(const PpoDims& d, const PpoCoefs& c, const PpoInputs& in, const PpoScratch& s,
              const PpoOutputs& out, cudaStream_t stream, const DeviceSum& across) {
  MAMBARL_CHECK(d.M > 0 && d.A > 0, "ppo_loss: sizes must be positive (M " << d.M << ", A " << d.A << ")");
  MAMBARL_CHECK(d.discrete || (in.log_std && out.dlog_std && s.dlog_std_terms),
                "ppo_loss: a Gaussian head needs log_std, its gradient and the (M, A) scratch");
  double* adv_part = s.stats + kPpoAdvPartials;
  double* term_part = s.stats + kPpoTermPartials;
  double* adv_tot = s.stats + kPpoAdvTotals;
  double* term_tot = s.stats + kPpoTermTotals;
  advantage_partials_kernel<<<kPpoBlocks, kThreads, 0, stream>>>(d.M, in.advantages, adv_part);
  MAMBARL_CUDA_LAUNCH_CHECK(stream);
  advantage_totals_kernel<<<1, 1, 0, stream>>>(d.M, adv_part, adv_tot);
  MAMBARL_CUDA_LAUNCH_CHECK(stream);
  if (across) across(adv_tot, kPpoAdvTotalsDoubles, stream);
  token_loss_kernel<<<(d.M + kThreads - 1) / kThreads, kThreads, 0, stream>>>(
      d, c, in, s.stats, out.dhead, out.dvalues, s.terms, s.dlog_std_terms);
  MAMBARL_CUDA_LAUNCH_CHECK(stream);
  term_partials_kernel<<<kPpoBlocks, kThreads, 0, stream>>>(d.M, s.terms, term_part);
  MAMBARL_CUDA_LAUNCH_CHECK(stream);
  loss_totals_kernel<<<1, kThreads, 0, stream>>>(d, term_part, s.dlog_std_terms, out.dlog_std, term_tot);
  MAMBARL_CUDA_LAUNCH_CHECK(stream);
  if (across) across(term_tot, kPpoTerms, stream);
  loss_metrics_kernel<<<1, 1, 0, stream>>>(c, s.stats, out.metrics, out.loss_not_finite);
  MAMBARL_CUDA_LAUNCH_CHECK(stream);
}

}  // namespace mambarl::cuda
