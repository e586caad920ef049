#include "metrics_log.hpp"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <iomanip>
#include <sstream>
#include <limits>

#include <embedflow/plot/line_chart.hpp>
#include <embedflow/error.hpp>
#include <embedflow/report_files.hpp>

namespace embedflow::torchfam {
namespace fs = std::filesystem;

namespace {
const char* kHeader = "step,epoch,loss,lr,samples_per_s";

std::string num(double v) {
  if (std::isnan(v)) return "NaN";
  std::ostringstream o;
  o << std::setprecision(9) << v;
  return o.str();
}

void write_row(std::ofstream& csv, std::ofstream& jsonl, const MetricRow& r) {
  csv << r.step << ',' << r.epoch << ',' << num(r.loss) << ',' << num(r.lr) << ',' << num(r.samples_per_s) << '\n';
  // json_number: shortest round-trip text, null for NaN (JSON has none), so the line parses.
  jsonl << "{\"step\": " << r.step << ", \"epoch\": " << r.epoch << ", \"loss\": " << json_number(r.loss)
        << ", \"lr\": " << json_number(r.lr) << ", \"samples_per_s\": " << json_number(r.samples_per_s) << "}\n";
}
}  // namespace

MetricsLog::MetricsLog(fs::path dir, const std::vector<MetricRow>& history) : dir_(std::move(dir)) {
  fs::create_directories(dir_);
  csv_.open(dir_ / "metrics.csv", std::ios::trunc);
  jsonl_.open(dir_ / "metrics.jsonl", std::ios::trunc);
  if (!csv_ || !jsonl_) throw Error(cat("cannot write metrics files in ", dir_.string()));
  csv_ << kHeader << '\n';
  for (const auto& r : history) write_row(csv_, jsonl_, r);
  csv_.flush();
  jsonl_.flush();
}

void MetricsLog::append(const MetricRow& row) {
  write_row(csv_, jsonl_, row);
  // Flushed per row: a run killed mid-way keeps its curve up to the last row.
  csv_.flush();
  jsonl_.flush();
}

void MetricsLog::plot(const std::vector<MetricRow>& rows) const { plot_loss_curve(rows, dir_ / "loss.png"); }

void plot_loss_curve(const std::vector<MetricRow>& rows, const fs::path& png) {
  PlotSeries raw{"loss per row", {}, {}}, smooth{"moving average", {}, {}};
  std::vector<const MetricRow*> pts;
  for (const auto& r : rows)
    if (std::isfinite(r.loss)) pts.push_back(&r);
  // A moving average over about a fiftieth of the run shows the trend through noisy rows.
  const std::size_t window = std::max<std::size_t>(1, pts.size() / 50);
  double sum = 0;
  for (std::size_t i = 0; i < pts.size(); ++i) {
    const auto step = static_cast<double>(pts[i]->step);
    raw.x.push_back(step), raw.y.push_back(pts[i]->loss);
    sum += pts[i]->loss;
    if (i >= window) sum -= pts[i - window]->loss;
    smooth.x.push_back(step), smooth.y.push_back(sum / static_cast<double>(std::min(i + 1, window)));
  }
  LineChart chart;
  chart.title = "training loss";
  chart.x_label = "step";
  chart.y_label = "loss";
  chart.markers = false;
  chart.series.push_back(std::move(raw));
  if (window > 1) chart.series.push_back(std::move(smooth));
  save_line_chart(png.string(), chart);
}

}  // namespace embedflow::torchfam
