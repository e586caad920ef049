// Deterministic random numbers for gen_crowd: SplitMix64 streams and distributions written out
// here, because std:: distributions are implementation-defined and a seed must give the same
// files with any standard library. Every stream is derived from (seed, purpose, index), so e.g.
// image 17's attributes do not depend on how many images are rendered.
#pragma once

#include <cmath>
#include <cstdint>
#include <string_view>
#include <utility>
#include <vector>

#include "embedflow/rng.hpp"

namespace gen_crowd {

class Prng {
 public:
  explicit Prng(std::uint64_t seed) : state_(seed) {}
  Prng(std::uint64_t seed, std::string_view purpose, std::uint64_t index = 0)
      : state_(embedflow::derive_seed(embedflow::derive_seed(seed, purpose), index)) {}

  std::uint64_t next() { return embedflow::mix64(state_ += 0x9e3779b97f4a7c15ULL); }
  // Uniform in [0, 1) with 53 random bits.
  double uniform() { return static_cast<double>(next() >> 11) * 0x1.0p-53; }
  double uniform(double lo, double hi) { return lo + (hi - lo) * uniform(); }
  // Uniform integer in [0, n): multiply-high, bias below 2^-32 for the small n used here.
  std::int64_t below(std::int64_t n) {
    return static_cast<std::int64_t>((static_cast<unsigned __int128>(next()) * static_cast<std::uint64_t>(n)) >> 64);
  }
  bool chance(double p) { return uniform() < p; }
  // Standard normal (Box-Muller; one value per call so streams stay simple to reason about).
  double normal() {
    double u1 = uniform();
    while (u1 <= 0) u1 = uniform();
    return std::sqrt(-2.0 * std::log(u1)) * std::cos(6.283185307179586 * uniform());
  }
  // Gamma(shape, 1) by Marsaglia and Tsang; shape < 1 via the boost Gamma(shape+1) * U^(1/shape).
  double gamma(double shape) {
    if (shape < 1) {
      double u = uniform();
      while (u <= 0) u = uniform();
      return gamma(shape + 1) * std::pow(u, 1.0 / shape);
    }
    const double d = shape - 1.0 / 3.0, c = 1.0 / std::sqrt(9.0 * d);
    for (;;) {
      double x, v;
      do {
        x = normal();
        v = 1.0 + c * x;
      } while (v <= 0);
      v = v * v * v;
      const double u = uniform();
      if (u < 1 - 0.0331 * x * x * x * x) return d * v;
      if (u > 0 && std::log(u) < 0.5 * x * x + d * (1 - v + std::log(v))) return d * v;
    }
  }
  std::vector<double> dirichlet(std::size_t k, double alpha) {
    std::vector<double> g(k);
    double sum = 0;
    for (double& x : g) sum += (x = gamma(alpha));
    if (sum <= 0) return std::vector<double>(k, 1.0 / static_cast<double>(k));
    for (double& x : g) x /= sum;
    return g;
  }
  // Index drawn with probability proportional to weights (all >= 0, not all 0).
  std::size_t categorical(const std::vector<double>& w) {
    double total = 0;
    for (double x : w) total += x;
    double u = uniform() * total;
    for (std::size_t i = 0; i < w.size(); ++i) {
      if (u < w[i]) return i;
      u -= w[i];
    }
    for (std::size_t i = w.size(); i > 0; --i)  // rounding left u just above the last weight
      if (w[i - 1] > 0) return i - 1;
    return 0;
  }
  template <class T>
  void shuffle(std::vector<T>& v) {
    for (std::size_t i = v.size(); i > 1; --i) std::swap(v[i - 1], v[static_cast<std::size_t>(below(static_cast<std::int64_t>(i)))]);
  }

 private:
  std::uint64_t state_;
};

}  // namespace gen_crowd
