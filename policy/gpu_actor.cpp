#include "policy/gpu_actor.hpp"

#include <cuda_bf16.h>
#include <cuda_runtime.h>

#include <algorithm>
#include <cstring>
#include <string>

#include "kernels/cuda_check.cuh"
#include "kernels/cuda_graph.cuh"
#include "kernels/cuda_handles.cuh"
#include "kernels/device_buffer.cuh"
#include "kernels/event_timing.cuh"
#include "kernels/gru.cuh"
#include "kernels/heads_sample.cuh"
#include "kernels/linear.cuh"
#include "kernels/mamba1_step.cuh"
#include "kernels/mamba3_step.cuh"
#include "kernels/mlp.cuh"
#include "kernels/state_reset.cuh"
#include "policy/gpu_dims.hpp"
#include "policy/gru.hpp"
#include "policy/mamba1.hpp"
#include "policy/mamba3.hpp"
#include "policy/mlp_mixer.hpp"
#include "policy/policy_config.hpp"

namespace mambarl {

namespace {

size_t align16(size_t n) { return (n + 15) / 16 * 16; }

using bf16 = __nv_bfloat16;

enum class MixerKind { mamba1, mamba3, gru, mlp };

// One layer: what its launches need, with pointers into the parameter and
// derived buffers (all fixed for the actor's lifetime). The *_h pointers are
// the bf16 shadows, set only for an actor with bf16 weights. Every mixer
// starts with an input GEMM of the normed h (in_proj; the GRU's W_ih, the
// MLP's fc1), all but the GRU end with out_proj (the MLP's fc2).
struct LayerPlan {
  MixerKind kind = MixerKind::mamba1;
  cuda::Mamba1Dims m1;
  cuda::Mamba1Weights<float> w1;
  cuda::Mamba1Weights<bf16> w1h;
  cuda::Mamba3Dims m3;
  cuda::Mamba3Weights w3;
  int E = 0, in_rows = 0;  // E: out_proj's input width, 0 for the GRU (its output is h')
  size_t state_off = 0;
  const float* in_w = nullptr;     // (in_rows, D) raw in_proj
  const float* in_b = nullptr;     // (in_rows) gru b_ih, mlp fc1 bias
  const float* out_b = nullptr;    // (D) mlp fc2 bias
  const float* hh_w = nullptr;     // (3D, D) gru W_hh
  const float* hh_b = nullptr;     // (3D) gru b_hh
  const float* norm_w = nullptr;   // (D) the layer's pre-norm weight
  float* in_w_folded = nullptr;    // (in_rows, D) in_w diag(norm_w), derived
  const float* a_log = nullptr;    // (E, N) mamba1
  float* a = nullptr;              // (E, N) mamba1: -exp(A_log), derived
  const float* out_w = nullptr;    // (D, E)
  bf16* in_w_h = nullptr;          // (in_rows, D) bf16 of in_w_folded
  bf16* out_w_h = nullptr;         // (D, E)
  bf16* x_proj_h = nullptr;        // (R+2N, E) mamba1
  bf16* dt_w_h = nullptr;          // (E, R) mamba1
  bf16* hh_w_h = nullptr;          // (3D, D) gru

  bool has_out_proj() const { return E > 0; }
  // Per-env floats of the mixer's own step scratch: mamba1's act rows, the
  // GRU's W_hh h_prev (3D) and h_prev (D).
  size_t scratch_floats(int D) const {
    if (kind == MixerKind::mamba1) return static_cast<size_t>(m1.act_floats());
    if (kind == MixerKind::gru) return 4 * static_cast<size_t>(D);
    return 0;
  }
};

}  // namespace

struct GpuActor::Impl {
  std::shared_ptr<const ActorCritic<float>> model;
  const int B;
  const bool bf16_weights;
  int obs_dim = 0, D = 0, L = 0, A = 0, act_width = 0;
  size_t S = 0;  // state floats per env
  long long version = -1;
  Launch mode = Launch::graph;
  std::vector<Rng> initial_rngs;  // (B)

  CudaStream stream;
  DeviceBuffer<float> params, derived, state;
  DeviceBuffer<bf16> derived_h;  // bf16 shadows, bf16 actors only
  DeviceBuffer<Rng> rngs;
  DeviceBuffer<float> h, proj, gated;      // (B, D), (B, max in_rows), (B, max E)
  DeviceBuffer<float> scratch;             // (B, max LayerPlan::scratch_floats) a mixer's own
  size_t obs_bytes = 0;
  // [obs f32 (B, obs_dim)][episode_start u8 (B)][a peek's needed u8 (B)]: a
  // peek leaves the last act()'s starts in place (time_steps_us replays them).
  PinnedBuffer<uint8_t> in_host;
  DeviceBuffer<uint8_t> in_dev;
  PinnedBuffer<float> out_host;            // [actions (B, act_width)][logp (B)][values (B)]
  DeviceBuffer<float> out_dev;
  DeviceBuffer<uint8_t> mask;  // (B) reset()'s
  std::vector<LayerPlan> layers;
  cuda::HeadDims head_dims;
  cuda::HeadWeights head_w;
  const float *obs_w = nullptr, *obs_b = nullptr;
  const float* start_embed = nullptr;  // (D) policy.start_embedding; null without
  // Declared last: destroyed before the buffers they point into.
  CudaGraph step_graph{"actor step"}, peek_graph{"actor peek"};
  CudaGraph step_graph_pdl{"actor step (PDL)"}, peek_graph_pdl{"actor peek (PDL)"};

  Impl(std::shared_ptr<const ActorCritic<float>> m, const PolicyConfig& cfg, int num_envs,
       uint64_t seed, bool bf16);
  ~Impl() { (void)cudaStreamSynchronize(stream.get()); }

  const float* param(const std::string& name, std::vector<int64_t> shape) const;
  void plan_layers(const PolicyConfig& cfg);
  void derive_weights();
  void load_weights(const float* w, size_t n, cudaMemcpyKind kind, long long v);
  std::vector<GraphBinding> bindings() const;
  // Where one step's kernels read and write (device pointers): the actor's
  // own staging buffers (own_io), or a caller's for enqueue_*, used in place.
  struct StepIo {
    const float* obs = nullptr;  // (B, obs_dim)
    cuda::StepFlags flags;       // a step: its episode starts; a peek: the needed envs
    float* actions = nullptr;    // (B, act_width), a step only
    float* logp = nullptr;       // (B), a step only
    float* values = nullptr;     // (B)
  };
  StepIo own_io(bool peek) const;
  void record_kernels(cudaStream_t s, bool peek, const StepIo& io, bool pdl);
  void record(cudaStream_t s, bool peek, bool pdl);
  void run(bool peek);
  void sync() const { MAMBARL_CUDA_CHECK(cudaStreamSynchronize(stream.get())); }
  float* out_actions() const { return out_dev.data(); }
  float* out_logp() const { return out_dev.data() + static_cast<size_t>(B) * act_width; }
  float* out_values() const { return out_logp() + B; }
};

const float* GpuActor::Impl::param(const std::string& name, std::vector<int64_t> shape) const {
  return params.data() + model->layout().offset_of(name, shape, "GpuActor");
}

void GpuActor::Impl::plan_layers(const PolicyConfig& cfg) {
  std::vector<size_t> folded_off, a_off, h_off;
  size_t derived_floats = 0, derived_halves = 0;
  for (int l = 0; l < L; ++l) {
    const Mixer<float>& mixer = model->mixer(l);
    MAMBARL_CHECK(mixer.type() == cfg.type, "GpuActor: policy config says '" << cfg.type
                                                << "' but layer " << l << " of the model is '"
                                                << mixer.type() << "'");
    const std::string pre = "layers." + std::to_string(l) + ".mixer.";
    LayerPlan p;
    p.state_off = model->layer_state_offset(l);
    p.norm_w = param("layers." + std::to_string(l) + ".norm.weight", {D});
    if (const auto* m1 = dynamic_cast<const Mamba1Mixer<float>*>(&mixer)) {
      const Mamba1Config& c = m1->config();
      auto& d = p.m1;
      d = mamba1_dims(c);
      p.E = d.E;
      p.in_rows = 2 * d.E;
      p.in_w = param(pre + "in_proj.weight", {2 * d.E, D});
      p.w1.conv_w = param(pre + "conv1d.weight", {d.E, d.K});
      p.w1.conv_b = param(pre + "conv1d.bias", {d.E});
      p.w1.x_proj = param(pre + "x_proj.weight", {d.R + 2 * d.N, d.E});
      p.w1.dt_w = param(pre + "dt_proj.weight", {d.E, d.R});
      p.w1.dt_b = param(pre + "dt_proj.bias", {d.E});
      p.a_log = param(pre + "A_log", {d.E, d.N});
      p.w1.d_skip = param(pre + "D", {d.E});
      p.w1h = {p.w1.conv_w, p.w1.conv_b, nullptr, nullptr, p.w1.dt_b, nullptr, p.w1.d_skip};
      p.out_w = param(pre + "out_proj.weight", {D, d.E});
      cuda::mamba1_step_configure(d);
    } else if (const auto* m3 = dynamic_cast<const Mamba3Mixer<float>*>(&mixer)) {
      const Mamba3Config& c = m3->config();
      auto& d = p.m3;
      d = mamba3_dims(c);
      p.kind = MixerKind::mamba3;
      p.E = d.E;
      p.in_rows = d.in_rows();
      p.in_w = param(pre + "in_proj.weight", {p.in_rows, D});
      p.w3.dt_bias = param(pre + "dt_bias", {d.H});
      p.w3.b_bias = param(pre + "B_bias", {d.H, d.N});
      p.w3.c_bias = param(pre + "C_bias", {d.H, d.N});
      p.w3.b_norm = param(pre + "B_norm.weight", {d.N});
      p.w3.c_norm = param(pre + "C_norm.weight", {d.N});
      p.w3.d_skip = param(pre + "D", {d.H});
      p.w3.norm = c.is_outproj_norm ? param(pre + "norm.weight", {d.E}) : nullptr;
      p.out_w = param(pre + "out_proj.weight", {D, d.E});
      cuda::mamba3_step_configure(d);
    } else if (dynamic_cast<const GruMixer<float>*>(&mixer)) {
      p.kind = MixerKind::gru;
      p.in_rows = 3 * D;
      p.in_w = param(pre + "weight_ih", {3 * D, D});
      p.in_b = param(pre + "bias_ih", {3 * D});
      p.hh_w = param(pre + "weight_hh", {3 * D, D});
      p.hh_b = param(pre + "bias_hh", {3 * D});
    } else if (const auto* mlp = dynamic_cast<const MlpMixer<float>*>(&mixer)) {
      p.kind = MixerKind::mlp;
      p.E = p.in_rows = mlp->config().d_inner();
      p.in_w = param(pre + "fc1.weight", {p.E, D});
      p.in_b = param(pre + "fc1.bias", {p.E});
      p.out_w = param(pre + "fc2.weight", {D, p.E});
      p.out_b = param(pre + "fc2.bias", {D});
    } else {
      MAMBARL_FAIL("GpuActor runs mamba1, mamba3, gru and mlp policies; layer " << l << " is '"
                                                                                << mixer.type() << "'");
    }
    const bool m1 = p.kind == MixerKind::mamba1;
    folded_off.push_back(derived_floats);
    derived_floats += align16(static_cast<size_t>(p.in_rows) * D);
    a_off.push_back(derived_floats);
    if (m1) derived_floats += align16(static_cast<size_t>(p.m1.E) * p.m1.N);
    // bf16 shadows, in this order: in_proj (folded), out_proj, then for
    // mamba1 x_proj, dt_proj; for the GRU W_hh.
    h_off.push_back(derived_halves);
    derived_halves += align16(static_cast<size_t>(p.in_rows) * D) + align16(static_cast<size_t>(D) * p.E);
    if (m1)
      derived_halves += align16(static_cast<size_t>(p.m1.R + 2 * p.m1.N) * p.E) +
                        align16(static_cast<size_t>(p.E) * p.m1.R);
    if (p.kind == MixerKind::gru) derived_halves += align16(static_cast<size_t>(3 * D) * D);
    layers.push_back(p);
  }
  derived = DeviceBuffer<float>(std::max<size_t>(derived_floats, 1));
  if (bf16_weights) derived_h = DeviceBuffer<bf16>(std::max<size_t>(derived_halves, 1));
  for (size_t i = 0; i < layers.size(); ++i) {
    LayerPlan& p = layers[i];
    const bool m1 = p.kind == MixerKind::mamba1;
    p.in_w_folded = derived.data() + folded_off[i];
    if (m1) {
      p.a = derived.data() + a_off[i];
      p.w1.a = p.w1h.a = p.a;
    }
    if (!bf16_weights) continue;
    bf16* q = derived_h.data() + h_off[i];
    p.in_w_h = q;
    q += align16(static_cast<size_t>(p.in_rows) * D);
    if (p.has_out_proj()) p.out_w_h = q;
    q += align16(static_cast<size_t>(D) * p.E);
    if (p.kind == MixerKind::gru) p.hh_w_h = q;
    if (!m1) continue;
    p.x_proj_h = q;
    q += align16(static_cast<size_t>(p.m1.R + 2 * p.m1.N) * p.E);
    p.dt_w_h = q;
    p.w1h.x_proj = p.x_proj_h;
    p.w1h.dt_w = p.dt_w_h;
  }
}

GpuActor::Impl::Impl(std::shared_ptr<const ActorCritic<float>> m, const PolicyConfig& cfg,
                     int num_envs, uint64_t seed, bool bf16)
    : model(std::move(m)), B(num_envs), bf16_weights(bf16) {
  MAMBARL_CHECK(model, "GpuActor: model is null");
  MAMBARL_CHECK(num_envs >= 1, "GpuActor: num_envs must be >= 1, got " << num_envs);
  const ActorCriticSpec& spec = model->spec();
  obs_dim = spec.obs_dim;
  D = spec.d_model;
  L = spec.n_layers;
  A = spec.head.action_dim;
  act_width = spec.head.act_width();
  S = model->state_size();
  MAMBARL_CHECK(cfg.d_model == D && cfg.n_layers == L,
                "GpuActor: policy config (d_model " << cfg.d_model << ", n_layers " << cfg.n_layers
                                                   << ") does not match the model (d_model " << D
                                                   << ", n_layers " << L << ")");
  int devices = 0;
  MAMBARL_CUDA_CHECK(cudaGetDeviceCount(&devices));
  MAMBARL_CHECK(devices > 0, "GpuActor: no CUDA device");

  const size_t Bz = static_cast<size_t>(B);
  params = DeviceBuffer<float>(model->layout().size());
  MAMBARL_CUDA_CHECK(cudaMemset(params.data(), 0, params.bytes()));
  plan_layers(cfg);
  int max_rows = 1, max_e = 1;
  size_t max_scratch = 1;
  for (const auto& p : layers) {
    max_rows = std::max(max_rows, p.in_rows);
    max_e = std::max(max_e, p.E);
    max_scratch = std::max(max_scratch, p.scratch_floats(D));
  }
  state = DeviceBuffer<float>(std::max<size_t>(Bz * S, 1));
  MAMBARL_CUDA_CHECK(cudaMemset(state.data(), 0, state.bytes()));
  h = DeviceBuffer<float>(Bz * D);
  proj = DeviceBuffer<float>(Bz * max_rows);
  gated = DeviceBuffer<float>(Bz * max_e);
  scratch = DeviceBuffer<float>(Bz * max_scratch);
  obs_bytes = Bz * obs_dim * sizeof(float);
  in_host = PinnedBuffer<uint8_t>(obs_bytes + 2 * Bz);
  std::memset(in_host.data(), 0, in_host.bytes());
  in_dev = DeviceBuffer<uint8_t>(in_host.size());
  out_host = PinnedBuffer<float>(Bz * (act_width + 2));
  out_dev = DeviceBuffer<float>(Bz * (act_width + 2));
  mask = DeviceBuffer<uint8_t>(Bz);

  obs_w = param("obs_proj.weight", {D, obs_dim});
  obs_b = param("obs_proj.bias", {D});
  if (spec.start_embedding) start_embed = param("start_embed", {D});
  head_dims = cuda::HeadDims{D, A, spec.head.discrete};
  head_w.norm_f = param("norm_f.weight", {D});
  head_w.pi_w = param("pi.weight", {A, D});
  head_w.pi_b = param("pi.bias", {A});
  head_w.log_std = spec.head.discrete ? nullptr : param("pi.log_std", {A});
  head_w.v_w = param("v.weight", {1, D});
  head_w.v_b = param("v.bias", {1});
  cuda::heads_sample_configure(head_dims);
  derive_weights();

  for (int b = 0; b < B; ++b) initial_rngs.emplace_back(seed, 0xAC7000 + static_cast<uint64_t>(b));
  rngs = DeviceBuffer<Rng>(Bz);
  // Warm-up: one eager step outside capture, so lazy module loading never
  // happens inside the graph. With zero
  // weights and a zero state the step leaves the state at zero; the Rngs it
  // advanced are re-seeded below.
  MAMBARL_CUDA_CHECK(cudaMemcpyAsync(rngs.data(), initial_rngs.data(), rngs.bytes(),
                                     cudaMemcpyHostToDevice, stream.get()));
  record(stream.get(), false, false);
  MAMBARL_CUDA_CHECK(cudaMemsetAsync(state.data(), 0, state.bytes(), stream.get()));
  MAMBARL_CUDA_CHECK(cudaMemcpyAsync(rngs.data(), initial_rngs.data(), rngs.bytes(),
                                     cudaMemcpyHostToDevice, stream.get()));
  sync();
  step_graph.capture(stream.get(), bindings(), [this](cudaStream_t s) { record(s, false, false); });
}

void GpuActor::Impl::derive_weights() {
  for (const auto& p : layers) {
    const bool m1 = p.kind == MixerKind::mamba1;
    cuda::fold_norm(p.in_rows, D, p.in_w, p.norm_w, p.in_w_folded, stream.get());
    if (m1) cuda::mamba1_derive_a(p.m1.E * p.m1.N, p.a_log, p.a, stream.get());
    if (!bf16_weights) continue;
    const auto shadow = [&](size_t n, const float* w, bf16* out) { cuda::to_bf16(n, w, out, stream.get()); };
    shadow(static_cast<size_t>(p.in_rows) * D, p.in_w_folded, p.in_w_h);
    if (p.has_out_proj()) shadow(static_cast<size_t>(D) * p.E, p.out_w, p.out_w_h);
    if (p.kind == MixerKind::gru) shadow(static_cast<size_t>(3 * D) * D, p.hh_w, p.hh_w_h);
    if (!m1) continue;
    shadow(static_cast<size_t>(p.m1.R + 2 * p.m1.N) * p.E, p.w1.x_proj, p.x_proj_h);
    shadow(static_cast<size_t>(p.E) * p.m1.R, p.w1.dt_w, p.dt_w_h);
  }
  sync();
}

void GpuActor::Impl::load_weights(const float* w, size_t n, cudaMemcpyKind kind, long long v) {
  MAMBARL_CHECK(n == params.size(), "GpuActor: weights have " << n << " floats, model has " << params.size());
  MAMBARL_CUDA_CHECK(cudaMemcpyAsync(params.data(), w, params.bytes(), kind, stream.get()));
  derive_weights();
  version = v;
}

std::vector<GraphBinding> GpuActor::Impl::bindings() const {
  return {
      GraphBinding::value("batch", B),
      GraphBinding::buffer("params", params),
      GraphBinding::buffer("derived weights", derived),
      GraphBinding::buffer("bf16 weights", derived_h),
      GraphBinding::buffer("state", state),
      GraphBinding::buffer("rngs", rngs),
      GraphBinding::buffer("residual stream", h),
      GraphBinding::buffer("in_proj output", proj),
      GraphBinding::buffer("out_proj input", gated),
      GraphBinding::buffer("mixer scratch", scratch),
      GraphBinding::buffer("pinned input", in_host),
      GraphBinding::buffer("device input", in_dev),
      GraphBinding::buffer("pinned output", out_host),
      GraphBinding::buffer("device output", out_dev),
  };
}

// The own-stream step's IO: in_dev holds [obs][episode starts][a peek's
// needed envs], out_dev [actions][logp][values].
GpuActor::Impl::StepIo GpuActor::Impl::own_io(bool peek) const {
  const uint8_t* flags = in_dev.data() + obs_bytes + (peek ? static_cast<size_t>(B) : 0);
  return {reinterpret_cast<const float*>(in_dev.data()),
          peek ? cuda::StepFlags{nullptr, flags} : cuda::StepFlags{flags, nullptr}, out_actions(), out_logp(),
          out_values()};
}

// The step's kernels on s, from io's inputs to io's outputs; the one launch
// sequence behind both the actor's own step (record) and the caller-stream
// enqueue_* calls. A step resets the envs whose episode starts and advances
// the state in place; a peek steps only the needed envs (io.flags.only, null:
// all), stores no state and samples nothing. pdl: every kernel but the first
// (whose predecessor is a copy, or the caller's work) is launched with
// programmatic dependent launch.
void GpuActor::Impl::record_kernels(cudaStream_t s, bool peek, const StepIo& io, bool pdl) {
  const cuda::StepFlags flags = io.flags;
  float* state_out = peek ? nullptr : state.data();
  // A peek has no starts (flags.starts is null): the final obs of an episode.
  const cuda::RowEmbedding start_rows =
      start_embed && flags.starts ? cuda::RowEmbedding{flags.starts, start_embed} : cuda::RowEmbedding{};
  cuda::linear_small(B, obs_dim, D, io.obs, obs_w, obs_b, h.data(), s, false, start_rows);
  // Y (B, out) = X W^T + beta Y from the f32 weights or their bf16 shadows.
  const auto linear = [&](int in, int out, const float* X, const float* W, const bf16* W_h, float beta,
                          float* Y) {
    if (bf16_weights)
      cuda::linear_rows(B, in, out, X, W_h, beta, Y, s, pdl);
    else
      cuda::linear_rows(B, in, out, X, W, beta, Y, s, pdl);
  };
  for (const auto& p : layers) {
    const float* st_in = state.data() + p.state_off;
    float* st_out = state_out ? state_out + p.state_off : nullptr;
    linear(D, p.in_rows, h.data(), p.in_w_folded, p.in_w_h, 0.f, proj.data());
    switch (p.kind) {
      case MixerKind::mamba3:
        cuda::mamba3_step(p.m3, p.w3, B, h.data(), proj.data(), flags, st_in, st_out, S, gated.data(), s,
                          pdl);
        break;
      case MixerKind::mamba1:
        if (bf16_weights)
          cuda::mamba1_step(p.m1, p.w1h, B, h.data(), proj.data(), flags, st_in, st_out, S, scratch.data(),
                            gated.data(), s, pdl);
        else
          cuda::mamba1_step(p.m1, p.w1, B, h.data(), proj.data(), flags, st_in, st_out, S, scratch.data(),
                            gated.data(), s, pdl);
        break;
      case MixerKind::gru: {
        // gh (B, 3D) = W_hh h_prev, h_prev (B, D) zero where an env starts;
        // the cell adds h' to the residual stream and stores it as the state.
        float* gh = scratch.data();
        float* hp = gh + static_cast<size_t>(B) * 3 * D;
        cuda::gru_prev_rows(B, D, flags, st_in, S, hp, s, pdl);
        linear(D, 3 * D, hp, p.hh_w, p.hh_w_h, 0.f, gh);
        cuda::gru_step(B, D, flags, proj.data(), gh, p.in_b, p.hh_b, hp, h.data(), st_out, S, s, pdl);
        break;
      }
      case MixerKind::mlp:
        cuda::mlp_step(B, D, p.E, flags, proj.data(), p.in_b, p.out_b, gated.data(), h.data(), s, pdl);
        break;
    }
    // h += W_out gated: the residual add is the GEMM's beta = 1.
    if (p.has_out_proj()) linear(p.E, D, gated.data(), p.out_w, p.out_w_h, 1.f, h.data());
  }
  cuda::heads_sample(head_dims, head_w, B, h.data(), rngs.data(), !peek, io.actions, io.logp, io.values, s,
                     pdl);
}

// Everything one own-stream step enqueues on s (captured once, or run
// eagerly): the H2D copy of the pinned inputs, the kernels, the D2H copy of
// the outputs (a peek: obs and needed flags in, values out).
void GpuActor::Impl::record(cudaStream_t s, bool peek, bool pdl) {
  MAMBARL_CUDA_CHECK(
      cudaMemcpyAsync(in_dev.data(), in_host.data(), in_dev.bytes(), cudaMemcpyHostToDevice, s));
  record_kernels(s, peek, own_io(peek), pdl);
  if (peek)
    MAMBARL_CUDA_CHECK(cudaMemcpyAsync(out_host.data() + (out_values() - out_dev.data()), out_values(),
                                       static_cast<size_t>(B) * sizeof(float),
                                       cudaMemcpyDeviceToHost, s));
  else
    MAMBARL_CUDA_CHECK(cudaMemcpyAsync(out_host.data(), out_dev.data(), out_dev.bytes(),
                                       cudaMemcpyDeviceToHost, s));
}

void GpuActor::Impl::run(bool peek) {
  if (mode == Launch::eager) {
    record(stream.get(), peek, false);
    return;
  }
  const bool pdl = mode == Launch::graph_pdl;
  CudaGraph& g = pdl ? (peek ? peek_graph_pdl : step_graph_pdl) : (peek ? peek_graph : step_graph);
  if (!g.captured())
    g.capture(stream.get(), bindings(), [this, peek, pdl](cudaStream_t s) { record(s, peek, pdl); });
  g.launch(stream.get());
}

// ---------------------------------------------------------------------------

GpuActor::GpuActor(std::shared_ptr<const ActorCritic<float>> model, const PolicyConfig& cfg,
                   int num_envs, uint64_t seed, bool bf16_weights)
    : impl_(std::make_unique<Impl>(std::move(model), cfg, num_envs, seed, bf16_weights)) {}

GpuActor::~GpuActor() = default;

int GpuActor::num_envs() const { return impl_->B; }
size_t GpuActor::state_size() const { return impl_->S; }
bool GpuActor::bf16_weights() const { return impl_->bf16_weights; }
long long GpuActor::weights_version() const { return impl_->version; }
void GpuActor::set_launch(Launch mode) { impl_->mode = mode; }
GpuActor::Launch GpuActor::launch() const { return impl_->mode; }

void GpuActor::set_weights(const float* w, size_t n, long long version) {
  impl_->load_weights(w, n, cudaMemcpyHostToDevice, version);
}

void GpuActor::set_weights_device(const float* w, size_t n, long long version) {
  impl_->load_weights(w, n, cudaMemcpyDeviceToDevice, version);
}

void GpuActor::reset(const uint8_t* mask) {
  Impl& m = *impl_;
  MAMBARL_CUDA_CHECK(cudaMemcpyAsync(m.mask.data(), mask, m.mask.bytes(), cudaMemcpyHostToDevice,
                                     m.stream.get()));
  cuda::zero_masked_rows(m.B, m.S, m.mask.data(), m.state.data(), m.stream.get());
  m.sync();
}

void GpuActor::act(const float* obs, const uint8_t* episode_start, float* actions, float* logp,
                   float* values) {
  act_begin(obs, episode_start);
  act_end(actions, logp, values);
}

void GpuActor::act_begin(const float* obs, const uint8_t* episode_start) {
  Impl& m = *impl_;
  std::memcpy(m.in_host.data(), obs, m.obs_bytes);
  std::memcpy(m.in_host.data() + m.obs_bytes, episode_start, static_cast<size_t>(m.B));
  m.run(false);
}

void GpuActor::act_end(float* actions, float* logp, float* values) {
  Impl& m = *impl_;
  const size_t Bz = static_cast<size_t>(m.B);
  m.sync();
  const float* out = m.out_host.data();
  std::memcpy(actions, out, Bz * m.act_width * sizeof(float));
  std::memcpy(logp, out + Bz * m.act_width, Bz * sizeof(float));
  std::memcpy(values, out + Bz * (m.act_width + 1), Bz * sizeof(float));
}

void GpuActor::peek_values(const float* obs, const uint8_t* needed, float* values) {
  Impl& m = *impl_;
  std::memcpy(m.in_host.data(), obs, m.obs_bytes);
  uint8_t* flags = m.in_host.data() + m.obs_bytes + static_cast<size_t>(m.B);
  if (needed)
    std::memcpy(flags, needed, static_cast<size_t>(m.B));
  else
    std::memset(flags, 1, static_cast<size_t>(m.B));
  m.run(true);
  m.sync();
  std::memcpy(values, m.out_host.data() + static_cast<size_t>(m.B) * (m.act_width + 1),
              static_cast<size_t>(m.B) * sizeof(float));
}

// The caller's stream only: the kernels (PDL as the current launch mode
// says) read the caller's inputs and write its outputs in place, no copies.
// Nothing here syncs, allocates or reads device memory on the host, so a
// caller may capture it.
void GpuActor::enqueue_act(cudaStream_t s, const float* obs, const uint8_t* episode_start, float* actions,
                           float* logp, float* values) {
  Impl& m = *impl_;
  m.record_kernels(s, false, {obs, {episode_start, nullptr}, actions, logp, values},
                   m.mode == Launch::graph_pdl);
}

void GpuActor::enqueue_peek_values(cudaStream_t s, const float* obs, const uint8_t* needed, float* values) {
  Impl& m = *impl_;
  m.record_kernels(s, true, {obs, {nullptr, needed}, nullptr, nullptr, values}, m.mode == Launch::graph_pdl);
}

void GpuActor::enqueue_state(cudaStream_t s, float* state) {
  const Impl& m = *impl_;
  const size_t n = static_cast<size_t>(m.B) * m.S;
  if (n)
    MAMBARL_CUDA_CHECK(
        cudaMemcpyAsync(state, m.state.data(), n * sizeof(float), cudaMemcpyDeviceToDevice, s));
}

std::vector<float> GpuActor::state() const {
  const Impl& m = *impl_;
  return copy_to_host(m.state.data(), static_cast<size_t>(m.B) * m.S, m.stream.get());
}

void GpuActor::copy_state_to(float* host) const {
  const Impl& m = *impl_;
  copy_to_host(host, m.state.data(), static_cast<size_t>(m.B) * m.S, m.stream.get());
}

void GpuActor::set_state(const float* s, size_t n) {
  Impl& m = *impl_;
  MAMBARL_CHECK(n == static_cast<size_t>(m.B) * m.S,
                "GpuActor: state has " << n << " floats, expected num_envs " << m.B
                                       << " x state_size " << m.S);
  copy_to_device(m.state.data(), s, n, m.stream.get());
}

std::vector<Rng> GpuActor::rngs() const {
  const Impl& m = *impl_;
  return copy_to_host(m.rngs, m.stream.get());
}

void GpuActor::set_rngs(const Rng* r, size_t n) {
  Impl& m = *impl_;
  MAMBARL_CHECK(n == static_cast<size_t>(m.B),
                "GpuActor: " << n << " Rngs given, the actor has " << m.B << " envs");
  copy_to_device(m.rngs.data(), r, n, m.stream.get());
}

std::vector<double> GpuActor::time_steps_us(int groups, int group) {
  Impl& m = *impl_;
  std::vector<double> us = cuda::time_repetitions_ms(m.stream.get(), groups, group, [&m] { m.run(false); });
  for (double& t : us) t *= 1e3;
  return us;
}

}  // namespace mambarl
