// gen_photos: writes synthetic geotagged photo metadata shaped like the Flickr NYC collection
// (2006-2016, bbox [(-74.052544, 40.525070), (-73.740685, 40.889249)]) as CSV, deterministic
// by seed and independent of the thread count.
//
// What it reproduces, and why (the pair samplers are only tested honestly on data like this):
//   - volume by year: ~500k photos a year for 2009-2016 at 6M rows (fewer in 2006-2008);
//   - clusters around real landmarks (Gaussian, sigma 40-250 m), photos along the 1825 m span of
//     the Brooklyn Bridge, a band up and down Broadway, Manhattan and city-wide background;
//   - exact-coordinate hot spots (a venue's default location) with Zipf sizes m_i = C/i, the
//     largest ~1.5% of rows, so a 1M-row sample has ~1.8e8 pairs within 10 m;
//   - Zipf-distributed users, plus one time-lapse user posting a frame every 10 minutes from one
//     spot by the Barclays Center from 2013-06-01 for rows/1200 frames;
//   - ~1% duplicate uploads (same user, coordinates, time within a second);
//   - titles and descriptions with commas, quotes and the odd newline, so CSV quoting is real.
//
// Usage: gen_photos --rows 6000000 --seed 1 --out photos.csv [--time-format iso|unix] [--threads 2]
#include <algorithm>
#include <atomic>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <random>
#include <string>
#include <thread>
#include <vector>

#include "embedflow/rng.hpp"

namespace {

constexpr double kPi = 3.14159265358979323846;
constexpr double kMetresPerDegLat = 6371000.0 * kPi / 180.0;
constexpr double kMinLon = -74.052544, kMinLat = 40.525070, kMaxLon = -73.740685, kMaxLat = 40.889249;

struct LatLon { double lat, lon; };

struct Landmark {
  const char* name;
  LatLon at;
  double sigma_m;
  double weight;
};

// Real coordinates; weights and spreads are guesses at relative popularity.
const Landmark kLandmarks[] = {
    {"Metropolitan Museum of Art", {40.779437, -73.963244}, 60, 10},
    {"Times Square", {40.758000, -73.985500}, 120, 12},
    {"Rockefeller Center", {40.758740, -73.978674}, 80, 7},
    {"Empire State Building", {40.748441, -73.985664}, 60, 6},
    {"World Trade Center", {40.711500, -74.013400}, 150, 7},
    {"Statue of Liberty", {40.689247, -74.044502}, 80, 4},
    {"Central Park, Bethesda Terrace", {40.774000, -73.970800}, 250, 8},
    {"Grand Central Terminal", {40.752726, -73.977229}, 50, 5},
    {"Museum of Modern Art", {40.761433, -73.977622}, 40, 5},
    {"Flatiron Building", {40.741061, -73.989699}, 50, 3},
    {"Washington Square Park", {40.730823, -73.997332}, 90, 4},
    {"High Line", {40.747993, -74.004765}, 200, 4},
    {"Union Square", {40.735863, -73.991084}, 80, 3},
    {"Chrysler Building", {40.751621, -73.975502}, 50, 2},
    {"Yankee Stadium", {40.829643, -73.926175}, 120, 2},
    {"Coney Island", {40.574926, -73.985941}, 250, 3},
    {"Barclays Center", {40.682600, -73.975400}, 80, 2},
    {"Grand Army Plaza", {40.674000, -73.970000}, 100, 1},
};

// The Brooklyn Bridge, anchorage to anchorage: 1825 m along azimuth 124 deg from City Hall.
const LatLon kBridgeCentre{40.706086, -73.996864};
constexpr double kBridgeLengthM = 1825.0, kBridgeAzimuthDeg = 124.0;

// Broadway from Bowling Green to 125th St, as a polyline.
const LatLon kBroadway[] = {{40.704700, -74.013800}, {40.712800, -74.008000}, {40.730000, -73.992000},
                            {40.741000, -73.989600}, {40.758000, -73.985500}, {40.768400, -73.981900},
                            {40.787000, -73.977000}, {40.806000, -73.965000}, {40.815800, -73.958500}};

// Manhattan as a rotated rectangle: centre, length 19 km along 29 deg, width 3 km.
const LatLon kManhattan{40.768000, -73.978000};

const LatLon kTimelapseSpot{40.682930, -73.975520};
constexpr std::int64_t kTimelapseStart = 1370044800;  // 2013-06-01T00:00:00Z
constexpr std::int64_t kTimelapseStep = 600;

LatLon offset(LatLon p, double east_m, double north_m) {
  return {p.lat + north_m / kMetresPerDegLat, p.lon + east_m / (kMetresPerDegLat * std::cos(p.lat * kPi / 180))};
}

class Gen {
 public:
  explicit Gen(std::uint64_t seed) : state_(seed) {}
  std::uint64_t next() { return embedflow::mix64(state_ += 0x9e3779b97f4a7c15ULL); }
  double uniform() { return (next() >> 11) * 0x1.0p-53; }
  std::uint64_t below(std::uint64_t n) { return static_cast<std::uint64_t>((static_cast<unsigned __int128>(next()) * n) >> 64); }
  double normal() {
    const double u1 = 1.0 - uniform(), u2 = uniform();
    return std::sqrt(-2.0 * std::log(u1)) * std::cos(2 * kPi * u2);
  }
 private:
  std::uint64_t state_;
};

enum Kind : std::uint32_t { kLandmark = 0, kBridge, kBroadwayBand, kManhattanBg, kCity, kHotspot, kTimelapse, kDuplicate };

struct Plan {
  std::uint64_t seed;
  std::int64_t rows;
  std::vector<std::uint64_t> kinds;    // kind << 32 | parameter, shuffled
  std::vector<LatLon> hotspots;
  std::vector<double> landmark_cdf;
  std::vector<double> user_cdf;        // Zipf over users
  std::vector<double> year_cdf;        // 2006..2016
  bool unix_time = false;
};

const int kFirstYear = 2006;
const double kYearWeights[] = {0.5, 0.7, 0.8, 0.5, 0.5, 0.5, 0.5, 0.5, 0.5, 0.5, 0.5};

std::size_t pick(const std::vector<double>& cdf, double u) {
  return std::min<std::size_t>(cdf.size() - 1, std::upper_bound(cdf.begin(), cdf.end(), u * cdf.back()) - cdf.begin());
}

LatLon landmark_point(const Plan& p, Gen& g, std::size_t* which) {
  const std::size_t l = pick(p.landmark_cdf, g.uniform());
  if (which) *which = l;
  const double s = kLandmarks[l].sigma_m;
  return offset(kLandmarks[l].at, g.normal() * s, g.normal() * s);
}

LatLon bridge_point(Gen& g) {
  const double along = (g.uniform() - 0.5) * kBridgeLengthM, across = g.normal() * 6.0;
  const double az = kBridgeAzimuthDeg * kPi / 180;
  return offset(kBridgeCentre, along * std::sin(az) + across * std::cos(az), along * std::cos(az) - across * std::sin(az));
}

LatLon broadway_point(Gen& g) {
  const std::size_t seg = g.below(std::size(kBroadway) - 1);
  const double t = g.uniform();
  const LatLon a = kBroadway[seg], b = kBroadway[seg + 1];
  return offset({a.lat + t * (b.lat - a.lat), a.lon + t * (b.lon - a.lon)}, g.normal() * 20, g.normal() * 20);
}

LatLon manhattan_point(Gen& g) {
  const double along = (g.uniform() - 0.5) * 19000, across = (g.uniform() - 0.5) * 3000;
  const double az = 29.0 * kPi / 180;
  return offset(kManhattan, along * std::sin(az) + across * std::cos(az), along * std::cos(az) - across * std::sin(az));
}

LatLon city_point(Gen& g) {
  return {kMinLat + g.uniform() * (kMaxLat - kMinLat), kMinLon + g.uniform() * (kMaxLon - kMinLon)};
}

LatLon clamp_bbox(LatLon p) {
  return {std::clamp(p.lat, kMinLat, kMaxLat), std::clamp(p.lon, kMinLon, kMaxLon)};
}

Plan make_plan(std::int64_t rows, std::uint64_t seed) {
  Plan p;
  p.seed = seed;
  p.rows = rows;
  Gen g(embedflow::derive_seed(seed, "plan"));
  for (const auto& l : kLandmarks) p.landmark_cdf.push_back((p.landmark_cdf.empty() ? 0 : p.landmark_cdf.back()) + l.weight);
  for (double w : kYearWeights) p.year_cdf.push_back((p.year_cdf.empty() ? 0 : p.year_cdf.back()) + w);
  const std::int64_t users = std::max<std::int64_t>(10, rows / 20);
  p.user_cdf.resize(static_cast<std::size_t>(users));
  double acc = 0;
  for (std::int64_t u = 0; u < users; ++u) p.user_cdf[u] = acc += 1.0 / std::pow(u + 1.0, 1.05);

  const std::int64_t timelapse = rows >= 10000 ? rows / 1200 : 0;
  const std::int64_t duplicates = rows / 100;
  std::int64_t rest = rows - timelapse - duplicates;
  // Hot spots: m_i = C / i while m_i >= 2; C = 1.48% of rows puts ~1.8e8 pairs within 10 m in a
  // 1M sample of 6M rows (pairs scale with the square of the sampling rate).
  std::vector<std::int64_t> hot_sizes;
  const double C = 0.0148 * static_cast<double>(rows);
  std::int64_t hot_total = 0;
  for (std::int64_t i = 1;; ++i) {
    const auto m = static_cast<std::int64_t>(C / static_cast<double>(i));
    if (m < 2 || hot_total + m > rest / 4) break;
    hot_sizes.push_back(m);
    hot_total += m;
  }
  rest -= hot_total;
  for (std::size_t h = 0; h < hot_sizes.size(); ++h) {
    const double u = g.uniform();
    LatLon at = u < 0.5 ? landmark_point(p, g, nullptr) : u < 0.9 ? manhattan_point(g) : city_point(g);
    p.hotspots.push_back(clamp_bbox(at));
  }
  p.kinds.reserve(static_cast<std::size_t>(rows));
  auto add = [&](Kind k, std::uint64_t param) { p.kinds.push_back(static_cast<std::uint64_t>(k) << 32 | param); };
  for (std::size_t h = 0; h < hot_sizes.size(); ++h)
    for (std::int64_t i = 0; i < hot_sizes[h]; ++i) add(kHotspot, h);
  for (std::int64_t i = 0; i < timelapse; ++i) add(kTimelapse, static_cast<std::uint64_t>(i));
  for (std::int64_t i = 0; i < duplicates; ++i) add(kDuplicate, 0);
  // Remaining rows: landmarks 36%, bridge 4%, Broadway 6%, Manhattan 39%, city-wide 15%.
  const double shares[] = {0.36, 0.04, 0.06, 0.39, 0.15};
  const Kind kinds[] = {kLandmark, kBridge, kBroadwayBand, kManhattanBg, kCity};
  std::int64_t placed = 0;
  for (int k = 0; k < 5; ++k) {
    const std::int64_t n = k == 4 ? rest - placed : static_cast<std::int64_t>(shares[k] * static_cast<double>(rest));
    for (std::int64_t i = 0; i < n; ++i) add(kinds[k], 0);
    placed += n;
  }
  for (std::size_t i = p.kinds.size(); i > 1; --i) std::swap(p.kinds[i - 1], p.kinds[g.below(i)]);
  return p;
}

// Fixed-point formatting: fast, and the written value is the value every reader sees.
void put_fixed6(std::string& s, double v) {
  auto q = static_cast<std::int64_t>(std::llround(v * 1e6));
  if (q < 0) { s += '-'; q = -q; }
  s += std::to_string(q / 1000000);
  char frac[8];
  std::snprintf(frac, sizeof frac, ".%06lld", static_cast<long long>(q % 1000000));
  s += frac;
}

void put_time(std::string& s, std::int64_t t, bool unix_time) {
  if (unix_time) { s += std::to_string(t); return; }
  std::int64_t z = t / 86400 + 719468;
  const std::int64_t secs = t % 86400;
  const std::int64_t era = z / 146097;
  const unsigned doe = static_cast<unsigned>(z - era * 146097);
  const unsigned yoe = (doe - doe / 1460 + doe / 36524 - doe / 146096) / 365;
  const unsigned doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
  const unsigned mp = (5 * doy + 2) / 153;
  const unsigned d = doy - (153 * mp + 2) / 5 + 1;
  const unsigned m = mp < 10 ? mp + 3 : mp - 9;
  const std::int64_t y = static_cast<std::int64_t>(yoe) + era * 400 + (m <= 2);
  char buf[64];
  std::snprintf(buf, sizeof buf, "%04lld-%02u-%02uT%02lld:%02lld:%02lld", static_cast<long long>(y), m, d,
                static_cast<long long>(secs / 3600), static_cast<long long>(secs / 60 % 60),
                static_cast<long long>(secs % 60));
  s += buf;
}

std::int64_t days_from_civil(std::int64_t y, unsigned m, unsigned d) {
  y -= m <= 2;
  const std::int64_t era = y / 400;
  const unsigned yoe = static_cast<unsigned>(y - era * 400);
  const unsigned doy = (153 * (m + (m > 2 ? -3 : 9)) + 2) / 5 + d - 1;
  const unsigned doe = yoe * 365 + yoe / 4 - yoe / 100 + doy;
  return era * 146097 + static_cast<std::int64_t>(doe) - 719468;
}

struct Row {
  LatLon at;
  std::int64_t time;
  std::int64_t user;  // -1: the time-lapse user
  int accuracy;
  std::size_t landmark;  // index or SIZE_MAX
};

std::string make_chunk(const Plan& p, std::size_t chunk, std::size_t begin, std::size_t end) {
  Gen g(embedflow::derive_seed(p.seed, static_cast<std::uint64_t>(chunk)));
  std::string s;
  s.reserve((end - begin) * 110);
  Row prev{};
  bool have_prev = false;
  for (std::size_t i = begin; i < end; ++i) {
    const Kind kind = static_cast<Kind>(p.kinds[i] >> 32);
    const std::uint64_t param = p.kinds[i] & 0xffffffffULL;
    Row r{};
    r.landmark = SIZE_MAX;
    r.user = static_cast<std::int64_t>(pick(p.user_cdf, g.uniform()));
    const std::size_t y = pick(p.year_cdf, g.uniform());
    const std::int64_t y0 = days_from_civil(kFirstYear + static_cast<std::int64_t>(y), 1, 1) * 86400;
    const std::int64_t y1 = days_from_civil(kFirstYear + static_cast<std::int64_t>(y) + 1, 1, 1) * 86400;
    r.time = y0 + static_cast<std::int64_t>(g.below(static_cast<std::uint64_t>(y1 - y0)));
    r.accuracy = g.uniform() < 0.85 ? 16 : 11 + static_cast<int>(g.below(5));
    switch (kind) {
      case kLandmark: r.at = landmark_point(p, g, &r.landmark); break;
      case kBridge: r.at = bridge_point(g); break;
      case kBroadwayBand: r.at = broadway_point(g); break;
      case kManhattanBg: r.at = manhattan_point(g); break;
      case kCity: r.at = city_point(g); break;
      case kHotspot: r.at = p.hotspots[param]; break;
      case kTimelapse:
        r.at = kTimelapseSpot;
        r.user = -1;
        r.time = kTimelapseStart + static_cast<std::int64_t>(param) * kTimelapseStep;
        r.accuracy = 16;
        break;
      case kDuplicate:
        if (have_prev) {
          r = prev;
          r.time += static_cast<std::int64_t>(g.below(2));
        } else {
          r.at = manhattan_point(g);
        }
        break;
    }
    r.at = clamp_bbox(r.at);
    prev = r;
    have_prev = true;

    s += std::to_string(i + 1);
    s += ',';
    put_fixed6(s, r.at.lat);
    s += ',';
    put_fixed6(s, r.at.lon);
    s += ',';
    put_time(s, r.time, p.unix_time);
    s += ',';
    if (r.user < 0) s += "timelapse@N01";
    else { s += std::to_string(10000000 + r.user * 7919 % 90000000); s += "@N0"; s += static_cast<char>('0' + r.user % 8); }
    s += ',';
    s += std::to_string(r.accuracy);
    s += ',';
    // Titles and descriptions exercise CSV quoting: commas, quotes, the odd newline.
    if (r.landmark != SIZE_MAX) {
      s += '"';
      s += kLandmarks[r.landmark].name;
      s += g.uniform() < 0.3 ? ", at night\"" : "\"";
    } else if (kind == kTimelapse) {
      s += "Barclays construction frame ";
      s += std::to_string(param);
    } else {
      s += "IMG_";
      s += std::to_string(g.below(10000));
    }
    s += ',';
    const double u = g.uniform();
    if (u < 0.02) s += "\"she said \"\"look up\"\", then\nwe left\"";
    else if (u < 0.15) s += "\"New York, NY\"";
    else if (u < 0.25) s += "summer trip";
    s += '\n';
  }
  return s;
}

int usage(const char* msg) {
  std::fprintf(stderr, "gen_photos: %s\nusage: gen_photos --rows N --seed S --out FILE|- [--time-format iso|unix] [--threads T]\n", msg);
  return 2;
}

}  // namespace

int main(int argc, char** argv) {
  std::int64_t rows = 100000;
  std::uint64_t seed = 1;
  std::string out = "-";
  bool unix_time = false;
  int threads = static_cast<int>(std::max(1u, std::thread::hardware_concurrency()));
  for (int i = 1; i < argc; ++i) {
    const std::string a = argv[i];
    auto value = [&]() -> std::string {
      if (i + 1 >= argc) { usage(("missing value for " + a).c_str()); std::exit(2); }
      return argv[++i];
    };
    try {
      if (a == "--rows") rows = std::stoll(value());
      else if (a == "--seed") seed = std::stoull(value());
      else if (a == "--out") out = value();
      else if (a == "--threads") threads = std::max(1, std::stoi(value()));
      else if (a == "--time-format") {
        const std::string f = value();
        if (f != "iso" && f != "unix") return usage("--time-format is iso or unix");
        unix_time = f == "unix";
      } else if (a == "-h" || a == "--help") { usage("synthetic Flickr-NYC-like photo CSV"); return 0; }
      else return usage(("unknown argument " + a).c_str());
    } catch (const std::exception&) {
      return usage(("bad value for " + a).c_str());
    }
  }
  if (rows < 1 || rows > 2000000000) return usage("--rows must be in 1..2e9");
  Plan plan = make_plan(rows, seed);
  plan.unix_time = unix_time;

  std::FILE* f = out == "-" ? stdout : std::fopen(out.c_str(), "wb");
  if (!f) { std::fprintf(stderr, "gen_photos: cannot write %s: %s\n", out.c_str(), std::strerror(errno)); return 1; }
  std::fputs("id,lat,lon,time,user,accuracy,title,description\n", f);
  const std::size_t chunk_rows = 1 << 16;
  const std::size_t n_chunks = (static_cast<std::size_t>(rows) + chunk_rows - 1) / chunk_rows;
  // Chunks are generated in parallel waves and written in order, so the file does not depend on
  // the thread count.
  const std::size_t wave = static_cast<std::size_t>(threads) * 2;
  std::vector<std::string> bufs(wave);
  for (std::size_t w0 = 0; w0 < n_chunks; w0 += wave) {
    const std::size_t w1 = std::min(n_chunks, w0 + wave);
    std::atomic<std::size_t> next{w0};
    std::vector<std::thread> pool;
    for (int t = 0; t < threads; ++t)
      pool.emplace_back([&] {
        for (std::size_t c; (c = next++) < w1;)
          bufs[c - w0] = make_chunk(plan, c, c * chunk_rows, std::min<std::size_t>(rows, (c + 1) * chunk_rows));
      });
    for (auto& th : pool) th.join();
    for (std::size_t c = w0; c < w1; ++c)
      if (std::fwrite(bufs[c - w0].data(), 1, bufs[c - w0].size(), f) != bufs[c - w0].size()) {
        std::fprintf(stderr, "gen_photos: write failed: %s\n", std::strerror(errno));
        return 1;
      }
  }
  if (f != stdout && std::fclose(f) != 0) { std::fprintf(stderr, "gen_photos: close failed\n"); return 1; }
  return 0;
}
