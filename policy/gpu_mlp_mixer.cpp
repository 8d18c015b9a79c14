#include "policy/gpu_mlp_mixer.hpp"

#include "kernels/linear.cuh"
#include "kernels/mlp.cuh"
#include "kernels/rows.cuh"

namespace mambarl {

GpuMlpMixer::GpuMlpMixer(const MlpMixer<float>& mixer, const ParamLayout& layout, int layer)
    : D_(mixer.config().d_model), E_(mixer.config().d_inner()) {
  const std::string pre = "layers." + std::to_string(layer) + ".mixer.";
  fc1_w_ = layout.offset_of(pre + "fc1.weight", {E_, D_}, "GpuMlpMixer");
  fc1_b_ = layout.offset_of(pre + "fc1.bias", {E_}, "GpuMlpMixer");
  fc2_w_ = layout.offset_of(pre + "fc2.weight", {D_, E_}, "GpuMlpMixer");
  fc2_b_ = layout.offset_of(pre + "fc2.bias", {D_}, "GpuMlpMixer");
}

void GpuMlpMixer::prepare(int T, int B) {
  MAMBARL_CHECK(T > 0 && B > 0, "GpuMlpMixer::prepare: T (" << T << ") and B (" << B << ") must be positive");
  const int M = T * B;
  if (M == M_) return;
  U_ = nullptr;  // a forward() of the new shape must come before any backward()
  M_ = 0;        // committed below, once every buffer is allocated
  const size_t rows = static_cast<size_t>(M);
  pre_ = DeviceBuffer<float>(rows * E_);
  act_ = DeviceBuffer<float>(rows * E_);
  dact_ = DeviceBuffer<float>(rows * E_);
  ones_ = DeviceBuffer<float>(rows);
  M_ = M;
  cuda::fill(rows, 1.f, ones_.data(), nullptr);
  MAMBARL_CUDA_CHECK(cudaStreamSynchronize(nullptr));
}

void GpuMlpMixer::forward(const float* params, const float* U, const uint8_t* /*starts*/,
                          const float* /*state0*/, size_t /*state_stride*/, float* Y, const GpuExec& exec) {
  MAMBARL_CHECK(M_ > 0, "GpuMlpMixer: forward before prepare()");
  U_ = U;
  exec.gemm_rows(M_, D_, E_, U, exec.weight(params, fc1_w_), 0.f, pre_.data());  // (M, E)
  cuda::mlp_bias_silu(M_, E_, pre_.data(), params + fc1_b_, act_.data(), exec.stream);
  exec.gemm_rows(M_, E_, D_, act_.data(), exec.weight(params, fc2_w_), 0.f, Y);  // (M, D)
  cuda::add_bias_rows(M_, D_, Y, params + fc2_b_, exec.stream);
}

void GpuMlpMixer::backward(const float* params, const float* dY, float* grads, float* dU,
                           const GpuExec& exec) {
  MAMBARL_CHECK(U_, "GpuMlpMixer: backward before forward()");
  // fc2: dact = dY W2, dW2 += dY^T act, db2 += colsum(dY).
  exec.gemm(false, false, M_, E_, D_, 1.f, dY, D_, exec.weight(params, fc2_w_), E_, 0.f, dact_.data(), E_);
  exec.gemm(true, false, D_, E_, M_, 1.f, dY, D_, act_.data(), E_, 1.f, grads + fc2_w_, E_);
  cuda::column_sum(exec.cublas, M_, D_, dY, D_, ones_.data(), grads + fc2_b_);
  cuda::mlp_silu_backward(M_, E_, pre_.data(), dact_.data(), exec.stream);
  // fc1: dW1 += dpre^T U, db1 += colsum(dpre), dU = dpre W1.
  exec.gemm(true, false, E_, D_, M_, 1.f, dact_.data(), E_, U_, D_, 1.f, grads + fc1_w_, D_);
  cuda::column_sum(exec.cublas, M_, E_, dact_.data(), E_, ones_.data(), grads + fc1_b_);
  exec.gemm(false, false, M_, D_, E_, 1.f, dact_.data(), E_, exec.weight(params, fc1_w_), D_, 0.f, dU, D_);
}

// The activation operands: fc1 U / dpre (+ U), fc2 act / dY (+ act): at most E + D columns.
size_t GpuMlpMixer::gemm_cast_elems() const {
  const size_t M = static_cast<size_t>(M_);
  return cuda::gemm_cast_elems(M * static_cast<size_t>(E_), M * static_cast<size_t>(D_));
}

void GpuMlpMixer::bindings(std::vector<GraphBinding>& out) const {
  out.push_back(GraphBinding::buffer("mlp pre-activation", pre_));
  out.push_back(GraphBinding::buffer("mlp activation", act_));
  out.push_back(GraphBinding::buffer("mlp activation gradient", dact_));
  out.push_back(GraphBinding::buffer("mlp ones", ones_));
}

}  // namespace mambarl
