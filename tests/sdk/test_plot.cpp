// embedflow::plot's one chart style, checked on the pixels of the PNG read back with OpenCV:
// a long title stays inside the image, a narrow band of data fills the plot height, a legend
// never covers the data (an empty corner inside, else outside the plot area), bars are as tall
// as their values say, and a chart without axis labels is refused.
#include <catch2/catch.hpp>

#include <cmath>
#include <opencv2/imgcodecs.hpp>

#include "cli.hpp"
#include "embedflow/error.hpp"
#include "embedflow/plot/bar_chart.hpp"
#include "embedflow/plot/line_chart.hpp"
#include "embedflow/plot/png.hpp"

using namespace embedflow;
namespace fs = std::filesystem;

namespace {

// Text and the axis box are drawn near-black; no series colour and no grid line is that dark.
bool dark(const cv::Vec3b& p) { return p[0] < 90 && p[1] < 90 && p[2] < 90; }
bool white(const cv::Vec3b& p) { return p[0] > 245 && p[1] > 245 && p[2] > 245; }
// Near a palette colour (BGR), anti-aliased edges left out.
bool near(const cv::Vec3b& p, cv::Vec3b c) {
  return std::abs(p[0] - c[0]) < 30 && std::abs(p[1] - c[1]) < 30 && std::abs(p[2] - c[2]) < 30;
}
const cv::Vec3b kFirstColour(180, 119, 31);

// The plot area's box: the rows and columns holding a run of dark pixels longer than a third of
// the image (text never draws a run that long; grid lines are light grey).
struct Box {
  int left = -1, right = -1, top = -1, bottom = -1;
};
int longest_run(const cv::Mat& img, int fixed, bool row) {
  int best = 0, run = 0;
  const int n = row ? img.cols : img.rows;
  for (int i = 0; i < n; ++i) {
    const bool d = dark(row ? img.at<cv::Vec3b>(fixed, i) : img.at<cv::Vec3b>(i, fixed));
    run = d ? run + 1 : 0;
    best = std::max(best, run);
  }
  return best;
}
Box plot_box(const cv::Mat& img) {
  Box b;
  for (int y = 0; y < img.rows; ++y)
    if (longest_run(img, y, true) > img.cols / 3) {
      if (b.top < 0) b.top = y;
      b.bottom = y;
    }
  for (int x = 0; x < img.cols; ++x)
    if (longest_run(img, x, false) > img.rows / 3) {
      if (b.left < 0) b.left = x;
      b.right = x;
    }
  return b;
}

cv::Mat draw(const LineChart& chart, const std::string& name) {
  const fs::path path = test::scratch_dir("plot") / (name + ".png");
  save_line_chart(path.string(), chart);
  cv::Mat img = cv::imread(path.string(), cv::IMREAD_COLOR);
  REQUIRE(!img.empty());
  return img;
}

LineChart labelled(std::string title = "chart") {
  LineChart c;
  c.title = std::move(title);
  c.x_label = "step";
  c.y_label = "loss";
  return c;
}

}  // namespace

TEST_CASE("plot: a very long title is wrapped inside the image", "[plot]") {
  std::string title;
  for (int i = 0; i < 30; ++i) title += "siamese p=0." + std::to_string(i) + " margin 0.5 ";
  LineChart c = labelled(title);
  c.series.push_back({"a", {0, 1, 2}, {1, 2, 3}});
  const cv::Mat img = draw(c, "long_title");
  const Box b = plot_box(img);
  REQUIRE(b.top > 0);
  // The title is everything drawn above the plot box (less the top tick text's half height).
  int x0 = img.cols, x1 = -1, y0 = img.rows, y1 = -1;
  for (int y = 0; y < b.top - 12; ++y)
    for (int x = 0; x < img.cols; ++x)
      if (!white(img.at<cv::Vec3b>(y, x))) x0 = std::min(x0, x), x1 = std::max(x1, x), y0 = std::min(y0, y), y1 = std::max(y1, y);
  REQUIRE(x1 >= 0);
  CHECK(x0 > 0);
  CHECK(x1 < img.cols - 1);
  CHECK(y0 > 0);
  // Far wider than the image on one line, so it must take several lines (each ~20 pixels).
  CHECK(y1 - y0 > 60);
}

TEST_CASE("plot: data in a narrow y band fills most of the plot height", "[plot]") {
  LineChart c = labelled("band");
  PlotSeries s{"metric", {}, {}};
  for (int i = 0; i <= 400; ++i) {  // four periods between 0.62 and 0.64
    const double x = i / 400.0;
    s.x.push_back(x), s.y.push_back(0.63 + 0.01 * std::sin(2 * M_PI * 4 * x));
  }
  c.series.push_back(s);
  const cv::Mat img = draw(c, "band");
  const Box b = plot_box(img);
  REQUIRE(b.bottom - b.top > 100);
  // Columns in the middle of the plot hold a whole period and no legend (legends sit in a corner
  // or outside, and this one is narrow).
  int y0 = img.rows, y1 = -1;
  const int w = b.right - b.left;
  for (int x = b.left + w * 3 / 10; x < b.left + w * 6 / 10; ++x)
    for (int y = b.top + 1; y < b.bottom; ++y)
      if (near(img.at<cv::Vec3b>(y, x), kFirstColour)) y0 = std::min(y0, y), y1 = std::max(y1, y);
  REQUIRE(y1 > 0);
  // 0.62..0.64 on a fitted axis spans ~90% of the height; on a 0..1 axis it would be 2%.
  CHECK(y1 - y0 > 0.8 * (b.bottom - b.top));
}

TEST_CASE("plot: the legend takes an empty corner, never one the data crosses", "[plot]") {
  // A falling line crosses the upper-left and lower-right corners; the legend must sit in one of
  // the two others.
  LineChart c = labelled("falling");
  c.series.push_back({"falling", {0, 1}, {1, 0}});
  c.series.push_back({"falling too", {0, 1}, {0.95, -0.05}});
  const cv::Mat img = draw(c, "corner");
  const Box b = plot_box(img);
  REQUIRE(b.right > b.left);
  // Legend text: dark pixels strictly inside the plot box.
  int x0 = img.cols, x1 = -1, y0 = img.rows, y1 = -1;
  for (int y = b.top + 2; y < b.bottom - 1; ++y)
    for (int x = b.left + 2; x < b.right - 1; ++x)
      if (dark(img.at<cv::Vec3b>(y, x))) x0 = std::min(x0, x), x1 = std::max(x1, x), y0 = std::min(y0, y), y1 = std::max(y1, y);
  REQUIRE(x1 >= 0);
  // By hand: y runs over [-0.05, 1] padded by 5% of its range; the lines' rows at each column of
  // the legend text must miss the text's rows.
  const double lo = -0.05 - 0.0525, hi = 1 + 0.0525;
  for (int x = x0; x <= x1; ++x) {
    const double t = static_cast<double>(x - b.left) / (b.right - b.left);
    for (double y : {1 - t, 0.95 - t}) {
      const double row = b.bottom - (y - lo) / (hi - lo) * (b.bottom - b.top);
      INFO("column " << x << ": line at row " << row << ", legend text rows " << y0 << ".." << y1);
      CHECK((row < y0 - 4 || row > y1 + 4));
    }
  }
}

TEST_CASE("plot: many series put the legend outside the plot area, in columns that fit", "[plot]") {
  // Flat lines from bottom to top: every corner of the plot area is crossed.
  LineChart c = labelled("forty series");
  for (int k = 0; k < 40; ++k) c.series.push_back({"series " + std::to_string(k), {0, 1}, {double(k), double(k)}});
  const cv::Mat img = draw(c, "many");
  const Box b = plot_box(img);
  REQUIRE(b.right > b.left);
  // No legend text over the data: nothing dark strictly inside the plot box.
  int inside = 0;
  for (int y = b.top + 2; y < b.bottom - 1; ++y)
    for (int x = b.left + 2; x < b.right - 1; ++x) inside += dark(img.at<cv::Vec3b>(y, x));
  CHECK(inside == 0);
  // The legend right of the box: names (dark) and the first colour's swatch, all in the image.
  int text = 0, swatch = 0, lowest = 0, rightmost = 0;
  for (int y = 0; y < img.rows; ++y)
    for (int x = b.right + 2; x < img.cols; ++x) {
      const cv::Vec3b p = img.at<cv::Vec3b>(y, x);
      if (dark(p)) ++text, lowest = std::max(lowest, y), rightmost = std::max(rightmost, x);
      swatch += near(p, kFirstColour);
    }
  CHECK(text > 500);
  CHECK(swatch > 20);
  CHECK(lowest < img.rows - 1);
  CHECK(rightmost < img.cols - 1);
}

TEST_CASE("plot: bars are as tall as their values, on an axis starting at 0", "[plot]") {
  BarChart c;
  c.title = "pair distances";
  c.x_label = "distance (m)";
  c.y_label = "sampled pairs";
  c.lo = 0, c.hi = 400;
  c.values = {10, 40, 20, 0};
  const fs::path path = test::scratch_dir("plot") / "bars.png";
  save_bar_chart(path.string(), c);
  const cv::Mat img = cv::imread(path.string(), cv::IMREAD_COLOR);
  REQUIRE(!img.empty());
  const Box b = plot_box(img);
  REQUIRE(b.right > b.left);
  const int w = b.right - b.left, h = b.bottom - b.top;
  auto bar_height = [&](int bin) {  // coloured rows in the bin's middle column
    const int x = b.left + w * (2 * bin + 1) / 8;
    int n = 0;
    for (int y = b.top; y <= b.bottom; ++y) n += near(img.at<cv::Vec3b>(y, x), kFirstColour);
    return n;
  };
  // The axis tops out at 40 * 1.05.
  CHECK(bar_height(1) == Approx(h / 1.05).margin(3));
  CHECK(bar_height(0) == Approx(h / 1.05 / 4).margin(3));
  CHECK(bar_height(2) == Approx(h / 1.05 / 2).margin(3));
  CHECK(bar_height(3) == 0);
}

TEST_CASE("plot: a chart without both axis labels is refused", "[plot]") {
  LineChart c = labelled("no y label");
  c.y_label.clear();
  c.series.push_back({"a", {0, 1}, {0, 1}});
  const fs::path path = test::scratch_dir("plot") / "unlabelled.png";
  CHECK_THROWS_AS(save_line_chart(path.string(), c), Error);
  CHECK(!fs::exists(path));
  BarChart bars;
  bars.x_label = "distance (m)";
  CHECK_THROWS_AS(save_bar_chart(path.string(), bars), Error);
}

TEST_CASE("plot: save_png writes RGB and BGR pixels of one image as the same PNG bytes", "[plot]") {
  // A 3 x 2 image with distinct channel values, once in RGB and once in BGR byte order.
  const int h = 3, w = 2;
  std::vector<std::uint8_t> rgb(h * w * 3), bgr(h * w * 3);
  for (int i = 0; i < h * w; ++i) {
    const std::uint8_t r = static_cast<std::uint8_t>(40 * i), g = static_cast<std::uint8_t>(200 - 30 * i), b = 7;
    rgb[3 * i] = r, rgb[3 * i + 1] = g, rgb[3 * i + 2] = b;
    bgr[3 * i] = b, bgr[3 * i + 1] = g, bgr[3 * i + 2] = r;
  }
  const fs::path dir = test::scratch_dir("plot");
  save_png((dir / "rgb.png").string(), rgb.data(), h, w, 3);
  save_png((dir / "sub" / "bgr.png").string(), bgr.data(), h, w, 3, PixelOrder::bgr);  // parent created
  CHECK(test::read_file(dir / "rgb.png") == test::read_file(dir / "sub" / "bgr.png"));
  const cv::Mat back = cv::imread((dir / "rgb.png").string(), cv::IMREAD_COLOR);  // BGR
  REQUIRE(back.rows == h);
  REQUIRE(back.cols == w);
  CHECK(back.at<cv::Vec3b>(1, 0)[2] == rgb[3 * 2]);  // red of pixel (1, 0)
  CHECK(back.at<cv::Vec3b>(1, 0)[0] == 7);
  CHECK_THROWS_AS(save_png((dir / "two.png").string(), rgb.data(), h, w, 2), Error);
}

