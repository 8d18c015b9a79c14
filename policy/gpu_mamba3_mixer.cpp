#include "policy/gpu_mamba3_mixer.hpp"

#include <cuda_runtime.h>

#include <algorithm>

#include "kernels/cuda_check.cuh"
#include "kernels/linear.cuh"
#include "kernels/rows.cuh"
#include "policy/gpu_dims.hpp"

namespace mambarl {

GpuMamba3Mixer::GpuMamba3Mixer(const Mamba3Mixer<float>& cpu, const ParamLayout& layout, int layer,
                               int segment_len) {
  const Mamba3Config& c = cpu.config();
  d_ = mamba3_dims(c);
  R_ = d_.in_rows();
  o_dt_ = 2 * d_.E + 2 * d_.G * d_.N;
  state_size_ = cpu.state_size();
  const std::string pre = "layers." + std::to_string(layer) + ".mixer.";
  off_.in_proj = layout.offset_of(pre + "in_proj.weight", {R_, d_.D}, "GpuMamba3Mixer");
  off_.dt_bias = layout.offset_of(pre + "dt_bias", {d_.H}, "GpuMamba3Mixer");
  off_.b_bias = layout.offset_of(pre + "B_bias", {d_.H, d_.N}, "GpuMamba3Mixer");
  off_.c_bias = layout.offset_of(pre + "C_bias", {d_.H, d_.N}, "GpuMamba3Mixer");
  off_.b_norm = layout.offset_of(pre + "B_norm.weight", {d_.N}, "GpuMamba3Mixer");
  off_.c_norm = layout.offset_of(pre + "C_norm.weight", {d_.N}, "GpuMamba3Mixer");
  off_.d_skip = layout.offset_of(pre + "D", {d_.H}, "GpuMamba3Mixer");
  off_.norm = c.is_outproj_norm ? layout.offset_of(pre + "norm.weight", {d_.E}, "GpuMamba3Mixer") : kNoNorm;
  off_.out_proj = layout.offset_of(pre + "out_proj.weight", {d_.D, d_.E}, "GpuMamba3Mixer");
  cuda::mamba3_chunk_configure(d_);
  chunk_.seg_len = cuda::scan_segment_len(segment_len, cuda::mamba3_max_segment_len(d_), "GpuMamba3Mixer");
}

cuda::Mamba3Weights GpuMamba3Mixer::weights(const float* params) const {
  cuda::Mamba3Weights w;
  w.dt_bias = params + off_.dt_bias;
  w.b_bias = params + off_.b_bias;
  w.c_bias = params + off_.c_bias;
  w.b_norm = params + off_.b_norm;
  w.c_norm = params + off_.c_norm;
  w.d_skip = params + off_.d_skip;
  w.norm = off_.norm == kNoNorm ? nullptr : params + off_.norm;
  return w;
}

size_t GpuMamba3Mixer::carve(float* base) {
  const size_t M = static_cast<size_t>(T_) * B_;
  const size_t E = d_.E, H = d_.H, N = d_.N, G = d_.G;
  const bool norm = off_.norm != kNoNorm;
  size_t used = 0;
  // 128-byte aligned slices, so no two buffers share a cache line.
  const auto take = [&](size_t n) -> float* {
    if (n == 0) return nullptr;
    float* p = base ? base + used : nullptr;
    used += (n + 31) / 32 * 32;
    return p;
  };
  cuda::Mamba3Chunk& c = chunk_;
  c.zx = take(M * R_);
  c.dt = take(M * H);
  c.alpha = take(M * H);
  c.beta = take(M * H);
  c.gamma = take(M * H);
  c.bc_rstd = take(M * 2 * G);
  c.k = take(M * H * N);
  c.q = take(M * H * N);
  c.phi = take(M * H * d_.Na);
  c.y = take(M * E);
  c.y_rstd = take(norm ? M * H : 0);
  c.seg_states = take(static_cast<size_t>(cuda::scan_segment_states(T_, c.seg_len)) * B_ * E * N);
  c.gated = take(M * E);
  c.dgated = take(M * E);
  c.dy = take(M * E);
  c.dzx = take(M * R_);
  c.dk = take(M * H * N);
  c.dq = take(M * H * N);
  c.dalpha = take(M * H);
  c.dbeta = take(M * H);
  c.dgamma = take(M * H);
  c.dphi = take(M * H * d_.Na);
  c.dd_part = take(static_cast<size_t>(B_) * d_.P * H);
  c.dnorm_part = take(norm ? M * E : 0);
  c.dbn_part = take(M * G * N);
  c.dcn_part = take(M * G * N);
  ones_n_ = std::max({M * G, M, static_cast<size_t>(B_) * d_.P});
  ones_ = take(ones_n_);
  return used;
}

void GpuMamba3Mixer::prepare(int T, int B) {
  MAMBARL_CHECK(T > 0 && B > 0, "GpuMamba3Mixer: T (" << T << ") and B (" << B << ") must be positive");
  if (T == T_ && B == B_) return;
  U_ = nullptr;  // a forward() of the new shape must come before any backward()
  T_ = T;
  B_ = B;
  try {
    scratch_ = DeviceBuffer<float>();  // free the old chunk's memory before taking the new
    scratch_ = DeviceBuffer<float>(carve(nullptr));
  } catch (...) {
    T_ = B_ = 0;  // no shape is prepared: the next prepare() must allocate again
    throw;
  }
  carve(scratch_.data());
  chunk_.T = T;
  chunk_.B = B;
  const std::vector<float> ones(ones_n_, 1.f);
  copy_to_device(ones_, ones.data(), ones_n_);
}

void GpuMamba3Mixer::forward(const float* params, const float* U, const uint8_t* starts,
                             const float* state0, size_t state_stride, float* Y,
                             const GpuExec& exec) {
  MAMBARL_CHECK(T_ > 0, "GpuMamba3Mixer: forward before prepare()");
  MAMBARL_CHECK(B_ == 1 || state_stride >= state_size_,
                "GpuMamba3Mixer: state_stride (" << state_stride << ") < state_size ("
                                                 << state_size_ << ")");
  const int M = T_ * B_, D = d_.D, E = d_.E;
  chunk_.starts = starts;
  chunk_.state0 = state0;
  chunk_.stride = state_stride;
  U_ = U;
  exec.gemm(false, true, M, R_, D, 1.f, U, D, exec.weight(params, off_.in_proj), D, 0.f, chunk_.zx, R_);
  cuda::mamba3_chunk_forward(d_, weights(params), chunk_, exec.stream);
  exec.gemm(false, true, M, D, E, 1.f, chunk_.gated, E, exec.weight(params, off_.out_proj), E, 0.f, Y, D);
}

void GpuMamba3Mixer::backward(const float* params, const float* dY, float* grads, float* dU,
                              const GpuExec& exec) {
  MAMBARL_CHECK(U_ != nullptr, "GpuMamba3Mixer: backward before forward()");
  const int M = T_ * B_, D = d_.D, E = d_.E, H = d_.H, N = d_.N, G = d_.G;
  // out_proj: dgated = dY W_out, dW_out += dYᵀ gated.
  exec.gemm(false, false, M, E, D, 1.f, dY, D, exec.weight(params, off_.out_proj), E, 0.f, chunk_.dgated, E);
  exec.gemm(true, false, D, E, M, 1.f, dY, D, chunk_.gated, E, 1.f, grads + off_.out_proj, E);
  cuda::mamba3_chunk_backward(d_, weights(params), chunk_, exec.stream);
  // dd_dt = d(dd_dt + dt_bias): dt_bias takes the column sum of dzx's block.
  cuda::column_sum(exec.cublas, M, H, chunk_.dzx + o_dt_, R_, ones_, grads + off_.dt_bias);
  cuda::column_sum(exec.cublas, M, H * N, chunk_.dk, H * N, ones_, grads + off_.b_bias);
  cuda::column_sum(exec.cublas, M, H * N, chunk_.dq, H * N, ones_, grads + off_.c_bias);
  cuda::column_sum(exec.cublas, M * G, N, chunk_.dbn_part, N, ones_, grads + off_.b_norm);
  cuda::column_sum(exec.cublas, M * G, N, chunk_.dcn_part, N, ones_, grads + off_.c_norm);
  cuda::column_sum(exec.cublas, B_ * d_.P, H, chunk_.dd_part, H, ones_, grads + off_.d_skip);
  if (off_.norm != kNoNorm) cuda::column_sum(exec.cublas, M, E, chunk_.dnorm_part, E, ones_, grads + off_.norm);
  // in_proj: dW_in += dzxᵀ U, dU = dzx W_in.
  exec.gemm(true, false, R_, D, M, 1.f, chunk_.dzx, R_, U_, D, 1.f, grads + off_.in_proj, D);
  exec.gemm(false, false, M, D, R_, 1.f, chunk_.dzx, R_, exec.weight(params, off_.in_proj), D, 0.f, dU, D);
}

// The activation operands: in_proj U / dzx (+ U), out_proj gated / dY (+ gated).
size_t GpuMamba3Mixer::gemm_cast_elems() const {
  const size_t M = static_cast<size_t>(T_) * B_, D = d_.D, E = d_.E, R = static_cast<size_t>(R_);
  return std::max(cuda::gemm_cast_elems(M * R, M * D), cuda::gemm_cast_elems(M * D, M * E));
}

void GpuMamba3Mixer::bindings(std::vector<GraphBinding>& out) const {
  out.push_back(GraphBinding::buffer("mamba3 mixer scratch", scratch_));
  out.push_back(GraphBinding::value("mamba3 mixer T", T_));
  out.push_back(GraphBinding::value("mamba3 mixer B", B_));
}

}  // namespace mambarl
