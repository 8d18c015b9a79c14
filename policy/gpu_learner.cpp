#include "policy/gpu_learner.hpp"

#include <cublas_v2.h>
#include <cuda_runtime.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <sstream>
#include <utility>

#include "kernels/adamw.cuh"
#include "kernels/cuda_check.cuh"
#include "kernels/cuda_graph.cuh"
#include "kernels/cuda_handles.cuh"
#include "kernels/device_buffer.cuh"
#include "kernels/event_timing.cuh"
#include "kernels/linear.cuh"
#include "kernels/loss_scale.cuh"
#include "kernels/ppo_loss.cuh"
#include "kernels/rmsnorm.cuh"
#include "kernels/rows.cuh"
#include "policy/checkpoint.hpp"
#include "policy/policy_config.hpp"

namespace mambarl {

namespace {

// cuBLAS's recommended workspace on Hopper; set before capture so that no
// GEMM allocates inside the graph.
constexpr size_t kCublasWorkspaceBytes = 32u << 20;
constexpr size_t kStagingAlign = 256;

size_t align_up(size_t n, size_t a) { return (n + a - 1) / a * a; }

// Everything the update reports, plus the optimizer step that persists
// across updates: one device struct, copied to pinned memory once per update.
struct DeviceScalars {
  double metrics[cuda::kPpoMetrics];  // loss, pg_loss, v_loss, entropy, approx_kl, clip_frac
  double grad_norm;
  long long step;
  int loss_not_finite;
  int grad_not_finite;
  float step_scalars[4];  // AdamW's per-step scratch (kernels/adamw.cuh)
  cuda::LossScale scaler;  // float16 only (kernels/loss_scale.cuh)
};

// Byte offsets of the chunk's arrays in the pinned staging buffer and its
// device twin (same layout, one H2D copy). The lr comes first, at offset 0,
// so that it alone is bytes [0, sizeof(double)).
struct Staging {
  size_t lr = 0, obs = 0, actions = 0, old_logp = 0, adv = 0, returns = 0, state0 = 0, starts = 0;
  size_t bytes = 0;
};

}  // namespace

struct GpuLearner::Impl {
  PolicyConfig policy;
  PpoLossConfig loss_cfg;
  AdamWConfig adam_cfg;
  std::shared_ptr<ActorCritic<float>> model;
  int obs_dim = 0, D = 0, L = 0, A = 0, act_width = 0;
  size_t S = 0, P = 0;  // state floats per env; parameter floats
  Precision precision = Precision::float32;
  Allreduce* across = nullptr;  // the data-parallel replicas (not owned); null: this learner alone
  Launch mode = Launch::graph;
  int T = 0, B = 0, M = 0;  // the prepared chunk shape, M = T*B
  int Tc = 0, Ml = 0;       // context steps (no loss); loss rows Ml = (T - Tc) * B, the last of the M
  bool warmed_up = false;   // one eager update of this shape ran (lazy loading, cuBLAS setup)

  CudaStream stream;
  CublasHandle cublas;
  DeviceBuffer<uint8_t> cublas_ws{kCublasWorkspaceBytes};
  DeviceBuffer<float> params, grads, exp_avg, exp_avg_sq, decay;  // (P) each
  DeviceBuffer<uint16_t> params_low;  // (P) 16-bit GEMM shadow of params; empty for float32
  DeviceBuffer<DeviceScalars> scalars{1};
  PinnedBuffer<DeviceScalars> scalars_host{1};
  DeviceBuffer<double> norm_partials{cuda::kGradNormBlocks}, ppo_stats{cuda::kPpoStatsDoubles};
  std::vector<std::unique_ptr<GpuMixer>> mixers;

  // Per-shape buffers (prepare()).
  Staging st;
  PinnedBuffer<uint8_t> in_host;
  DeviceBuffer<uint8_t> in_dev;
  // Bytes of in_host that run() copies into in_dev before each update: all
  // of it for a host chunk; only the lr for a device chunk, whose arrays
  // stage_device() copied into in_dev device-to-device.
  size_t h2d_bytes = 0;
  DeviceBuffer<float> h;                // (L+1, M, D) residual streams
  DeviceBuffer<float> normed;           // (L, M, D) pre-mixer norms (the mixers' U)
  DeviceBuffer<float> rstd;             // (L, M)
  DeviceBuffer<float> mix;              // (M, D) mixer output
  DeviceBuffer<float> f;                // (M, D) final norm output
  DeviceBuffer<float> rstd_f;           // (M)
  DeviceBuffer<float> head, dhead;      // (M, A) each, head without its bias
  DeviceBuffer<float> values, dvalues;  // (M) each, values without the bias
  DeviceBuffer<float> loss_terms;       // (M, kPpoTerms)
  DeviceBuffer<float> dlog_std_terms;   // (M, A) Gaussian heads
  DeviceBuffer<float> dh, dmix;         // (M, D) each; dmix also holds df
  DeviceBuffer<float> dw_terms;         // (M, D) norm-weight gradient terms
  DeviceBuffer<float> ones;             // (M)
  DeviceBuffer<float> start_mask;       // (M) 1 at episode starts: the start embedding's gradient weights
  DeviceBuffer<uint16_t> gemm_scratch;  // 16-bit GEMM operand casts (kernels/linear.cuh); 16-bit precisions

  // Parameter offsets.
  size_t obs_w = 0, obs_b = 0, norm_f = 0, pi_w = 0, pi_b = 0, v_w = 0, v_b = 0;
  long long log_std = -1, start_embed = -1;
  std::vector<size_t> norm_w;  // (L)

  // Declared last: destroyed before the buffers it points into. Null until
  // captured; prepare() drops it (a new shape is a new graph).
  std::unique_ptr<CudaGraph> graph;

  Impl(const PolicyConfig& policy, int obs_dim, const HeadSpec& head, const PpoLossConfig& loss,
       const AdamWConfig& adam, uint64_t seed, Precision precision, Allreduce* across);
  ~Impl() { (void)cudaStreamSynchronize(stream.get()); }

  size_t offset(const std::string& name, const std::vector<int64_t>& shape) const {
    return model->layout().offset_of(name, shape, "GpuLearner");
  }
  void prepare(int T_, int B_, int Tc_);
  void allocate(int T_, int B_, int Tc_);
  template <typename T_>
  T_* in(size_t off) const {
    return reinterpret_cast<T_*>(in_dev.data() + off);
  }
  float* h_at(int l) const { return h.data() + static_cast<size_t>(l) * M * D; }
  std::vector<GraphBinding> bindings() const;
  void stage_host(const ChunkView& c);
  void stage_device(const ChunkView& c);
  void check_actions(const float* actions) const;
  void record(cudaStream_t s);
  void run();
  void sync() const { MAMBARL_CUDA_CHECK(cudaStreamSynchronize(stream.get())); }
  std::vector<float> download(const DeviceBuffer<float>& d) const;
  void upload(DeviceBuffer<float>& d, const float* src, size_t n, const char* what);
  void set_step(long long step);
  void refresh_shadow(cudaStream_t s);
  cuda::LossScale read_scaler() const;
  void write_scaler(const cuda::LossScale& v);
};

GpuLearner::Impl::Impl(const PolicyConfig& pol, int obs, const HeadSpec& hs, const PpoLossConfig& loss,
                       const AdamWConfig& adam, uint64_t seed, Precision prec, Allreduce* all)
    : policy(pol),
      loss_cfg(loss),
      adam_cfg(adam),
      model(make_actor_critic<float>(pol, obs, hs)),
      precision(prec),
      across(all) {
  int devices = 0;
  MAMBARL_CUDA_CHECK(cudaGetDeviceCount(&devices));
  MAMBARL_CHECK(devices > 0, "GpuLearner: no CUDA device");
  MAMBARL_CHECK(!across || across->sums_device_memory(),
                "GpuLearner: its data-parallel collective sums host memory only; the GPU learner sums "
                "its statistics and gradient on the device, inside the update graph (NCCL)");
  const ActorCriticSpec& spec = model->spec();
  obs_dim = spec.obs_dim;
  D = spec.d_model;
  L = spec.n_layers;
  A = spec.head.action_dim;
  act_width = spec.head.act_width();
  S = model->state_size();
  const ParamLayout& layout = model->layout();
  P = layout.size();

  MAMBARL_CUBLAS_CHECK(cublasSetStream(cublas.get(), stream.get()));
  // After SetStream, which resets the workspace to cuBLAS's own pool.
  MAMBARL_CUBLAS_CHECK(cublasSetWorkspace(cublas.get(), cublas_ws.data(), cublas_ws.bytes()));
  // No TF32: the CPU parity bound is 1e-4.
  MAMBARL_CUBLAS_CHECK(cublasSetMathMode(cublas.get(), CUBLAS_DEFAULT_MATH));

  for (int l = 0; l < L; ++l) mixers.push_back(make_gpu_mixer(model->mixer(l), layout, l));

  // Same init as CpuLearner: on the host from the seed, then uploaded.
  std::vector<float> host(P, 0.f), flags(P, 0.f);
  model->init_params(host.data(), seed);
  for (const auto& p : layout.params())
    if (p.weight_decay)
      std::fill(flags.begin() + static_cast<long>(p.offset),
                flags.begin() + static_cast<long>(p.offset + p.numel), 1.f);
  params = DeviceBuffer<float>(P);
  grads = DeviceBuffer<float>(P);
  exp_avg = DeviceBuffer<float>(P);
  exp_avg_sq = DeviceBuffer<float>(P);
  decay = DeviceBuffer<float>(P);
  if (precision != Precision::float32) params_low = DeviceBuffer<uint16_t>(P);
  upload(params, host.data(), P, "params");
  upload(decay, flags.data(), P, "decay flags");
  MAMBARL_CUDA_CHECK(cudaMemsetAsync(grads.data(), 0, grads.bytes(), stream.get()));
  MAMBARL_CUDA_CHECK(cudaMemsetAsync(exp_avg.data(), 0, exp_avg.bytes(), stream.get()));
  MAMBARL_CUDA_CHECK(cudaMemsetAsync(exp_avg_sq.data(), 0, exp_avg_sq.bytes(), stream.get()));
  MAMBARL_CUDA_CHECK(cudaMemsetAsync(scalars.data(), 0, scalars.bytes(), stream.get()));
  sync();
  write_scaler(cuda::LossScale{});

  obs_w = offset("obs_proj.weight", {D, obs_dim});
  obs_b = offset("obs_proj.bias", {D});
  if (spec.start_embedding) start_embed = static_cast<long long>(offset("start_embed", {D}));
  for (int l = 0; l < L; ++l) norm_w.push_back(offset("layers." + std::to_string(l) + ".norm.weight", {D}));
  norm_f = offset("norm_f.weight", {D});
  pi_w = offset("pi.weight", {A, D});
  pi_b = offset("pi.bias", {A});
  if (!spec.head.discrete) log_std = static_cast<long long>(offset("pi.log_std", {A}));
  v_w = offset("v.weight", {1, D});
  v_b = offset("v.bias", {1});
}

void GpuLearner::Impl::prepare(int T_, int B_, int Tc_) {
  MAMBARL_CHECK(T_ >= 1 && B_ >= 1, "GpuLearner: empty chunk (T=" << T_ << ", B=" << B_ << ")");
  MAMBARL_CHECK(Tc_ >= 0 && Tc_ < T_, "GpuLearner: " << Tc_ << " context steps in a chunk of T=" << T_);
  try {
    allocate(T_, B_, Tc_);
  } catch (...) {
    // Half-resized buffers must never be used: no shape is prepared, so the
    // next train_step() prepares again instead of running on them.
    T = B = M = Tc = Ml = 0;
    graph.reset();
    throw;
  }
}

void GpuLearner::Impl::allocate(int T_, int B_, int Tc_) {
  sync();
  T = T_;
  B = B_;
  M = T * B;
  Tc = Tc_;
  Ml = (T - Tc) * B;
  warmed_up = false;
  graph.reset();
  const size_t m = static_cast<size_t>(M), ml = static_cast<size_t>(Ml), d = static_cast<size_t>(D);
  // Staging: the lr first (8-byte aligned), then each array on its own 256-byte boundary.
  size_t at = 0;
  const auto take = [&](size_t bytes) {
    const size_t off = at;
    at = align_up(at + std::max<size_t>(bytes, 1), kStagingAlign);
    return off;
  };
  st.lr = take(sizeof(double));
  st.obs = take(m * obs_dim * sizeof(float));
  st.actions = take(ml * act_width * sizeof(float));
  st.old_logp = take(ml * sizeof(float));
  st.adv = take(ml * sizeof(float));
  st.returns = take(ml * sizeof(float));
  st.state0 = take(static_cast<size_t>(B) * S * sizeof(float));
  st.starts = take(m);
  st.bytes = at;
  h2d_bytes = st.bytes;
  in_host = PinnedBuffer<uint8_t>(st.bytes);
  std::memset(in_host.data(), 0, in_host.bytes());
  in_dev = DeviceBuffer<uint8_t>(st.bytes);

  h = DeviceBuffer<float>(static_cast<size_t>(L + 1) * m * d);
  normed = DeviceBuffer<float>(std::max<size_t>(static_cast<size_t>(L) * m * d, 1));
  rstd = DeviceBuffer<float>(std::max<size_t>(static_cast<size_t>(L) * m, 1));
  mix = DeviceBuffer<float>(m * d);
  f = DeviceBuffer<float>(m * d);
  rstd_f = DeviceBuffer<float>(m);
  head = DeviceBuffer<float>(m * A);
  dhead = DeviceBuffer<float>(m * A);
  values = DeviceBuffer<float>(m);
  dvalues = DeviceBuffer<float>(m);
  loss_terms = DeviceBuffer<float>(m * cuda::kPpoTerms);
  dlog_std_terms = DeviceBuffer<float>(log_std >= 0 ? m * A : 1);
  dh = DeviceBuffer<float>(m * d);
  dmix = DeviceBuffer<float>(m * d);
  dw_terms = DeviceBuffer<float>(m * d);
  ones = DeviceBuffer<float>(m);
  cuda::fill(m, 1.f, ones.data(), stream.get());
  start_mask = DeviceBuffer<float>(start_embed >= 0 ? m : 1);
  for (auto& mx : mixers) mx->prepare(T, B);
  if (precision != Precision::float32) {
    // The learner's own GEMMs cast f / dhead (+ f) / dh (+ obs); the mixers report theirs.
    size_t words = std::max(cuda::gemm_cast_elems(m * A, m * d), cuda::gemm_cast_elems(m * d, m * obs_dim));
    for (const auto& mx : mixers) words = std::max(words, mx->gemm_cast_elems());
    gemm_scratch = DeviceBuffer<uint16_t>();  // free the old shape's before taking the new
    gemm_scratch = DeviceBuffer<uint16_t>(words);
  }
  sync();
}

std::vector<GraphBinding> GpuLearner::Impl::bindings() const {
  std::vector<GraphBinding> b = {
      GraphBinding::value("chunk T", T),
      GraphBinding::value("chunk B", B),
      GraphBinding::value("context T", Tc),
      GraphBinding::buffer("params", params),
      GraphBinding::buffer("16-bit params", params_low),
      GraphBinding::buffer("16-bit GEMM scratch", gemm_scratch),
      GraphBinding::buffer("grads", grads),
      GraphBinding::buffer("exp_avg", exp_avg),
      GraphBinding::buffer("exp_avg_sq", exp_avg_sq),
      GraphBinding::buffer("decay flags", decay),
      GraphBinding::buffer("scalars", scalars),
      GraphBinding::buffer("pinned scalars", scalars_host),
      GraphBinding::buffer("grad-norm partials", norm_partials),
      GraphBinding::buffer("loss statistics", ppo_stats),
      GraphBinding::buffer("device chunk", in_dev),
      GraphBinding::buffer("residual streams", h),
      GraphBinding::buffer("normed inputs", normed),
      GraphBinding::buffer("layer rstd", rstd),
      GraphBinding::buffer("mixer output", mix),
      GraphBinding::buffer("final norm", f),
      GraphBinding::buffer("final rstd", rstd_f),
      GraphBinding::buffer("head", head),
      GraphBinding::buffer("dhead", dhead),
      GraphBinding::buffer("values", values),
      GraphBinding::buffer("dvalues", dvalues),
      GraphBinding::buffer("loss terms", loss_terms),
      GraphBinding::buffer("log_std terms", dlog_std_terms),
      GraphBinding::buffer("dh", dh),
      GraphBinding::buffer("dmix", dmix),
      GraphBinding::buffer("norm weight terms", dw_terms),
      GraphBinding::buffer("ones", ones),
      GraphBinding::buffer("start mask", start_mask),
      GraphBinding::buffer("cuBLAS workspace", cublas_ws),
  };
  for (const auto& mx : mixers) mx->bindings(b);
  return b;
}

// The chunk reaches in_dev outside the graph (run() and stage_device()), so
// the graph reads only the learner's own buffers and never bakes in a
// caller's pointers; a device chunk and the same chunk from the host stage
// the same bytes and give the same update bit for bit.
void GpuLearner::Impl::stage_host(const ChunkView& c) {
  const size_t rows = static_cast<size_t>(M), loss_rows = static_cast<size_t>(Ml);
  uint8_t* host = in_host.data();
  std::memcpy(host + st.obs, c.obs, rows * obs_dim * sizeof(float));
  std::memcpy(host + st.actions, c.actions, loss_rows * act_width * sizeof(float));
  std::memcpy(host + st.old_logp, c.old_logp, loss_rows * sizeof(float));
  std::memcpy(host + st.adv, c.advantages, loss_rows * sizeof(float));
  std::memcpy(host + st.returns, c.returns, loss_rows * sizeof(float));
  if (S) std::memcpy(host + st.state0, c.initial_state, static_cast<size_t>(B) * S * sizeof(float));
  std::memcpy(host + st.starts, c.episode_start, rows);
  h2d_bytes = st.bytes;
}

// Device-to-device on the learner's stream: the caller's writes to the
// chunk must be complete (its stream synchronised) before train_step.
void GpuLearner::Impl::stage_device(const ChunkView& c) {
  const size_t rows = static_cast<size_t>(M), loss_rows = static_cast<size_t>(Ml);
  const auto copy = [&](size_t off, const void* src, size_t bytes) {
    if (bytes)
      MAMBARL_CUDA_CHECK(
          cudaMemcpyAsync(in_dev.data() + off, src, bytes, cudaMemcpyDeviceToDevice, stream.get()));
  };
  copy(st.obs, c.obs, rows * obs_dim * sizeof(float));
  copy(st.actions, c.actions, loss_rows * act_width * sizeof(float));
  copy(st.old_logp, c.old_logp, loss_rows * sizeof(float));
  copy(st.adv, c.advantages, loss_rows * sizeof(float));
  copy(st.returns, c.returns, loss_rows * sizeof(float));
  copy(st.state0, c.initial_state, static_cast<size_t>(B) * S * sizeof(float));
  copy(st.starts, c.episode_start, rows);
  h2d_bytes = sizeof(double);  // the lr, at offset 0
}

// The loss kernel indexes logits by the action: validate on the host, as the
// CPU loss does. `actions`: (Ml) host memory.
void GpuLearner::Impl::check_actions(const float* actions) const {
  for (size_t i = 0; i < static_cast<size_t>(Ml); ++i) {
    const float a = actions[i];
    MAMBARL_CHECK(a >= 0.f && a < static_cast<float>(A) && a == std::floor(a),
                  "ppo_loss: action " << a << " is not an integer in [0, " << A << ")");
  }
}

// One whole update enqueued on s, from the chunk staged in in_dev: captured
// once per shape, or run eagerly.
void GpuLearner::Impl::record(cudaStream_t s) {
  const bool low = precision != Precision::float32;
  const GpuExec exec =
      low ? GpuExec{s, cublas.get(),
                    cuda::GemmPrecision{precision, gemm_scratch.data(), gemm_scratch.size(), s},
                    params_low.data()}
          : GpuExec{s, cublas.get()};
  cublasHandle_t hb = cublas.get();
  const float* W = params.data();
  float* G = grads.data();
  DeviceScalars* sc = scalars.data();
  const float* obs = in<float>(st.obs);
  const uint8_t* starts = in<uint8_t>(st.starts);
  const float* state0 = in<float>(st.state0);

  MAMBARL_CUDA_CHECK(cudaMemsetAsync(G, 0, grads.bytes(), s));

  // Forward: h⁰ = W_obs o + b_obs; hˡ⁺¹ = hˡ + Mixerˡ(RMSNorm(hˡ)); f = RMSNorm(h^L).
  const cuda::RowEmbedding start_rows =
      start_embed >= 0 ? cuda::RowEmbedding{starts, W + start_embed} : cuda::RowEmbedding{};
  cuda::linear_small(M, obs_dim, D, obs, W + obs_w, W + obs_b, h_at(0), s, false, start_rows);
  for (int l = 0; l < L; ++l) {
    float* u = normed.data() + static_cast<size_t>(l) * M * D;
    float* r = rstd.data() + static_cast<size_t>(l) * M;
    cuda::rmsnorm_forward(M, D, h_at(l), W + norm_w[static_cast<size_t>(l)], u, r, s);
    mixers[static_cast<size_t>(l)]->forward(W, u, starts, state0 + model->layer_state_offset(l), S,
                                            mix.data(), exec);
    cuda::add(static_cast<size_t>(M) * D, h_at(l), mix.data(), h_at(l + 1), s);
  }
  cuda::rmsnorm_forward(M, D, h_at(L), W + norm_f, f.data(), rstd_f.data(), s);
  // Heads without their biases (the loss adds them): head = f W_π^T, values = f w_v^T.
  exec.gemm_rows(M, D, A, f.data(), exec.weight(W, pi_w), 0.f, head.data());
  exec.gemm_rows(M, D, 1, f.data(), exec.weight(W, v_w), 0.f, values.data());

  // The loss covers the last Ml rows; the context rows before them get zero
  // head gradients (their state still carries the loss rows' gradient).
  const size_t mc = static_cast<size_t>(M - Ml);
  if (mc) {
    MAMBARL_CUDA_CHECK(cudaMemsetAsync(dhead.data(), 0, mc * A * sizeof(float), s));
    MAMBARL_CUDA_CHECK(cudaMemsetAsync(dvalues.data(), 0, mc * sizeof(float), s));
  }
  cuda::PpoInputs pin;
  pin.head = head.data() + mc * A;
  pin.pi_b = W + pi_b;
  pin.values = values.data() + mc;
  pin.v_b = W + v_b;
  pin.log_std = log_std >= 0 ? W + log_std : nullptr;
  pin.actions = in<float>(st.actions);
  pin.old_logp = in<float>(st.old_logp);
  pin.advantages = in<float>(st.adv);
  pin.returns = in<float>(st.returns);
  cuda::PpoOutputs pout;
  pout.dhead = dhead.data() + mc * A;
  pout.dvalues = dvalues.data() + mc;
  pout.dlog_std = log_std >= 0 ? G + log_std : nullptr;
  pout.metrics = sc->metrics;
  pout.loss_not_finite = &sc->loss_not_finite;
  cuda::PpoScratch pscr{ppo_stats.data(), loss_terms.data(), log_std >= 0 ? dlog_std_terms.data() : nullptr};
  const cuda::PpoCoefs pc{loss_cfg.clip_eps, loss_cfg.vf_coef, loss_cfg.ent_coef,
                          loss_cfg.normalize_advantages};
  cuda::DeviceSum sum_across;
  if (across)
    sum_across = [this](double* x, size_t n, cudaStream_t st) { across->sum_device(x, n, st); };
  cuda::ppo_loss(cuda::PpoDims{Ml, A, model->spec().head.discrete}, pc, pin, pscr, pout, s, sum_across);
  const float* loss_scale = &sc->scaler.scale;
  if (precision == Precision::float16) {
    // Seed the backward with S: every gradient below is S times the true one.
    cuda::scale_by(static_cast<size_t>(M) * A, loss_scale, false, dhead.data(), s);
    cuda::scale_by(static_cast<size_t>(M), loss_scale, false, dvalues.data(), s);
    if (log_std >= 0) cuda::scale_by(static_cast<size_t>(A), loss_scale, false, G + log_std, s);
  }

  // Heads backward: df = dhead W_π + k · dV w_v (k = vf_trunk_coef); dW_π += dheadᵀ f,
  // db_π += Σ dhead; the same for v, with all of dV.
  float* df = dmix.data();
  exec.gemm(false, false, M, D, A, 1.f, dhead.data(), A, exec.weight(W, pi_w), D, 0.f, df, D);
  exec.gemm(false, false, M, D, 1, static_cast<float>(loss_cfg.vf_trunk_coef), dvalues.data(), 1,
            exec.weight(W, v_w), D, 1.f, df, D);
  exec.gemm(true, false, A, D, M, 1.f, dhead.data(), A, f.data(), D, 1.f, G + pi_w, D);
  cuda::column_sum(hb, M, A, dhead.data(), A, ones.data(), G + pi_b);
  exec.gemm(true, false, 1, D, M, 1.f, dvalues.data(), 1, f.data(), D, 1.f, G + v_w, D);
  cuda::column_sum(hb, M, 1, dvalues.data(), 1, ones.data(), G + v_b);
  cuda::rmsnorm_backward(M, D, h_at(L), W + norm_f, rstd_f.data(), df, dh.data(), false, dw_terms.data(), s);
  cuda::column_sum(hb, M, D, dw_terms.data(), D, ones.data(), G + norm_f);
  // Residual stream: dh flows straight through and into each mixer branch.
  for (int l = L - 1; l >= 0; --l) {
    const size_t i = static_cast<size_t>(l);
    mixers[i]->backward(W, dh.data(), G, dmix.data(), exec);
    cuda::rmsnorm_backward(M, D, h_at(l), W + norm_w[i], rstd.data() + i * M, dmix.data(), dh.data(), true,
                           dw_terms.data(), s);
    cuda::column_sum(hb, M, D, dw_terms.data(), D, ones.data(), G + norm_w[i]);
  }
  exec.gemm(true, false, D, obs_dim, M, 1.f, dh.data(), D, obs, obs_dim, 1.f, G + obs_w, obs_dim);
  cuda::column_sum(hb, M, D, dh.data(), D, ones.data(), G + obs_b);
  if (start_embed >= 0) {
    cuda::flags_to_mask(static_cast<size_t>(M), starts, start_mask.data(), s);
    cuda::column_sum(hb, M, D, dh.data(), D, start_mask.data(), G + start_embed);
  }
  // Unscaled before the norm, clip and AdamW, which then see the true gradient
  // (an overflow stays inf/NaN and makes AdamW skip the update).
  if (precision == Precision::float16) cuda::scale_by(P, loss_scale, true, G, s);
  // The one gradient sum per minibatch, before the norm: every replica clips
  // and steps with the whole minibatch's gradient (an overflow on any
  // replica makes the sum non-finite, so all of them skip).
  if (across) across->sum_gradient_device(G, P, s);

  cuda::AdamWScalars as;
  as.lr = in<double>(st.lr);
  as.step = &sc->step;
  as.loss_not_finite = &sc->loss_not_finite;
  as.grad_norm = &sc->grad_norm;
  as.grad_not_finite = &sc->grad_not_finite;
  as.step_scalars = sc->step_scalars;
  as.partials = norm_partials.data();
  const cuda::AdamWCoefs ac{adam_cfg.beta1, adam_cfg.beta2, adam_cfg.eps, adam_cfg.weight_decay,
                            adam_cfg.max_grad_norm};
  cuda::adamw_update(P, ac, as, params.data(), G, exp_avg.data(), exp_avg_sq.data(), decay.data(), s);
  if (precision == Precision::float16)
    cuda::loss_scale_update(&sc->scaler, &sc->loss_not_finite, &sc->grad_not_finite, s);
  // The next update's GEMMs read the new weights (unchanged ones after a skip).
  refresh_shadow(s);
  MAMBARL_CUDA_CHECK(
      cudaMemcpyAsync(scalars_host.data(), sc, sizeof(DeviceScalars), cudaMemcpyDeviceToHost, s));
}

void GpuLearner::Impl::run() {
  MAMBARL_CUDA_CHECK(
      cudaMemcpyAsync(in_dev.data(), in_host.data(), h2d_bytes, cudaMemcpyHostToDevice, stream.get()));
  // The first update of a shape runs eagerly even in graph mode: lazy module
  // loading and cuBLAS's first-call setup must not happen inside a capture.
  // Graph and eager give the same bits, so this changes no result.
  if (mode == Launch::eager || !warmed_up) {
    record(stream.get());
    warmed_up = true;
    return;
  }
  if (!graph) {
    auto g = std::make_unique<CudaGraph>("learner update");
    g->capture(stream.get(), bindings(), [this](cudaStream_t s) { record(s); });
    graph = std::move(g);
  }
  graph->launch(stream.get());
}

std::vector<float> GpuLearner::Impl::download(const DeviceBuffer<float>& d) const {
  return copy_to_host(d, stream.get());
}

void GpuLearner::Impl::upload(DeviceBuffer<float>& d, const float* src, size_t n, const char* what) {
  MAMBARL_CHECK(n == d.size(),
                "GpuLearner: " << what << " has " << n << " floats, the model has " << d.size());
  copy_to_device(d.data(), src, n, stream.get());
  if (&d == &params) {  // every weights-in refreshes the GEMM shadow
    refresh_shadow(stream.get());
    sync();
  }
}

void GpuLearner::Impl::refresh_shadow(cudaStream_t s) {
  if (precision != Precision::float32) cuda::to_half(precision, P, params.data(), params_low.data(), s);
}

cuda::LossScale GpuLearner::Impl::read_scaler() const {
  cuda::LossScale v;
  MAMBARL_CUDA_CHECK(
      cudaMemcpyAsync(&v, &scalars.data()->scaler, sizeof(v), cudaMemcpyDeviceToHost, stream.get()));
  sync();
  return v;
}

void GpuLearner::Impl::write_scaler(const cuda::LossScale& v) {
  sync();
  scalars_host.data()->scaler = v;
  MAMBARL_CUDA_CHECK(cudaMemcpyAsync(&scalars.data()->scaler, &scalars_host.data()->scaler, sizeof(v),
                                     cudaMemcpyHostToDevice, stream.get()));
  sync();
}

void GpuLearner::Impl::set_step(long long step) {
  sync();
  scalars_host.data()->step = step;
  MAMBARL_CUDA_CHECK(cudaMemcpyAsync(&scalars.data()->step, &scalars_host.data()->step, sizeof(long long),
                                     cudaMemcpyHostToDevice, stream.get()));
  sync();
}

// ---------------------------------------------------------------------------

GpuLearner::GpuLearner(const PolicyConfig& policy, int obs_dim, const HeadSpec& head,
                       const PpoLossConfig& loss, const AdamWConfig& adam, uint64_t seed, Precision precision,
                       Allreduce* across)
    : impl_(std::make_unique<Impl>(policy, obs_dim, head, loss, adam, seed, precision, across)) {}

GpuLearner::~GpuLearner() = default;

void GpuLearner::prepare(int T, int B, int context_T) { impl_->prepare(T, B, context_T); }

TrainResult GpuLearner::train_step(const ChunkView& c, double lr) {
  Impl& m = *impl_;
  MAMBARL_CHECK(c.T >= 1 && c.B >= 1, "train_step: empty chunk (T="
                                           << c.T << ", B=" << c.B
                                           << "); a data-parallel GPU learner replica needs at least one "
                                              "sequence per minibatch");
  if (m.M == 0) m.prepare(c.T, c.B, c.context_T);
  MAMBARL_CHECK(c.T == m.T && c.B == m.B && c.context_T == m.Tc,
                "GpuLearner: prepared (and captured) for chunks of T=" << m.T << ", B=" << m.B << " with " << m.Tc
                    << " context steps, got T=" << c.T << ", B=" << c.B << " with " << c.context_T
                    << "; call prepare(T, B, context_T) to switch shapes");
  const std::pair<const void*, const char*> arrays[] = {
      {c.obs, "obs"}, {c.actions, "actions"}, {c.old_logp, "old_logp"}, {c.advantages, "advantages"},
      {c.returns, "returns"}, {c.episode_start, "episode_start"}};
  for (const auto& [p, name] : arrays)
    MAMBARL_CHECK(p, "GpuLearner::train_step: the chunk's " << name << " array is null");
  MAMBARL_CHECK(c.initial_state || m.S == 0, "GpuLearner::train_step: the chunk's initial_state array is null");
  const bool discrete = m.model->spec().head.discrete;
  std::memcpy(m.in_host.data() + m.st.lr, &lr, sizeof(double));
  if (c.on_device) {
    m.stage_device(c);
    if (discrete) {
      // The actions are checked where the update will read them: a copy of
      // the staged ones into their (otherwise unused) pinned slot, one sync.
      float* staged = reinterpret_cast<float*>(m.in_host.data() + m.st.actions);
      MAMBARL_CUDA_CHECK(cudaMemcpyAsync(staged, m.in<float>(m.st.actions),
                                         static_cast<size_t>(m.Ml) * sizeof(float), cudaMemcpyDeviceToHost,
                                         m.stream.get()));
      m.sync();
      m.check_actions(staged);
    }
  } else {
    if (discrete) m.check_actions(c.actions);
    m.stage_host(c);
  }
  m.run();
  m.sync();

  const DeviceScalars& sc = *m.scalars_host.data();
  TrainResult r;
  r.loss.loss = sc.metrics[0];
  r.loss.pg_loss = sc.metrics[1];
  r.loss.v_loss = sc.metrics[2];
  r.loss.entropy = sc.metrics[3];
  r.loss.approx_kl = sc.metrics[4];
  r.loss.clip_frac = sc.metrics[5];
  if (m.precision == Precision::float16) r.loss_scale = sc.scaler.scale;
  if (sc.loss_not_finite) {
    // As the CPU, which stops before the backward: no gradient norm.
    r.skipped = true;
    r.reason = "loss is not finite (" + std::to_string(r.loss.loss) + ")";
    return r;
  }
  r.grad_norm = sc.grad_norm;
  if (sc.grad_not_finite && m.precision == Precision::float16) {
    // As GradScaler: any non-finite gradient at scale S counts as an overflow.
    std::ostringstream why;
    why << "f16 loss-scale overflow (scale " << sc.scaler.used << ")";
    r.skipped = true;
    r.reason = why.str();
  } else if (sc.grad_not_finite) {
    r.skipped = true;
    r.reason = "gradient norm is not finite";
    const std::vector<float> g = m.download(m.grads);
    for (const auto& p : m.model->layout().params())
      if (std::any_of(g.begin() + static_cast<long>(p.offset),
                      g.begin() + static_cast<long>(p.offset + p.numel),
                      [](float v) { return !std::isfinite(v); })) {
        r.reason = "gradient of " + p.name + " is not finite";
        break;
      }
  }
  return r;
}

void GpuLearner::set_launch(Launch mode) { impl_->mode = mode; }
GpuLearner::Launch GpuLearner::launch() const { return impl_->mode; }
Precision GpuLearner::precision() const { return impl_->precision; }

double GpuLearner::loss_scale() const {
  return impl_->precision == Precision::float16 ? impl_->read_scaler().scale : 1.0;
}

void GpuLearner::set_loss_scale(double scale, int growth_interval) {
  Impl& m = *impl_;
  MAMBARL_CHECK(m.precision == Precision::float16,
                "GpuLearner::set_loss_scale: only a float16 learner scales its loss (this one is "
                    << precision_name(m.precision) << ")");
  int exp = 0;
  MAMBARL_CHECK(
      std::isfinite(scale) && scale >= cuda::kLossScaleMin && std::frexp(scale, &exp) == 0.5 && scale <= 1e38,
      "GpuLearner::set_loss_scale: " << scale << " is not a finite power of two >= 1");
  MAMBARL_CHECK(growth_interval >= 1,
                "GpuLearner::set_loss_scale: growth_interval must be >= 1, got " << growth_interval);
  cuda::LossScale v = m.read_scaler();
  v.scale = static_cast<float>(scale);
  v.good_steps = 0;
  v.growth_interval = growth_interval;
  m.write_scaler(v);
}
const ActorCritic<float>& GpuLearner::model() const { return *impl_->model; }
std::shared_ptr<const ActorCritic<float>> GpuLearner::shared_model() const { return impl_->model; }
const PolicyConfig& GpuLearner::policy_config() const { return impl_->policy; }
std::vector<float> GpuLearner::params() const { return impl_->download(impl_->params); }
void GpuLearner::set_params(const float* w, size_t n) { impl_->upload(impl_->params, w, n, "weights"); }
std::vector<float> GpuLearner::grads() const { return impl_->download(impl_->grads); }
std::vector<float> GpuLearner::exp_avg() const { return impl_->download(impl_->exp_avg); }
std::vector<float> GpuLearner::exp_avg_sq() const { return impl_->download(impl_->exp_avg_sq); }

long long GpuLearner::step_count() const {
  Impl& m = *impl_;
  long long step = 0;
  MAMBARL_CUDA_CHECK(
      cudaMemcpyAsync(&step, &m.scalars.data()->step, sizeof(step), cudaMemcpyDeviceToHost, m.stream.get()));
  m.sync();
  return step;
}

GpuMixer& GpuLearner::mixer(int l) {
  MAMBARL_CHECK(l >= 0 && l < impl_->L,
                "GpuLearner::mixer: layer " << l << " not in [0, " << impl_->L << ")");
  return *impl_->mixers[static_cast<size_t>(l)];
}

// A float16 learner's loss scale and good-step count travel in the
// checkpoint's metadata, so a resumed run scales as the original would have.
constexpr const char* kLossScaleKey = "f16_loss_scale";
constexpr const char* kGoodStepsKey = "f16_loss_scale_good_steps";

void GpuLearner::save(const std::string& path, const std::map<std::string, std::string>& metadata,
                      const std::vector<TensorRecord>& extra) const {
  const Impl& m = *impl_;
  std::map<std::string, std::string> meta = metadata;
  if (m.precision == Precision::float16) {
    const cuda::LossScale v = m.read_scaler();
    std::ostringstream scale;
    scale.precision(9);  // 9 significant digits round-trip any float
    scale << v.scale;
    meta[kLossScaleKey] = scale.str();
    meta[kGoodStepsKey] = std::to_string(v.good_steps);
  }
  write_checkpoint(path, m.policy, m.model->layout(), params().data(), exp_avg().data(), exp_avg_sq().data(),
                   step_count(), meta, extra);
}

SafetensorsFile GpuLearner::load(const std::string& path) {
  Impl& m = *impl_;
  LearnerState s;
  SafetensorsFile f = read_checkpoint(path, m.policy, m.model->layout(), s);
  m.upload(m.params, s.params.data(), s.params.size(), "checkpoint params");
  m.upload(m.exp_avg, s.exp_avg.data(), s.exp_avg.size(), "checkpoint exp_avg");
  m.upload(m.exp_avg_sq, s.exp_avg_sq.data(), s.exp_avg_sq.size(), "checkpoint exp_avg_sq");
  m.set_step(s.step);
  const auto scale = f.metadata.find(kLossScaleKey), good = f.metadata.find(kGoodStepsKey);
  if (m.precision == Precision::float16 && scale != f.metadata.end() && good != f.metadata.end()) {
    std::istringstream s_in(scale->second), g_in(good->second);
    double s_val = 0;
    int g_val = -1;
    const bool ok = (s_in >> s_val) && (g_in >> g_val) && g_val >= 0;
    MAMBARL_CHECK(ok,
                  path << ": bad loss-scale metadata ('" << scale->second << "', '" << good->second << "')");
    set_loss_scale(s_val, m.read_scaler().growth_interval);  // checks S is a power of two >= 1
    cuda::LossScale v = m.read_scaler();
    v.good_steps = g_val;
    m.write_scaler(v);
  }
  return f;
}

std::vector<double> GpuLearner::time_updates_ms(int reps) {
  Impl& m = *impl_;
  MAMBARL_CHECK(m.warmed_up, "GpuLearner::time_updates_ms: run train_step first (it stages the chunk)");
  return cuda::time_repetitions_ms(m.stream.get(), reps, 1, [&m] { m.run(); });
}

}  // namespace mambarl
