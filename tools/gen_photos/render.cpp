#include "render.hpp"

#include <algorithm>
#include <cmath>

#include <opencv2/imgproc.hpp>

#include "embedflow/rng.hpp"

namespace gen_photos {
namespace {

constexpr double kPi = 3.14159265358979323846;

// The generator of every random choice: SplitMix64 over a derived seed. std::uniform_*
// distributions are avoided because their output differs between standard libraries.
class Draw {
 public:
  explicit Draw(std::uint64_t seed) : state_(seed) {}
  std::uint64_t next() { return embedflow::mix64(state_ += 0x9e3779b97f4a7c15ULL); }
  double uniform() { return static_cast<double>(next() >> 11) * 0x1.0p-53; }
  double uniform(double lo, double hi) { return lo + (hi - lo) * uniform(); }
  int below(int n) { return static_cast<int>(uniform() * n); }

 private:
  std::uint64_t state_;
};

// HSV (h in degrees, s and v in [0, 1]) to BGR in [0, 255].
cv::Vec3d hsv(double h, double s, double v) {
  h = std::fmod(std::fmod(h, 360.0) + 360.0, 360.0);
  const double c = v * s, x = c * (1 - std::fabs(std::fmod(h / 60.0, 2.0) - 1)), m = v - c;
  double r = 0, g = 0, b = 0;
  if (h < 60) { r = c; g = x; }
  else if (h < 120) { r = x; g = c; }
  else if (h < 180) { g = c; b = x; }
  else if (h < 240) { g = x; b = c; }
  else if (h < 300) { r = x; b = c; }
  else { r = c; b = x; }
  return {(b + m) * 255, (g + m) * 255, (r + m) * 255};
}

double smoothstep(double a, double b, double x) {
  const double t = std::clamp((x - a) / (b - a), 0.0, 1.0);
  return t * t * (3 - 2 * t);
}

cv::Vec3d mix(const cv::Vec3d& a, const cv::Vec3d& b, double t) { return a * (1 - t) + b * t; }

// Degrees in (-180, 180].
double wrap(double d) {
  d = std::fmod(d + 180.0, 360.0);
  if (d < 0) d += 360.0;
  return d - 180.0;
}

}  // namespace

Scene make_scene(std::uint64_t seed, const std::string& key, bool street) {
  Draw d(embedflow::derive_seed(seed, "scene:" + key));
  Scene s;
  s.street = street;
  // One hue family per scene, so its photos share colours whatever the view.
  const double hue = d.uniform(0, 360);
  const double sat = street ? d.uniform(0.2, 0.6) : d.uniform(0.35, 0.8);
  const int n = street ? 9 + d.below(4) : 6 + d.below(4);
  const double hero = street ? -1 : d.uniform(0, 360);
  double az = d.uniform(0, 360);
  for (int i = 0; i < n; ++i) {
    Structure st;
    st.azimuth_deg = az;
    az += 360.0 / n * d.uniform(0.7, 1.3);
    st.width_deg = street ? d.uniform(22, 45) : d.uniform(18, 55);
    st.height_deg = street ? d.uniform(10, 30) : d.uniform(12, 40);
    st.layer = d.below(3);
    st.taper = d.uniform() < 0.3 ? d.uniform(0.05, 0.4) : 0.0;
    st.body = hsv(hue + d.uniform(-25, 25), sat * d.uniform(0.6, 1.2), d.uniform(0.35, 0.9));
    st.accent = hsv(hue + 180 + d.uniform(-40, 40), std::min(1.0, sat * 1.3), d.uniform(0.3, 0.95));
    st.window = hsv(hue + d.uniform(150, 210), d.uniform(0.1, 0.5), d.uniform(0.1, 0.6));
    st.roof = d.below(5);
    st.window_style = d.below(4);
    st.window_rows = 3 + d.below(12);
    st.window_cols = 2 + d.below(8);
    st.lit_seed = d.next();
    s.structures.push_back(st);
  }
  if (hero >= 0) {
    // The landmark itself: a tall structure with a distinctive top, nearest the viewer.
    Structure st;
    st.azimuth_deg = hero;
    st.width_deg = d.uniform(25, 45);
    st.height_deg = d.uniform(40, 65);
    st.layer = 2;
    st.taper = d.uniform(0, 0.5);
    st.body = hsv(hue + d.uniform(-10, 10), std::min(1.0, sat * 1.2), d.uniform(0.5, 0.95));
    st.accent = hsv(hue + 120 + d.uniform(-30, 30), 0.8, d.uniform(0.6, 1.0));
    st.window = hsv(hue + 180, 0.3, d.uniform(0.15, 0.5));
    st.roof = 2 + d.below(2);  // dome or spire
    st.window_style = d.below(4);
    st.window_rows = 6 + d.below(14);
    st.window_cols = 3 + d.below(6);
    st.lit_seed = d.next();
    s.structures.push_back(st);
  }
  std::stable_sort(s.structures.begin(), s.structures.end(),
                   [](const Structure& a, const Structure& b) { return a.layer < b.layer; });
  const int trees = street ? d.below(3) : 2 + d.below(6);
  for (int i = 0; i < trees; ++i) s.trees.push_back({d.uniform(0, 360), d.uniform(5, 12)});
  s.ground = street ? hsv(d.uniform(0, 360), d.uniform(0.05, 0.3), d.uniform(0.25, 0.55)) : hsv(hue + d.uniform(-60, 60), d.uniform(0.1, 0.4), d.uniform(0.3, 0.7));
  s.ground_line = hsv(hue + 90, 0.2, d.uniform(0.6, 0.9));
  return s;
}

double field_of_view_deg(double zoom) { return std::clamp(75.0 / zoom, 22.0, 110.0); }

View make_view(std::uint64_t seed, const std::string& key, double distance_m) {
  Draw d(embedflow::derive_seed(seed, "view:" + key));
  View v;
  v.heading_deg = d.uniform(0, 360);
  // Near the scene's centre the structures fill the frame; farther away they shrink.
  v.zoom = std::clamp(200.0 / (distance_m + 80.0), 0.6, 2.2) * d.uniform(0.85, 1.15);
  v.horizon = d.uniform(0.5, 0.72);
  v.roll_deg = d.uniform(-4, 4);
  for (double& c : v.corners) c = d.uniform(-0.06, 0.06);
  v.exposure = d.uniform(0.88, 1.12);
  v.noise_x = d.below(1 << 20);
  v.noise_y = d.below(1 << 20);
  const int people = d.below(5);
  for (int i = 0; i < people; ++i)
    v.people.push_back({d.uniform(0.05, 0.95), d.uniform(0.18, 0.45), d.uniform(0.86, 1.02),
                        hsv(d.uniform(0, 360), d.uniform(0.3, 0.9), d.uniform(0.2, 0.9))});
  const int vehicles = d.uniform() < 0.4 ? 1 + d.below(2) : 0;
  for (int i = 0; i < vehicles; ++i)
    v.vehicles.push_back({d.uniform(0.0, 0.8), d.uniform(0.22, 0.4), d.uniform(0.1, 0.17),
                          hsv(d.uniform(0, 360), d.uniform(0.2, 0.9), d.uniform(0.3, 0.95))});
  return v;
}

Light light_at(std::int64_t t) {
  // Local civil time: UTC-5, UTC-4 from March to October (close enough for lighting).
  const std::int64_t days = (t >= 0 ? t : t - 86399) / 86400;
  // Civil date from days since the epoch (Howard Hinnant's algorithm).
  const std::int64_t z = days + 719468;
  const std::int64_t era = (z >= 0 ? z : z - 146096) / 146097;
  const unsigned doe = static_cast<unsigned>(z - era * 146097);
  const unsigned yoe = (doe - doe / 1460 + doe / 36524 - doe / 146096) / 365;
  const unsigned doy_mar = doe - (365 * yoe + yoe / 4 - yoe / 100);
  const unsigned mp = (5 * doy_mar + 2) / 153;
  const unsigned month = mp < 10 ? mp + 3 : mp - 9;
  const double day_of_year = std::fmod(doy_mar + 59.0, 365.0);  // from 1 January, roughly
  // Solar time: UTC shifted by the longitude (74.0 W), not the civil time zone.
  const double solar_hour = std::fmod(static_cast<double>(t - days * 86400) / 3600.0 - 74.0 / 15.0 + 24.0, 24.0);

  Light L;
  L.season = month == 12 || month <= 2 ? 0 : month <= 5 ? 1 : month <= 8 ? 2 : 3;
  const double lat = 40.7 * kPi / 180;
  const double decl = 23.44 * kPi / 180 * std::sin(2 * kPi * (284.0 + day_of_year) / 365.0);
  const double hour_angle = (solar_hour - 12.0) * 15.0 * kPi / 180;
  L.sun_elevation_deg =
      std::asin(std::sin(lat) * std::sin(decl) + std::cos(lat) * std::cos(decl) * std::cos(hour_angle)) * 180 / kPi;
  const double e = L.sun_elevation_deg;
  const double day = smoothstep(-8, 12, e);    // 0 night, 1 full day
  const double golden = std::max(0.0, 1.0 - std::fabs(e - 3.0) / 9.0) * (e > -6 ? 1.0 : 0.0);
  L.brightness = 0.22 + 0.78 * day;
  L.tint = mix(cv::Vec3d(1.15, 0.85, 0.7), cv::Vec3d(1, 1, 1), day);           // moonlit blue at night
  L.tint = mix(L.tint, cv::Vec3d(0.7, 0.9, 1.15), golden);                      // warm low sun
  L.sky_top = mix(cv::Vec3d(45, 18, 8), cv::Vec3d(200, 130, 60), day);
  L.sky_horizon = mix(cv::Vec3d(70, 40, 25), cv::Vec3d(240, 215, 185), day);
  L.sky_horizon = mix(L.sky_horizon, cv::Vec3d(70, 150, 250), golden);
  L.sky_top = mix(L.sky_top, cv::Vec3d(140, 90, 90), golden * 0.6);
  if (L.season == 0) {
    // Winter: an overcast, greyer sky.
    const cv::Vec3d grey_top = cv::Vec3d::all((L.sky_top[0] + L.sky_top[1] + L.sky_top[2]) / 3);
    const cv::Vec3d grey_hor = cv::Vec3d::all((L.sky_horizon[0] + L.sky_horizon[1] + L.sky_horizon[2]) / 3);
    L.sky_top = mix(L.sky_top, grey_top, 0.6);
    L.sky_horizon = mix(L.sky_horizon, grey_hor, 0.6);
  }
  L.windows_lit = day < 0.5;
  return L;
}

cv::Mat make_noise(std::uint64_t seed, int width, int height) {
  // A texture of sensor noise with a little low-frequency grain; renders crop it at their
  // view's offset and add it around zero.
  cv::Mat n(2 * height, 2 * width, CV_8UC3);
  Draw d(embedflow::derive_seed(seed, "noise"));
  for (int y = 0; y < n.rows; ++y) {
    auto* p = n.ptr<std::uint8_t>(y);
    for (int x = 0; x < n.cols * 3; x += 8) {
      std::uint64_t bits = d.next();
      for (int k = 0; k < 8 && x + k < n.cols * 3; ++k, bits >>= 8) p[x + k] = static_cast<std::uint8_t>((bits & 0xff) % 13);
    }
  }
  cv::GaussianBlur(n, n, cv::Size(3, 3), 0.6);
  return n;
}

namespace {

cv::Scalar lit(const cv::Vec3d& albedo, const Light& L, double exposure) {
  const double b = L.brightness * exposure;
  return cv::Scalar(std::min(255.0, albedo[0] * b * L.tint[0]), std::min(255.0, albedo[1] * b * L.tint[1]),
                    std::min(255.0, albedo[2] * b * L.tint[2]));
}

// Fixed-point coordinates (4 fractional bits) so shapes move smoothly between views.
constexpr int kShift = 4;
cv::Point fp(double x, double y) { return cv::Point(static_cast<int>(std::lround(x * 16)), static_cast<int>(std::lround(y * 16))); }

void draw_structure(cv::Mat& img, const Structure& st, double cx, double px_per_deg, double base_y, const Light& L,
                    double exposure) {
  const double w = st.width_deg * px_per_deg, h = st.height_deg * px_per_deg;
  const double top_w = w * (1 - st.taper);
  const double left = cx - w / 2, right = cx + w / 2, top = base_y - h;
  const cv::Point body[4] = {fp(left, base_y), fp(right, base_y), fp(cx + top_w / 2, top), fp(cx - top_w / 2, top)};
  cv::fillConvexPoly(img, body, 4, lit(st.body, L, exposure), cv::LINE_8, kShift);
  const cv::Scalar accent = lit(st.accent, L, exposure);
  switch (st.roof) {
    case 0: {  // flat with a cornice
      cv::rectangle(img, fp(cx - top_w / 2 - 2, top - h * 0.03), fp(cx + top_w / 2 + 2, top + h * 0.02), accent, cv::FILLED,
                    cv::LINE_8, kShift);
      break;
    }
    case 1: {  // gable
      const cv::Point roof[3] = {fp(cx - top_w / 2, top), fp(cx + top_w / 2, top), fp(cx, top - top_w * 0.35)};
      cv::fillConvexPoly(img, roof, 3, accent, cv::LINE_8, kShift);
      break;
    }
    case 2: {  // dome
      cv::ellipse(img, fp(cx, top), cv::Size(static_cast<int>(top_w * 0.4 * 16), static_cast<int>(top_w * 0.35 * 16)), 0, 180,
                  360, accent, cv::FILLED, cv::LINE_8, kShift);
      break;
    }
    case 3: {  // spire
      const cv::Point roof[3] = {fp(cx - top_w * 0.15, top), fp(cx + top_w * 0.15, top), fp(cx, top - h * 0.45)};
      cv::fillConvexPoly(img, roof, 3, accent, cv::LINE_8, kShift);
      break;
    }
    default: {  // setback
      cv::rectangle(img, fp(cx - top_w * 0.3, top - h * 0.18), fp(cx + top_w * 0.3, top), lit(st.body * 0.85, L, exposure),
                    cv::FILLED, cv::LINE_8, kShift);
      cv::rectangle(img, fp(cx - top_w * 0.3, top - h * 0.2), fp(cx + top_w * 0.3, top - h * 0.17), accent, cv::FILLED,
                    cv::LINE_8, kShift);
    }
  }
  // Windows: a grid inside the body, shrunk with the taper.
  const double cell_h = h * 0.9 / st.window_rows;
  if (cell_h < 2.5) return;
  const cv::Scalar dark = lit(st.window, L, exposure);
  const cv::Scalar glow(90, 200, 255);
  for (int r = 0; r < st.window_rows; ++r) {
    const double y0 = base_y - h * 0.05 - (r + 1) * cell_h;
    const double frac = (base_y - y0) / h;
    const double row_w = (w + (top_w - w) * frac) * 0.86;
    const double cell_w = row_w / st.window_cols;
    if (cell_w < 2.5) continue;
    if (st.window_style == 2) {  // horizontal bands
      cv::rectangle(img, fp(cx - row_w / 2, y0 + cell_h * 0.3), fp(cx + row_w / 2, y0 + cell_h * 0.75), dark, cv::FILLED, cv::LINE_8,
                    kShift);
      continue;
    }
    for (int c = 0; c < st.window_cols; ++c) {
      const double x0 = cx - row_w / 2 + c * cell_w;
      const bool on = L.windows_lit && (embedflow::mix64(st.lit_seed + r * 131 + c) & 3) != 0;
      const cv::Scalar colour = on ? glow : dark;
      if (st.window_style == 1) {  // vertical bands: one tall slit per column, drawn once
        if (r == 0)
          cv::rectangle(img, fp(x0 + cell_w * 0.35, base_y - h * 0.92), fp(x0 + cell_w * 0.65, base_y - h * 0.05), colour,
                        cv::FILLED, cv::LINE_8, kShift);
        continue;
      }
      cv::rectangle(img, fp(x0 + cell_w * 0.2, y0 + cell_h * 0.25), fp(x0 + cell_w * 0.8, y0 + cell_h * 0.85), colour, cv::FILLED,
                    cv::LINE_8, kShift);
      if (st.window_style == 3)  // arched tops
        cv::ellipse(img, fp(x0 + cell_w * 0.5, y0 + cell_h * 0.25), cv::Size(static_cast<int>(cell_w * 0.3 * 16), static_cast<int>(cell_h * 0.15 * 16)),
                    0, 180, 360, colour, cv::FILLED, cv::LINE_8, kShift);
    }
  }
}

}  // namespace

cv::Mat render(const Scene& scene, const View& v, const Light& L, int W, int H, const cv::Mat& noise) {
  cv::Mat img(H, W, CV_8UC3);
  const double horizon = v.horizon * H;
  const double fov = field_of_view_deg(v.zoom);
  const double px_per_deg = W / fov;
  const double ex = v.exposure;

  // Sky: a vertical gradient from the zenith colour to the horizon colour.
  const int hy = static_cast<int>(horizon);
  for (int y = 0; y < std::min(hy + 1, H); ++y) {
    const cv::Vec3d c = mix(L.sky_top, L.sky_horizon, std::pow(static_cast<double>(y) / std::max(1, hy), 1.5)) * ex;
    img.row(y).setTo(cv::Scalar(std::min(255.0, c[0]), std::min(255.0, c[1]), std::min(255.0, c[2])));
  }
  // Ground, with snow in winter, and perspective lines towards the vanishing point.
  cv::Vec3d ground = scene.ground;
  if (L.season == 0) ground = mix(ground, cv::Vec3d(235, 235, 230), 0.45);
  if (hy + 1 < H) img.rowRange(hy + 1, H).setTo(lit(ground, L, ex));
  const cv::Scalar line = lit(scene.ground_line, L, ex);
  for (int k = 1; k < 9; ++k) {
    const double y = horizon + (H - horizon) * (k * k) / 64.0;
    cv::line(img, fp(0, y), fp(W, y), line, 1, cv::LINE_8, kShift);
  }
  for (int k = -4; k <= 4; ++k) {
    const double x_far = W / 2.0 + wrap(-v.heading_deg) * px_per_deg * 0.05 + k * 6;
    cv::line(img, fp(x_far, horizon), fp(W / 2.0 + k * W * 0.4, H), line, 1, cv::LINE_8, kShift);
  }

  // Structures, far layers first; nearer layers stand lower on the ground.
  for (const Structure& st : scene.structures) {
    const double d = wrap(st.azimuth_deg - v.heading_deg);
    if (std::fabs(d) > fov / 2 + st.width_deg) continue;
    const double cx = W / 2.0 + d * px_per_deg;
    const double base = horizon + st.layer * 0.035 * H * v.zoom;
    draw_structure(img, st, cx, px_per_deg, base, L, ex);
  }
  // Trees: trunk and a crown whose colour follows the season (bare branches in winter).
  static const cv::Vec3d kCrown[4] = {{60, 70, 80}, {90, 200, 120}, {40, 140, 40}, {30, 110, 210}};
  for (const Tree& t : scene.trees) {
    const double d = wrap(t.azimuth_deg - v.heading_deg);
    if (std::fabs(d) > fov / 2 + t.size_deg) continue;
    const double cx = W / 2.0 + d * px_per_deg, s = t.size_deg * px_per_deg;
    const double base = horizon + 0.1 * H * v.zoom;
    cv::rectangle(img, fp(cx - s * 0.06, base - s * 0.8), fp(cx + s * 0.06, base), lit({40, 60, 90}, L, ex), cv::FILLED, cv::LINE_8,
                  kShift);
    if (L.season == 0) {
      for (int b = -2; b <= 2; ++b)
        cv::line(img, fp(cx, base - s * 0.6), fp(cx + b * s * 0.2, base - s * (1.1 - 0.05 * b * b)), lit({50, 60, 80}, L, ex), 2,
                 cv::LINE_8, kShift);
    } else {
      cv::circle(img, fp(cx, base - s * 1.0), static_cast<int>(s * 0.45 * 16), lit(kCrown[L.season], L, ex), cv::FILLED, cv::LINE_8,
                 kShift);
    }
  }
  // Occluders in the foreground: vehicles, then people.
  for (const auto& c : v.vehicles) {
    const double x0 = c.x * W, w = c.width * W, h = c.height * H, y1 = H * 0.99, y0 = y1 - h;
    cv::rectangle(img, fp(x0, y0 + h * 0.35), fp(x0 + w, y1 - h * 0.12), lit(c.colour, L, ex), cv::FILLED, cv::LINE_8, kShift);
    cv::rectangle(img, fp(x0 + w * 0.2, y0), fp(x0 + w * 0.75, y0 + h * 0.4), lit(c.colour * 0.9, L, ex), cv::FILLED, cv::LINE_8,
                  kShift);
    cv::rectangle(img, fp(x0 + w * 0.25, y0 + h * 0.06), fp(x0 + w * 0.7, y0 + h * 0.34), lit({70, 50, 40}, L, ex), cv::FILLED,
                  cv::LINE_8, kShift);
    for (double wx : {0.2, 0.8})
      cv::circle(img, fp(x0 + w * wx, y1 - h * 0.12), static_cast<int>(h * 0.16 * 16), cv::Scalar(20, 20, 20), cv::FILLED, cv::LINE_8,
                 kShift);
  }
  for (const auto& p : v.people) {
    const double x = p.x * W, h = p.height * H, feet = p.feet * H;
    cv::rectangle(img, fp(x - h * 0.12, feet - h * 0.8), fp(x + h * 0.12, feet - h * 0.35), lit(p.colour, L, ex), cv::FILLED, cv::LINE_8,
                  kShift);
    cv::rectangle(img, fp(x - h * 0.1, feet - h * 0.36), fp(x + h * 0.1, feet), lit({70, 50, 40}, L, ex), cv::FILLED, cv::LINE_8,
                  kShift);
    cv::circle(img, fp(x, feet - h * 0.9), static_cast<int>(h * 0.1 * 16), lit({120, 160, 210}, L, ex), cv::FILLED, cv::LINE_8, kShift);
  }

  // The camera: roll and a perspective distortion, then sensor noise.
  const cv::Point2f src[4] = {{0, 0}, {static_cast<float>(W), 0}, {static_cast<float>(W), static_cast<float>(H)}, {0, static_cast<float>(H)}};
  cv::Point2f dst[4];
  const double cr = std::cos(v.roll_deg * kPi / 180), sr = std::sin(v.roll_deg * kPi / 180);
  for (int i = 0; i < 4; ++i) {
    const double x = src[i].x + v.corners[2 * i] * W - W / 2.0, y = src[i].y + v.corners[2 * i + 1] * H - H / 2.0;
    // Scaled up a little so the distorted frame still covers the image.
    dst[i] = cv::Point2f(static_cast<float>(W / 2.0 + 1.12 * (cr * x - sr * y)), static_cast<float>(H / 2.0 + 1.12 * (sr * x + cr * y)));
  }
  cv::Mat out;
  cv::warpPerspective(img, out, cv::getPerspectiveTransform(src, dst), img.size(), cv::INTER_LINEAR, cv::BORDER_REFLECT);
  const int nx = v.noise_x % (noise.cols - W), ny = v.noise_y % (noise.rows - H);
  cv::add(out, noise(cv::Rect(nx, ny, W, H)), out);
  cv::subtract(out, cv::Scalar::all(6), out);
  return out;
}

}  // namespace gen_photos
