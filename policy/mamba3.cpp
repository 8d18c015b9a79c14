// Mamba-3 SISO mixer, CPU reference: forward and backward through time with
// per-env resets (policy/MATH.md "Mamba-3 SISO mixer", "Episode boundaries").
//
// Work split: everything that is not recurrent runs over all T*B token rows
// at once (in_proj/out_proj as whole-matrix GEMMs, the per-head scalars, the
// B/C norms, the rotations, the gate); only the angle scan and the S
// recurrence loop over time, env by env.
//
// Layout: per token, k, q, x, the angles and their gradients are stored
// lane-major, element (i, h) at i*H + h, so the H heads sit side by side in
// SIMD lanes. The recurrence S_h = α_h S_h + ... then updates one (p, n)
// entry of all heads per vector op, and y = S q, dS k, Sᵀ dy, ... become
// lane-wise multiply-adds instead of per-row dot products (which cost a
// horizontal sum each). The (T*B, E) activations (z, x, y, gate) keep the
// official (h, p) order; x and y are transposed per token at the recurrence.
//
// Memory: forward keeps no S history. Backward recomputes one env's S_t for
// all t from the saved initial state (T×P×N×H scalars, which stay in cache)
// and then sweeps that env backwards; this replaces a (T*B, H×P×N) history,
// tens of MB of memory traffic at training sizes.
#include "policy/mamba3.hpp"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <vector>

#include "policy/ops.hpp"

namespace mambarl {

void Mamba3Config::validate() const {
  MAMBARL_CHECK(d_model > 0, "mamba3.d_model (" << d_model << ") must be positive");
  MAMBARL_CHECK(d_state > 0, "mamba3.d_state (" << d_state << ") must be positive");
  MAMBARL_CHECK(expand > 0, "mamba3.expand (" << expand << ") must be positive");
  MAMBARL_CHECK(headdim > 0, "mamba3.headdim (" << headdim << ") must be positive");
  MAMBARL_CHECK(d_inner() % headdim == 0,
                "mamba3.headdim (" << headdim << ") must divide d_inner (" << d_inner() << ")");
  MAMBARL_CHECK(nheads() <= kMaxHeads, "mamba3.headdim (" << headdim << ") gives nheads "
                                           << nheads() << " = d_inner / headdim, more than "
                                           << kMaxHeads);
  MAMBARL_CHECK(ngroups > 0, "mamba3.ngroups (" << ngroups << ") must be positive");
  MAMBARL_CHECK(nheads() % ngroups == 0,
                "mamba3.ngroups (" << ngroups << ") must divide nheads (" << nheads() << ")");
  MAMBARL_CHECK(rope_fraction == 0.5 || rope_fraction == 1.0,
                "mamba3.rope_fraction (" << rope_fraction << ") must be 0.5 or 1.0");
  MAMBARL_CHECK(num_rope_angles() > 0, "mamba3.d_state (" << d_state << ") gives no rope angle at "
                                                          "rope_fraction " << rope_fraction);
  MAMBARL_CHECK(a_floor > 0, "mamba3.a_floor (" << a_floor << ") must be positive");
  MAMBARL_CHECK(dt_min > 0, "mamba3.dt_min (" << dt_min << ") must be positive");
  MAMBARL_CHECK(dt_max >= dt_min,
                "mamba3.dt_max (" << dt_max << ") must be >= dt_min (" << dt_min << ")");
  MAMBARL_CHECK(dt_init_floor >= 0,
                "mamba3.dt_init_floor (" << dt_init_floor << ") must be non-negative");
  MAMBARL_CHECK(out_proj_init_scale > 0,
                "mamba3.out_proj_init_scale (" << out_proj_init_scale << ") must be positive");
}

namespace {

constexpr double kPi = 3.141592653589793238462643383279502884;

// dst (cols, rows) = src (rows, cols)ᵀ, both row-major and distinct.
template <typename S>
void transpose_into(S* dst, const S* src, int rows, int cols) {
  Eigen::Map<Mat<S>>(dst, cols, rows) = Eigen::Map<const Mat<S>>(src, rows, cols).transpose();
}

// The carried S, k_prev, v_prev of one env between the interface layout
// (H, P*N), (H, N), (H, P) and the lane-major (P*N, H), (N, H), (P, H).
template <typename S>
void carried_to_lanes(const S* state, S* lanes, int H, int P, int N) {
  const int HPN = H * P * N;
  transpose_into(lanes, state, H, P * N);
  transpose_into(lanes + HPN, state + HPN, H, N);
  transpose_into(lanes + HPN + H * N, state + HPN + H * N, H, P);
}
template <typename S>
void lanes_to_carried(const S* s_lanes, const S* k_lanes, const S* v_lanes, S* state, int H, int P,
                      int N) {
  const int HPN = H * P * N;
  transpose_into(state, s_lanes, P * N, H);
  transpose_into(state + HPN, k_lanes, N, H);
  transpose_into(state + HPN + H * N, v_lanes, P, H);
}

// Pointers of one env at one step of the backward sweep; all lane-major.
template <typename S>
struct LaneGrad {
  const S *alpha, *beta, *gamma, *d_skip;  // (H)
  const S *x, *dy, *v_prev;                // (P, H)
  const S *s, *s_prev;                     // (P*N, H) S_t and S_{t-1}
  const S *k, *q, *k_prev;                 // (N, H) rotated
  S* ds;                        // (P*N, H) in: dL/dS_t from step t+1; out: dL/dS_{t-1}
  S* dv_carry;                  // (P, H) in: dL/dx_t from step t+1; out: dL/dx_{t-1} via step t
  S* dk_carry;                  // (N, H) in: dL/dk_t from step t+1; out: dL/dk_{t-1} via step t
  S *dk, *dq;                   // (N, H) out: dL/dk_t, dL/dq_t
  S* dx;                        // (P, H) out: dL/dx_t
  S *dalpha, *dbeta, *dgamma;   // (H) out
  S* dd_skip;                   // (H) accumulated
};

// The recurrence's per-token work with the H heads as lanes: HC = H known at
// compile time (the locals below are then SIMD registers) or Eigen::Dynamic
// (locals on the stack, capacity kMaxHeads). Neither allocates.
template <typename S, int HC>
struct LaneKernels {
  using Lane = Eigen::Array<S, HC, 1, Eigen::ColMajor,
                            HC == Eigen::Dynamic ? Mamba3Config::kMaxHeads : HC>;
  using LMap = Eigen::Map<Eigen::Array<S, HC, 1>>;
  using CLMap = Eigen::Map<const Eigen::Array<S, HC, 1>>;
  // The lane count, a compile-time constant when HC is.
  static int width(int H) { return HC == Eigen::Dynamic ? H : HC; }

  // s_out = α s_in + β v_prev ⊗ k_prev + γ x ⊗ k, per head; s_out may alias
  // s_in. The forward and the backward's recompute both call this, so the
  // recomputed S_t is the forward's, bit for bit.
  static void update(S* s_out, const S* s_in, const S* alpha, const S* beta, const S* gamma,
                     const S* v_prev, const S* k_prev, const S* x, const S* k, int P, int N,
                     int H_rt) {
    const int H = width(H_rt);
    const CLMap al(alpha, H);
    for (int p = 0; p < P; ++p) {
      const Lane bv = CLMap(beta, H) * CLMap(v_prev + p * H, H);
      const Lane gx = CLMap(gamma, H) * CLMap(x + p * H, H);
      for (int n = 0; n < N; ++n) {
        const int o = (p * N + n) * H;
        LMap(s_out + o, H) = al * CLMap(s_in + o, H) + bv * CLMap(k_prev + n * H, H) +
                             gx * CLMap(k + n * H, H);
      }
    }
  }

  // y = S q + D x, per head.
  static void output(const S* s, const S* q, const S* d_skip, const S* x, S* y, int P, int N,
                     int H_rt) {
    const int H = width(H_rt);
    for (int p = 0; p < P; ++p) {
      Lane acc = CLMap(d_skip, H) * CLMap(x + p * H, H);
      for (int n = 0; n < N; ++n) acc += CLMap(s + (p * N + n) * H, H) * CLMap(q + n * H, H);
      LMap(y + p * H, H) = acc;
    }
  }

  // The pair (x0, x1) of rows, per head, rotated by the angle with lanes (c, s):
  // (x0 c - x1 s, x0 s + x1 c), the official SISO convention.
  static void rotate(S* x0, S* x1, const S* c, const S* s, int H_rt) {
    const int H = width(H_rt);
    const Lane a = CLMap(x0, H), b = CLMap(x1, H);
    LMap(x0, H) = a * CLMap(c, H) - b * CLMap(s, H);
    LMap(x1, H) = a * CLMap(s, H) + b * CLMap(c, H);
  }
  // Its backward: (d0, d1) w.r.t. the rotated pair (r0, r1) become w.r.t. the
  // input pair (Rᵀ d), and dφ += -d0 r1 + d1 r0.
  static void rotate_backward(S* d0, S* d1, const S* r0, const S* r1, const S* c, const S* s,
                              S* dphi, int H_rt) {
    const int H = width(H_rt);
    const Lane g0 = CLMap(d0, H), g1 = CLMap(d1, H);
    LMap(dphi, H) += g1 * CLMap(r0, H) - g0 * CLMap(r1, H);
    LMap(d0, H) = g0 * CLMap(c, H) + g1 * CLMap(s, H);
    LMap(d1, H) = g1 * CLMap(c, H) - g0 * CLMap(s, H);
  }

  // One step of the sweep, per head, with dS_t = dS_carry + dy ⊗ q:
  //   dq = S_tᵀ dy,  dα = <dS_t, S_{t-1}>,  dγ = xᵀ dS_t k,  dβ = v_prevᵀ dS_t k_prev,
  //   dk = γ dS_tᵀ x + dk_carry,  dx = D dy + γ dS_t k + dv_carry,  dD += dy·x,
  //   carries to t-1: α dS_t, β dS_tᵀ v_prev (to k_{t-1}), β dS_t k_prev (to x_{t-1}).
  // gx, bv, u, w: (P, H) scratch owned by the caller.
  static void backward(const LaneGrad<S>& g, S* gx, S* bv, S* u, S* w, int P, int N, int H_rt) {
    const int H = width(H_rt);
    // Local copies: stores through the output pointers could alias g, which
    // would force a reload of each field on every (n, p).
    const S *x = g.x, *dy = g.dy, *v_prev = g.v_prev, *s = g.s, *s_prev = g.s_prev;
    S* ds = g.ds;
    const CLMap alpha(g.alpha, H), beta(g.beta, H), gamma(g.gamma, H), d_skip(g.d_skip, H);
    for (int p = 0; p < P; ++p) {
      LMap(gx + p * H, H) = gamma * CLMap(x + p * H, H);
      LMap(bv + p * H, H) = beta * CLMap(v_prev + p * H, H);
    }
    std::fill(u, u + P * H, S(0));
    std::fill(w, w + P * H, S(0));
    // n outer: the per-n sums (dq, dk, dk_prev) stay in registers; the
    // per-p ones (u, w) go through the small (P, H) scratch.
    Lane dalpha = Lane::Zero(H);
    for (int n = 0; n < N; ++n) {
      const Lane qn = CLMap(g.q + n * H, H), kn = CLMap(g.k + n * H, H),
                 kpn = CLMap(g.k_prev + n * H, H);
      Lane dq = Lane::Zero(H), dk = CLMap(g.dk_carry + n * H, H), dk_prev = Lane::Zero(H);
      for (int p = 0; p < P; ++p) {
        const int o = (p * N + n) * H;
        LMap ds_pn(ds + o, H);
        const Lane dyp = CLMap(dy + p * H, H);
        const Lane r = ds_pn + dyp * qn;  // dL/dS_t at (p, n)
        LMap(u + p * H, H) += r * kn;
        LMap(w + p * H, H) += r * kpn;
        dalpha += r * CLMap(s_prev + o, H);
        dq += dyp * CLMap(s + o, H);
        dk += CLMap(gx + p * H, H) * r;
        dk_prev += CLMap(bv + p * H, H) * r;
        ds_pn = alpha * r;
      }
      LMap(g.dq + n * H, H) = dq;
      LMap(g.dk + n * H, H) = dk;
      LMap(g.dk_carry + n * H, H) = dk_prev;  // dk_carry[n] was read above, before this write
    }
    Lane dbeta = Lane::Zero(H), dgamma = Lane::Zero(H), dd = Lane::Zero(H);
    for (int p = 0; p < P; ++p) {
      const Lane dyp = CLMap(dy + p * H, H), xp = CLMap(x + p * H, H);
      const Lane up = CLMap(u + p * H, H), wp = CLMap(w + p * H, H);
      LMap(g.dx + p * H, H) = d_skip * dyp + gamma * up + CLMap(g.dv_carry + p * H, H);
      LMap(g.dv_carry + p * H, H) = beta * wp;
      dgamma += xp * up;
      dbeta += CLMap(v_prev + p * H, H) * wp;
      dd += dyp * xp;
    }
    LMap(g.dalpha, H) = dalpha;
    LMap(g.dbeta, H) = dbeta;
    LMap(g.dgamma, H) = dgamma;
    LMap(g.dd_skip, H) += dd;
  }
};

// Calls f(LaneKernels<S, HC>{}) with HC = H for the common head counts, else Dynamic.
template <typename S, typename F>
void with_lane_kernels(int H, F&& f) {
  switch (H) {
    case 8: f(LaneKernels<S, 8>{}); break;
    case 16: f(LaneKernels<S, 16>{}); break;
    case 32: f(LaneKernels<S, 32>{}); break;
    case 64: f(LaneKernels<S, 64>{}); break;
    default: f(LaneKernels<S, Eigen::Dynamic>{}); break;
  }
}

}  // namespace

// ---------------------------------------------------------------------------
template <typename S>
struct Mamba3Mixer<S>::Cache final : MixerCache {
  int T = 0, B = 0;
  std::vector<uint8_t> starts;            // (T*B)
  Mat<S> u;                               // (T*B, D) input, for dW_in
  Mat<S> zx;                              // (T*B, R) in_proj output [z x B C dd_dt dd_A λ θ]
  Mat<S> dt, a, lam, alpha, beta, gamma;  // (T*B, H)
  Mat<S> dt_grad;                         // (T*B, H) d dt / d dd_dt = σ(dd_dt + dt_bias)
  Mat<S> tanh_theta;                      // (T*B, Na)
  Mat<S> b_raw, c_raw, b_n, c_n;          // (T*B*G, N) row r*G+g: group g of token r
  Vec<S> b_rstd, c_rstd;                  // (T*B*G)
  Mat<S> phi, phi_cos, phi_sin;           // (T*B, Na*H) lane-major angle after step t
  Mat<S> bias_t;                          // (2, N*H) B_bias, C_bias lane-major
  Mat<S> k, q;                            // (T*B, N*H) lane-major, biased and rotated
  Mat<S> x_ph;                            // (T*B, P*H) lane-major x
  Mat<S> y;                               // (T*B, E) S q + D x, before the gate
  Mat<S> sig_z;                           // (T*B, E) σ(z)
  Vec<S> y_rstd;                          // (T*B*H) gated norm 1/rms per head (if used)
  Mat<S> gated;                           // (T*B, E) out_proj input
  Mat<S> state0;                          // (B, state_size) state before t=0
  Vec<S> lanes;                           // (state_size) one env's state, lane-major
  Vec<S> zeros;                           // (H*P*N) what S, k_prev, v_prev are after a reset
  Vec<S> y_lane;                          // (P*H) one token's y, or dy in the backward
  // backward
  Mat<S> dgated, dy;                      // (T*B, E)
  Mat<S> dzx;                             // (T*B, R)
  Mat<S> dk, dq;                          // (T*B, N*H) w.r.t. rotated k, q; then un-rotated
  Mat<S> dalpha, dbeta, dgamma, ddt;      // (T*B, H)
  Mat<S> dphi;                            // (T*B, Na*H) local, then through the scan
  Mat<S> db_n, dc_n, db_raw, dc_raw;      // (T*B*G, N)
  Mat<S> dbias_t;                         // (2, N*H) lane-major B_bias, C_bias gradients
  Mat<S> s_hist;                          // (T, P*N*H) one env's S after each step
  Vec<S> ds_carry;                        // (P*N*H) dL/dS_{t-1}
  Vec<S> dk_carry;                        // (N*H) dL/dk_{t-1} through step t's β term
  Vec<S> dv_carry;                        // (P*H) dL/dx_{t-1} through step t's β term
  Vec<S> dx_lane;                         // (P*H) one token's dL/dx
  Mat<S> lane_tmp;                        // (4, P*H) the sweep's γx, βv, dS k, dS k_prev
  Vec<S> dphi_carry;                      // (Na*H)
};

template <typename S>
typename Mamba3Mixer<S>::Cache& Mamba3Mixer<S>::cache_of(MixerCache& base) const {
  auto* c = dynamic_cast<Cache*>(&base);
  MAMBARL_CHECK(c != nullptr, "Mamba3Mixer was given a cache made by another mixer");
  return *c;
}

template <typename S>
Mamba3Mixer<S>::Mamba3Mixer(const Mamba3Config& cfg, ParamLayout& layout, const std::string& prefix)
    : cfg_(cfg) {
  cfg_.validate();
  D_ = cfg_.d_model;
  E_ = cfg_.d_inner();
  N_ = cfg_.d_state;
  P_ = cfg_.headdim;
  H_ = cfg_.nheads();
  G_ = cfg_.ngroups;
  Na_ = cfg_.num_rope_angles();
  R_ = cfg_.in_proj_rows();
  // The official module's split order: z, x, B, C, dd_dt, dd_A, trap (λ), angles (θ).
  o_x_ = E_;
  o_b_ = 2 * E_;
  o_c_ = o_b_ + G_ * N_;
  o_dt_ = o_c_ + G_ * N_;
  o_a_ = o_dt_ + H_;
  o_lam_ = o_a_ + H_;
  o_th_ = o_lam_ + H_;
  // Registration order follows the official module's attribute order.
  in_proj_ = layout.add(prefix + "in_proj.weight", {R_, D_}, true);
  dt_bias_ = layout.add(prefix + "dt_bias", {H_}, false);
  b_bias_ = layout.add(prefix + "B_bias", {H_, N_}, false);
  c_bias_ = layout.add(prefix + "C_bias", {H_, N_}, false);
  b_norm_ = layout.add(prefix + "B_norm.weight", {N_}, false);
  c_norm_ = layout.add(prefix + "C_norm.weight", {N_}, false);
  d_skip_ = layout.add(prefix + "D", {H_}, false);
  if (cfg_.is_outproj_norm) norm_ = layout.add(prefix + "norm.weight", {E_}, false);
  out_proj_ = layout.add(prefix + "out_proj.weight", {D_, E_}, true);
}

template <typename S>
size_t Mamba3Mixer<S>::state_size() const {
  return static_cast<size_t>(H_) * (P_ * N_ + N_ + P_ + Na_);
}

template <typename S>
void Mamba3Mixer<S>::init_params(const ParamView<S>& P, Rng& rng) const {
  init_linear_default<S>(P.ptr(in_proj_), nullptr, R_, D_, rng);
  init_dt_bias(P.ptr(dt_bias_), H_, cfg_.dt_min, cfg_.dt_max, cfg_.dt_init_floor, rng);
  P.vec(b_bias_).setOnes();
  P.vec(c_bias_).setOnes();
  P.vec(b_norm_).setOnes();
  P.vec(c_norm_).setOnes();
  P.vec(d_skip_).setOnes();
  if (norm_ >= 0) P.vec(norm_).setOnes();
  init_linear_default<S>(P.ptr(out_proj_), nullptr, D_, E_, rng);
  P.vec(out_proj_) *= static_cast<S>(cfg_.out_proj_init_scale);
}

template <typename S>
std::unique_ptr<MixerCache> Mamba3Mixer<S>::make_cache() const {
  return std::make_unique<Cache>();
}

// ---------------------------------------------------------------------------
// Forward

template <typename S>
void Mamba3Mixer<S>::forward(const ParamView<S>& P, const Mat<S>& U, const uint8_t* starts, int T,
                             int B, S* state, size_t state_stride, Mat<S>& Y,
                             MixerCache& base) const {
  MAMBARL_CHECK(T > 0 && B > 0, "mamba3 forward: T (" << T << ") and B (" << B << ") must be positive");
  MAMBARL_CHECK(U.rows() == static_cast<Eigen::Index>(T) * B && U.cols() == D_,
                "mamba3 forward: U is (" << U.rows() << ", " << U.cols() << "), expected ("
                                         << T * B << ", " << D_ << ")");
  const size_t ss = state_size();
  MAMBARL_CHECK(B == 1 || state_stride >= ss,
                "mamba3 forward: state_stride (" << state_stride << ") < state_size (" << ss << ")");
  Cache& c = cache_of(base);
  const int M = T * B;
  c.T = T;
  c.B = B;
  c.starts.assign(starts, starts + M);
  c.u = U;
  c.state0.resize(B, static_cast<Eigen::Index>(ss));
  for (int b = 0; b < B; ++b)
    std::memcpy(row_ptr(c.state0, b), state + b * state_stride, ss * sizeof(S));
  c.lanes.resize(static_cast<Eigen::Index>(ss));
  c.zeros.setZero(H_ * P_ * N_);

  linear_forward<S>(U, P.mat(in_proj_), nullptr, c.zx);  // (M, R)
  head_scalars_forward(P, c);

  // B and C: RMSNorm over N within each group (rows of (M*G, N)).
  c.b_raw.resize(static_cast<Eigen::Index>(M) * G_, N_);
  c.c_raw.resize(static_cast<Eigen::Index>(M) * G_, N_);
  for (int r = 0; r < M; ++r) {
    std::memcpy(row_ptr(c.b_raw, static_cast<Eigen::Index>(r) * G_), row_ptr(c.zx, r) + o_b_,
                sizeof(S) * G_ * N_);
    std::memcpy(row_ptr(c.c_raw, static_cast<Eigen::Index>(r) * G_), row_ptr(c.zx, r) + o_c_,
                sizeof(S) * G_ * N_);
  }
  rmsnorm_forward(c.b_raw, P.ptr(b_norm_), c.b_n, c.b_rstd);
  rmsnorm_forward(c.c_raw, P.ptr(c_norm_), c.c_n, c.c_rstd);

  angles_forward(state, state_stride, c);
  rotate_qk(P, c);
  ssm_forward(P, state, state_stride, c);
  gate_forward(P, c);
  linear_forward<S>(c.gated, P.mat(out_proj_), nullptr, Y);  // (M, D)
}

// dt = softplus(dd_dt + dt_bias), A = min(-heavy_tail(dd_A), -a_floor),
// λ = σ(λ_raw), α = exp(A dt), β = α dt (1-λ), γ = λ dt, all (M, H); and
// tanh(θ) (M, Na). Vectorised over whole blocks and written without
// branches (Eigen 3.4's select() is scalar, and v >= 0 is a coin flip):
//   heavy_tail(v) = 1+v (v >= 0), 1/(1-v) (v < 0) = (1 + max(v,0)) / (1 - min(v,0))
//   softplus(u) = log(1 + e^u) = max(u,0) + log1p(e^-|u|)
template <typename S>
void Mamba3Mixer<S>::head_scalars_forward(const ParamView<S>& P, Cache& c) const {
  const ConstVecMap<S> dt_bias(P.ptr(dt_bias_), H_);
  const S neg_floor = static_cast<S>(-cfg_.a_floor);
  c.dt = c.zx.middleCols(o_dt_, H_).rowwise() + dt_bias.transpose();  // u, contiguous
  c.dt_grad = (S(1) + (-c.dt.array()).exp()).inverse().matrix();        // softplus'(u) = σ(u)
  c.dt = (c.dt.array().max(S(0)) + (-c.dt.array().abs()).exp().log1p()).matrix();
  const auto v = c.zx.middleCols(o_a_, H_).array();
  c.a = (-(S(1) + v.max(S(0))) / (S(1) - v.min(S(0)))).min(neg_floor).matrix();
  c.lam = (S(1) + (-c.zx.middleCols(o_lam_, H_).array()).exp()).inverse().matrix();
  c.alpha = (c.a.array() * c.dt.array()).exp().matrix();
  c.beta = (c.alpha.array() * c.dt.array() * (S(1) - c.lam.array())).matrix();
  c.gamma = (c.lam.array() * c.dt.array()).matrix();
  c.tanh_theta = c.zx.middleCols(o_th_, Na_).array().tanh().matrix();
}

// φ_{h,a} ← (φ_{h,a} (1 - s_t) + π tanh(θ_a) dt_h) mod 2π, env by env with the
// heads as lanes; the carried φ in the state ends as the last step's. The
// wrap changes no output (cos/sin are 2π-periodic), so its derivative is 1.
template <typename S>
void Mamba3Mixer<S>::angles_forward(S* state, size_t state_stride, Cache& c) const {
  const int T = c.T, B = c.B;
  const size_t phi_off = static_cast<size_t>(H_) * (P_ * N_ + N_ + P_);
  const S two_pi = S(2 * kPi);
  c.phi.resize(static_cast<Eigen::Index>(T) * B, Na_ * H_);
  S* lanes = c.lanes.data();  // (Na, H)
  for (int b = 0; b < B; ++b) {
    S* phi_state = state + b * state_stride + phi_off;  // (H, Na)
    transpose_into(lanes, phi_state, H_, Na_);
    for (int t = 0; t < T; ++t) {
      const Eigen::Index r = static_cast<Eigen::Index>(t) * B + b;
      if (c.starts[r]) std::fill(lanes, lanes + Na_ * H_, S(0));
      const ConstVecMap<S> dt(row_ptr(c.dt, r), H_);
      for (int a = 0; a < Na_; ++a) {
        ArrMap<S> phi(lanes + a * H_, H_);
        phi += (S(kPi) * c.tanh_theta(r, a)) * dt.array();
        phi -= two_pi * (phi / two_pi).floor();
      }
      std::copy(lanes, lanes + Na_ * H_, row_ptr(c.phi, r));
    }
    transpose_into(phi_state, lanes, Na_, H_);
  }
  c.phi_cos = c.phi.array().cos().matrix();
  c.phi_sin = c.phi.array().sin().matrix();
}

// k_h = rot(φ_h) (RMSNorm(B_g) + B_bias_h), q_h likewise with C, lane-major:
// the pairs (2a, 2a+1), a < Na, rotate; the rest pass through.
template <typename S>
void Mamba3Mixer<S>::rotate_qk(const ParamView<S>& P, Cache& c) const {
  const Eigen::Index M = c.zx.rows();
  const int Hg = H_ / G_;  // heads per group, adjacent lanes
  c.k.resize(M, N_ * H_);
  c.q.resize(M, N_ * H_);
  c.bias_t.resize(2, N_ * H_);
  transpose_into(row_ptr(c.bias_t, 0), P.ptr(b_bias_), H_, N_);
  transpose_into(row_ptr(c.bias_t, 1), P.ptr(c_bias_), H_, N_);
  with_lane_kernels<S>(H_, [&](auto kernels) {
    using K = decltype(kernels);
    for (Eigen::Index r = 0; r < M; ++r) {
      S* k = row_ptr(c.k, r);
      S* q = row_ptr(c.q, r);
      for (int n = 0; n < N_; ++n)
        for (int g = 0; g < G_; ++g) {
          const int o = n * H_ + g * Hg;
          ArrMap<S>(k + o, Hg) = c.b_n(r * G_ + g, n) + CArrMap<S>(row_ptr(c.bias_t, 0) + o, Hg);
          ArrMap<S>(q + o, Hg) = c.c_n(r * G_ + g, n) + CArrMap<S>(row_ptr(c.bias_t, 1) + o, Hg);
        }
      for (int a = 0; a < Na_; ++a) {
        const S* cs = row_ptr(c.phi_cos, r) + a * H_;
        const S* sn = row_ptr(c.phi_sin, r) + a * H_;
        K::rotate(k + 2 * a * H_, k + (2 * a + 1) * H_, cs, sn, H_);
        K::rotate(q + 2 * a * H_, q + (2 * a + 1) * H_, cs, sn, H_);
      }
    }
  });
}

// The recurrence, env by env on a lane-major copy of its state:
//   S_h = α S_h + β v_prev ⊗ k_prev + γ x_h ⊗ k_h;  y_h = S_h q_h + D_h x_h.
// k_prev and v_prev are the previous token's k and x rows (no copies).
template <typename S>
void Mamba3Mixer<S>::ssm_forward(const ParamView<S>& P, S* state, size_t state_stride,
                                 Cache& c) const {
  const int T = c.T, B = c.B, HPN = H_ * P_ * N_;
  const S* d_skip = P.ptr(d_skip_);
  const S* zeros = c.zeros.data();
  c.y.resize(static_cast<Eigen::Index>(T) * B, E_);
  c.x_ph.resize(static_cast<Eigen::Index>(T) * B, P_ * H_);
  c.y_lane.resize(P_ * H_);
  S* s = c.lanes.data();           // (P*N, H)
  S* k0 = s + HPN;                 // (N, H) carried k_prev
  S* v0 = k0 + N_ * H_;            // (P, H) carried v_prev
  with_lane_kernels<S>(H_, [&](auto kernels) {
    using K = decltype(kernels);
    for (int b = 0; b < B; ++b) {
      S* st = state + b * state_stride;
      carried_to_lanes(st, s, H_, P_, N_);
      const S *k_prev = k0, *v_prev = v0;
      for (int t = 0; t < T; ++t) {
        const Eigen::Index r = static_cast<Eigen::Index>(t) * B + b;
        if (c.starts[r]) {
          std::fill(s, s + HPN, S(0));
          k_prev = v_prev = zeros;
        }
        S* x = row_ptr(c.x_ph, r);
        transpose_into(x, row_ptr(c.zx, r) + o_x_, H_, P_);
        const S* k = row_ptr(c.k, r);
        K::update(s, s, row_ptr(c.alpha, r), row_ptr(c.beta, r), row_ptr(c.gamma, r), v_prev,
                  k_prev, x, k, P_, N_, H_);
        K::output(s, row_ptr(c.q, r), d_skip, x, c.y_lane.data(), P_, N_, H_);
        transpose_into(row_ptr(c.y, r), c.y_lane.data(), P_, H_);
        k_prev = k;
        v_prev = x;
      }
      lanes_to_carried(s, k_prev, v_prev, st, H_, P_, N_);
    }
  });
}

// g = y ⊙ silu(z), or RMSNormGated per head: y w / sqrt(mean_P(y²) + eps) ⊙ silu(z).
template <typename S>
void Mamba3Mixer<S>::gate_forward(const ParamView<S>& P, Cache& c) const {
  const Eigen::Index M = c.zx.rows();
  const auto z = c.zx.leftCols(E_).array();
  c.sig_z = (S(1) + (-z).exp()).inverse().matrix();
  if (norm_ < 0) {
    c.gated = (c.y.array() * z * c.sig_z.array()).matrix();
    return;
  }
  c.gated.resize(M, E_);
  c.y_rstd.resize(M * H_);
  const S* w = P.ptr(norm_);
  for (Eigen::Index r = 0; r < M; ++r)
    for (int h = 0; h < H_; ++h) {
      const auto yh = c.y.row(r).segment(h * P_, P_).array();
      const S rs = S(1) / std::sqrt(yh.square().sum() / S(P_) + S(kNormEps));
      c.y_rstd[r * H_ + h] = rs;
      c.gated.row(r).segment(h * P_, P_).array() =
          yh * CArrMap<S>(w + h * P_, P_).transpose() * rs *
          z.row(r).segment(h * P_, P_) * c.sig_z.row(r).segment(h * P_, P_).array();
    }
}

// ---------------------------------------------------------------------------
// Backward

template <typename S>
void Mamba3Mixer<S>::backward(const ParamView<S>& P, const Mat<S>& dY, MixerCache& base,
                              const ParamView<S>& G, Mat<S>& dU) const {
  Cache& c = cache_of(base);
  const Eigen::Index M = static_cast<Eigen::Index>(c.T) * c.B;
  MAMBARL_CHECK(dY.rows() == M && dY.cols() == D_,
                "mamba3 backward: dY is (" << dY.rows() << ", " << dY.cols() << "), expected ("
                                           << M << ", " << D_ << ")");
  c.dzx.resize(M, R_);  // every column block is written below
  linear_backward<S>(c.gated, P.mat(out_proj_), dY, G.mat(out_proj_), nullptr, &c.dgated);
  gate_backward(P, G, c);           // dy, dz
  ssm_backward(P, G, c);            // dk, dq, dx, dα, dβ, dγ, dD
  rotate_angles_backward(c);        // dk, dq un-rotated; dφ through the scan
  head_scalars_backward(G, c);      // dd_dt, dd_A, dλ, dθ, ddt_bias
  bc_backward(P, G, c);             // dB, dC, norm weights, biases
  linear_backward<S>(c.u, P.mat(in_proj_), c.dzx, G.mat(in_proj_), nullptr, &dU);
}

template <typename S>
void Mamba3Mixer<S>::gate_backward(const ParamView<S>& P, const ParamView<S>& G, Cache& c) const {
  const Eigen::Index M = c.zx.rows();
  const auto z = c.zx.leftCols(E_).array();
  const auto sig = c.sig_z.array();
  auto dz = c.dzx.leftCols(E_).array();
  // silu'(z) = σ(z) (1 + z (1 - σ(z)))
  if (norm_ < 0) {
    c.dy = (c.dgated.array() * z * sig).matrix();
    dz = c.dgated.array() * c.y.array() * sig * (S(1) + z * (S(1) - sig));
    return;
  }
  c.dy.resize(M, E_);
  const S* w = P.ptr(norm_);
  S* dw = G.ptr(norm_);
  for (Eigen::Index r = 0; r < M; ++r)
    for (int h = 0; h < H_; ++h) {
      const Eigen::Index o = h * P_;
      const S rs = c.y_rstd[r * H_ + h];
      const auto yh = c.y.row(r).segment(o, P_).array();
      const auto wh = CArrMap<S>(w + o, P_).transpose();
      const auto zh = z.row(r).segment(o, P_);
      const auto sh = sig.row(r).segment(o, P_);
      const auto dg = c.dgated.row(r).segment(o, P_).array();
      dz.row(r).segment(o, P_) = dg * yh * wh * rs * sh * (S(1) + zh * (S(1) - sh));
      // a = dL/d(normed y) = dg silu(z); then RMSNorm's backward over the P channels.
      const auto a = dg * zh * sh;
      ArrMap<S>(dw + o, P_) += (a * yh * rs).transpose();
      const S dot = (yh * a * wh).sum();
      c.dy.row(r).segment(o, P_).array() = rs * a * wh - yh * (rs * rs * rs * dot / S(P_));
    }
}

// Backward through the recurrence, one env at a time: recompute its S_t, then
// sweep t = T-1..0 carrying dL/dS_{t-1}, dL/dk_{t-1}, dL/dx_{t-1}. A start at t
// zeroes the carries, so nothing reaches earlier steps or the initial state.
template <typename S>
void Mamba3Mixer<S>::ssm_backward(const ParamView<S>& P, const ParamView<S>& G, Cache& c) const {
  const int T = c.T, B = c.B, HPN = H_ * P_ * N_;
  const Eigen::Index M = static_cast<Eigen::Index>(T) * B;
  c.dk.resize(M, N_ * H_);
  c.dq.resize(M, N_ * H_);
  for (Mat<S>* m : {&c.dalpha, &c.dbeta, &c.dgamma}) m->resize(M, H_);
  c.s_hist.resize(T, HPN);
  c.ds_carry.resize(HPN);
  c.dk_carry.resize(N_ * H_);
  c.dv_carry.resize(P_ * H_);
  c.dx_lane.resize(P_ * H_);
  c.lane_tmp.resize(4, P_ * H_);
  const S* zeros = c.zeros.data();
  S* s0 = c.lanes.data();     // (P*N, H) S before t=0
  const S* k0 = s0 + HPN;     // (N, H)
  const S* v0 = k0 + N_ * H_; // (P, H)

  with_lane_kernels<S>(H_, [&](auto kernels) {
    using K = decltype(kernels);
    for (int b = 0; b < B; ++b) {
      carried_to_lanes(row_ptr(c.state0, b), s0, H_, P_, N_);
      // What step t reads as S_{t-1}, k_prev, v_prev (the forward's values).
      const auto s_prev = [&](int t, Eigen::Index r) -> const S* {
        return c.starts[r] ? zeros : (t > 0 ? row_ptr(c.s_hist, t - 1) : s0);
      };
      const auto k_prev = [&](int t, Eigen::Index r) -> const S* {
        return c.starts[r] ? zeros : (t > 0 ? row_ptr(c.k, r - B) : k0);
      };
      const auto v_prev = [&](int t, Eigen::Index r) -> const S* {
        return c.starts[r] ? zeros : (t > 0 ? row_ptr(c.x_ph, r - B) : v0);
      };

      for (int t = 0; t < T; ++t) {
        const Eigen::Index r = static_cast<Eigen::Index>(t) * B + b;
        K::update(row_ptr(c.s_hist, t), s_prev(t, r), row_ptr(c.alpha, r), row_ptr(c.beta, r),
                  row_ptr(c.gamma, r), v_prev(t, r), k_prev(t, r), row_ptr(c.x_ph, r),
                  row_ptr(c.k, r), P_, N_, H_);
      }

      c.ds_carry.setZero();
      c.dk_carry.setZero();
      c.dv_carry.setZero();
      for (int t = T - 1; t >= 0; --t) {
        const Eigen::Index r = static_cast<Eigen::Index>(t) * B + b;
        transpose_into(c.y_lane.data(), row_ptr(c.dy, r), H_, P_);
        LaneGrad<S> g;
        g.alpha = row_ptr(c.alpha, r), g.beta = row_ptr(c.beta, r), g.gamma = row_ptr(c.gamma, r);
        g.d_skip = P.ptr(d_skip_);
        g.x = row_ptr(c.x_ph, r), g.dy = c.y_lane.data(), g.v_prev = v_prev(t, r);
        g.s = row_ptr(c.s_hist, t), g.s_prev = s_prev(t, r);
        g.k = row_ptr(c.k, r), g.q = row_ptr(c.q, r), g.k_prev = k_prev(t, r);
        g.ds = c.ds_carry.data(), g.dv_carry = c.dv_carry.data(), g.dk_carry = c.dk_carry.data();
        g.dk = row_ptr(c.dk, r), g.dq = row_ptr(c.dq, r), g.dx = c.dx_lane.data();
        g.dalpha = row_ptr(c.dalpha, r), g.dbeta = row_ptr(c.dbeta, r);
        g.dgamma = row_ptr(c.dgamma, r), g.dd_skip = G.ptr(d_skip_);
        K::backward(g, row_ptr(c.lane_tmp, 0), row_ptr(c.lane_tmp, 1), row_ptr(c.lane_tmp, 2),
                    row_ptr(c.lane_tmp, 3), P_, N_, H_);
        transpose_into(row_ptr(c.dzx, r) + o_x_, c.dx_lane.data(), P_, H_);
        if (c.starts[r]) {  // the state before a start was zeroed: cut every path into it
          c.ds_carry.setZero();
          c.dk_carry.setZero();
          c.dv_carry.setZero();
        }
      }
    }
  });
}

// Un-rotate dk, dq and collect dφ; then carry dφ backwards through the angle
// scan (the mod's derivative is 1), cut at starts.
template <typename S>
void Mamba3Mixer<S>::rotate_angles_backward(Cache& c) const {
  const int T = c.T, B = c.B;
  const Eigen::Index M = static_cast<Eigen::Index>(T) * B;
  c.dphi.setZero(M, Na_ * H_);
  with_lane_kernels<S>(H_, [&](auto kernels) {
    using K = decltype(kernels);
    for (Eigen::Index r = 0; r < M; ++r)
      for (int a = 0; a < Na_; ++a) {
        const int o0 = 2 * a * H_, o1 = (2 * a + 1) * H_;
        const S* cs = row_ptr(c.phi_cos, r) + a * H_;
        const S* sn = row_ptr(c.phi_sin, r) + a * H_;
        S* dphi = row_ptr(c.dphi, r) + a * H_;
        K::rotate_backward(row_ptr(c.dk, r) + o0, row_ptr(c.dk, r) + o1, row_ptr(c.k, r) + o0,
                           row_ptr(c.k, r) + o1, cs, sn, dphi, H_);
        K::rotate_backward(row_ptr(c.dq, r) + o0, row_ptr(c.dq, r) + o1, row_ptr(c.q, r) + o0,
                           row_ptr(c.q, r) + o1, cs, sn, dphi, H_);
      }
  });
  c.dphi_carry.resize(Na_ * H_);
  for (int b = 0; b < B; ++b) {
    c.dphi_carry.setZero();
    for (int t = T - 1; t >= 0; --t) {
      const Eigen::Index r = static_cast<Eigen::Index>(t) * B + b;
      c.dphi.row(r) += c.dphi_carry.transpose();  // now dL/dΔφ_t
      if (c.starts[r])
        c.dphi_carry.setZero();
      else
        c.dphi_carry = c.dphi.row(r).transpose();
    }
  }
}

// Chain rule from (dα, dβ, dγ, dΔφ) to the in_proj columns dd_dt, dd_A, λ_raw,
// θ_raw and to dt_bias.
template <typename S>
void Mamba3Mixer<S>::head_scalars_backward(const ParamView<S>& G, Cache& c) const {
  const Eigen::Index M = c.zx.rows();
  const S pi = S(kPi);
  // Δφ_{h,a} = π tanh(θ_a) dt_h, θ shared by all heads: dθ_a and dt's share.
  c.ddt.setZero(M, H_);
  for (Eigen::Index r = 0; r < M; ++r) {
    const auto dt = c.dt.row(r).array().transpose();
    ArrMap<S> ddt(row_ptr(c.ddt, r), H_);
    for (int a = 0; a < Na_; ++a) {
      const S th = c.tanh_theta(r, a);
      const CArrMap<S> dphi(row_ptr(c.dphi, r) + a * H_, H_);
      ddt += (pi * th) * dphi;
      row_ptr(c.dzx, r)[o_th_ + a] = pi * (S(1) - th * th) * (dphi * dt).sum();
    }
  }
  const auto dt = c.dt.array(), a = c.a.array(), lam = c.lam.array(), alpha = c.alpha.array();
  const auto dbeta = c.dbeta.array(), dgamma = c.dgamma.array();
  c.dzx.middleCols(o_lam_, H_).array() = (dgamma - dbeta * alpha) * dt * lam * (S(1) - lam);
  // β = α dt (1-λ) also depends on α: dalpha becomes the total dL/dα, in place.
  c.dalpha.array() += dbeta * dt * (S(1) - lam);
  const auto g_alpha = c.dalpha.array();
  c.ddt.array() += g_alpha * alpha * a + dbeta * alpha * (S(1) - lam) + dgamma * lam;
  // A = -heavy_tail(v) where A < -a_floor, else the floor (zero gradient);
  // heavy_tail'(v) = 1/(1 - min(v,0))². A plain loop with a ternary, which the
  // compiler vectorises (a compare and a blend), unlike Eigen 3.4's select().
  const S neg_floor = static_cast<S>(-cfg_.a_floor);
  for (Eigen::Index r = 0; r < M; ++r) {
    const S *v = row_ptr(c.zx, r) + o_a_, *a_r = row_ptr(c.a, r), *g_r = row_ptr(c.dalpha, r),
            *al_r = row_ptr(c.alpha, r), *dt_r = row_ptr(c.dt, r);
    S* dv = row_ptr(c.dzx, r) + o_a_;
    for (int h = 0; h < H_; ++h) {
      const S m = S(1) - std::min(v[h], S(0));
      dv[h] = a_r[h] < neg_floor ? -g_r[h] * al_r[h] * dt_r[h] / (m * m) : S(0);
    }
  }
  // dt = softplus(dd_dt + dt_bias). Summed for dt_bias on the contiguous
  // (M, H) scratch, not on the strided block of dzx.
  c.ddt.array() *= c.dt_grad.array();
  G.vec(dt_bias_) += c.ddt.colwise().sum().transpose();
  c.dzx.middleCols(o_dt_, H_) = c.ddt;
}

// dk̃_h = d(RMSNorm(B_g) + B_bias_h): the bias takes it per head, the group's
// norm the sum over its heads (adjacent lanes); same for q̃ with C.
template <typename S>
void Mamba3Mixer<S>::bc_backward(const ParamView<S>& P, const ParamView<S>& G, Cache& c) const {
  const Eigen::Index M = c.zx.rows();
  const int Hg = H_ / G_;
  c.db_n.resize(M * G_, N_);
  c.dc_n.resize(M * G_, N_);
  c.dbias_t.setZero(2, N_ * H_);
  for (Eigen::Index r = 0; r < M; ++r) {
    const S* dk = row_ptr(c.dk, r);
    const S* dq = row_ptr(c.dq, r);
    c.dbias_t.row(0) += ConstVecMap<S>(dk, N_ * H_).transpose();
    c.dbias_t.row(1) += ConstVecMap<S>(dq, N_ * H_).transpose();
    for (int g = 0; g < G_; ++g)
      for (int n = 0; n < N_; ++n) {
        c.db_n(r * G_ + g, n) = CArrMap<S>(dk + n * H_ + g * Hg, Hg).sum();
        c.dc_n(r * G_ + g, n) = CArrMap<S>(dq + n * H_ + g * Hg, Hg).sum();
      }
  }
  G.mat(b_bias_) += Eigen::Map<const Mat<S>>(row_ptr(c.dbias_t, 0), N_, H_).transpose();
  G.mat(c_bias_) += Eigen::Map<const Mat<S>>(row_ptr(c.dbias_t, 1), N_, H_).transpose();
  rmsnorm_backward(c.b_raw, P.ptr(b_norm_), c.b_rstd, c.db_n, c.db_raw, G.ptr(b_norm_));
  rmsnorm_backward(c.c_raw, P.ptr(c_norm_), c.c_rstd, c.dc_n, c.dc_raw, G.ptr(c_norm_));
  for (Eigen::Index r = 0; r < M; ++r) {
    std::memcpy(row_ptr(c.dzx, r) + o_b_, row_ptr(c.db_raw, r * G_), sizeof(S) * G_ * N_);
    std::memcpy(row_ptr(c.dzx, r) + o_c_, row_ptr(c.dc_raw, r * G_), sizeof(S) * G_ * N_);
  }
}

template class Mamba3Mixer<float>;
template class Mamba3Mixer<double>;

}  // namespace mambarl
