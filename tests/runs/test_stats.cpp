// The sweep's statistics against scipy.stats: Student's t CDF and quantiles, the t-interval of a
// mean, and the paired t-test (scipy.stats.ttest_rel), on samples shaped like a sweep's metrics
// (5 seeds of accuracies, a few with ties or a missing value), and the degenerate cases by hand.
#include <catch2/catch.hpp>

#include <cmath>
#include <sstream>

#include "cli.hpp"
#include "embedflow_runs/stats.hpp"

using namespace embedflow::runs;
using namespace embedflow::test;

namespace {

const std::vector<std::vector<double>> kSamples = {
    {0.553, 0.571, 0.538, 0.566, 0.549},
    {0.61, 0.66, 0.63, 0.65, 0.64},
    {1.0, 2.0},
    {3.1, 2.9, 3.3, 3.0, 3.2, 2.8, 3.05, 3.4, 2.7, 3.15},
    {0.0123, 0.0187, 0.0151},
};

std::string python_list(const std::vector<double>& v) {
  std::ostringstream s;
  s.precision(17);
  s << "[";
  for (std::size_t i = 0; i < v.size(); ++i) s << (i ? ", " : "") << v[i];
  return s.str() + "]";
}

}  // namespace

TEST_CASE("stats: t CDF and quantiles equal scipy.stats.t", "[runs][stats]") {
  const std::vector<double> ts{-7.5, -2.1, -0.3, 0.0, 0.8, 1.96, 4.0, 12.0};
  const std::vector<double> dfs{1, 2, 4, 9, 29, 200};
  const std::vector<double> ps{0.001, 0.025, 0.2, 0.5, 0.9, 0.975, 0.999};
  std::string script = "from scipy import stats\n";
  for (double df : dfs) {
    for (double t : ts) script += "print('cdf', " + std::to_string(t) + ", " + std::to_string(df) + ", repr(float(stats.t.cdf(" + std::to_string(t) + ", " + std::to_string(df) + "))))\n";
    for (double p : ps) script += "print('ppf', " + std::to_string(p) + ", " + std::to_string(df) + ", repr(float(stats.t.ppf(" + std::to_string(p) + ", " + std::to_string(df) + "))))\n";
  }
  const Result py = check_python(script);
  std::istringstream lines(py.out);
  std::string kind;
  double x, df, expected;
  int checked = 0;
  while (lines >> kind >> x >> df >> expected) {
    INFO(kind << "(" << x << ", df " << df << ")");
    if (kind == "cdf") {
      CHECK(student_t_cdf(x, df) == Approx(expected).epsilon(1e-9).margin(1e-12));
    } else {
      // scipy's ppf is itself good to about 1e-9 (its own cdf of it misses p by ~6e-10 at df 29);
      // ours inverts the CDF to 1e-12, checked by the round trip.
      const double q = student_t_quantile(x, df);
      CHECK(q == Approx(expected).epsilon(1e-8).margin(1e-10));
      CHECK(student_t_cdf(q, df) == Approx(x).epsilon(1e-12));
    }
    ++checked;
  }
  CHECK(checked == static_cast<int>(dfs.size() * (ts.size() + ps.size())));
}

TEST_CASE("stats: mean, sd and 95% t-interval equal scipy's", "[runs][stats]") {
  std::string script = "import numpy as np\nfrom scipy import stats\n";
  for (const auto& s : kSamples)
    script += "x = np.array(" + python_list(s) + ")\nlo, hi = stats.t.interval(0.95, len(x) - 1, loc=x.mean(), scale=stats.sem(x))\n"
              "print(repr(x.mean()), repr(x.std(ddof=1)), repr(lo), repr(hi))\n";
  const Result py = check_python(script);
  std::istringstream lines(py.out);
  for (const auto& s : kSamples) {
    double mean, sd, lo, hi;
    REQUIRE(lines >> mean >> sd >> lo >> hi);
    const Summary sm = summarize(s);
    CHECK(sm.n == s.size());
    CHECK(sm.mean == Approx(mean).epsilon(1e-12));
    CHECK(sm.sd == Approx(sd).epsilon(1e-10));
    CHECK(sm.ci_low == Approx(lo).epsilon(1e-9));
    CHECK(sm.ci_high == Approx(hi).epsilon(1e-9));
  }
}

TEST_CASE("stats: the paired t-test equals scipy.stats.ttest_rel", "[runs][stats]") {
  // Pairs of "variants" measured with the same seeds, one with a seed whose value is missing.
  const std::vector<std::pair<std::vector<double>, std::vector<double>>> pairs = {
      {kSamples[0], kSamples[1]},
      {{0.553, 0.571, 0.538, 0.566, 0.549}, {0.541, 0.569, 0.531, 0.560, 0.552}},
      {{1.0, 2.0, 3.5}, {0.5, 2.2, 2.9}},
      {{0.30, 0.31, NAN, 0.33, 0.29}, {0.28, 0.30, 0.40, 0.30, 0.27}},
  };
  std::string script = "import numpy as np\nfrom scipy import stats\n";
  for (const auto& [a, b] : pairs) {
    auto clean = [&](const std::vector<double>& v, const std::vector<double>& other) {
      std::vector<double> out;
      for (std::size_t i = 0; i < v.size(); ++i)
        if (std::isfinite(v[i]) && std::isfinite(other[i])) out.push_back(v[i]);
      return out;
    };
    script += "a = np.array(" + python_list(clean(a, b)) + "); b = np.array(" + python_list(clean(b, a)) + ")\n"
              "r = stats.ttest_rel(a, b)\nd = a - b\nlo, hi = stats.t.interval(0.95, len(d) - 1, loc=d.mean(), scale=stats.sem(d))\n"
              "print(len(d), repr(d.mean()), repr(float(r.statistic)), repr(float(r.pvalue)), repr(lo), repr(hi))\n";
  }
  const Result py = check_python(script);
  std::istringstream lines(py.out);
  for (const auto& [a, b] : pairs) {
    std::size_t n;
    double mean, t, p, lo, hi;
    REQUIRE(lines >> n >> mean >> t >> p >> lo >> hi);
    const PairedTest r = paired_t_test(a, b);
    CHECK(r.n == n);
    CHECK(r.mean_difference == Approx(mean).epsilon(1e-10).margin(1e-15));
    CHECK(r.t == Approx(t).epsilon(1e-9));
    CHECK(r.p == Approx(p).epsilon(1e-8));
    CHECK(r.ci_low == Approx(lo).epsilon(1e-9));
    CHECK(r.ci_high == Approx(hi).epsilon(1e-9));
  }
}

TEST_CASE("stats: degenerate samples by hand", "[runs][stats]") {
  // One value: a mean, no spread.
  const Summary one = summarize({0.5});
  CHECK(one.n == 1);
  CHECK(one.mean == 0.5);
  CHECK(std::isnan(one.sd));
  CHECK(std::isnan(one.ci_low));
  // Not measured at all.
  const Summary none = summarize({NAN, NAN});
  CHECK(none.n == 0);
  CHECK(std::isnan(none.mean));
  // Identical values: a zero-width interval.
  const Summary same = summarize({0.7, 0.7, 0.7});
  CHECK(same.sd == Approx(0).margin(1e-15));  // the mean 2.1/3 rounds, so not exactly 0
  CHECK(same.ci_low == Approx(0.7).epsilon(1e-14));
  CHECK(same.ci_high == Approx(0.7).epsilon(1e-14));
  // Every difference equal and non-zero: certain; every difference zero: no evidence.
  const PairedTest shifted = paired_t_test({1, 2, 3}, {0, 1, 2});
  CHECK(std::isinf(shifted.t));
  CHECK(shifted.p == 0);
  const PairedTest equal = paired_t_test({1, 2, 3}, {1, 2, 3});
  CHECK(equal.t == 0);
  CHECK(equal.p == 1);
  // One pair: no test.
  const PairedTest single = paired_t_test({1}, {2});
  CHECK(single.n == 1);
  CHECK(std::isnan(single.p));
  // Symmetry of the t distribution, by the formula: F(-t) = 1 - F(t); the median is 0.
  CHECK(student_t_cdf(-1.3, 7) == Approx(1 - student_t_cdf(1.3, 7)).epsilon(1e-14));
  CHECK(student_t_quantile(0.5, 3) == 0);
  // df = 1 is the Cauchy distribution: F(t) = 1/2 + atan(t)/pi.
  CHECK(student_t_cdf(2.5, 1) == Approx(0.5 + std::atan(2.5) / M_PI).epsilon(1e-13));
}
