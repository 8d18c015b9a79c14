// The whole actor-critic model, the PPO loss, AdamW and the CPU actor/learner.
#define BOOST_TEST_MODULE model
#include <boost/test/unit_test.hpp>

#include <algorithm>
#include <cmath>

#include "policy/adamw.hpp"
#include "policy/cpu_actor.hpp"
#include "policy/cpu_learner.hpp"
#include "policy/distributions.hpp"
#include "policy/policy_config.hpp"
#include "policy/ppo_loss.hpp"
#include "test/test_util.hpp"
#include "tools/alloc_counter.hpp"

using namespace mambarl;

namespace {

PolicyConfig tiny_policy(const std::string& type, bool start_embedding = false) {
  YAML::Node n = YAML::Load("{d_model: 4, n_layers: 2}");
  n["type"] = type;
  n["start_embedding"] = start_embedding;
  if (type == "mamba1") {
    n["d_state"] = 3;
    n["d_conv"] = 3;
  }
  if (type == "mamba3") {
    n["d_state"] = 4;
    n["headdim"] = 2;
    n["ngroups"] = 2;
  }
  return PolicyConfig::from_yaml(ConfigNode(n, "test.yaml", "policy"));
}

struct ModelProblem {
  int T = 6, B = 3, O = 3;
  Mat<double> obs, R;           // (T*B, O), (T*B, A)
  Vec<double> r_v;              // (T*B)
  std::vector<uint8_t> starts;  // (T*B)
  std::vector<double> state0;
};

ModelProblem make_problem(const ActorCritic<double>& m, uint64_t seed) {
  ModelProblem p;
  Rng rng(seed, 3);
  p.obs.resize(p.T * p.B, p.O);
  p.R.resize(p.T * p.B, m.spec().head.action_dim);
  p.r_v.resize(p.T * p.B);
  for (Eigen::Index i = 0; i < p.obs.size(); ++i) p.obs.data()[i] = rng.normal();
  for (Eigen::Index i = 0; i < p.R.size(); ++i) p.R.data()[i] = rng.normal();
  for (Eigen::Index i = 0; i < p.r_v.size(); ++i) p.r_v[i] = rng.normal();
  p.starts.assign(static_cast<size_t>(p.T * p.B), 0);
  p.starts[0 * p.B + 0] = 1;  // env 0 starts at t=0,
  p.starts[2 * p.B + 1] = 1;  // env 1 resets twice inside the chunk,
  p.starts[4 * p.B + 1] = 1;
  p.state0.resize(static_cast<size_t>(p.B) * m.state_size());
  for (auto& v : p.state0) v = 0.3 * rng.normal();
  return p;
}

double model_loss(const ActorCritic<double>& m, const std::vector<double>& params, const ModelProblem& p) {
  auto cache = m.make_cache();
  std::vector<double> state = p.state0;
  Mat<double> head;
  Vec<double> values;
  m.forward(params.data(), p.obs, p.starts.data(), p.T, p.B, state.data(), cache, head, values);
  return (head.array() * p.R.array()).sum() + values.dot(p.r_v);
}

}  // namespace

BOOST_AUTO_TEST_SUITE(actor_critic)

// Every parameter tensor of the whole model (obs projection, the episode-start
// embedding, each layer's norm and mixer, final norm, both heads) against
// central differences in float64.
BOOST_AUTO_TEST_CASE(full_model_gradients_match_finite_differences) {
  for (const char* type : {"mamba1", "mamba3", "gru", "mlp"})
    for (bool discrete : {true, false}) {
      // With the start embedding on the categorical head only: it enters h⁰,
      // which both heads reach the same way.
      BOOST_TEST_CONTEXT("policy " << type << (discrete ? " categorical, start embedding" : " gaussian")) {
        auto m = make_actor_critic<double>(tiny_policy(type, discrete), 3, HeadSpec{discrete, discrete ? 3 : 2});
        BOOST_TEST((m->layout().find("start_embed") >= 0) == discrete);
        std::vector<double> params(m->layout().size());
        m->init_params(params.data(), 11);
        Rng rng(4, 4);
        for (auto& v : params) v += 0.1 * rng.normal();  // off the init's symmetric point
        const ModelProblem p = make_problem(*m, 21);
        auto cache = m->make_cache();
        std::vector<double> state = p.state0, grads(params.size(), 0.0);
        Mat<double> head;
        Vec<double> values;
        m->forward(params.data(), p.obs, p.starts.data(), p.T, p.B, state.data(), cache, head, values);
        m->backward(params.data(), cache, p.R, p.r_v, /*value_trunk_coef=*/1.0, grads.data());
        const double h = 1e-6;
        for (const auto& info : m->layout().params()) {
          if (info.name == "pi.log_std") continue;  // enters through the loss only (tested below)
          Vec<double> a(static_cast<Eigen::Index>(info.numel)), n(a.size());
          for (size_t i = 0; i < info.numel; ++i) {
            const size_t k = info.offset + i;
            const double orig = params[k];
            params[k] = orig + h;
            const double lp = model_loss(*m, params, p);
            params[k] = orig - h;
            const double lm = model_loss(*m, params, p);
            params[k] = orig;
            n[static_cast<Eigen::Index>(i)] = (lp - lm) / (2 * h);
            a[static_cast<Eigen::Index>(i)] = grads[k];
          }
          BOOST_CHECK_MESSAGE(n.norm() > 1e-8, info.name << ": zero finite-difference gradient (vacuous)");
          // Central differences with h=1e-6 carry rounding noise of about
          // eps·|loss|/h ≈ 1e-10 per element (measured: ~1e-9 per tensor), so
          // the normwise bound is 1e-6 relative plus that absolute floor: the
          // dt path's gradients are ~1e-5 in size (dt starts in [1e-3, 1e-1]).
          // A wrong term shows up as O(1) relative error.
          const double err = (a - n).norm();
          BOOST_CHECK_MESSAGE(err <= 1e-6 * n.norm() + 1e-8,
                              "grad " << info.name << ": |analytic - numeric| = " << err << ", |numeric| = " << n.norm());
          const auto bad = test::first_mismatch(a, n, 1e-5, 1e-7);
          BOOST_CHECK_MESSAGE(bad < 0, "grad " << info.name << ": element " << bad << " differs");
        }
      }
    }
}

// algo.vf_trunk_coef (backward's value_trunk_coef k): the value head's own
// gradient is all of dvalues' for any k; every other parameter's is the
// policy head's part plus k times the value head's part, so at k = 0 the
// value loss reaches none of the layers the heads share.
BOOST_AUTO_TEST_CASE(value_trunk_coef_scales_the_value_gradient_below_the_value_head) {
  for (const char* type : {"mamba1", "mamba3", "gru", "mlp"}) {
    BOOST_TEST_CONTEXT("policy " << type) {
      auto m = make_actor_critic<double>(tiny_policy(type), 3, HeadSpec{true, 3});
      std::vector<double> params(m->layout().size());
      m->init_params(params.data(), 11);
      const ModelProblem p = make_problem(*m, 21);
      const auto grads = [&](const Mat<double>& dhead, const Vec<double>& dvalues, double k) {
        auto cache = m->make_cache();
        std::vector<double> state = p.state0, g(params.size(), 0.0);
        Mat<double> head;
        Vec<double> values;
        m->forward(params.data(), p.obs, p.starts.data(), p.T, p.B, state.data(), cache, head, values);
        m->backward(params.data(), cache, dhead, dvalues, k, g.data());
        return g;
      };
      const Mat<double> no_head = Mat<double>::Zero(p.R.rows(), p.R.cols());
      const Vec<double> no_values = Vec<double>::Zero(p.r_v.size());
      const std::vector<double> g_pi = grads(p.R, no_values, 1.0), g_v = grads(no_head, p.r_v, 1.0);
      double shared_v = 0;  // |g_v| over the shared layers: the check below is not vacuous
      for (const auto& info : m->layout().params())
        if (info.name != "v.weight" && info.name != "v.bias")
          for (size_t i = 0; i < info.numel; ++i) shared_v += std::abs(g_v[info.offset + i]);
      BOOST_TEST(shared_v > 1e-3);
      for (const double k : {0.0, 0.3}) {
        const std::vector<double> g = grads(p.R, p.r_v, k);
        for (const auto& info : m->layout().params()) {
          const double share = info.name == "v.weight" || info.name == "v.bias" ? 1.0 : k;
          double err = 0;
          for (size_t i = 0; i < info.numel; ++i) {
            const size_t j = info.offset + i;
            err = std::max(err, std::abs(g[j] - (g_pi[j] + share * g_v[j])) / (1 + std::abs(g[j])));
          }
          BOOST_CHECK_MESSAGE(err <= 1e-12, info.name << " at k = " << k << ": off by " << err);
        }
      }
    }
  }
}

BOOST_AUTO_TEST_CASE(init_is_seeded_and_reproducible) {
  auto m = make_actor_critic<float>(tiny_policy("mamba1"), 3, HeadSpec{true, 2});
  std::vector<float> a(m->layout().size()), b(a.size()), c(a.size());
  m->init_params(a.data(), 1);
  m->init_params(b.data(), 1);
  m->init_params(c.data(), 2);
  BOOST_TEST(a == b);
  BOOST_TEST(a != c);
  const ParamId ls = m->layout().find("layers.0.mixer.A_log");
  BOOST_REQUIRE(ls >= 0);
  ParamView<float> P(m->layout(), a.data());
  BOOST_TEST(P.mat(ls)(0, 2) == std::log(3.0f));
}

// The actor's T=1 steps on the carried state reproduce the learner's chunk
// forward (values and log-probs), with resets, through the float32 path the
// runner uses.
BOOST_AUTO_TEST_CASE(actor_steps_equal_learner_chunk) {
  for (const char* type : {"mamba1", "mamba3", "gru"})
  for (bool start_embedding : {false, true}) {
    BOOST_TEST_CONTEXT("policy " << type << (start_embedding ? " with start embedding" : "")) {
      CpuLearner learner(tiny_policy(type, start_embedding), 3, HeadSpec{true, 3}, PpoLossConfig{}, AdamWConfig{}, 5);
      const int T = 9, B = 4, O = 3;
      if (start_embedding) {  // it starts at zero: give it values that change the result
        ParamView<float> P(learner.model().layout(), learner.params().data());
        P.vec(learner.model().layout().find("start_embed")).setConstant(0.7f);
      }
      CpuActor actor(learner.shared_model(), B, 6);
      actor.set_weights(learner.params().data(), learner.params().size(), 1);
      Rng rng(8, 0);
      std::vector<float> obs(static_cast<size_t>(T * B * O)), act(static_cast<size_t>(T * B)),
          logp(static_cast<size_t>(T * B)), val(static_cast<size_t>(T * B));
      std::vector<uint8_t> starts(static_cast<size_t>(T * B), 0);
      for (auto& o : obs) o = static_cast<float>(rng.normal());
      for (int b = 0; b < B; ++b) starts[static_cast<size_t>(b)] = 1;
      starts[3 * B + 2] = starts[6 * B + 2] = starts[5 * B + 0] = 1;
      for (int t = 0; t < T; ++t)
        actor.act(obs.data() + t * B * O, starts.data() + t * B, act.data() + t * B, logp.data() + t * B, val.data() + t * B);
      const auto& m = learner.model();
      auto cache = m.make_cache();
      std::vector<float> state(static_cast<size_t>(B) * m.state_size(), 0.0f);
      Mat<float> head;
      Vec<float> values;
      m.forward(learner.params().data(), ConstMatMap<float>(obs.data(), T * B, O), starts.data(), T, B, state.data(),
                cache, head, values);
      for (int i = 0; i < T * B; ++i) {
        float lp[3];
        Categorical<float>::log_probs(head.data() + i * 3, 3, lp);
        // Same float32 operations in the same order: equal to rounding of the
        // batched-vs-single-row GEMM only.
        BOOST_CHECK_SMALL(lp[static_cast<int>(act[static_cast<size_t>(i)])] - logp[static_cast<size_t>(i)], 1e-5f);
        BOOST_CHECK_SMALL(values[i] - val[static_cast<size_t>(i)], 1e-5f);
      }
    }
  }
}

// Greedy actions (`mambarl eval --deterministic`) are the mode of the head
// the actor computes: the argmax of the logits, the Gaussian's mean. The
// reference replays the actor's own T=1 forward on a copy of its state, so the
// heads are the same bits and the comparison is exact; greedy actors with
// different seeds agree, since no Rng is drawn.
BOOST_AUTO_TEST_CASE(greedy_actor_takes_the_mode_of_its_head) {
  for (const bool discrete : {true, false}) {
    BOOST_TEST_CONTEXT((discrete ? "categorical" : "gaussian") << " head") {
      const int T = 6, B = 4, O = 3, A = 3;
      const HeadSpec head{discrete, A};
      CpuLearner learner(tiny_policy("mamba1"), O, head, PpoLossConfig{}, AdamWConfig{}, 5);
      const auto& m = learner.model();
      const float* w = learner.params().data();
      CpuActor greedy(learner.shared_model(), B, 6), other_seed(learner.shared_model(), B, 7);
      for (CpuActor* a : {&greedy, &other_seed}) {
        a->set_weights(w, learner.params().size(), 1);
        a->set_greedy(true);
      }
      auto cache = m.make_cache();
      std::vector<float> state(static_cast<size_t>(B) * m.state_size(), 0.0f);  // (B, state_size)
      Mat<float> logits;                                                       // (B, A)
      Vec<float> values;                                                       // (B)
      Rng rng(8, 0);
      std::vector<float> obs(static_cast<size_t>(B * O)), act(static_cast<size_t>(B * head.act_width())),
          act2(act.size()), logp(static_cast<size_t>(B)), val(static_cast<size_t>(B));
      std::vector<uint8_t> starts(static_cast<size_t>(B), 1);
      for (int t = 0; t < T; ++t) {
        for (auto& o : obs) o = static_cast<float>(rng.normal());
        m.forward(w, ConstMatMap<float>(obs.data(), B, O), starts.data(), 1, B, state.data(), cache, logits, values);
        greedy.act(obs.data(), starts.data(), act.data(), logp.data(), val.data());
        other_seed.act(obs.data(), starts.data(), act2.data(), logp.data(), val.data());
        BOOST_TEST(act == act2, boost::test_tools::per_element());
        for (int b = 0; b < B; ++b) {
          const float* h = logits.data() + b * A;
          if (discrete) {
            BOOST_TEST(act[static_cast<size_t>(b)] == static_cast<float>(std::max_element(h, h + A) - h));
          } else {
            for (int j = 0; j < A; ++j) BOOST_TEST(act[static_cast<size_t>(b * A + j)] == h[j]);
          }
        }
        std::fill(starts.begin(), starts.end(), 0);
      }
    }
  }
}

BOOST_AUTO_TEST_CASE(reset_state_zeroes_only_masked_envs) {
  auto m = make_actor_critic<float>(tiny_policy("mamba3"), 3, HeadSpec{true, 2});
  const int B = 3;
  std::vector<float> state(static_cast<size_t>(B) * m->state_size(), 1.5f);
  const uint8_t mask[B] = {0, 1, 0};
  m->reset_state(state.data(), B, mask);
  for (int b = 0; b < B; ++b)
    for (size_t i = 0; i < m->state_size(); ++i)
      BOOST_REQUIRE_EQUAL(state[b * m->state_size() + i], b == 1 ? 0.0f : 1.5f);
}

BOOST_AUTO_TEST_SUITE_END()

BOOST_AUTO_TEST_SUITE(ppo)

namespace {
struct LossProblem {
  int M = 7, A = 3;
  Mat<double> head;
  Vec<double> values;
  std::vector<float> actions, old_logp, adv, ret;
  std::vector<double> log_std;
};

LossProblem make_loss_problem(bool discrete, double old_logp_shift, uint64_t seed) {
  LossProblem p;
  Rng rng(seed, 9);
  p.head.resize(p.M, p.A);
  p.values.resize(p.M);
  for (Eigen::Index i = 0; i < p.head.size(); ++i) p.head.data()[i] = rng.normal();
  for (Eigen::Index i = 0; i < p.M; ++i) p.values[i] = rng.normal();
  p.log_std = {-0.3, 0.2, 0.1};
  for (int i = 0; i < p.M; ++i) {
    if (discrete) {
      p.actions.push_back(static_cast<float>(rng.below(3)));
    } else {
      for (int j = 0; j < p.A; ++j) p.actions.push_back(static_cast<float>(rng.normal()));
    }
    p.adv.push_back(static_cast<float>(rng.normal()));
    p.ret.push_back(static_cast<float>(rng.normal()));
  }
  // old logp = current logp + shift: ratios exp(-shift) put every token either
  // inside the clip range or well outside it (away from the kinks).
  for (int i = 0; i < p.M; ++i) {
    double lp;
    if (discrete) {
      double l[3];
      Categorical<double>::log_probs(p.head.data() + i * 3, 3, l);
      lp = l[static_cast<int>(p.actions[static_cast<size_t>(i)])];
    } else {
      double a[3];
      for (int j = 0; j < 3; ++j) a[j] = p.actions[static_cast<size_t>(i * 3 + j)];
      lp = DiagGaussian<double>::log_prob(p.head.data() + i * 3, p.log_std.data(), a, 3);
    }
    p.old_logp.push_back(static_cast<float>(lp + old_logp_shift * ((i % 2) ? 1 : -1)));
  }
  return p;
}

double loss_of(bool discrete, const LossProblem& p, const Mat<double>& head, const Vec<double>& values,
               const std::vector<double>& log_std) {
  Mat<double> dh;
  Vec<double> dv;
  std::vector<double> dls(3, 0.0);
  return ppo_loss<double>(HeadSpec{discrete, 3}, PpoLossConfig{}, head, values, discrete ? nullptr : log_std.data(),
                          PpoBatch{p.actions.data(), p.old_logp.data(), p.adv.data(), p.ret.data()}, dh, dv,
                          discrete ? nullptr : dls.data())
      .loss;
}
}  // namespace

BOOST_AUTO_TEST_CASE(loss_gradients_match_finite_differences) {
  for (bool discrete : {true, false})
    for (double shift : {0.05, 0.6}) {  // inside the clip range; far outside it
      BOOST_TEST_CONTEXT((discrete ? "categorical" : "gaussian") << " shift " << shift) {
        LossProblem p = make_loss_problem(discrete, shift, 3);
        Mat<double> dh;
        Vec<double> dv;
        std::vector<double> dls(3, 0.0);
        const auto m = ppo_loss<double>(HeadSpec{discrete, 3}, PpoLossConfig{}, p.head, p.values,
                                        discrete ? nullptr : p.log_std.data(),
                                        PpoBatch{p.actions.data(), p.old_logp.data(), p.adv.data(), p.ret.data()},
                                        dh, dv, discrete ? nullptr : dls.data());
        if (shift > 0.5) BOOST_TEST(m.clip_frac > 0.9);  // every ratio is e^{±0.6}: outside 1±0.2
        else BOOST_TEST(m.clip_frac == 0.0);
        const double h = 1e-6;
        Mat<double> nh(p.head.rows(), p.head.cols());
        for (Eigen::Index i = 0; i < p.head.size(); ++i) {
          Mat<double> hp = p.head, hm = p.head;
          hp.data()[i] += h;
          hm.data()[i] -= h;
          nh.data()[i] = (loss_of(discrete, p, hp, p.values, p.log_std) - loss_of(discrete, p, hm, p.values, p.log_std)) / (2 * h);
        }
        MAMBARL_CHECK_CLOSE_REL("d loss / d head", dh, nh, 1e-6, 1e-5, 1e-8);
        Vec<double> nv(p.values.size());
        for (Eigen::Index i = 0; i < p.values.size(); ++i) {
          Vec<double> vp = p.values, vm = p.values;
          vp[i] += h;
          vm[i] -= h;
          nv[i] = (loss_of(discrete, p, p.head, vp, p.log_std) - loss_of(discrete, p, p.head, vm, p.log_std)) / (2 * h);
        }
        MAMBARL_CHECK_CLOSE_REL("d loss / d values", dv, nv, 1e-6, 1e-5, 1e-8);
        if (!discrete) {
          Vec<double> a(3), n(3);
          for (int j = 0; j < 3; ++j) {
            std::vector<double> lp = p.log_std, lm = p.log_std;
            lp[static_cast<size_t>(j)] += h;
            lm[static_cast<size_t>(j)] -= h;
            n[j] = (loss_of(false, p, p.head, p.values, lp) - loss_of(false, p, p.head, p.values, lm)) / (2 * h);
            a[j] = dls[static_cast<size_t>(j)];
          }
          MAMBARL_CHECK_CLOSE_REL("d loss / d log_std", a, n, 1e-6, 1e-5, 1e-8);
        }
      }
    }
}

BOOST_AUTO_TEST_CASE(metrics_at_ratio_one) {
  // old logp == current logp: ratio 1, approx-KL 0, clip fraction 0.
  LossProblem p = make_loss_problem(true, 0.0, 5);
  Mat<double> dh;
  Vec<double> dv;
  const auto m = ppo_loss<double>(HeadSpec{true, 3}, PpoLossConfig{}, p.head, p.values, nullptr,
                                  PpoBatch{p.actions.data(), p.old_logp.data(), p.adv.data(), p.ret.data()}, dh, dv, nullptr);
  BOOST_CHECK_SMALL(m.approx_kl, 1e-6);
  BOOST_TEST(m.clip_frac == 0.0);
  // Normalised advantages have zero mean: pg loss = -mean(Â) = 0.
  BOOST_CHECK_SMALL(m.pg_loss, 1e-6);
}

// algo.bptt_len > chunk_len (ChunkView::context_T): the context steps add no
// loss, yet carry state into the loss steps. With every env starting an
// episode at the first loss step, an update with context equals the update on
// the loss steps alone; without that reset, other context observations give
// another update (the context reaches the loss through the state).
BOOST_AUTO_TEST_CASE(context_steps_carry_state_but_no_loss) {
  for (const std::string type : {"mlp", "gru", "mamba1", "mamba3"}) {
    BOOST_TEST_MESSAGE("policy " << type);
    const int T = 6, Tc = 3, L = T - Tc, B = 3, O = 3;
    Rng rng(9, 1);
    std::vector<float> obs(static_cast<size_t>(T * B * O)), act(static_cast<size_t>(L * B)),
        logp(static_cast<size_t>(L * B)), adv(static_cast<size_t>(L * B)), ret(static_cast<size_t>(L * B));
    for (auto& v : obs) v = static_cast<float>(rng.normal());
    for (auto& v : act) v = static_cast<float>(rng.below(2));
    for (auto& v : logp) v = static_cast<float>(-0.7 + 0.2 * rng.normal());
    for (auto& v : adv) v = static_cast<float>(rng.normal());
    for (auto& v : ret) v = static_cast<float>(rng.normal());
    std::vector<uint8_t> starts(static_cast<size_t>(T * B), 0);
    starts[1] = 1;  // a reset inside the context
    const auto learner = [&] { return CpuLearner(tiny_policy(type), O, HeadSpec{true, 2}, PpoLossConfig{}, AdamWConfig{}, 5); };
    std::vector<float> state(static_cast<size_t>(B) * learner().model().state_size());
    for (auto& v : state) v = static_cast<float>(0.5 * rng.normal());
    const auto update = [&](const std::vector<float>& o, const std::vector<uint8_t>& st) {
      CpuLearner l = learner();
      ChunkView v{T, B, o.data(), act.data(), logp.data(), adv.data(), ret.data(), st.data(), state.data()};
      v.context_T = Tc;
      const TrainResult r = l.train_step(v, 1e-2);
      BOOST_REQUIRE(!r.skipped);
      return std::make_pair(r.loss.loss, std::vector<float>(l.params().begin(), l.params().end()));
    };

    std::vector<uint8_t> reset_at_loss = starts;
    std::fill_n(reset_at_loss.begin() + Tc * B, B, 1);
    const auto with_context = update(obs, reset_at_loss);
    CpuLearner alone = learner();
    const size_t first = static_cast<size_t>(Tc * B);
    const TrainResult r = alone.train_step(
        ChunkView{L, B, obs.data() + first * O, act.data(), logp.data(), adv.data(), ret.data(),
                  reset_at_loss.data() + first, state.data()},
        1e-2);
    BOOST_TEST(with_context.first == r.loss.loss, boost::test_tools::tolerance(1e-5));
    const auto moved = ConstMatMap<float>(with_context.second.data(), 1, static_cast<Eigen::Index>(alone.params().size()));
    const auto ref = ConstMatMap<float>(alone.params().data(), 1, static_cast<Eigen::Index>(alone.params().size()));
    BOOST_TEST((moved - ref).cwiseAbs().maxCoeff() <= 1e-5);

    if (type == "mlp") continue;  // no state: nothing crosses into the loss steps
    std::vector<float> other_obs = obs;
    for (size_t i = 0; i < first * O; ++i) other_obs[i] += 1.0f;
    const auto a = update(obs, starts), b = update(other_obs, starts);
    BOOST_TEST(std::abs(a.first - b.first) > 1e-5, "the context changed the loss: " << a.first << " vs " << b.first);
  }
}

BOOST_AUTO_TEST_SUITE_END()

BOOST_AUTO_TEST_SUITE(optimizer)

BOOST_AUTO_TEST_CASE(adamw_matches_hand_computed_steps) {
  ParamLayout layout;
  layout.add("w", {2}, true);
  layout.add("b", {1}, false);
  AdamWConfig cfg;
  cfg.weight_decay = 0.1;
  AdamW<double> opt(layout, cfg);
  std::vector<double> p(layout.size(), 0.0), g(layout.size(), 0.0);
  p[0] = 1.0, p[1] = -2.0, p[16] = 0.5;  // "b" is 16-aligned
  const double lr = 0.01;
  double m0 = 0, v0 = 0, w0 = 1.0, mb = 0, vb = 0, b = 0.5;
  for (int t = 1; t <= 3; ++t) {
    const double gw = 0.3 * t, gb = -0.2;
    g[0] = gw, g[16] = gb;
    opt.step(p.data(), g.data(), lr);
    // PyTorch AdamW: p -= lr*wd*p; m,v update; p -= lr/bc1 * m / (sqrt(v)/sqrt(bc2) + eps)
    w0 -= lr * 0.1 * w0;
    m0 = 0.9 * m0 + 0.1 * gw, v0 = 0.999 * v0 + 0.001 * gw * gw;
    const double bc1 = 1 - std::pow(0.9, t), bc2 = 1 - std::pow(0.999, t);
    w0 -= lr / bc1 * m0 / (std::sqrt(v0) / std::sqrt(bc2) + 1e-8);
    mb = 0.9 * mb + 0.1 * gb, vb = 0.999 * vb + 0.001 * gb * gb;
    b -= lr / bc1 * mb / (std::sqrt(vb) / std::sqrt(bc2) + 1e-8);  // no decay on "b"
  }
  BOOST_CHECK_CLOSE(p[0], w0, 1e-10);
  BOOST_CHECK_CLOSE(p[16], b, 1e-10);
  BOOST_CHECK_CLOSE(p[1], -2.0 * std::pow(1 - lr * 0.1, 3), 1e-10);  // zero gradient: decay only
  BOOST_TEST(opt.step_count() == 3);
}

BOOST_AUTO_TEST_CASE(clip_grad_norm_scales_to_max_norm) {
  std::vector<double> g = {3.0, 4.0};
  BOOST_CHECK_CLOSE(clip_grad_norm(g.data(), 2, 1.0), 5.0, 1e-12);
  BOOST_CHECK_CLOSE(std::hypot(g[0], g[1]), 1.0, 1e-4);
  std::vector<double> small = {0.3, 0.4};
  clip_grad_norm(small.data(), 2, 1.0);
  BOOST_TEST(small[0] == 0.3);
  std::vector<double> bad = {NAN, 1.0};
  BOOST_TEST(std::isnan(clip_grad_norm(bad.data(), 2, 1.0)));
}

BOOST_AUTO_TEST_CASE(nonfinite_update_leaves_weights_untouched) {
  CpuLearner learner(tiny_policy("mamba1"), 3, HeadSpec{true, 2}, PpoLossConfig{}, AdamWConfig{}, 5);
  const AlignedVec<float> before = learner.params();
  const int T = 4, B = 2, M = T * B;
  std::vector<float> obs(static_cast<size_t>(M * 3), 0.5f), act(static_cast<size_t>(M), 1.0f),
      logp(static_cast<size_t>(M), -0.7f), adv(static_cast<size_t>(M), 1.0f), ret(static_cast<size_t>(M), 1.0f),
      state(static_cast<size_t>(B) * learner.model().state_size(), 0.0f);
  std::vector<uint8_t> starts(static_cast<size_t>(M), 0);
  obs[5] = NAN;
  const TrainResult r = learner.train_step(ChunkView{T, B, obs.data(), act.data(), logp.data(), adv.data(), ret.data(),
                                                     starts.data(), state.data()}, 1e-3);
  BOOST_TEST(r.skipped);
  BOOST_TEST(!r.reason.empty());
  BOOST_TEST(learner.params() == before);
  BOOST_TEST(learner.optimizer().step_count() == 0);
}

BOOST_AUTO_TEST_SUITE_END()

// The rollout's T=1 step reuses its caches: after warm-up it allocates nothing
// (counted by interposing malloc, tools/alloc_counter.cpp), for every mixer.
BOOST_AUTO_TEST_CASE(actor_step_allocates_nothing_after_warm_up) {
  if (!heap_allocations_counted()) {
    BOOST_TEST_MESSAGE("skipped: allocations are not counted under AddressSanitizer");
    return;
  }
  for (const char* type : {"mamba1", "mamba3", "gru", "mlp"}) {
    BOOST_TEST_CONTEXT("policy " << type) {
      YAML::Node n = YAML::Load("{d_model: 64, n_layers: 2}");
      n["type"] = type;
      CpuLearner learner(PolicyConfig::from_yaml(ConfigNode(n, "test.yaml", "policy")), 4, HeadSpec{true, 2},
                         PpoLossConfig{}, AdamWConfig{}, 1);
      const int B = 64;
      CpuActor actor(learner.shared_model(), B, 2);
      actor.set_weights(learner.params().data(), learner.params().size(), 0);
      std::vector<float> obs(B * 4, 0.3f), act(B), logp(B), val(B);
      std::vector<uint8_t> starts(B, 0);
      for (int i = 0; i < 3; ++i) {
        actor.act(obs.data(), starts.data(), act.data(), logp.data(), val.data());
        actor.peek_values(obs.data(), val.data());
      }
      const uint64_t before = heap_allocations();
      for (int i = 0; i < 20; ++i) {
        starts[static_cast<size_t>(i)] = 1;  // resets, as in a real rollout
        actor.act(obs.data(), starts.data(), act.data(), logp.data(), val.data());
        actor.peek_values(obs.data(), val.data());
      }
      BOOST_TEST(heap_allocations() - before == 0u);
    }
  }
}
