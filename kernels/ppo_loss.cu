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

// One block: mean and std of the advantages in double (population std, as the CPU).
__global__ void advantage_stats_kernel(int M, const float* __restrict__ adv, double* __restrict__ stats) {
  __shared__ double scratch[32];
  double s = 0;
  for (int i = threadIdx.x; i < M; i += blockDim.x) s += adv[i];
  const double mean = block_sum(s, scratch) / M;
  double v = 0;
  for (int i = threadIdx.x; i < M; i += blockDim.x) v += (adv[i] - mean) * (adv[i] - mean);
  const double var = block_sum(v, scratch);
  if (threadIdx.x == 0) {
    stats[0] = mean;
    // 1e-8 as CleanRL/SB3: a constant-advantage minibatch gives zero policy gradient, not NaN.
    stats[1] = sqrt(var / M) + 1e-8;
  }
}

__global__ void token_loss_kernel(PpoDims d, PpoCoefs c, PpoInputs in, const double* __restrict__ adv_stats,
                                  float* __restrict__ dhead, float* __restrict__ dvalues,
                                  float* __restrict__ terms, float* __restrict__ dlog_std_terms) {
  const int i = static_cast<int>(blockIdx.x * blockDim.x + threadIdx.x);
  if (i >= d.M) return;
  const int A = d.A;
  const float* hr = in.head + static_cast<size_t>(i) * A;
  float* dh = dhead + static_cast<size_t>(i) * A;
  const float inv_M = 1.f / static_cast<float>(d.M);
  const float eps = static_cast<float>(c.clip_eps);
  const float ce = static_cast<float>(c.ent_coef) * inv_M;
  const float A_i = c.normalize_advantages
                        ? static_cast<float>((in.advantages[i] - adv_stats[0]) / adv_stats[1])
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

// One block: column sums of the token terms in double, in a fixed order.
__global__ void loss_finalize_kernel(PpoDims d, PpoCoefs c, const float* __restrict__ terms,
                                     const float* __restrict__ dlog_std_terms, float* __restrict__ dlog_std,
                                     double* __restrict__ metrics, int* __restrict__ loss_not_finite) {
  __shared__ double scratch[32];
  double sums[kPpoTerms];
  for (int k = 0; k < kPpoTerms; ++k) {
    double s = 0;
    for (int i = threadIdx.x; i < d.M; i += blockDim.x) s += terms[static_cast<size_t>(i) * kPpoTerms + k];
    sums[k] = block_sum(s, scratch) / d.M;
  }
  if (!d.discrete)
    for (int j = 0; j < d.A; ++j) {
      double s = 0;
      for (int i = threadIdx.x; i < d.M; i += blockDim.x)
        s += dlog_std_terms[static_cast<size_t>(i) * d.A + j];
      s = block_sum(s, scratch);
      if (threadIdx.x == 0) dlog_std[j] += static_cast<float>(s);
    }
  if (threadIdx.x != 0) return;
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
              const PpoOutputs& out, cudaStream_t stream) {
  MAMBARL_CHECK(d.M > 0 && d.A > 0, "ppo_loss: sizes must be positive (M " << d.M << ", A " << d.A << ")");
  MAMBARL_CHECK(d.discrete || (in.log_std && out.dlog_std && s.dlog_std_terms),
                "ppo_loss: a Gaussian head needs log_std, its gradient and the (M, A) scratch");
  advantage_stats_kernel<<<1, kThreads, 0, stream>>>(d.M, in.advantages, s.adv_stats);
  MAMBARL_CUDA_LAUNCH_CHECK(stream);
  token_loss_kernel<<<(d.M + kThreads - 1) / kThreads, kThreads, 0, stream>>>(
      d, c, in, s.adv_stats, out.dhead, out.dvalues, s.terms, s.dlog_std_terms);
  MAMBARL_CUDA_LAUNCH_CHECK(stream);
  loss_finalize_kernel<<<1, kThreads, 0, stream>>>(d, c, s.terms, s.dlog_std_terms, out.dlog_std, out.metrics,
                                                   out.loss_not_finite);
  MAMBARL_CUDA_LAUNCH_CHECK(stream);
}

}  // namespace mambarl::cuda
