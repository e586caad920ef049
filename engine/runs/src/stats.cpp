#include "embedflow_runs/stats.hpp"

#include <cmath>
#include <limits>

namespace embedflow::runs {
namespace {

constexpr double kNaN = std::numeric_limits<double>::quiet_NaN();

// Lentz's continued fraction for I_x(a, b) (valid for x < (a + 1) / (a + b + 2)).
double beta_fraction(double x, double a, double b) {
  constexpr double kTiny = 1e-300, kEps = 1e-15;
  double c = 1, d = 1 - (a + b) * x / (a + 1);
  if (std::fabs(d) < kTiny) d = kTiny;
  d = 1 / d;
  double h = d;
  for (int m = 1; m <= 1000; ++m) {
    const double m2 = 2.0 * m;
    double num = m * (b - m) * x / ((a + m2 - 1) * (a + m2));
    d = 1 + num * d;
    if (std::fabs(d) < kTiny) d = kTiny;
    c = 1 + num / c;
    if (std::fabs(c) < kTiny) c = kTiny;
    d = 1 / d;
    h *= d * c;
    num = -(a + m) * (a + b + m) * x / ((a + m2) * (a + m2 + 1));
    d = 1 + num * d;
    if (std::fabs(d) < kTiny) d = kTiny;
    c = 1 + num / c;
    if (std::fabs(c) < kTiny) c = kTiny;
    d = 1 / d;
    const double step = d * c;
    h *= step;
    if (std::fabs(step - 1) < kEps) break;
  }
  return h;
}

}  // namespace

double incomplete_beta(double x, double a, double b) {
  if (!(x > 0)) return 0;
  if (!(x < 1)) return 1;
  const double log_front = std::lgamma(a + b) - std::lgamma(a) - std::lgamma(b) + a * std::log(x) + b * std::log1p(-x);
  if (x < (a + 1) / (a + b + 2)) return std::exp(log_front) * beta_fraction(x, a, b) / a;
  return 1 - std::exp(log_front) * beta_fraction(1 - x, b, a) / b;
}

double student_t_cdf(double t, double df) {
  if (std::isnan(t) || !(df > 0)) return kNaN;
  if (std::isinf(t)) return t > 0 ? 1 : 0;
  // P(|T| > |t|) = I_{df/(df+t^2)}(df/2, 1/2).
  const double tail = 0.5 * incomplete_beta(df / (df + t * t), df / 2, 0.5);
  return t > 0 ? 1 - tail : tail;
}

double student_t_quantile(double p, double df) {
  if (!(p > 0 && p < 1) || !(df > 0)) return kNaN;
  if (p == 0.5) return 0;
  // Bisection on the monotone CDF after bracketing: robust for any df, and fast enough for the
  // few quantiles a sweep needs.
  double lo = -1, hi = 1;
  while (student_t_cdf(lo, df) > p) lo *= 2;
  while (student_t_cdf(hi, df) < p) hi *= 2;
  for (int i = 0; i < 200 && hi - lo > 1e-13 * std::max(1.0, std::fabs(lo)); ++i) {
    const double mid = 0.5 * (lo + hi);
    (student_t_cdf(mid, df) < p ? lo : hi) = mid;
  }
  return 0.5 * (lo + hi);
}

Summary summarize(const std::vector<double>& values, double confidence) {
  Summary s;
  double sum = 0;
  for (double v : values)
    if (std::isfinite(v)) {
      sum += v;
      ++s.n;
    }
  if (s.n == 0) {
    s.mean = s.sd = s.ci_low = s.ci_high = kNaN;
    return s;
  }
  s.mean = sum / static_cast<double>(s.n);
  if (s.n < 2) {
    s.sd = s.ci_low = s.ci_high = kNaN;
    return s;
  }
  double ss = 0;
  for (double v : values)
    if (std::isfinite(v)) ss += (v - s.mean) * (v - s.mean);
  const double df = static_cast<double>(s.n - 1);
  s.sd = std::sqrt(ss / df);
  const double half = student_t_quantile(0.5 + confidence / 2, df) * s.sd / std::sqrt(static_cast<double>(s.n));
  s.ci_low = s.mean - half;
  s.ci_high = s.mean + half;
  return s;
}

PairedTest paired_t_test(const std::vector<double>& a, const std::vector<double>& b, double confidence) {
  std::vector<double> diff;
  for (std::size_t i = 0; i < a.size() && i < b.size(); ++i)
    if (std::isfinite(a[i]) && std::isfinite(b[i])) diff.push_back(a[i] - b[i]);
  PairedTest r;
  const Summary s = summarize(diff, confidence);
  r.n = s.n;
  r.mean_difference = s.mean;
  r.ci_low = s.ci_low;
  r.ci_high = s.ci_high;
  if (r.n < 2) {
    r.t = kNaN;
    r.p = kNaN;
    return r;
  }
  const double se = s.sd / std::sqrt(static_cast<double>(r.n));
  if (se == 0) {
    r.t = s.mean == 0 ? 0 : std::copysign(std::numeric_limits<double>::infinity(), s.mean);
    r.p = s.mean == 0 ? 1 : 0;
    return r;
  }
  r.t = s.mean / se;
  r.p = 2 * student_t_cdf(-std::fabs(r.t), static_cast<double>(r.n - 1));
  return r;
}

}  // namespace embedflow::runs
