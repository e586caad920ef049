// The metrics of one retrieval evaluation: each query's outcome from the ranks of its positives,
// and their means, per-label (macro) means and percentile bootstrap intervals over queries.
#include <algorithm>
#include <cmath>
#include <limits>
#include <random>

#include "embedflow/error.hpp"
#include "embedflow/rng.hpp"
#include "retrieval.hpp"

namespace embedflow::evalcore {

QueryOutcome outcome_from_ranks(const std::vector<std::int64_t>& ranks) {
  return outcome_from_ranks(ranks, static_cast<std::int64_t>(ranks.size()));
}

QueryOutcome outcome_from_ranks(const std::vector<std::int64_t>& ranks, std::int64_t positives) {
  QueryOutcome o;
  const auto n = positives;
  o.positives = n;
  if (n == 0) {
    o.status = QueryOutcome::Status::no_match;
    return o;
  }
  // Positives past the ranked list never met: no first match, and nothing added to any sum.
  o.first_rank = ranks.empty() ? std::numeric_limits<std::int64_t>::max() : ranks[0];
  o.reciprocal_rank = ranks.empty() ? 0.0 : 1.0 / static_cast<double>(ranks[0]);
  for (std::int64_t i = 0; i < static_cast<std::int64_t>(ranks.size()); ++i) {
    const double r = static_cast<double>(ranks[static_cast<std::size_t>(i)]);
    const double precision = static_cast<double>(i + 1) / r;
    const double precision_before = r == 1 ? 1.0 : static_cast<double>(i) / (r - 1);
    o.ap += precision;
    o.ap_trapezoid += (precision_before + precision) / 2;
    if (ranks[static_cast<std::size_t>(i)] <= n) {
      o.r_precision += 1;
      o.map_at_r += precision;
    }
  }
  o.ap /= static_cast<double>(n);
  o.ap_trapezoid /= static_cast<double>(n);
  o.r_precision /= static_cast<double>(n);
  o.map_at_r /= static_cast<double>(n);
  return o;
}

RetrievalSummary summarize(const std::vector<QueryOutcome>& queries, const RetrievalOptions& opt) {
  RetrievalSummary s;
  s.queries = static_cast<std::int64_t>(queries.size());
  std::vector<const QueryOutcome*> ok;
  for (const auto& q : queries) {
    if (q.status == QueryOutcome::Status::junk_query) s.junk_queries++;
    else if (q.status == QueryOutcome::Status::no_match) s.no_match++;
    else ok.push_back(&q);
  }
  s.evaluated = static_cast<std::int64_t>(ok.size());
  s.cmc.assign(static_cast<std::size_t>(opt.max_rank), 0.0);
  const bool shots = !ok.empty() && !ok.front()->single_shot_ranks.empty();
  if (shots) s.single_shot_cmc.assign(static_cast<std::size_t>(opt.max_rank), 0.0);
  if (ok.empty()) return s;
  const double n = static_cast<double>(ok.size());
  for (const auto* q : ok) {
    for (std::int64_t k = q->first_rank; k <= opt.max_rank; ++k) s.cmc[static_cast<std::size_t>(k - 1)] += 1;
    for (auto r : q->single_shot_ranks)
      for (std::int64_t k = r; k <= opt.max_rank; ++k)
        s.single_shot_cmc[static_cast<std::size_t>(k - 1)] += 1.0 / static_cast<double>(q->single_shot_ranks.size());
    s.map += q->ap;
    s.map_trapezoid += q->ap_trapezoid;
    s.p_at_1 += q->first_rank == 1;
    s.r_precision += q->r_precision;
    s.map_at_r += q->map_at_r;
    s.mrr += q->reciprocal_rank;
  }
  for (auto& v : s.cmc) v /= n;
  for (auto& v : s.single_shot_cmc) v /= n;
  s.map /= n;
  s.map_trapezoid /= n;
  s.p_at_1 /= n;
  s.r_precision /= n;
  s.map_at_r /= n;
  s.mrr /= n;

  // Per label, then their mean (macro): a label's weight no longer grows with its query count.
  for (const auto* q : ok) {
    auto& m = s.per_label[q->label];
    m["queries"] += 1;
    for (int k : opt.ranks) m[cat("rank-", k)] += q->first_rank <= k ? 1.0 : 0.0;
    m["mAP"] += q->ap;
    m["mAP_trapezoid"] += q->ap_trapezoid;
    m["P@1"] += q->first_rank == 1 ? 1.0 : 0.0;
    m["R-precision"] += q->r_precision;
    m["MAP@R"] += q->map_at_r;
    m["MRR"] += q->reciprocal_rank;
  }
  for (auto& [label, m] : s.per_label) {
    const double count = m["queries"];
    for (auto& [name, v] : m)
      if (name != "queries") v /= count;
    for (const auto& [name, v] : m)
      if (name != "queries") s.macro[name] += v / static_cast<double>(s.per_label.size());
  }

  if (opt.bootstrap > 0) {
    // Percentile bootstrap over queries: resample the evaluated queries with replacement.
    std::vector<std::string> names;
    std::vector<std::vector<double>> values;  // metric x query
    for (int k : opt.ranks) {
      names.push_back(cat("rank-", k));
      std::vector<double> v;
      for (const auto* q : ok) v.push_back(q->first_rank <= k ? 1.0 : 0.0);
      values.push_back(std::move(v));
    }
    auto add = [&](const char* name, double QueryOutcome::*field) {
      names.push_back(name);
      std::vector<double> v;
      for (const auto* q : ok) v.push_back(q->*field);
      values.push_back(std::move(v));
    };
    add("mAP", &QueryOutcome::ap);
    add("mAP_trapezoid", &QueryOutcome::ap_trapezoid);
    add("MRR", &QueryOutcome::reciprocal_rank);
    add("R-precision", &QueryOutcome::r_precision);
    add("MAP@R", &QueryOutcome::map_at_r);
    std::vector<std::vector<double>> means(names.size(), std::vector<double>(static_cast<std::size_t>(opt.bootstrap)));
    Rng rng(derive_seed(opt.seed, "bootstrap"));
    std::uniform_int_distribution<std::size_t> pick(0, ok.size() - 1);
    std::vector<std::size_t> draw(ok.size());
    for (int b = 0; b < opt.bootstrap; ++b) {
      for (auto& d : draw) d = pick(rng);
      for (std::size_t m = 0; m < names.size(); ++m) {
        double sum = 0;
        for (auto d : draw) sum += values[m][d];
        means[m][static_cast<std::size_t>(b)] = sum / n;
      }
    }
    const double alpha = (1 - opt.ci_level) / 2;
    for (std::size_t m = 0; m < names.size(); ++m) {
      auto& v = means[m];
      std::sort(v.begin(), v.end());
      auto at = [&](double p) {
        const double pos = p * static_cast<double>(v.size() - 1);
        const auto lo = static_cast<std::size_t>(std::floor(pos));
        const auto hi = std::min(v.size() - 1, lo + 1);
        return v[lo] + (pos - static_cast<double>(lo)) * (v[hi] - v[lo]);
      };
      s.ci[names[m]] = {at(alpha), at(1 - alpha)};
    }
  }
  return s;
}

}  // namespace embedflow::evalcore
