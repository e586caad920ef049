// Glue shared by eval.index_build, eval.index_retrieval and eval.index_knn: the index as a record
// and as files, the parameters and port of the nodes that search it, and recall against exact
// search.
//
// The index record: `index` u8[N] (faiss's write_index bytes), `metric` and `kind` str[], and the
// indexed gallery's `label` i64[G] with optional `id` str[G] and `camera` i64[G], row i of the
// index being gallery row i.
//
// The files: `<path>` is faiss's own index file (faiss.read_index opens it) and `<path>.h5` an
// embedflow stream file (io.hdf5_reader and h5py read it) whose port `gallery` holds one batch of
// label / id / camera, with root attributes embedflow_index (format), kind, metric, dim, rows,
// faiss_bytes and faiss_crc32 (the index file's size and CRC-32). Loading checks both before faiss
// parses a byte, so a truncated or damaged index file is an error naming it, never a crash.
#pragma once

#include <embedflow/embedflow.hpp>
#include <embedflow/features.hpp>

#include <filesystem>
#include <string>
#include <vector>

#include "ann_index.hpp"
#include "index_candidates.hpp"
#include "report.hpp"

namespace embedflow::eval {

inline const char* kIndexSchema = "index: u8[N], metric: str[], kind: str[], label: i64[G]";
inline constexpr const char* kIndexFormat = "embedflow-index/1";

struct IndexedGallery {
  evalcore::AnnIndex index;
  std::vector<std::int64_t> label, camera;  // camera empty unless the gallery carried it
  std::vector<std::string> id;              // empty unless the gallery carried it
  std::string source;                       // "index file 'out/g.faiss'" or "the index record"
};

// The record eval.index_build emits; `bytes` are index.to_bytes(), shared, not copied.
Record index_record(const evalcore::AnnIndex& index, std::vector<std::uint8_t> bytes, const FeatureSet& gallery);
IndexedGallery gallery_from_record(const Record& record);

// Writes `path` and `<path>.h5` (each atomically).
void save_index_files(const std::filesystem::path& path, const std::vector<std::uint8_t>& bytes,
                      const evalcore::AnnIndex& index, const FeatureSet& gallery);
// DataError naming the file when either is missing, damaged, truncated or disagrees with the
// other (kind, metric, dimension, rows).
IndexedGallery load_index_files(const std::filesystem::path& path);

// The nodes that search an index take it on the `index` input (an eval.index_build's record) or
// from `path`; these declare `path`, `metric`, `nprobe`, `ef_search`, `rescore` and
// `recall_queries`.
void add_index_search_params(NodeTypeBuilder& b);
// Check hook part: exactly one of `path` and the `index` port.
void check_index_source(SchemaContext& c);

// The gallery rows exact scores and recall read: a view of rows kept elsewhere (the index's own
// array, the gallery stream) or of `owned` (an ivf index's rows gathered from its lists).
struct GalleryRows {
  std::vector<float> owned;
  MatrixView view;  // data null: no rows
  bool empty() const { return view.data == nullptr; }
};

// rescore: which candidate lists are re-ranked by eval.retrieval's double-precision scores.
//   auto    the lossy codes of ivf_pq, when the gallery port brings the rows; flat, ivf and hnsw
//           hold the rows themselves, so faiss's float distances are already exact up to float
//           rounding and their lists keep faiss's order (ties by gallery row)
//   always  every list (an ivf_pq index needs the gallery port; an inner product has no distance
//           to rescore by: both are errors)
//   never   no list: faiss's order and scores
enum class Rescore { automatic, always, never };

// What a searching node keeps from its parameters and the `index` port.
class IndexSearch {
 public:
  void open(const NodeContext& ctx);
  void take_record(const RecordPtr& record);
  // The gallery from the record or the file, checked against the `metric` parameter and the
  // queries' dimension (`queries` names them in messages).
  IndexedGallery load(std::int64_t query_dim, const std::string& queries) const;
  // Whether the candidates are rescored (see Rescore); `stream` is the gallery port's rows
  // (none when it was not connected). ConfigError naming the parameter where `always` cannot be.
  bool rescores(const IndexedGallery& g, const FeatureSet& stream) const;
  // The gallery rows for exact scores and recall, when `needed`: `stream`'s when it was connected
  // (checked against the index's rows and dimension), else the index's own (in place for flat and
  // hnsw; none for ivf_pq). Empty when not needed.
  GalleryRows exact_rows(const IndexedGallery& g, const FeatureSet& stream, bool needed) const;

  const evalcore::AnnSearchParams& params() const { return params_; }
  std::int64_t recall_queries() const { return recall_queries_; }
  int threads() const { return threads_; }

 private:
  std::string path_, metric_, node_;
  RecordPtr record_;
  evalcore::AnnSearchParams params_;
  std::int64_t recall_queries_ = 1000;
  Rescore rescore_ = Rescore::automatic;
  int threads_ = 1;
};

// Candidates past the list's end that are fetched and rescored too, so that an end the index's
// float scores blur is settled in double.
inline constexpr std::int64_t kRescoreMargin = 16;

// eval.retrieval's distance that ranks as the index's metric (inner product: none; its
// placeholder sqeuclidean leaves scores as they are).
evalcore::DistanceSpec exact_spec(evalcore::AnnMetric metric);

// What faiss's search of the lists alone cost: the figure faiss's and ann-benchmarks' tables
// report (process CPU and wall seconds; the node searches in close(), when its inputs are idle).
struct SearchTiming {
  double cpu_s = 0, wall_s = 0;
};

// Each query's top `fetch` from the index, ordered for ranking: with `rescore`, by exact_spec's
// double-precision scores over `rows`; else by the index's scores; ties by gallery row.
// `timing` (optional) receives the search's cost.
evalcore::Candidates ordered_candidates(const IndexedGallery& g, const GalleryRows& rows, MatrixView queries,
                                        std::int64_t fetch, const IndexSearch& search, bool rescore,
                                        SearchTiming* timing = nullptr);

// Recall of the index's top-k against exact search on a sample of the queries.
struct RecallReport {
  bool measured = false;
  std::int64_t k = 0, queries = 0;
  double recall = 0;
  std::string why_not;  // when not measured
};

// Searches the sample rows of `queries` in the index and by brute force over `rows` (the gallery
// as IndexSearch::exact_rows gives it; empty: not measured) and compares their top-k. With
// `exclude_self` query i is gallery row i and is left out of both lists.
RecallReport measure_recall(const IndexedGallery& g, const GalleryRows& rows, MatrixView queries, std::int64_t k,
                            bool exclude_self, const IndexSearch& search);

// Logs the search's cost and whether its lists were rescored, and the recall (a warning saying
// why when it was not measured), and adds the recall to the run's
// "index recall" table; write_recall_json adds the index and its recall to a node's JSON.
void publish_recall(const std::string& node, const std::string& name, const IndexedGallery& g, const RecallReport& r,
                    const IndexSearch& search, bool rescored, const SearchTiming& timing);
// (with `rescored`: whether the lists were rescored, and the search's cost)
void write_recall_json(JsonWriter& j, const IndexedGallery& g, const RecallReport& r, const IndexSearch& search,
                       bool rescored, const SearchTiming& timing);

}  // namespace embedflow::eval
