#include "metrics_log.hpp"

#include <opencv2/imgcodecs.hpp>
#include <opencv2/imgproc.hpp>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <iomanip>
#include <sstream>
#include <limits>

#include <embedflow/atomic_file.hpp>
#include <embedflow/error.hpp>

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
  // JSON has no NaN: null keeps the line parseable.
  auto j = [](double v) { return std::isfinite(v) ? num(v) : std::string("null"); };
  jsonl << "{\"step\": " << r.step << ", \"epoch\": " << r.epoch << ", \"loss\": " << j(r.loss) << ", \"lr\": " << j(r.lr)
        << ", \"samples_per_s\": " << j(r.samples_per_s) << "}\n";
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

namespace {
// All or nothing, like every output file: a reader never sees half a PNG.
void write_png(const fs::path& path, const cv::Mat& img) {
  std::vector<unsigned char> png;
  if (!cv::imencode(".png", img, png)) throw DataError(cat("cannot encode ", path.string()));
  write_file_atomic(path, std::string_view(reinterpret_cast<const char*>(png.data()), png.size()));
}
}  // namespace

void plot_loss_curve(const std::vector<MetricRow>& rows, const fs::path& png) {
  const int W = 800, H = 480, left = 80, right = 20, top = 40, bottom = 60;
  cv::Mat img(H, W, CV_8UC3, cv::Scalar(255, 255, 255));
  std::vector<MetricRow> pts;
  for (const auto& r : rows)
    if (std::isfinite(r.loss)) pts.push_back(r);
  cv::putText(img, "training loss", {left, 25}, cv::FONT_HERSHEY_SIMPLEX, 0.7, {0, 0, 0}, 1, cv::LINE_AA);
  cv::rectangle(img, {left, top}, {W - right, H - bottom}, {0, 0, 0}, 1);
  if (pts.empty()) {
    write_png(png, img);
    return;
  }
  double x0 = static_cast<double>(pts.front().step), x1 = static_cast<double>(pts.back().step);
  if (x1 <= x0) x1 = x0 + 1;
  double y0 = std::numeric_limits<double>::infinity(), y1 = -y0;
  for (const auto& p : pts) {
    y0 = std::min(y0, p.loss);
    y1 = std::max(y1, p.loss);
  }
  if (y1 <= y0) { y1 = y0 + 1e-6 + std::fabs(y0) * 0.1; }
  double pad = (y1 - y0) * 0.05;
  y0 -= pad;
  y1 += pad;
  auto X = [&](double x) { return left + static_cast<int>(std::lround((x - x0) / (x1 - x0) * (W - left - right))); };
  auto Y = [&](double y) { return H - bottom - static_cast<int>(std::lround((y - y0) / (y1 - y0) * (H - top - bottom))); };
  for (int k = 0; k <= 4; ++k) {  // ticks and grid
    double fy = y0 + (y1 - y0) * k / 4.0, fx = x0 + (x1 - x0) * k / 4.0;
    cv::line(img, {left, Y(fy)}, {W - right, Y(fy)}, {225, 225, 225}, 1);
    char buf[32];
    std::snprintf(buf, sizeof buf, "%.4g", fy);
    cv::putText(img, buf, {5, Y(fy) + 5}, cv::FONT_HERSHEY_SIMPLEX, 0.45, {0, 0, 0}, 1, cv::LINE_AA);
    std::snprintf(buf, sizeof buf, "%.0f", fx);
    cv::putText(img, buf, {X(fx) - 15, H - bottom + 20}, cv::FONT_HERSHEY_SIMPLEX, 0.45, {0, 0, 0}, 1, cv::LINE_AA);
  }
  cv::putText(img, "step", {W / 2 - 20, H - 15}, cv::FONT_HERSHEY_SIMPLEX, 0.55, {0, 0, 0}, 1, cv::LINE_AA);
  std::vector<cv::Point> raw, smooth;
  const std::size_t win = std::max<std::size_t>(1, pts.size() / 50);
  double acc = 0;
  for (std::size_t i = 0; i < pts.size(); ++i) {
    raw.emplace_back(X(static_cast<double>(pts[i].step)), Y(pts[i].loss));
    acc += pts[i].loss;
    if (i >= win) acc -= pts[i - win].loss;
    std::size_t n = std::min(i + 1, win);
    smooth.emplace_back(X(static_cast<double>(pts[i].step)), Y(acc / static_cast<double>(n)));
  }
  cv::polylines(img, raw, false, {235, 190, 150}, 1, cv::LINE_AA);
  cv::polylines(img, smooth, false, {160, 60, 0}, 2, cv::LINE_AA);
  write_png(png, img);
}

}  // namespace embedflow::torchfam
