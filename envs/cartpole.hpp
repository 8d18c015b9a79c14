// CartPole after Gymnasium's CartPole-v1 (gymnasium/envs/classic_control/cartpole.py):
// same constants, explicit Euler integration, state kept in double as there
// (observations are its float32 rounding), termination when |x| > 2.4 or
// |theta| > 12 degrees, reward +1 on every step including the terminating one,
// start state uniform in (-0.05, 0.05)^4.
//
// One struct serves three registered types (parameterised, not copied):
//   cartpole            obs [x, x_dot, theta, theta_dot], reward 1, truncated at 500
//                       (CartPole-v1's registered TimeLimit)
//   stateless_cartpole  POPGym PositionOnlyCartPole: obs [x, theta] only, reward
//                       1/max_len on EVERY step (popgym maps the Gymnasium reward
//                       1 -> 1/max_len, and 0 -> -1, but a 0 only follows a step
//                       taken after termination, which auto-reset never takes), so
//                       the return is episode_length/max_len, 1.0 at most;
//                       truncated at max_len (easy 200, medium 400, hard 600)
//   noisy_stateless_cartpole  POPGym NoisyPositionOnlyCartPole: stateless_cartpole
//                       with max_len 200 at every level, whose observations (the
//                       first one too) get N(0, sigma^2) noise per component,
//                       rounded to float, then are clipped to the observation
//                       bounds; sigma easy 0.1, medium 0.2, hard 0.3. The noise
//                       only blurs what the agent sees: the physics, rewards and
//                       termination are stateless_cartpole's.
// The noisy type is this struct with a noise level rather than a struct of its
// own: it is the same system, so it shares every line of the dynamics, and the
// CUDA backend compiles no extra kernel for it. The noise is drawn in step(),
// which the env contract gives no Rng, so the struct carries its own stream,
// seeded at each reset from the one reset() is given (the noiseless types never
// draw from it, so their trajectories do not depend on it).
#pragma once

#include <math.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <iomanip>
#include <limits>
#include <ostream>
#include <string>

#include "envs/batched_env.hpp"
#include "kernels/base/rng.hpp"

namespace mambarl {

// The physical system and its integrator; the expressions keep Gymnasium's order
// of operations so that a trajectory matches it to rounding.
struct CartPolePhysics {
  static constexpr double kGravity = 9.8;
  static constexpr double kMassCart = 1.0;
  static constexpr double kMassPole = 0.1;
  static constexpr double kTotalMass = kMassPole + kMassCart;
  static constexpr double kHalfPoleLength = 0.5;  // Gymnasium's `length` is half the pole
  static constexpr double kPoleMassLength = kMassPole * kHalfPoleLength;
  static constexpr double kForceMag = 10.0;
  static constexpr double kTau = 0.02;  // seconds per step
  static constexpr double kThetaThreshold = 12 * 2 * 3.14159265358979323846 / 360;  // 12 deg = 0.2094 rad
  static constexpr double kXThreshold = 2.4;

  double x = 0, x_dot = 0, theta = 0, theta_dot = 0;

  MAMBARL_HD void reset(Rng& rng) {
    x = rng.uniform(-0.05, 0.05);
    x_dot = rng.uniform(-0.05, 0.05);
    theta = rng.uniform(-0.05, 0.05);
    theta_dot = rng.uniform(-0.05, 0.05);
  }

  // action 1 pushes right, 0 pushes left. Returns whether the new state is terminal.
  // ::cos/::sin of a double: glibc's on the host (what std::cos calls), CUDA's
  // on the device, which may differ from glibc's in the last bit.
  MAMBARL_HD bool step(int action) {
    const double force = action == 1 ? kForceMag : -kForceMag;
    const double costheta = ::cos(theta), sintheta = ::sin(theta);
    const double temp = (force + kPoleMassLength * (theta_dot * theta_dot) * sintheta) / kTotalMass;
    const double thetaacc = (kGravity * sintheta - costheta * temp) /
                            (kHalfPoleLength * (4.0 / 3.0 - kMassPole * (costheta * costheta) / kTotalMass));
    const double xacc = temp - kPoleMassLength * thetaacc * costheta / kTotalMass;
    x = x + kTau * x_dot;
    x_dot = x_dot + kTau * xacc;
    theta = theta + kTau * theta_dot;
    theta_dot = theta_dot + kTau * thetaacc;
    return x < -kXThreshold || x > kXThreshold || theta < -kThetaThreshold || theta > kThetaThreshold;
  }
};

struct CartPole {
  // Saved as raw bytes (BatchedEnv::save_state), so laid out without implicit
  // padding, whose bytes would be indeterminate: two equal envs must save equal
  // bytes. The 16 bytes ahead of the doubles are spelled out (static_assert below).
  int32_t position_only = 0;  // 1: stateless_cartpole (noisy or not)
  int32_t max_steps = 500;    // truncation limit
  float step_reward = 1.0f;
  float noise_sigma = 0.0f;   // > 0: noisy_stateless_cartpole
  CartPolePhysics physics;
  Rng noise_rng;              // the observation noise of this episode

  static CartPole full() { return CartPole{}; }
  static CartPole stateless(int max_len) {
    CartPole c;
    c.position_only = 1;
    c.max_steps = max_len;
    c.step_reward = 1.0f / static_cast<float>(max_len);
    return c;
  }
  static CartPole noisy_stateless(int max_len, float sigma) {
    MAMBARL_CHECK(sigma > 0.0f, "noisy_stateless_cartpole: noise sigma must be > 0, got " << sigma);
    CartPole c = stateless(max_len);
    c.noise_sigma = sigma;
    return c;
  }

  EnvSpec spec() const {
    // Gymnasium/popgym bounds: twice the termination thresholds, so that the
    // terminating observation still lies inside; velocities are unbounded (float max).
    const float big = std::numeric_limits<float>::max();
    const float xb = static_cast<float>(2 * CartPolePhysics::kXThreshold);
    const float tb = static_cast<float>(2 * CartPolePhysics::kThetaThreshold);
    EnvSpec s;
    s.id = noise_sigma > 0.0f ? "noisy_stateless_cartpole" : position_only ? "stateless_cartpole" : "cartpole";
    s.obs_high = position_only ? std::vector<float>{xb, tb} : std::vector<float>{xb, big, tb, big};
    s.obs_dim = static_cast<int>(s.obs_high.size());
    for (float h : s.obs_high) s.obs_low.push_back(-h);
    s.action.n = 2;
    s.max_episode_steps = max_steps;
    // The noisy type shows the previous action by default (POPGym's baselines
    // show it for every env): estimating the velocities from noisy positions is
    // a filter whose input includes the push, and a sampled action is not in
    // the policy's memory otherwise (what it is worth: envs/ENVS.md).
    s.prev_action_by_default = noise_sigma > 0.0f;
    return s;
  }

  MAMBARL_HD void reset(Rng& rng, float* obs) {
    physics.reset(rng);
    if (noise_sigma > 0.0f) noise_rng = Rng(rng.next_u64());
    write_obs(obs);
  }

  MAMBARL_HD EnvStepResult step(int action, float* obs) {
    const bool terminated = physics.step(action);
    write_obs(obs);
    return {step_reward, terminated};
  }

  void render(std::ostream& os) const {
    // A 41-column track over [-2.4, 2.4] with the cart 'C' and the pole's lean.
    constexpr int kCols = 41;
    const double u = (physics.x + CartPolePhysics::kXThreshold) / (2 * CartPolePhysics::kXThreshold);
    const int col = std::clamp(static_cast<int>(std::lround(u * (kCols - 1))), 0, kCols - 1);
    std::string track(kCols, '.');
    track[static_cast<size_t>(col)] = 'C';
    const char lean = physics.theta > 0.02 ? '/' : physics.theta < -0.02 ? '\\' : '|';
    os << std::showpos << std::fixed << std::setprecision(4) << "x " << physics.x << "  x_dot "
       << physics.x_dot << "  theta " << physics.theta << "  theta_dot " << physics.theta_dot
       << std::noshowpos << std::defaultfloat << "\n[" << track << "]  pole " << lean;
    if (noise_sigma > 0.0f) os << "  (obs noise sigma " << noise_sigma << ")";
    os << "\n";
  }

 private:
  // Not const: the noisy type draws its noise here.
  MAMBARL_HD void write_obs(float* obs) {
    if (position_only) {
      obs[0] = static_cast<float>(physics.x);
      obs[1] = static_cast<float>(physics.theta);
      if (noise_sigma > 0.0f) {
        // popgym: float32 noise added to the float32 obs, clipped to the obs bounds
        // (+-2 * the termination thresholds, as spec()). Rng::normal uses log and
        // cos, which on the device may differ from glibc's in the last bit of a
        // double, as cartpole's cos/sin (envs/gpu_batched_env.cuh).
        const float bound[2] = {static_cast<float>(2 * CartPolePhysics::kXThreshold),
                                static_cast<float>(2 * CartPolePhysics::kThetaThreshold)};
        for (int i = 0; i < 2; ++i) {
          const float noisy = obs[i] + static_cast<float>(noise_sigma * noise_rng.normal());
          obs[i] = noisy < -bound[i] ? -bound[i] : noisy > bound[i] ? bound[i] : noisy;
        }
      }
    } else {
      obs[0] = static_cast<float>(physics.x);
      obs[1] = static_cast<float>(physics.x_dot);
      obs[2] = static_cast<float>(physics.theta);
      obs[3] = static_cast<float>(physics.theta_dot);
    }
  }
};
static_assert(sizeof(CartPole) == 16 + sizeof(CartPolePhysics) + sizeof(Rng), "CartPole must have no padding bytes");

}  // namespace mambarl
