#include "policy/gpu_mamba1_mixer.hpp"

#include <algorithm>

#include "kernels/base/check.hpp"
#include "kernels/linear.cuh"
#include "policy/gpu_dims.hpp"

namespace mambarl {

namespace {

// Slices of one allocation, each rounded up to 16 floats (64 bytes) so every
// buffer starts on a coalescing boundary.
class Carver {
 public:
  explicit Carver(float* base) : base_(base) {}
  float* take(size_t n) {
    float* p = base_ ? base_ + used_ : nullptr;
    used_ += (n + 15) / 16 * 16;
    return p;
  }
  size_t used() const { return used_; }

 private:
  float* base_;
  size_t used_ = 0;
};

}  // namespace

GpuMamba1Mixer::GpuMamba1Mixer(const Mamba1Mixer<float>& cpu, const ParamLayout& layout, int layer,
                               int segment_len)
    : state_size_(cpu.state_size()) {
  const Mamba1Config& c = cpu.config();
  d_ = mamba1_dims(c);
  act_.seg_len = cuda::scan_segment_len(segment_len, cuda::mamba1_max_segment_len(d_), "GpuMamba1Mixer");
  const int D = d_.D, E = d_.E, N = d_.N, K = d_.K, R = d_.R;
  const std::string pre = "layers." + std::to_string(layer) + ".mixer.";
  off_.in_proj = layout.offset_of(pre + "in_proj.weight", {2 * E, D}, "GpuMamba1Mixer");
  off_.conv_w = layout.offset_of(pre + "conv1d.weight", {E, K}, "GpuMamba1Mixer");
  off_.conv_b = layout.offset_of(pre + "conv1d.bias", {E}, "GpuMamba1Mixer");
  off_.x_proj = layout.offset_of(pre + "x_proj.weight", {R + 2 * N, E}, "GpuMamba1Mixer");
  off_.dt_w = layout.offset_of(pre + "dt_proj.weight", {E, R}, "GpuMamba1Mixer");
  off_.dt_b = layout.offset_of(pre + "dt_proj.bias", {E}, "GpuMamba1Mixer");
  off_.a_log = layout.offset_of(pre + "A_log", {E, N}, "GpuMamba1Mixer");
  off_.d_skip = layout.offset_of(pre + "D", {E}, "GpuMamba1Mixer");
  off_.out_proj = layout.offset_of(pre + "out_proj.weight", {D, E}, "GpuMamba1Mixer");
}

cuda::Mamba1Weights<float> GpuMamba1Mixer::weights(const float* params) const {
  cuda::Mamba1Weights<float> w;
  w.conv_w = params + off_.conv_w;
  w.conv_b = params + off_.conv_b;
  w.x_proj = params + off_.x_proj;
  w.dt_w = params + off_.dt_w;
  w.dt_b = params + off_.dt_b;
  w.a = a_;
  w.d_skip = params + off_.d_skip;
  return w;
}

void GpuMamba1Mixer::prepare(int T, int B) {
  cuda::mamba1_scan_check(d_, T, B);
  if (T == T_ && B == B_) return;
  U_ = nullptr;  // a forward() of the new shape must come before any backward()
  cuda::mamba1_scan_configure(d_);
  const size_t M = static_cast<size_t>(T) * B, E = d_.E, N = d_.N, K = d_.K,
               RN = static_cast<size_t>(d_.R) + 2 * N, W = cuda::mamba1_channel_warps(d_.E),
               Bs = static_cast<size_t>(B);
  // Carved twice: once to size the arena, once to point into it.
  const auto carve = [&](float* base) {
    Carver c(base);
    a_ = c.take(E * N);
    act_.xz = c.take(M * 2 * E);
    act_.pre = c.take(M * E);
    act_.xc = c.take(M * E);
    act_.dbc = c.take(M * RN);
    act_.dt_lin = c.take(M * E);
    act_.delta = c.take(M * E);
    act_.seg_states = c.take(static_cast<size_t>(cuda::scan_segment_states(T, act_.seg_len)) * Bs * N * E);
    act_.y = c.take(M * E);
    act_.gated = c.take(M * E);
    bwd_.dgated = c.take(M * E);
    bwd_.dxz = c.take(M * 2 * E);
    bwd_.dxc = c.take(M * E);
    bwd_.ddt = c.take(M * E);
    bwd_.ddbc = c.take(M * RN);
    bwd_.bc_part = c.take(M * W * 2 * N);
    bwd_.sum_a = c.take(Bs * E * N);
    bwd_.sum_d = c.take(Bs * E);
    bwd_.sum_dtb = c.take(Bs * E);
    bwd_.sum_cw = c.take(Bs * E * K);
    bwd_.sum_cb = c.take(Bs * E);
    return c.used();
  };
  arena_ = DeviceBuffer<float>();  // free the old chunk's buffers before allocating
  arena_ = DeviceBuffer<float>(carve(nullptr));
  carve(arena_.data());
  T_ = T;
  B_ = B;
}

void GpuMamba1Mixer::forward(const float* params, const float* U, const uint8_t* starts,
                             const float* state0, size_t state_stride, float* Y,
                             const GpuExec& exec) {
  MAMBARL_CHECK(T_ > 0, "GpuMamba1Mixer: forward() before prepare()");
  MAMBARL_CHECK(B_ == 1 || state_stride >= state_size_,
                "GpuMamba1Mixer: state_stride (" << state_stride << ") < state_size (" << state_size_ << ")");
  const int M = T_ * B_, D = d_.D, E = d_.E, N = d_.N, R = d_.R, RN = R + 2 * N;
  U_ = U;
  chunk_ = cuda::Mamba1Chunk{T_, B_, starts, state0, state_stride};
  const cuda::Mamba1Weights<float> w = weights(params);
  cudaStream_t s = exec.stream;

  cuda::mamba1_derive_a(E * N, params + off_.a_log, a_, s);
  // (M, 2E) [x z] = U W_in^T
  exec.gemm(false, true, M, 2 * E, D, 1.f, U, D, exec.weight(params, off_.in_proj), D, 0.f, act_.xz, 2 * E);
  cuda::mamba1_conv_forward(d_, chunk_, w, act_, s);
  // (M, R+2N) [δ B C] = xc W_x^T
  exec.gemm(false, true, M, RN, E, 1.f, act_.xc, E, exec.weight(params, off_.x_proj), E, 0.f, act_.dbc, RN);
  // (M, E) dt_lin = δ W_dt^T (δ: the first R columns of dbc)
  exec.gemm(false, true, M, E, R, 1.f, act_.dbc, RN, exec.weight(params, off_.dt_w), R, 0.f, act_.dt_lin, E);
  cuda::mamba1_scan_forward(d_, chunk_, w, act_, s);
  // (M, D) Y = gated W_out^T
  exec.gemm(false, true, M, D, E, 1.f, act_.gated, E, exec.weight(params, off_.out_proj), E, 0.f, Y, D);
}

void GpuMamba1Mixer::backward(const float* params, const float* dY, float* grads, float* dU,
                              const GpuExec& exec) {
  MAMBARL_CHECK(U_ != nullptr, "GpuMamba1Mixer: backward() before forward()");
  const int M = T_ * B_, D = d_.D, E = d_.E, N = d_.N, K = d_.K, R = d_.R, RN = R + 2 * N;
  const cuda::Mamba1Weights<float> w = weights(params);
  cudaStream_t s = exec.stream;

  // out_proj: (M, E) dgated = dY W_out; dW_out += dY^T gated.
  exec.gemm(false, false, M, E, D, 1.f, dY, D, exec.weight(params, off_.out_proj), E, 0.f, bwd_.dgated, E);
  exec.gemm(true, false, D, E, M, 1.f, dY, D, act_.gated, E, 1.f, grads + off_.out_proj, E);

  cuda::mamba1_scan_backward(d_, chunk_, w, act_, bwd_, s);

  // dt_proj: [dδ] = ddt W_dt into the first R columns of ddbc; dW_dt += ddt^T δ.
  exec.gemm(false, false, M, R, E, 1.f, bwd_.ddt, E, exec.weight(params, off_.dt_w), R, 0.f, bwd_.ddbc, RN);
  exec.gemm(true, false, E, R, M, 1.f, bwd_.ddt, E, act_.dbc, RN, 1.f, grads + off_.dt_w, R);
  // x_proj: dW_x += ddbc^T xc; dxc += ddbc W_x.
  exec.gemm(true, false, RN, E, M, 1.f, bwd_.ddbc, RN, act_.xc, E, 1.f, grads + off_.x_proj, E);
  exec.gemm(false, false, M, E, RN, 1.f, bwd_.ddbc, RN, exec.weight(params, off_.x_proj), E, 1.f, bwd_.dxc,
            E);

  cuda::mamba1_conv_backward(d_, chunk_, w, act_, bwd_, s);

  // Per-env sums over t -> parameter gradients; A = -exp(A_log) so dA_log = dA ⊙ A.
  cuda::mamba1_add_env_sums(B_, E * N, bwd_.sum_a, a_, grads + off_.a_log, s);
  cuda::mamba1_add_env_sums(B_, E, bwd_.sum_d, nullptr, grads + off_.d_skip, s);
  cuda::mamba1_add_env_sums(B_, E, bwd_.sum_dtb, nullptr, grads + off_.dt_b, s);
  cuda::mamba1_add_env_sums(B_, E * K, bwd_.sum_cw, nullptr, grads + off_.conv_w, s);
  cuda::mamba1_add_env_sums(B_, E, bwd_.sum_cb, nullptr, grads + off_.conv_b, s);

  // in_proj: (M, D) dU = dxz W_in; dW_in += dxz^T U.
  exec.gemm(false, false, M, D, 2 * E, 1.f, bwd_.dxz, 2 * E, exec.weight(params, off_.in_proj), D, 0.f, dU,
            D);
  exec.gemm(true, false, 2 * E, D, M, 1.f, bwd_.dxz, 2 * E, U_, D, 1.f, grads + off_.in_proj, D);
}

// The activation operands of each GEMM above (weights come from their shadows):
// in_proj U / dxz (+ U), x_proj xc / ddbc (+ xc), dt_proj δ / ddt (+ δ), out_proj gated / dY (+ gated).
size_t GpuMamba1Mixer::gemm_cast_elems() const {
  const size_t M = static_cast<size_t>(T_) * B_, D = d_.D, E = d_.E, R = d_.R, RN = R + 2 * d_.N;
  return std::max({cuda::gemm_cast_elems(M * 2 * E, M * D), cuda::gemm_cast_elems(M * RN, M * E),
                   cuda::gemm_cast_elems(M * E, M * R), cuda::gemm_cast_elems(M * D, M * E)});
}

void GpuMamba1Mixer::bindings(std::vector<GraphBinding>& out) const {
  out.push_back(GraphBinding::buffer("mamba1 scratch", arena_));
  out.push_back(GraphBinding::value("mamba1 T", T_));
  out.push_back(GraphBinding::value("mamba1 B", B_));
}

}  // namespace mambarl
