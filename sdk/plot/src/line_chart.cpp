#include "embedflow/atomic_file.hpp"
#include "embedflow/plot/line_chart.hpp"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <opencv2/core.hpp>
#include <opencv2/imgcodecs.hpp>
#include <opencv2/imgproc.hpp>

#include "embedflow/error.hpp"

namespace embedflow {

namespace {

// Matplotlib's tab10: readable on white and distinguishable for most colour-blind readers.
const cv::Scalar kPalette[] = {{180, 119, 31}, {14, 127, 255}, {44, 160, 44},  {40, 39, 214},  {189, 103, 148},
                               {75, 86, 140},  {194, 119, 227}, {127, 127, 127}, {34, 189, 188}, {207, 190, 23}};
const int kFont = cv::FONT_HERSHEY_SIMPLEX;

std::string format_tick(double v, double step) {
  char buf[32];
  const int decimals = step >= 1 ? 0 : std::min(6, static_cast<int>(std::ceil(-std::log10(step) - 1e-9)));
  std::snprintf(buf, sizeof buf, "%.*f", decimals, v);
  return buf;
}

void text(cv::Mat& img, const std::string& s, cv::Point at, double scale, int thickness, cv::Scalar color,
          double align_x, double align_y) {
  int base = 0;
  const cv::Size sz = cv::getTextSize(s, kFont, scale, thickness, &base);
  cv::putText(img, s, {at.x - static_cast<int>(align_x * sz.width), at.y + static_cast<int>(align_y * sz.height)},
              kFont, scale, color, thickness, cv::LINE_AA);
}

// Series past the palette's ten colours reuse them dashed, so a twelve-method CMC chart never
// shows two curves that look the same.
void polyline(cv::Mat& img, const std::vector<cv::Point>& pts, cv::Scalar color, bool dashed) {
  if (!dashed) {
    cv::polylines(img, pts, false, color, 2, cv::LINE_AA);
    return;
  }
  const double on = 9, period = 15;
  double phase = 0;  // arc length into the current period, carried across segments
  for (std::size_t i = 1; i < pts.size(); ++i) {
    const cv::Point2d a = pts[i - 1], b = pts[i];
    const double len = cv::norm(b - a);
    double t = 0;
    while (t < len) {
      const double step = std::min(len - t, phase < on ? on - phase : period - phase);
      if (phase < on) {
        const cv::Point2d p = a + (b - a) * (t / len), q = a + (b - a) * ((t + step) / len);
        cv::line(img, cv::Point(cvRound(p.x), cvRound(p.y)), cv::Point(cvRound(q.x), cvRound(q.y)), color, 2, cv::LINE_AA);
      }
      t += step;
      phase = std::fmod(phase + step, period);
    }
  }
}

}  // namespace

std::vector<double> nice_ticks(double lo, double hi, int target) {
  std::vector<double> ticks;
  if (!(hi > lo)) return {lo};
  const double raw = (hi - lo) / std::max(1, target);
  const double mag = std::pow(10.0, std::floor(std::log10(raw)));
  double step = mag;
  for (double m : {1.0, 2.0, 2.5, 5.0, 10.0})
    if (m * mag >= raw) {
      step = m * mag;
      break;
    }
  for (double v = std::ceil(lo / step - 1e-9) * step; v <= hi + step * 1e-9; v += step)
    ticks.push_back(std::fabs(v) < step * 1e-9 ? 0.0 : v);
  return ticks;
}

void save_line_chart(const std::string& path, const LineChart& chart) {
  double x0 = chart.x_min, x1 = chart.x_max, y0 = chart.y_min, y1 = chart.y_max;
  double dx0 = 1e300, dx1 = -1e300, dy0 = 1e300, dy1 = -1e300;
  for (const auto& s : chart.series)
    for (std::size_t i = 0; i < s.x.size() && i < s.y.size(); ++i) {
      if (!std::isfinite(s.x[i]) || !std::isfinite(s.y[i])) continue;
      dx0 = std::min(dx0, s.x[i]), dx1 = std::max(dx1, s.x[i]);
      dy0 = std::min(dy0, s.y[i]), dy1 = std::max(dy1, s.y[i]);
    }
  if (dx0 > dx1) dx0 = 0, dx1 = 1, dy0 = 0, dy1 = 1;
  if (std::isnan(x0)) x0 = dx0;
  if (std::isnan(x1)) x1 = dx1;
  if (std::isnan(y0)) y0 = dy0 - 0.05 * (dy1 - dy0);
  if (std::isnan(y1)) y1 = dy1 + 0.05 * (dy1 - dy0);
  if (x1 <= x0) x1 = x0 + 1;
  if (y1 <= y0) y1 = y0 + 1;
  const bool logx = chart.log_x && x0 > 0;
  auto fx = [&](double v) { return logx ? std::log10(v) : v; };

  // The legend's width decides the right margin when it sits outside the plot area.
  int legend_w = 0;
  if (!chart.series.empty()) {
    int wmax = 0, base = 0;
    for (const auto& s : chart.series) wmax = std::max(wmax, cv::getTextSize(s.name, kFont, 0.5, 1, &base).width);
    legend_w = wmax + 52;
  }
  const int W = chart.width + (chart.legend_outside ? legend_w + 20 : 0), H = chart.height;
  const int left = 90, right = 30 + (chart.legend_outside ? legend_w + 20 : 0), top = 60, bottom = 75;
  const cv::Rect area(left, top, W - left - right, H - top - bottom);
  cv::Mat img(H, W, CV_8UC3, cv::Scalar(255, 255, 255));
  auto px = [&](double x) {
    return area.x + static_cast<int>(std::lround((fx(x) - fx(x0)) / (fx(x1) - fx(x0)) * area.width));
  };
  auto py = [&](double y) { return area.y + area.height - static_cast<int>(std::lround((y - y0) / (y1 - y0) * area.height)); };
  const cv::Scalar grid(228, 228, 228), axis(60, 60, 60), ink(30, 30, 30);

  std::vector<double> xt;
  if (logx) {
    for (double d = std::pow(10.0, std::floor(std::log10(x0))); d <= x1 * 1.0001; d *= 10)
      for (double m : {1.0, 2.0, 5.0})
        if (d * m >= x0 * 0.9999 && d * m <= x1 * 1.0001) xt.push_back(d * m);
  } else {
    xt = nice_ticks(x0, x1, 8);
  }
  const std::vector<double> yt = nice_ticks(y0, y1, 6);
  const double xstep = xt.size() > 1 ? xt[1] - xt[0] : 1, ystep = yt.size() > 1 ? yt[1] - yt[0] : 1;
  for (double v : xt) {
    const int x = px(v);
    cv::line(img, {x, area.y}, {x, area.y + area.height}, grid, 1, cv::LINE_AA);
    cv::line(img, {x, area.y + area.height}, {x, area.y + area.height + 6}, axis, 1, cv::LINE_AA);
    text(img, format_tick(v, logx ? std::min(1.0, v) : xstep), {x, area.y + area.height + 14}, 0.5, 1, ink, 0.5, 1.0);
  }
  for (double v : yt) {
    const int y = py(v);
    cv::line(img, {area.x, y}, {area.x + area.width, y}, grid, 1, cv::LINE_AA);
    cv::line(img, {area.x - 6, y}, {area.x, y}, axis, 1, cv::LINE_AA);
    text(img, format_tick(v, ystep), {area.x - 10, y}, 0.5, 1, ink, 1.0, 0.5);
  }
  cv::rectangle(img, area, axis, 1, cv::LINE_AA);
  text(img, chart.title, {W / 2, 22}, 0.75, 2, ink, 0.5, 1.0);
  text(img, chart.x_label, {area.x + area.width / 2, H - 22}, 0.6, 1, ink, 0.5, 0.0);
  if (!chart.y_label.empty()) {
    int base = 0;
    const cv::Size sz = cv::getTextSize(chart.y_label, kFont, 0.6, 1, &base);
    cv::Mat label(sz.height + base + 6, sz.width + 6, CV_8UC3, cv::Scalar(255, 255, 255));
    cv::putText(label, chart.y_label, {3, sz.height + 3}, kFont, 0.6, ink, 1, cv::LINE_AA);
    cv::Mat rotated;
    cv::rotate(label, rotated, cv::ROTATE_90_COUNTERCLOCKWISE);
    const int ry = std::max(0, area.y + area.height / 2 - rotated.rows / 2);
    if (ry + rotated.rows <= H && 8 + rotated.cols <= W) rotated.copyTo(img(cv::Rect(8, ry, rotated.cols, rotated.rows)));
  }

  cv::Mat plot = img(area);
  for (std::size_t s = 0; s < chart.series.size(); ++s) {
    const auto& ser = chart.series[s];
    const cv::Scalar color = kPalette[s % 10];
    std::vector<cv::Point> pts;
    for (std::size_t i = 0; i < ser.x.size() && i < ser.y.size(); ++i)
      if (std::isfinite(ser.x[i]) && std::isfinite(ser.y[i]) && (!logx || ser.x[i] > 0))
        pts.emplace_back(px(ser.x[i]) - area.x, py(ser.y[i]) - area.y);
    if (ser.line && pts.size() > 1) polyline(plot, pts, color, s >= 10 || ser.dashed);
    if (!ser.line || (chart.markers && pts.size() <= 40))
      for (const auto& p : pts) cv::circle(plot, p, chart.marker_radius, color, cv::FILLED, cv::LINE_AA);
  }

  // Legend in the lower-right corner of the plot, where CMC curves (rising to the right) are
  // empty, or right of the plot area for scatter plots.
  if (!chart.series.empty()) {
    const int row = 22, lw = legend_w, lh = row * static_cast<int>(chart.series.size()) + 10;
    const cv::Rect box = chart.legend_outside
                             ? cv::Rect(area.x + area.width + 20, area.y, lw, std::min(lh, H - area.y - 5))
                             : cv::Rect(area.x + area.width - lw - 10, area.y + area.height - lh - 10, lw, lh);
    cv::Mat roi = img(box & cv::Rect(0, 0, W, H));
    cv::Mat white(roi.size(), roi.type(), cv::Scalar(255, 255, 255));
    cv::addWeighted(roi, 0.15, white, 0.85, 0, roi);
    cv::rectangle(img, box, cv::Scalar(190, 190, 190), 1, cv::LINE_AA);
    for (std::size_t s = 0; s < chart.series.size(); ++s) {
      const int y = box.y + 5 + row * static_cast<int>(s) + row / 2;
      if (chart.series[s].line)
        polyline(img, {{box.x + 8, y}, {box.x + 36, y}}, kPalette[s % 10], s >= 10 || chart.series[s].dashed);
      else
        cv::circle(img, {box.x + 22, y}, std::max(4, chart.marker_radius), kPalette[s % 10], cv::FILLED, cv::LINE_AA);
      text(img, chart.series[s].name, {box.x + 44, y}, 0.5, 1, ink, 0.0, 0.5);
    }
  }
  std::vector<unsigned char> encoded;
  bool ok = false;
  const std::string ext = std::filesystem::path(path).extension().string();
  try {
    ok = cv::imencode(ext.empty() ? ".png" : ext, img, encoded);
  } catch (const cv::Exception& e) {
    throw Error(cat("cannot write plot '", path, "': ", e.what()));
  }
  if (!ok) throw Error(cat("cannot write plot '", path, "'"));
  write_file_atomic(path, std::string_view(reinterpret_cast<const char*>(encoded.data()), encoded.size()));
}

}  // namespace embedflow
