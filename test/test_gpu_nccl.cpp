// The data-parallel GPU learner's NCCL path on one GPU (there is no
// multi-GPU machine to run several ranks on): the runner's NCCL transport
// (tools/nccl_collective.hpp) joined by ONE rank, with no MPI (the unique id
// travels through a one-process Ranks), reached through the plugin ABI's
// collective (plugin/host_collective.hpp) as the plugin's learner reaches it.
// With one rank every sum is the identity, so the learner with the
// collective must give the same bits as the learner without it: losses,
// gradients, weights and moments after three updates, in graph mode (the
// sums captured in the update graph) and eager (graph == eager). A
// transport that sums host memory only is refused by name, and the
// transport's watchdog reports an update past its timeout, naming the rank.
// Skips without a CUDA device unless MAMBARL_REQUIRE_GPU=1.
#define BOOST_TEST_MODULE gpu_nccl
#include <cuda_runtime.h>

#include <boost/test/unit_test.hpp>
#include <chrono>
#include <condition_variable>
#include <memory>
#include <mutex>
#include <thread>
#include <string>
#include <vector>

#include "kernels/base/rng.hpp"
#include "plugin/host_collective.hpp"
#include "policy/gpu_learner.hpp"
#include "policy/policy_config.hpp"
#include "test/gpu_test_util.hpp"
#include "tools/nccl_collective.hpp"
#include "tools/ranks.hpp"

using namespace mambarl;
using mambarl::test::gpu_or_required;
using mambarl::test::require_gpu;

namespace {

struct Case {
  const char* name;
  const char* policy_yaml;
  bool discrete;
  int action_dim;
};

// A recurrent mixer with a categorical head, and a Gaussian head (whose
// d/d log σ is summed in the loss kernels, then with the gradient).
const Case kCases[] = {
    {"mamba1 categorical", "{type: mamba1, d_model: 32, n_layers: 2}", true, 3},
    {"gru gaussian", "{type: gru, d_model: 16, n_layers: 2}", false, 2},
};

constexpr int kObs = 5, kT = 12, kB = 6;
constexpr double kLr = 1e-3;

PolicyConfig policy_of(const Case& c) {
  return PolicyConfig::from_yaml(ConfigNode(YAML::Load(c.policy_yaml), "test.yaml", "policy"));
}
AdamWConfig adam_cfg() {
  AdamWConfig a;
  a.weight_decay = 0.01;
  a.max_grad_norm = 0.05;  // the clip (whose norm is taken after the sum) is active
  return a;
}

struct HostChunk {
  std::vector<float> obs, actions, old_logp, adv, returns, state0;
  std::vector<uint8_t> starts;
  ChunkView view() const {
    return ChunkView{kT,           kB,         obs.data(),    actions.data(), old_logp.data(),
                     adv.data(),   returns.data(), starts.data(), state0.data()};
  }
};

HostChunk make_chunk(const Case& c, size_t state_size, uint64_t seed) {
  HostChunk h;
  Rng rng(seed, 3);
  const size_t M = static_cast<size_t>(kT) * kB, aw = c.discrete ? 1 : static_cast<size_t>(c.action_dim);
  h.obs.resize(M * kObs);
  for (auto& v : h.obs) v = static_cast<float>(rng.normal());
  h.starts.resize(M);
  for (auto& s : h.starts) s = rng.uniform() < 0.15 ? 1 : 0;
  h.state0.resize(std::max<size_t>(kB * state_size, 1));
  for (auto& v : h.state0) v = static_cast<float>(0.5 * rng.normal());
  h.actions.resize(M * aw);
  for (auto& a : h.actions)
    a = c.discrete ? static_cast<float>(rng.below(static_cast<uint32_t>(c.action_dim)))
                   : static_cast<float>(rng.normal());
  h.old_logp.resize(M);
  for (auto& v : h.old_logp) v = static_cast<float>(-1.0 + 0.3 * rng.normal());
  h.adv.resize(M);
  for (auto& v : h.adv) v = static_cast<float>(0.5 + 2.0 * rng.normal());
  h.returns.resize(M);
  for (auto& v : h.returns) v = static_cast<float>(rng.normal());
  return h;
}

void check_same(const std::string& tag, const TrainResult& a, const TrainResult& b) {
  BOOST_REQUIRE_MESSAGE(!a.skipped && !b.skipped, tag << ": skipped (" << a.reason << " / " << b.reason << ")");
  BOOST_CHECK_EQUAL(a.loss.loss, b.loss.loss);
  BOOST_CHECK_EQUAL(a.loss.pg_loss, b.loss.pg_loss);
  BOOST_CHECK_EQUAL(a.loss.v_loss, b.loss.v_loss);
  BOOST_CHECK_EQUAL(a.loss.entropy, b.loss.entropy);
  BOOST_CHECK_EQUAL(a.loss.approx_kl, b.loss.approx_kl);
  BOOST_CHECK_EQUAL(a.loss.clip_frac, b.loss.clip_frac);
  BOOST_CHECK_EQUAL(a.grad_norm, b.grad_norm);
}

void check_same(const std::string& tag, const GpuLearner& a, const GpuLearner& b) {
  BOOST_CHECK_MESSAGE(a.grads() == b.grads(), tag << ": gradients differ");
  BOOST_CHECK_MESSAGE(a.params() == b.params(), tag << ": weights differ");
  BOOST_CHECK_MESSAGE(a.exp_avg() == b.exp_avg(), tag << ": first moments differ");
  BOOST_CHECK_MESSAGE(a.exp_avg_sq() == b.exp_avg_sq(), tag << ": second moments differ");
}

}  // namespace

BOOST_AUTO_TEST_SUITE(gpu_nccl, *boost::unit_test::precondition(gpu_or_required))

BOOST_AUTO_TEST_CASE(one_rank_nccl_gives_the_bits_of_no_collective) {
  require_gpu();
  const std::unique_ptr<Ranks> alone = one_process_ranks();
  NcclCollective nccl(*alone, rank_gpu(), 60.0);
  HostCollective across(*nccl.collective());
  BOOST_REQUIRE(across.sums_device_memory());
  for (const Case& c : kCases) {
    BOOST_TEST_MESSAGE("case: " << c.name);
    const PolicyConfig pol = policy_of(c);
    const HeadSpec head{c.discrete, c.action_dim};
    GpuLearner plain(pol, kObs, head, PpoLossConfig{}, adam_cfg(), 7);
    GpuLearner graph(pol, kObs, head, PpoLossConfig{}, adam_cfg(), 7, Precision::float32, &across);
    GpuLearner eager(pol, kObs, head, PpoLossConfig{}, adam_cfg(), 7, Precision::float32, &across);
    eager.set_launch(GpuLearner::Launch::eager);
    const std::vector<float> w0 = plain.params();
    // Update 1 is graph mode's eager warm-up; 2 captures the NCCL sums with
    // the rest of the update; 3 replays the captured graph.
    for (int u = 0; u < 3; ++u) {
      const std::string tag = std::string(c.name) + " update " + std::to_string(u + 1);
      const HostChunk chunk = make_chunk(c, plain.model().state_size(), 40 + static_cast<uint64_t>(u));
      const TrainResult rp = plain.train_step(chunk.view(), kLr);
      const TrainResult rg = graph.train_step(chunk.view(), kLr);
      const TrainResult re = eager.train_step(chunk.view(), kLr);
      check_same(tag + " nccl graph vs none", rg, rp);
      check_same(tag + " nccl eager vs graph", re, rg);
      BOOST_CHECK_MESSAGE(rp.grad_norm > adam_cfg().max_grad_norm, tag << ": the clip was not exercised");
      check_same(tag + " nccl graph vs none", graph, plain);
      check_same(tag + " nccl eager vs graph", eager, graph);
    }
    BOOST_CHECK(plain.params() != w0);  // it trained
    BOOST_CHECK_EQUAL(graph.step_count(), 3);
  }
}

// A collective without device sums (the runner's MPI one) cannot serve a
// GPU learner, whose sums run inside its update graph: refused at
// construction, naming NCCL.
BOOST_AUTO_TEST_CASE(host_only_collective_is_refused) {
  require_gpu();
  mambarl_collective host_only{};
  host_only.rank = 0;
  host_only.size = 1;
  host_only.sum_f64 = [](void*, double*, int64_t) -> mambarl_status { return MAMBARL_OK; };
  host_only.sum_gradient = [](void*, mambarl_tensor, void*) -> mambarl_status { return MAMBARL_OK; };
  host_only.last_error = [](void*) -> const char* { return ""; };
  HostCollective across(host_only);
  BOOST_CHECK(!across.sums_device_memory());
  const Case& c = kCases[0];
  try {
    GpuLearner l(policy_of(c), kObs, HeadSpec{c.discrete, c.action_dim}, PpoLossConfig{}, adam_cfg(), 7,
                 Precision::float32, &across);
    BOOST_ERROR("a GPU learner accepted a host-only collective");
  } catch (const Error& e) {
    BOOST_TEST_MESSAGE("refused with: " << e.what());
    BOOST_CHECK(std::string(e.what()).find("NCCL") != std::string::npos);
  }
}

// The watchdog (here observed instead of ending the process): a watched
// update that ends in time is left alone, and one that lives past the
// timeout is reported, naming the rank, the work and the config key.
BOOST_AUTO_TEST_CASE(watchdog_reports_an_update_past_its_timeout) {
  require_gpu();
  using namespace std::chrono_literals;
  const std::unique_ptr<Ranks> alone = one_process_ranks();
  std::mutex mu;
  std::condition_variable reported;
  std::string error;
  NcclCollective nccl(*alone, rank_gpu(), 1.0, [&](const std::string& e) {
    std::lock_guard<std::mutex> lk(mu);
    error = e;
    reported.notify_all();
  });
  { NcclCollective::Watch quick(nccl, "a quick update"); }
  std::this_thread::sleep_for(1500ms);  // longer than the timeout, but nothing is watched
  {
    std::lock_guard<std::mutex> lk(mu);
    BOOST_REQUIRE_MESSAGE(error.empty(), "reported without a late update: " << error);
  }
  NcclCollective::Watch late(nccl, "the test's update");
  std::unique_lock<std::mutex> lk(mu);
  BOOST_REQUIRE_MESSAGE(reported.wait_for(lk, 20s, [&] { return !error.empty(); }),
                        "no report 20 s into an update with a 1 s timeout");
  BOOST_TEST_MESSAGE("reported: " << error);
  for (const char* part : {"error on rank 0 of 1", "the test's update", "runtime.collective_timeout_s"})
    BOOST_CHECK_MESSAGE(error.find(part) != std::string::npos, "the report lacks '" << part << "': " << error);
}

BOOST_AUTO_TEST_SUITE_END()
