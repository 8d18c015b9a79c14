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

namespace detail {

inline Eigen::Map<const Vec<float>> as_vec(const float* p, size_t n) {
  return Eigen::Map<const Vec<float>>(p, static_cast<Eigen::Index>(n));
}

}  // namespace detail

// Runs the whole check for layer 0 of the case's model.
inline void check_gpu_mixer_parity(const GpuMixerCase& c, const GpuMixerMaker& make,
                                   uint64_t seed = 7) {
  BOOST_TEST_MESSAGE("gpu mixer parity: " << c.name);
  const PolicyConfig cfg =
      PolicyConfig::from_yaml(ConfigNode(YAML::Load(c.policy_yaml), "test.yaml", "policy"));
  const auto model = make_actor_critic<float>(cfg, 3, HeadSpec{true, 2});
  const ParamLayout& layout = model->layout();
  const Mixer<float>& mixer = model->mixer(0);
  const int T = c.T, B = c.B, D = cfg.d_model;
  const size_t rows = static_cast<size_t>(T) * B, S = mixer.state_size();

  // Parameters from the model's own init, then perturbed so that no tensor
  // is a constant (D = 1, biases = 1 would hide index errors).
  AlignedVec<float> params(layout.size(), 0.f), grads(layout.size(), 0.f);
  model->init_params(params.data(), seed);
  Rng rng(seed, 1);
  for (auto& p : params) p += 0.05f * static_cast<float>(rng.normal());
  Mat<float> U(static_cast<Eigen::Index>(rows), D), dY(static_cast<Eigen::Index>(rows), D);
  for (Eigen::Index i = 0; i < U.size(); ++i) U.data()[i] = static_cast<float>(rng.normal());
  for (Eigen::Index i = 0; i < dY.size(); ++i) dY.data()[i] = static_cast<float>(rng.normal());
  std::vector<uint8_t> starts(rows);
  for (size_t i = 0; i < rows; ++i) starts[i] = rng.uniform() < c.p_start ? 1 : 0;
  // The state a mixer carries is bounded in use; a random one of unit scale
  // exercises every component (conv window, SSM state, angles, k/v_prev).
  std::vector<float> state0(static_cast<size_t>(B) * S);
  for (auto& v : state0) v = static_cast<float>(0.5 * rng.normal());

  // CPU reference.
  const ParamView<float> P(layout, params.data()), G(layout, grads.data());
  auto cache = mixer.make_cache();
  std::vector<float> state_cpu = state0;
  Mat<float> Y, dU;
  mixer.forward(P, U, starts.data(), T, B, state_cpu.data(), S, Y, *cache);
  mixer.backward(P, dY, *cache, G, dU);

  // GPU, eager.
  auto gpu = make(mixer, layout, 0);
  BOOST_REQUIRE_EQUAL(gpu->type(), mixer.type());
  BOOST_REQUIRE_EQUAL(gpu->state_size(), S);
  cudaStream_t stream = nullptr;
  MAMBARL_CUDA_CHECK(cudaStreamCreateWithFlags(&stream, cudaStreamNonBlocking));
  cublasHandle_t cublas = nullptr;
  MAMBARL_CUBLAS_CHECK(cublasCreate(&cublas));
  DeviceBuffer<uint8_t> cublas_ws(32u << 20);
  MAMBARL_CUBLAS_CHECK(cublasSetStream(cublas, stream));
  MAMBARL_CUBLAS_CHECK(cublasSetWorkspace(cublas, cublas_ws.data(), cublas_ws.bytes()));
  const GpuExec exec{stream, cublas};

  auto d_params = to_device(params.data(), params.size());
  auto d_U = to_device(U.data(), rows * D);
  auto d_dY = to_device(dY.data(), rows * D);
  auto d_starts = to_device(starts.data(), rows);
  auto d_state0 = to_device(state0.data(), state0.size());
  DeviceBuffer<float> d_Y(rows * D), d_dU(rows * D), d_grads(layout.size());
  gpu->prepare(T, B);
  const auto run = [&](cudaStream_t s) {
    MAMBARL_CUDA_CHECK(cudaMemsetAsync(d_grads.data(), 0, d_grads.bytes(), s));
    gpu->forward(d_params.data(), d_U.data(), d_starts.data(), d_state0.data(), S, d_Y.data(), exec);
    gpu->backward(d_params.data(), d_dY.data(), d_grads.data(), d_dU.data(), exec);
  };
  // Poison the outputs first: every element must be written.
  MAMBARL_CUDA_CHECK(cudaMemset(d_Y.data(), 0xff, d_Y.bytes()));
  MAMBARL_CUDA_CHECK(cudaMemset(d_dU.data(), 0xff, d_dU.bytes()));
  run(stream);
  MAMBARL_CUDA_CHECK(cudaStreamSynchronize(stream));
  const auto y_gpu = copy_to_host(d_Y), du_gpu = copy_to_host(d_dU),
             g_gpu = copy_to_host(d_grads);

  MAMBARL_CHECK_CLOSE_REL(std::string(c.name) + " Y", detail::as_vec(y_gpu.data(), rows * D),
                          detail::as_vec(Y.data(), rows * D), kMixerRelTol, kMixerElemRtol, kMixerElemAtol);
  MAMBARL_CHECK_CLOSE_REL(std::string(c.name) + " dU", detail::as_vec(du_gpu.data(), rows * D),
                          detail::as_vec(dU.data(), rows * D), kMixerRelTol, kMixerElemRtol, kMixerElemAtol);
  const std::string prefix = "layers.0.mixer.";
  int compared = 0;
  for (const ParamInfo& p : layout.params()) {
    if (p.name.compare(0, prefix.size(), prefix) != 0) continue;
    ++compared;
    const auto ref = detail::as_vec(grads.data() + p.offset, p.numel);
    BOOST_CHECK_MESSAGE(ref.norm() > 0, c.name << " " << p.name << ": the CPU gradient is zero (vacuous)");
    // Elementwise floor relative to the tensor's scale: a gradient entry is
    // a sum over T*B tokens, so its rounding scales with the tensor's size.
    const double atol = kMixerElemAtol * std::max(1.0, static_cast<double>(ref.cwiseAbs().maxCoeff()));
    MAMBARL_CHECK_CLOSE_REL(std::string(c.name) + " grad " + p.name,
                            detail::as_vec(g_gpu.data() + p.offset, p.numel), ref, kMixerRelTol,
                            kMixerElemRtol, atol);
  }
  BOOST_CHECK_MESSAGE(compared > 0, c.name << ": no parameter named " << prefix << "*");
  // Nothing outside the layer's own parameters was touched.
  for (const ParamInfo& p : layout.params()) {
    if (p.name.compare(0, prefix.size(), prefix) == 0) continue;
    for (size_t i = 0; i < p.numel; ++i)
      if (g_gpu[p.offset + i] != 0.f) {
        BOOST_ERROR(c.name << ": backward wrote into " << p.name);
        break;
      }
  }

  // Graph replay == eager, bit for bit.
  std::vector<GraphBinding> bindings = {GraphBinding::buffer("params", d_params),
                                        GraphBinding::buffer("U", d_U), GraphBinding::buffer("dY", d_dY),
                                        GraphBinding::buffer("grads", d_grads)};
  gpu->bindings(bindings);
  CudaGraph graph("mixer fwd+bwd");
  graph.capture(stream, std::move(bindings), run);
  MAMBARL_CUDA_CHECK(cudaMemset(d_Y.data(), 0xff, d_Y.bytes()));
  MAMBARL_CUDA_CHECK(cudaMemset(d_dU.data(), 0xff, d_dU.bytes()));
  for (int rep = 0; rep < 2; ++rep) graph.launch(stream);  // twice: replays must not accumulate
  MAMBARL_CUDA_CHECK(cudaStreamSynchronize(stream));
  BOOST_CHECK_MESSAGE(copy_to_host(d_Y) == y_gpu, c.name << ": graph Y differs from eager");
  BOOST_CHECK_MESSAGE(copy_to_host(d_dU) == du_gpu, c.name << ": graph dU differs from eager");
  BOOST_CHECK_MESSAGE(copy_to_host(d_grads) == g_gpu, c.name << ": graph grads differ from eager");

  (void)cublasDestroy(cublas);
  (void)cudaStreamDestroy(stream);
}

}  // namespace mambarl::test
