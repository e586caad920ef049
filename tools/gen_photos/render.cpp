#include "render.hpp"

#include <algorithm>
#include <cmath>

#include <opencv2/imgproc.hpp>

#include "embedflow/rng.hpp"

namespace gen_photos {

std::uint64_t Draw::next() { return embedflow::mix64(state_ += 0x9e3779b97f4a7c15ULL); }

double Draw::normal() {
  const double u1 = 1.0 - uniform(), u2 = uniform();
  return std::sqrt(-2.0 * std::log(u1)) * std::cos(2 * 3.14159265358979323846 * u2);
}

namespace {

constexpr double kPi = 3.14159265358979323846;
constexpr double kDeg = kPi / 180.0;

cv::Vec3d mix(const cv::Vec3d& a, const cv::Vec3d& b, double t) { return a * (1 - t) + b * t; }

double smoothstep(double a, double b, double x) {
  const double t = std::clamp((x - a) / (b - a), 0.0, 1.0);
  return t * t * (3 - 2 * t);
}

// BGR albedos of common facade materials (sRGB, 0-255), and of accents (roofs, crowns, trim).
const cv::Vec3d kMaterials[] = {
    {52, 66, 150},    // red brick
    {60, 78, 112},    // brownstone
    {165, 190, 206},  // limestone
    {150, 150, 146},  // concrete
    {150, 128, 104},  // blue-grey glass
    {205, 212, 216},  // white terracotta
    {105, 165, 200},  // buff brick
    {88, 86, 90},     // dark granite
    {120, 140, 160},  // sandstone
};
const cv::Vec3d kAccents[] = {
    {150, 170, 80},   // verdigris copper
    {60, 170, 215},   // gilding
    {50, 60, 80},     // dark bronze
    {225, 228, 230},  // white stone
    {55, 60, 170},    // red paint
    {160, 160, 165},  // steel
};

}  // namespace

Palette make_palette(std::uint64_t seed, const std::string& region) {
  Draw d(embedflow::derive_seed(seed, "palette:" + region));
  Palette p;
  int picks[3];
  for (int k = 0; k < 3; ++k) {
    int m;
    do m = d.below(static_cast<int>(std::size(kMaterials)));
    while ((k > 0 && m == picks[0]) || (k > 1 && m == picks[1]));
    picks[k] = m;
    p.materials[k] = kMaterials[m] * d.uniform(0.85, 1.1);
  }
  p.glass = cv::Vec3d(70, 60, 52) * d.uniform(0.8, 1.3);
  p.ground = cv::Vec3d::all(d.uniform(120, 175)) + cv::Vec3d(d.uniform(-8, 8), 0, d.uniform(-8, 8));
  p.height_scale = d.uniform(0.6, 1.6);
  return p;
}

namespace {

Facade make_facade(Draw& d, const cv::Vec3d& wall, const cv::Vec3d& trim, const cv::Vec3d& glass, int style) {
  Facade f;
  f.wall = wall;
  f.trim = trim;
  f.glass = glass * d.uniform(0.8, 1.2);
  f.style = style;
  f.floor_m = d.uniform(3.0, 4.5);
  f.bay_m = d.uniform(2.2, 6.0);
  f.win_w = d.uniform(0.3, 0.75);
  f.win_h = d.uniform(0.35, 0.7);
  f.base_m = d.uniform(3.5, 7.0);
  f.lit_seed = d.next();
  return f;
}

Part box(double cx, double cy, double hw, double hd, double angle, double z0, double z1, int facade) {
  Part p;
  p.cx = cx; p.cy = cy; p.hw = hw; p.hd = hd; p.angle_deg = angle; p.z0 = z0; p.z1 = z1;
  for (int& f : p.facade) f = facade;
  return p;
}

void finish(Building& b) {
  const Part& p = b.parts.front();
  b.cx = p.cx;
  b.cy = p.cy;
  b.radius = std::hypot(p.hw, p.hd);
}

// A district building: a box of the palette's materials, sometimes with a setback.
Building district_building(Draw& d, const Palette& pal, double cx, double cy, double hw, double hd, double angle, double height) {
  Building b;
  const cv::Vec3d wall = pal.materials[d.below(3)] * d.uniform(0.8, 1.15);
  const cv::Vec3d trim = d.uniform() < 0.5 ? pal.materials[d.below(3)] * d.uniform(0.7, 1.0) : wall * d.uniform(0.6, 0.85);
  b.facades.push_back(make_facade(d, wall, trim, pal.glass, d.below(5)));
  b.parts.push_back(box(cx, cy, hw, hd, angle, 0, height, 0));
  if (height > 30 && d.uniform() < 0.35) b.parts.push_back(box(cx, cy, hw * 0.7, hd * 0.7, angle, height, height * d.uniform(1.15, 1.4), 0));
  finish(b);
  return b;
}

}  // namespace

Scene make_landmark_scene(std::uint64_t seed, const std::string& key, const Palette& pal, double grid_deg, bool venue) {
  Draw d(embedflow::derive_seed(seed, "scene:" + key));
  Scene s;
  s.ground = pal.ground;
  s.frame_bearing_deg = 0;
  const double angle = 90.0 - grid_deg;  // the grid's avenues run along the boxes' a axis
  // The landmark: four different sides over one body material, a distinctive top.
  const double hw = venue ? d.uniform(6, 14) : d.uniform(12, 32), hd = venue ? d.uniform(6, 14) : d.uniform(12, 32);
  const double height = venue ? d.uniform(10, 30) : d.uniform(45, 150) * std::sqrt(pal.height_scale);
  Building lm;
  const cv::Vec3d body = pal.materials[d.below(3)] * d.uniform(0.85, 1.15);
  const cv::Vec3d accent = kAccents[d.below(static_cast<int>(std::size(kAccents)))];
  int styles[5] = {0, 1, 2, 3, 4};
  for (int i = 4; i > 0; --i) std::swap(styles[i], styles[d.below(i + 1)]);
  for (int k = 0; k < 4; ++k) {
    Facade f = make_facade(d, body * d.uniform(0.9, 1.1), accent * d.uniform(0.8, 1.0), pal.glass, styles[k]);
    if (k == 0) f.base_m = std::min(height * 0.3, d.uniform(8, 14));  // the front: a tall entrance storey
    lm.facades.push_back(f);
  }
  const int top = d.below(4);  // 0 spire, 1 dome, 2 setbacks, 3 flat crown
  const double h1 = top == 2 ? height * d.uniform(0.45, 0.65) : height;
  Part base = box(0, 0, hw, hd, angle, 0, h1, 0);
  for (int k = 0; k < 4; ++k) base.facade[k] = k;
  lm.parts.push_back(base);
  if (top == 2) {
    Part mid = base;
    mid.hw *= 0.72; mid.hd *= 0.72; mid.z0 = h1; mid.z1 = height * 0.85;
    lm.parts.push_back(mid);
    Part upper = base;
    upper.hw *= 0.45; upper.hd *= 0.45; upper.z0 = mid.z1; upper.z1 = height;
    lm.parts.push_back(upper);
  }
  Part crown;
  crown.cx = 0; crown.cy = 0; crown.angle_deg = angle; crown.colour = accent;
  const double foot = top == 2 ? 0.45 : 1.0;
  if (top == 0) {
    crown.shape = Part::kSpire;
    crown.hw = hw * foot * 0.6; crown.hd = hd * foot * 0.6; crown.z0 = height; crown.z1 = height * d.uniform(1.2, 1.45);
  } else if (top == 1) {
    crown.shape = Part::kDome;
    crown.hw = crown.hd = std::min(hw, hd) * 0.8; crown.z0 = height; crown.z1 = height + crown.hw * d.uniform(0.8, 1.2);
  } else if (top == 2) {
    crown.shape = Part::kSpire;
    crown.hw = hw * 0.2; crown.hd = hd * 0.2; crown.z0 = height; crown.z1 = height * d.uniform(1.1, 1.25);
  } else {
    crown = box(0, 0, hw * 1.04, hd * 1.04, angle, height, height + d.uniform(2, 5), 0);
    Facade cornice = lm.facades[0];
    cornice.style = 2;
    cornice.wall = accent;
    cornice.base_m = 0;
    lm.facades.push_back(cornice);
    for (int& f : crown.facade) f = 4;
  }
  lm.parts.push_back(crown);
  finish(lm);
  s.buildings.push_back(lm);
  s.target = 0;

  // The plaza's edge: district buildings on a ring, their faces on the grid.
  const double r_min = std::hypot(hw, hd) + (venue ? d.uniform(20, 35) : d.uniform(35, 70));
  const int n = venue ? 6 + d.below(4) : 9 + d.below(6);
  const double phase = d.uniform(0, 2 * kPi);
  for (int k = 0; k < n; ++k) {
    const double az = phase + 2 * kPi * (k + d.uniform(-0.3, 0.3)) / n;
    const double r = r_min + d.uniform(0, 60);
    const double bw = d.uniform(8, 20), bd = d.uniform(8, 20);
    const double bh = d.uniform(12, 60) * pal.height_scale;
    s.buildings.push_back(district_building(d, pal, r * std::cos(az), r * std::sin(az), bw, bd, angle, bh));
  }
  const int trees = 3 + d.below(6);
  const double r_tree0 = std::hypot(hw, hd) + 6;
  for (int k = 0; k < trees; ++k) {
    const double az = d.uniform(0, 2 * kPi), r = d.uniform(r_tree0, std::max(r_tree0 + 1, r_min - 8));
    const double h = d.uniform(6, 12);
    s.trees.push_back({r * std::cos(az), r * std::sin(az), h, h * d.uniform(0.25, 0.4)});
  }
  // Paving joints on the grid, every 8 m across the plaza.
  const cv::Vec3d joint = pal.ground * 0.78;
  const double a = angle * kDeg, ext = r_min;
  const cv::Vec2d ua(std::cos(a), std::sin(a)), ub(-std::sin(a), std::cos(a));
  for (double o = -ext; o <= ext; o += 8) {
    const cv::Vec2d p0 = ua * o - ub * ext, p1 = ua * o + ub * ext, q0 = ub * o - ua * ext, q1 = ub * o + ua * ext;
    s.lines.push_back({{p0[0], p0[1], 0}, {p1[0], p1[1], 0}, joint, 0.12});
    s.lines.push_back({{q0[0], q0[1], 0}, {q1[0], q1[1], 0}, joint, 0.12});
  }
  return s;
}

Scene make_bridge_scene(std::uint64_t seed, double frame_bearing_deg, double tower_y, double half_length) {
  Draw d(embedflow::derive_seed(seed, "scene:bridge"));
  Scene s;
  s.frame_bearing_deg = frame_bearing_deg;
  s.ground = cv::Vec3d(70, 105, 140) * d.uniform(0.85, 1.1);  // the promenade's timber
  const cv::Vec3d stone = kMaterials[d.uniform() < 0.5 ? 2 : 8] * d.uniform(0.85, 1.05);
  const double tower_h = 70, cable_x[] = {-16, -6, 6, 16};
  for (int t = 0; t < 2; ++t) {
    Building b;
    Draw dt(embedflow::derive_seed(seed, "scene:bridge:tower" + std::to_string(t)));
    Facade plain = make_facade(dt, stone, stone * 0.8, stone * 0.5, 2);
    plain.floor_m = 10;
    Facade arches = plain;
    arches.style = 5;
    arches.glass = cv::Vec3d(60, 62, 66);
    b.facades = {plain, arches};
    Part p = box(0, t == 0 ? -tower_y : tower_y, 21, 9, 0, 0, tower_h, 0);
    p.facade[1] = p.facade[3] = 1;  // the faces the deck passes through carry the arches
    b.parts.push_back(p);
    finish(b);
    s.buildings.push_back(b);
  }
  const cv::Vec3d steel(95, 100, 105);
  for (double x : cable_x) {
    // Main cables: anchorage to tower top, then a parabola between the towers.
    for (int side : {-1, 1}) {
      s.lines.push_back({{x, side * half_length, 4}, {x, side * tower_y, tower_h - 2}, steel, 0.5});
      // Suspenders on the side spans, every 20 m.
      for (double y = tower_y + 20; y < half_length - 10; y += 20) {
        const double z = 4 + (tower_h - 6) * (half_length - y) / (half_length - tower_y);
        if (x == cable_x[0] || x == cable_x[3]) s.lines.push_back({{x, side * y, z}, {x, side * y, 0}, steel, 0.08});
      }
    }
    const int pieces = 12;
    auto sag = [&](double y) { return 10 + (tower_h - 12) * (y / tower_y) * (y / tower_y); };
    for (int k = 0; k < pieces; ++k) {
      const double y0 = -tower_y + 2 * tower_y * k / pieces, y1 = -tower_y + 2 * tower_y * (k + 1) / pieces;
      s.lines.push_back({{x, y0, sag(y0)}, {x, y1, sag(y1)}, steel, 0.5});
    }
    if (x == cable_x[0] || x == cable_x[3])
      for (double y = -tower_y + 20; y < tower_y - 10; y += 20) s.lines.push_back({{x, y, sag(y)}, {x, y, 0}, steel, 0.08});
  }
  const cv::Vec3d rail(70, 80, 90);
  for (double x : {-6.0, 6.0}) s.lines.push_back({{x, -half_length, 1.1}, {x, half_length, 1.1}, rail, 0.1});
  // Plank joints across the promenade.
  for (double y = -half_length; y <= half_length; y += 3) s.lines.push_back({{-6, y, 0}, {6, y, 0}, s.ground * 0.7, 0.05});
  return s;
}

Scene make_street_scene(std::uint64_t seed, const std::string& street_key, const Palette& pal, double frame_bearing_deg, long first,
                        long last) {
  Scene s;
  s.frame_bearing_deg = frame_bearing_deg;
  s.ground = pal.ground;  // sidewalk
  const cv::Vec3d asphalt(62, 62, 64), paint(60, 190, 220), kerb = pal.ground * 1.1;
  const double y0 = first * kCellM - 10, y1 = (last + 1) * kCellM + 10;
  s.patches.push_back({{cv::Vec2d(-6, y0), cv::Vec2d(6, y0), cv::Vec2d(6, y1), cv::Vec2d(-6, y1)}, asphalt});
  for (long c = first; c <= last + 1; ++c) {
    const double yc = c * kCellM;
    s.patches.push_back({{cv::Vec2d(-400, yc - 6), cv::Vec2d(400, yc - 6), cv::Vec2d(400, yc + 6), cv::Vec2d(-400, yc + 6)}, asphalt});
  }
  for (double x : {-6.0, 6.0}) s.lines.push_back({{x, y0, 0.02}, {x, y1, 0.02}, kerb, 0.2});
  s.lines.push_back({{-0.15, y0, 0.01}, {-0.15, y1, 0.01}, paint, 0.1});
  s.lines.push_back({{0.15, y0, 0.01}, {0.15, y1, 0.01}, paint, 0.1});
  for (long c = first; c <= last; ++c)
    for (int side : {-1, 1}) {
      Draw d(embedflow::derive_seed(seed, street_key + ":cell" + std::to_string(c) + ":" + std::to_string(side)));
      // The block's frontage between the cross streets, split into 2-4 buildings.
      const int n = 2 + d.below(3);
      double w[4], total = 0;
      for (int k = 0; k < n; ++k) total += w[k] = d.uniform(0.6, 1.4);
      double y = c * kCellM + 10;
      for (int k = 0; k < n; ++k) {
        const double len = 60 * w[k] / total, depth = d.uniform(15, 25);
        const double h = d.uniform(10, 45) * pal.height_scale;
        s.buildings.push_back(district_building(d, pal, side * (kStreetHalfM + depth / 2), y + len / 2, depth / 2, len / 2, 0, h));
        y += len;
      }
      const int trees = d.below(3);
      for (int k = 0; k < trees; ++k) {
        const double h = d.uniform(5, 9);
        s.trees.push_back({side * 8.0, c * kCellM + d.uniform(14, 66), h, h * d.uniform(0.25, 0.35)});
      }
    }
  return s;
}

double field_of_view_deg(double zoom) { return 2 * std::atan(std::tan(32.5 * kDeg) / zoom) / kDeg; }
double zoom_of(double fov_deg) { return std::tan(32.5 * kDeg) / std::tan(fov_deg / 2 * kDeg); }

View make_view(std::uint64_t seed, const std::string& key) {
  Draw d(embedflow::derive_seed(seed, "view:" + key));
  View v;
  // Auto white balance misjudges the illuminant by tens of mireds; exposure meters err by a
  // fraction of a stop; picture styles differ in saturation.
  v.kelvin = 1e6 / (1e6 / 5500.0 + d.uniform(-55, 55));
  v.exposure_ev = std::clamp(d.normal() * 0.35, -0.8, 0.8);
  v.saturation = d.uniform(0.7, 1.3);
  v.cam.roll_deg = d.normal() * 1.5;
  v.noise_x = d.below(1 << 20);
  v.noise_y = d.below(1 << 20);
  const int people = d.below(4);
  for (int i = 0; i < people; ++i)
    v.people.push_back({d.uniform(0.05, 0.95), d.uniform(0.15, 0.4), d.uniform(0.9, 1.02),
                        kMaterials[d.below(static_cast<int>(std::size(kMaterials)))] * d.uniform(0.4, 1.1)});
  const int vehicles = d.uniform() < 0.3 ? 1 : 0;
  for (int i = 0; i < vehicles; ++i)
    v.vehicles.push_back({d.uniform(0.0, 0.8), d.uniform(0.22, 0.35), d.uniform(0.1, 0.15),
                          kAccents[d.below(static_cast<int>(std::size(kAccents)))] * d.uniform(0.5, 1.0)});
  return v;
}

Light light_at(std::uint64_t seed, std::int64_t t) {
  const std::int64_t days = (t >= 0 ? t : t - 86399) / 86400;
  // Civil date from days since the epoch (Howard Hinnant's algorithm).
  const std::int64_t z = days + 719468;
  const std::int64_t era = (z >= 0 ? z : z - 146096) / 146097;
  const unsigned doe = static_cast<unsigned>(z - era * 146097);
  const unsigned yoe = (doe - doe / 1460 + doe / 36524 - doe / 146096) / 365;
  const unsigned doy_mar = doe - (365 * yoe + yoe / 4 - yoe / 100);
  const unsigned mp = (5 * doy_mar + 2) / 153;
  const unsigned month = mp < 10 ? mp + 3 : mp - 9;
  const double day_of_year = std::fmod(doy_mar + 59.0, 365.0);
  // Solar time: UTC shifted by the longitude (74.0 W).
  const double solar_hour = std::fmod(static_cast<double>(t - days * 86400) / 3600.0 - 74.0 / 15.0 + 24.0, 24.0);

  Light L;
  L.season = month == 12 || month <= 2 ? 0 : month <= 5 ? 1 : month <= 8 ? 2 : 3;
  const double lat = 40.7 * kDeg;
  const double decl = 23.44 * kDeg * std::sin(2 * kPi * (284.0 + day_of_year) / 365.0);
  const double ha = (solar_hour - 12.0) * 15.0 * kDeg;
  const double sin_e = std::sin(lat) * std::sin(decl) + std::cos(lat) * std::cos(decl) * std::cos(ha);
  L.sun_elevation_deg = std::asin(sin_e) / kDeg;
  L.sun_azimuth_deg = std::fmod(std::atan2(-std::sin(ha) * std::cos(decl),
                                           std::sin(decl) * std::cos(lat) - std::cos(decl) * std::sin(lat) * std::cos(ha)) / kDeg + 360.0,
                                360.0);
  // The day's weather: New York has about 4 cloudy days in 10; haze and fog lower the visibility;
  // snow lies on some winter days.
  Draw w(embedflow::derive_seed(seed, static_cast<std::uint64_t>(days) * 2654435761ULL + 17));
  L.overcast = w.uniform() < 0.4;
  const double fog = w.uniform();
  L.visibility_m = fog < 0.1 ? w.uniform(300, 1500) : fog < 0.35 ? w.uniform(2000, 8000) : w.uniform(10000, 30000);
  L.snow = L.season == 0 && w.uniform() < 0.35;

  const double e = L.sun_elevation_deg;
  L.day = smoothstep(-8, 12, e);
  const double golden = L.overcast ? 0.0 : std::max(0.0, 1.0 - std::fabs(e - 3.0) / 9.0) * (e > -6 ? 1.0 : 0.0);
  L.brightness = (0.2 + 0.8 * L.day) * (L.overcast ? 0.8 : 1.0);
  L.tint = mix(cv::Vec3d(1.15, 0.85, 0.7), cv::Vec3d(1, 1, 1), L.day);  // moonlit blue at night
  L.tint = mix(L.tint, cv::Vec3d(0.72, 0.9, 1.15), golden);            // warm low sun
  if (L.overcast) L.tint = mix(L.tint, cv::Vec3d(1.06, 1.0, 0.95), L.day);  // overcast light is bluer (~6500 K)
  L.sky_top = mix(cv::Vec3d(45, 18, 8), cv::Vec3d(205, 135, 70), L.day);
  L.sky_horizon = mix(cv::Vec3d(70, 40, 25), cv::Vec3d(235, 215, 190), L.day);
  L.sky_horizon = mix(L.sky_horizon, cv::Vec3d(90, 160, 245), golden);
  L.sky_top = mix(L.sky_top, cv::Vec3d(150, 100, 100), golden * 0.6);
  if (L.overcast) {
    const double g = 40 + 160 * L.day;
    L.sky_top = cv::Vec3d::all(g * 0.85);
    L.sky_horizon = cv::Vec3d::all(g);
  }
  // Haze whitens the sky towards the horizon.
  L.sky_horizon = mix(L.sky_horizon, cv::Vec3d::all(180 * (0.25 + 0.75 * L.day)), std::clamp(2000.0 / L.visibility_m, 0.0, 1.0) * 0.6);
  L.windows_lit = L.day < 0.5;
  return L;
}

cv::Mat make_noise(std::uint64_t seed, int width, int height) {
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

int visible_faces(const Building& b, double cam_x, double cam_y, int* primary) {
  const Part& p = b.parts.front();
  double dx = cam_x - p.cx, dy = cam_y - p.cy;
  const double len = std::hypot(dx, dy);
  if (len < 1e-9) { dx = 0; dy = -1; } else { dx /= len; dy /= len; }
  const double a = p.angle_deg * kDeg;
  const double nx[4] = {std::cos(a), -std::sin(a), -std::cos(a), std::sin(a)};
  const double ny[4] = {std::sin(a), std::cos(a), -std::sin(a), -std::cos(a)};
  int mask = 0, best = 0;
  double best_dot = -2;
  for (int k = 0; k < 4; ++k) {
    const double dot = nx[k] * dx + ny[k] * dy;
    if (dot > 0.26) mask |= 1 << k;
    if (dot > best_dot) { best_dot = dot; best = k; }
  }
  if (primary) *primary = best;
  return mask | (1 << best);
}

namespace {

// ---- The pinhole camera.

constexpr int kShift = 4;
constexpr double kNear = 0.5;

struct Projector {
  double cx, cy, F;
  cv::Vec3d o, r, u, f;
  double cr, sr;
  double cone;            // frustum half-width as a tangent
  double haze_k;          // Koschmieder: contrast falls as exp(-3.912 d / V)
  cv::Vec3d haze;

  cv::Vec3d cam(const cv::Vec3d& p) const {
    const cv::Vec3d d = p - o;
    return {d.dot(r), d.dot(u), d.dot(f)};
  }
  cv::Point img(const cv::Vec3d& c) const {
    const double X = c[0] / c[2], Y = c[1] / c[2];
    const double xr = X * cr - Y * sr, yr = X * sr + Y * cr;
    const double px = std::clamp(cx + F * xr, -3e4, 3e4), py = std::clamp(cy - F * yr, -3e4, 3e4);
    return {static_cast<int>(std::lround(px * 16)), static_cast<int>(std::lround(py * 16))};
  }
  cv::Scalar colour(const cv::Vec3d& radiance, double dist) const {
    const double t = 1.0 - std::exp(-haze_k * dist);
    const cv::Vec3d c = mix(radiance, haze, t);
    return cv::Scalar(std::min(255.0, c[0]), std::min(255.0, c[1]), std::min(255.0, c[2]));
  }
};

// The frustum the drawing is clipped to: in front of the near plane and within a square cone a
// little wider than the image's circumcircle (so any roll stays covered), so no projected point
// lies far outside the image.
inline double plane_value(const cv::Vec3d& c, int k, double cone) {
  switch (k) {
    case 0: return c[2] - kNear;
    case 1: return cone * c[2] + c[0];
    case 2: return cone * c[2] - c[0];
    case 3: return cone * c[2] + c[1];
    default: return cone * c[2] - c[1];
  }
}

// Clips a camera-space convex polygon to the frustum and fills it.
void fill_cam_poly(cv::Mat& img, const Projector& P, const cv::Vec3d* c, int n, const cv::Scalar& colour) {
  cv::Vec3d buf[2][24];
  int m = std::min(n, 24);
  std::copy(c, c + m, buf[0]);
  int cur = 0;
  for (int k = 0; k < 5 && m >= 3; ++k) {
    const cv::Vec3d* in = buf[cur];
    cv::Vec3d* out = buf[1 - cur];
    int o = 0;
    for (int i = 0; i < m && o < 22; ++i) {
      const cv::Vec3d& a = in[i];
      const cv::Vec3d& b = in[(i + 1) % m];
      const double va = plane_value(a, k, P.cone), vb = plane_value(b, k, P.cone);
      if (va >= 0) out[o++] = a;
      if ((va >= 0) != (vb >= 0)) out[o++] = a + (b - a) * (va / (va - vb));
    }
    m = o;
    cur = 1 - cur;
  }
  if (m < 3) return;
  cv::Point pts[24];
  for (int i = 0; i < m; ++i) pts[i] = P.img(buf[cur][i]);
  cv::fillConvexPoly(img, pts, m, colour, cv::LINE_8, kShift);
}

void draw_line3(cv::Mat& img, const Projector& P, const cv::Vec3d& wa, const cv::Vec3d& wb, const cv::Vec3d& radiance, double width_m) {
  cv::Vec3d a = P.cam(wa), b = P.cam(wb);
  for (int k = 0; k < 5; ++k) {
    const double va = plane_value(a, k, P.cone), vb = plane_value(b, k, P.cone);
    if (va < 0 && vb < 0) return;
    if (va < 0) a = a + (b - a) * (va / (va - vb));
    else if (vb < 0) b = b + (a - b) * (vb / (vb - va));
  }
  const double zmid = std::max(kNear, std::min(a[2], b[2]));
  const int thick = std::clamp(static_cast<int>(std::lround(P.F * width_m / zmid)), 1, 12);
  const double far = std::max(a[2], b[2]);
  if (P.F * width_m / far < 0.08) return;  // thinner than a twelfth of a pixel everywhere: invisible
  cv::line(img, P.img(a), P.img(b), P.colour(radiance, (a[2] + b[2]) / 2), thick, cv::LINE_8, kShift);
}

struct Shade {
  cv::Vec3d sun;          // unit vector towards the sun, scene frame
  double ambient, direct;
  double brightness;
  cv::Vec3d tint;
  bool lit_windows;
  double glow;            // brightness of lit windows
};

cv::Vec3d shaded(const Shade& S, const cv::Vec3d& albedo, const cv::Vec3d& normal) {
  const double k = (S.ambient + S.direct * std::max(0.0, normal.dot(S.sun))) * S.brightness;
  return {albedo[0] * k * S.tint[0], albedo[1] * k * S.tint[1], albedo[2] * k * S.tint[2]};
}

// A face: the rectangle P0 + s*t + (z - z0)*up, s in [0, len], z in [z0, z1], seen from outside.
struct Face {
  cv::Vec3d p0, t, n;
  double len, z0, z1;
};

void draw_face(cv::Mat& img, const Projector& P, const Shade& S, const Face& fc, const Facade& fa) {
  const cv::Vec3d C0 = P.cam(fc.p0), Ct = P.cam(fc.p0 + fc.t) - C0, Cz = P.cam(fc.p0 + cv::Vec3d(0, 0, 1)) - C0;
  auto at = [&](double s, double z) { return C0 + Ct * s + Cz * (z - fc.z0); };
  const double h = fc.z1 - fc.z0;
  const cv::Vec3d corners[4] = {at(0, fc.z0), at(fc.len, fc.z0), at(fc.len, fc.z1), at(0, fc.z1)};
  const cv::Vec3d mid = at(fc.len / 2, (fc.z0 + fc.z1) / 2);
  const double dist = std::max(kNear, std::sqrt(mid.dot(mid)));
  const cv::Vec3d wall = shaded(S, fa.wall, fc.n), glass = shaded(S, fa.glass, fc.n), trim = shaded(S, fa.trim, fc.n);
  // The wall; seen from afar the windows blend into it (their area-weighted mean).
  double glass_share = fa.style == 4 ? 0.8 : fa.style == 2 ? fa.win_h : fa.style == 5 ? 0.2 : fa.style == 1 ? fa.win_w : fa.win_w * fa.win_h;
  const double floor_px = P.F * fa.floor_m / dist;
  const bool detailed = floor_px >= 2.5;
  if (!detailed && !S.lit_windows) {
    fill_cam_poly(img, P, corners, 4, P.colour(mix(wall, glass, glass_share), dist));
    return;
  }
  fill_cam_poly(img, P, corners, 4, P.colour(fa.style == 4 ? glass : wall, dist));
  auto quad = [&](double s0, double s1, double za, double zb, const cv::Scalar& col) {
    const cv::Vec3d q[4] = {at(s0, za), at(s1, za), at(s1, zb), at(s0, zb)};
    fill_cam_poly(img, P, q, 4, col);
  };
  const cv::Scalar c_glass = P.colour(glass, dist), c_trim = P.colour(trim, dist), c_wall = P.colour(wall, dist);
  const cv::Scalar c_glow = P.colour(cv::Vec3d(90, 200, 255) * S.glow, dist);
  auto window_colour = [&](int r, int c) {
    return S.lit_windows && (embedflow::mix64(fa.lit_seed + static_cast<std::uint64_t>(r) * 131 + static_cast<std::uint64_t>(c)) % 5) < 2
               ? c_glow : c_glass;
  };
  // The storefront storey and a cornice.
  const double base = std::min(fa.base_m, h * 0.4);
  if (base > 0) quad(0, fc.len, fc.z0, fc.z0 + base, c_trim);
  if (h > 8) quad(0, fc.len, fc.z1 - std::min(1.0, h * 0.05), fc.z1, c_trim);
  const int floors = std::max(0, static_cast<int>((h - base - 1.0) / fa.floor_m));
  const int bays = std::max(1, static_cast<int>(fc.len / fa.bay_m));
  const double bay = fc.len / bays;
  if (!detailed) {
    // Far away at night: lit storeys as bands.
    for (int r = 0; r < floors; ++r) {
      const double z = fc.z0 + base + r * fa.floor_m;
      quad(0, fc.len, z + fa.floor_m * 0.3, z + fa.floor_m * 0.7, window_colour(r, 0));
    }
    return;
  }
  switch (fa.style) {
    case 1:  // vertical strips
      for (int c = 0; c < bays; ++c) {
        const double s = c * bay + bay * (1 - fa.win_w) / 2;
        quad(s, s + bay * fa.win_w, fc.z0 + base + 0.5, fc.z1 - 1.2, window_colour(0, c));
      }
      break;
    case 2:  // ribbon windows
      for (int r = 0; r < floors; ++r) {
        const double z = fc.z0 + base + r * fa.floor_m + fa.floor_m * (1 - fa.win_h) / 2;
        quad(bay * 0.3, fc.len - bay * 0.3, z, z + fa.floor_m * fa.win_h, window_colour(r, 0));
      }
      break;
    case 4: {  // curtain wall: mullions and spandrels over glass
      for (int c = 0; c <= bays; ++c) quad(c * bay - 0.15, c * bay + 0.15, fc.z0 + base, fc.z1, c_wall);
      for (int r = 0; r <= floors; ++r) {
        const double z = fc.z0 + base + r * fa.floor_m;
        quad(0, fc.len, z - 0.3, z + 0.3, c_wall);
      }
      break;
    }
    case 5: {  // two tall pointed arches
      for (double centre : {0.3, 0.7}) {
        const double s0 = fc.len * (centre - 0.09), s1 = fc.len * (centre + 0.09);
        const double za = fc.z0, zb = fc.z0 + h * 0.55, apex = fc.z0 + h * 0.68;
        const cv::Vec3d q[5] = {at(s0, za), at(s1, za), at(s1, zb), at((s0 + s1) / 2, apex), at(s0, zb)};
        fill_cam_poly(img, P, q, 5, c_glass);
      }
      break;
    }
    default: {  // punched windows, plain (0) or arched (3)
      const double px_per_window = floor_px * fa.win_h;
      for (int r = 0; r < floors; ++r) {
        const double za = fc.z0 + base + r * fa.floor_m + fa.floor_m * (1 - fa.win_h) * 0.6;
        const double zb = za + fa.floor_m * fa.win_h;
        for (int c = 0; c < bays; ++c) {
          const double s0 = c * bay + bay * (1 - fa.win_w) / 2, s1 = s0 + bay * fa.win_w;
          if (fa.style == 3 && px_per_window > 4) {
            const cv::Vec3d q[5] = {at(s0, za), at(s1, za), at(s1, zb), at((s0 + s1) / 2, zb + fa.floor_m * 0.15), at(s0, zb)};
            fill_cam_poly(img, P, q, 5, window_colour(r, c));
          } else {
            quad(s0, s1, za, zb, window_colour(r, c));
          }
        }
      }
    }
  }
}

void draw_part(cv::Mat& img, const Projector& P, const Shade& S, const Building& b, const Part& p) {
  const double a = p.angle_deg * kDeg;
  const cv::Vec3d ua(std::cos(a), std::sin(a), 0), ub(-std::sin(a), std::cos(a), 0);
  const cv::Vec3d c(p.cx, p.cy, 0);
  if (p.shape == Part::kDome) {
    const cv::Vec3d cc = P.cam(c + cv::Vec3d(0, 0, p.z0));
    if (cc[2] < kNear) return;
    const double dist = std::sqrt(cc.dot(cc));
    const cv::Point centre = P.img(cc);
    const int rx = static_cast<int>(P.F * p.hw / cc[2] * 16), ry = static_cast<int>(P.F * (p.z1 - p.z0) / cc[2] * 16);
    if (rx < 8) return;
    cv::ellipse(img, centre, cv::Size(rx, ry), -std::atan2(P.sr, P.cr) / kDeg, 180, 360,
                P.colour(shaded(S, p.colour, cv::Vec3d(0, 0, 1) * 0.6 + S.sun * 0.4), dist), cv::FILLED, cv::LINE_8, kShift);
    return;
  }
  const double ext[4] = {p.hw, p.hd, p.hw, p.hd}, half[4] = {p.hd, p.hw, p.hd, p.hw};
  const cv::Vec3d normals[4] = {ua, ub, -ua, -ub};
  const cv::Vec3d eye = P.o;
  for (int k = 0; k < 4; ++k) {
    const cv::Vec3d n = normals[k];
    const cv::Vec3d centre = c + n * ext[k];
    const cv::Vec3d t(-n[1], n[0], 0);  // to the right when facing the face from outside
    if (p.shape == Part::kSpire) {
      // A triangle from the footprint's edge to the apex; its normal tilts up.
      const cv::Vec3d apex(p.cx, p.cy, p.z1);
      const cv::Vec3d e0 = centre - t * half[k] + cv::Vec3d(0, 0, p.z0), e1 = centre + t * half[k] + cv::Vec3d(0, 0, p.z0);
      cv::Vec3d nn = n * (p.z1 - p.z0) + cv::Vec3d(0, 0, ext[k]);
      nn /= std::sqrt(nn.dot(nn));
      if (nn.dot(eye - e0) <= 0) continue;
      const cv::Vec3d tri[3] = {P.cam(e0), P.cam(e1), P.cam(apex)};
      const cv::Vec3d m = (tri[0] + tri[1] + tri[2]) / 3;
      fill_cam_poly(img, P, tri, 3, P.colour(shaded(S, p.colour, nn), std::sqrt(m.dot(m))));
      continue;
    }
    const cv::Vec3d probe = centre + cv::Vec3d(0, 0, (p.z0 + p.z1) / 2);
    if (n.dot(eye - probe) <= 0) continue;
    Face f{centre - t * half[k] + cv::Vec3d(0, 0, p.z0), t, n, 2 * half[k], p.z0, p.z1};
    draw_face(img, P, S, f, b.facades[static_cast<std::size_t>(p.facade[k])]);
  }
}

}  // namespace

cv::Mat render(const Scene& scene, const View& v, const Light& L, int W, int H, const cv::Mat& noise) {
  cv::Mat img(H, W, CV_8UC3);
  const Camera& cam = v.cam;
  Projector P;
  P.cx = W / 2.0;
  P.cy = H / 2.0;
  P.F = (W / 2.0) / std::tan(cam.fov_deg / 2 * kDeg);
  P.o = cv::Vec3d(cam.x, cam.y, cam.z);
  const double ps = std::sin(cam.heading_deg * kDeg), pc = std::cos(cam.heading_deg * kDeg);
  const double ts = std::sin(cam.pitch_deg * kDeg), tc = std::cos(cam.pitch_deg * kDeg);
  P.r = cv::Vec3d(pc, -ps, 0);
  P.f = cv::Vec3d(ps * tc, pc * tc, ts);
  P.u = cv::Vec3d(-ps * ts, -pc * ts, tc);
  P.cr = std::cos(cam.roll_deg * kDeg);
  P.sr = std::sin(cam.roll_deg * kDeg);
  P.cone = 1.15 * std::hypot(W / 2.0, H / 2.0) / P.F;
  P.haze_k = 3.912 / L.visibility_m;
  P.haze = L.sky_horizon;

  Shade S;
  const double sun_rel = (L.sun_azimuth_deg - scene.frame_bearing_deg) * kDeg, e = std::max(0.0, L.sun_elevation_deg) * kDeg;
  S.sun = cv::Vec3d(std::sin(sun_rel) * std::cos(e), std::cos(sun_rel) * std::cos(e), std::sin(e));
  const double direct = L.overcast ? 0.0 : smoothstep(-2, 8, L.sun_elevation_deg);
  S.ambient = 0.55 + (L.overcast ? 0.35 : 0.0);
  S.direct = 0.75 * direct;
  S.brightness = L.brightness;
  S.tint = L.tint;
  S.lit_windows = L.windows_lit;
  S.glow = 0.65;

  // Sky: zenith to horizon by the elevation of each row (the roll's tilt is neglected here).
  const double horizon_y = P.cy + P.F * std::tan(cam.pitch_deg * kDeg);
  for (int y = 0; y < H; ++y) {
    const double elev = std::atan((horizon_y - y) / P.F) / kDeg;
    const cv::Vec3d c = mix(L.sky_horizon, L.sky_top, std::pow(std::clamp(elev / 60.0, 0.0, 1.0), 0.6));
    img.row(y).setTo(cv::Scalar(c[0], c[1], c[2]));
  }
  // Ground: bands of growing haze towards the horizon, then patches, lines.
  const cv::Vec3d fwd_h(ps, pc, 0), right_h(pc, -ps, 0);
  const cv::Vec3d up(0, 0, 1);
  const cv::Vec3d ground = shaded(S, L.snow ? cv::Vec3d(235, 235, 230) : scene.ground, up);
  for (double D : {20000.0, 800.0, 300.0, 120.0, 40.0}) {
    const cv::Vec3d g0 = P.o - up * P.o[2];
    const cv::Vec3d q[4] = {P.cam(g0 + fwd_h * D - right_h * (4 * D)), P.cam(g0 + fwd_h * D + right_h * (4 * D)),
                            P.cam(g0 + fwd_h * 0.6 + right_h * (4 * D)), P.cam(g0 + fwd_h * 0.6 - right_h * (4 * D))};
    fill_cam_poly(img, P, q, 4, P.colour(ground, D));
  }
  for (const Patch& pt : scene.patches) {
    cv::Vec3d q[4];
    double dmin = 1e9;
    for (int k = 0; k < 4; ++k) {
      q[k] = P.cam(cv::Vec3d(pt.p[k][0], pt.p[k][1], 0.0));
      dmin = std::min(dmin, std::max(kNear, q[k][2]));
    }
    const cv::Vec3d col = shaded(S, L.snow ? mix(pt.colour, cv::Vec3d(225, 225, 220), 0.5) : pt.colour, up);
    fill_cam_poly(img, P, q, 4, P.colour(col, dmin + 30));
  }
  for (const Segment& sg : scene.lines) {
    const bool on_ground = sg.a[2] < 0.05 && sg.b[2] < 0.05;
    draw_line3(img, P, sg.a, sg.b, on_ground ? shaded(S, sg.colour, up) : sg.colour * S.brightness * 0.9, sg.width_m);
  }

  // Buildings and trees, far to near.
  struct Item { double dist; int kind; std::size_t index; };
  std::vector<Item> items;
  items.reserve(scene.buildings.size() + scene.trees.size());
  const double cull = 0.7 * (W / P.F) + 0.2;  // tan of a little more than half the field of view
  for (std::size_t i = 0; i < scene.buildings.size(); ++i) {
    const Building& b = scene.buildings[i];
    const double dx = b.cx - cam.x, dy = b.cy - cam.y, d = std::hypot(dx, dy);
    if (d < b.radius + 1.0 && static_cast<int>(i) != scene.target) continue;  // the camera would stand inside it
    if (scene.target >= 0 && static_cast<int>(i) != scene.target) {
      // Photographers stand where they see what they photograph: a building between the camera
      // and the target is one the photographer has stepped around.
      const Building& tg = scene.buildings[static_cast<std::size_t>(scene.target)];
      const double tx = tg.cx - cam.x, ty = tg.cy - cam.y, tl = std::hypot(tx, ty);
      if (tl > 1e-6) {
        const double s = (dx * tx + dy * ty) / tl;
        const double off = std::fabs(dx * ty - dy * tx) / tl;
        if (s > 0 && s < tl && off < b.radius + tg.radius * 0.8) continue;
      }
    }
    const double along = dx * ps + dy * pc, across = std::fabs(dx * pc - dy * ps);
    if (along < -b.radius) continue;
    if (across - b.radius > (along + b.radius) * cull + 5) continue;  // outside the field of view
    items.push_back({d, 0, i});
  }
  for (std::size_t i = 0; i < scene.trees.size(); ++i) {
    const Tree& t = scene.trees[i];
    const double dx = t.x - cam.x, dy = t.y - cam.y;
    const double along = dx * ps + dy * pc;
    if (along < kNear + t.crown) continue;
    if (scene.target >= 0) {
      // Nor does a tree stand between the photographer and the target.
      const Building& tg = scene.buildings[static_cast<std::size_t>(scene.target)];
      const double tx = tg.cx - cam.x, ty = tg.cy - cam.y, tl = std::hypot(tx, ty);
      if (tl > 1e-6) {
        const double s = (dx * tx + dy * ty) / tl, off = std::fabs(dx * ty - dy * tx) / tl;
        if (s > 0 && s < tl && off < t.crown + tg.radius * 0.8) continue;
      }
    }
    items.push_back({std::hypot(dx, dy), 1, i});
  }
  std::sort(items.begin(), items.end(), [](const Item& a, const Item& b) { return a.dist > b.dist || (a.dist == b.dist && a.index < b.index); });
  static const cv::Vec3d kCrown[4] = {{60, 70, 85}, {80, 165, 115}, {45, 125, 55}, {40, 110, 200}};
  for (const Item& it : items) {
    if (it.kind == 0) {
      const Building& b = scene.buildings[it.index];
      for (const Part& p : b.parts) draw_part(img, P, S, b, p);
      continue;
    }
    const Tree& t = scene.trees[it.index];
    const cv::Vec3d base = P.cam(cv::Vec3d(t.x, t.y, 0)), top = P.cam(cv::Vec3d(t.x, t.y, t.height - t.crown));
    if (base[2] < kNear) continue;
    const double dist = std::sqrt(base.dot(base));
    const int trunk = std::clamp(static_cast<int>(std::lround(P.F * 0.35 / base[2])), 1, 40);
    cv::line(img, P.img(base), P.img(top), P.colour(shaded(S, {40, 55, 75}, up), dist), trunk, cv::LINE_8, kShift);
    const cv::Vec3d crown_c = P.cam(cv::Vec3d(t.x, t.y, t.height - t.crown * 0.9));
    const int r = static_cast<int>(P.F * t.crown / crown_c[2] * 16);
    if (L.season == 0) {
      for (int k = -2; k <= 2; ++k)
        draw_line3(img, P, {t.x, t.y, t.height * 0.55}, {t.x + k * t.crown * 0.35, t.y, t.height * (1 - 0.04 * k * k)}, {50, 60, 75}, 0.12);
    } else if (r > 4) {
      cv::circle(img, P.img(crown_c), r, P.colour(shaded(S, kCrown[L.season], up * 0.5 + S.sun * 0.5), dist), cv::FILLED, cv::LINE_8,
                 kShift);
    }
  }

  // Occluders in the foreground: vehicles, then people.
  const Shade& s = S;
  auto lit = [&](const cv::Vec3d& albedo) {
    const cv::Vec3d c = shaded(s, albedo, -P.f);
    return cv::Scalar(std::min(255.0, c[0]), std::min(255.0, c[1]), std::min(255.0, c[2]));
  };
  for (const auto& c : v.vehicles) {
    const double x0 = c.x * W, w = c.width * W, h = c.height * H, y1 = H * 0.99, y0 = y1 - h;
    cv::rectangle(img, cv::Point(static_cast<int>(x0 * 16), static_cast<int>((y0 + h * 0.35) * 16)),
                  cv::Point(static_cast<int>((x0 + w) * 16), static_cast<int>((y1 - h * 0.12) * 16)), lit(c.colour), cv::FILLED, cv::LINE_8,
                  kShift);
    cv::rectangle(img, cv::Point(static_cast<int>((x0 + w * 0.2) * 16), static_cast<int>(y0 * 16)),
                  cv::Point(static_cast<int>((x0 + w * 0.75) * 16), static_cast<int>((y0 + h * 0.4) * 16)), lit(c.colour * 0.9), cv::FILLED,
                  cv::LINE_8, kShift);
    for (double wx : {0.2, 0.8})
      cv::circle(img, cv::Point(static_cast<int>((x0 + w * wx) * 16), static_cast<int>((y1 - h * 0.12) * 16)),
                 static_cast<int>(h * 0.16 * 16), cv::Scalar(20, 20, 20), cv::FILLED, cv::LINE_8, kShift);
  }
  for (const auto& p : v.people) {
    const double x = p.x * W, h = p.height * H, feet = p.feet * H;
    auto pt = [](double px, double py) { return cv::Point(static_cast<int>(px * 16), static_cast<int>(py * 16)); };
    cv::rectangle(img, pt(x - h * 0.12, feet - h * 0.8), pt(x + h * 0.12, feet - h * 0.35), lit(p.colour), cv::FILLED, cv::LINE_8, kShift);
    cv::rectangle(img, pt(x - h * 0.1, feet - h * 0.36), pt(x + h * 0.1, feet), lit({70, 50, 40}), cv::FILLED, cv::LINE_8, kShift);
    cv::circle(img, pt(x, feet - h * 0.9), static_cast<int>(h * 0.1 * 16), lit({120, 160, 210}), cv::FILLED, cv::LINE_8, kShift);
  }

  // The camera's processing: white balance (gains from the mired error), exposure, saturation,
  // as one colour matrix; then sensor noise.
  const double mired = 1e6 / v.kelvin - 1e6 / 5500.0;
  const double gain_b = std::exp(0.0035 * mired), gain_r = std::exp(-0.0035 * mired);
  const double ex = std::pow(2.0, v.exposure_ev), sat = v.saturation;
  const double luma[3] = {0.114, 0.587, 0.299};
  const double gains[3] = {gain_b * ex, ex, gain_r * ex};
  cv::Matx33f M;
  for (int i = 0; i < 3; ++i)
    for (int j = 0; j < 3; ++j) M(i, j) = static_cast<float>(gains[i] * ((i == j ? sat : 0.0) + (1 - sat) * luma[j]));
  cv::transform(img, img, M);
  const int nx = v.noise_x % (noise.cols - W), ny = v.noise_y % (noise.rows - H);
  cv::add(img, noise(cv::Rect(nx, ny, W, H)), img);
  cv::subtract(img, cv::Scalar::all(6), img);
  return img;
}

}  // namespace gen_photos
