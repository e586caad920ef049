// What evaluation does with an index's top lists: order each query's candidates for ranking and
// turn them into retrieval outcomes with the exact path's rules.
//
// Ordering: where the gallery rows are at hand (an index that holds them, or the gallery stream),
// each candidate is rescored with the exact path's double-precision score (BlockScorer::exact)
// and the list sorted by (score, gallery index), so a flat index ranks exactly as eval.retrieval
// does; otherwise by the index's own scores (ivf_pq's code distances, inner products), ties by
// index.
//
// Outcomes: the exclusion rules of evaluate_retrieval (junk labels, same identity and camera,
// the query itself) apply to the list; ranks count valid items only. A query's positives are
// counted over the whole gallery, so positives the list does not reach make AP, R-precision
// and MAP@R what they are at that depth (outcome_from_ranks with `positives`).
#pragma once

#include <cstdint>
#include <vector>

#include "distance.hpp"
#include "retrieval.hpp"

namespace embedflow::evalcore {

struct Candidates {
  std::int64_t queries = 0, depth = 0;
  std::vector<std::int64_t> index;  // queries x depth gallery rows, -1 where the search found fewer
  std::vector<double> score;        // the same shape; smaller = nearer
};

// Sorts each query's row by (score, index), -1 entries last; with `exact`, scores are first
// replaced by exact->exact(query, row).
void order_candidates(Candidates& c, const BlockScorer* exact, int threads);

struct CandidateOutcomes {
  std::vector<QueryOutcome> queries;
  // Evaluated queries with positives the list did not reach (their AP is the AP at that depth).
  std::int64_t truncated = 0;
};

// Outcomes of ordered candidates; `gallery_rows` is the indexed gallery's size. Labels and
// options as for evaluate_retrieval (single-shot CMC is not offered here).
CandidateOutcomes outcomes_from_candidates(const Candidates& c, const RetrievalLabels& labels, std::int64_t gallery_rows,
                                           const RetrievalOptions& options);

// The first `keep` valid entries of each query's ordered list (the query itself left out when
// `exclude_self`), -1 padded: the neighbours a kNN vote or a recall count reads.
Candidates first_valid(const Candidates& c, std::int64_t keep, bool exclude_self);

}  // namespace embedflow::evalcore
