// Small, fast, reproducible pseudo-random generator used by envs, initialisation
// and CPU action sampling: xoshiro256** seeded through splitmix64.
//
// Why our own and not <random>: the distributions of <random> are
// implementation-defined, so the same seed could give different runs on
// another standard library; and the same code must later run inside CUDA
// kernels (GPU-resident envs), hence MAMBARL_HD and a 32-byte POD state.
#pragma once

#include <cmath>
#include <cstdint>

#include "kernels/base/host_device.hpp"

namespace mambarl {

MAMBARL_HD inline uint64_t splitmix64(uint64_t& x) {
  uint64_t z = (x += 0x9E3779B97F4A7C15ULL);
  z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ULL;
  z = (z ^ (z >> 27)) * 0x94D049BB133111EBULL;
  return z ^ (z >> 31);
}

struct Rng {
  uint64_t s[4];

  MAMBARL_HD Rng() : Rng(0, 0) {}
  // Seeds from (seed, stream), e.g. (run seed, env index): distinct streams get
  // unrelated sequences because both words pass through splitmix64.
  MAMBARL_HD explicit Rng(uint64_t seed, uint64_t stream = 0) {
    uint64_t x = seed ^ (0xD1B54A32D192ED03ULL * (stream + 1));
    for (auto& w : s) w = splitmix64(x);
  }

  MAMBARL_HD static uint64_t rotl(uint64_t x, int k) { return (x << k) | (x >> (64 - k)); }

  MAMBARL_HD uint64_t next_u64() {
    const uint64_t result = rotl(s[1] * 5, 7) * 9;
    const uint64_t t = s[1] << 17;
    s[2] ^= s[0];
    s[3] ^= s[1];
    s[1] ^= s[2];
    s[0] ^= s[3];
    s[2] ^= t;
    s[3] = rotl(s[3], 45);
    return result;
  }

  // Uniform in [0, 1) with 53 random bits.
  MAMBARL_HD double uniform() { return static_cast<double>(next_u64() >> 11) * 0x1.0p-53; }
  MAMBARL_HD double uniform(double lo, double hi) { return lo + (hi - lo) * uniform(); }
  // Uniform integer in [0, n); n > 0. Multiply-shift: bias below 2^-32 for our n.
  MAMBARL_HD uint32_t below(uint32_t n) {
    return static_cast<uint32_t>(((next_u64() >> 32) * static_cast<uint64_t>(n)) >> 32);
  }
  // Standard normal by Box-Muller (one value per call; simple and deterministic).
  MAMBARL_HD double normal() {
    double u1 = uniform();
    const double u2 = uniform();
    if (u1 < 1e-300) u1 = 1e-300;
    return sqrt(-2.0 * log(u1)) * cos(6.283185307179586 * u2);
  }
};

}  // namespace mambarl
