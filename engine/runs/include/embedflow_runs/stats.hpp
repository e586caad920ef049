// Statistics across seeds: what a sweep's tables say about each point and each pair of variants.
//
// A point run with N seeds gives N values of a metric. summarize() gives their mean, sample
// standard deviation and a t-interval for the mean (Student's t with N-1 degrees of freedom: the
// seeds are few and the spread unknown). Two variants run with the same seeds are compared by a
// paired t-test on the per-seed differences (two-sided): pairing removes what a seed does to both
// (the same sampled pairs, the same initial weights), which is most of the spread. With 5 seeds a
// sign or Wilcoxon test cannot reach p < 0.05 at all (its smallest two-sided p is 1/16), which is
// why the t-test is the default; its assumption (roughly normal differences) is stated with it.
#pragma once

#include <cstddef>
#include <vector>

namespace embedflow::runs {

struct Summary {
  std::size_t n = 0;
  double mean = 0, sd = 0;         // sd: sample standard deviation (N-1); NaN when n < 2
  double ci_low = 0, ci_high = 0;  // t-interval for the mean; NaN when n < 2
};

// Values that are NaN (not measured) are left out; n counts the rest. n = 0 gives NaN everywhere.
Summary summarize(const std::vector<double>& values, double confidence = 0.95);

struct PairedTest {
  std::size_t n = 0;                 // pairs where both values are finite
  double mean_difference = 0;        // mean of a - b
  double ci_low = 0, ci_high = 0;    // t-interval for the mean difference
  double t = 0;                      // the statistic; +-inf when every difference is equal and non-zero
  double p = 1;                      // two-sided; 1 when every difference is 0, NaN when n < 2
};

// Paired t-test of a[i] against b[i] (same seed i).
PairedTest paired_t_test(const std::vector<double>& a, const std::vector<double>& b, double confidence = 0.95);

// Student's t distribution with `df` degrees of freedom: the CDF, and its inverse for 0 < p < 1.
double student_t_cdf(double t, double df);
double student_t_quantile(double p, double df);

// The regularized incomplete beta function I_x(a, b), by its continued fraction.
double incomplete_beta(double x, double a, double b);

}  // namespace embedflow::runs
