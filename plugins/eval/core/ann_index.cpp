#include "ann_index.hpp"

#include <faiss/IndexFlat.h>
#include <faiss/IndexHNSW.h>
#include <faiss/IndexIVFFlat.h>
#include <faiss/IndexIVFPQ.h>
#include <faiss/impl/FaissException.h>
#include <faiss/impl/io.h>
#include <faiss/index_io.h>
#include <faiss/utils/distances.h>
#include <omp.h>
#include <zlib.h>

#include <algorithm>
#include <cmath>
#include <limits>
#include <numeric>
#include <random>

#include "embedflow/error.hpp"
#include "embedflow/rng.hpp"

namespace embedflow::evalcore {

namespace {

const std::vector<std::string> kKindNames{"flat", "ivf", "hnsw", "ivf_pq"};
const std::vector<std::string> kMetricNames{"euclidean", "cosine", "inner_product"};

faiss::MetricType faiss_metric(AnnMetric m) {
  return m == AnnMetric::euclidean ? faiss::METRIC_L2 : faiss::METRIC_INNER_PRODUCT;
}

// Rows scaled to unit L2 length (zero rows stay zero): cosine is the inner product of these.
std::vector<float> unit_rows(MatrixView m) {
  std::vector<float> out(m.data, m.data + m.rows * m.cols);
  for (std::int64_t i = 0; i < m.rows; ++i) {
    float* r = out.data() + i * m.cols;
    double n2 = 0;
    for (std::int64_t d = 0; d < m.cols; ++d) n2 += double(r[d]) * r[d];
    if (n2 > 0)
      for (std::int64_t d = 0; d < m.cols; ++d) r[d] = static_cast<float>(r[d] / std::sqrt(n2));
  }
  return out;
}

// faiss's similarities and distances as scores, smaller = nearer; missing results score +inf.
void to_scores(AnnMetric metric, const std::vector<std::int64_t>& index, std::vector<float>& score) {
  for (std::size_t i = 0; i < score.size(); ++i) {
    if (index[i] < 0) score[i] = std::numeric_limits<float>::infinity();
    else if (metric == AnnMetric::cosine) score[i] = 1.0f - score[i];
    else if (metric == AnnMetric::inner_product) score[i] = -score[i];
  }
}

std::int64_t default_nlist(std::int64_t rows) {
  return std::clamp<std::int64_t>(std::llround(4 * std::sqrt(double(rows))), 1, rows);
}

// Rows the training sees: a seeded sample without replacement, in gallery order.
std::vector<float> training_rows(MatrixView g, std::int64_t n, std::uint64_t seed) {
  if (n >= g.rows) return std::vector<float>(g.data, g.data + g.rows * g.cols);
  std::vector<std::int64_t> order(static_cast<std::size_t>(g.rows));
  std::iota(order.begin(), order.end(), 0);
  Rng rng(derive_seed(seed, "index_training_sample"));
  for (std::int64_t i = 0; i < n; ++i) {
    std::uniform_int_distribution<std::int64_t> pick(i, g.rows - 1);
    std::swap(order[static_cast<std::size_t>(i)], order[static_cast<std::size_t>(pick(rng))]);
  }
  std::sort(order.begin(), order.begin() + n);
  std::vector<float> out(static_cast<std::size_t>(n * g.cols));
  for (std::int64_t i = 0; i < n; ++i)
    std::copy_n(g.row(order[static_cast<std::size_t>(i)]), g.cols, out.data() + i * g.cols);
  return out;
}

// The training rows a spec needs and may use on this gallery, with the checks that name the
// parameter a gallery too small for it breaks.
std::int64_t checked_training_rows(const AnnSpec& s, std::int64_t nlist, MatrixView g) {
  if (s.kind == AnnKind::flat || s.kind == AnnKind::hnsw) return 0;
  if (nlist > g.rows)
    throw ConfigError(cat("nlist = ", nlist, " is larger than the gallery (", g.rows,
                          " rows): each k-means cell needs at least one training row"));
  if (s.nprobe > nlist) throw ConfigError(cat("nprobe = ", s.nprobe, " is larger than nlist = ", nlist));
  // faiss's k-means keeps at most 256 rows per centroid; more would be sampled away anyway.
  std::int64_t wanted = 256 * nlist;
  if (s.kind == AnnKind::ivf_pq) {
    if (s.pq_nbits < 1 || s.pq_nbits > 16) throw ConfigError(cat("pq_nbits = ", s.pq_nbits, " is outside [1, 16]"));
    if (s.pq_m < 1 || g.cols % s.pq_m != 0)
      throw ConfigError(cat("pq_m = ", s.pq_m, " does not divide the embedding dimension ", g.cols));
    wanted = std::max(wanted, std::int64_t{256} << s.pq_nbits);
  }
  const std::int64_t rows = std::min(g.rows, s.train_size > 0 ? s.train_size : wanted);
  if (rows < nlist) throw ConfigError(cat("train_size = ", rows, " is below nlist = ", nlist));
  if (s.kind == AnnKind::ivf_pq && rows < (std::int64_t{1} << s.pq_nbits))
    throw ConfigError(cat("pq_nbits = ", s.pq_nbits, " needs ", std::int64_t{1} << s.pq_nbits,
                          " training rows per sub-quantiser, but training sees ", rows));
  return rows;
}

std::unique_ptr<faiss::Index> empty_index(const AnnSpec& s, std::int64_t dim, std::int64_t nlist) {
  const auto metric = faiss_metric(s.metric);
  const auto d = static_cast<int>(dim);
  switch (s.kind) {
    case AnnKind::flat:
      return std::make_unique<faiss::IndexFlat>(d, metric);
    case AnnKind::hnsw: {
      auto h = std::make_unique<faiss::IndexHNSWFlat>(d, static_cast<int>(s.hnsw_m), metric);
      h->hnsw.efConstruction = static_cast<int>(s.ef_construction);
      h->hnsw.efSearch = static_cast<int>(s.ef_search);
      return h;
    }
    case AnnKind::ivf:
    case AnnKind::ivf_pq: {
      auto* quantizer = new faiss::IndexFlat(d, metric);
      std::unique_ptr<faiss::IndexIVF> ivf;
      if (s.kind == AnnKind::ivf) {
        ivf = std::make_unique<faiss::IndexIVFFlat>(quantizer, d, static_cast<std::size_t>(nlist), metric);
      } else {
        auto pq = std::make_unique<faiss::IndexIVFPQ>(quantizer, d, static_cast<std::size_t>(nlist),
                                                      static_cast<std::size_t>(s.pq_m), static_cast<std::size_t>(s.pq_nbits),
                                                      metric);
        pq->pq.cp.seed = static_cast<int>(derive_seed(s.seed, "pq") & 0x7fffffff);
        ivf = std::move(pq);
      }
      ivf->own_fields = true;
      ivf->cp.seed = static_cast<int>(derive_seed(s.seed, "kmeans") & 0x7fffffff);
      ivf->nprobe = static_cast<std::size_t>(s.nprobe);
      return ivf;
    }
  }
  throw ConfigError("unknown index kind");
}

// Squared L2 and inner product of two rows, summed in 16 lanes (lane l takes dims l, l + 16, ...)
// then the lanes in order: a fixed order the compiler may vectorise without reassociating, so the
// AVX2 clone and the baseline one give the same bits. No FMA in either clone, for the same reason.
__attribute__((target_clones("avx2", "default"))) float lane_l2sqr(const float* x, const float* y, std::size_t d) {
  float acc[16] = {};
  std::size_t i = 0;
  for (; i + 16 <= d; i += 16)
    for (std::size_t l = 0; l < 16; ++l) {
      const float t = x[i + l] - y[i + l];
      acc[l] += t * t;
    }
  float s = 0;
  for (; i < d; ++i) s += (x[i] - y[i]) * (x[i] - y[i]);
  for (float a : acc) s += a;
  return s;
}

__attribute__((target_clones("avx2", "default"))) float lane_dot(const float* x, const float* y, std::size_t d) {
  float acc[16] = {};
  std::size_t i = 0;
  for (; i + 16 <= d; i += 16)
    for (std::size_t l = 0; l < 16; ++l) acc[l] += x[i + l] * y[i + l];
  float s = 0;
  for (; i < d; ++i) s += x[i] * y[i];
  for (float a : acc) s += a;
  return s;
}

// hnsw's distance computer over flat storage, with the kernels above. Debian's libfaiss is built
// for the x86-64 baseline (no SSE3), where faiss's fvec_L2sqr is its scalar reference loop: two
// thirds of an hnsw search's CPU went there.
struct LaneDistance final : faiss::FlatCodesDistanceComputer {
  const float* q = nullptr;
  const float* rows;
  std::size_t d;
  bool l2;
  explicit LaneDistance(const faiss::IndexFlat& s)
      : FlatCodesDistanceComputer(s.codes.data(), s.code_size), rows(s.get_xb()), d(static_cast<std::size_t>(s.d)),
        l2(s.metric_type == faiss::METRIC_L2) {}
  void set_query(const float* x) override { q = x; }
  float distance(const float* a, const float* b) const { return l2 ? lane_l2sqr(a, b, d) : lane_dot(a, b, d); }
  float distance_to_code(const std::uint8_t* code) override { return distance(q, reinterpret_cast<const float*>(code)); }
  float symmetric_dis(idx_t i, idx_t j) override { return distance(rows + j * d, rows + i * d); }
};

// faiss's IndexFlat (written and read as one: write_index sees an IndexFlat) handing out LaneDistance.
struct LaneFlat final : faiss::IndexFlat {
  using faiss::IndexFlat::IndexFlat;
  faiss::FlatCodesDistanceComputer* get_FlatCodesDistanceComputer() const override { return new LaneDistance(*this); }
};

// Gives an hnsw index LaneFlat storage, taking over the rows of the flat storage faiss made.
void use_lane_storage(faiss::Index* index) {
  auto* h = dynamic_cast<faiss::IndexHNSW*>(index);
  auto* flat = h ? dynamic_cast<faiss::IndexFlat*>(h->storage) : nullptr;
  if (!flat || dynamic_cast<LaneFlat*>(flat) || (flat->metric_type != faiss::METRIC_L2 &&
                                                 flat->metric_type != faiss::METRIC_INNER_PRODUCT))
    return;
  auto lane = std::make_unique<LaneFlat>(flat->d, flat->metric_type);
  lane->codes.swap(flat->codes);
  lane->ntotal = flat->ntotal;
  lane->is_trained = flat->is_trained;
  if (h->own_fields) delete flat;
  h->storage = lane.release();
  h->own_fields = true;
}

constexpr int kMaxBreadth = 1 << 20;

// Structural checks faiss's reader leaves out and its search trusts: a neighbour or list entry
// out of range would be read past an array.
void check_structure(const faiss::Index& index, const std::string& what) {
  auto bad = [&](const std::string& why) { return DataError(cat(what, ": damaged index: ", why)); };
  if (const auto* h = dynamic_cast<const faiss::IndexHNSW*>(&index)) {
    const auto& g = h->hnsw;
    const auto n = static_cast<std::size_t>(index.ntotal);
    if (!h->storage || h->storage->ntotal != index.ntotal || h->storage->d != index.d)
      throw bad("its vector storage disagrees with the graph");
    if (g.levels.size() != n || g.offsets.size() != n + 1 || g.offsets.back() != g.neighbors.size())
      throw bad("its graph's level and offset tables disagree with its size");
    const auto& cum = g.cum_nneighbor_per_level;
    for (std::size_t i = 0; i < n; ++i)
      if (g.offsets[i] > g.offsets[i + 1] || g.levels[i] < 1 || g.levels[i] >= static_cast<int>(cum.size()) ||
          g.offsets[i + 1] - g.offsets[i] < static_cast<std::size_t>(cum[static_cast<std::size_t>(g.levels[i])]))
        throw bad(cat("graph node ", i, " has an impossible level or neighbour range"));
    for (auto v : g.neighbors)
      if (v < -1 || v >= index.ntotal) throw bad(cat("a graph edge names node ", v, " of ", index.ntotal));
    // A search's breadth sizes its queues: a damaged one would ask for gigabytes.
    if (g.efSearch < 1 || g.efSearch > kMaxBreadth || g.efConstruction < 1 || g.efConstruction > kMaxBreadth)
      throw bad("its search breadths are out of range");
    if (g.entry_point < -1 || g.entry_point >= index.ntotal || (index.ntotal > 0 && g.entry_point < 0) ||
        (g.entry_point >= 0 && g.levels[static_cast<std::size_t>(g.entry_point)] - 1 < g.max_level))
      throw bad("the graph's entry point is out of range");
  }
  if (const auto* ivf = dynamic_cast<const faiss::IndexIVF*>(&index)) {
    if (!ivf->quantizer || !ivf->invlists || ivf->quantizer->d != index.d ||
        ivf->quantizer->ntotal != static_cast<faiss::Index::idx_t>(ivf->nlist) || ivf->invlists->nlist != ivf->nlist)
      throw bad("its coarse quantizer disagrees with its inverted lists");
    std::size_t total = 0;
    for (std::size_t l = 0; l < ivf->nlist; ++l) {
      const std::size_t n = ivf->invlists->list_size(l);
      const faiss::Index::idx_t* ids = ivf->invlists->get_ids(l);
      for (std::size_t i = 0; i < n; ++i)
        if (ids[i] < 0 || ids[i] >= index.ntotal) throw bad(cat("inverted list ", l, " names row ", ids[i]));
      total += n;
    }
    if (total != static_cast<std::size_t>(index.ntotal)) throw bad("its inverted lists do not hold every row once");
    if (ivf->nprobe < 1 || ivf->nprobe > ivf->nlist) throw bad("its nprobe is outside [1, nlist]");
    if (ivf->invlists->code_size != ivf->code_size) throw bad("its inverted lists' code size disagrees with the index");
  }
  const auto* hnsw = dynamic_cast<const faiss::IndexHNSW*>(&index);
  if (const auto* flat = dynamic_cast<const faiss::IndexFlat*>(hnsw ? hnsw->storage : &index))
    // stored_rows() hands these out as ntotal x d floats.
    if (flat->code_size != sizeof(float) * static_cast<std::size_t>(flat->d) ||
        flat->codes.size() != flat->code_size * static_cast<std::size_t>(flat->ntotal))
      throw bad("its stored rows are not ntotal x d floats");
  if (dynamic_cast<const faiss::IndexIVFFlat*>(&index) &&
      dynamic_cast<const faiss::IndexIVF&>(index).code_size != sizeof(float) * static_cast<std::size_t>(index.d))
    throw bad("its rows are not d floats long");
  if (const auto* pq = dynamic_cast<const faiss::IndexIVFPQ*>(&index)) {
    const auto& q = pq->pq;
    if (q.d != static_cast<std::size_t>(index.d) || q.M * q.dsub != q.d || q.centroids.size() != q.d * q.ksub ||
        q.code_size != pq->code_size)
      throw bad("its product quantizer disagrees with its dimension or code size");
  }
}

}  // namespace

AnnKind parse_ann_kind(const std::string& name) {
  for (std::size_t i = 0; i < kKindNames.size(); ++i)
    if (kKindNames[i] == name) return static_cast<AnnKind>(i);
  throw ConfigError(cat("unknown index kind '", name, "' (flat, ivf, hnsw, ivf_pq)"));
}
AnnMetric parse_ann_metric(const std::string& name) {
  for (std::size_t i = 0; i < kMetricNames.size(); ++i)
    if (kMetricNames[i] == name) return static_cast<AnnMetric>(i);
  throw ConfigError(cat("unknown index metric '", name, "' (euclidean, cosine, inner_product)"));
}
std::string ann_kind_name(AnnKind kind) { return kKindNames[static_cast<std::size_t>(kind)]; }
std::string ann_metric_name(AnnMetric metric) { return kMetricNames[static_cast<std::size_t>(metric)]; }
const std::vector<std::string>& ann_kind_names() { return kKindNames; }
const std::vector<std::string>& ann_metric_names() { return kMetricNames; }

AnnIndex::AnnIndex() = default;
AnnIndex::~AnnIndex() = default;
AnnIndex::AnnIndex(AnnIndex&&) noexcept = default;
AnnIndex& AnnIndex::operator=(AnnIndex&&) noexcept = default;

AnnIndex AnnIndex::build(const AnnSpec& spec, MatrixView gallery, int threads) {
  if (gallery.rows < 1) throw DataError("the gallery is empty: there is nothing to index");
  const std::int64_t nlist = spec.nlist > 0 ? spec.nlist : default_nlist(gallery.rows);
  const std::int64_t train_rows = checked_training_rows(spec, nlist, gallery);
  std::vector<float> unit;
  if (spec.metric == AnnMetric::cosine) unit = unit_rows(gallery), gallery.data = unit.data();
  AnnIndex out;
  out.kind_ = spec.kind;
  out.metric_ = spec.metric;
  omp_set_num_threads(std::max(1, threads));
  try {
    out.index_ = empty_index(spec, gallery.cols, nlist);
    use_lane_storage(out.index_.get());
    if (train_rows > 0) {
      const std::vector<float> train = training_rows(gallery, train_rows, spec.seed);
      out.index_->train(train_rows, train.data());
    }
    out.index_->add(gallery.rows, gallery.data);
  } catch (const faiss::FaissException& e) {
    throw DataError(cat("faiss could not build the ", ann_kind_name(spec.kind), " index: ", e.what()));
  }
  return out;
}

std::vector<std::uint8_t> AnnIndex::to_bytes() const {
  faiss::VectorIOWriter w;
  faiss::write_index(index_.get(), &w);
  return std::move(w.data);
}

namespace {

// faiss's reader over bytes someone else owns: one copy, into the index's own arrays.
struct SpanIOReader : faiss::IOReader {
  const std::uint8_t* data = nullptr;
  std::size_t size = 0, at = 0;
  std::size_t operator()(void* ptr, std::size_t item, std::size_t items) override {
    if (item == 0 || at >= size) return 0;
    const std::size_t n = std::min(items, (size - at) / item);
    std::copy_n(data + at, n * item, static_cast<std::uint8_t*>(ptr));
    at += n * item;
    return n;
  }
};

}  // namespace

AnnIndex AnnIndex::from_bytes(std::vector<std::uint8_t> bytes, AnnMetric metric, const std::string& what) {
  return from_bytes(bytes.data(), bytes.size(), metric, what);
}

AnnIndex AnnIndex::from_bytes(const std::uint8_t* data, std::size_t size, AnnMetric metric, const std::string& what) {
  SpanIOReader r;
  r.data = data;
  r.size = size;
  AnnIndex out;
  try {
    out.index_.reset(faiss::read_index(&r));
  } catch (const std::exception& e) {  // FaissException, and bad_alloc from a damaged size field
    throw DataError(cat(what, ": not an index faiss can read (damaged or truncated?): ", e.what()));
  }
  if (r.at != size) throw DataError(cat(what, ": ", size - r.at, " bytes follow the index: the file is damaged"));
  const faiss::Index* i = out.index_.get();
  if (dynamic_cast<const faiss::IndexIVFPQ*>(i)) out.kind_ = AnnKind::ivf_pq;
  else if (dynamic_cast<const faiss::IndexIVFFlat*>(i)) out.kind_ = AnnKind::ivf;
  else if (dynamic_cast<const faiss::IndexHNSWFlat*>(i)) out.kind_ = AnnKind::hnsw;
  else if (dynamic_cast<const faiss::IndexFlat*>(i)) out.kind_ = AnnKind::flat;
  else throw DataError(cat(what, ": a faiss index of a kind eval does not search (flat, ivf, hnsw, ivf_pq only)"));
  if (i->metric_type != faiss_metric(metric))
    throw DataError(cat(what, ": the faiss index ranks by ", i->metric_type == faiss::METRIC_L2 ? "L2" : "inner product",
                        " but its gallery says ", ann_metric_name(metric)));
  out.metric_ = metric;
  check_structure(*i, what);
  use_lane_storage(out.index_.get());
  return out;
}

void AnnIndex::search(MatrixView queries, std::int64_t k, const AnnSearchParams& params, int threads,
                      std::vector<std::int64_t>& index, std::vector<float>& score) const {
  if (queries.cols != dim())
    throw DataError(cat("queries have ", queries.cols, " dims but the index holds ", dim(), "-dim rows"));
  std::vector<float> unit;
  if (metric_ == AnnMetric::cosine) unit = unit_rows(queries), queries.data = unit.data();
  index.assign(static_cast<std::size_t>(queries.rows * k), -1);
  score.assign(index.size(), 0.0f);
  faiss::SearchParametersIVF ivf;
  faiss::SearchParametersHNSW hnsw;
  const faiss::SearchParameters* sp = nullptr;
  if (const auto* i = dynamic_cast<const faiss::IndexIVF*>(index_.get())) {
    ivf.nprobe = params.nprobe > 0 ? static_cast<std::size_t>(params.nprobe) : i->nprobe;
    if (ivf.nprobe > i->nlist) throw ConfigError(cat("nprobe = ", ivf.nprobe, " is larger than the index's nlist = ", i->nlist));
    sp = &ivf;
  } else if (auto* h = dynamic_cast<faiss::IndexHNSW*>(index_.get())) {
    hnsw.efSearch = params.ef_search > 0 ? static_cast<int>(params.ef_search) : h->hnsw.efSearch;
    // faiss 1.7.3 sizes the search's candidate queue by the index's own efSearch and only stops
    // by the parameter's, so a parameter above the built value searched no wider: set both.
    h->hnsw.efSearch = hnsw.efSearch;
    sp = &hnsw;
  }
  omp_set_num_threads(std::max(1, threads));
  try {
    index_->search(queries.rows, queries.data, k, score.data(), index.data(), sp);
  } catch (const faiss::FaissException& e) {
    throw DataError(cat("faiss search failed: ", e.what()));
  }
  to_scores(metric_, index, score);
}

bool AnnIndex::stores_vectors() const { return kind_ != AnnKind::ivf_pq; }

MatrixView AnnIndex::stored_rows() const {
  const faiss::IndexFlat* flat = nullptr;
  if (const auto* h = dynamic_cast<const faiss::IndexHNSW*>(index_.get())) flat = dynamic_cast<const faiss::IndexFlat*>(h->storage);
  else flat = dynamic_cast<const faiss::IndexFlat*>(index_.get());
  if (!flat) return MatrixView{nullptr, 0, dim()};
  return MatrixView{flat->get_xb(), rows(), dim()};
}

std::vector<float> AnnIndex::reconstruct() const {
  const auto d = static_cast<std::size_t>(dim());
  std::vector<float> out(static_cast<std::size_t>(rows()) * d);
  if (const auto* ivf = dynamic_cast<const faiss::IndexIVFFlat*>(index_.get())) {
    // IVF-Flat's codes are the rows themselves; walking the lists needs no direct map.
    for (std::size_t l = 0; l < ivf->nlist; ++l) {
      const auto* ids = ivf->invlists->get_ids(l);
      const auto* rows = reinterpret_cast<const float*>(ivf->invlists->get_codes(l));
      for (std::size_t i = 0; i < ivf->invlists->list_size(l); ++i)
        std::copy_n(rows + i * d, d, out.data() + static_cast<std::size_t>(ids[i]) * d);
    }
  } else if (const auto* h = dynamic_cast<const faiss::IndexHNSW*>(index_.get())) {
    h->storage->reconstruct_n(0, rows(), out.data());
  } else if (kind_ == AnnKind::flat) {
    index_->reconstruct_n(0, rows(), out.data());
  } else {
    throw ConfigError("an ivf_pq index holds codes, not its gallery rows");
  }
  return out;
}

std::int64_t AnnIndex::dim() const { return index_ ? index_->d : 0; }
std::int64_t AnnIndex::rows() const { return index_ ? index_->ntotal : 0; }

std::string AnnIndex::describe(const AnnSearchParams& search) const {
  std::string s = cat(ann_kind_name(kind_), " ", ann_metric_name(metric_));
  if (const auto* pq = dynamic_cast<const faiss::IndexIVFPQ*>(index_.get()))
    s += cat(" pq_m=", pq->pq.M, " pq_nbits=", pq->pq.nbits);
  if (const auto* ivf = dynamic_cast<const faiss::IndexIVF*>(index_.get()))
    s += cat(" nlist=", ivf->nlist, " nprobe=", search.nprobe > 0 ? search.nprobe : std::int64_t(ivf->nprobe));
  if (const auto* h = dynamic_cast<const faiss::IndexHNSW*>(index_.get()))
    s += cat(" M=", h->hnsw.nb_neighbors(1), " efConstruction=", h->hnsw.efConstruction,
             " efSearch=", search.ef_search > 0 ? search.ef_search : std::int64_t(h->hnsw.efSearch));
  return s;
}

void exact_search(AnnMetric metric, MatrixView queries, MatrixView gallery, std::int64_t k, int threads,
                  std::vector<std::int64_t>& index, std::vector<float>& score) {
  std::vector<float> uq, ug;
  if (metric == AnnMetric::cosine) {
    uq = unit_rows(queries), queries.data = uq.data();
    ug = unit_rows(gallery), gallery.data = ug.data();
  }
  index.assign(static_cast<std::size_t>(queries.rows * k), -1);
  score.assign(index.size(), 0.0f);
  omp_set_num_threads(std::max(1, threads));
  const auto d = static_cast<std::size_t>(queries.cols), nq = static_cast<std::size_t>(queries.rows),
             ng = static_cast<std::size_t>(gallery.rows), kk = static_cast<std::size_t>(k);
  if (metric == AnnMetric::euclidean)
    faiss::knn_L2sqr(queries.data, gallery.data, d, nq, ng, kk, score.data(), index.data());
  else
    faiss::knn_inner_product(queries.data, gallery.data, d, nq, ng, kk, score.data(), index.data());
  to_scores(metric, index, score);
}

double recall_at_k(const std::vector<std::int64_t>& approx, const std::vector<std::int64_t>& exact, std::int64_t queries,
                   std::int64_t k) {
  if (queries == 0 || k == 0) return 0;
  double found = 0;
  std::vector<std::int64_t> truth(static_cast<std::size_t>(k));
  for (std::int64_t q = 0; q < queries; ++q) {
    const auto* e = exact.data() + q * k;
    truth.assign(e, e + k);
    std::sort(truth.begin(), truth.end());
    for (std::int64_t i = 0; i < k; ++i) {
      const auto id = approx[static_cast<std::size_t>(q * k + i)];
      found += id >= 0 && std::binary_search(truth.begin(), truth.end(), id);
    }
  }
  return found / double(queries * k);
}

std::vector<std::int64_t> recall_sample_rows(std::int64_t rows, std::int64_t sample) {
  const std::int64_t n = sample <= 0 ? 0 : std::min(rows, sample);
  std::vector<std::int64_t> out(static_cast<std::size_t>(n));
  for (std::int64_t i = 0; i < n; ++i) out[static_cast<std::size_t>(i)] = i * rows / n;
  return out;
}

std::uint32_t crc32_of(const std::uint8_t* data, std::size_t size) {
  uLong crc = crc32(0L, Z_NULL, 0);
  constexpr std::size_t kStep = std::size_t{1} << 30;  // zlib's length is a uInt
  for (std::size_t at = 0; at < size; at += kStep)
    crc = crc32(crc, data + at, static_cast<uInt>(std::min(kStep, size - at)));
  return static_cast<std::uint32_t>(crc);
}

}  // namespace embedflow::evalcore
