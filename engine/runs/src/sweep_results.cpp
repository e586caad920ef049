// A sweep's results: every results table of its points aggregated across seeds (mean, sd,
// t-interval, paired t-tests between rows; embedflow_runs/stats.hpp), and table.md.
#include <cmath>
#include <map>
#include <set>

#include "embedflow/error.hpp"
#include "embedflow/log.hpp"
#include "embedflow_runs/run_record.hpp"
#include "embedflow_runs/stats.hpp"
#include "embedflow_runs/sweep.hpp"

namespace embedflow::runs {

namespace fs = std::filesystem;
using json = nlohmann::ordered_json;
using namespace engine;

namespace {

json number_or_null(double v) { return std::isfinite(v) ? json(v) : json(nullptr); }

struct RowAgg {
  std::string variant, label;
  std::map<std::string, std::vector<double>> values;  // metric -> by seed index
};

struct TableAgg {
  std::string node, title;
  bool headline = false;
  json columns = json::array();
  std::vector<RowAgg> rows;
};

json test_json(const std::string& metric, const RowAgg& a, const RowAgg& b) {
  const PairedTest t = paired_t_test(a.values.at(metric), b.values.at(metric));
  return {{"metric", metric}, {"test", "paired t-test"},
          {"a", {{"variant", a.variant}, {"label", a.label}}}, {"b", {{"variant", b.variant}, {"label", b.label}}},
          {"n", t.n}, {"mean_difference", number_or_null(t.mean_difference)},
          {"ci", json::array({number_or_null(t.ci_low), number_or_null(t.ci_high)})},
          {"t", std::isnan(t.t) ? json(nullptr) : std::isinf(t.t) ? json(t.t > 0 ? "inf" : "-inf") : json(t.t)},
          {"p", number_or_null(t.p)}};
}

}  // namespace

json aggregate_results(const fs::path& sweep_dir, const json& points, const json& variants,
                       const std::vector<std::uint64_t>& seeds) {
  (void)variants;
  std::vector<TableAgg> tables;
  for (const auto& p : points) {
    if (p.value("status", "") != "ok") continue;
    const auto seed_at = std::find(seeds.begin(), seeds.end(), p.value("seed", std::uint64_t{0}));
    if (seed_at == seeds.end()) continue;
    const std::size_t s = static_cast<std::size_t>(seed_at - seeds.begin());
    json rec;
    try {
      rec = read_run_record((sweep_dir / p.value("dir", "") / kRunRecordFile).string());
    } catch (const std::exception& e) {
      log_warning("sweep", "point ", p.value("name", ""), ": ", e.what());
      continue;
    }
    for (const auto& t : rec.value("results", json::array())) {
      const std::string node = t.value("node", ""), title = t.value("title", "");
      auto tit = std::find_if(tables.begin(), tables.end(), [&](const TableAgg& x) { return x.node == node && x.title == title; });
      if (tit == tables.end()) {
        tables.push_back({node, title, t.value("headline", false), t.value("columns", json::array()), {}});
        tit = tables.end() - 1;
      }
      for (const auto& row : t.value("rows", json::array())) {
        const std::string variant = p.value("variant", ""), label = row.value("label", "");
        auto rit = std::find_if(tit->rows.begin(), tit->rows.end(), [&](const RowAgg& x) { return x.variant == variant && x.label == label; });
        if (rit == tit->rows.end()) {
          tit->rows.push_back({variant, label, {}});
          rit = tit->rows.end() - 1;
        }
        const json values = row.value("values", json::object());  // items() refers to it: keep it alive
        for (const auto& [k, v] : values.items()) {
          auto& vals = rit->values[k];
          vals.resize(seeds.size(), std::nan(""));
          vals[s] = v.is_number() ? v.get<double>() : std::nan("");
        }
      }
    }
  }
  json out = json::array();
  for (auto& t : tables) {
    json rows = json::array(), tests = json::array(), best = json::object();
    for (const auto& c : t.columns) {
      const std::string key = c.value("key", "");
      const bool higher = c.value("higher_is_better", true);
      const RowAgg* top = nullptr;
      double top_mean = 0;
      for (auto& r : t.rows) {
        r.values[key].resize(seeds.size(), std::nan(""));
        const Summary sm = summarize(r.values[key]);
        if (sm.n > 0 && (!top || (higher ? sm.mean > top_mean : sm.mean < top_mean))) {
          top = &r;
          top_mean = sm.mean;
        }
      }
      if (top) best[key] = {{"variant", top->variant}, {"label", top->label}};
      // Every pair while the table is small; beyond that, each row against the best and the
      // pairs within one variant (the rows one run compares), which is what a reader asks.
      const bool all_pairs = t.rows.size() <= 30;
      for (std::size_t i = 0; i < t.rows.size(); ++i)
        for (std::size_t j = i + 1; j < t.rows.size(); ++j) {
          const RowAgg &a = t.rows[i], &b = t.rows[j];
          if (!all_pairs && a.variant != b.variant && &a != top && &b != top) continue;
          if (seeds.size() < 2) continue;
          tests.push_back(test_json(key, a, b));
        }
    }
    for (const auto& r : t.rows) {
      json metrics = json::object();
      for (const auto& c : t.columns) {
        const std::string key = c.value("key", "");
        const auto& vals = r.values.at(key);
        const Summary sm = summarize(vals);
        json values = json::array();
        for (double v : vals) values.push_back(number_or_null(v));
        metrics[key] = {{"n", sm.n}, {"mean", number_or_null(sm.mean)}, {"sd", number_or_null(sm.sd)},
                        {"ci", sm.n >= 2 ? json::array({number_or_null(sm.ci_low), number_or_null(sm.ci_high)}) : json(nullptr)},
                        {"values", values}, {"seeds", seeds}};
      }
      rows.push_back({{"variant", r.variant}, {"label", r.label}, {"metrics", metrics}});
    }
    json table{{"node", t.node}, {"title", t.title}, {"columns", t.columns}, {"rows", rows}, {"tests", tests}, {"best", best}};
    if (t.headline) table["headline"] = true;
    out.push_back(std::move(table));
  }
  // The headline tables first, as the reports show them.
  std::stable_partition(out.begin(), out.end(), [](const json& t) { return t.value("headline", false); });
  return out;
}

namespace {

std::string fixed(double v, int digits) {
  char buf[64];
  std::snprintf(buf, sizeof buf, "%.*f", digits, v);
  return buf;
}

// A number as the column shows it: percent columns with one decimal, the others with four
// significant digits (734 pairs, a distance ratio of 0.0694).
std::string shown(double v, const json& column) {
  if (column.value("unit", "") == "%") return fixed(v, 1);
  char buf[64];
  std::snprintf(buf, sizeof buf, "%.4g", v);
  return buf;
}

// "57.6 [55.1, 60.1]" in the column's unit; "n/a" when not measured.
std::string cell(const json& m, const json& column) {
  if (!m.is_object() || !m["mean"].is_number()) return "n/a";
  const double scale = column.value("scale", 1.0);
  std::string text = shown(m["mean"].get<double>() * scale, column);
  if (m["ci"].is_array() && m["ci"][0].is_number())
    text += " [" + shown(m["ci"][0].get<double>() * scale, column) + ", " + shown(m["ci"][1].get<double>() * scale, column) + "]";
  return text;
}

std::string md_escape(std::string s) {
  std::string out;
  for (char c : s) {
    if (c == '|') out += "\\|";
    else if (c == '\n') out += ' ';
    else out += c;
  }
  return out;
}

}  // namespace

std::string results_markdown(const json& sweep, const std::vector<std::string>& baselines) {
  const std::size_t seeds = sweep.value("seeds", json::array()).size();
  const bool one_variant = sweep.value("variants", json::array()).size() <= 1;
  std::string md;
  for (const auto& t : sweep.value("results", json::array())) {
    md += "### " + md_escape(t.value("title", "")) + " (" + md_escape(t.value("node", "")) + ")\n\n";
    md += cat("Mean over ", seeds, seeds == 1 ? " seed" : " seeds", seeds > 1 ? " [95% t-interval]" : "", ".\n\n");
    std::string head = one_variant ? "| method |" : "| variant | method |", rule = one_variant ? "|---|" : "|---|---|";
    for (const auto& c : t["columns"]) {
      const std::string unit = c.value("unit", "");
      head += " " + md_escape(c.value("header", "")) + (unit.empty() ? "" : " " + unit) + " |";
      rule += "---:|";
    }
    md += head + "\n" + rule + "\n";
    for (const auto& row : t["rows"]) {
      md += one_variant ? "| " + md_escape(row.value("label", "")) + " |"
                        : "| " + md_escape(row.value("variant", "")) + " | " + md_escape(row.value("label", "")) + " |";
      for (const auto& c : t["columns"]) {
        const std::string key = c.value("key", "");
        md += " " + cell(row["metrics"].value(key, json()), c) + " |";
      }
      md += "\n";
    }
    md += "\n";
    // Each row against each baseline label of the same variant: the paired test across seeds.
    for (const auto& base : baselines) {
      bool any = false;
      std::string block = "Paired t-tests across seeds against " + md_escape(base) +
                          " (difference of means, two-sided p):\n\n" + head + "\n" + rule + "\n";
      for (const auto& row : t["rows"]) {
        if (row.value("label", "") == base) continue;
        std::string line = one_variant ? "| " + md_escape(row.value("label", "")) + " |"
                                       : "| " + md_escape(row.value("variant", "")) + " | " + md_escape(row.value("label", "")) + " |";
        bool row_any = false;
        for (const auto& c : t["columns"]) {
          const std::string key = c.value("key", "");
          const json* found = nullptr;
          bool flip = false;
          for (const auto& test : t["tests"]) {
            if (test.value("metric", "") != key) continue;
            const json &a = test["a"], &b = test["b"];
            const bool same_variant = a.value("variant", "") == row.value("variant", "") && b.value("variant", "") == row.value("variant", "");
            if (!same_variant) continue;
            if (a.value("label", "") == row.value("label", "") && b.value("label", "") == base) found = &test;
            if (b.value("label", "") == row.value("label", "") && a.value("label", "") == base) found = &test, flip = true;
          }
          if (!found || !(*found)["p"].is_number()) {
            line += " |";
            continue;
          }
          const double d = (*found)["mean_difference"].get<double>() * (flip ? -1 : 1) * c.value("scale", 1.0);
          // The same difference at every seed (two rows that do not depend on the seed, such as
          // a fixed baseline against another): a t-test has no spread to weigh it against.
          const json& ci = (*found)["ci"];
          const bool no_spread = ci.is_array() && ci.size() == 2 && ci[0] == ci[1];
          line += " " + std::string(d >= 0 ? "+" : "") + shown(d, c) +
                  (no_spread ? std::string(" (every seed)") : " (p " + fixed((*found)["p"].get<double>(), 3) + ")") + " |";
          row_any = true;
        }
        if (row_any) {
          block += line + "\n";
          any = true;
        }
      }
      if (any) md += block + "\n";
    }
  }
  return md;
}

}  // namespace embedflow::runs
