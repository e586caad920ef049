// Dense linear algebra the metric learners need, on row-major double matrices: symmetric
// eigendecomposition (LAPACK dsyev from OpenBLAS), PSD projection, square-root factors, GEMM
// helpers, covariance.
#pragma once

#include <cstdint>
#include <vector>

namespace embedflow::metriccore {

using Mat = std::vector<double>;  // row-major

// Eigenvalues ascending in `values`; eigenvectors as the ROWS of `vectors` (n x n).
void sym_eig(const Mat& a, int n, std::vector<double>& values, Mat& vectors);
// Nearest PSD matrix in Frobenius norm: negative eigenvalues clipped to 0. Returns the number
// of eigenvalues that were clipped.
int project_psd(Mat& a, int n);
// G with G^T G = A for a PSD A (G = diag(sqrt(lambda)) V^T), so ||Gx - Gy||^2 = (x-y)^T A (x-y).
Mat sqrt_factor(const Mat& a, int n);
double min_eigenvalue(const Mat& a, int n);

// C = alpha * op(A) * op(B) + beta * C, row-major.
void gemm(bool ta, bool tb, int m, int n, int k, double alpha, const double* a, const double* b, double beta, double* c);
Mat identity(int n);
double trace(const Mat& a, int n);
double frobenius(const Mat& a);

// Mean of the rows and covariance (divided by n - 1) of an n x d matrix.
void mean_and_covariance(const double* x, std::int64_t n, int d, std::vector<double>& mean, Mat& cov);

// Float rows to double.
Mat to_double(const float* x, std::int64_t count);

}  // namespace embedflow::metriccore
