#include "judgements.hpp"
#include <embedflow/file_kind.hpp>

#include <algorithm>
#include <fstream>
#include <sstream>

#include "embedflow/csv.hpp"
#include "embedflow/error.hpp"

namespace embedflow::evalcore {

namespace {

std::ifstream open_text(const std::string& path, const char* what) {
  refuse_special_input(path, cat(what, " file"));
  std::ifstream in(path);
  if (!in) throw DataError(cat("cannot open ", what, " file '", path, "'"));
  return in;
}

std::string trim(std::string s) {
  const auto b = s.find_first_not_of(" \t\r\n");
  if (b == std::string::npos) return "";
  const auto e = s.find_last_not_of(" \t\r\n");
  return s.substr(b, e - b + 1);
}

}  // namespace

double judgement_distance(const DistanceSpec& spec, const float* x, const float* y, std::int64_t dim) {
  const double v = score_to_value(spec, pair_score(spec, x, y, dim));
  return is_kernel(spec.kind) ? 1.0 - v : v;
}

std::vector<Triplet> read_wang_triplets(const std::string& path) {
  auto in = open_text(path, "triplet");
  std::vector<Triplet> out;
  std::vector<std::string> group;
  int line_no = 0, start = 0;
  std::string line;
  while (std::getline(in, line)) {
    ++line_no;
    line = trim(line);
    if (line.empty()) continue;
    if (group.empty()) start = line_no;
    group.push_back(line);
    if (group.size() == 4) {
      out.push_back({group[1], group[2], group[3], start});
      group.clear();
    }
  }
  if (!group.empty())
    throw DataError(cat(path, ":", start, ": incomplete triplet (", group.size(),
                        " of 4 lines: query text, query, positive, negative)"));
  if (out.empty()) throw DataError(cat(path, ": no triplets"));
  return out;
}

// The rows of a three-column id file (RFC 4180 through the SDK's reader; blank lines and rows
// starting with '#' skipped), as trimmed cells with their line numbers; `is_header` recognises an
// optional header on the file's first line.
template <typename IsHeader, typename OnRow>
void for_each_id_row(const std::string& path, const char* what, const char* columns, IsHeader is_header, OnRow on_row) {
  std::stringstream text;
  text << open_text(path, what).rdbuf();
  bool any = false;
  for_each_csv_row(text.str(), path, [&](std::vector<std::string>& cells, int line) {
    for (auto& c : cells) c = trim(c);
    if (cells[0].rfind('#', 0) == 0 || (cells.size() == 1 && cells[0].empty())) return;
    if (line == 1 && is_header(cells)) return;
    if (cells.size() != 3) throw DataError(cat(path, ":", line, ": expected 3 columns (", columns, "), got ", cells.size()));
    on_row(cells, line);
    any = true;
  });
  if (!any) throw DataError(cat(path, ": no ", what, "s"));
}

std::vector<Triplet> read_triplet_csv(const std::string& path) {
  std::vector<Triplet> out;
  for_each_id_row(
      path, "triplet", "query,positive,negative",
      [](const std::vector<std::string>& c) { return !c.empty() && c[0] == "query"; },
      [&](std::vector<std::string>& c, int line) { out.push_back({c[0], c[1], c[2], line}); });
  return out;
}

std::vector<Pair> read_pair_csv(const std::string& path) {
  std::vector<Pair> out;
  auto is_flag = [](const std::string& v) { return v == "0" || v == "1"; };
  for_each_id_row(
      path, "pair", "a,b,similar", [&](const std::vector<std::string>& c) { return c.size() == 3 && !is_flag(c[2]); },
      [&](std::vector<std::string>& c, int line) {
        if (!is_flag(c[2])) throw DataError(cat(path, ":", line, ": 'similar' must be 0 or 1, got '", c[2], "'"));
        out.push_back({c[0], c[1], c[2] == "1", line});
      });
  return out;
}

IdIndex index_ids(const std::vector<std::string>& ids) {
  IdIndex index;
  for (std::size_t i = 0; i < ids.size(); ++i)
    if (!index.emplace(ids[i], static_cast<std::int64_t>(i)).second) throw DataError(cat("id '", ids[i], "' arrives twice"));
  return index;
}

TripletScore score_triplets(const std::vector<Triplet>& triplets, const IdIndex& ids, MatrixView f,
                            const DistanceSpec& spec) {
  TripletScore s;
  for (const auto& t : triplets) {
    ++s.total;
    auto q = ids.find(t.query), p = ids.find(t.positive), n = ids.find(t.negative);
    if (q == ids.end() || p == ids.end() || n == ids.end()) {
      if (s.missing++ == 0)
        s.first_missing = q == ids.end() ? t.query : p == ids.end() ? t.positive : t.negative;
      continue;
    }
    ++s.evaluated;
    const double dp = judgement_distance(spec, f.row(q->second), f.row(p->second), f.cols);
    const double dn = judgement_distance(spec, f.row(q->second), f.row(n->second), f.cols);
    if (dp < dn) ++s.agree;
    else if (dp == dn) ++s.ties;
  }
  return s;
}

PairDistances pair_distances(const std::vector<Pair>& pairs, const IdIndex& ids, MatrixView f, const DistanceSpec& spec) {
  PairDistances out;
  for (const auto& p : pairs) {
    auto a = ids.find(p.a), b = ids.find(p.b);
    if (a == ids.end() || b == ids.end()) {
      if (out.missing++ == 0) out.first_missing = a == ids.end() ? p.a : p.b;
      continue;
    }
    out.distance.push_back(judgement_distance(spec, f.row(a->second), f.row(b->second), f.cols));
    out.similar.push_back(p.similar);
  }
  return out;
}

double calibrate_threshold(const PairDistances& p) {
  const std::size_t n = p.distance.size();
  if (n == 0) throw DataError("cannot calibrate a threshold without validation pairs");
  std::vector<std::size_t> order(n);
  for (std::size_t i = 0; i < n; ++i) order[i] = i;
  std::sort(order.begin(), order.end(), [&](auto a, auto b) { return p.distance[a] < p.distance[b]; });
  // Threshold below everything: all predicted dissimilar -> correct = #dissimilar.
  std::int64_t correct = 0;
  for (bool s : p.similar) correct += !s;
  std::int64_t best = correct;
  double best_t = p.distance[order[0]] - 1;
  for (std::size_t i = 0; i < n; ++i) {
    correct += p.similar[order[i]] ? 1 : -1;
    // Only cut between distinct distances: equal distances must get the same prediction.
    if (i + 1 < n && p.distance[order[i + 1]] == p.distance[order[i]]) continue;
    if (correct > best) {
      best = correct;
      best_t = i + 1 < n ? (p.distance[order[i]] + p.distance[order[i + 1]]) / 2 : p.distance[order[i]] + 1;
    }
  }
  return best_t;
}

PairScore score_pairs(const PairDistances& p, double threshold) {
  PairScore s;
  for (std::size_t i = 0; i < p.distance.size(); ++i) {
    const bool predicted = p.distance[i] <= threshold;
    ++s.n;
    if (predicted && p.similar[i]) ++s.tp;
    else if (!predicted && !p.similar[i]) ++s.tn;
    else if (predicted) ++s.fp;
    else ++s.fn;
  }
  return s;
}

}  // namespace embedflow::evalcore
