#include "embedflow/plot/line_chart.hpp"

#include <algorithm>
#include <cmath>
#include <opencv2/core.hpp>
#include <opencv2/imgproc.hpp>

#include "chart_style.hpp"

namespace embedflow {

using namespace plot_style;

namespace {

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

// The axis ranges: bounds the chart fixes, the data's range (plus 5% each side on y) for the rest.
struct Ranges {
  double x0, x1, y0, y1;
  bool log_x;
};

Ranges fit_ranges(const LineChart& chart) {
  double dx0 = 1e300, dx1 = -1e300, dy0 = 1e300, dy1 = -1e300;
  for (const auto& s : chart.series)
    for (std::size_t i = 0; i < s.x.size() && i < s.y.size(); ++i) {
      if (!std::isfinite(s.x[i]) || !std::isfinite(s.y[i])) continue;
      dx0 = std::min(dx0, s.x[i]), dx1 = std::max(dx1, s.x[i]);
      dy0 = std::min(dy0, s.y[i]), dy1 = std::max(dy1, s.y[i]);
    }
  if (dx0 > dx1) dx0 = 0, dx1 = 1, dy0 = 0, dy1 = 1;
  if (!(dy1 > dy0)) {  // a flat series: a band around it, not a range starting at it
    const double half = std::max(1e-9, 0.05 * std::fabs(dy0));
    dy0 -= half, dy1 += half;
  }
  Ranges r{chart.x_min, chart.x_max, chart.y_min, chart.y_max, false};
  if (std::isnan(r.x0)) r.x0 = dx0;
  if (std::isnan(r.x1)) r.x1 = dx1;
  if (std::isnan(r.y0)) r.y0 = dy0 - 0.05 * (dy1 - dy0);
  if (std::isnan(r.y1)) r.y1 = dy1 + 0.05 * (dy1 - dy0);
  if (r.x1 <= r.x0) r.x1 = r.x0 + 1;
  if (r.y1 <= r.y0) r.y1 = r.y0 + 1;
  r.log_x = chart.log_x && r.x0 > 0;
  return r;
}

struct Legend {
  int row = 22, column_width = 0, rows_per_column = 0, columns = 1;
  cv::Rect box;
  bool outside = false;
};

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
  require_axis_labels(path, chart.title, chart.x_label, chart.y_label);
  const Ranges r = fit_ranges(chart);
  auto fx = [&](double v) { return r.log_x ? std::log10(v) : v; };

  std::vector<Tick> xt, yt;
  if (r.log_x) {
    for (double d = std::pow(10.0, std::floor(std::log10(r.x0))); d <= r.x1 * 1.0001; d *= 10)
      for (double m : {1.0, 2.0, 5.0})
        if (d * m >= r.x0 * 0.9999 && d * m <= r.x1 * 1.0001) xt.push_back({d * m, format_tick(d * m, std::min(1.0, d * m))});
  } else {
    const auto v = nice_ticks(r.x0, r.x1, 8);
    for (double t : v) xt.push_back({t, format_tick(t, v.size() > 1 ? v[1] - v[0] : 1)});
  }
  const auto yv = nice_ticks(r.y0, r.y1, 6);
  for (double t : yv) yt.push_back({t, format_tick(t, yv.size() > 1 ? yv[1] - yv[0] : 1)});

  Legend legend;
  const std::size_t n = chart.series.size();
  for (const auto& s : chart.series) legend.column_width = std::max(legend.column_width, text_width(s.name, 0.5) + 52);

  // The plot area does not depend on where the legend goes (a legend outside widens the image),
  // so the series can be laid out once to find the corner they leave empty.
  Frame f = plan_frame(chart.title, yt, chart.width, chart.height, 0);
  auto px = [&](double x) {
    return f.area.x + static_cast<int>(std::lround((fx(x) - fx(r.x0)) / (fx(r.x1) - fx(r.x0)) * f.area.width));
  };
  auto py = [&](double y) {
    return f.area.y + f.area.height - static_cast<int>(std::lround((y - r.y0) / (r.y1 - r.y0) * f.area.height));
  };
  std::vector<std::vector<cv::Point>> points(n);  // relative to the plot area
  auto place_points = [&] {
    for (std::size_t s = 0; s < n; ++s) {
      const auto& ser = chart.series[s];
      points[s].clear();
      for (std::size_t i = 0; i < ser.x.size() && i < ser.y.size(); ++i)
        if (std::isfinite(ser.x[i]) && std::isfinite(ser.y[i]) && (!r.log_x || ser.x[i] > 0))
          points[s].emplace_back(px(ser.x[i]) - f.area.x, py(ser.y[i]) - f.area.y);
    }
  };
  place_points();
  auto draw_series = [&](cv::Mat& plot, bool mask) {
    for (std::size_t s = 0; s < n; ++s) {
      const auto& ser = chart.series[s];
      const cv::Scalar color = mask ? cv::Scalar(255) : kPalette[s % 10];
      if (ser.line && points[s].size() > 1) polyline(plot, points[s], color, !mask && (s >= 10 || ser.dashed));
      if (!ser.line || (chart.markers && points[s].size() <= 40))
        for (const auto& p : points[s]) cv::circle(plot, p, chart.marker_radius, color, cv::FILLED, cv::LINE_AA);
    }
  };

  if (n > 0) {
    legend.rows_per_column = static_cast<int>(n);
    const int lw = legend.column_width, lh = legend.row * static_cast<int>(n) + 10;
    // Inside: the corner whose box covers no drawn pixel (a few pixels of margin), preferring
    // lower right, where rising curves (CMC, accuracy) leave room.
    bool placed = false;
    if (!chart.legend_outside && lw <= f.area.width / 2 && lh <= f.area.height * 2 / 3) {
      cv::Mat occupied(f.area.size(), CV_8UC1, cv::Scalar(0));
      draw_series(occupied, true);
      cv::dilate(occupied, occupied, cv::getStructuringElement(cv::MORPH_RECT, {7, 7}));
      const int inset = 10;
      const cv::Rect corners[] = {
          {f.area.width - lw - inset, f.area.height - lh - inset, lw, lh},
          {f.area.width - lw - inset, inset, lw, lh},
          {inset, inset, lw, lh},
          {inset, f.area.height - lh - inset, lw, lh}};
      for (const cv::Rect& c : corners)
        if (cv::countNonZero(occupied(c)) == 0) {
          legend.box = c + f.area.tl();
          placed = true;
          break;
        }
    }
    if (!placed) {
      // Right of the plot area, in as many columns as its height needs.
      legend.outside = true;
      const int room = std::max(legend.row, chart.height - f.area.y - 15);
      legend.rows_per_column = std::max(1, (room - 10) / legend.row);
      legend.columns = (static_cast<int>(n) + legend.rows_per_column - 1) / legend.rows_per_column;
      const int rows = std::min(static_cast<int>(n), legend.rows_per_column);
      const int extra = legend.columns * lw + 20;
      // A wider image can fit the title on fewer lines, which moves the plot area.
      f = plan_frame(chart.title, yt, chart.width, chart.height, extra);
      place_points();
      legend.box = cv::Rect(f.area.x + f.area.width + 20, f.area.y, legend.columns * lw, legend.row * rows + 10);
    }
  }

  cv::Mat img(f.height, f.width, CV_8UC3, kWhite);
  draw_frame(img, f, xt, yt, chart.x_label, chart.y_label, px, py);
  cv::Mat plot = img(f.area);
  draw_series(plot, false);
  cv::rectangle(img, f.area, kAxis, 1, cv::LINE_AA);

  if (n > 0) {
    cv::rectangle(img, legend.box, kWhite, cv::FILLED);  // no grid lines through the names
    cv::rectangle(img, legend.box, cv::Scalar(190, 190, 190), 1, cv::LINE_AA);
    for (std::size_t s = 0; s < n; ++s) {
      const int column = static_cast<int>(s) / legend.rows_per_column, row = static_cast<int>(s) % legend.rows_per_column;
      const int x = legend.box.x + column * legend.column_width;
      const int y = legend.box.y + 5 + legend.row * row + legend.row / 2;
      if (chart.series[s].line)
        polyline(img, {{x + 8, y}, {x + 36, y}}, kPalette[s % 10], s >= 10 || chart.series[s].dashed);
      else
        cv::circle(img, {x + 22, y}, std::max(4, chart.marker_radius), kPalette[s % 10], cv::FILLED, cv::LINE_AA);
      text(img, chart.series[s].name, {x + 44, y}, 0.5, 1, kInk, 0.0, 0.5);
    }
  }
  write_image(path, img);
}

}  // namespace embedflow

namespace embedflow {

ResultChart result_chart(const LineChart& chart) {
  ResultChart c;
  c.title = chart.title;
  c.x_label = chart.x_label;
  c.y_label = chart.y_label;
  c.log_x = chart.log_x;
  for (const auto& s : chart.series) {
    ChartSeries one;
    one.name = s.name;
    one.x = s.x;
    one.y = s.y;
    one.dashed = s.dashed;
    c.series.push_back(std::move(one));
  }
  return c;
}

}  // namespace embedflow
