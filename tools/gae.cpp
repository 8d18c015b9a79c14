#include "tools/gae.hpp"

namespace mambarl {

void compute_gae(const GaeInputs& in, double gamma, double lambda, float* advantages, float* returns) {
  for (int b = 0; b < in.B; ++b) {
    double next_adv = 0;  // Â_{t+1}
    for (int t = in.T - 1; t >= 0; --t) {
      const int i = t * in.B + b;
      const bool term = in.terminated[i] != 0, trunc = in.truncated[i] != 0;
      const double v_next = trunc ? in.final_values[i]
                                  : (t == in.T - 1 ? in.next_values[b] : in.values[i + in.B]);
      const double delta = in.rewards[i] + gamma * (term ? 0.0 : v_next) - in.values[i];
      const double adv = delta + gamma * lambda * ((term || trunc) ? 0.0 : next_adv);
      advantages[i] = static_cast<float>(adv);
      returns[i] = static_cast<float>(adv + in.values[i]);
      next_adv = adv;
    }
  }
}

}  // namespace mambarl
