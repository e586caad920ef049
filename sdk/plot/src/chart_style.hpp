// The one chart style every embedflow chart shares (private to embedflow_plot): palette, fonts,
// the title that always fits the image, rotated axis labels, tick labels and the PNG write.
// Line charts, bar charts and heat maps all draw their frame through these, so a rule such as
// "a title is never clipped" holds for every chart the engine writes.
#pragma once

#include <opencv2/core.hpp>
#include <opencv2/imgproc.hpp>
#include <string>
#include <vector>

namespace embedflow::plot_style {

// Matplotlib's tab10: readable on white and distinguishable for most colour-blind readers.
inline const cv::Scalar kPalette[] = {{180, 119, 31}, {14, 127, 255}, {44, 160, 44},  {40, 39, 214},  {189, 103, 148},
                                      {75, 86, 140},  {194, 119, 227}, {127, 127, 127}, {34, 189, 188}, {207, 190, 23}};
inline const cv::Scalar kInk(30, 30, 30), kAxis(60, 60, 60), kGrid(228, 228, 228), kWhite(255, 255, 255);
inline constexpr int kFont = cv::FONT_HERSHEY_SIMPLEX;
inline constexpr double kTickScale = 0.5, kLabelScale = 0.6;

// Text of `scale` and `thickness` drawn with its box aligned to `at` (align 0 = left/top edge,
// 0.5 = centre, 1 = right/bottom edge).
void text(cv::Mat& img, const std::string& s, cv::Point at, double scale, int thickness, cv::Scalar color,
          double align_x, double align_y);
int text_width(const std::string& s, double scale, int thickness = 1);

// A title laid out for an image `width` pixels wide: the largest scale from 0.75 down to 0.5 at
// which it fits on one line, else wrapped at word boundaries (inside a word when one word alone
// is too wide) at 0.5. Titles are data (method names, parameter values) and can be any length;
// a clipped title hides exactly the part that tells two charts apart.
struct TitleLayout {
  std::vector<std::string> lines;
  double scale = 0.75;
  int thickness = 2;
  int line_height = 0;
  int height() const { return static_cast<int>(lines.size()) * line_height; }
};
TitleLayout layout_title(const std::string& title, int width);
// Draws the lines centred on width / 2 from y = `top`.
void draw_title(cv::Mat& img, const TitleLayout& title, int top);

// Largest scale <= `scale` (down to 0.35) at which `s` is at most `width` pixels wide.
double fitting_scale(const std::string& s, double scale, int width);

// The y-axis label turned 90 degrees, centred on `centre_y`, left edge at `x`; shrunk to fit
// `length` pixels. Returns the width it takes.
int draw_y_label(cv::Mat& img, const std::string& label, int x, int centre_y, int length);
int y_label_width(const std::string& label);

// Tick text with as many decimals as the tick step needs (0.625 for a step of 0.005).
std::string format_tick(double v, double step);

// Both axes are named on every chart, with units where the caller knows them; an unnamed axis
// is a caller's mistake, reported with the chart's path and title.
void require_axis_labels(const std::string& path, const std::string& title, const std::string& x_label,
                         const std::string& y_label);

// Encodes by the path's extension (PNG when it has none) and writes all or nothing; creates the
// parent directory. Throws embedflow::Error naming the path.
void write_image(const std::string& path, const cv::Mat& img);

}  // namespace embedflow::plot_style

namespace embedflow::plot_style {

// Ticks of one axis: pixel positions are computed by the chart, texts are already formatted.
struct Tick {
  double value;
  std::string text;
};

// Where the plot area sits in a chart `width` x `height` (plus `extra_right` pixels for a legend
// outside it): below the title, right of the y label and the widest y tick text.
struct Frame {
  int width = 0, height = 0;
  cv::Rect area;
  TitleLayout title;
};
Frame plan_frame(const std::string& title, const std::vector<Tick>& y_ticks, int width, int height, int extra_right);

// Grid, tick marks and texts, the axis box, the title and both axis labels. `px` / `py` map a
// tick value to an image column / row.
template <class PX, class PY>
void draw_frame(cv::Mat& img, const Frame& f, const std::vector<Tick>& x_ticks, const std::vector<Tick>& y_ticks,
                const std::string& x_label, const std::string& y_label, PX px, PY py);
void draw_frame_texts(cv::Mat& img, const Frame& f, const std::string& x_label, const std::string& y_label);

template <class PX, class PY>
void draw_frame(cv::Mat& img, const Frame& f, const std::vector<Tick>& x_ticks, const std::vector<Tick>& y_ticks,
                const std::string& x_label, const std::string& y_label, PX px, PY py) {
  const cv::Rect& a = f.area;
  for (const Tick& t : x_ticks) {
    const int x = px(t.value);
    cv::line(img, {x, a.y}, {x, a.y + a.height}, kGrid, 1, cv::LINE_AA);
    cv::line(img, {x, a.y + a.height}, {x, a.y + a.height + 6}, kAxis, 1, cv::LINE_AA);
    text(img, t.text, {x, a.y + a.height + 14}, kTickScale, 1, kInk, 0.5, 1.0);
  }
  for (const Tick& t : y_ticks) {
    const int y = py(t.value);
    cv::line(img, {a.x, y}, {a.x + a.width, y}, kGrid, 1, cv::LINE_AA);
    cv::line(img, {a.x - 6, y}, {a.x, y}, kAxis, 1, cv::LINE_AA);
    text(img, t.text, {a.x - 10, y}, kTickScale, 1, kInk, 1.0, 0.5);
  }
  draw_frame_texts(img, f, x_label, y_label);
}

}  // namespace embedflow::plot_style
