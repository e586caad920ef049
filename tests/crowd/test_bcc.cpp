// Bayesian crowd clustering (plugins/crowd/core/bcc.cpp, crowd.bcc):
//  - on pairs drawn from the model itself (known x, w, τ), every sweep raises the evidence lower
//    bound (never lowers it beyond rounding) until it converges, and the fitted posterior predicts fresh pairs of the same workers
//    within 6 points of the Bayes-optimal rule that knows the true parameters, far above chance;
//  - the bound equals an independent NumPy / SciPy computation from the exported posterior, and
//    each ξ_p equals sqrt(E[z_p^2]) there;
//  - bad ids are errors naming the pair and the parameter to raise, in the kernel and in the node.
#include <catch2/catch.hpp>

#include <cmath>
#include <fstream>
#include <random>

#include "cli.hpp"
#include "core/bcc.hpp"

using namespace embedflow;
using namespace embedflow::crowd;
using namespace embedflow::test;
namespace fs = std::filesystem;

namespace {

// Items on D = 2 true dimensions, workers attending to one of them (w = (3, 0) or (0, 3)) with
// bias τ = -1, pairs drawn uniformly and labelled by Bernoulli(σ(z)).
struct Synthetic {
  static constexpr std::int64_t items = 80, workers = 8, dim = 2;
  std::vector<double> x, w, tau;
  std::vector<BccPair> pairs;

  explicit Synthetic(std::uint64_t seed, std::int64_t n_pairs, const Synthetic* truth = nullptr) {
    std::mt19937_64 rng(seed);
    std::uniform_real_distribution<double> u(0, 1);
    if (truth) {
      x = truth->x, w = truth->w, tau = truth->tau;
    } else {
      for (std::int64_t i = 0; i < items * dim; ++i) x.push_back(u(rng) < 0.5 ? -1.0 : 1.0);
      for (std::int64_t j = 0; j < workers; ++j) {
        w.push_back(j % 2 ? 0.0 : 3.0);
        w.push_back(j % 2 ? 3.0 : 0.0);
        tau.push_back(-1.0);
      }
    }
    while (static_cast<std::int64_t>(pairs.size()) < n_pairs) {
      BccPair p{static_cast<std::int64_t>(u(rng) * items), static_cast<std::int64_t>(u(rng) * items),
                static_cast<std::int64_t>(u(rng) * workers), false};
      if (p.a == p.b) continue;
      p.same = u(rng) < 1 / (1 + std::exp(-logit(p)));
      pairs.push_back(p);
    }
  }
  double logit(const BccPair& p) const {
    double z = tau[static_cast<std::size_t>(p.worker)];
    for (std::int64_t d = 0; d < dim; ++d)
      z += x[static_cast<std::size_t>(p.a * dim + d)] * w[static_cast<std::size_t>(p.worker * dim + d)] * x[static_cast<std::size_t>(p.b * dim + d)];
    return z;
  }
};

void write_rows(std::ofstream& out, const std::vector<double>& v) {
  for (std::size_t i = 0; i < v.size(); ++i) out << v[i] << (i + 1 < v.size() ? ' ' : '\n');
}

}  // namespace

TEST_CASE("BCC variational Bayes raises its bound every sweep and recovers a crowd drawn from the model") {
  const Synthetic train(11, 6000), test(12, 4000, &train);
  BccOptions o;
  o.items = Synthetic::items, o.workers = Synthetic::workers, o.dim = 3, o.sweeps = 60, o.tolerance = 1e-13, o.seed = 5;
  const BccPosterior q = fit_bcc(train.pairs, o);
  // It converges in about ten sweeps; after that the bound moves by rounding alone (1e-15 relative).
  REQUIRE(q.bound.size() >= 8);
  for (std::size_t s = 1; s < q.bound.size(); ++s) {
    INFO("sweep " << s << ": " << q.bound[s - 1] << " -> " << q.bound[s]);
    CHECK(q.bound[s] >= q.bound[s - 1] - 1e-9 * std::fabs(q.bound[s]));
  }
  CHECK(q.bound.back() > q.bound.front() + 100);
  // Held-out pairs of the same workers and images: the posterior predictive against the rule
  // that knows the true parameters (same iff z > 0) and against always answering the majority.
  std::int64_t fitted = 0, bayes = 0, positives = 0;
  for (const BccPair& p : test.pairs) {
    fitted += (q.probability_same(p.a, p.b, p.worker) > 0.5) == p.same;
    bayes += (train.logit(p) > 0) == p.same;
    positives += p.same;
  }
  const double n = static_cast<double>(test.pairs.size()), chance = std::max(positives, static_cast<std::int64_t>(n) - positives) / n;
  INFO("fitted " << fitted / n << ", Bayes " << bayes / n << ", chance " << chance);
  CHECK(fitted / n > bayes / n - 0.06);
  CHECK(fitted / n > chance + 0.15);

  // The bound once more, from the exported posterior by NumPy and SciPy.
  const fs::path dir = scratch_dir("bcc_bound");
  {
    std::ofstream out(dir / "q.txt");
    out.precision(17);
    for (const auto* v : {&q.x_mean, &q.x_var, &q.w_mean, &q.w_var, &q.tau_mean, &q.tau_var, &q.xi}) write_rows(out, *v);
    write_rows(out, {q.alpha_w_shape, q.alpha_w_rate, q.alpha_tau_shape, q.alpha_tau_rate, q.prior_shape, q.prior_rate, q.bound.back()});
    std::ofstream pairs(dir / "pairs.txt");
    for (const BccPair& p : train.pairs) pairs << p.a << ' ' << p.b << ' ' << p.worker << ' ' << p.same << '\n';
  }
  check_python(R"PY(
import sys, numpy as np
from scipy.special import digamma, gammaln, expit
d, D = sys.argv[1], 3
rows = [np.array(l.split(), float) for l in open(d + "/q.txt")]
xm, xv, wm, wv, tm, tv, xi = (r for r in rows[:7])
aw, bw, at, bt, a0, b0, reported = rows[7]
xm, xv, wm, wv = xm.reshape(-1, D), xv.reshape(-1, D), wm.reshape(-1, D), wv.reshape(-1, D)
P = np.loadtxt(d + "/pairs.txt", dtype=np.int64)
a, b, j, l = P.T
ez = (xm[a] * wm[j] * xm[b]).sum(1) + tm[j]
ez2 = ((xm[a]**2 + xv[a]) * (wm[j]**2 + wv[j]) * (xm[b]**2 + xv[b])).sum(1) - ((xm[a] * wm[j] * xm[b])**2).sum(1) + tv[j] + ez**2
lam = np.tanh(xi / 2) / (4 * xi)
s = 2 * l - 1
lik = np.sum(np.log(expit(xi)) + (s * ez - xi) / 2 - lam * (ez2 - xi**2))
def gauss(m, v, ea, ela):  # E log N(v; 0, 1/alpha) + entropy
    return np.sum(-0.5 * np.log(2 * np.pi) + 0.5 * ela - 0.5 * ea * (m**2 + v) + 0.5 * np.log(2 * np.pi * np.e * v))
def gam(a, b):  # E log Gamma(alpha; a0, b0) + entropy of Gamma(a, b)
    ea, ela = a / b, digamma(a) - np.log(b)
    return a0 * np.log(b0) - gammaln(a0) + (a0 - 1) * ela - b0 * ea + a - np.log(b) + gammaln(a) + (1 - a) * digamma(a)
bound = (lik + gauss(xm, xv, 1.0, 0.0) + gauss(wm, wv, aw / bw, digamma(aw) - np.log(bw))
         + gauss(tm, tv, at / bt, digamma(at) - np.log(bt)) + gam(aw, bw) + gam(at, bt))
print("bound", bound, "reported", reported)
ok = abs(bound - reported) < 1e-8 * abs(bound) and np.allclose(xi, np.sqrt(ez2), rtol=1e-9)
sys.exit(0 if ok else 1)
)PY", {dir.string()});
}

TEST_CASE("BCC refuses ids outside the model, naming the pair and the parameter") {
  BccOptions o;
  o.items = 5, o.workers = 2, o.dim = 2;
  CHECK_THROWS_WITH(fit_bcc({{0, 1, 0, true}, {3, 7, 1, false}}, o), Catch::Contains("pair 1 has image ids (3, 7)") && Catch::Contains("raise `images`"));
  CHECK_THROWS_WITH(fit_bcc({{0, 1, 2, true}}, o), Catch::Contains("pair 0 has worker 2 outside 0..1 (raise `workers`)"));
  CHECK_THROWS_WITH(fit_bcc({{2, 2, 0, true}}, o), Catch::Contains("they must differ"));
  CHECK_THROWS_WITH(fit_bcc({}, o), Catch::Contains("no training pairs"));
  // Through the engine: the node's error names the input and the parameter.
  const fs::path dir = scratch_dir("bcc_node");
  const std::string csv = source_dir() + "/tests/crowd/data/tiny.csv";
  Result r = run_graph_file(dir, "bcc.yaml", "seed: 1\nnodes:\n  read: {type: crowd.grid_reader, params: {path: " + csv +
                                                 ", grid_size: 4, batch_size: 8}}\n"
                                                 "  bcc: {type: crowd.bcc, params: {images: 100, workers: 1, dim: 2}}\n"
                                                 "edges: [read.out -> bcc.train]\n");
  CHECK(r.exit_code == 1);
  CHECK_THAT(r.err, Catch::Contains("bcc") && Catch::Contains("raise `workers`"));
  r = run_graph_file(dir, "dim.yaml", "seed: 1\nnodes:\n  read: {type: crowd.grid_reader, params: {path: " + csv +
                                          ", grid_size: 4}}\n  bcc: {type: crowd.bcc, params: {images: 100, workers: 5, dim: 0}}\n"
                                          "edges: [read.out -> bcc.train]\n");
  CHECK(r.exit_code == 2);
  CHECK_THAT(r.err, Catch::Contains("dim"));
}
