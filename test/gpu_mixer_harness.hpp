// One parity check for every GpuMixer (policy/gpu_mixer.hpp): the GPU
// training engine of a layer against its CPU twin (Mixer<float>) on one chunk
// with episode starts inside it and a random initial state, then captured
// as a CUDA graph and replayed against the eager launches bit for bit.
//
// What is compared: Y, dU and every parameter gradient of the layer
// (normwise relative error, plus an elementwise check with an absolute floor
// so that near-zero entries do not dominate; NaN never passes).
#pragma once

#include <cuda_runtime.h>

#include <algorithm>
#include <cstring>
#include <functional>
#include <initializer_list>
#include <memory>
#include <string>
#include <vector>

#include "kernels/base/rng.hpp"
#include "kernels/cuda_check.cuh"
#include "kernels/cuda_graph.cuh"
#include "kernels/device_buffer.cuh"
#include "policy/gpu_mixer.hpp"
#include "policy/policy_config.hpp"
#include "test/test_util.hpp"

namespace mambarl::test {

// The f32 bound of plugin/DESIGN.md "Numerics and tolerances": the two paths differ only in
// summation order (cuBLAS vs Eigen GEMMs, parallel vs serial sums), i.e.
// rounding near 1e-6 relative, amplified a little by the recurrence.
constexpr double kMixerRelTol = 1e-4, kMixerElemRtol = 1e-3, kMixerElemAtol = 1e-5;

struct GpuMixerCase {
  const char* name;
  const char* policy_yaml;  // a `policy:` map, e.g. "{type: mamba1, d_model: 32, d_state: 16}"
  int T, B;
  double p_start;           // chance of an episode start at each (t>0, b); t=0 is drawn too
};

using GpuMixerMaker = std::function<std::unique_ptr<GpuMixer>(const Mixer<float>&, const ParamLayout&, int)>;

// A GpuMixerMaker of GpuT, the GPU engine of the CPU mixer CpuT, with extra
// constructor arguments (e.g. a scan's segment length).
template <class GpuT, class CpuT, class... Args>
GpuMixerMaker gpu_mixer_maker(Args... args) {
  return [=](const Mixer<float>& mixer, const ParamLayout& layout, int layer) -> std::unique_ptr<GpuMixer> {
    const auto* cpu = dynamic_cast<const CpuT*>(&mixer);
    BOOST_REQUIRE_MESSAGE(cpu != nullptr, "layer " << layer << " is '" << mixer.type() << "', not the engine's type");
    return std::make_unique<GpuT>(*cpu, layout, layer, args...);
  };
}

namespace detail {

inline Eigen::Map<const Vec<float>> as_vec(const float* p, size_t n) {
  return Eigen::Map<const Vec<float>>(p, static_cast<Eigen::Index>(n));
}

}  // namespace detail

// One case's model and inputs on the host: parameters from the model's own
// init, then perturbed so that no tensor is a constant (D = 1, biases = 1
// would hide index errors); U, dY, episode starts and a random initial state.
struct GpuMixerProblem {
  GpuMixerProblem(const GpuMixerCase& c, uint64_t seed)
      : cfg(PolicyConfig::from_yaml(ConfigNode(YAML::Load(c.policy_yaml), "test.yaml", "policy"))),
        model(make_actor_critic<float>(cfg, 3, HeadSpec{true, 2})),
        T(c.T),
        B(c.B),
        D(cfg.d_model),
        rows(static_cast<size_t>(c.T) * c.B),
        S(model->mixer(0).state_size()),
        params(model->layout().size(), 0.f),
        U(static_cast<Eigen::Index>(rows), D),
        dY(static_cast<Eigen::Index>(rows), D),
        starts(rows),
        state0(static_cast<size_t>(c.B) * S) {
    model->init_params(params.data(), seed);
    Rng rng(seed, 1);
    for (auto& p : params) p += 0.05f * static_cast<float>(rng.normal());
    for (Eigen::Index i = 0; i < U.size(); ++i) U.data()[i] = static_cast<float>(rng.normal());
    for (Eigen::Index i = 0; i < dY.size(); ++i) dY.data()[i] = static_cast<float>(rng.normal());
    for (size_t i = 0; i < rows; ++i) starts[i] = rng.uniform() < c.p_start ? 1 : 0;
    // The state a mixer carries is bounded in use; a random one of unit scale
    // exercises every component (conv window, SSM state, angles, k/v_prev).
    for (auto& v : state0) v = static_cast<float>(0.5 * rng.normal());
  }
  const ParamLayout& layout() const { return model->layout(); }
  const Mixer<float>& mixer() const { return model->mixer(0); }

  PolicyConfig cfg;
  std::unique_ptr<ActorCritic<float>> model;
  int T, B, D;
  size_t rows, S;
  AlignedVec<float> params;
  Mat<float> U, dY;
  std::vector<uint8_t> starts;
  std::vector<float> state0;
};

// What one forward + backward of a GPU mixer returns to the host.
struct GpuMixerOutputs {
  std::vector<float> y, du, grads;
};

// A problem's inputs on the device, a stream and a cuBLAS handle; runs GPU
// mixers on them eagerly or as a replayed CUDA graph.
class GpuMixerRunner {
 public:
  explicit GpuMixerRunner(const GpuMixerProblem& p)
      : p_(p),
        cublas_ws_(32u << 20),
        params_(to_device(p.params.data(), p.params.size())),
        U_(to_device(p.U.data(), p.rows * p.D)),
        dY_(to_device(p.dY.data(), p.rows * p.D)),
        starts_(to_device(p.starts.data(), p.rows)),
        state0_(to_device(p.state0.data(), p.state0.size())),
        Y_(p.rows * p.D),
        dU_(p.rows * p.D),
        grads_(p.params.size()) {
    MAMBARL_CUDA_CHECK(cudaStreamCreateWithFlags(&stream_, cudaStreamNonBlocking));
    MAMBARL_CUBLAS_CHECK(cublasCreate(&cublas_));
    MAMBARL_CUBLAS_CHECK(cublasSetStream(cublas_, stream_));
    MAMBARL_CUBLAS_CHECK(cublasSetWorkspace(cublas_, cublas_ws_.data(), cublas_ws_.bytes()));
  }
  ~GpuMixerRunner() {
    (void)cublasDestroy(cublas_);
    (void)cudaStreamDestroy(stream_);
  }
  GpuMixerRunner(const GpuMixerRunner&) = delete;
  GpuMixerRunner& operator=(const GpuMixerRunner&) = delete;

  // prepare(), then forward + backward launched eagerly.
  GpuMixerOutputs eager(GpuMixer& gpu) {
    gpu.prepare(p_.T, p_.B);
    poison();
    run(gpu, stream_);
    return outputs();
  }

  // The same work captured as a CUDA graph and replayed twice (replays must
  // not accumulate); call after eager() on the same mixer.
  GpuMixerOutputs graph(GpuMixer& gpu) {
    std::vector<GraphBinding> bindings = {GraphBinding::buffer("params", params_), GraphBinding::buffer("U", U_),
                                          GraphBinding::buffer("dY", dY_), GraphBinding::buffer("grads", grads_)};
    gpu.bindings(bindings);
    CudaGraph graph("mixer fwd+bwd");
    graph.capture(stream_, std::move(bindings), [&](cudaStream_t s) { run(gpu, s); });
    poison();
    for (int rep = 0; rep < 2; ++rep) graph.launch(stream_);
    return outputs();
  }

 private:
  void run(GpuMixer& gpu, cudaStream_t s) {
    const GpuExec exec{s, cublas_};
    MAMBARL_CUDA_CHECK(cudaMemsetAsync(grads_.data(), 0, grads_.bytes(), s));
    gpu.forward(params_.data(), U_.data(), starts_.data(), state0_.data(), p_.S, Y_.data(), exec);
    gpu.backward(params_.data(), dY_.data(), grads_.data(), dU_.data(), exec);
  }
  // Every output element must be written: NaN bits first.
  void poison() {
    MAMBARL_CUDA_CHECK(cudaMemset(Y_.data(), 0xff, Y_.bytes()));
    MAMBARL_CUDA_CHECK(cudaMemset(dU_.data(), 0xff, dU_.bytes()));
  }
  GpuMixerOutputs outputs() {
    MAMBARL_CUDA_CHECK(cudaStreamSynchronize(stream_));
    return {copy_to_host(Y_), copy_to_host(dU_), copy_to_host(grads_)};
  }

  const GpuMixerProblem& p_;
  cudaStream_t stream_ = nullptr;
  cublasHandle_t cublas_ = nullptr;
  DeviceBuffer<uint8_t> cublas_ws_;
  DeviceBuffer<float> params_, U_, dY_;
  DeviceBuffer<uint8_t> starts_;
  DeviceBuffer<float> state0_, Y_, dU_, grads_;
};

// Runs the whole check for layer 0 of the case's model.
inline void check_gpu_mixer_parity(const GpuMixerCase& c, const GpuMixerMaker& make,
                                   uint64_t seed = 7) {
  BOOST_TEST_MESSAGE("gpu mixer parity: " << c.name);
  const GpuMixerProblem p(c, seed);
  const ParamLayout& layout = p.layout();
  const Mixer<float>& mixer = p.mixer();
  const size_t rows = p.rows;
  const int D = p.D;

  // CPU reference.
  AlignedVec<float> params = p.params, grads(layout.size(), 0.f);  // ParamView wants mutable memory
  const ParamView<float> P(layout, params.data()), G(layout, grads.data());
  auto cache = mixer.make_cache();
  std::vector<float> state_cpu = p.state0;
  Mat<float> Y, dU;
  mixer.forward(P, p.U, p.starts.data(), p.T, p.B, state_cpu.data(), p.S, Y, *cache);
  mixer.backward(P, p.dY, *cache, G, dU);

  // GPU, eager.
  auto gpu = make(mixer, layout, 0);
  BOOST_REQUIRE_EQUAL(gpu->type(), mixer.type());
  BOOST_REQUIRE_EQUAL(gpu->state_size(), p.S);
  GpuMixerRunner runner(p);
  const GpuMixerOutputs out = runner.eager(*gpu);

  MAMBARL_CHECK_CLOSE_REL(std::string(c.name) + " Y", detail::as_vec(out.y.data(), rows * D),
                          detail::as_vec(Y.data(), rows * D), kMixerRelTol, kMixerElemRtol, kMixerElemAtol);
  MAMBARL_CHECK_CLOSE_REL(std::string(c.name) + " dU", detail::as_vec(out.du.data(), rows * D),
                          detail::as_vec(dU.data(), rows * D), kMixerRelTol, kMixerElemRtol, kMixerElemAtol);
  const std::string prefix = "layers.0.mixer.";
  int compared = 0;
  for (const ParamInfo& pi : layout.params()) {
    if (pi.name.compare(0, prefix.size(), prefix) != 0) continue;
    ++compared;
    const auto ref = detail::as_vec(grads.data() + pi.offset, pi.numel);
    BOOST_CHECK_MESSAGE(ref.norm() > 0, c.name << " " << pi.name << ": the CPU gradient is zero (vacuous)");
    // Elementwise floor relative to the tensor's scale: a gradient entry is
    // a sum over T*B tokens, so its rounding scales with the tensor's size.
    const double atol = kMixerElemAtol * std::max(1.0, static_cast<double>(ref.cwiseAbs().maxCoeff()));
    MAMBARL_CHECK_CLOSE_REL(std::string(c.name) + " grad " + pi.name,
                            detail::as_vec(out.grads.data() + pi.offset, pi.numel), ref, kMixerRelTol,
                            kMixerElemRtol, atol);
  }
  BOOST_CHECK_MESSAGE(compared > 0, c.name << ": no parameter named " << prefix << "*");
  // Nothing outside the layer's own parameters was touched.
  for (const ParamInfo& pi : layout.params()) {
    if (pi.name.compare(0, prefix.size(), prefix) == 0) continue;
    for (size_t i = 0; i < pi.numel; ++i)
      if (out.grads[pi.offset + i] != 0.f) {
        BOOST_ERROR(c.name << ": backward wrote into " << pi.name);
        break;
      }
  }

  // Graph replay == eager, bit for bit.
  const GpuMixerOutputs replayed = runner.graph(*gpu);
  BOOST_CHECK_MESSAGE(replayed.y == out.y, c.name << ": graph Y differs from eager");
  BOOST_CHECK_MESSAGE(replayed.du == out.du, c.name << ": graph dU differs from eager");
  BOOST_CHECK_MESSAGE(replayed.grads == out.grads, c.name << ": graph grads differ from eager");
}

// Two GPU engines of the same layer that must do the same arithmetic (e.g.
// a recompute path and the stored path it replaces): Y, dU and the gradients
// equal bit for bit on the case's chunk.
inline void check_gpu_mixers_bitwise_equal(const GpuMixerCase& c, const GpuMixerMaker& make_a,
                                           const GpuMixerMaker& make_b, uint64_t seed = 7) {
  BOOST_TEST_MESSAGE("gpu mixers bitwise: " << c.name);
  const GpuMixerProblem p(c, seed);
  GpuMixerRunner runner(p);
  auto a = make_a(p.mixer(), p.layout(), 0);
  auto b = make_b(p.mixer(), p.layout(), 0);
  const GpuMixerOutputs out_a = runner.eager(*a), out_b = runner.eager(*b);
  BOOST_CHECK_MESSAGE(out_a.y == out_b.y, c.name << ": Y differs");
  BOOST_CHECK_MESSAGE(out_a.du == out_b.du, c.name << ": dU differs");
  BOOST_CHECK_MESSAGE(out_a.grads == out_b.grads, c.name << ": gradients differ");
}

// A scan engine over segment lengths (its constructor's segment_len): for
// every case and each length in lens (0: the engine's default), parity with
// the CPU twin and, bit for bit, the stored path (segment length 1: every
// state kept), since the backward rebuilds a segment's states with the
// forward's own step. Resets then fall inside segments and on their edges.
inline void check_gpu_scan_segments(const std::vector<GpuMixerCase>& cases,
                                    const std::function<GpuMixerMaker(int)>& with_segment,
                                    std::initializer_list<int> lens) {
  for (const GpuMixerCase& c : cases)
    for (const int len : lens) {
      BOOST_TEST_CONTEXT("segment_len " << len) {
        check_gpu_mixer_parity(c, with_segment(len));
        check_gpu_mixers_bitwise_equal(c, with_segment(1), with_segment(len));
      }
    }
}

}  // namespace mambarl::test
