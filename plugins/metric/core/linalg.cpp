#include "linalg.hpp"

#include <cblas.h>

#include <algorithm>
#include <cmath>

#include "embedflow/error.hpp"

extern "C" void dsyevd_(const char* jobz, const char* uplo, const int* n, double* a, const int* lda, double* w,
                        double* work, const int* lwork, int* iwork, const int* liwork, int* info);

namespace embedflow::metriccore {

void sym_eig(const Mat& a, int n, std::vector<double>& values, Mat& vectors) {
  // Column-major LAPACK on a symmetric matrix: the row-major buffer is its own transpose, and
  // the eigenvectors come back as columns = rows of the row-major result. Divide and conquer
  // (dsyevd) rather than QR iteration (dsyev): 2.5x faster at 128 dims, and the SGD learner
  // runs one per step.
  vectors = a;
  values.assign(static_cast<std::size_t>(n), 0.0);
  int info = 0, lwork = -1, liwork = -1, iquery = 0;
  double query = 0;
  dsyevd_("V", "U", &n, vectors.data(), &n, values.data(), &query, &lwork, &iquery, &liwork, &info);
  lwork = static_cast<int>(query);
  liwork = iquery;
  std::vector<double> work(static_cast<std::size_t>(std::max(1, lwork)));
  std::vector<int> iwork(static_cast<std::size_t>(std::max(1, liwork)));
  dsyevd_("V", "U", &n, vectors.data(), &n, values.data(), work.data(), &lwork, iwork.data(), &liwork, &info);
  if (info != 0) throw Error(cat("symmetric eigendecomposition failed (dsyevd info ", info, ")"));
}

int project_psd(Mat& a, int n) {
  std::vector<double> w;
  Mat v;
  sym_eig(a, n, w, v);
  int clipped = 0;
  for (double x : w) clipped += x < 0;
  if (clipped == 0) return 0;
  // A = sum_k max(w_k, 0) v_k v_k^T
  Mat scaled = v;
  for (int k = 0; k < n; ++k)
    for (int j = 0; j < n; ++j) scaled[static_cast<std::size_t>(k * n + j)] *= std::max(0.0, w[static_cast<std::size_t>(k)]);
  gemm(true, false, n, n, n, 1.0, v.data(), scaled.data(), 0.0, a.data());
  // Symmetrise away rounding so later eigensolves see an exactly symmetric matrix.
  for (int i = 0; i < n; ++i)
    for (int j = i + 1; j < n; ++j) {
      const double m = 0.5 * (a[static_cast<std::size_t>(i * n + j)] + a[static_cast<std::size_t>(j * n + i)]);
      a[static_cast<std::size_t>(i * n + j)] = a[static_cast<std::size_t>(j * n + i)] = m;
    }
  return clipped;
}

Mat sqrt_factor(const Mat& a, int n) {
  std::vector<double> w;
  Mat v;
  sym_eig(a, n, w, v);
  for (int k = 0; k < n; ++k) {
    const double s = std::sqrt(std::max(0.0, w[static_cast<std::size_t>(k)]));
    for (int j = 0; j < n; ++j) v[static_cast<std::size_t>(k * n + j)] *= s;
  }
  return v;
}

double min_eigenvalue(const Mat& a, int n) {
  std::vector<double> w;
  Mat v;
  sym_eig(a, n, w, v);
  return w.empty() ? 0.0 : w.front();
}

void gemm(bool ta, bool tb, int m, int n, int k, double alpha, const double* a, const double* b, double beta, double* c) {
  cblas_dgemm(CblasRowMajor, ta ? CblasTrans : CblasNoTrans, tb ? CblasTrans : CblasNoTrans, m, n, k, alpha, a,
              ta ? m : k, b, tb ? k : n, beta, c, n);
}

Mat identity(int n) {
  Mat m(static_cast<std::size_t>(n * n), 0.0);
  for (int i = 0; i < n; ++i) m[static_cast<std::size_t>(i * n + i)] = 1.0;
  return m;
}

double trace(const Mat& a, int n) {
  double t = 0;
  for (int i = 0; i < n; ++i) t += a[static_cast<std::size_t>(i * n + i)];
  return t;
}

double frobenius(const Mat& a) {
  double s = 0;
  for (double x : a) s += x * x;
  return std::sqrt(s);
}

void mean_and_covariance(const double* x, std::int64_t n, int d, std::vector<double>& mean, Mat& cov) {
  if (n < 2) throw DataError(cat("a covariance needs at least 2 rows, got ", n));
  mean.assign(static_cast<std::size_t>(d), 0.0);
  for (std::int64_t i = 0; i < n; ++i)
    for (int j = 0; j < d; ++j) mean[static_cast<std::size_t>(j)] += x[i * d + j];
  for (auto& m : mean) m /= static_cast<double>(n);
  Mat centred(static_cast<std::size_t>(n * d));
  for (std::int64_t i = 0; i < n; ++i)
    for (int j = 0; j < d; ++j) centred[static_cast<std::size_t>(i * d + j)] = x[i * d + j] - mean[static_cast<std::size_t>(j)];
  cov.assign(static_cast<std::size_t>(d * d), 0.0);
  cblas_dsyrk(CblasRowMajor, CblasUpper, CblasTrans, d, static_cast<int>(n), 1.0 / static_cast<double>(n - 1),
              centred.data(), d, 0.0, cov.data(), d);
  for (int i = 0; i < d; ++i)
    for (int j = 0; j < i; ++j) cov[static_cast<std::size_t>(i * d + j)] = cov[static_cast<std::size_t>(j * d + i)];
}

Mat to_double(const float* x, std::int64_t count) { return Mat(x, x + count); }

}  // namespace embedflow::metriccore
