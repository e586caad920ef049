// Exact retrieval evaluation: rank every valid gallery item for every query, block by block, and
// score the ranking with CMC, mAP (non-interpolated and Market-1501 trapezoid), P@1,
// R-precision, MAP@R and MRR, with bootstrap confidence intervals over queries.
//
// Memory stays bounded whatever the gallery size: one query_block x gallery_block score buffer,
// plus per query its valid positives, a top-k heap and the negatives that score within float
// tolerance of a positive. The trick that keeps it exact in one SGEMM pass: positives are known
// from the labels before the scan, so their scores are computed first (BlockScorer::exact, in double);
// each negative met in the scan is then only counted into the bucket between two positive
// scores, and the few whose score is too close to a positive to order safely are kept and
// compared exactly at the end (ties by gallery index, like a stable argsort).
//
// Exclusion rules, applied per (query, gallery item):
//   junk: gallery label == junk_label (-1) is never ranked; a junk query is skipped and counted.
//   same identity AND same camera (person re-identification protocol), when cameras are given.
//   the query itself (self-retrieval: query i == gallery i).
// A query left with no valid positive is counted in `no_match` and excluded from the means,
// as torchreid does, but never silently: the summary reports it.
#pragma once

#include <cstdint>
#include <map>
#include <string>
#include <vector>

#include "distance.hpp"

namespace embedflow::evalcore {

struct RetrievalLabels {
  const std::int64_t* query_label = nullptr;
  const std::int64_t* gallery_label = nullptr;
  const std::int64_t* query_camera = nullptr;    // optional
  const std::int64_t* gallery_camera = nullptr;  // optional
  // Optional grouping (k-means baseline): items of another group rank after every item of the
  // query's group, in score order among themselves.
  const std::int64_t* query_group = nullptr;
  const std::int64_t* gallery_group = nullptr;
};

struct RetrievalOptions {
  bool exclude_same_camera = true;  // only used when both camera arrays are given
  bool exclude_self = false;        // query i is gallery i
  bool drop_junk = true;
  std::int64_t junk_label = -1;
  int max_rank = 50;                // length of the CMC curve
  std::vector<int> ranks{1, 5, 10, 20};  // rank-k values reported (and bootstrapped)
  int keep_top = 0;                 // top-k rank list per query (0: none)
  int single_shot_repeats = 0;      // CUHK03 single-gallery-shot CMC averaging (0: off)
  std::uint64_t seed = 0;           // single-shot sampling and bootstrap
  int bootstrap = 0;                // resamples over queries (0: no CIs)
  double ci_level = 0.95;
  // How ranks are made exact. rescore: float block scores, then the positives and the negatives
  // within the float tolerance of one rescored in double (cheap where positives are sparse, as in
  // re-id). dense: every score of a query in double from one DGEMM per block (cheap where
  // positives are dense, as in class retrieval, where most negatives fall near some positive);
  // squared L2, euclidean and cosine only. automatic: dense for those distances when the
  // positives are at least kDensePositives of the pairs, else rescore.
  enum class ExactPass { automatic, rescore, dense };
  ExactPass exact_pass = ExactPass::automatic;
  static constexpr double kDensePositives = 0.05;
  std::int64_t query_block = 1024;
  std::int64_t gallery_block = 4096;
  int threads = 1;
};

// Per-query outcome. ranks are 1-based positions among the query's valid gallery items.
struct QueryOutcome {
  enum class Status : std::uint8_t { ok, junk_query, no_match };
  Status status = Status::ok;
  std::int64_t label = 0;  // the query's label (macro averages group by it)
  std::int64_t positives = 0;
  std::int64_t first_rank = 0;
  double ap = 0, ap_trapezoid = 0, r_precision = 0, map_at_r = 0, reciprocal_rank = 0;
  std::vector<std::int64_t> single_shot_ranks;  // one first-match rank per repeat
};

// Metrics of one query from the sorted 1-based ranks of all its positives (pure; unit-tested by
// hand). AP = mean_i i/r_i; trapezoid AP as Market-1501's evaluation: sum_i (1/P) *
// (prec_before_i + i/r_i)/2 with prec_before_i = (i-1)/(r_i-1), or 1 when r_i = 1;
// R-precision = |{r_i <= P}| / P; MAP@R = (1/P) sum_{r_i <= P} i/r_i; RR = 1/r_1.
QueryOutcome outcome_from_ranks(const std::vector<std::int64_t>& sorted_ranks);
// The same when only the first ranks are known (a search that returns a top list): `positives`
// counts every valid positive, those not in `sorted_ranks` add nothing to AP, R-precision or
// MAP@R and, when none was found, the first match counts as beyond every rank (RR 0).
QueryOutcome outcome_from_ranks(const std::vector<std::int64_t>& sorted_ranks, std::int64_t positives);

struct Interval {
  double low = 0, high = 0;
};

struct RetrievalSummary {
  std::int64_t queries = 0, evaluated = 0, junk_queries = 0, no_match = 0;
  std::vector<double> cmc;              // cmc[k-1] = fraction with first match at rank <= k
  std::vector<double> single_shot_cmc;  // empty unless single_shot_repeats > 0
  double map = 0, map_trapezoid = 0, p_at_1 = 0, r_precision = 0, map_at_r = 0, mrr = 0;
  std::map<std::string, Interval> ci;   // metric name -> bootstrap interval
  // Macro averages: each metric's mean over query labels of its mean over the label's evaluated
  // queries (rank-k for options.ranks, mAP, mAP_trapezoid, P@1, R-precision, MAP@R, MRR), and
  // the same per label (label -> metric -> value, plus "queries").
  std::map<std::string, double> macro;
  std::map<std::int64_t, std::map<std::string, double>> per_label;
  std::int64_t tolerance_violations = 0;  // positives whose blocked score left the tolerance band
  std::int64_t exact_positives = 0, exact_negatives = 0;  // pairs scored in double (cost diagnostics)
  bool dense_exact = false;  // every pair was scored in double (RetrievalOptions::ExactPass::dense)
};

struct RetrievalResult {
  std::vector<QueryOutcome> queries;
  RetrievalSummary summary;
  // keep_top > 0: queries x keep_top gallery indices (-1 padded) and scores, best first.
  std::vector<std::int64_t> top_index;
  std::vector<float> top_score;
};

RetrievalResult evaluate_retrieval(const BlockScorer& scorer, const RetrievalLabels& labels,
                                   const RetrievalOptions& options);

// Means over evaluated queries, CMC, and bootstrap intervals for options.ranks (rank-k), map,
// map_trapezoid, mrr, r_precision, map_at_r.
RetrievalSummary summarize(const std::vector<QueryOutcome>& queries, const RetrievalOptions& options);

// Top-k nearest gallery items per query with the blocked scorer (no labels), optionally skipping
// gallery item i for query i. Results are best first, ties by index; -1 pads short rows.
void knn_search(const BlockScorer& scorer, int k, bool exclude_self, std::int64_t query_block,
                std::int64_t gallery_block, int threads, std::vector<std::int64_t>& index, std::vector<float>& score);

}  // namespace embedflow::evalcore
