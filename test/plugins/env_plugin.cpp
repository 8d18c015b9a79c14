// A plugin that adds one env type, `coin_guess`, through the C ABI, for the
// tests of plugin-provided envs: each step shows a fair coin (one-hot), the
// action guesses the face just shown (+1/length when right), and the episode
// is truncated after `length` steps (default 8). With CONFLICT_NAME defined it
// registers under that name instead (e.g. "cartpole", a clash).
// Fault injection for the stalled-actor test: `stall_at_step: N` (default 0,
// never) makes the N-th step() call of an env block for good, like an env
// stuck on a dead simulator or socket.
#include <chrono>
#include <cstdio>
#include <cstring>
#include <string>
#include <thread>
#include <vector>

#include "kernels/base/config_node.hpp"
#include "kernels/base/rng.hpp"
#include "plugin/mambarl_plugin.h"

#ifndef CONFLICT_NAME
#define CONFLICT_NAME "coin_guess"
#endif

struct mambarl_env {
  int B = 0, length = 8;
  long long steps = 0, stall_at_step = 0;  // step() calls so far; 0: never stall
  std::vector<mambarl::Rng> rng;        // (B)
  std::vector<int32_t> t, coin;         // (B) step in episode, face shown
  std::vector<double> ret;              // (B) running return
  std::vector<float> obs, final_obs;    // (B, 2)
  std::vector<float> reward, ep_return; // (B)
  std::vector<uint8_t> term, trunc;     // (B)
  std::vector<int32_t> ep_length;       // (B)
  float low[2] = {0, 0}, high[2] = {1, 1};
  std::string error;
};

namespace {

void show(mambarl_env& e, int b, float* obs) {
  e.coin[b] = static_cast<int32_t>(e.rng[b].below(2));
  obs[0] = e.coin[b] == 0 ? 1.0f : 0.0f;
  obs[1] = e.coin[b] == 1 ? 1.0f : 0.0f;
}

mambarl_status create(const char* env_yaml, int32_t num_envs, mambarl_env** out, mambarl_env_desc* d,
                      char* error, size_t error_len) {
  try {
    const mambarl::ConfigNode cfg(YAML::Load(env_yaml), "env");
    cfg.check_known({"type", "num_envs", "length", "stall_at_step"});
    auto* e = new mambarl_env;
    e->B = num_envs;
    e->length = cfg.get_in("length", 8, 1, 1000000);
    e->stall_at_step = cfg.get_in<long long>("stall_at_step", 0, 0, 1LL << 40);
    const size_t B = static_cast<size_t>(num_envs);
    e->rng.resize(B);
    e->t.assign(B, 0);
    e->coin.assign(B, 0);
    e->ret.assign(B, 0.0);
    e->obs.assign(2 * B, 0.0f);
    e->final_obs.assign(2 * B, 0.0f);
    e->reward.assign(B, 0.0f);
    e->ep_return.assign(B, 0.0f);
    e->term.assign(B, 0);
    e->trunc.assign(B, 0);
    e->ep_length.assign(B, 0);
    *d = mambarl_env_desc{2, 1, 2, e->length, e->low, e->high, e->obs.data(), e->final_obs.data(),
                          e->reward.data(), e->term.data(), e->trunc.data(), e->ep_return.data(),
                          e->ep_length.data()};
    *out = e;
    return MAMBARL_OK;
  } catch (const std::exception& ex) {
    std::snprintf(error, error_len, "%s", ex.what());
    return MAMBARL_ERROR;
  }
}

void destroy(mambarl_env* e) { delete e; }
const char* last_error(const mambarl_env* e) { return e->error.c_str(); }

mambarl_status reset(mambarl_env* e, uint64_t seed) {
  for (int b = 0; b < e->B; ++b) {
    e->rng[b] = mambarl::Rng(seed, static_cast<uint64_t>(b));
    e->t[b] = 0;
    e->ret[b] = 0;
    show(*e, b, e->obs.data() + 2 * b);
  }
  return MAMBARL_OK;
}

mambarl_status step(mambarl_env* e, const float* actions) {
  if (++e->steps == e->stall_at_step)
    for (;;) std::this_thread::sleep_for(std::chrono::hours(1));
  for (int b = 0; b < e->B; ++b)
    if (!(actions[b] == 0.0f || actions[b] == 1.0f)) {
      e->error = "coin_guess: env " + std::to_string(b) + " got action " + std::to_string(actions[b]);
      return MAMBARL_ERROR;
    }
  for (int b = 0; b < e->B; ++b) {
    const float r = static_cast<int>(actions[b]) == e->coin[b] ? 1.0f / static_cast<float>(e->length) : 0.0f;
    e->reward[b] = r;
    e->ret[b] += r;
    ++e->t[b];
    e->term[b] = 0;
    e->trunc[b] = e->t[b] >= e->length;
    show(*e, b, e->final_obs.data() + 2 * b);
    if (e->trunc[b]) {
      e->ep_return[b] = static_cast<float>(e->ret[b]);
      e->ep_length[b] = e->t[b];
      e->t[b] = 0;
      e->ret[b] = 0;
      show(*e, b, e->obs.data() + 2 * b);
    } else {
      e->ep_return[b] = 0;
      e->ep_length[b] = 0;
      std::memcpy(e->obs.data() + 2 * b, e->final_obs.data() + 2 * b, 2 * sizeof(float));
    }
  }
  return MAMBARL_OK;
}

mambarl_status render(const mambarl_env* e, int32_t env, char* text, size_t len) {
  std::snprintf(text, len, "coin %s, step %d/%d\n", e->coin[env] ? "tails" : "heads", e->t[env], e->length);
  return MAMBARL_OK;
}

// State: rng, t, coin, ret, obs (the rest is per-step output).
int64_t state_size(const mambarl_env* e) {
  return static_cast<int64_t>(e->B * (sizeof(mambarl::Rng) + 2 * sizeof(int32_t) + sizeof(double) + 2 * sizeof(float)));
}
mambarl_status save_state(const mambarl_env* e, uint8_t* out, int64_t n) {
  if (n != state_size(e)) return MAMBARL_ERROR;
  for (const auto& [p, k] : {std::pair<const void*, size_t>{e->rng.data(), e->rng.size() * sizeof(mambarl::Rng)},
                             {e->t.data(), e->t.size() * 4}, {e->coin.data(), e->coin.size() * 4},
                             {e->ret.data(), e->ret.size() * 8}, {e->obs.data(), e->obs.size() * 4}}) {
    std::memcpy(out, p, k);
    out += k;
  }
  return MAMBARL_OK;
}
mambarl_status load_state(mambarl_env* e, const uint8_t* in, int64_t n) {
  if (n != state_size(e)) {
    e->error = "coin_guess: state has " + std::to_string(n) + " bytes, expected " + std::to_string(state_size(e));
    return MAMBARL_ERROR;
  }
  for (const auto& [p, k] : {std::pair<void*, size_t>{e->rng.data(), e->rng.size() * sizeof(mambarl::Rng)},
                             {e->t.data(), e->t.size() * 4}, {e->coin.data(), e->coin.size() * 4},
                             {e->ret.data(), e->ret.size() * 8}, {e->obs.data(), e->obs.size() * 4}}) {
    std::memcpy(p, in, k);
    in += k;
  }
  return MAMBARL_OK;
}

const mambarl_env_factory kCoinGuess = {MAMBARL_PLUGIN_ABI_VERSION, CONFLICT_NAME, "guess the coin just shown",
                                        create, destroy, last_error, reset, step, render, state_size,
                                        save_state, load_state};

}  // namespace

extern "C" MAMBARL_PLUGIN_EXPORT mambarl_status mambarl_plugin_register(uint32_t host_abi_version,
                                                                        const mambarl_registry* registry) {
  if (host_abi_version != MAMBARL_PLUGIN_ABI_VERSION) return MAMBARL_ERROR;
  return registry->register_env(registry->host, &kCoinGuess);
}
