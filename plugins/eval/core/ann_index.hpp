// Approximate nearest-neighbour indexes over a gallery, through faiss: flat (exact), IVF (inverted
// lists over k-means cells), HNSW (a navigable small-world graph) and IVF-PQ (inverted lists of
// product-quantised codes), under squared L2, cosine (inner product of unit rows) or inner
// product. The index is trained on the gallery or a seeded sample of it where its kind needs
// training, and travels as the bytes of faiss's own write_index, so a file written here is read
// by faiss.read_index in Python and the other way round.
//
// Scores follow the eval family's rule, smaller = nearer: squared L2, 1 - cosine, or the negated
// inner product. Recall of an index is the k-recall@k of faiss's benchmarks: the share of the
// exact top-k found in the index's top-k, averaged over queries.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "embedflow/features.hpp"  // MatrixView

namespace faiss {
struct Index;
}

namespace embedflow::evalcore {

enum class AnnKind { flat, ivf, hnsw, ivf_pq };
enum class AnnMetric { euclidean, cosine, inner_product };

AnnKind parse_ann_kind(const std::string& name);      // ConfigError naming the choices
AnnMetric parse_ann_metric(const std::string& name);  // ConfigError naming the choices
std::string ann_kind_name(AnnKind kind);
std::string ann_metric_name(AnnMetric metric);
const std::vector<std::string>& ann_kind_names();
const std::vector<std::string>& ann_metric_names();

struct AnnSpec {
  AnnKind kind = AnnKind::flat;
  AnnMetric metric = AnnMetric::euclidean;
  std::int64_t nlist = 0;      // ivf, ivf_pq: k-means cells; 0 = about 4 sqrt(gallery rows)
  std::int64_t nprobe = 8;     // ivf, ivf_pq: cells visited per query
  std::int64_t hnsw_m = 32;    // hnsw: neighbours per node
  std::int64_t ef_construction = 40;
  std::int64_t ef_search = 64;
  std::int64_t pq_m = 16;      // ivf_pq: sub-quantisers (must divide the dimension)
  std::int64_t pq_nbits = 8;   // ivf_pq: bits per sub-quantiser code
  std::int64_t train_size = 0; // rows the training sees; 0 = all the kind can use (256 per centroid)
  std::uint64_t seed = 0;      // training sample and k-means seeding
};

// Search-time settings; 0 keeps what the index was built (or last searched) with.
struct AnnSearchParams {
  std::int64_t nprobe = 0;
  std::int64_t ef_search = 0;
};

class AnnIndex {
 public:
  AnnIndex();
  ~AnnIndex();
  AnnIndex(AnnIndex&&) noexcept;
  AnnIndex& operator=(AnnIndex&&) noexcept;

  // Trains (when the kind needs it) and fills an index with every gallery row. ConfigError
  // naming the parameter when the spec cannot fit this gallery (nlist or 2^pq_nbits above the
  // training rows, pq_m not dividing the dimension, nprobe above nlist).
  static AnnIndex build(const AnnSpec& spec, MatrixView gallery, int threads);
  // faiss's serialised form (write_index) and back. faiss stores L2 or inner product, so the
  // reader is told the metric (cosine and inner product share faiss's). from_bytes throws
  // DataError naming `what` when faiss cannot read the bytes (damaged, truncated, not an index),
  // when the index is not of a kind this class builds, its metric is not `metric`'s, or its
  // graph or lists name rows it does not hold.
  std::vector<std::uint8_t> to_bytes() const;
  static AnnIndex from_bytes(std::vector<std::uint8_t> bytes, AnnMetric metric, const std::string& what);
  // The same from bytes the caller keeps (a mapped file): faiss copies what it keeps.
  static AnnIndex from_bytes(const std::uint8_t* data, std::size_t size, AnnMetric metric, const std::string& what);

  // Top-k per query, nearest first: indices into the gallery (-1 pads when the index finds fewer)
  // and scores (see the header). Cosine normalises the queries first. An hnsw search's ef_search
  // stays the index's efSearch (faiss needs it there); not safe alongside another search.
  void search(MatrixView queries, std::int64_t k, const AnnSearchParams& params, int threads,
              std::vector<std::int64_t>& index, std::vector<float>& score) const;

  // Whether the index holds the gallery rows exactly (flat, ivf, hnsw; not ivf_pq's codes), so
  // reconstruct() gives them back: cosine indexes hold the rows scaled to unit length.
  bool stores_vectors() const;
  std::vector<float> reconstruct() const;
  // The stored rows in place, row i = gallery row i, where the index keeps them in one array
  // (flat, hnsw); an empty view (data null) otherwise. Valid while the index lives.
  MatrixView stored_rows() const;

  AnnKind kind() const { return kind_; }
  AnnMetric metric() const { return metric_; }
  std::int64_t dim() const;
  std::int64_t rows() const;
  // "ivf euclidean nlist=1024 nprobe=16", for logs and reports, with `search`'s settings where
  // they replace the built ones.
  std::string describe(const AnnSearchParams& search = {}) const;

 private:
  std::unique_ptr<faiss::Index> index_;
  AnnKind kind_ = AnnKind::flat;
  AnnMetric metric_ = AnnMetric::euclidean;
};

// Exact top-k by brute force over `gallery` (faiss's flat kernels, float) under `metric`, scores
// as AnnIndex::search's: the reference that recall is measured against.
void exact_search(AnnMetric metric, MatrixView queries, MatrixView gallery, std::int64_t k, int threads,
                  std::vector<std::int64_t>& index, std::vector<float>& score);

// k-recall@k: mean over queries of |approx top-k ∩ exact top-k| / k (rows of k ids each; -1
// entries never match).
double recall_at_k(const std::vector<std::int64_t>& approx, const std::vector<std::int64_t>& exact, std::int64_t queries,
                   std::int64_t k);

// Rows of a query set that recall is measured on: all when there are at most `sample`, else
// `sample` rows evenly spaced (row floor(i * rows / sample)), so a re-run measures the same ones.
std::vector<std::int64_t> recall_sample_rows(std::int64_t rows, std::int64_t sample);

// CRC-32 (zlib's) of a byte range: the index file's checksum in its gallery file.
std::uint32_t crc32_of(const std::uint8_t* data, std::size_t size);

}  // namespace embedflow::evalcore
