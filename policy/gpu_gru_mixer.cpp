#include "policy/gpu_gru_mixer.hpp"

#include "kernels/gru.cuh"
#include "kernels/linear.cuh"
#include "kernels/rows.cuh"

namespace mambarl {

GpuGruMixer::GpuGruMixer(const GruMixer<float>& mixer, const ParamLayout& layout, int layer)
    : D_(mixer.config().d_model), w_hh_shared_(cuda::gru_sequence_configure(D_)) {
  const std::string pre = "layers." + std::to_string(layer) + ".mixer.";
  w_ih_ = layout.offset_of(pre + "weight_ih", {3 * D_, D_}, "GpuGruMixer");
  w_hh_ = layout.offset_of(pre + "weight_hh", {3 * D_, D_}, "GpuGruMixer");
  b_ih_ = layout.offset_of(pre + "bias_ih", {3 * D_}, "GpuGruMixer");
  b_hh_ = layout.offset_of(pre + "bias_hh", {3 * D_}, "GpuGruMixer");
}

void GpuGruMixer::prepare(int T, int B) {
  MAMBARL_CHECK(T > 0 && B > 0, "GpuGruMixer::prepare: T (" << T << ") and B (" << B << ") must be positive");
  if (T == T_ && B == B_) return;
  U_ = nullptr;  // a forward() of the new shape must come before any backward()
  T_ = B_ = 0;   // committed below, once every buffer is allocated
  const size_t rows = static_cast<size_t>(T) * B, D = static_cast<size_t>(D_);
  gates_ = DeviceBuffer<float>(rows * 3 * D);
  hn_ = DeviceBuffer<float>(rows * D);
  h_prev_ = DeviceBuffer<float>(rows * D);
  dgi_ = DeviceBuffer<float>(rows * 3 * D);
  dgh_ = DeviceBuffer<float>(rows * 3 * D);
  ones_ = DeviceBuffer<float>(rows);
  cuda::fill(rows, 1.f, ones_.data(), nullptr);
  MAMBARL_CUDA_CHECK(cudaStreamSynchronize(nullptr));
  T_ = T;
  B_ = B;
}

void GpuGruMixer::forward(const float* params, const float* U, const uint8_t* starts, const float* state0,
                          size_t state_stride, float* Y, const GpuExec& exec) {
  MAMBARL_CHECK(T_ > 0, "GpuGruMixer: forward() before prepare()");
  MAMBARL_CHECK(B_ == 1 || state_stride >= state_size(),
                "GpuGruMixer: state_stride (" << state_stride << ") < state_size (" << state_size() << ")");
  const int G = 3 * D_;
  U_ = U;
  starts_ = starts;
  // (T*B, 3D) W_ih u for every row at once; the recurrence kernel adds b_ih.
  exec.gemm_rows(T_ * B_, D_, G, U, exec.weight(params, w_ih_), 0.f, gates_.data());
  // W_hh in float32 (params, not the GEMM shadow): the recurrence has no GEMM to feed.
  cuda::gru_sequence_forward(T_, B_, D_, w_hh_shared_, starts, state0, state_stride, params + w_hh_,
                             params + b_ih_, params + b_hh_, gates_.data(), h_prev_.data(), hn_.data(), Y,
                             exec.stream);
}

void GpuGruMixer::backward(const float* params, const float* dY, float* grads, float* dU,
                           const GpuExec& exec) {
  MAMBARL_CHECK(U_ != nullptr, "GpuGruMixer: backward() before forward()");
  const int D = D_, G = 3 * D_, M = T_ * B_;
  cuda::gru_sequence_backward(T_, B_, D, starts_, params + w_hh_, gates_.data(), hn_.data(), h_prev_.data(),
                              dY, dgi_.data(), dgh_.data(), exec.stream);
  // Whole-chunk parameter gradients; h_prev is zero at starts, so those rows add nothing to dW_hh.
  exec.gemm(true, false, G, D, M, 1.f, dgh_.data(), G, h_prev_.data(), D, 1.f, grads + w_hh_, D);
  cuda::column_sum(exec.cublas, M, G, dgh_.data(), G, ones_.data(), grads + b_hh_);
  exec.gemm(true, false, G, D, M, 1.f, dgi_.data(), G, U_, D, 1.f, grads + w_ih_, D);
  cuda::column_sum(exec.cublas, M, G, dgi_.data(), G, ones_.data(), grads + b_ih_);
  exec.gemm(false, false, M, D, G, 1.f, dgi_.data(), G, exec.weight(params, w_ih_), D, 0.f, dU, D);
}

// The activation operands: the largest pair is a weight gradient's, dgi or
// dgh (3D columns) with U or h_prev (D columns).
size_t GpuGruMixer::gemm_cast_elems() const {
  const size_t M = static_cast<size_t>(T_) * B_, D = static_cast<size_t>(D_);
  return cuda::gemm_cast_elems(M * 3 * D, M * D);
}

void GpuGruMixer::bindings(std::vector<GraphBinding>& out) const {
  out.push_back(GraphBinding::buffer("gru gates", gates_));
  out.push_back(GraphBinding::buffer("gru hn", hn_));
  out.push_back(GraphBinding::buffer("gru h_prev", h_prev_));
  out.push_back(GraphBinding::buffer("gru dgi", dgi_));
  out.push_back(GraphBinding::buffer("gru dgh", dgh_));
  out.push_back(GraphBinding::buffer("gru ones", ones_));
  out.push_back(GraphBinding::value("gru T", T_));
  out.push_back(GraphBinding::value("gru B", B_));
}

}  // namespace mambarl
