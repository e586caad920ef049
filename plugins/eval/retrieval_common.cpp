#include "retrieval_common.hpp"

#include "embedflow/results.hpp"

#include <cblas.h>

#include <map>
#include <sstream>

#include <embedflow/plot/line_chart.hpp>

namespace embedflow::eval {

using namespace evalcore;

void add_ranking_params(NodeTypeBuilder& b) {
  b.param(Param::integers("ranks").default_value(std::vector<std::int64_t>{1, 5, 10, 20}).min(1)
              .doc("rank-k accuracies to report (each <= max_rank)"))
      .param(Param::integer("max_rank").default_value(50).min(1).doc("length of the CMC curve"))
      .param(Param::boolean("exclude_same_camera").default_value(true)
                 .doc("drop gallery items with the query's identity AND camera (re-id protocol); needs 'camera' fields"))
      .param(Param::integer("junk_label").default_value(-1).doc("gallery items with this label are never ranked"))
      .param(Param::integer("bootstrap").default_value(1000).min(0).doc("bootstrap resamples over queries for CIs (0: none)"))
      .param(Param::number("ci_level").default_value(0.95).range(0.5, 0.999).doc("confidence level of the intervals"))
      .param(Param::integer("keep_top").default_value(0).min(0).doc("write each query's top-k rank list to <out>_ranklists.csv"))
      .param(Param::path("out").optional().doc("output prefix: <out>.json, <out>.md, <out>_cmc.png"))
      .param(Param::string("name").optional().doc("method name in tables and legends (default: the node id)"));
  add_fields_param(b);
}

void add_retrieval_params(NodeTypeBuilder& b) {
  b.param(Param::choice("distance", distance_names()).default_value("euclidean")
              .doc("ranking measure; kernels rank by decreasing similarity"))
      .param(Param::number("gamma").default_value(1.0).min(0).doc("kernel width: k = exp(-gamma * d)"))
      .param(Param::integer("single_shot_repeats").default_value(0).min(0)
                 .doc("CUHK03 single-gallery-shot CMC averaged over this many seeded draws (0: off)"))
      .param(Param::integer("query_block").default_value(1024).min(1).not_fingerprinted().doc("queries per distance block"))
      .param(Param::integer("gallery_block").default_value(4096).min(1).not_fingerprinted().doc("gallery items per distance block"));
  add_ranking_params(b);
}

void check_retrieval_params(SchemaContext& c) {
  const Params& p = c.params();
  check_fields(c, {{"query", kQuerySchema}, {"gallery", kGallerySchema}});
  const auto max_rank = p.integer("max_rank");
  for (auto k : p.integers("ranks"))
    if (k > max_rank) c.error(cat("rank ", k, " is beyond max_rank ", max_rank), "ranks");
}

RetrievalSettings RetrievalSettings::ranking(const NodeContext& ctx) {
  const Params& p = ctx.params();
  RetrievalSettings s;
  s.node = ctx.id();
  s.metrics_presented = ctx.output_connected(0);
  auto& o = s.options;
  o.ranks.clear();
  for (auto k : p.integers("ranks")) o.ranks.push_back(static_cast<int>(k));
  o.max_rank = static_cast<int>(p.integer("max_rank"));
  o.exclude_same_camera = p.boolean("exclude_same_camera");
  o.junk_label = p.integer("junk_label");
  o.bootstrap = static_cast<int>(p.integer("bootstrap"));
  o.ci_level = p.number("ci_level");
  o.keep_top = static_cast<int>(p.integer("keep_top"));
  o.seed = ctx.seed();
  o.threads = std::max(1, ctx.threads());
  s.out = p.has("out") ? p.string("out") : "";
  s.name = p.has("name") ? p.string("name") : ctx.id();
  s.fields = FieldNames::from(p);
  return s;
}

RetrievalSettings RetrievalSettings::from(const NodeContext& ctx) {
  const Params& p = ctx.params();
  RetrievalSettings s = ranking(ctx);
  s.spec.kind = parse_distance(p.string("distance"));
  s.spec.gamma = p.number("gamma");
  if (is_kernel(s.spec.kind) && !(s.spec.gamma > 0))
    throw ConfigError(cat("distance '", p.string("distance"), "' needs gamma > 0"));
  auto& o = s.options;
  o.single_shot_repeats = static_cast<int>(p.integer("single_shot_repeats"));
  o.query_block = p.integer("query_block");
  o.gallery_block = p.integer("gallery_block");
  s.self_retrieval = !ctx.input_connected(1);
  o.exclude_self = s.self_retrieval;
  // SGEMM is the bulk of the work; give it the graph's thread budget.
  openblas_set_num_threads(o.threads);
  return s;
}

std::string percent_with_ci(double v, const RetrievalSummary& s, const std::string& ci_name) {
  auto it = s.ci.find(ci_name);
  if (it == s.ci.end()) return percent(v);
  return cat(percent(v), " [", percent(it->second.low), ", ", percent(it->second.high), "]");
}

namespace {

// The Markdown per-label table stops here (a re-id set's thousands of identities would drown
// the report); the JSON's `per_label` keeps every label.
constexpr std::size_t kMaxMarkdownLabels = 50;

const char* const kMetricNames[] = {"mAP", "mAP_trapezoid", "P@1", "R-precision", "MAP@R", "MRR"};

std::string distance_text(const RetrievalSettings& s) {
  return s.distance_label.empty() ? distance_name(s.spec.kind) : s.distance_label;
}

}  // namespace

namespace {
// One row of the "retrieval" table (every retrieval node's rows in one table on the report) with
// its bootstrap intervals, unless the metrics go on to a node that presents them (eval.report);
// and the CMC curve on the report's one CMC chart.
void publish_retrieval(const RetrievalSettings& s, const RetrievalSummary& sum, bool metrics_presented) {
  ResultChart c;
  c.title = "CMC";
  c.x_label = "rank";
  c.y_label = "matching rate";
  c.y_unit = "%";
  ChartSeries cmc;
  cmc.name = s.name;
  for (std::size_t k = 0; k < sum.cmc.size(); ++k) cmc.x.push_back(double(k + 1)), cmc.y.push_back(100 * sum.cmc[k]);
  c.series.push_back(std::move(cmc));
  publish_chart(s.node, c);
  if (metrics_presented) return;

  ResultTable t;
  t.title = "retrieval";
  ResultRow row;
  row.label = s.name;
  auto add = [&](const std::string& key, const std::string& header, double value, const std::string& ci_name) {
    t.columns.push_back({key, header, "%", 100.0, true});
    row.values.emplace_back(key, value);
    if (auto it = sum.ci.find(ci_name); it != sum.ci.end())
      row.intervals.emplace_back(key, std::make_pair(it->second.low, it->second.high));
  };
  for (int k : s.options.ranks)
    add(cat("rank-", k), cat("rank-", k), sum.cmc[static_cast<std::size_t>(k - 1)], cat("rank-", k));
  add("map", "mAP", sum.map, "mAP");
  add("map_at_r", "MAP@R", sum.map_at_r, "MAP@R");
  add("r_precision", "R-precision", sum.r_precision, "R-precision");
  add("p_at_1", "P@1", sum.p_at_1, "P@1");
  t.columns.push_back({"queries", "queries", "", 1.0, true});
  row.values.emplace_back("queries", static_cast<double>(sum.evaluated));
  t.rows.push_back(std::move(row));
  publish_results(s.node, t);
}

// <out>.json: the method, the protocol, the metrics, single-shot and per-label scores, and
// whatever the caller adds.
void write_json(const RetrievalSettings& s, const RetrievalSummary& sum, const FeatureSet& query,
                const FeatureSet& gallery, const std::function<void(JsonWriter&)>& extra) {
  JsonWriter j;
  j.begin_object();
  j.field("method", s.name).field("distance", distance_text(s));
  if (is_kernel(s.spec.kind)) j.field("gamma", s.spec.gamma);
  j.key("protocol").begin_object();
  j.field("self_retrieval", s.options.exclude_self);
  j.field("exclude_same_camera", s.options.exclude_same_camera && query.has_camera && gallery.has_camera);
  j.field("junk_label", s.options.junk_label).field("single_shot_repeats", s.options.single_shot_repeats);
  j.field("bootstrap", s.options.bootstrap).field("ci_level", s.options.ci_level);
  j.field("gallery_size", static_cast<std::int64_t>(gallery.label.size())).field("dim", query.dim);
  j.end_object();
  j.key("metrics");
  write_summary_json(j, sum, s.options.ranks);
  if (!sum.single_shot_cmc.empty()) {
    j.key("single_shot").begin_object().field("repeats", s.options.single_shot_repeats);
    for (int k : s.options.ranks) j.field(cat("rank-", k), sum.single_shot_cmc[static_cast<std::size_t>(k - 1)]);
    j.end_object();
  }
  j.key("per_label").begin_array();
  for (const auto& [label, m] : sum.per_label) {
    j.begin_object().field("label", label).field("queries", static_cast<std::int64_t>(m.at("queries")));
    for (int k : s.options.ranks) j.field(cat("rank-", k), m.at(cat("rank-", k)));
    for (const char* name : kMetricNames) j.field(name, m.at(name));
    j.end_object();
  }
  j.end_array();
  if (extra) extra(j);
  j.end_object();
  write_text_atomic(s.out + ".json", j.str() + "\n");
}

// <out>.md: the micro and macro rows, notes on single-shot and intervals, and per-label rows
// when there are few enough labels to read.
void write_markdown(const RetrievalSettings& s, const RetrievalSummary& sum) {
  std::vector<std::string> header{"method"};
  std::vector<std::string> row{s.name};
  for (int k : s.options.ranks) {
    header.push_back(cat("rank-", k, " %"));
    row.push_back(percent_with_ci(sum.cmc[static_cast<std::size_t>(k - 1)], sum, cat("rank-", k)));
  }
  header.insert(header.end(), {"mAP %", "mAP trapz %", "MRR %", "P@1 %", "R-prec %", "MAP@R %", "queries", "no match"});
  row.insert(row.end(), {percent_with_ci(sum.map, sum, "mAP"), percent_with_ci(sum.map_trapezoid, sum, "mAP_trapezoid"),
                         percent(sum.mrr), percent(sum.p_at_1), percent(sum.r_precision), percent(sum.map_at_r),
                         std::to_string(sum.evaluated), std::to_string(sum.no_match)});
  if (!sum.single_shot_cmc.empty())
    for (int k : s.options.ranks) {
      header.push_back(cat("single-shot rank-", k, " %"));
      row.push_back(percent(sum.single_shot_cmc[static_cast<std::size_t>(k - 1)]));
    }
  // The same metrics averaged per query label first (macro), below the micro row.
  auto macro = [&](const std::string& name) { return sum.macro.count(name) ? sum.macro.at(name) : 0.0; };
  std::vector<std::string> macro_row{"macro (mean over labels)"};
  for (int k : s.options.ranks) macro_row.push_back(percent(macro(cat("rank-", k))));
  for (const char* name : {"mAP", "mAP_trapezoid", "MRR", "P@1", "R-precision", "MAP@R"}) macro_row.push_back(percent(macro(name)));
  macro_row.push_back(cat(sum.per_label.size(), " labels"));
  while (macro_row.size() < header.size()) macro_row.push_back("");
  std::string md = cat("### ", s.name, " (", distance_text(s), ")\n\n", markdown_table(header, {row, macro_row}));
  if (!sum.single_shot_cmc.empty())
    md += cat("\nSingle-shot: CUHK03 single-gallery-shot rank-k, one gallery item per identity drawn ",
              s.options.single_shot_repeats, " times, averaged.\n");
  if (s.options.bootstrap > 0)
    md += cat("\nBrackets: ", percent(s.options.ci_level, 0), "% bootstrap intervals over queries (", s.options.bootstrap,
              " resamples).\n");
  if (!sum.per_label.empty() && sum.per_label.size() <= kMaxMarkdownLabels) {
    std::vector<std::vector<std::string>> rows;
    for (const auto& [label, m] : sum.per_label)
      rows.push_back({std::to_string(label), std::to_string(static_cast<std::int64_t>(m.at("queries"))), percent(m.at("P@1")),
                      percent(m.at("R-precision")), percent(m.at("MAP@R")), percent(m.at("mAP")), percent(m.at("MRR"))});
    md += cat("\nPer query label (means over its evaluated queries):\n\n",
              markdown_table({"label", "queries", "P@1 %", "R-prec %", "MAP@R %", "mAP %", "MRR %"}, rows));
  } else if (!sum.per_label.empty()) {
    md += cat("\n", sum.per_label.size(), " query labels: their scores are in ", s.out, ".json (per_label).\n");
  }
  write_text_atomic(s.out + ".md", md);
}

// <out>_cmc.png: the CMC curve, and the single-gallery-shot one when it was computed.
void write_cmc_chart(const RetrievalSettings& s, const RetrievalSummary& sum) {
  LineChart chart;
  chart.title = cat("CMC: ", s.name);
  chart.x_label = "rank";
  chart.y_label = "matching rate (%)";
  chart.y_min = 0, chart.y_max = 100, chart.x_min = 1, chart.x_max = s.options.max_rank;
  PlotSeries cmc{cat(s.name, " (rank-1 ", percent(sum.cmc[0], 1), "%)"), {}, {}};
  for (std::size_t k = 0; k < sum.cmc.size(); ++k) cmc.x.push_back(double(k + 1)), cmc.y.push_back(100 * sum.cmc[k]);
  chart.series.push_back(cmc);
  if (!sum.single_shot_cmc.empty()) {
    PlotSeries ss{"single-gallery-shot", {}, {}};
    for (std::size_t k = 0; k < sum.single_shot_cmc.size(); ++k)
      ss.x.push_back(double(k + 1)), ss.y.push_back(100 * sum.single_shot_cmc[k]);
    chart.series.push_back(ss);
  }
  save_line_chart(s.out + "_cmc.png", chart);
}

// <out>_ranklists.csv: each query's kept top list, best first.
void write_ranklists(const RetrievalSettings& s, const RetrievalResult& r, const FeatureSet& query,
                     const FeatureSet& gallery) {
  const auto k = static_cast<std::size_t>(s.options.keep_top);
  std::ostringstream csv;
  csv << "query,query_label,rank,gallery,gallery_label,value\n";
  for (std::size_t q = 0; q < r.queries.size(); ++q)
    for (std::size_t i = 0; i < k; ++i) {
      const auto g = r.top_index[q * k + i];
      if (g < 0) break;
      csv << q << ',' << query.label[q] << ',' << i + 1 << ',' << g << ',' << gallery.label[static_cast<std::size_t>(g)]
          << ',' << score_to_value(s.spec, r.top_score[q * k + i]) << '\n';
    }
  write_text_atomic(s.out + "_ranklists.csv", csv.str());
}

// The record the node emits: the summary's metrics, micro and macro.
Record summary_record(const RetrievalSettings& s, const RetrievalSummary& sum) {
  Record m;
  m.set("method", Array::string_scalar(s.name));
  m.set("cmc", Array::from_vector<double>({static_cast<std::int64_t>(sum.cmc.size())}, sum.cmc));
  m.set("map", Array::scalar<double>(sum.map));
  m.set("map_trapezoid", Array::scalar<double>(sum.map_trapezoid));
  m.set("mrr", Array::scalar<double>(sum.mrr));
  m.set("r_precision", Array::scalar<double>(sum.r_precision));
  m.set("map_at_r", Array::scalar<double>(sum.map_at_r));
  m.set("evaluated", Array::scalar<std::int64_t>(sum.evaluated));
  m.set("no_match", Array::scalar<std::int64_t>(sum.no_match));
  if (sum.ci.count("mAP")) m.set("map_ci", Array::from_vector<double>({2}, {sum.ci.at("mAP").low, sum.ci.at("mAP").high}));
  m.set("p_at_1", Array::scalar<double>(sum.p_at_1));
  auto macro_value = [&](const char* name) { return sum.macro.count(name) ? sum.macro.at(name) : 0.0; };
  m.set("macro_map", Array::scalar<double>(macro_value("mAP")));
  m.set("macro_map_trapezoid", Array::scalar<double>(macro_value("mAP_trapezoid")));
  m.set("macro_p_at_1", Array::scalar<double>(macro_value("P@1")));
  m.set("macro_r_precision", Array::scalar<double>(macro_value("R-precision")));
  m.set("macro_map_at_r", Array::scalar<double>(macro_value("MAP@R")));
  m.set("macro_mrr", Array::scalar<double>(macro_value("MRR")));
  if (!sum.single_shot_cmc.empty()) {
    m.set("single_shot_cmc", Array::from_vector<double>({static_cast<std::int64_t>(sum.single_shot_cmc.size())}, sum.single_shot_cmc));
    m.set("single_shot_rank1", Array::scalar<double>(sum.single_shot_cmc[0]));
  }
  return m;
}

}  // namespace

Record write_retrieval_outputs(const RetrievalSettings& s, const RetrievalResult& r, const FeatureSet& query,
                               const FeatureSet& gallery, const std::function<void(JsonWriter&)>& extra) {
  const RetrievalSummary& sum = r.summary;
  if (sum.no_match > 0)
    log_warning(s.name, sum.no_match, " of ", sum.queries, " queries have no valid match in the gallery; they are",
                " left out of the means and reported as no_match");
  if (sum.evaluated == 0) log_warning(s.name, "no query could be evaluated: every metric is 0");
  if (!s.out.empty()) {
    write_json(s, sum, query, gallery, extra);
    write_markdown(s, sum);
    write_cmc_chart(s, sum);
    if (!r.top_index.empty()) write_ranklists(s, r, query, gallery);
  }
  publish_retrieval(s, sum, s.metrics_presented);
  return summary_record(s, sum);
}

const FeatureSet& checked_gallery(const FeatureSet& query, const FeatureSet& gallery, bool self) {
  if (query.rows() == 0) throw DataError("no query embeddings arrived before end of stream");
  const FeatureSet& g = self ? query : gallery;
  if (g.rows() == 0) throw DataError("no gallery embeddings arrived before end of stream");
  if (g.dim != query.dim) throw DataError(cat("query embeddings have ", query.dim, " dims but gallery embeddings have ", g.dim));
  return g;
}

RetrievalLabels retrieval_labels(const FeatureSet& query, const FeatureSet& gallery) {
  RetrievalLabels labels{query.label.data(), gallery.label.data()};
  if (query.has_camera && gallery.has_camera) {
    labels.query_camera = query.camera.data();
    labels.gallery_camera = gallery.camera.data();
  }
  return labels;
}

}  // namespace embedflow::eval
