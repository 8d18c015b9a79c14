// Mamba-1 mixer, CPU reference: forward and backward through time with
// per-env resets (policy/MATH.md "Mamba-1 mixer", "Episode boundaries").
//
// Work split: everything that is not recurrent runs over all T*B token rows
// at once (the four projections as whole-matrix GEMMs, softplus, silu, the
// gate); the conv and the scan loop over tokens on contiguous rows of E.
//
// Layout inside the scan: H is kept n-major, (N, E), although the state slice
// stores it e-major (E, N) as mamba_ssm does. With N = 16 an e-major row is
// two SIMD registers and every y = H C would end in a horizontal sum per
// channel; n-major makes every update an array op over E (no reductions in
// the forward, N dot products per token in the backward).
//
// Memory: forward keeps no H history. Backward recomputes one env's H_t and
// exp(Δ_t A) for all t from the saved initial state (2·T·N·E scalars, 2 MB
// at T=64, E=256, N=16 in float) and then sweeps that env backwards; this
// replaces a (T*B, E·N) history, 67 MB per layer at B=64, written and read
// back through DRAM. The recompute costs one more exp per state element.
#include "policy/mamba1.hpp"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <type_traits>
#include <vector>

#include "kernels/kernel_limits.hpp"
#include "policy/ops.hpp"

namespace mambarl {

void Mamba1Config::validate() const {
  MAMBARL_CHECK(d_model >= 1 && d_model <= 16384,
                "mamba1.d_model must be in [1, 16384], got " << d_model);
  // The GPU kernels' limits (kernels/kernel_limits.hpp) bound both engines, so
  // a config that trains on one device loads on the other.
  constexpr int max_state = cuda::kMamba1MaxState, max_conv = cuda::kMamba1MaxConv;
  MAMBARL_CHECK(d_state >= 1 && d_state <= max_state,
                "mamba1.d_state must be in [1, " << max_state << "], got " << d_state);
  MAMBARL_CHECK(d_conv >= 1 && d_conv <= max_conv,
                "mamba1.d_conv must be in [1, " << max_conv << "], got " << d_conv);
  MAMBARL_CHECK(expand >= 1 && expand <= 8, "mamba1.expand must be in [1, 8], got " << expand);
  // A rank above E would make the "low-rank" Δ projection larger than a full one: a typo.
  MAMBARL_CHECK(dt_rank >= 0 && dt_rank <= d_inner(),
                "mamba1.dt_rank must be in [0, d_inner = " << d_inner()
                                                           << "] (0 means ceil(d_model / 16)), got "
                                                           << dt_rank);
  MAMBARL_CHECK(dt_min > 0 && std::isfinite(dt_min),
                "mamba1.dt_min must be finite and > 0, got " << dt_min);
  MAMBARL_CHECK(dt_max >= dt_min && std::isfinite(dt_max),
                "mamba1.dt_max must be finite and >= dt_min (" << dt_min << "), got " << dt_max);
  MAMBARL_CHECK(a_init_scale > 0 && std::isfinite(a_init_scale),
                "mamba1.a_init_scale must be finite and > 0, got " << a_init_scale);
  MAMBARL_CHECK(dt_init_floor >= 0 && std::isfinite(dt_init_floor),
                "mamba1.dt_init_floor must be finite and >= 0, got " << dt_init_floor);
  MAMBARL_CHECK(out_proj_init_scale > 0 && std::isfinite(out_proj_init_scale),
                "mamba1.out_proj_init_scale must be finite and > 0, got " << out_proj_init_scale);
}

namespace {

// exp(x) for x <= 0, the scan's decay exp(Δ A) (Δ >= 0, A < 0). It is the
// mixer's hottest line (T·B·E·N evaluations, twice per training step), so the
// float version skips what Eigen's general pexp pays for: the upper clamp
// and a 2^m that must survive any m (pldexp in four multiplies). Here
// x >= -87 after the clamp, so m = round(x / ln 2) is in [-126, 0] and 2^m is
// built directly from its exponent bits. Same Cody-Waite reduction and
// Cephes polynomial as Eigen's pexp_float, so the accuracy (~1 ulp) is
// unchanged; below the clamp it returns ~1.6e-38 for 0, which no sum can tell
// apart. double keeps Eigen's pexp (it serves the tests, not the speed).
template <typename S>
struct ExpNonPositiveOp {
  S operator()(const S& x) const { return std::exp(x); }
  template <typename Packet>
  Packet packetOp(const Packet& x_in) const {
    using namespace Eigen::internal;
    if constexpr (!std::is_same_v<S, float>) {
      return pexp(x_in);
    } else {
      using PacketI = typename unpacket_traits<Packet>::integer_packet;
      const Packet x = pmax(x_in, pset1<Packet>(-87.0f));
      const Packet m = pfloor(pmadd(x, pset1<Packet>(1.44269504088896341f), pset1<Packet>(0.5f)));
      Packet r = pmadd(m, pset1<Packet>(-0.693359375f), x);  // ln 2 in two parts
      r = pmadd(m, pset1<Packet>(2.12194440e-4f), r);
      Packet y = pmadd(pset1<Packet>(1.9875691500e-4f), r, pset1<Packet>(1.3981999507e-3f));
      y = pmadd(y, r, pset1<Packet>(8.3334519073e-3f));
      y = pmadd(y, r, pset1<Packet>(4.1665795894e-2f));
      y = pmadd(y, r, pset1<Packet>(1.6666665459e-1f));
      y = pmadd(y, r, pset1<Packet>(5.0000001201e-1f));
      y = pmadd(y, pmul(r, r), padd(r, pset1<Packet>(1.0f)));
      const PacketI biased = padd(pcast<Packet, PacketI>(m), pset1<PacketI>(127));
      return pmul(y, preinterpret<Packet>(plogical_shift_left<23>(biased)));
    }
  }
};

}  // namespace
}  // namespace mambarl

namespace Eigen::internal {
template <typename S>
struct functor_traits<mambarl::ExpNonPositiveOp<S>> {
  enum { Cost = 20 * NumTraits<S>::MulCost, PacketAccess = packet_traits<S>::HasExp };
};
}  // namespace Eigen::internal

namespace mambarl {
namespace {

// One token of the selective scan on n-major (N, E) blocks:
//   H_out = exp(Δ ⊗ A) ⊙ H_prev + (Δ⊙xc) ⊗ B,
// also storing exp(Δ ⊗ A) in decay when given (the backward's recompute).
// Elementwise, so h_out may alias h_prev. The forward and the recompute run
// the same arithmetic, so the recomputed H_t is the forward's.
template <typename S>
void ssm_step(const S* h_prev, S* h_out, S* decay, const S* a_t, const S* delta,
              const S* delta_x, const S* b_vec, int N, int E) {
  const CArrMap<S> dl(delta, E), dx(delta_x, E);
  for (int n = 0; n < N; ++n) {
    const size_t o = static_cast<size_t>(n) * E;
    const auto da = (dl * CArrMap<S>(a_t + o, E)).unaryExpr(ExpNonPositiveOp<S>());
    const CArrMap<S> hp(h_prev + o, E);
    ArrMap<S> h(h_out + o, E);
    if (decay) {
      ArrMap<S> stored(decay + o, E);
      stored = da;
      h = stored * hp + dx * b_vec[n];
    } else {
      h = da * hp + dx * b_vec[n];
    }
  }
}

// One state row n of ssm_step_backward (below), over e: dH = carry + dy C_n,
// d(Δ⊙xc) += dH B_n, g = dH ⊙ H_{t-1} ⊙ decay, dΔ += g ⊙ A_n, dA_n += g ⊙ Δ,
// carry <- dH ⊙ decay. Four outputs per element, which separate Eigen
// expressions would each re-read from memory, so it is one plain loop; GCC
// vectorises it given restrict on the parameters (not on local pointers).
template <typename S>
void state_row_backward(int E, S c_n, S b_n, const S* __restrict dy, const S* __restrict h_prev,
                        const S* __restrict decay, const S* __restrict a_n,
                        const S* __restrict delta, S* __restrict carry, S* __restrict d_dx,
                        S* __restrict d_delta, S* __restrict da_n) {
  for (int e = 0; e < E; ++e) {
    const S dh = carry[e] + dy[e] * c_n;
    d_dx[e] += dh * b_n;
    const S g = dh * h_prev[e] * decay[e];
    d_delta[e] += g * a_n[e];
    da_n[e] += g * delta[e];
    carry[e] = dh * decay[e];
  }
}

// The same row at a start: H_{t-1} is 0, so there is no g, and no carry into
// t-1 (this is what cuts the gradient).
template <typename S>
void state_row_backward_at_start(int E, S c_n, S b_n, const S* __restrict dy,
                                 S* __restrict carry, S* __restrict d_dx) {
  for (int e = 0; e < E; ++e) {
    d_dx[e] += (carry[e] + dy[e] * c_n) * b_n;
    carry[e] = S(0);
  }
}

// The backward of ssm_step and of y = H C for one token, on n-major (N, E)
// blocks; carry holds dL/dH_t through step t+1 on entry, dL/dH_{t-1} on exit.
//   dC = H_t dy,  dB = dH (Δ⊙xc) = carry (Δ⊙xc) + C (dy·(Δ⊙xc)),  d(Δ⊙xc) = dH^T B,
//   dΔ = Σ_n g ⊙ A  (g = d(Δ A)),  dA += g ⊙ Δ.
// The two reductions over E run as Eigen GEMVs before carry is overwritten.
// h_prev == nullptr marks a start.
template <typename S>
void ssm_step_backward(const S* h_t, const S* h_prev, const S* decay, const S* a_t, const S* dy,
                       const S* delta, const S* delta_x, const S* b_vec, const S* c_vec,
                       S* carry, S* da_acc, S* d_dx, S* d_delta, S* d_b, S* d_c, int N, int E) {
  const ConstVecMap<S> dyv(dy, E), dxv(delta_x, E);
  VecMap<S>(d_c, N).noalias() = ConstMatMap<S>(h_t, N, E) * dyv;
  VecMap<S>(d_b, N).noalias() = ConstMatMap<S>(carry, N, E) * dxv;
  VecMap<S>(d_b, N) += ConstVecMap<S>(c_vec, N) * dyv.dot(dxv);
  std::fill(d_dx, d_dx + E, S(0));
  std::fill(d_delta, d_delta + E, S(0));
  for (int n = 0; n < N; ++n) {
    const size_t o = static_cast<size_t>(n) * E;
    if (h_prev)
      state_row_backward(E, c_vec[n], b_vec[n], dy, h_prev + o, decay + o, a_t + o, delta,
                         carry + o, d_dx, d_delta, da_acc + o);
    else
      state_row_backward_at_start(E, c_vec[n], b_vec[n], dy, carry + o, d_dx);
  }
}

// out (cols) += Σ_r X.row(r), row by row: Eigen's colwise() on a row-major
// matrix walks it column-packet by column-packet with a row stride, which at
// (T*B, E) sizes reads every cache line twice from outside L2.
template <typename S>
void add_column_sums(const Mat<S>& X, S* out) {
  ArrMap<S> acc(out, X.cols());
  for (Eigen::Index r = 0; r < X.rows(); ++r) acc += CArrMap<S>(row_ptr(X, r), X.cols());
}

// σ(v) over a whole array; exp(-v) = inf for very negative v gives exactly 0.
template <typename Derived>
auto sigmoid_array(const Eigen::ArrayBase<Derived>& v) {
  using S = typename Derived::Scalar;
  return (S(1) + (-v).exp()).inverse();
}

}  // namespace

// ---------------------------------------------------------------------------
template <typename S>
struct Mamba1Mixer<S>::Cache final : MixerCache {
  int T = 0, B = 0;
  std::vector<uint8_t> starts;   // (T*B)
  std::vector<int> first_valid;  // (T*B) earliest time token r's conv may read: its env's last
                                 // start, or -(d_conv-1) (the whole initial window) if none
  Mat<S> u;                      // (T*B, D) input, for dW_in
  Mat<S> xz;                     // (T*B, 2E) in_proj output [x z]
  Mat<S> conv_wt;                // (K, E) conv weight transposed: a tap is contiguous over E
  Mat<S> conv_pre;               // (T*B, E) conv output before silu
  Mat<S> sig_pre;                // (T*B, E) σ(conv_pre)
  Mat<S> xc;                     // (T*B, E) silu(conv_pre)
  Mat<S> dbc;                    // (T*B, R+2N) x_proj output [δ B C]
  Mat<S> dt_pre;                 // (T*B, E) W_dt δ + b_dt
  Mat<S> delta;                  // (T*B, E) Δ = softplus(dt_pre)
  Mat<S> delta_x;                // (T*B, E) Δ ⊙ xc
  Mat<S> a_t;                    // (N, E) A = -exp(A_log), transposed
  Mat<S> y;                      // (T*B, E) H C + D ⊙ xc, before the gate
  Mat<S> sig_z;                  // (T*B, E) σ(z)
  Mat<S> gated;                  // (T*B, E) out_proj input
  Mat<S> state0;                 // (B, state_size) state before t=0, H transposed to (N, E)
  Mat<S> h;                      // (N, E) one env's H at one step
  Vec<S> zeros;                  // (N*E) H_{t-1} after a reset
  // backward
  Mat<S> dgated, dy;             // (T*B, E)
  Mat<S> dxz;                    // (T*B, 2E) [dx dz]
  Mat<S> dxc;                    // (T*B, E) dL/dxc, then dL/dconv_pre
  Mat<S> ddelta;                 // (T*B, E) dL/dΔ, then dL/ddt_pre
  Mat<S> ddbc;                   // (T*B, R+2N) [dδ dB dC]
  Mat<S> h_hist, decay_hist;     // (T, N*E) one env's H_t and exp(Δ_t A), recomputed
  Mat<S> dh_carry;               // (N, E) dL/dH_t through step t+1
  Mat<S> da_acc;                 // (N, E) dL/dA, summed over tokens
  Vec<S> dd_skip;                // (E) dL/dD, summed over tokens
  Vec<S> d_dx;                   // (E) dL/d(Δ⊙xc) of one token
  Vec<S> d_delta;                // (E) dL/dΔ of one token through the decay
  Mat<S> dconv_wt;               // (K, E)
  Vec<S> dconv_b;                // (E)
};

template <typename S>
typename Mamba1Mixer<S>::Cache& Mamba1Mixer<S>::cache_of(MixerCache& base) const {
  auto* c = dynamic_cast<Cache*>(&base);
  MAMBARL_CHECK(c != nullptr, "Mamba1Mixer was given a cache made by another mixer");
  return *c;
}

template <typename S>
Mamba1Mixer<S>::Mamba1Mixer(const Mamba1Config& cfg, ParamLayout& layout, const std::string& prefix)
    : cfg_(cfg) {
  cfg_.validate();
  D_ = cfg_.d_model;
  E_ = cfg_.d_inner();
  N_ = cfg_.d_state;
  K_ = cfg_.d_conv;
  R_ = cfg_.resolved_dt_rank();
  // Registration order follows mamba_ssm's attribute order.
  in_proj_ = layout.add(prefix + "in_proj.weight", {2 * E_, D_}, true);
  conv_w_ = layout.add(prefix + "conv1d.weight", {E_, K_}, true);
  conv_b_ = layout.add(prefix + "conv1d.bias", {E_}, false);
  x_proj_ = layout.add(prefix + "x_proj.weight", {R_ + 2 * N_, E_}, true);
  dt_proj_w_ = layout.add(prefix + "dt_proj.weight", {E_, R_}, true);
  dt_proj_b_ = layout.add(prefix + "dt_proj.bias", {E_}, false);
  a_log_ = layout.add(prefix + "A_log", {E_, N_}, false);
  d_skip_ = layout.add(prefix + "D", {E_}, false);
  out_proj_ = layout.add(prefix + "out_proj.weight", {D_, E_}, true);
}

template <typename S>
size_t Mamba1Mixer<S>::state_size() const {
  return static_cast<size_t>(E_) * (N_ + K_ - 1);
}

template <typename S>
void Mamba1Mixer<S>::init_params(const ParamView<S>& P, Rng& rng) const {
  init_linear_default<S>(P.ptr(in_proj_), nullptr, 2 * E_, D_, rng);
  // Depthwise (groups = E): PyTorch's fan_in is in_channels/groups * d_conv = d_conv.
  init_linear_default<S>(P.ptr(conv_w_), P.ptr(conv_b_), E_, K_, rng);
  init_linear_default<S>(P.ptr(x_proj_), nullptr, R_ + 2 * N_, E_, rng);
  const double dt_std = 1.0 / std::sqrt(static_cast<double>(R_));
  S* w_dt = P.ptr(dt_proj_w_);
  for (int i = 0; i < E_ * R_; ++i) w_dt[i] = static_cast<S>(rng.uniform(-dt_std, dt_std));
  init_dt_bias(P.ptr(dt_proj_b_), E_, cfg_.dt_min, cfg_.dt_max, cfg_.dt_init_floor, rng);
  MatMap<S> a_log = P.mat(a_log_);  // (E, N)
  for (int n = 0; n < N_; ++n)
    a_log.col(n).setConstant(static_cast<S>(std::log(cfg_.a_init_scale * (n + 1.0))));
  P.vec(d_skip_).setOnes();
  init_linear_default<S>(P.ptr(out_proj_), nullptr, D_, E_, rng);
  P.vec(out_proj_) *= static_cast<S>(cfg_.out_proj_init_scale);
}

template <typename S>
std::unique_ptr<MixerCache> Mamba1Mixer<S>::make_cache() const {
  return std::make_unique<Cache>();
}

template <typename S>
const S* Mamba1Mixer<S>::conv_source(const Cache& c, int ts, int b, int first_valid) const {
  if (ts < first_valid) return nullptr;
  if (ts >= 0) return row_ptr(c.xz, static_cast<Eigen::Index>(ts) * c.B + b);
  // Window row j holds x at time j - (K-1): ts = -1 is the newest, row K-2.
  return row_ptr(c.state0, b) + static_cast<size_t>(E_) * (N_ + K_ - 1 + ts);
}

// ---------------------------------------------------------------------------
// Forward

template <typename S>
void Mamba1Mixer<S>::forward(const ParamView<S>& P, const Mat<S>& U, const uint8_t* starts, int T,
                             int B, S* state, size_t state_stride, Mat<S>& Y,
                             MixerCache& base) const {
  MAMBARL_CHECK(T > 0 && B > 0, "mamba1 forward: T (" << T << ") and B (" << B << ") must be positive");
  MAMBARL_CHECK(U.rows() == static_cast<Eigen::Index>(T) * B && U.cols() == D_,
                "mamba1 forward: U is (" << U.rows() << ", " << U.cols() << "), expected ("
                                         << T * B << ", " << D_ << ")");
  const size_t ss = state_size();
  MAMBARL_CHECK(B == 1 || state_stride >= ss,
                "mamba1 forward: state_stride (" << state_stride << ") < state_size (" << ss << ")");
  Cache& c = cache_of(base);
  const int M = T * B;
  c.T = T;
  c.B = B;
  c.starts.assign(starts, starts + M);
  c.first_valid.resize(static_cast<size_t>(M));
  for (int b = 0; b < B; ++b) {
    int fv = -(K_ - 1);
    for (int t = 0; t < T; ++t) {
      const int r = t * B + b;
      if (starts[r]) fv = t;
      c.first_valid[static_cast<size_t>(r)] = fv;
    }
  }
  c.u = U;
  c.state0.resize(B, static_cast<Eigen::Index>(ss));
  // H goes n-major here once, so that both scans start from it without a copy.
  const size_t ne = static_cast<size_t>(N_) * E_;
  for (int b = 0; b < B; ++b) {
    const S* in = state + b * state_stride;
    MatMap<S>(row_ptr(c.state0, b), N_, E_) = ConstMatMap<S>(in, E_, N_).transpose();
    std::memcpy(row_ptr(c.state0, b) + ne, in + ne, (ss - ne) * sizeof(S));
  }

  linear_forward<S>(U, P.mat(in_proj_), nullptr, c.xz);  // (M, 2E)
  conv_forward(P, state, state_stride, c);
  dt_forward(P, c);
  scan_forward(P, state, state_stride, c);

  // Gate: g = y ⊙ silu(z).
  const auto z = c.xz.rightCols(E_).array();
  c.sig_z = sigmoid_array(z).matrix();
  c.gated = (c.y.array() * z * c.sig_z.array()).matrix();
  linear_forward<S>(c.gated, P.mat(out_proj_), nullptr, Y);  // (M, D)
}

// xc = silu(Σ_k w_c[:,k] ⊙ x_{t-K+1+k} + b_c), taps before the env's last
// start read zero; then the carried window becomes the last K-1 x values
// under the same rule.
template <typename S>
void Mamba1Mixer<S>::conv_forward(const ParamView<S>& P, S* state, size_t state_stride,
                                  Cache& c) const {
  const int T = c.T, B = c.B;
  const Eigen::Index M = static_cast<Eigen::Index>(T) * B;
  c.conv_wt = P.mat(conv_w_).transpose();
  c.conv_pre.resize(M, E_);
  c.sig_pre.resize(M, E_);
  c.xc.resize(M, E_);
  const CArrMap<S> bias(P.ptr(conv_b_), E_);
  for (int t = 0; t < T; ++t)
    for (int b = 0; b < B; ++b) {
      const Eigen::Index r = static_cast<Eigen::Index>(t) * B + b;
      ArrMap<S> pre(row_ptr(c.conv_pre, r), E_);
      pre = bias;
      for (int k = 0; k < K_; ++k) {
        const S* src = conv_source(c, t - K_ + 1 + k, b, c.first_valid[static_cast<size_t>(r)]);
        if (src) pre += CArrMap<S>(row_ptr(c.conv_wt, k), E_) * CArrMap<S>(src, E_);
      }
      // silu while the row is in L1
      ArrMap<S> sig(row_ptr(c.sig_pre, r), E_);
      sig = sigmoid_array(pre);
      ArrMap<S>(row_ptr(c.xc, r), E_) = pre * sig;
    }

  // Reads only c.xz and c.state0, so writing the state in place is safe.
  for (int b = 0; b < B; ++b) {
    S* window = state + b * state_stride + static_cast<size_t>(E_) * N_;  // (K-1, E)
    const int fv = c.first_valid[static_cast<size_t>((T - 1) * B + b)];
    for (int j = 0; j < K_ - 1; ++j) {
      const S* src = conv_source(c, T - (K_ - 1) + j, b, fv);
      ArrMap<S> dst(window + static_cast<size_t>(j) * E_, E_);
      if (src)
        dst = CArrMap<S>(src, E_);
      else
        dst.setZero();
    }
  }
}

// [δ B C] = W_x xc; Δ = softplus(W_dt δ + b_dt); also Δ ⊙ xc and A.
template <typename S>
void Mamba1Mixer<S>::dt_forward(const ParamView<S>& P, Cache& c) const {
  linear_forward<S>(c.xc, P.mat(x_proj_), nullptr, c.dbc);  // (M, R+2N)
  linear_forward<S>(c.dbc.leftCols(R_), P.mat(dt_proj_w_), P.ptr(dt_proj_b_), c.dt_pre);  // (M, E)
  // softplus(v) = max(v, 0) + log1p(exp(-|v|)): no overflow, and vectorised
  // (a select between two branches would fall back to scalar exp).
  const auto v = c.dt_pre.array();
  c.delta = (v.max(S(0)) + (-v.abs()).exp().log1p()).matrix();
  c.delta_x = (c.delta.array() * c.xc.array()).matrix();
  c.a_t = -P.mat(a_log_).transpose().array().exp().matrix();
}

// H_t = exp(Δ_t A) ⊙ H_{t-1} + (Δ_t ⊙ xc_t) ⊗ B_t,  y_t = H_t C_t + D ⊙ xc_t,
// env by env; H_{t-1} is zero at a start. The final H goes back (e-major).
template <typename S>
void Mamba1Mixer<S>::scan_forward(const ParamView<S>& P, S* state, size_t state_stride,
                                  Cache& c) const {
  const int T = c.T, B = c.B;
  c.y.resize(static_cast<Eigen::Index>(T) * B, E_);
  c.h.resize(N_, E_);
  c.zeros.setZero(static_cast<Eigen::Index>(N_) * E_);
  const CArrMap<S> d_skip(P.ptr(d_skip_), E_);
  for (int b = 0; b < B; ++b) {
    for (int t = 0; t < T; ++t) {
      const Eigen::Index r = static_cast<Eigen::Index>(t) * B + b;
      const S* bc = row_ptr(c.dbc, r);
      const S* h_prev = c.starts[static_cast<size_t>(r)] ? c.zeros.data()
                        : t == 0                          ? row_ptr(c.state0, b)
                                                          : c.h.data();
      ssm_step(h_prev, c.h.data(), static_cast<S*>(nullptr), c.a_t.data(), row_ptr(c.delta, r),
               row_ptr(c.delta_x, r), bc + R_, N_, E_);
      ArrMap<S> y(row_ptr(c.y, r), E_);
      y = d_skip * CArrMap<S>(row_ptr(c.xc, r), E_);
      for (int n = 0; n < N_; ++n) y += CArrMap<S>(row_ptr(c.h, n), E_) * bc[R_ + N_ + n];
    }
    MatMap<S>(state + b * state_stride, E_, N_) = c.h.transpose();
  }
}

// ---------------------------------------------------------------------------
// Backward

template <typename S>
void Mamba1Mixer<S>::backward(const ParamView<S>& P, const Mat<S>& dY, MixerCache& base,
                              const ParamView<S>& G, Mat<S>& dU) const {
  Cache& c = cache_of(base);
  const Eigen::Index M = static_cast<Eigen::Index>(c.T) * c.B;
  MAMBARL_CHECK(dY.rows() == M && dY.cols() == D_,
                "mamba1 backward: dY is (" << dY.rows() << ", " << dY.cols() << "), expected ("
                                           << M << ", " << D_ << ")");
  linear_backward<S>(c.gated, P.mat(out_proj_), dY, G.mat(out_proj_), nullptr, &c.dgated);

  // Gate: dy = dg ⊙ silu(z); dz = dg ⊙ y ⊙ σ(z) (1 + z (1 - σ(z))).
  c.dxz.resize(M, 2 * E_);
  const auto z = c.xz.rightCols(E_).array();
  const auto sz = c.sig_z.array();
  c.dy = (c.dgated.array() * z * sz).matrix();
  c.dxz.rightCols(E_) =
      (c.dgated.array() * c.y.array() * sz * (S(1) + z * (S(1) - sz))).matrix();

  scan_backward(P, G, c);
  dt_backward(P, G, c);
  conv_backward(P, G, c);
  linear_backward<S>(c.u, P.mat(in_proj_), c.dxz, G.mat(in_proj_), nullptr, &dU);
}

// Env by env: recompute H_t and exp(Δ_t A) for all t, then sweep t backwards
// carrying dL/dH (ssm_step_backward). The initial state takes part in dΔ and
// dA but receives no gradient itself.
template <typename S>
void Mamba1Mixer<S>::scan_backward(const ParamView<S>& P, const ParamView<S>& G, Cache& c) const {
  const int T = c.T, B = c.B, NE = N_ * E_;
  const Eigen::Index M = static_cast<Eigen::Index>(T) * B;
  c.ddelta.resize(M, E_);
  c.dxc.resize(M, E_);
  c.ddbc.resize(M, R_ + 2 * N_);
  c.h_hist.resize(T, NE);
  c.decay_hist.resize(T, NE);
  c.dh_carry.resize(N_, E_);
  c.da_acc.setZero(N_, E_);
  c.dd_skip.setZero(E_);
  c.d_dx.resize(E_);
  c.d_delta.resize(E_);
  const CArrMap<S> d_skip(P.ptr(d_skip_), E_);
  ArrMap<S> dd_skip(c.dd_skip.data(), E_);

  for (int b = 0; b < B; ++b) {
    // H_{t-1} of step t, or nullptr at a start.
    auto h_prev_of = [&](int t) -> const S* {
      if (c.starts[static_cast<size_t>(t) * B + b]) return nullptr;
      return t == 0 ? row_ptr(c.state0, b) : row_ptr(c.h_hist, t - 1);
    };
    for (int t = 0; t < T; ++t) {
      const Eigen::Index r = static_cast<Eigen::Index>(t) * B + b;
      const S* hp = h_prev_of(t);
      ssm_step(hp ? hp : c.zeros.data(), row_ptr(c.h_hist, t), row_ptr(c.decay_hist, t),
               c.a_t.data(), row_ptr(c.delta, r), row_ptr(c.delta_x, r), row_ptr(c.dbc, r) + R_,
               N_, E_);
    }

    c.dh_carry.setZero();
    for (int t = T - 1; t >= 0; --t) {
      const Eigen::Index r = static_cast<Eigen::Index>(t) * B + b;
      const S* bc = row_ptr(c.dbc, r);
      S* dbc = row_ptr(c.ddbc, r);
      const S* dy = row_ptr(c.dy, r);
      ssm_step_backward(row_ptr(c.h_hist, t), h_prev_of(t), row_ptr(c.decay_hist, t),
                        c.a_t.data(), dy, row_ptr(c.delta, r), row_ptr(c.delta_x, r), bc + R_,
                        bc + R_ + N_, c.dh_carry.data(), c.da_acc.data(), c.d_dx.data(),
                        c.d_delta.data(), dbc + R_, dbc + R_ + N_, N_, E_);
      // Δ⊙xc and the skip y += D ⊙ xc.
      const CArrMap<S> xc(row_ptr(c.xc, r), E_), dl(row_ptr(c.delta, r), E_), dyv(dy, E_),
          d_dx(c.d_dx.data(), E_);
      ArrMap<S>(row_ptr(c.ddelta, r), E_) = c.d_delta.array() + d_dx * xc;
      ArrMap<S>(row_ptr(c.dxc, r), E_) = d_dx * dl + dyv * d_skip;
      dd_skip += dyv * xc;
    }
  }

  // A = -exp(A_log): dA_log = dA ⊙ A.
  G.mat(a_log_) += (c.da_acc.array() * c.a_t.array()).matrix().transpose();
  G.vec(d_skip_) += c.dd_skip;
}

// Through Δ = softplus(W_dt δ + b_dt) (softplus' = σ) and [δ B C] = W_x xc.
template <typename S>
void Mamba1Mixer<S>::dt_backward(const ParamView<S>& P, const ParamView<S>& G, Cache& c) const {
  c.ddelta.array() *= sigmoid_array(c.dt_pre.array());
  linear_backward<S>(c.dbc.leftCols(R_), P.mat(dt_proj_w_), c.ddelta, G.mat(dt_proj_w_),
                     nullptr, nullptr);
  add_column_sums(c.ddelta, G.ptr(dt_proj_b_));
  c.ddbc.leftCols(R_).noalias() = c.ddelta * P.mat(dt_proj_w_);
  linear_backward<S>(c.xc, P.mat(x_proj_), c.ddbc, G.mat(x_proj_), nullptr, nullptr);
  c.dxc.noalias() += c.ddbc * P.mat(x_proj_);
}

// Through xc = silu(pre), then the conv's transpose over the same taps as
// the forward: dw_c[:,k] gets dpre ⊙ source (window rows included); dx_t
// gathers dpre_{t'} w_c[:,k] over the in-chunk tokens t' whose tap k read
// x_t (no gradient into the initial window). Going backwards in t, every
// dpre a gather needs (t' >= t) is final by then, and each dx row is
// written once.
template <typename S>
void Mamba1Mixer<S>::conv_backward(const ParamView<S>& P, const ParamView<S>& G, Cache& c) const {
  const int T = c.T, B = c.B;
  c.dconv_wt.setZero(K_, E_);
  c.dconv_b.setZero(E_);
  ArrMap<S> dbias(c.dconv_b.data(), E_);
  for (int t = T - 1; t >= 0; --t)
    for (int b = 0; b < B; ++b) {
      const Eigen::Index r = static_cast<Eigen::Index>(t) * B + b;
      ArrMap<S> dpre(row_ptr(c.dxc, r), E_);  // dL/dxc in, dL/dpre out
      const CArrMap<S> pre(row_ptr(c.conv_pre, r), E_), s(row_ptr(c.sig_pre, r), E_);
      dpre *= s * (S(1) + pre * (S(1) - s));
      dbias += dpre;
      for (int k = 0; k < K_; ++k) {
        const S* src = conv_source(c, t - K_ + 1 + k, b, c.first_valid[static_cast<size_t>(r)]);
        if (src) ArrMap<S>(row_ptr(c.dconv_wt, k), E_) += dpre * CArrMap<S>(src, E_);
      }
      ArrMap<S> dx(row_ptr(c.dxz, r), E_);
      dx.setZero();
      for (int k = 0; k < K_; ++k) {
        const int tr = t + K_ - 1 - k;  // the token whose tap k reads x_t
        if (tr >= T || t < c.first_valid[static_cast<size_t>(tr) * B + b]) continue;
        dx += CArrMap<S>(row_ptr(c.dxc, static_cast<Eigen::Index>(tr) * B + b), E_) *
              CArrMap<S>(row_ptr(c.conv_wt, k), E_);
      }
    }
  G.mat(conv_w_) += c.dconv_wt.transpose();
  G.vec(conv_b_) += c.dconv_b;
}

template class Mamba1Mixer<float>;
template class Mamba1Mixer<double>;

}  // namespace mambarl
