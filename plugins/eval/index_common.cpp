#include "index_common.hpp"

#include <embedflow/atomic_file.hpp>
#include <embedflow/hdf5/stream_file.hpp>
#include <embedflow/results.hpp>

#include <cerrno>
#include <chrono>
#include <ctime>
#include <cstring>
#include <memory>

#include <fcntl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

namespace embedflow::eval {

using namespace evalcore;

namespace {

std::string attribute_or_throw(const hdf5::StreamFileReader& r, const std::string& key, const std::string& file) {
  auto v = r.attribute(key);
  if (!v) throw DataError(cat("'", file, "' lacks the '", key, "' attribute of an index gallery file"));
  return *v;
}

std::int64_t integer_attribute(const hdf5::StreamFileReader& r, const std::string& key, const std::string& file) {
  const std::string v = attribute_or_throw(r, key, file);
  try {
    std::size_t used = 0;
    const long long x = std::stoll(v, &used);
    if (used == v.size() && x >= 0) return x;
  } catch (const std::exception&) {
  }
  throw DataError(cat("'", file, "': attribute '", key, "' is '", v, "', not a count"));
}

// An index file mapped read-only: its CRC-32 and faiss's reader read the page cache in place,
// so the bytes are copied once (into faiss's arrays), not read into a buffer first. Pages are
// populated up front: one call, not a fault per page.
class MappedFile {
 public:
  explicit MappedFile(const std::filesystem::path& path) {
    const int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
    if (fd < 0) throw DataError(cat("cannot open index file '", path.string(), "': ", std::strerror(errno)));
    struct stat st {};
    if (::fstat(fd, &st) != 0) {
      ::close(fd);
      throw DataError(cat("cannot read index file '", path.string(), "': ", std::strerror(errno)));
    }
    size_ = static_cast<std::size_t>(st.st_size);
    if (size_ > 0) {
      void* p = ::mmap(nullptr, size_, PROT_READ, MAP_PRIVATE | MAP_POPULATE, fd, 0);
      if (p == MAP_FAILED) {
        const int e = errno;
        ::close(fd);
        throw DataError(cat("cannot map index file '", path.string(), "': ", std::strerror(e)));
      }
      data_ = static_cast<const std::uint8_t*>(p);
    }
    ::close(fd);
  }
  ~MappedFile() {
    if (data_) ::munmap(const_cast<std::uint8_t*>(data_), size_);
  }
  MappedFile(const MappedFile&) = delete;
  MappedFile& operator=(const MappedFile&) = delete;
  const std::uint8_t* data() const { return data_; }
  std::size_t size() const { return size_; }

 private:
  const std::uint8_t* data_ = nullptr;
  std::size_t size_ = 0;
};

// The gallery's label, id and camera columns, from either the record or the stream file.
void take_gallery_columns(const Record& r, IndexedGallery& g, const std::string& where) {
  const Array* label = r.find("label");
  if (!label || label->dtype() != DType::i64 || label->rank() != 1)
    throw DataError(cat(where, ": 'label' i64[G] is missing"));
  g.label.assign(label->data<std::int64_t>(), label->data<std::int64_t>() + label->numel());
  if (const Array* camera = r.find("camera")) {
    if (camera->dtype() != DType::i64 || camera->numel() != label->numel())
      throw DataError(cat(where, ": 'camera' is not i64[", label->numel(), "]"));
    g.camera.assign(camera->data<std::int64_t>(), camera->data<std::int64_t>() + camera->numel());
  }
  if (const Array* id = r.find("id")) {
    if (!id->is_string() || id->numel() != label->numel()) throw DataError(cat(where, ": 'id' is not str[", label->numel(), "]"));
    g.id = id->string_values();
  }
  if (static_cast<std::int64_t>(g.label.size()) != g.index.rows())
    throw DataError(cat(where, ": the index holds ", g.index.rows(), " rows but ", g.label.size(), " gallery labels"));
}

Record gallery_columns(const FeatureSet& gallery) {
  Record r;
  const auto n = gallery.rows();
  r.set("label", Array::from_vector<std::int64_t>({n}, gallery.label));
  if (gallery.has_camera) r.set("camera", Array::from_vector<std::int64_t>({n}, gallery.camera));
  if (gallery.has_id) r.set("id", Array::strings(gallery.id));
  return r;
}

double process_cpu_seconds() {
  timespec t{};
  clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &t);
  return double(t.tv_sec) + 1e-9 * double(t.tv_nsec);
}

}  // namespace

Record index_record(const AnnIndex& index, std::vector<std::uint8_t> bytes, const FeatureSet& gallery) {
  Record r = gallery_columns(gallery);
  const auto n = static_cast<std::int64_t>(bytes.size());
  r.set("index", Array::from_vector<std::uint8_t>({n}, std::move(bytes)));
  r.set("metric", Array::string_scalar(ann_metric_name(index.metric())));
  r.set("kind", Array::string_scalar(ann_kind_name(index.kind())));
  return r;
}

IndexedGallery gallery_from_record(const Record& r) {
  IndexedGallery g;
  g.source = "the index record";
  const Array* bytes = r.find("index");
  const Array* metric = r.find("metric");
  if (!bytes || bytes->dtype() != DType::u8 || !metric || !metric->is_string())
    throw DataError("the index port's record lacks 'index' u8[N] or 'metric' (connect an eval.index_build's index output)");
  const auto* data = bytes->data<std::uint8_t>();
  g.index = AnnIndex::from_bytes(std::vector<std::uint8_t>(data, data + bytes->numel()), parse_ann_metric(metric->string_at(0)),
                                 g.source);
  take_gallery_columns(r, g, g.source);
  return g;
}

void save_index_files(const std::filesystem::path& path, const std::vector<std::uint8_t>& bytes, const AnnIndex& index,
                      const FeatureSet& gallery) {
  if (path.has_parent_path()) std::filesystem::create_directories(path.parent_path());
  write_file_atomic(path, std::string_view(reinterpret_cast<const char*>(bytes.data()), bytes.size()));
  hdf5::WriterOptions options;
  options.checksum = true;
  hdf5::StreamFileWriter w(path.string() + ".h5",
                           {{"embedflow_index", kIndexFormat},
                            {"kind", ann_kind_name(index.kind())},
                            {"metric", ann_metric_name(index.metric())},
                            {"dim", std::to_string(index.dim())},
                            {"rows", std::to_string(index.rows())},
                            {"description", index.describe()},
                            {"faiss_bytes", std::to_string(bytes.size())},
                            {"faiss_crc32", std::to_string(crc32_of(bytes.data(), bytes.size()))}},
                           options);
  w.add_port("gallery", hdf5::Layout::batches);
  w.append("gallery", gallery_columns(gallery));
  w.commit();
}

IndexedGallery load_index_files(const std::filesystem::path& path) {
  const std::string file = path.string(), sidecar = file + ".h5";
  if (!std::filesystem::is_regular_file(path)) throw DataError(cat("index file '", file, "' does not exist"));
  if (!std::filesystem::is_regular_file(sidecar))
    throw DataError(cat("'", sidecar, "' (the gallery labels of index file '", file, "') does not exist"));
  const hdf5::StreamFileReader reader(sidecar);
  if (attribute_or_throw(reader, "embedflow_index", sidecar) != kIndexFormat)
    throw DataError(cat("'", sidecar, "' is an index gallery file of another format than ", kIndexFormat));
  reader.verify_checksums();
  IndexedGallery g;
  g.source = cat("index file '", file, "'");
  const std::int64_t size = integer_attribute(reader, "faiss_bytes", sidecar);
  const std::int64_t crc = integer_attribute(reader, "faiss_crc32", sidecar);
  const AnnMetric metric = parse_ann_metric(attribute_or_throw(reader, "metric", sidecar));
  {
    const MappedFile bytes(path);
    if (static_cast<std::int64_t>(bytes.size()) != size)
      throw DataError(cat(g.source, " has ", bytes.size(), " bytes where its gallery file '", sidecar, "' records ", size,
                          ": it was truncated or replaced"));
    if (crc32_of(bytes.data(), bytes.size()) != static_cast<std::uint32_t>(crc))
      throw DataError(cat(g.source, " is damaged: its CRC-32 differs from the one its gallery file '", sidecar, "' records"));
    g.index = AnnIndex::from_bytes(bytes.data(), bytes.size(), metric, g.source);
  }
  if (ann_kind_name(g.index.kind()) != attribute_or_throw(reader, "kind", sidecar) ||
      g.index.dim() != integer_attribute(reader, "dim", sidecar))
    throw DataError(cat(g.source, " (", g.index.describe(), ", ", g.index.dim(), " dims) is not the index its gallery file '",
                        sidecar, "' describes"));
  const hdf5::Table& table = reader.port("gallery");
  take_gallery_columns(table.read_rows(0, table.rows()), g, cat("'", sidecar, "'"));
  return g;
}

void add_index_search_params(NodeTypeBuilder& b) {
  b.param(Param::path("path").optional().doc("index file written by eval.index_build (with <path>.h5 beside it); "
                                             "or connect the index port"))
      .param(Param::choice("metric", ann_metric_names()).optional()
                 .doc("the metric the index must rank by; a file of another metric is an error"))
      .param(Param::integer("nprobe").default_value(0).min(0).doc("ivf, ivf_pq: cells visited per query (0: as built)"))
      .param(Param::integer("ef_search").default_value(0).range(0, 1 << 20).doc("hnsw: search breadth (0: as built)"))
      .param(Param::choice("rescore", {"auto", "always", "never"}).default_value("auto")
                 .doc("re-rank each list by eval.retrieval's double-precision scores: auto for ivf_pq's lossy codes "
                      "(with the gallery port), always, or never (faiss's order)"))
      .param(Param::integer("recall_queries").default_value(1000).min(0).not_fingerprinted()
                 .doc("queries (evenly spaced) on which recall against exact search is measured; 0: none"));
}

void check_index_source(SchemaContext& c) {
  const bool port = c.connected("index"), file = c.params().has("path");
  if (port == file)
    c.error(port ? "takes the index from the index port or from path, not both" : "needs an index: set path or connect the index port",
            file ? "path" : "");
}

void IndexSearch::open(const NodeContext& ctx) {
  const Params& p = ctx.params();
  path_ = p.has("path") ? p.string("path") : "";
  metric_ = p.has("metric") ? p.string("metric") : "";
  params_.nprobe = p.integer("nprobe");
  params_.ef_search = p.integer("ef_search");
  recall_queries_ = p.integer("recall_queries");
  const std::string rescore = p.string("rescore");
  rescore_ = rescore == "always" ? Rescore::always : rescore == "never" ? Rescore::never : Rescore::automatic;
  threads_ = std::max(1, ctx.threads());
  node_ = ctx.id();
}

void IndexSearch::take_record(const RecordPtr& record) {
  if (record_) throw DataError("the index port received a second index; it takes one");
  record_ = record;
}

IndexedGallery IndexSearch::load(std::int64_t query_dim, const std::string& queries) const {
  if (path_.empty() && !record_) throw DataError("the index port ended without an index record");
  IndexedGallery g = path_.empty() ? gallery_from_record(*record_) : load_index_files(path_);
  if (!metric_.empty() && ann_metric_name(g.index.metric()) != metric_)
    throw ConfigError(cat(g.source, " ranks by ", ann_metric_name(g.index.metric()), ", but metric is ", metric_));
  if (g.index.dim() != query_dim)
    throw DataError(cat(queries, " have ", query_dim, " dims but ", g.source, " holds ", g.index.dim(), "-dim rows"));
  return g;
}

bool IndexSearch::rescores(const IndexedGallery& g, const FeatureSet& stream) const {
  const bool rows = stream.rows() > 0 || g.index.stores_vectors();
  switch (rescore_) {
    case Rescore::never: return false;
    case Rescore::automatic: return !g.index.stores_vectors() && rows && g.index.metric() != AnnMetric::inner_product;
    case Rescore::always:
      if (g.index.metric() == AnnMetric::inner_product)
        throw ConfigError(cat("rescore: always needs a distance to rescore by, but ", g.source,
                              " ranks by inner product (use auto or never)"));
      if (!rows)
        throw ConfigError(cat("rescore: always needs the gallery rows, but ", g.source,
                              " is ivf_pq, which holds codes: connect the gallery port"));
      return true;
  }
  return false;
}

GalleryRows IndexSearch::exact_rows(const IndexedGallery& g, const FeatureSet& stream, bool needed) const {
  GalleryRows out;
  if (stream.rows() > 0 && (stream.rows() != g.index.rows() || stream.dim != g.index.dim()))
    throw DataError(cat("the gallery port brought ", stream.rows(), " rows of ", stream.dim, " dims but ", g.source,
                        " holds ", g.index.rows(), " of ", g.index.dim()));
  if (!needed) return out;
  if (stream.rows() > 0) {
    out.view = stream.view();
  } else if ((out.view = g.index.stored_rows()).data == nullptr && g.index.stores_vectors()) {
    out.owned = g.index.reconstruct();
    out.view = MatrixView{out.owned.data(), g.index.rows(), g.index.dim()};
  }
  return out;
}

DistanceSpec exact_spec(AnnMetric metric) {
  DistanceSpec spec;
  spec.kind = metric == AnnMetric::cosine      ? DistanceKind::cosine
              : metric == AnnMetric::euclidean ? DistanceKind::euclidean
                                               : DistanceKind::sqeuclidean;
  return spec;
}

Candidates ordered_candidates(const IndexedGallery& g, const GalleryRows& rows, MatrixView queries,
                              std::int64_t fetch, const IndexSearch& search, bool rescore, SearchTiming* timing) {
  std::vector<std::int64_t> ids;
  std::vector<float> scores;
  const double cpu0 = process_cpu_seconds();
  const auto wall0 = std::chrono::steady_clock::now();
  g.index.search(queries, fetch, search.params(), search.threads(), ids, scores);
  if (timing) {
    timing->cpu_s = process_cpu_seconds() - cpu0;
    timing->wall_s = std::chrono::duration<double>(std::chrono::steady_clock::now() - wall0).count();
  }
  Candidates c{queries.rows, fetch, std::move(ids), std::vector<double>(scores.begin(), scores.end())};
  if (rescore) {
    if (rows.empty()) throw std::logic_error("ordered_candidates: rescoring without gallery rows");
    const BlockScorer scorer(exact_spec(g.index.metric()), queries, rows.view);
    order_candidates(c, &scorer, search.threads());
  } else {
    order_candidates(c, nullptr, search.threads());
  }
  return c;
}

RecallReport measure_recall(const IndexedGallery& g, const GalleryRows& rows, MatrixView queries, std::int64_t k,
                            bool exclude_self, const IndexSearch& search) {
  RecallReport r;
  r.k = std::min(k, g.index.rows() - (exclude_self ? 1 : 0));
  if (search.recall_queries() == 0) return r.why_not = "recall_queries is 0", r;
  if (rows.empty()) return r.why_not = "an ivf_pq index holds codes, not rows: connect the gallery port to measure recall", r;
  const std::vector<std::int64_t> sample = recall_sample_rows(queries.rows, search.recall_queries());
  std::vector<float> picked(sample.size() * static_cast<std::size_t>(queries.cols));
  for (std::size_t i = 0; i < sample.size(); ++i)
    std::copy_n(queries.row(sample[i]), queries.cols, picked.data() + i * static_cast<std::size_t>(queries.cols));
  const MatrixView Q{picked.data(), static_cast<std::int64_t>(sample.size()), queries.cols};
  const MatrixView G = rows.view;
  const std::int64_t fetch = r.k + (exclude_self ? 1 : 0);
  // Each list without the query itself (self-retrieval), cut to k.
  auto top_k = [&](const std::vector<std::int64_t>& ids) {
    std::vector<std::int64_t> out(static_cast<std::size_t>(Q.rows * r.k), -1);
    for (std::int64_t q = 0; q < Q.rows; ++q)
      for (std::int64_t i = 0, n = 0; i < fetch && n < r.k; ++i) {
        const auto j = ids[static_cast<std::size_t>(q * fetch + i)];
        if (!(exclude_self && j == sample[static_cast<std::size_t>(q)])) out[static_cast<std::size_t>(q * r.k + n++)] = j;
      }
    return out;
  };
  std::vector<std::int64_t> approx, exact;
  std::vector<float> approx_score, exact_score;
  g.index.search(Q, fetch, search.params(), search.threads(), approx, approx_score);
  exact_search(g.index.metric(), Q, G, fetch, search.threads(), exact, exact_score);
  r.queries = Q.rows;
  r.recall = recall_at_k(top_k(approx), top_k(exact), Q.rows, r.k);
  r.measured = true;
  return r;
}

void publish_recall(const std::string& node, const std::string& name, const IndexedGallery& g, const RecallReport& r,
                    const IndexSearch& search, bool rescored, const SearchTiming& timing) {
  log_info(name, g.index.describe(search.params()), ": faiss search ", timing.cpu_s, " s CPU (", timing.wall_s, " s wall); lists ",
           rescored ? "rescored in double precision" : "in the index's order");
  if (!r.measured) {
    log_warning(name, "recall against exact search not measured: ", r.why_not);
    return;
  }
  log_info(name, g.index.describe(search.params()), ": recall@", r.k, " against exact search ", percent(r.recall), "% on ", r.queries,
           " queries");
  ResultTable t;
  t.title = "index recall";
  t.columns = {{"recall_at_k", cat("recall@", r.k), "%", 100.0, true}, {"queries", "queries", "", 1.0, true}};
  t.rows.push_back({cat(name, " (", g.index.describe(search.params()), ")"), {{"recall_at_k", r.recall}, {"queries", double(r.queries)}}, {}});
  publish_results(node, t);
}

void write_recall_json(JsonWriter& j, const IndexedGallery& g, const RecallReport& r, const IndexSearch& search,
                       bool rescored, const SearchTiming& timing) {
  j.key("index").begin_object();
  j.field("kind", ann_kind_name(g.index.kind())).field("metric", ann_metric_name(g.index.metric()));
  j.field("description", g.index.describe(search.params())).field("rows", g.index.rows());
  j.field("nprobe", search.params().nprobe).field("ef_search", search.params().ef_search).field("rescored", rescored);
  j.field("search_cpu_s", timing.cpu_s).field("search_wall_s", timing.wall_s);
  j.field("recall_k", r.k).field("recall_queries", r.queries);
  if (r.measured) j.field("recall", r.recall);
  else j.field("recall_not_measured", r.why_not);
  j.end_object();
}

}  // namespace embedflow::eval
