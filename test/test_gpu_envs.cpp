// The CUDA env backend (envs/gpu_vec_env.hpp) against the CPU BatchedEnv it
// mirrors: every bundled type stepped in lockstep from the same seed and
// actions, compared after every step; checkpoints moving between backends;
// K steps captured in a CUDA graph == K eager steps; invalid actions; config
// errors. The GPU suites skip without a device unless MAMBARL_REQUIRE_GPU=1;
// the config-error suite needs none.
#define BOOST_TEST_MODULE gpu_envs
#include <cuda_runtime.h>
#include <yaml-cpp/yaml.h>

#include <boost/test/unit_test.hpp>
#include <algorithm>
#include <cmath>
#include <cstring>
#include <sstream>
#include <string>
#include <vector>

#include "envs/builtin_envs.hpp"
#include "envs/cartpole.hpp"
#include "envs/gpu_vec_env.hpp"
#include "envs/vec_env.hpp"
#include "kernels/base/rng.hpp"
#include "kernels/cuda_graph.cuh"
#include "kernels/cuda_handles.cuh"
#include "kernels/device_buffer.cuh"
#include "test/bundled_env_configs.hpp"
#include "test/gpu_test_util.hpp"

using namespace mambarl;
using mambarl::test::gpu_or_required;
using mambarl::test::require_gpu;
namespace utf = boost::unit_test;

namespace {

constexpr int kB = 67;  // not a multiple of the kernel's block: the tail block is partly idle

const std::vector<std::string>& kConfigs = test::bundled_env_configs();

ConfigNode config(const std::string& yaml, int B) {
  return ConfigNode(YAML::Load(yaml + "\nnum_envs: " + std::to_string(B)), "test.yaml", "env");
}

bool is_cartpole(const EnvSpec& s) {
  return s.id == "cartpole" || s.id == "stateless_cartpole" || s.id == "noisy_stateless_cartpole";
}

// Everything a step reports, on the host.
struct Outputs {
  std::vector<float> obs, final_obs, reward, episode_return;
  std::vector<uint8_t> terminated, truncated;
  std::vector<int32_t> episode_length;
};

template <typename T>
std::vector<T> host_copy(const T* p, size_t n) {
  return std::vector<T>(p, p + n);
}

Outputs outputs_of(const VecEnv& e) {
  const size_t B = static_cast<size_t>(e.num_envs()), O = static_cast<size_t>(e.spec().obs_dim);
  return {host_copy(e.obs(), B * O),        host_copy(e.final_obs(), B * O), host_copy(e.reward(), B),
          host_copy(e.episode_return(), B), host_copy(e.terminated(), B),    host_copy(e.truncated(), B),
          host_copy(e.episode_length(), B)};
}

Outputs outputs_of(const GpuVecEnv& e, cudaStream_t s) {
  const size_t B = static_cast<size_t>(e.num_envs()), O = static_cast<size_t>(e.spec().obs_dim);
  Outputs o{copy_to_host(e.obs(), B * O, s),       copy_to_host(e.final_obs(), B * O, s),
            copy_to_host(e.reward(), B, s),        copy_to_host(e.episode_return(), B, s),
            copy_to_host(e.terminated(), B, s),    copy_to_host(e.truncated(), B, s),
            copy_to_host(e.episode_length(), B, s)};
  return o;
}

// Cartpole's observations are float roundings of a double state that the GPU
// computes with CUDA's cos/sin, which may differ from glibc's by an ulp, and
// with the FMA contractions nvcc chose rather than gcc's; random-action
// episodes last tens of steps, so the state differs in its last few bits and
// an observation by an ulp of a float or so (~2.4e-7 at the largest, 2.4).
// 1e-5 is far below anything the dynamics or a policy could notice, and far
// above that rounding.
constexpr float kCartpoleObsTol = 1e-5f;

void expect_obs_equal(const std::vector<float>& cpu, const std::vector<float>& gpu, bool exact,
                      const std::string& what) {
  BOOST_REQUIRE_EQUAL(cpu.size(), gpu.size());
  for (size_t i = 0; i < cpu.size(); ++i) {
    const bool ok = exact ? cpu[i] == gpu[i] : std::abs(cpu[i] - gpu[i]) <= kCartpoleObsTol;
    if (!ok) BOOST_FAIL(what << "[" << i << "]: cpu " << cpu[i] << " gpu " << gpu[i]);
  }
}

void expect_outputs_equal(const Outputs& cpu, const Outputs& gpu, bool exact_obs, int step) {
  const std::string at = " at step " + std::to_string(step);
  expect_obs_equal(cpu.obs, gpu.obs, exact_obs, "obs" + at);
  expect_obs_equal(cpu.final_obs, gpu.final_obs, exact_obs, "final_obs" + at);
  // Rewards and the episode bookkeeping are exact for every type: cartpole's
  // rewards do not depend on its state, and its episodes end on the same steps.
  BOOST_REQUIRE_MESSAGE(cpu.reward == gpu.reward, "reward" << at);
  BOOST_REQUIRE_MESSAGE(cpu.terminated == gpu.terminated, "terminated" << at);
  BOOST_REQUIRE_MESSAGE(cpu.truncated == gpu.truncated, "truncated" << at);
  BOOST_REQUIRE_MESSAGE(cpu.episode_return == gpu.episode_return, "episode_return" << at);
  BOOST_REQUIRE_MESSAGE(cpu.episode_length == gpu.episode_length, "episode_length" << at);
}

// The saved states of a CPU and a GPU env of the same type: byte for byte,
// except cartpole's doubles (its physics) and observations, within the
// rounding above. The layout is BatchedEnv::save_state's: envs, rngs, obs,
// running return, running length.
void expect_states_equal(const EnvSpec& spec, int B, const std::vector<uint8_t>& cpu,
                         const std::vector<uint8_t>& gpu) {
  BOOST_REQUIRE_EQUAL(cpu.size(), gpu.size());
  if (!is_cartpole(spec)) {
    BOOST_TEST((cpu == gpu), spec.id << ": saved states differ");
    return;
  }
  const size_t nb = static_cast<size_t>(B), env_bytes = nb * sizeof(CartPole);
  const size_t obs_at = env_bytes + nb * sizeof(Rng), obs_bytes = nb * spec.obs_dim * sizeof(float);
  std::vector<CartPole> ec(nb), eg(nb);
  std::memcpy(static_cast<void*>(ec.data()), cpu.data(), env_bytes);
  std::memcpy(static_cast<void*>(eg.data()), gpu.data(), env_bytes);
  for (size_t b = 0; b < nb; ++b) {
    // The parameters exactly; the state to a relative 1e-9, a million times
    // the last-bit differences of the doubles above, far below the float obs.
    BOOST_TEST(std::memcmp(&ec[b], &eg[b], 16) == 0, "env " << b << " parameters");
    BOOST_TEST(std::memcmp(&ec[b].noise_rng, &eg[b].noise_rng, sizeof(Rng)) == 0, "env " << b << " noise stream");
    const double c[4] = {ec[b].physics.x, ec[b].physics.x_dot, ec[b].physics.theta, ec[b].physics.theta_dot};
    const double g[4] = {eg[b].physics.x, eg[b].physics.x_dot, eg[b].physics.theta, eg[b].physics.theta_dot};
    for (int i = 0; i < 4; ++i)
      BOOST_TEST(std::abs(c[i] - g[i]) <= 1e-9 * std::max(1.0, std::abs(c[i])),
                 "env " << b << " state " << i);
  }
  BOOST_TEST(std::memcmp(cpu.data() + env_bytes, gpu.data() + env_bytes, obs_at - env_bytes) == 0, "rngs");
  std::vector<float> oc(static_cast<size_t>(B) * spec.obs_dim), og(oc.size());
  std::memcpy(oc.data(), cpu.data() + obs_at, obs_bytes);
  std::memcpy(og.data(), gpu.data() + obs_at, obs_bytes);
  expect_obs_equal(oc, og, false, "saved obs");
  BOOST_TEST(std::memcmp(cpu.data() + obs_at + obs_bytes, gpu.data() + obs_at + obs_bytes,
                         cpu.size() - obs_at - obs_bytes) == 0,
             "running return/length");
}

// Steps both envs `steps` times with the same uniform random valid actions
// from Rng(seed, 999), comparing all outputs after every step. Returns the
// number of (terminated, truncated) flags seen.
std::pair<int, int> lockstep(VecEnv& cpu, GpuVecEnv& gpu, int steps, uint64_t seed, cudaStream_t s) {
  const int B = cpu.num_envs(), n = cpu.spec().action.n;
  const bool exact = !is_cartpole(cpu.spec());
  Rng arng(seed, 999);
  std::vector<float> a(static_cast<size_t>(B));  // (B)
  DeviceBuffer<float> d_a(a.size());             // (B)
  int n_term = 0, n_trunc = 0;
  for (int t = 0; t < steps; ++t) {
    for (float& x : a) x = static_cast<float>(arng.below(static_cast<uint32_t>(n)));
    MAMBARL_CUDA_CHECK(cudaMemcpyAsync(d_a.data(), a.data(), d_a.bytes(), cudaMemcpyHostToDevice, s));
    gpu.step(d_a.data(), s);
    cpu.step(a.data());
    const Outputs oc = outputs_of(cpu);
    expect_outputs_equal(oc, outputs_of(gpu, s), exact, t);
    for (int b = 0; b < B; ++b) {
      n_term += oc.terminated[static_cast<size_t>(b)];
      n_trunc += oc.truncated[static_cast<size_t>(b)];
    }
  }
  gpu.check_actions(s);  // nothing recorded
  return {n_term, n_trunc};
}

struct Pair {
  std::unique_ptr<VecEnv> cpu;
  std::unique_ptr<GpuVecEnv> gpu;
};

Pair make_both(const std::string& yaml, int B) {
  return {make_vec_env(config(yaml, B)), make_gpu_vec_env(config(yaml, B))};
}

}  // namespace

BOOST_AUTO_TEST_SUITE(gpu_envs, *utf::precondition(gpu_or_required))

BOOST_AUTO_TEST_CASE(every_type_matches_the_cpu_env_step_by_step) {
  require_gpu();
  CudaStream stream;
  int trunc_total = 0;
  for (size_t i = 0; i < kConfigs.size(); ++i) {
    BOOST_TEST_CONTEXT(kConfigs[i]) {
      Pair p = make_both(kConfigs[i], kB);
      BOOST_TEST(p.gpu->num_envs() == kB);
      BOOST_TEST(p.gpu->spec().id == p.cpu->spec().id);
      BOOST_TEST(p.gpu->spec().obs_dim == p.cpu->spec().obs_dim);
      BOOST_TEST(p.gpu->spec().action.n == p.cpu->spec().action.n);
      BOOST_TEST(p.gpu->spec().max_episode_steps == p.cpu->spec().max_episode_steps);
      // Before reset, both hold the initial state (prototype envs, default streams, zeros).
      BOOST_TEST((p.cpu->save_state() == p.gpu->save_state(stream.get())));
      const uint64_t seed = 1000 + i;
      p.cpu->reset(seed);
      p.gpu->reset(seed, stream.get());
      expect_outputs_equal(outputs_of(*p.cpu), outputs_of(*p.gpu, stream.get()), !is_cartpole(p.cpu->spec()),
                           -1);
      // Long enough for every env to end at least two episodes (the longest
      // here: repeat_first hard, always 831 steps; multiarmed_bandit hard, 600,
      // run for four), so auto-reset and the episode after it are covered.
      const int steps = std::max(2000, 4 * p.cpu->spec().max_episode_steps);
      const auto [n_term, n_trunc] = lockstep(*p.cpu, *p.gpu, steps, seed, stream.get());
      BOOST_TEST(n_term + n_trunc >= 2 * kB);
      trunc_total += n_trunc;
      if (p.cpu->spec().id == "tmaze") BOOST_TEST(n_trunc > 0);  // random walks hit tmaze's time limit
    }
  }
  BOOST_TEST(trunc_total > 0);
}

BOOST_AUTO_TEST_CASE(saved_states_equal_the_cpu_envs_and_move_between_backends) {
  require_gpu();
  CudaStream stream;
  const cudaStream_t s = stream.get();
  for (size_t i = 0; i < kConfigs.size(); ++i) {
    BOOST_TEST_CONTEXT(kConfigs[i]) {
      Pair p = make_both(kConfigs[i], kB);
      const uint64_t seed = 77 + i;
      p.cpu->reset(seed);
      p.gpu->reset(seed, s);
      lockstep(*p.cpu, *p.gpu, 137, seed, s);
      expect_states_equal(p.cpu->spec(), kB, p.cpu->save_state(), p.gpu->save_state(s));

      // A CPU checkpoint loads into a fresh GPU env, which then continues as the CPU env does.
      const std::vector<uint8_t> cpu_state = p.cpu->save_state();
      auto gpu2 = make_gpu_vec_env(config(kConfigs[i], kB));
      gpu2->load_state(cpu_state, s);
      BOOST_TEST((gpu2->save_state(s) == cpu_state));  // the bytes round-trip exactly
      lockstep(*p.cpu, *gpu2, 300, seed + 1, s);

      // And a GPU checkpoint loads into a fresh CPU env.
      const std::vector<uint8_t> gpu_state = gpu2->save_state(s);
      auto cpu2 = make_vec_env(config(kConfigs[i], kB));
      cpu2->load_state(gpu_state);
      BOOST_TEST((cpu2->save_state() == gpu_state));
      lockstep(*cpu2, *gpu2, 100, seed + 2, s);

      // Another layout is refused, as on the CPU.
      auto smaller = make_gpu_vec_env(config(kConfigs[i], kB - 1));
      BOOST_CHECK_THROW(smaller->load_state(cpu_state, s), Error);
    }
  }
}

BOOST_AUTO_TEST_CASE(steps_captured_in_a_graph_equal_eager_steps_bitwise) {
  require_gpu();
  constexpr int K = 10;
  CudaStream stream;
  const cudaStream_t s = stream.get();
  for (size_t i = 0; i < kConfigs.size(); ++i) {
    BOOST_TEST_CONTEXT(kConfigs[i]) {
      auto eager = make_gpu_vec_env(config(kConfigs[i], kB));
      auto graphed = make_gpu_vec_env(config(kConfigs[i], kB));
      const int n = eager->spec().action.n;
      // Two rounds of K steps' actions, (2, K, B), so the second replay sees new actions.
      Rng arng(5 + i, 999);
      std::vector<float> a(static_cast<size_t>(2 * K * kB));
      for (float& x : a) x = static_cast<float>(arng.below(static_cast<uint32_t>(n)));
      DeviceBuffer<float> d_a(a.size());                         // (2, K, B)
      DeviceBuffer<float> d_round(static_cast<size_t>(K * kB));  // (K, B): what the graph reads
      // On s: a plain cudaMemcpy runs on the legacy stream, which a non-blocking s does not wait for.
      MAMBARL_CUDA_CHECK(cudaMemcpyAsync(d_a.data(), a.data(), d_a.bytes(), cudaMemcpyHostToDevice, s));
      eager->reset(9, s);
      graphed->reset(9, s);
      CudaGraph graph("env steps");
      graph.capture(s, {GraphBinding::buffer("actions", d_round)}, [&](cudaStream_t cs) {
        for (int t = 0; t < K; ++t) graphed->step(d_round.data() + static_cast<size_t>(t) * kB, cs);
      });
      for (int round = 0; round < 2; ++round) {
        const float* src = d_a.data() + static_cast<size_t>(round) * K * kB;
        MAMBARL_CUDA_CHECK(
            cudaMemcpyAsync(d_round.data(), src, d_round.bytes(), cudaMemcpyDeviceToDevice, s));
        graph.launch(s);
        for (int t = 0; t < K; ++t) eager->step(src + static_cast<size_t>(t) * kB, s);
        expect_outputs_equal(outputs_of(*eager, s), outputs_of(*graphed, s), true, (round + 1) * K);
        BOOST_TEST((eager->save_state(s) == graphed->save_state(s)));
      }
      graphed->check_actions(s);
    }
  }
}

BOOST_AUTO_TEST_CASE(an_invalid_action_is_reported_and_its_env_not_stepped) {
  require_gpu();
  CudaStream stream;
  const cudaStream_t s = stream.get();
  const std::vector<std::string> types = {"tmaze", "repeat_previous", "count_recall\ndifficulty: medium",
                                          "stateless_cartpole"};
  for (size_t i = 0; i < types.size(); ++i) {
    auto env = make_gpu_vec_env(config("type: " + types[i], kB));
    const int n = env->spec().action.n, O = env->spec().obs_dim;
    for (const float bad : {2.5f, NAN, -1.0f, static_cast<float>(n)}) {
      BOOST_TEST_CONTEXT(types[i] << ", action " << bad) {
        env->reset(3, s);
        const auto cpu = make_vec_env(config("type: " + types[i], kB));
        cpu->reset(3);
        // The bad action at env 41 and env 60: the lower index is reported.
        std::vector<float> a(static_cast<size_t>(kB), 0.0f);
        a[41] = bad;
        a[60] = bad;
        DeviceBuffer<float> d_a(a.size());
        MAMBARL_CUDA_CHECK(cudaMemcpyAsync(d_a.data(), a.data(), d_a.bytes(), cudaMemcpyHostToDevice, s));
        const std::vector<uint8_t> before = env->save_state(s);
        env->step(d_a.data(), s);
        try {
          env->check_actions(s);
          BOOST_ERROR("no error for action " << bad);
        } catch (const Error& e) {
          const std::string msg = e.what();
          std::ostringstream v;
          v << bad;
          BOOST_TEST(msg.find(env->spec().id) != std::string::npos, msg);
          BOOST_TEST(msg.find("env 41 got action " + v.str()) != std::string::npos, msg);
        }
        env->check_actions(s);  // the record was cleared by the report
        // Envs 41 and 60 kept their episode state, stream and observation, and report nothing.
        const std::vector<uint8_t> after = env->save_state(s);
        const Outputs out = outputs_of(*env, s);
        const size_t env_size =
            (before.size() - kB * (sizeof(Rng) + O * sizeof(float) + sizeof(double) + sizeof(int32_t))) / kB;
        for (const size_t b : {size_t{41}, size_t{60}}) {
          BOOST_TEST(std::memcmp(before.data() + b * env_size, after.data() + b * env_size, env_size) == 0);
          const size_t rng_at = kB * env_size + b * sizeof(Rng);
          BOOST_TEST(std::memcmp(before.data() + rng_at, after.data() + rng_at, sizeof(Rng)) == 0);
          const size_t obs_at = kB * (env_size + sizeof(Rng)) + b * O * sizeof(float);
          BOOST_TEST(std::memcmp(before.data() + obs_at, after.data() + obs_at, O * sizeof(float)) == 0);
          for (int o = 0; o < O; ++o) BOOST_TEST(out.final_obs[b * O + o] == out.obs[b * O + o]);
          BOOST_TEST(out.reward[b] == 0.0f);
          BOOST_TEST(out.terminated[b] == 0);
          BOOST_TEST(out.truncated[b] == 0);
          BOOST_TEST(out.episode_length[b] == 0);
        }
        // Every other env took its step, as the CPU env does with the same (valid) actions.
        std::vector<float> valid = a;
        valid[41] = valid[60] = 0.0f;
        cpu->step(valid.data());
        std::vector<float> cpu_rows, gpu_rows;  // (B - 2, obs_dim)
        for (size_t j = 0; j < out.obs.size(); ++j) {
          if (j / O == 41 || j / O == 60) continue;
          cpu_rows.push_back(cpu->obs()[j]);
          gpu_rows.push_back(out.obs[j]);
        }
        expect_obs_equal(cpu_rows, gpu_rows, !is_cartpole(cpu->spec()), "obs of the valid envs");
      }
    }
  }
}

BOOST_AUTO_TEST_SUITE_END()

// No device needed: the config is refused before any CUDA call.
BOOST_AUTO_TEST_CASE(types_without_a_cuda_version_are_config_errors) {
  std::string bundled;  // every bundled type, sorted, as the error lists them
  for (const std::string& t : builtin_env_types()) {
    BOOST_TEST(has_gpu_env(t), t);
    bundled += (bundled.empty() ? "" : ", ") + t;
  }
  register_env("plugin_only_env", [](const ConfigNode&, int) -> std::unique_ptr<VecEnv> { return nullptr; });
  BOOST_TEST(!has_gpu_env("plugin_only_env"));
  for (const std::string& type : {std::string("plugin_only_env"), std::string("no_such_env")}) {
    try {
      make_gpu_vec_env(config("type: " + type, 4));
      BOOST_ERROR("no error for " << type);
    } catch (const ConfigError& e) {
      const std::string msg = e.what();
      BOOST_TEST(msg.find("env.type") != std::string::npos, msg);
      BOOST_TEST(msg.find(type) != std::string::npos, msg);
      BOOST_TEST(msg.find("(types with one: " + bundled + ")") != std::string::npos, msg);
    }
  }
  // The same per-type validation as make_vec_env.
  BOOST_CHECK_THROW(make_gpu_vec_env(config("type: tmaze\nlenght: 3", 4)), ConfigError);
  BOOST_CHECK_THROW(make_gpu_vec_env(config("type: count_recall\ndifficulty: extreme", 4)), ConfigError);
  BOOST_CHECK_THROW(make_gpu_vec_env(config("type: cartpole", 0)), ConfigError);
}
