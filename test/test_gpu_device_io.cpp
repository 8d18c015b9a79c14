// ABI 4 on the GPU engines, through the plugin (label gpu): the actor's
// device-enqueued steps (actor_enqueue_act / _peek_values / _get_state on
// device buffers, on the caller's stream) give the bits of act() /
// peek_values() / get_state() on host buffers, eagerly and when the caller
// captures a sequence of them into its own CUDA graph and replays it; the
// split step act_begin + act_end gives the bits of act(); and a training
// chunk already in device memory gives the bits of the same chunk from the
// host (metrics and weights), while a chunk with mixed devices is refused.
// Everything is compared bit for bit: the same kernels run on the same
// inputs in the same order (graph replay == eager launches, see
// policy/gpu_actor.hpp and policy/gpu_learner.hpp), so any difference is a
// wrong copy, offset or ordering, not rounding.
// Without a CUDA device every case is skipped, unless MAMBARL_REQUIRE_GPU=1.
#define BOOST_TEST_MODULE gpu_device_io
#include <cuda_runtime.h>

#include <algorithm>
#include <boost/test/unit_test.hpp>
#include <cmath>
#include <cstring>
#include <memory>
#include <string>
#include <vector>

#include "kernels/base/rng.hpp"
#include "kernels/cuda_check.cuh"
#include "kernels/cuda_handles.cuh"
#include "kernels/device_buffer.cuh"
#include "plugin/plugin_host.hpp"
#include "plugin/tensor_view.hpp"
#include "test/gpu_test_util.hpp"
#include "test/plugin_chunk.hpp"

using namespace mambarl;
using namespace mambarl::test;
namespace utf = boost::unit_test;

namespace {

constexpr int kObs = 5;

struct Case {
  const char* name;
  const char* type;
  const char* policy_yaml;
  bool discrete;
  int action_dim;
  const char* dtype;
};

// Both mixers, both heads, and bf16 weights once (another weight path, the
// same copies around it).
const std::vector<Case>& cases() {
  static const std::vector<Case> c = {
      {"mamba1 categorical", "mamba1", "{type: mamba1, d_model: 32, n_layers: 2, d_state: 16}", true, 3,
       "float32"},
      {"mamba1 gaussian bf16", "mamba1", "{type: mamba1, d_model: 16, n_layers: 2, d_state: 5, d_conv: 3}",
       false, 2, "bfloat16"},
      {"mamba3 categorical", "mamba3", "{type: mamba3, d_model: 32, n_layers: 2, d_state: 16, headdim: 16}",
       true, 4, "float32"},
      {"mamba3 gaussian", "mamba3",
       "{type: mamba3, d_model: 16, n_layers: 2, d_state: 6, headdim: 8, ngroups: 2}", false, 2, "float32"},
  };
  return c;
}

const PluginRegistry& registry() {
  static PluginRegistry r = [] {
    PluginRegistry reg;
    reg.load(MAMBARL_TEST_PLUGIN);
    return reg;
  }();
  return r;
}

std::unique_ptr<PolicyHandle> make_policy(const Case& c, uint64_t seed) {
  const std::string text = std::string("policy: ") + c.policy_yaml + "\n";
  mambarl_policy_create_args a{};
  a.config_text = text.c_str();
  a.config_file = "test_gpu_device_io.yaml";
  a.env = mambarl_env_info{kObs, c.discrete ? 1 : 0, c.action_dim};
  a.learner = mambarl_learner_config{0.2, 0.5, 0.01, 1, 0.9, 0.999, 1e-8, 0.01, 0.5, 1.0};
  a.seed = seed;
  a.device = "cuda";
  a.dtype = c.dtype;
  auto p = PolicyHandle::create(registry().factory(c.type), a);
  // Off the init, so that no weight sits at a special value.
  std::vector<float> w;
  p->get_weights(w);
  Rng noise(seed, 9);
  for (auto& x : w) x += static_cast<float>(0.05 * noise.normal());
  p->set_weights(w);
  return p;
}

bool same_bits(const void* a, const void* b, size_t bytes) { return std::memcmp(a, b, bytes) == 0; }
template <typename T>
bool same_bits(const std::vector<T>& a, const std::vector<T>& b) {
  return a.size() == b.size() && same_bits(a.data(), b.data(), a.size() * sizeof(T));
}

template <typename T>
void fill(DeviceBuffer<T>& d, const std::vector<T>& h, cudaStream_t s) {
  BOOST_REQUIRE_EQUAL(d.size(), h.size());
  copy_to_device(d.data(), h.data(), h.size(), s);
}

// One step's inputs: random observations; episode starts at t = 0 and at random.
struct StepInputs {
  std::vector<float> obs;       // (B, obs_dim)
  std::vector<uint8_t> starts;  // (B)
  StepInputs(int B, int t, Rng& rng) : obs(static_cast<size_t>(B) * kObs), starts(static_cast<size_t>(B)) {
    for (auto& o : obs) o = static_cast<float>(rng.normal());
    for (auto& s : starts) s = (t == 0 || rng.uniform() < 0.1) ? 1 : 0;
  }
};

// Host outputs of one step, (B, W), (B), (B).
struct StepOutputs {
  std::vector<float> actions, logp, values;
  StepOutputs(int B, int W)
      : actions(static_cast<size_t>(B) * W), logp(static_cast<size_t>(B)), values(static_cast<size_t>(B)) {}
  bool operator==(const StepOutputs& o) const {
    return same_bits(actions, o.actions) && same_bits(logp, o.logp) && same_bits(values, o.values);
  }
};

// enqueue_act / enqueue_peek_values / enqueue_get_state on device buffers
// against act / peek_values / get_state on host buffers: two actors of one
// policy with the same seed, 50 steps.
void check_enqueue_matches_host(const Case& c) {
  const int B = 48, T = 50;
  auto p = make_policy(c, 3);
  const int W = p->info().act_width;
  const size_t S = static_cast<size_t>(p->info().state_size);
  auto host = p->create_actor(B, 5), dev = p->create_actor(B, 5);
  CudaStream stream;
  const cudaStream_t s = stream.get();
  DeviceBuffer<float> obs_d(static_cast<size_t>(B) * kObs), act_d(static_cast<size_t>(B) * W),
      logp_d(static_cast<size_t>(B)), val_d(static_cast<size_t>(B)), peek_d(static_cast<size_t>(B)),
      state_d(static_cast<size_t>(B) * S);
  DeviceBuffer<uint8_t> starts_d(static_cast<size_t>(B));
  Rng rng(17, 0);
  for (int t = 0; t < T; ++t) {
    const StepInputs in(B, t, rng);
    StepOutputs want(B, W), got(B, W);
    host->act(in.obs.data(), in.starts.data(), want.actions.data(), want.logp.data(), want.values.data());
    fill(obs_d, in.obs, s);
    fill(starts_d, in.starts, s);
    dev->enqueue_act(s, obs_d.data(), starts_d.data(), act_d.data(), logp_d.data(), val_d.data());
    got.actions = copy_to_host(act_d, s);
    got.logp = copy_to_host(logp_d, s);
    got.values = copy_to_host(val_d, s);
    BOOST_REQUIRE_MESSAGE(got == want, c.name << ": step " << t << ": enqueue_act differs from act");
    if (t % 10 == 9) {
      std::vector<float> peek_want(static_cast<size_t>(B)), state_want;
      host->peek_values(in.obs.data(), nullptr, peek_want.data());
      dev->enqueue_peek_values(s, obs_d.data(), nullptr, peek_d.data());
      BOOST_CHECK_MESSAGE(same_bits(copy_to_host(peek_d, s), peek_want),
                          c.name << ": step " << t << ": peek differs");
      // With a needed-env mask (on the device for the enqueued peek): the
      // needed envs' values are the full peek's.
      std::vector<uint8_t> needed(static_cast<size_t>(B));
      for (size_t b = 0; b < needed.size(); ++b) needed[b] = (b + static_cast<size_t>(t)) % 4 == 0;
      fill(starts_d, needed, s);
      std::vector<float> masked_host(static_cast<size_t>(B));
      host->peek_values(in.obs.data(), needed.data(), masked_host.data());
      dev->enqueue_peek_values(s, obs_d.data(), starts_d.data(), peek_d.data());
      const std::vector<float> masked_dev = copy_to_host(peek_d, s);
      for (size_t b = 0; b < needed.size(); ++b)
        if (needed[b])
          BOOST_CHECK_MESSAGE(same_bits(std::vector<float>{masked_host[b], masked_dev[b]},
                                        std::vector<float>{peek_want[b], peek_want[b]}),
                              c.name << ": step " << t << " env " << b << ": a masked peek differs");
      host->get_state(state_want);
      dev->enqueue_get_state(s, state_d.data());
      BOOST_CHECK_MESSAGE(same_bits(copy_to_host(state_d, s), state_want),
                          c.name << ": step " << t << ": enqueue_get_state differs from get_state");
    }
  }
  // The stream is idle (to_host synchronised it): the actor's own-stream calls may follow.
  std::vector<uint8_t> rng_host, rng_dev;
  host->get_rng(rng_host);
  dev->get_rng(rng_dev);
  BOOST_CHECK_MESSAGE(same_bits(rng_host, rng_dev), c.name << ": the Rngs advanced differently");
}

// 8 steps, each enqueue_act then enqueue_peek_values, captured by the caller
// into its own graph on its own stream and replayed twice (new inputs
// written into the same buffers between replays), against the same calls
// launched eagerly by a twin actor.
void check_caller_graph_matches_eager(const Case& c) {
  const int B = 32;
  constexpr size_t K = 8;
  auto p = make_policy(c, 4);
  const int W = p->info().act_width;
  auto eager = p->create_actor(B, 6), graphed = p->create_actor(B, 6);
  CudaStream stream;
  const cudaStream_t s = stream.get();
  const size_t Bz = static_cast<size_t>(B);
  // Per step k: its own slice of every buffer, as a graph bakes pointers in.
  DeviceBuffer<float> obs_d(K * Bz * kObs), act_e(K * Bz * W), logp_e(K * Bz), val_e(K * Bz), peek_e(K * Bz),
      act_g(K * Bz * W), logp_g(K * Bz), val_g(K * Bz), peek_g(K * Bz);
  DeviceBuffer<uint8_t> starts_d(K * Bz);
  const auto enqueue_all = [&](ActorHandle& a, DeviceBuffer<float>& act, DeviceBuffer<float>& logp,
                               DeviceBuffer<float>& val, DeviceBuffer<float>& peek) {
    for (size_t k = 0; k < K; ++k) {
      const float* obs = obs_d.data() + k * Bz * kObs;
      a.enqueue_act(s, obs, starts_d.data() + k * Bz, act.data() + k * Bz * W, logp.data() + k * Bz,
                    val.data() + k * Bz);
      a.enqueue_peek_values(s, obs, k % 2 ? starts_d.data() + k * Bz : nullptr, peek.data() + k * Bz);
    }
  };
  // Global mode: any unsafe call (a sync, an allocation) from any thread
  // during the capture invalidates it, and EndCapture reports it.
  MAMBARL_CUDA_CHECK(cudaStreamBeginCapture(s, cudaStreamCaptureModeGlobal));
  enqueue_all(*graphed, act_g, logp_g, val_g, peek_g);
  cudaGraph_t graph = nullptr;
  MAMBARL_CUDA_CHECK(cudaStreamEndCapture(s, &graph));
  cudaGraphExec_t exec = nullptr;
  const cudaError_t inst = cudaGraphInstantiate(&exec, graph, 0);
  (void)cudaGraphDestroy(graph);
  MAMBARL_CUDA_CHECK(inst);

  Rng rng(23, 0);
  for (int round = 0; round < 2; ++round) {
    std::vector<float> obs;
    std::vector<uint8_t> starts;
    for (size_t k = 0; k < K; ++k) {
      const StepInputs in(B, round * static_cast<int>(K) + static_cast<int>(k), rng);
      obs.insert(obs.end(), in.obs.begin(), in.obs.end());
      starts.insert(starts.end(), in.starts.begin(), in.starts.end());
    }
    fill(obs_d, obs, s);
    fill(starts_d, starts, s);
    enqueue_all(*eager, act_e, logp_e, val_e, peek_e);
    MAMBARL_CUDA_CHECK(cudaGraphLaunch(exec, s));
    const std::string tag = std::string(c.name) + ": replay " + std::to_string(round + 1);
    BOOST_CHECK_MESSAGE(same_bits(copy_to_host(act_g, s), copy_to_host(act_e, s)), tag << ": actions differ");
    BOOST_CHECK_MESSAGE(same_bits(copy_to_host(logp_g, s), copy_to_host(logp_e, s)), tag << ": logp differs");
    BOOST_CHECK_MESSAGE(same_bits(copy_to_host(val_g, s), copy_to_host(val_e, s)), tag << ": values differ");
    BOOST_CHECK_MESSAGE(same_bits(copy_to_host(peek_g, s), copy_to_host(peek_e, s)),
                        tag << ": peeked values differ");
  }
  (void)cudaGraphExecDestroy(exec);
  std::vector<float> se, sg;
  eager->get_state(se);
  graphed->get_state(sg);
  BOOST_CHECK_MESSAGE(same_bits(se, sg), c.name << ": the states after the replays differ");
}

// act_begin + act_end against act: two actors of one policy, 50 steps.
void check_begin_end_matches_act(const Case& c) {
  const int B = 40, T = 50;
  auto p = make_policy(c, 5);
  const int W = p->info().act_width;
  auto whole = p->create_actor(B, 8), split = p->create_actor(B, 8);
  Rng rng(29, 0);
  for (int t = 0; t < T; ++t) {
    StepInputs in(B, t, rng);
    StepOutputs want(B, W), got(B, W);
    whole->act(in.obs.data(), in.starts.data(), want.actions.data(), want.logp.data(), want.values.data());
    split->act_begin(in.obs.data(), in.starts.data());
    // The inputs are the caller's again as soon as begin returns.
    std::fill(in.obs.begin(), in.obs.end(), NAN);
    split->act_end(got.actions.data(), got.logp.data(), got.values.data());
    BOOST_REQUIRE_MESSAGE(got == want, c.name << ": step " << t << ": act_begin + act_end differs from act");
  }
}

// One [T, B] chunk, on the host and copied to the device.
struct Chunk {
  PluginChunk h;
  DeviceBuffer<float> obs_d, actions_d, logp_d, adv_d, ret_d, init_d;
  DeviceBuffer<uint8_t> starts_d;

  Chunk(const Case& c, const PolicyHandle& p, int T, int B, uint64_t seed, cudaStream_t s)
      : h(p, kObs, c.discrete, c.action_dim, T, B, seed),
        obs_d(to_device(h.obs, s)),
        actions_d(to_device(h.actions, s)),
        logp_d(to_device(h.logp, s)),
        adv_d(to_device(h.adv, s)),
        ret_d(to_device(h.ret, s)),
        init_d(to_device(h.init, s)),
        starts_d(to_device(h.starts, s)) {}
  mambarl_chunk host_view() const { return h.view(); }
  mambarl_chunk device_view() const {
    return h.view_of(obs_d.data(), actions_d.data(), logp_d.data(), adv_d.data(), ret_d.data(),
                     starts_d.data(), init_d.data(), MAMBARL_DEVICE_CUDA);
  }
};

bool same_metrics(const TrainMetrics& a, const TrainMetrics& b) {
  const double x[] = {a.loss, a.pg_loss, a.v_loss, a.entropy, a.approx_kl, a.clip_frac, a.grad_norm};
  const double y[] = {b.loss, b.pg_loss, b.v_loss, b.entropy, b.approx_kl, b.clip_frac, b.grad_norm};
  return same_bits(x, y, sizeof x) && a.skipped == b.skipped;
}

// Two policies of one seed, one fed host chunks, one the same chunks from
// device memory: 3 updates (the first runs eagerly, the later ones replay
// the learner's graph), metrics and weights equal bit for bit after each.
void check_device_chunk_matches_host_chunk(const Case& c) {
  auto from_host = make_policy(c, 11), from_dev = make_policy(c, 11);
  CudaStream stream;
  for (int u = 0; u < 3; ++u) {
    const std::string tag = std::string(c.name) + " update " + std::to_string(u + 1);
    Chunk d(c, *from_host, 16, 8, 40 + static_cast<uint64_t>(u), stream.get());
    const TrainMetrics mh = from_host->train_step(d.host_view(), 1e-3);
    const TrainMetrics md = from_dev->train_step(d.device_view(), 1e-3);
    BOOST_CHECK_MESSAGE(!mh.skipped, tag << ": skipped: " << from_host->last_skip_reason());
    BOOST_CHECK_MESSAGE(same_metrics(mh, md), tag << ": metrics differ (loss " << mh.loss << " vs " << md.loss
                                                  << ", grad_norm " << mh.grad_norm << " vs " << md.grad_norm
                                                  << ")");
    std::vector<float> wh, wd;
    from_host->get_weights(wh);
    from_dev->get_weights(wd);
    BOOST_CHECK_MESSAGE(same_bits(wh, wd), tag << ": weights differ");
  }
}

}  // namespace

BOOST_AUTO_TEST_SUITE(gpu_device_io, *utf::precondition(gpu_or_required))

BOOST_AUTO_TEST_CASE(enqueue_act_peek_and_state_match_host_calls) {
  require_gpu();
  for (const Case& c : cases()) BOOST_TEST_CONTEXT(c.name) {
      check_enqueue_matches_host(c);
    }
}

BOOST_AUTO_TEST_CASE(enqueued_steps_captured_by_the_caller_replay_as_eager) {
  require_gpu();
  for (const Case& c : cases()) BOOST_TEST_CONTEXT(c.name) {
      check_caller_graph_matches_eager(c);
    }
}

BOOST_AUTO_TEST_CASE(act_begin_end_matches_act) {
  require_gpu();
  for (const Case& c : cases()) BOOST_TEST_CONTEXT(c.name) {
      check_begin_end_matches_act(c);
    }
}

BOOST_AUTO_TEST_CASE(device_chunk_trains_as_host_chunk) {
  require_gpu();
  for (const Case& c : cases()) BOOST_TEST_CONTEXT(c.name) {
      check_device_chunk_matches_host_chunk(c);
    }
}

// A chunk with one tensor on the other device is refused naming it; a device
// chunk with an invalid discrete action is refused as a host one is; the
// policy is unchanged by either.
BOOST_AUTO_TEST_CASE(mixed_or_invalid_device_chunks_are_refused) {
  require_gpu();
  const Case& c = cases()[0];
  auto p = make_policy(c, 12);
  CudaStream stream;
  Chunk d(c, *p, 8, 4, 60, stream.get());
  std::vector<float> before, after;
  p->get_weights(before);
  mambarl_chunk mixed = d.device_view();
  mixed.returns = view_f32(d.h.ret.data(), {d.h.T, d.h.B});
  std::string msg;
  try {
    p->train_step(mixed, 1e-3);
  } catch (const Error& e) {
    msg = e.what();
  }
  BOOST_TEST(msg == "train_step: returns is on cpu, expected cuda memory");
  d.h.actions[5] = 7.0f;  // categorical over 3 actions
  fill(d.actions_d, d.h.actions, stream.get());
  msg.clear();
  try {
    p->train_step(d.device_view(), 1e-3);
  } catch (const Error& e) {
    msg = e.what();
  }
  BOOST_TEST(msg.find("ppo_loss: action 7 is not an integer in [0, 3)") != std::string::npos, msg);
  p->get_weights(after);
  BOOST_TEST(same_bits(before, after));
}

BOOST_AUTO_TEST_SUITE_END()
