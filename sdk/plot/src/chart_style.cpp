#include "chart_style.hpp"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <filesystem>
#include <opencv2/imgcodecs.hpp>
#include <opencv2/imgproc.hpp>
#include <sstream>

#include "embedflow/atomic_file.hpp"
#include "embedflow/error.hpp"

namespace embedflow::plot_style {

void text(cv::Mat& img, const std::string& s, cv::Point at, double scale, int thickness, cv::Scalar color,
          double align_x, double align_y) {
  int base = 0;
  const cv::Size sz = cv::getTextSize(s, kFont, scale, thickness, &base);
  cv::putText(img, s, {at.x - static_cast<int>(align_x * sz.width), at.y + static_cast<int>(align_y * sz.height)},
              kFont, scale, color, thickness, cv::LINE_AA);
}

int text_width(const std::string& s, double scale, int thickness) {
  int base = 0;
  return cv::getTextSize(s, kFont, scale, thickness, &base).width;
}

namespace {

int line_height_of(double scale, int thickness) {
  int base = 0;
  const cv::Size sz = cv::getTextSize("Ag", kFont, scale, thickness, &base);
  return sz.height + base + 6;
}

// Greedy word wrap; a word wider than the line is cut where it overflows.
std::vector<std::string> wrap(const std::string& s, double scale, int thickness, int width) {
  std::vector<std::string> words, lines;
  std::istringstream in(s);
  for (std::string w; in >> w;) words.push_back(w);
  std::string line;
  auto flush = [&] {
    if (!line.empty()) lines.push_back(line);
    line.clear();
  };
  for (std::string word : words) {
    const std::string joined = line.empty() ? word : line + " " + word;
    if (text_width(joined, scale, thickness) <= width) {
      line = joined;
      continue;
    }
    flush();
    while (text_width(word, scale, thickness) > width && word.size() > 1) {
      std::size_t n = word.size() - 1;
      while (n > 1 && text_width(word.substr(0, n), scale, thickness) > width) --n;
      lines.push_back(word.substr(0, n));
      word = word.substr(n);
    }
    line = word;
  }
  flush();
  return lines;
}

}  // namespace

TitleLayout layout_title(const std::string& title, int width) {
  TitleLayout t;
  const int room = std::max(40, width - 20);
  if (title.empty()) return t;
  for (double scale = 0.75; scale >= 0.5 - 1e-9; scale -= 0.05) {
    const int thickness = scale >= 0.6 ? 2 : 1;
    if (text_width(title, scale, thickness) <= room) {
      t.lines = {title};
      t.scale = scale, t.thickness = thickness, t.line_height = line_height_of(scale, thickness);
      return t;
    }
  }
  t.scale = 0.5, t.thickness = 1, t.line_height = line_height_of(0.5, 1);
  t.lines = wrap(title, t.scale, t.thickness, room);
  return t;
}

void draw_title(cv::Mat& img, const TitleLayout& title, int top) {
  for (std::size_t i = 0; i < title.lines.size(); ++i)
    text(img, title.lines[i], {img.cols / 2, top + static_cast<int>(i) * title.line_height + title.line_height - 6},
         title.scale, title.thickness, kInk, 0.5, 0.0);
}

double fitting_scale(const std::string& s, double scale, int width) {
  while (scale > 0.35 && text_width(s, scale) > width) scale -= 0.05;
  return scale;
}

int y_label_width(const std::string& label) { return label.empty() ? 0 : line_height_of(kLabelScale, 1); }

int draw_y_label(cv::Mat& img, const std::string& label, int x, int centre_y, int length) {
  if (label.empty()) return 0;
  const double scale = fitting_scale(label, kLabelScale, length);
  int base = 0;
  const cv::Size sz = cv::getTextSize(label, kFont, scale, 1, &base);
  cv::Mat strip(sz.height + base + 6, sz.width + 6, CV_8UC3, kWhite);
  cv::putText(strip, label, {3, sz.height + 3}, kFont, scale, kInk, 1, cv::LINE_AA);
  cv::Mat rotated;
  cv::rotate(strip, rotated, cv::ROTATE_90_COUNTERCLOCKWISE);
  const cv::Rect where(x, std::max(0, centre_y - rotated.rows / 2), rotated.cols, rotated.rows);
  const cv::Rect inside = where & cv::Rect(0, 0, img.cols, img.rows);
  rotated(cv::Rect(0, 0, inside.width, inside.height)).copyTo(img(inside));
  return rotated.cols;
}

std::string format_tick(double v, double step) {
  char buf[32];
  const int decimals = step >= 1 ? 0 : std::min(6, static_cast<int>(std::ceil(-std::log10(step) - 1e-9)));
  std::snprintf(buf, sizeof buf, "%.*f", decimals, v);
  return buf;
}

void require_axis_labels(const std::string& path, const std::string& title, const std::string& x_label,
                         const std::string& y_label) {
  if (x_label.empty() || y_label.empty())
    throw Error(cat("chart '", title, "' (", path, ") needs both axis labels; got x '", x_label, "', y '", y_label, "'"));
}

void write_image(const std::string& path, const cv::Mat& img) {
  const std::filesystem::path p(path);
  if (p.has_parent_path()) std::filesystem::create_directories(p.parent_path());
  std::vector<unsigned char> encoded;
  bool ok = false;
  const std::string ext = p.extension().string();
  try {
    ok = cv::imencode(ext.empty() ? ".png" : ext, img, encoded);
  } catch (const cv::Exception& e) {
    throw Error(cat("cannot write plot '", path, "': ", e.what()));
  }
  if (!ok) throw Error(cat("cannot write plot '", path, "'"));
  write_file_atomic(path, std::string_view(reinterpret_cast<const char*>(encoded.data()), encoded.size()));
}

}  // namespace embedflow::plot_style

namespace embedflow::plot_style {

Frame plan_frame(const std::string& title, const std::vector<Tick>& y_ticks, int width, int height, int extra_right) {
  Frame f;
  f.width = width + extra_right;
  f.height = height;
  f.title = layout_title(title, f.width);
  int widest_tick = 0;
  for (const Tick& t : y_ticks) widest_tick = std::max(widest_tick, text_width(t.text, kTickScale));
  // y label, a gap, the tick texts, the tick marks.
  const int left = std::max(90, 8 + y_label_width("y") + 8 + widest_tick + 16);
  const int top = std::max(60, 12 + f.title.height() + 24), bottom = 75, right = 30 + extra_right;
  f.area = cv::Rect(left, top, std::max(40, f.width - left - right), std::max(40, height - top - bottom));
  return f;
}

void draw_frame_texts(cv::Mat& img, const Frame& f, const std::string& x_label, const std::string& y_label) {
  const cv::Rect& a = f.area;
  cv::rectangle(img, a, kAxis, 1, cv::LINE_AA);
  draw_title(img, f.title, 12);
  const double x_scale = fitting_scale(x_label, kLabelScale, f.width - 20);
  int base = 0;
  const int x_label_w = cv::getTextSize(x_label, kFont, x_scale, 1, &base).width;
  // Centred under the plot area, moved left or right as far as needed to stay in the image.
  const int x_centre = std::clamp(a.x + a.width / 2, 10 + x_label_w / 2, f.width - 10 - x_label_w / 2);
  text(img, x_label, {x_centre, f.height - 22}, x_scale, 1, kInk, 0.5, 0.0);
  // Up to 30 pixels past either end of the plot area: still clear of the title and the x label.
  draw_y_label(img, y_label, 8, a.y + a.height / 2, a.height + 60);
}

}  // namespace embedflow::plot_style
