// The learner's data-parallel seam (policy/allreduce.hpp) without MPI: two
// CpuLearner replicas on two threads, summing through an in-process
// Allreduce, each training on its share of a minibatch's sequences, take the
// step one learner on the whole minibatch takes (two halves equal the whole),
// for a categorical and a Gaussian head; a replica with no sequence (B = 0)
// still joins the sums, and then the other replica's step is bit-identical
// to the whole one's. test_mpi runs the same through mpirun end to end.
#define BOOST_TEST_MODULE data_parallel
#include <boost/test/unit_test.hpp>

#include <algorithm>
#include <cmath>
#include <condition_variable>
#include <mutex>
#include <thread>
#include <type_traits>
#include <vector>

#include "kernels/base/rng.hpp"
#include "policy/allreduce.hpp"
#include "policy/cpu_learner.hpp"
#include "policy/policy_config.hpp"

using namespace mambarl;

namespace {

// Sums across `n` threads: each call blocks until every replica made the
// same call, then all get the total. Replica 0's values plus replica 1's in
// either arrival order: two-term float sums commute exactly.
class ThreadAllreduce {
 public:
  explicit ThreadAllreduce(int n) : n_(n) {}

  template <typename T>
  void sum(T* x, size_t count) {
    std::unique_lock<std::mutex> lk(m_);
    if (arrived_ == 0)
      acc_.assign(x, x + count);
    else
      for (size_t i = 0; i < count; ++i) acc_[i] += static_cast<double>(x[i]);
    // The replicas' float partial sums are added in float, as MPI_SUM on MPI_FLOAT does.
    if constexpr (std::is_same_v<T, float>)
      for (auto& v : acc_) v = static_cast<float>(v);
    if (++arrived_ == n_) {
      result_ = acc_;
      arrived_ = 0;
      ++generation_;
      cv_.notify_all();
    } else {
      const long long g = generation_;
      cv_.wait(lk, [&] { return generation_ != g; });
    }
    // result_ stays until the next round completes, which needs this replica.
    for (size_t i = 0; i < count; ++i) x[i] = static_cast<T>(result_[i]);
  }

 private:
  const int n_;
  std::mutex m_;
  std::condition_variable cv_;
  int arrived_ = 0;
  long long generation_ = 0;
  std::vector<double> acc_, result_;
};

class Replica final : public Allreduce {
 public:
  Replica(ThreadAllreduce& all, int n) : all_(all), n_(n) {}
  int size() const override { return n_; }
  void sum(double* x, size_t n) override { all_.sum(x, n); }
  void sum_gradient(float* g, size_t n) override { all_.sum(g, n); }
  // Host memory only: the CPU learner never asks for device sums.
  bool sums_device_memory() const override { return false; }
  void sum_device(double*, size_t, void*) override { throw Error("Replica: host memory only"); }
  void sum_gradient_device(float*, size_t, void*) override { throw Error("Replica: host memory only"); }

 private:
  ThreadAllreduce& all_;
  int n_;
};

PolicyConfig tiny_mamba1() {
  return PolicyConfig::from_yaml(ConfigNode(
      YAML::Load("{type: mamba1, d_model: 8, n_layers: 2, d_state: 4, d_conv: 3}"), "test.yaml", "policy"));
}

// One minibatch of B sequences of T steps, time-major (t, b, ...).
struct Chunk {
  int T = 6, B = 4, O = 3, W = 1;
  size_t S = 0;
  std::vector<float> obs, actions, logp, adv, ret, state;
  std::vector<uint8_t> starts;

  // Sequences cols[0..k) of this chunk as a chunk of their own.
  Chunk columns(const std::vector<int>& cols) const {
    Chunk c = *this;
    c.B = static_cast<int>(cols.size());
    const auto pick = [&](const auto& from, auto& to, size_t width) {
      to.assign(static_cast<size_t>(T) * c.B * width, {});
      for (int t = 0; t < T; ++t)
        for (int j = 0; j < c.B; ++j)
          std::copy_n(
              from.begin() + static_cast<std::ptrdiff_t>((static_cast<size_t>(t) * B + cols[j]) * width),
              width, to.begin() + static_cast<std::ptrdiff_t>((static_cast<size_t>(t) * c.B + j) * width));
    };
    pick(obs, c.obs, O);
    pick(actions, c.actions, W);
    pick(logp, c.logp, 1);
    pick(adv, c.adv, 1);
    pick(ret, c.ret, 1);
    pick(starts, c.starts, 1);
    c.state.assign(static_cast<size_t>(c.B) * S, 0.0f);
    for (int j = 0; j < c.B; ++j)
      std::copy_n(state.begin() + static_cast<std::ptrdiff_t>(cols[j] * S), S,
                  c.state.begin() + static_cast<std::ptrdiff_t>(j * S));
    return c;
  }
  ChunkView view() const {
    return ChunkView{T,          B,          obs.data(),    actions.data(), logp.data(),
                     adv.data(), ret.data(), starts.data(), state.data()};
  }
};

Chunk make_chunk(const HeadSpec& head, size_t state_size, uint64_t seed) {
  Chunk c;
  c.W = head.act_width();
  c.S = state_size;
  Rng rng(seed, 1);
  const size_t M = static_cast<size_t>(c.T) * c.B;
  for (size_t i = 0; i < M * c.O; ++i) c.obs.push_back(static_cast<float>(rng.normal()));
  for (size_t i = 0; i < M * c.W; ++i)
    c.actions.push_back(head.discrete ? static_cast<float>(rng.below(static_cast<uint32_t>(head.action_dim)))
                                      : static_cast<float>(rng.normal()));
  for (size_t i = 0; i < M; ++i) {
    c.logp.push_back(static_cast<float>(-1.0 + 0.3 * rng.normal()));
    c.adv.push_back(static_cast<float>(rng.normal()));
    c.ret.push_back(static_cast<float>(rng.normal()));
    c.starts.push_back(rng.uniform() < 0.15 ? 1 : 0);
  }
  for (size_t i = 0; i < static_cast<size_t>(c.B) * c.S; ++i)
    c.state.push_back(static_cast<float>(0.3 * rng.normal()));
  return c;
}

struct Step {
  std::vector<float> params;
  TrainResult r;
};

// `updates` train_steps of a learner alone on the whole chunk, and of two
// replicas on shares[0] and shares[1] of its sequences (on two threads).
void train_whole_and_shares(const HeadSpec& head, const std::vector<std::vector<int>>& shares, int updates,
                            Step& whole, Step (&replica)[2]) {
  const PpoLossConfig loss;
  AdamWConfig adam;
  adam.max_grad_norm = 0.5;  // active: the clip must see the whole minibatch's norm
  CpuLearner alone(tiny_mamba1(), 3, head, loss, adam, 9);
  const Chunk chunk = make_chunk(head, alone.model().state_size(), 4);
  for (int u = 0; u < updates; ++u) whole.r = alone.train_step(chunk.view(), 1e-2);
  whole.params.assign(alone.params().begin(), alone.params().end());

  ThreadAllreduce all(2);
  std::vector<std::thread> threads;
  for (int k = 0; k < 2; ++k)
    threads.emplace_back([&, k] {
      Replica across(all, 2);
      CpuLearner l(tiny_mamba1(), 3, head, loss, adam, 9, &across);
      const Chunk mine = chunk.columns(shares[static_cast<size_t>(k)]);
      for (int u = 0; u < updates; ++u) replica[k].r = l.train_step(mine.view(), 1e-2);
      replica[k].params.assign(l.params().begin(), l.params().end());
    });
  for (auto& t : threads) t.join();
}

const HeadSpec kHeads[] = {HeadSpec{true, 3}, HeadSpec{false, 2}};

}  // namespace

// Halves of the sequences, three updates: the same weights and metrics to
// float32 rounding of the reordered sums; both replicas bit-identical.
BOOST_AUTO_TEST_CASE(two_halves_train_as_the_whole) {
  for (const HeadSpec& head : kHeads)
    BOOST_TEST_CONTEXT((head.discrete ? "categorical" : "gaussian") << " head") {
      Step whole, replica[2];
      train_whole_and_shares(head, {{0, 3}, {2, 1}}, 3, whole, replica);
      BOOST_TEST(replica[0].params == replica[1].params);
      double scale = 0, diff = 0;
      for (size_t i = 0; i < whole.params.size(); ++i) {
        scale = std::max(scale, static_cast<double>(std::abs(whole.params[i])));
        diff = std::max(diff, static_cast<double>(std::abs(whole.params[i] - replica[0].params[i])));
      }
      BOOST_TEST(diff > 0.0);  // the sums were reordered: not the same bits (else nothing was split)
      // ~1e-7 rounding, through three AdamW steps of lr 1e-2.
      BOOST_TEST(diff <= 1e-5 * scale, "max |diff| " << diff << " of max |w| " << scale);
      const auto close = [](double a, double b) {
        return std::abs(a - b) <= 1e-5 * std::max({std::abs(a), std::abs(b), 1e-2});
      };
      for (const Step& s : replica) {
        BOOST_TEST(close(s.r.loss.loss, whole.r.loss.loss));
        BOOST_TEST(close(s.r.loss.pg_loss, whole.r.loss.pg_loss));
        BOOST_TEST(close(s.r.loss.v_loss, whole.r.loss.v_loss));
        BOOST_TEST(close(s.r.loss.entropy, whole.r.loss.entropy));
        BOOST_TEST(close(s.r.grad_norm, whole.r.grad_norm));
      }
    }
}

// A replica owning no sequence of the minibatch adds zeros to every sum, so
// the step is exactly the whole learner's.
BOOST_AUTO_TEST_CASE(a_replica_with_no_sequences_still_joins_the_sums) {
  for (const HeadSpec& head : kHeads)
    BOOST_TEST_CONTEXT((head.discrete ? "categorical" : "gaussian") << " head") {
      Step whole, replica[2];
      train_whole_and_shares(head, {{0, 1, 2, 3}, {}}, 2, whole, replica);
      BOOST_TEST(replica[0].params == whole.params);
      BOOST_TEST(replica[1].params == whole.params);
      BOOST_TEST(replica[1].r.loss.loss == whole.r.loss.loss);
      BOOST_TEST(replica[1].r.grad_norm == whole.r.grad_norm);
    }
}
