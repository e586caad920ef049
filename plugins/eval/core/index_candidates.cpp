#include "index_candidates.hpp"

#include <algorithm>
#include <map>
#include <unordered_map>

#include "arena_loop.hpp"

namespace embedflow::evalcore {

void order_candidates(Candidates& c, const BlockScorer* exact, int threads) {
  const auto depth = static_cast<std::size_t>(c.depth);
  arena_for(c.queries, threads, [&](std::int64_t b, std::int64_t e) {
    std::vector<std::pair<double, std::int64_t>> row;
    for (std::int64_t q = b; q < e; ++q) {
      row.clear();
      const std::size_t at = static_cast<std::size_t>(q) * depth;
      for (std::size_t i = 0; i < depth; ++i) {
        const std::int64_t j = c.index[at + i];
        if (j >= 0) row.emplace_back(exact ? exact->exact(q, j) : c.score[at + i], j);
      }
      std::sort(row.begin(), row.end());
      for (std::size_t i = 0; i < depth; ++i) {
        c.index[at + i] = i < row.size() ? row[i].second : -1;
        c.score[at + i] = i < row.size() ? row[i].first : 0.0;
      }
    }
  });
}

CandidateOutcomes outcomes_from_candidates(const Candidates& c, const RetrievalLabels& labels, std::int64_t gallery_rows,
                                           const RetrievalOptions& opt) {
  const bool cameras = opt.exclude_same_camera && labels.query_camera && labels.gallery_camera;
  auto junk = [&](std::int64_t label) { return opt.drop_junk && label == opt.junk_label; };
  // Valid positives per query come from these counts: every gallery row of the label, less the
  // rows of the query's camera (re-id rule) and the query itself.
  std::unordered_map<std::int64_t, std::int64_t> per_label;
  std::map<std::pair<std::int64_t, std::int64_t>, std::int64_t> per_label_camera;
  for (std::int64_t j = 0; j < gallery_rows; ++j) {
    if (junk(labels.gallery_label[j])) continue;
    per_label[labels.gallery_label[j]]++;
    if (cameras) per_label_camera[{labels.gallery_label[j], labels.gallery_camera[j]}]++;
  }
  CandidateOutcomes out;
  out.queries.resize(static_cast<std::size_t>(c.queries));
  std::vector<std::int64_t> ranks;
  for (std::int64_t q = 0; q < c.queries; ++q) {
    QueryOutcome& o = out.queries[static_cast<std::size_t>(q)];
    const std::int64_t label = labels.query_label[q];
    if (junk(label)) {
      o.status = QueryOutcome::Status::junk_query;
      o.label = label;
      continue;
    }
    const std::int64_t camera = cameras ? labels.query_camera[q] : 0;
    std::int64_t positives = per_label.count(label) ? per_label.at(label) : 0;
    if (cameras) positives -= per_label_camera.count({label, camera}) ? per_label_camera.at({label, camera}) : 0;
    else if (opt.exclude_self && q < gallery_rows && labels.gallery_label[q] == label) positives -= 1;
    ranks.clear();
    std::int64_t rank = 0;
    for (std::int64_t i = 0; i < c.depth; ++i) {
      const std::int64_t j = c.index[static_cast<std::size_t>(q * c.depth + i)];
      if (j < 0) break;
      const std::int64_t gl = labels.gallery_label[j];
      if (junk(gl) || (opt.exclude_self && j == q)) continue;
      if (cameras && gl == label && labels.gallery_camera[j] == camera) continue;
      ++rank;
      if (gl == label) ranks.push_back(rank);
    }
    o = outcome_from_ranks(ranks, positives);
    o.label = label;
    if (o.status == QueryOutcome::Status::ok && static_cast<std::int64_t>(ranks.size()) < positives) out.truncated++;
  }
  return out;
}

Candidates first_valid(const Candidates& c, std::int64_t keep, bool exclude_self) {
  Candidates out;
  out.queries = c.queries;
  out.depth = keep;
  out.index.assign(static_cast<std::size_t>(c.queries * keep), -1);
  out.score.assign(out.index.size(), 0.0);
  for (std::int64_t q = 0; q < c.queries; ++q) {
    std::int64_t n = 0;
    for (std::int64_t i = 0; i < c.depth && n < keep; ++i) {
      const auto at = static_cast<std::size_t>(q * c.depth + i);
      if (c.index[at] < 0 || (exclude_self && c.index[at] == q)) continue;
      out.index[static_cast<std::size_t>(q * keep + n)] = c.index[at];
      out.score[static_cast<std::size_t>(q * keep + n)] = c.score[at];
      ++n;
    }
  }
  return out;
}

}  // namespace embedflow::evalcore
