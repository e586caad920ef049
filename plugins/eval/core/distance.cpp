#include "distance.hpp"

#include <cblas.h>

#include <algorithm>
#include <cmath>

#include "embedflow/error.hpp"
#include "arena_loop.hpp"

namespace embedflow::evalcore {

namespace {

const std::vector<std::string> kNames = {"euclidean",  "sqeuclidean", "manhattan",       "cosine",
                                         "chi_square", "chi2_kernel", "gaussian_kernel", "laplacian_kernel"};

bool needs_nonnegative(DistanceKind k) { return k == DistanceKind::chi_square || k == DistanceKind::chi2_kernel; }
bool uses_gemm(DistanceKind k) {
  return k == DistanceKind::euclidean || k == DistanceKind::sqeuclidean || k == DistanceKind::cosine ||
         k == DistanceKind::gaussian_kernel;
}

void check_matrix(const MatrixView& m, const char* what, bool nonnegative) {
  for (std::int64_t i = 0; i < m.rows; ++i) {
    const float* r = m.row(i);
    for (std::int64_t d = 0; d < m.cols; ++d) {
      if (!std::isfinite(r[d])) throw DataError(cat(what, " row ", i, " dim ", d, " is not finite (", r[d], ")"));
      if (nonnegative && r[d] < 0)
        throw DataError(cat(what, " row ", i, " dim ", d, " is negative (", r[d],
                            "); chi-square measures need non-negative features"));
    }
  }
}

inline double l1(const float* x, const float* y, std::int64_t dim) {
  double s = 0;
  for (std::int64_t d = 0; d < dim; ++d) s += std::fabs(double(x[d]) - double(y[d]));
  return s;
}
inline double chi2(const float* x, const float* y, std::int64_t dim) {
  double s = 0;
  for (std::int64_t d = 0; d < dim; ++d) {
    const double a = x[d], b = y[d], den = a + b;
    if (den > 0) s += (a - b) * (a - b) / den;
  }
  return s;
}
// Float loops for the blocked path: the vectoriser handles these well at -O2/-O3.
inline float l1f(const float* x, const float* y, std::int64_t dim) {
  float s = 0;
  for (std::int64_t d = 0; d < dim; ++d) s += std::fabs(x[d] - y[d]);
  return s;
}
inline float chi2f(const float* x, const float* y, std::int64_t dim) {
  float s = 0;
  for (std::int64_t d = 0; d < dim; ++d) {
    const float den = x[d] + y[d], diff = x[d] - y[d];
    s += den > 0 ? diff * diff / den : 0.0f;
  }
  return s;
}

// Double-precision kernels of the exactness pass. Products of two floats are exact in double;
// the sums run in eight fixed lanes (`omp simd` with -fopenmp-simd vectorises them without
// -ffast-math), so the value depends only on the two rows, never on where they sit in a block.
// They are the exactness pass's bulk where positives are dense (about 1000 per query in class
// retrieval), so each is also compiled for AVX2 and AVX-512 and picked at load time; the machine
// picks one clone for the whole run, so every pair of a run is scored by the same arithmetic.
#define EMBEDFLOW_EXACT_KERNEL __attribute__((target_clones("arch=x86-64-v4", "arch=x86-64-v3", "default")))
EMBEDFLOW_EXACT_KERNEL double dot_d(const float* x, const float* y, std::int64_t dim) {
  double s = 0;
#pragma omp simd reduction(+ : s) simdlen(8)
  for (std::int64_t d = 0; d < dim; ++d) s += double(x[d]) * double(y[d]);
  return s;
}
EMBEDFLOW_EXACT_KERNEL double sqdist_d(const float* x, const float* y, std::int64_t dim) {
  double s = 0;
#pragma omp simd reduction(+ : s) simdlen(8)
  for (std::int64_t d = 0; d < dim; ++d) {
    const double t = double(x[d]) - double(y[d]);
    s += t * t;
  }
  return s;
}
EMBEDFLOW_EXACT_KERNEL double l1_d(const float* x, const float* y, std::int64_t dim) {
  double s = 0;
#pragma omp simd reduction(+ : s) simdlen(8)
  for (std::int64_t d = 0; d < dim; ++d) s += std::fabs(double(x[d]) - double(y[d]));
  return s;
}
EMBEDFLOW_EXACT_KERNEL double chi2_d(const float* x, const float* y, std::int64_t dim) {
  double s = 0;
#pragma omp simd reduction(+ : s) simdlen(8)
  for (std::int64_t d = 0; d < dim; ++d) {
    const double a = x[d], b = y[d], den = a + b, diff = a - b;
    s += den > 0 ? diff * diff / den : 0.0;
  }
  return s;
}

void norms(const MatrixView& m, std::vector<float>& n2, std::vector<float>& l1n) {
  n2.resize(static_cast<std::size_t>(m.rows));
  l1n.resize(static_cast<std::size_t>(m.rows));
  for (std::int64_t i = 0; i < m.rows; ++i) {
    double s = 0, a = 0;
    const float* r = m.row(i);
    for (std::int64_t d = 0; d < m.cols; ++d) {
      s += double(r[d]) * r[d];
      a += std::fabs(r[d]);
    }
    n2[static_cast<std::size_t>(i)] = static_cast<float>(s);
    l1n[static_cast<std::size_t>(i)] = static_cast<float>(a);
  }
}

std::vector<float> unit_rows(const MatrixView& m, const std::vector<float>& n2) {
  std::vector<float> out(static_cast<std::size_t>(m.rows * m.cols));
  for (std::int64_t i = 0; i < m.rows; ++i) {
    const double n = std::sqrt(double(n2[static_cast<std::size_t>(i)]));
    // A zero vector has no direction; it stays zero, so its cosine distance to anything is 1.
    const double inv = n > 0 ? 1.0 / n : 0.0;
    for (std::int64_t d = 0; d < m.cols; ++d) out[static_cast<std::size_t>(i * m.cols + d)] = static_cast<float>(m.row(i)[d] * inv);
  }
  return out;
}

}  // namespace

DistanceKind parse_distance(const std::string& name) {
  for (std::size_t i = 0; i < kNames.size(); ++i)
    if (kNames[i] == name) return static_cast<DistanceKind>(i);
  std::string all;
  for (const auto& n : kNames) all += (all.empty() ? "" : ", ") + n;
  throw ConfigError(cat("unknown distance '", name, "'; expected one of: ", all));
}
std::string distance_name(DistanceKind kind) { return kNames.at(static_cast<std::size_t>(kind)); }
const std::vector<std::string>& distance_names() { return kNames; }
bool is_kernel(DistanceKind k) {
  return k == DistanceKind::chi2_kernel || k == DistanceKind::gaussian_kernel || k == DistanceKind::laplacian_kernel;
}

double score_to_value(const DistanceSpec& spec, double score) {
  if (spec.kind == DistanceKind::euclidean) return std::sqrt(std::max(0.0, score));
  if (is_kernel(spec.kind)) return -score;
  return score;
}

double pair_score(const DistanceSpec& spec, const float* x, const float* y, std::int64_t dim) {
  switch (spec.kind) {
    case DistanceKind::euclidean:
    case DistanceKind::sqeuclidean:
    case DistanceKind::gaussian_kernel: {
      double s = 0;
      for (std::int64_t d = 0; d < dim; ++d) s += (double(x[d]) - y[d]) * (double(x[d]) - y[d]);
      return spec.kind == DistanceKind::gaussian_kernel ? -std::exp(-spec.gamma * s) : s;
    }
    case DistanceKind::manhattan: return l1(x, y, dim);
    case DistanceKind::laplacian_kernel: return -std::exp(-spec.gamma * l1(x, y, dim));
    case DistanceKind::cosine: {
      double xy = 0, xx = 0, yy = 0;
      for (std::int64_t d = 0; d < dim; ++d) {
        xy += double(x[d]) * y[d];
        xx += double(x[d]) * x[d];
        yy += double(y[d]) * y[d];
      }
      if (xx <= 0 || yy <= 0) return 1.0;
      return 1.0 - xy / std::sqrt(xx * yy);
    }
    case DistanceKind::chi_square: return chi2(x, y, dim);
    case DistanceKind::chi2_kernel: return -std::exp(-spec.gamma * chi2(x, y, dim));
  }
  return 0;
}

BlockScorer::BlockScorer(const DistanceSpec& spec, MatrixView query, MatrixView gallery)
    : spec_(spec), query_(query), gallery_(gallery) {
  if (query.cols != gallery.cols)
    throw DataError(cat("query rows have ", query.cols, " dims but gallery rows have ", gallery.cols));
  if (is_kernel(spec.kind) && !(spec.gamma > 0)) throw ConfigError(cat("kernel gamma must be > 0, got ", spec.gamma));
  check_matrix(query, "query", needs_nonnegative(spec.kind));
  check_matrix(gallery, "gallery", needs_nonnegative(spec.kind));
  norms(query, query_norm2_, query_l1_);
  norms(gallery, gallery_norm2_, gallery_l1_);
  if (spec.kind == DistanceKind::cosine) {
    query_unit_ = unit_rows(query, query_norm2_);
    gallery_unit_ = unit_rows(gallery, gallery_norm2_);
    auto inverse_norms = [](const MatrixView& m) {
      std::vector<double> inv(static_cast<std::size_t>(m.rows));
      for (std::int64_t i = 0; i < m.rows; ++i) {
        const double n2 = dot_d(m.row(i), m.row(i), m.cols);
        inv[static_cast<std::size_t>(i)] = n2 > 0 ? 1.0 / std::sqrt(n2) : 0.0;
      }
      return inv;
    };
    query_inv_norm_ = inverse_norms(query);
    gallery_inv_norm_ = inverse_norms(gallery);
  }
  for (float v : gallery_norm2_) gallery_max_norm2_ = std::max(gallery_max_norm2_, double(v));
  for (float v : gallery_l1_) gallery_max_l1_ = std::max(gallery_max_l1_, double(v));
  double qmax2 = 0, qmaxl1 = 0;
  for (float v : query_norm2_) qmax2 = std::max(qmax2, double(v));
  for (float v : query_l1_) qmaxl1 = std::max(qmaxl1, double(v));
  switch (spec.kind) {
    case DistanceKind::euclidean:
    case DistanceKind::sqeuclidean: score_bound_ = std::pow(std::sqrt(qmax2) + std::sqrt(gallery_max_norm2_), 2); break;
    case DistanceKind::manhattan:
    case DistanceKind::chi_square: score_bound_ = qmaxl1 + gallery_max_l1_; break;
    case DistanceKind::cosine: score_bound_ = 2; break;
    default: score_bound_ = 0; break;  // kernels: scores lie in [-1, 0]
  }
}

double BlockScorer::tolerance(std::int64_t i) const {
  // Rigorous bounds on |float score - exact score|, u = 2^-24. Any summation order of D products
  // errs by at most gamma_D = D u / (1 - D u) times the sum of their magnitudes (Higham, Accuracy
  // and Stability, 3.1), whatever blocking or FMA the BLAS uses; the few roundings around the
  // sum (unit rows, norms, the final additions) add a handful of u. The double side errs ~1e-16.
  // Padded by 2x, and by 16 u for what the handful might be.
  const double u = std::ldexp(1.0, -24);
  const double gamma = 2 * (static_cast<double>(query_.cols) + 16) * u;
  switch (spec_.kind) {
    case DistanceKind::euclidean:
    case DistanceKind::sqeuclidean:
      // -2 q.g errs by gamma |q||g| <= gamma (|q|^2 + |g|^2) / 2; the norms and two additions by
      // a few u times |q|^2 + |g|^2 + 2|q||g|.
      return gamma * (query_norm2_[static_cast<std::size_t>(i)] + gallery_max_norm2_) + 1e-30;
    case DistanceKind::cosine:
      // Unit rows: |dot| <= 1, so the dot errs by gamma; 1 + dot and the rows' rounding by a few u.
      return gamma;
    case DistanceKind::manhattan:
    case DistanceKind::chi_square:
      // Each term is <= |x_d| + |y_d|: the sum of magnitudes is at most the two L1 norms.
      return gamma * (query_l1_[static_cast<std::size_t>(i)] + gallery_max_l1_) + 1e-30;
    default: {
      // Kernels: float exp() of a float distance; keep the earlier, wider margin.
      const double rel = 1e-4 + 4e-7 * static_cast<double>(query_.cols);
      return rel * (1 + spec_.gamma * (query_norm2_[static_cast<std::size_t>(i)] + gallery_max_norm2_ +
                                       query_l1_[static_cast<std::size_t>(i)] + gallery_max_l1_));
    }
  }
}

double BlockScorer::exact(std::int64_t i, std::int64_t j) const {
  const float* x = query_.row(i);
  const float* y = gallery_.row(j);
  const std::int64_t dim = query_.cols;
  switch (spec_.kind) {
    case DistanceKind::euclidean:
    case DistanceKind::sqeuclidean: return sqdist_d(x, y, dim);
    case DistanceKind::gaussian_kernel: return -std::exp(-spec_.gamma * sqdist_d(x, y, dim));
    case DistanceKind::manhattan: return l1_d(x, y, dim);
    case DistanceKind::laplacian_kernel: return -std::exp(-spec_.gamma * l1_d(x, y, dim));
    case DistanceKind::cosine: {
      const double a = query_inv_norm_[static_cast<std::size_t>(i)], b = gallery_inv_norm_[static_cast<std::size_t>(j)];
      if (a == 0 || b == 0) return 1.0;
      return 1.0 - dot_d(x, y, dim) * a * b;
    }
    case DistanceKind::chi_square: return chi2_d(x, y, dim);
    case DistanceKind::chi2_kernel: return -std::exp(-spec_.gamma * chi2_d(x, y, dim));
  }
  return 0;
}

void BlockScorer::compute(std::int64_t q0, std::int64_t q1, std::int64_t g0, std::int64_t g1, float* out,
                          std::int64_t ld, int threads) const {
  const std::int64_t nq = q1 - q0, ng = g1 - g0, dim = query_.cols;
  if (nq <= 0 || ng <= 0) return;
  if (uses_gemm(spec_.kind)) {
    const bool cos = spec_.kind == DistanceKind::cosine;
    const float* q = cos ? query_unit_.data() + q0 * dim : query_.row(q0);
    const float* g = cos ? gallery_unit_.data() + g0 * dim : gallery_.row(g0);
    cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasTrans, static_cast<int>(nq), static_cast<int>(ng),
                static_cast<int>(dim), cos ? -1.0f : -2.0f, q, static_cast<int>(dim), g, static_cast<int>(dim), 0.0f,
                out, static_cast<int>(ld));
    arena_for(nq, threads, [&](std::int64_t b, std::int64_t e) {
      for (std::int64_t i = b; i < e; ++i) {
        float* row = out + i * ld;
        if (cos) {
          const bool qzero = query_norm2_[static_cast<std::size_t>(q0 + i)] <= 0;
          for (std::int64_t j = 0; j < ng; ++j)
            row[j] = (qzero || gallery_norm2_[static_cast<std::size_t>(g0 + j)] <= 0) ? 1.0f : 1.0f + row[j];
          continue;
        }
        const float qn = query_norm2_[static_cast<std::size_t>(q0 + i)];
        const float* gn = gallery_norm2_.data() + g0;
        // Cancellation can leave tiny negatives for near-duplicates; distances are >= 0.
        for (std::int64_t j = 0; j < ng; ++j) row[j] = std::max(0.0f, row[j] + qn + gn[j]);
        if (spec_.kind == DistanceKind::gaussian_kernel) {
          const float gamma = static_cast<float>(spec_.gamma);
          for (std::int64_t j = 0; j < ng; ++j) row[j] = -std::exp(-gamma * row[j]);
        }
      }
    });
    return;
  }
  arena_for(nq, threads, [&](std::int64_t b, std::int64_t e) {
    const float gamma = static_cast<float>(spec_.gamma);
    for (std::int64_t i = b; i < e; ++i) {
      const float* x = query_.row(q0 + i);
      float* row = out + i * ld;
      for (std::int64_t j = 0; j < ng; ++j) {
        const float* y = gallery_.row(g0 + j);
        switch (spec_.kind) {
          case DistanceKind::manhattan: row[j] = l1f(x, y, dim); break;
          case DistanceKind::laplacian_kernel: row[j] = -std::exp(-gamma * l1f(x, y, dim)); break;
          case DistanceKind::chi_square: row[j] = chi2f(x, y, dim); break;
          case DistanceKind::chi2_kernel: row[j] = -std::exp(-gamma * chi2f(x, y, dim)); break;
          default: break;
        }
      }
    }
  });
}

bool BlockScorer::has_exact_blocks() const {
  return spec_.kind == DistanceKind::euclidean || spec_.kind == DistanceKind::sqeuclidean ||
         spec_.kind == DistanceKind::cosine;
}

void BlockScorer::compute_exact(std::int64_t q0, std::int64_t q1, std::int64_t g0, std::int64_t g1, double* out,
                                std::int64_t ld) const {
  if (!has_exact_blocks()) throw Error(cat("no double-precision block scores for ", distance_name(spec_.kind)));
  const std::int64_t nq = q1 - q0, dim = query_.cols;
  if (nq <= 0 || g1 <= g0) return;
  const bool cos = spec_.kind == DistanceKind::cosine;
  // Rows in double with their squared norms summed in double. Cosine scales the dot product
  // afterwards, as exact() does (1 - x.y a b), so rows that are exact multiples of each other
  // tie here exactly when they tie there.
  auto convert = [&](const MatrixView& m, std::int64_t r0, std::int64_t r1, std::vector<double>& rows,
                     std::vector<double>& norm2) {
    rows.resize(static_cast<std::size_t>((r1 - r0) * dim));
    norm2.resize(static_cast<std::size_t>(r1 - r0));
    for (std::int64_t r = r0; r < r1; ++r) {
      const float* x = m.row(r);
      double* y = rows.data() + (r - r0) * dim;
      double n2 = 0;
      for (std::int64_t d = 0; d < dim; ++d) {
        y[d] = double(x[d]);
        n2 += y[d] * y[d];
      }
      norm2[static_cast<std::size_t>(r - r0)] = n2;
    }
  };
  std::vector<double> q, qn2, g, gn2;
  convert(query_, q0, q1, q, qn2);
  for (std::int64_t c0 = g0; c0 < g1; c0 += kExactChunk) {
    const std::int64_t c1 = std::min(g1, c0 + kExactChunk), nc = c1 - c0;
    convert(gallery_, c0, c1, g, gn2);
    double* block = out + (c0 - g0);
    cblas_dgemm(CblasRowMajor, CblasNoTrans, CblasTrans, static_cast<int>(nq), static_cast<int>(nc),
                static_cast<int>(dim), cos ? 1.0 : -2.0, q.data(), static_cast<int>(dim), g.data(),
                static_cast<int>(dim), 0.0, block, static_cast<int>(ld));
    for (std::int64_t i = 0; i < nq; ++i) {
      double* row = block + i * ld;
      if (cos) {
        const double a = query_inv_norm_[static_cast<std::size_t>(q0 + i)];
        for (std::int64_t j = 0; j < nc; ++j) {
          const double b = gallery_inv_norm_[static_cast<std::size_t>(c0 + j)];
          row[j] = (a == 0 || b == 0) ? 1.0 : 1.0 - row[j] * a * b;
        }
      } else {
        // Not clamped at 0: near-duplicates keep their (tiny) order, identical rows tie exactly.
        const double qn = qn2[static_cast<std::size_t>(i)];
        for (std::int64_t j = 0; j < nc; ++j) row[j] += qn + gn2[static_cast<std::size_t>(j)];
      }
    }
  }
}

std::vector<double> score_matrix_reference(const DistanceSpec& spec, MatrixView query, MatrixView gallery) {
  std::vector<double> out(static_cast<std::size_t>(query.rows * gallery.rows));
  for (std::int64_t i = 0; i < query.rows; ++i)
    for (std::int64_t j = 0; j < gallery.rows; ++j)
      out[static_cast<std::size_t>(i * gallery.rows + j)] = pair_score(spec, query.row(i), gallery.row(j), query.cols);
  return out;
}

}  // namespace embedflow::evalcore
