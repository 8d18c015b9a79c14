#include "tools/bench/bench_kernels_gpu.hpp"

#include <cuda_runtime.h>

#include <algorithm>
#include <functional>
#include <sstream>
#include <vector>

#include "kernels/base/rng.hpp"
#include "kernels/cuda_check.cuh"
#include "kernels/device_buffer.cuh"
#include "kernels/linear.cuh"
#include "kernels/mamba1_step.cuh"

namespace mambarl {

namespace {

constexpr int kLaunchesPerGraph = 20, kReplays = 50;
// The state kernels rotate over this many state copies so that one launch
// does not find the previous launch's state in L2 (B=1024, D=128: 4 x 19.5 MB,
// over the H200's 60 MB of L2).
constexpr int kStateCopies = 4;

// Uploads n values drawn as scale * N(0, 1) + shift (never all zeros: zeros
// hide unwritten outputs and can run faster than real data).
DeviceBuffer<float> random_buffer(size_t n, Rng& rng, double scale, double shift = 0.0) {
  std::vector<float> h(n);
  for (auto& v : h) v = static_cast<float>(scale * rng.normal() + shift);
  return to_device(h);
}

DeviceBuffer<__nv_bfloat16> bf16_of(const DeviceBuffer<float>& f, cudaStream_t s) {
  DeviceBuffer<__nv_bfloat16> h(f.size());
  cuda::to_bf16(f.size(), f.data(), h.data(), s);
  MAMBARL_CUDA_CHECK(cudaStreamSynchronize(s));
  return h;
}

// µs per launch of op: kLaunchesPerGraph launches captured as one graph, the
// median of kReplays replays timed with events, divided by the launches.
// op(stream, i) is launch i.
double time_op_us(cudaStream_t s, const std::function<void(cudaStream_t, int)>& op) {
  for (int i = 0; i < kStateCopies; ++i) op(s, i);  // module load and first-touch outside capture
  MAMBARL_CUDA_CHECK(cudaStreamSynchronize(s));
  cudaGraph_t graph = nullptr;
  cudaGraphExec_t exec = nullptr;
  MAMBARL_CUDA_CHECK(cudaStreamBeginCapture(s, cudaStreamCaptureModeThreadLocal));
  for (int i = 0; i < kLaunchesPerGraph; ++i) op(s, i);
  MAMBARL_CUDA_CHECK(cudaStreamEndCapture(s, &graph));
  MAMBARL_CUDA_CHECK(cudaGraphInstantiate(&exec, graph, 0));
  cudaEvent_t e0 = nullptr, e1 = nullptr;
  MAMBARL_CUDA_CHECK(cudaEventCreate(&e0));
  MAMBARL_CUDA_CHECK(cudaEventCreate(&e1));
  std::vector<double> us;
  for (int r = 0; r < kReplays + 5; ++r) {
    MAMBARL_CUDA_CHECK(cudaEventRecord(e0, s));
    MAMBARL_CUDA_CHECK(cudaGraphLaunch(exec, s));
    MAMBARL_CUDA_CHECK(cudaEventRecord(e1, s));
    MAMBARL_CUDA_CHECK(cudaEventSynchronize(e1));
    float ms = 0.f;
    MAMBARL_CUDA_CHECK(cudaEventElapsedTime(&ms, e0, e1));
    if (r >= 5) us.push_back(1e3 * ms / kLaunchesPerGraph);
  }
  (void)cudaEventDestroy(e0);
  (void)cudaEventDestroy(e1);
  (void)cudaGraphExecDestroy(exec);
  (void)cudaGraphDestroy(graph);
  std::sort(us.begin(), us.end());
  return us[us.size() / 2];
}

}  // namespace

std::string bench_kernels_gpu_json(int B, int D) {
  MAMBARL_CHECK(B > 0 && D > 0, "bench kernels: B and D must be positive");
  cuda::Mamba1Dims d{D, 2 * D, 16, 4, (D + 15) / 16};
  cuda::mamba1_step_configure(d);
  const size_t Bz = static_cast<size_t>(B), E = static_cast<size_t>(d.E), N = d.N;
  const size_t stride = E * N + (d.K - 1) * E;  // one layer's state per env
  cudaStream_t s = nullptr;
  MAMBARL_CUDA_CHECK(cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking));
  struct StreamGuard {
    cudaStream_t s;
    ~StreamGuard() { (void)cudaStreamDestroy(s); }
  } guard{s};

  Rng rng(17, 0);
  DeviceBuffer<float> h = random_buffer(Bz * D, rng, 1.0);                 // (B, D)
  DeviceBuffer<float> xz = random_buffer(Bz * 2 * E, rng, 1.0);            // (B, 2E)
  std::vector<DeviceBuffer<float>> states;                                  // (B, stride) each
  for (int i = 0; i < kStateCopies; ++i) states.push_back(random_buffer(Bz * stride, rng, 0.1));
  DeviceBuffer<float> act = random_buffer(Bz * d.act_floats(), rng, 0.1);  // (B, act_floats)
  DeviceBuffer<float> gated = random_buffer(Bz * E, rng, 1.0);             // (B, E)
  DeviceBuffer<float> w_in = random_buffer(2 * E * D, rng, 0.05);          // (2E, D)
  DeviceBuffer<float> w_out = random_buffer(D * E, rng, 0.05);             // (D, E)
  DeviceBuffer<float> x_proj = random_buffer((d.R + 2 * N) * E, rng, 0.05);  // (R+2N, E)
  DeviceBuffer<float> dt_w = random_buffer(E * d.R, rng, 0.1);             // (E, R)
  DeviceBuffer<float> conv_w = random_buffer(E * d.K, rng, 0.3);           // (E, K)
  DeviceBuffer<float> vecs = random_buffer(3 * E, rng, 0.1);               // conv_b, dt_b, D
  DeviceBuffer<float> a = random_buffer(E * N, rng, 0.2, -1.0);            // (E, N) A < 0
  std::vector<uint8_t> starts_h(Bz, 0);
  for (size_t b = 0; b < Bz; b += 64) starts_h[b] = 1;  // a few episode starts, as in a rollout
  const DeviceBuffer<uint8_t> starts = to_device(starts_h);
  const DeviceBuffer<__nv_bfloat16> w_in_h = bf16_of(w_in, s), w_out_h = bf16_of(w_out, s),
                                    x_proj_h = bf16_of(x_proj, s), dt_w_h = bf16_of(dt_w, s);
  const cuda::Mamba1Weights<float> w{conv_w.data(), vecs.data(), x_proj.data(), dt_w.data(),
                                     vecs.data() + E, a.data(), vecs.data() + 2 * E};
  const cuda::Mamba1Weights<__nv_bfloat16> wh{w.conv_w, w.conv_b, x_proj_h.data(), dt_w_h.data(),
                                              w.dt_b, w.a, w.d_skip};

  // Bytes each kernel must move at the least (activations + its share of state).
  const double f = sizeof(float), hf = 2.0;
  const double in_bytes = Bz * D * f + Bz * 2 * E * f, out_bytes = Bz * E * f + 2 * Bz * D * f;
  const double pre_bytes = Bz * (D + 2 * E) * f + 2 * Bz * (d.K - 1) * E * f + Bz * d.act_floats() * f;
  const double state_bytes = 2 * Bz * E * N * f + Bz * (3 * E + 2 * N) * f + Bz * E * f;
  std::ostringstream os;
  bool first = true;
  const auto row = [&](const char* kernel, const char* weights, double bytes, double wbytes,
                       const std::function<void(cudaStream_t, int)>& op) {
    const double us = time_op_us(s, op);
    os << (first ? "" : ",") << "{\"kernel\":\"" << kernel << "\",\"weights\":\"" << weights
       << "\",\"us\":" << us << ",\"bytes\":" << bytes + wbytes
       << ",\"TBps\":" << (bytes + wbytes) / (us * 1e-6) / 1e12 << "}";
    first = false;
  };
  os << "[";
  for (const bool bf16 : {false, true}) {
    const char* wt = bf16 ? "bf16" : "f32";
    const double ws = bf16 ? hf : f;
    row("in_proj", wt, in_bytes, 2 * E * D * ws, [&](cudaStream_t st, int i) {
      if (bf16)
        cuda::linear_rows(B, D, 2 * d.E, h.data(), w_in_h.data(), 0.f, xz.data(), st);
      else
        cuda::linear_rows(B, D, 2 * d.E, h.data(), w_in.data(), 0.f, xz.data(), st);
    });
    row("mamba1_pre", wt, pre_bytes, (d.R + 2 * N) * E * ws + E * d.R * ws, [&](cudaStream_t st, int i) {
      float* st_i = states[static_cast<size_t>(i % kStateCopies)].data();
      if (bf16)
        cuda::mamba1_pre(d, wh, B, h.data(), xz.data(), {starts.data()}, st_i, st_i, stride, act.data(), st);
      else
        cuda::mamba1_pre(d, w, B, h.data(), xz.data(), {starts.data()}, st_i, st_i, stride, act.data(), st);
    });
    row("mamba1_state", wt, state_bytes, 0, [&](cudaStream_t st, int i) {
      float* st_i = states[static_cast<size_t>(i % kStateCopies)].data();
      cuda::mamba1_state(d, w, B, {starts.data()}, st_i, st_i, stride, act.data(), gated.data(), st);
    });
    row("out_proj", wt, out_bytes, D * E * ws, [&](cudaStream_t st, int i) {
      if (bf16)
        cuda::linear_rows(B, d.E, D, gated.data(), w_out_h.data(), 1.f, h.data(), st);
      else
        cuda::linear_rows(B, d.E, D, gated.data(), w_out.data(), 1.f, h.data(), st);
    });
  }
  os << "]";
  return os.str();
}

}  // namespace mambarl
