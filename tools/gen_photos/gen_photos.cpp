// gen_photos: writes synthetic geotagged photo metadata shaped like the Flickr NYC collection
// (2006-2016, bbox [(-74.052544, 40.525070), (-73.740685, 40.889249)]) as CSV or in the YFCC100M
// layout, and optionally renders a JPEG per row whose content follows the metadata;
// deterministic by seed and independent of the thread count.
//
// What the metadata reproduces, and why (the pair samplers are only tested honestly on data like
// this):
//   - volume by year: ~500k photos a year for 2009-2016 at 6M rows (fewer in 2006-2008);
//   - clusters around real landmarks (Gaussian, sigma 40-250 m), photos along the 1825 m span of
//     the Brooklyn Bridge, a band up and down Broadway, Manhattan and city-wide background;
//   - exact-coordinate hot spots (a venue's default location) with Zipf sizes m_i = C/i, the
//     largest ~1.5% of rows, so a 1M-row sample has ~1.8e8 pairs within 10 m;
//   - Zipf-distributed users, plus one time-lapse user posting a frame every 10 minutes from one
//     spot by the Barclays Center from 2013-06-01 for rows/1200 frames (none below 10000 rows;
//     --timelapse-frames N sets the number, at most half the rows, for small time-lapse sets);
//   - ~1% duplicate uploads (same user, coordinates, time within a second);
//   - titles and descriptions with commas, quotes and the odd newline, so CSV quoting is real.
//
// What the photos show (render.hpp, docs/photos.md). Each rule follows a fact about cities,
// cameras or light, not a seed; the seed only fixes appearances (materials, shapes, weather):
//   - Places. Each landmark, each hot spot (a venue) and the Brooklyn Bridge is a small 3D scene
//     in metres: a distinctive building whose four sides differ, on a plaza ringed by district
//     buildings (the bridge: two stone towers 486 m apart, cables, the deck). A photo within a
//     landmark's radius (3 sigma, 150-500 m), a venue's 60 m or 40 m of the bridge's axis shows
//     the nearest such scene; elsewhere it stands in a street of the grid.
//   - The view follows the position: people photograph what is in front of them. The camera
//     stands at the photo's position and faces the landmark (the bearing from the position to its
//     centre, +-5 deg of hand-held framing); on the bridge it faces the nearer tower along the
//     deck. A geotag inside a footprint (an address, a venue's default location) was taken from
//     outside it: the camera steps out on the same bearing to 15 m beyond the footprint (to the
//     front when the geotag is the centre). People zoom on a far landmark: the field of view makes it fill ~75% of the frame's
//     height (65 deg, a phone's wide lens, at most; 22 deg at least) and the camera tilts up to its
//     middle. Buildings or trees on the sightline are left out: photographers stand where they
//     see what they photograph. So photos 10 m apart see the same facades from slightly different
//     angles, and a photo 30-100 m away sees the same landmark from elsewhere, maybe another side.
//   - Streets are keyed to places, not photos: Manhattan's grid (avenues at bearing 29 deg), taken
//     as 80 m blocks; the photo stands on the sidewalk of the nearest grid line. Each cell (80 m
//     of one street, between cross streets) has buildings fixed by (seed, street, cell, side).
//     Mid-block the camera aims at the middle of the frontage across the street (people
//     photograph the buildings opposite); within 12 m of a crossing it looks down the street
//     towards the nearest landmark. Photos of one cell and side see the same buildings.
//   - Materials are a district's: facades take one of three materials of their 2 km district
//     (one era, one stock of materials), so colour tells districts apart, not neighbouring places.
//   - Light from the timestamp: sun elevation and azimuth at 40.7 N, 74.0 W; faces shaded by their
//     angle to the sun (Lambert), lit windows at night; the weather is one draw per calendar day
//     (4 days in 10 overcast, haze and fog as a visibility with Koschmieder's contrast loss, snow on
//     some winter days), foliage by season.
//   - Camera colour per photo, from (seed, photo): auto white balance misjudging the light by up to
//     +-55 mired, exposure error (sigma 0.35 EV), saturation of the picture style (0.7-1.3); then
//     sensor noise and JPEG. So colour alone is a weak cue; geometry and texture identify a place.
//   - Duplicate uploads show their original's photo (byte-identical files); time-lapse frames
//     share one camera (position, framing, colour) and differ in light.
// The truth files come from the same parameters:
//   --truth    per photo: source, scene, facade_key (scene and the landmark side it faces most,
//              or street cell and frontage/vista: two photos share facades when their keys are
//              equal), faces (bit mask of the landmark sides seen, the bridge's second tower in
//              bits 4-7; same scene and a common bit: a shared side), camera position and target (metres east/north of 40.768 N,
//              73.978 W), heading, pitch, field of view, zoom, light and camera colour;
//   --triplets query,positive,negative (the positive is the more similar, as eval.triplet_accuracy
//              reads it). The positive shows the query's facade (same facade_key). Easy (1 -
//              --hard-fraction): the negative is another place >= 2 km away. Hard: the negative is
//              a neighbouring scene (centres 150-800 m apart; half the hard ones), the query's
//              scene seen from sides the query does not see (30%), or another street cell or view
//              within 400 m (20%). Each falls back to the next kind when the city has none;
//   --triplet-truth  the judgement of each triplet, row for row: half, kind, the facade keys and
//              the metres query-positive and query-negative (default: <triplets>_truth.csv
//              beside the triplet file, which keeps the three id columns that
//              eval.triplet_accuracy reads; this file follows it row for row);
//   --split    id,label,role: the scene as label, a --query-fraction of each scene as queries.
//   --validation  id,label: the photos of a validation area that the triplets and the split
//              leave out, so a model can be selected on a part of the city that neither training
//              (which leaves these ids out) nor testing sees -- a spatial block, as geographic
//              machine learning holds out whole areas rather than random photos, because photos
//              metres apart show the same things. --validation-area S,W,N,E (degrees; default
//              Midtown from 31st to 44th Street, river to river: 40.7455,-74.02,40.7560,-73.96).
//              A photo of a scene belongs to the area when the scene's centre does (a scene is
//              never split between the two sides), any other photo when its geotag does. Label:
//              the scene, or -1 (streets, duplicate uploads and time-lapse frames: held out of
//              training, not scored).
//
// Usage: gen_photos --rows 6000000 --seed 1 --out photos.csv [--format csv|yfcc] [--timelapse-frames N]
//          [--time-format iso|unix] [--threads 2] [--images DIR [--image-limit N] [--image-size 500]
//          [--truth F] [--triplets F [--triplet-truth F] [--triplet-count 1000] [--hard-fraction 0.5]]
//          [--split F [--query-fraction 0.2]] [--validation F [--validation-area S,W,N,E]]]
#include <algorithm>
#include <atomic>
#include <cctype>
#include <charconv>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <map>
#include <random>
#include <string>
#include <stdexcept>
#include <thread>
#include <type_traits>
#include <unordered_map>
#include <vector>

#include <opencv2/core/utility.hpp>
#include <opencv2/imgcodecs.hpp>

#include "embedflow/rng.hpp"
#include "exif_writer.hpp"
#include "render.hpp"

namespace {

namespace fs = std::filesystem;

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
  bool yfcc = false;                   // the YFCC100M layout instead of the project's CSV
  std::int64_t images = 0;             // rows 0..images-1 get a rendered JPEG
  std::string image_prefix;            // their path relative to the CSV's folder, before <id>.jpg
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

Plan make_plan(std::int64_t rows, std::uint64_t seed, std::int64_t timelapse_frames) {
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

  const std::int64_t timelapse = timelapse_frames >= 0 ? std::min(timelapse_frames, rows / 2) : rows >= 10000 ? rows / 1200 : 0;
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

// What the renderer needs of a row. A duplicate upload points at the row it copies, whose photo
// (scene, view and time) it shows.
struct PhotoInfo {
  LatLon at;
  std::int64_t time;
  std::int64_t source;  // row index of the photo shown (itself unless a duplicate)
  bool timelapse;
  // The metadata row's own time and user (a duplicate upload's differ from what it shows), for
  // the EXIF block of --exif.
  std::int64_t row_time = 0;
  std::string user;
};

void append_int(std::string& s, std::int64_t v) {
  char buf[24];
  const auto [end, ec] = std::to_chars(buf, buf + sizeof buf, v);
  s.append(buf, end);
}

// CSV field: quoted when it holds a comma, quote or newline.
void put_csv_text(std::string& s, const std::string& text) {
  if (text.find_first_of(",\"\n\r") == std::string::npos) { s += text; return; }
  s += '"';
  for (char c : text) {
    if (c == '"') s += '"';
    s += c;
  }
  s += '"';
}

// YFCC100M text fields are percent-encoded, spaces as '+'.
void put_url_encoded(std::string& s, const std::string& text) {
  static const char* hex = "0123456789ABCDEF";
  for (unsigned char c : text) {
    if (std::isalnum(c) || c == '-' || c == '_' || c == '.' || c == '~') s += static_cast<char>(c);
    else if (c == ' ') s += '+';
    else { s += '%'; s += hex[c >> 4]; s += hex[c & 15]; }
  }
}

std::string make_chunk(const Plan& p, std::size_t chunk, std::size_t begin, std::size_t end, std::vector<PhotoInfo>& info) {
  Gen g(embedflow::derive_seed(p.seed, static_cast<std::uint64_t>(chunk)));
  std::string s;
  s.reserve((end - begin) * (p.yfcc ? 330 : 130));
  Row prev{};
  bool have_prev = false;
  std::int64_t prev_source = -1;
  std::string title, description, user, id;
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
    std::int64_t source = static_cast<std::int64_t>(i);
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
          source = prev_source;
        } else {
          r.at = manhattan_point(g);
        }
        break;
    }
    r.at = clamp_bbox(r.at);
    if (static_cast<std::int64_t>(i) < p.images) {
      // A duplicate shows its source's photo, taken at the source's time.
      const bool dup = source != static_cast<std::int64_t>(i);
      info[i] = {r.at, dup ? info[static_cast<std::size_t>(source)].time : r.time, source,
                 dup ? info[static_cast<std::size_t>(source)].timelapse : kind == kTimelapse, r.time, std::string()};
    }
    prev = r;
    prev_source = source;
    have_prev = true;

    // The strings are reused across rows: allocations would dominate the 6M-row run.
    if (r.user < 0) {
      user.assign("timelapse@N01");
    } else {
      user.clear();
      append_int(user, 10000000 + r.user * 7919 % 90000000);
      user += "@N0";
      user += static_cast<char>('0' + r.user % 8);
    }
    if (static_cast<std::int64_t>(i) < p.images) info[i].user = user;
    // Titles and descriptions exercise CSV quoting: commas, quotes, the odd newline.
    if (r.landmark != SIZE_MAX) {
      title.assign(kLandmarks[r.landmark].name);
      if (g.uniform() < 0.3) title += ", at night";
    } else if (kind == kTimelapse) {
      title.assign("Barclays construction frame ");
      append_int(title, static_cast<std::int64_t>(param));
    } else {
      title.assign("IMG_");
      append_int(title, static_cast<std::int64_t>(g.below(10000)));
    }
    const double u = g.uniform();
    description.assign(u < 0.02 ? "she said \"look up\", then\nwe left" : u < 0.15 ? "New York, NY" : u < 0.25 ? "summer trip" : "");
    id.clear();
    append_int(id, static_cast<std::int64_t>(i + 1));

    if (p.yfcc) {
      // yfcc100m_dataset, Webscope layout: 23 tab-separated columns.
      const std::string secret = std::to_string(embedflow::mix64(p.seed ^ (i + 1)) % 9000000000ULL + 1000000000ULL);
      const std::string server = std::to_string(1000 + (i * 37) % 8000), farm = std::to_string(1 + i % 9);
      s += id; s += '\t';
      s += user; s += '\t';
      put_url_encoded(s, "user " + user.substr(0, 4)); s += '\t';
      const std::size_t t0 = s.size();
      put_time(s, r.time, false);
      s[t0 + 10] = ' ';
      s += ".0\t";
      s += std::to_string(r.time + 3600 + static_cast<std::int64_t>(i % 86400)); s += '\t';
      s += "Canon+EOS+5D\t";
      put_url_encoded(s, title); s += '\t';
      put_url_encoded(s, description); s += '\t';
      s += "nyc,newyork\t\t";
      put_fixed6(s, r.at.lon); s += '\t';
      put_fixed6(s, r.at.lat); s += '\t';
      s += std::to_string(r.accuracy); s += '\t';
      s += "http://www.flickr.com/photos/" + user + "/" + id + "/\t";
      s += "http://farm" + farm + ".staticflickr.com/" + server + "/" + id + "_" + secret + ".jpg\t";
      s += "Attribution License\thttp://creativecommons.org/licenses/by/2.0/\t";
      s += server + "\t" + farm + "\t" + secret + "\t" + secret + "\tjpg\t0\n";
      continue;
    }
    s += id;
    s += ',';
    put_fixed6(s, r.at.lat);
    s += ',';
    put_fixed6(s, r.at.lon);
    s += ',';
    put_time(s, r.time, p.unix_time);
    s += ',';
    s += user;
    s += ',';
    s += std::to_string(r.accuracy);
    s += ',';
    put_csv_text(s, title);
    s += ',';
    put_csv_text(s, description);
    if (!p.image_prefix.empty() || p.images > 0) {
      s += ',';
      if (static_cast<std::int64_t>(i) < p.images) { s += p.image_prefix; s += id; s += ".jpg"; }
    }
    s += '\n';
  }
  return s;
}

// ---- Places: every landmark, the bridge and every hot spot is a scene; photos elsewhere stand
// in a street of the grid.

enum SiteKind { kLandmarkSite = 0, kBridgeSite, kVenueSite };

struct SceneSite {
  LatLon at;
  double radius_m;
  SiteKind kind;
  std::string key;   // appearance key
  std::string name;  // for the truth file
};

// The bridge scene covers the deck: within this many metres of its axis.
constexpr double kBridgeDeckM = 40.0;
// The towers stand 486 m apart (the main span), symmetric about the span's centre.
constexpr double kBridgeTowerY = 243.0;

std::vector<SceneSite> scene_sites(const Plan& p) {
  std::vector<SceneSite> sites;
  for (std::size_t l = 0; l < std::size(kLandmarks); ++l)
    sites.push_back({kLandmarks[l].at, std::clamp(3 * kLandmarks[l].sigma_m, 150.0, 500.0), kLandmarkSite,
                     "landmark:" + std::to_string(l), kLandmarks[l].name});
  sites.push_back({kBridgeCentre, kBridgeLengthM / 2 + kBridgeDeckM, kBridgeSite, "bridge", "Brooklyn Bridge"});
  for (std::size_t h = 0; h < p.hotspots.size(); ++h)
    sites.push_back({p.hotspots[h], 60.0, kVenueSite, "hotspot:" + std::to_string(h), "hot spot " + std::to_string(h)});
  return sites;
}

double metres(LatLon a, LatLon b) {
  const double north = (a.lat - b.lat) * kMetresPerDegLat;
  const double east = (a.lon - b.lon) * kMetresPerDegLat * std::cos((a.lat + b.lat) / 2 * kPi / 180);
  return std::sqrt(north * north + east * east);
}

// Metres east and north of `origin`.
cv::Vec2d local_metres(LatLon p, LatLon origin) {
  return {(p.lon - origin.lon) * kMetresPerDegLat * std::cos(origin.lat * kPi / 180), (p.lat - origin.lat) * kMetresPerDegLat};
}

// Along and across the bridge's axis (bearing 124 deg), from its centre: +y along, +x to the right.
cv::Vec2d bridge_frame(LatLon p) {
  const cv::Vec2d m = local_metres(p, kBridgeCentre);
  const double az = kBridgeAzimuthDeg * kPi / 180;
  return {m[0] * std::cos(az) - m[1] * std::sin(az), m[0] * std::sin(az) + m[1] * std::cos(az)};
}

// Nearest site whose area covers the point, by a grid of cells wider than any radius but the
// bridge's (checked on its own).
class SiteIndex {
 public:
  explicit SiteIndex(const std::vector<SceneSite>& sites) : sites_(sites) {
    for (std::size_t i = 0; i < sites.size(); ++i)
      if (sites[i].kind == kBridgeSite) bridge_ = static_cast<std::int64_t>(i);
      else cells_[cell(sites[i].at, 0, 0)].push_back(i);
  }
  // Site index and distance to its centre, or -1 when no site covers the point. The bridge
  // covers its deck; a landmark or venue a disc, the nearer centre winning.
  std::pair<std::int64_t, double> nearest(LatLon at) const {
    std::int64_t best = -1;
    double best_d = 0;
    for (int dy = -1; dy <= 1; ++dy)
      for (int dx = -1; dx <= 1; ++dx) {
        const auto it = cells_.find(cell(at, dy, dx));
        if (it == cells_.end()) continue;
        for (std::size_t i : it->second) {
          const double d = metres(at, sites_[i].at);
          if (d <= sites_[i].radius_m && (best < 0 || d < best_d || (d == best_d && static_cast<std::int64_t>(i) < best))) {
            best = static_cast<std::int64_t>(i);
            best_d = d;
          }
        }
      }
    if (bridge_ >= 0) {
      const cv::Vec2d b = bridge_frame(at);
      if (std::fabs(b[0]) <= kBridgeDeckM && std::fabs(b[1]) <= kBridgeLengthM / 2 && (best < 0 || std::fabs(b[0]) < best_d))
        return {bridge_, metres(at, kBridgeCentre)};
    }
    return {best, best_d};
  }

 private:
  static std::int64_t cell(LatLon p, int dy, int dx) {
    // 0.012 deg of latitude ~ 1.33 km, 0.016 deg of longitude ~ 1.35 km at 40.7 N: above 500 m.
    const auto y = static_cast<std::int64_t>(std::floor(p.lat / 0.012)) + dy;
    const auto x = static_cast<std::int64_t>(std::floor(p.lon / 0.016)) + dx;
    return y * 100000 + x;
  }
  const std::vector<SceneSite>& sites_;
  std::unordered_map<std::int64_t, std::vector<std::size_t>> cells_;
  std::int64_t bridge_ = -1;
};

// The street grid: Manhattan's avenues run at bearing 29 deg; blocks are taken as 80 m squares.
// City frame: metres east and north of kManhattan's centre; u along the avenues, v across.
constexpr double kGridDeg = 29.0;
constexpr double kRegionM = 2000.0;
using gen_photos::kCellM;
using gen_photos::kStreetHalfM;  // districts sharing building materials

struct GridPoint { double u, v; };
GridPoint grid_point(LatLon p) {
  const cv::Vec2d m = local_metres(p, kManhattan);
  const double g = kGridDeg * kPi / 180;
  return {m[0] * std::sin(g) + m[1] * std::cos(g), m[0] * std::cos(g) - m[1] * std::sin(g)};
}

std::string region_key(LatLon p) {
  const GridPoint g = grid_point(p);
  return std::to_string(static_cast<long>(std::floor(g.u / kRegionM))) + ":" + std::to_string(static_cast<long>(std::floor(g.v / kRegionM)));
}

// Render parameters of one row: what the truth files are made of.
struct Shot {
  std::int64_t scene = -1;   // site index, -1: a street
  double distance_m = 0;     // to the site's centre (0 for streets)
  std::string scene_key;     // site key, or the street's key
  std::string facade_key;    // what the photo shows: scene and facing side, or street cell and direction
  std::string cell;          // street cell ("" for scenes)
  std::string region;
  int faces = 0;             // bit mask of the target's visible sides (scenes)
  bool venue = false;
  long cell_lo = 0, cell_hi = 0;  // street cells to build
  double frame_bearing = 0;
  std::string view_key;
  gen_photos::View view;
  gen_photos::Light light;
  cv::Vec2d cam_city;        // camera position, metres east/north of the city frame's origin
  cv::Vec2d target_city{std::nan(""), std::nan("")};  // what it faces (scenes), same frame
};

// Heading jitter of a hand-held framing and the landmark-framing rule: the field of view that
// makes the target fill ~75% of the frame's height and ~70% of its width, a phone's 65 deg when
// that is wider, a 3x zoom (22 deg) at most; the camera tilts up to the target's middle.
void frame_target(gen_photos::View& v, gen_photos::Draw& d, double cam_x, double cam_y, double tx, double ty, double radius,
                  double height) {
  const double dx = tx - cam_x, dy = ty - cam_y, dist = std::max(1.0, std::hypot(dx, dy));
  v.cam.x = cam_x;
  v.cam.y = cam_y;
  v.cam.z = 1.6 + d.uniform(-0.15, 0.15);
  v.cam.heading_deg = std::fmod(std::atan2(dx, dy) * 180 / kPi + d.normal() * 5.0 + 360.0, 360.0);
  const double alpha = std::atan(height / dist), beta = 2 * std::atan(radius / dist);
  const double fov_v = alpha / 0.75;
  const double fov_h = std::max(2 * std::atan(std::tan(fov_v / 2) * 4.0 / 3.0), beta / 0.7) * 180 / kPi;
  v.cam.fov_deg = std::clamp(fov_h * d.uniform(0.9, 1.12), 22.0, 65.0);
  v.cam.pitch_deg = std::clamp(std::atan((height * 0.5 - 1.6) / dist) * 180 / kPi, 0.0, 30.0) + d.normal() * 1.5;
}

Shot plan_shot(const Plan& p, const std::vector<SceneSite>& sites, const SiteIndex& index, const std::vector<PhotoInfo>& info,
               const std::vector<gen_photos::Scene>& scenes, std::size_t i) {
  const PhotoInfo& ph = info[i];
  const std::size_t src = static_cast<std::size_t>(ph.source);
  const LatLon at = info[src].at;
  Shot s;
  // A time-lapse keeps one view key; any other photo's view is its own (its source's).
  s.view_key = info[src].timelapse ? "timelapse" : std::to_string(src + 1);
  s.view = gen_photos::make_view(p.seed, s.view_key);
  s.light = gen_photos::light_at(p.seed, info[src].time);
  s.region = region_key(at);
  gen_photos::Draw d(embedflow::derive_seed(p.seed, "frame:" + s.view_key));
  const auto [scene, dist] = index.nearest(at);
  s.scene = scene;
  if (scene >= 0) {
    const SceneSite& site = sites[static_cast<std::size_t>(scene)];
    const gen_photos::Scene& sc = scenes[static_cast<std::size_t>(scene)];
    s.distance_m = dist;
    s.scene_key = site.key;
    s.venue = site.kind == kVenueSite;
    if (site.kind == kBridgeSite) {
      // On the deck, facing the nearer tower along the bridge.
      const cv::Vec2d b = bridge_frame(at);
      const int tower = b[1] < 0 ? 0 : 1;
      const double ty = tower == 0 ? -kBridgeTowerY : kBridgeTowerY;
      double y = b[1];
      const int side = y < ty ? -1 : 1;
      if (std::fabs(y - ty) < 15) y = ty + side * 15;
      const gen_photos::Building& t = sc.buildings[static_cast<std::size_t>(tower)];
      frame_target(s.view, d, std::clamp(b[0], -5.0, 5.0), y, 0, ty, t.radius, 70);
      // Tower 1's faces are bits 4-7, so a common bit still means a shared side.
      s.faces = gen_photos::visible_faces(t, s.view.cam.x, s.view.cam.y, nullptr) << (4 * tower);
      s.facade_key = site.key + ":tower" + std::to_string(tower) + (side < 0 ? "-" : "+");
    } else {
      // Facing the landmark from where the photo was taken; a geotag inside the footprint (an
      // address, a venue's default location) was taken from just outside it, on the same
      // bearing, or at the front when the geotag is the centre itself.
      const gen_photos::Building& t = sc.buildings[0];
      cv::Vec2d c = local_metres(at, site.at);
      const double r_min = t.radius + 15, len = std::hypot(c[0], c[1]);
      if (len < 0.5) {
        const double a = t.parts[0].angle_deg * kPi / 180;
        c = cv::Vec2d(std::cos(a), std::sin(a)) * r_min;
      } else if (len < r_min) {
        c *= r_min / len;
      }
      double height = 0;
      for (const auto& part : t.parts) height = std::max(height, part.z1);
      frame_target(s.view, d, c[0], c[1], 0, 0, t.radius, height);
      int primary = 0;
      s.faces = gen_photos::visible_faces(t, c[0], c[1], &primary);
      s.facade_key = site.key + ":side" + std::to_string(primary);
    }
    s.frame_bearing = sc.frame_bearing_deg;
    const double fb = s.frame_bearing * kPi / 180;
    const cv::Vec2d origin = site.kind == kBridgeSite ? local_metres(kBridgeCentre, kManhattan) : local_metres(site.at, kManhattan);
    // Scene frame to east/north: +y at bearing fb, +x at fb + 90.
    auto to_city = [&](double x, double y) { return origin + cv::Vec2d(x * std::cos(fb) + y * std::sin(fb), -x * std::sin(fb) + y * std::cos(fb)); };
    s.cam_city = to_city(s.view.cam.x, s.view.cam.y);
    s.target_city = site.kind == kBridgeSite ? to_city(0, bridge_frame(at)[1] < 0 ? -kBridgeTowerY : kBridgeTowerY) : to_city(0, 0);
    return s;
  }
  // A street: the nearest line of the grid, the photographer on its sidewalk. Mid-block, people
  // photograph the block frontage across the street: the camera aims at its middle, so photos
  // of one cell show the same buildings from different angles. At a crossing (within 12 m of a
  // cross street) they photograph the vista down the street, towards the nearest landmark.
  const GridPoint g = grid_point(at);
  const double du = g.u - kCellM * std::round(g.u / kCellM), dv = g.v - kCellM * std::round(g.v / kCellM);
  const int family = std::fabs(dv) <= std::fabs(du) ? 0 : 1;
  const long line = static_cast<long>(std::lround((family == 0 ? g.v : g.u) / kCellM));
  const double t = family == 0 ? g.u : g.v, w = family == 0 ? dv : -du;
  const long cell = static_cast<long>(std::floor(t / kCellM));
  const double in_cell = t - cell * kCellM;
  const int side = w < 0 ? -1 : 1;  // the camera's sidewalk
  s.distance_m = 0;
  s.scene_key = "street:" + std::to_string(family) + ":" + std::to_string(line);
  s.cell = s.scene_key + ":" + std::to_string(cell);
  s.frame_bearing = family == 0 ? kGridDeg : kGridDeg + 90;
  s.view.cam.z = 1.6 + d.uniform(-0.15, 0.15);
  if (in_cell < 12 || in_cell > kCellM - 12) {
    double best = 1e18;
    GridPoint lm{};
    for (const auto& l : kLandmarks) {
      const GridPoint q = grid_point(l.at);
      const double dd = (q.u - g.u) * (q.u - g.u) + (q.v - g.v) * (q.v - g.v);
      if (dd < best) { best = dd; lm = q; }
    }
    const int dir = (family == 0 ? lm.u - g.u : lm.v - g.v) >= 0 ? 1 : -1;
    s.facade_key = s.cell + ":vista" + (dir > 0 ? "+" : "-");
    s.cell_lo = dir > 0 ? cell - 1 : cell - 4;
    s.cell_hi = dir > 0 ? cell + 4 : cell + 1;
    s.view.cam.x = side * 5.0;
    s.view.cam.y = t;
    s.view.cam.heading_deg = std::fmod((dir > 0 ? 0.0 : 180.0) + d.normal() * 5.0 + 360.0, 360.0);
    s.view.cam.pitch_deg = 3.0 + d.normal() * 2.0;
    s.view.cam.fov_deg = 65.0 * d.uniform(0.85, 1.0);
  } else {
    s.facade_key = s.cell + ":front" + (side > 0 ? "-" : "+");  // the frontage across: the other side's
    s.cell_lo = cell - 1;
    s.cell_hi = cell + 1;
    s.view.cam.x = side * 7.0;
    s.view.cam.y = t;
    const double tx = -side * kStreetHalfM, ty = cell * kCellM + kCellM / 2;
    const double dx = tx - s.view.cam.x, dy = ty - s.view.cam.y, dist = std::hypot(dx, dy);
    s.view.cam.heading_deg = std::fmod(std::atan2(dx, dy) * 180 / kPi + d.normal() * 5.0 + 360.0, 360.0);
    s.view.cam.pitch_deg = std::clamp(std::atan((18.0 - 1.6) / dist) * 180 / kPi, 0.0, 30.0) + d.normal() * 1.5;
    s.view.cam.fov_deg = 65.0 * d.uniform(0.85, 1.0);
  }
  // Back to the grid (family 0: +y along u, +x along v; family 1: +y along v, +x along -u), then
  // to east/north (u at bearing 29 deg, v at 119 deg).
  const double gu = kGridDeg * kPi / 180;
  const double u = family == 0 ? s.view.cam.y : line * kCellM - s.view.cam.x;
  const double v = family == 0 ? line * kCellM + s.view.cam.x : s.view.cam.y;
  s.cam_city = cv::Vec2d(u * std::sin(gu) + v * std::cos(gu), u * std::cos(gu) - v * std::sin(gu));
  return s;
}

bool write_text(const std::string& path, const std::string& text) {
  std::FILE* f = std::fopen(path.c_str(), "wb");
  if (!f) { std::fprintf(stderr, "gen_photos: cannot write %s: %s\n", path.c_str(), std::strerror(errno)); return false; }
  const bool ok = std::fwrite(text.data(), 1, text.size(), f) == text.size();
  if (std::fclose(f) != 0 || !ok) { std::fprintf(stderr, "gen_photos: write failed: %s\n", path.c_str()); return false; }
  return true;
}

// --exif: one photo in three is stored turned, cycling through orientations 2-8, so every
// Orientation value occurs in a folder of 21 photos or more.
int exif_orientation_of(std::size_t photo) { return photo % 3 == 1 ? 2 + static_cast<int>(photo / 3 % 7) : 1; }

// The pixels a camera stores for an upright view `upright` under EXIF Orientation `o`: the
// inverse of the turn a viewer applies (orientation 6 is shown rotated 90 degrees clockwise, so
// it is stored rotated 90 degrees counter-clockwise; the mirrorings are their own inverses).
cv::Mat stored_for_orientation(const cv::Mat& upright, int o) {
  cv::Mat out;
  switch (o) {
    case 2: cv::flip(upright, out, 1); break;
    case 3: cv::rotate(upright, out, cv::ROTATE_180); break;
    case 4: cv::flip(upright, out, 0); break;
    case 5: cv::transpose(upright, out); break;
    case 6: cv::rotate(upright, out, cv::ROTATE_90_COUNTERCLOCKWISE); break;
    case 7: cv::flip(upright, out, -1); cv::transpose(out, out); break;
    case 8: cv::rotate(upright, out, cv::ROTATE_90_CLOCKWISE); break;
    default: out = upright;
  }
  return out;
}

// --exif: GPSHPositioningError of photo i, 3-48 m in steps of 0.25 m (a phone's fix in a city).
double horizontal_error_m(std::size_t photo) { return 3.0 + static_cast<double>(photo * 37 % 181) * 0.25; }

int usage(const char* msg) {
  std::fprintf(stderr,
               "gen_photos: %s\n"
               "usage: gen_photos --rows N --seed S --out FILE|- [--format csv|yfcc] [--time-format iso|unix] [--threads T]\n"
               "         [--timelapse-frames N]\n"
               "         [--images DIR [--image-limit N] [--image-size 500] [--exif] [--truth FILE]\n"
               "          [--triplets FILE [--triplet-truth FILE] [--triplet-count 1000] [--hard-fraction 0.5]]\n"
               "          [--split FILE [--query-fraction 0.2]] [--validation FILE [--validation-area S,W,N,E]]]\n",
               msg);
  return 2;
}

// A whole argument as a number: "1e3" or "12abc" for an integer, or trailing text, is an error
// rather than the number's leading digits.
template <typename T>
T parse_whole(const std::string& text) {
  std::size_t used = 0;
  T v;
  if constexpr (std::is_same_v<T, double>) v = std::stod(text, &used);
  else if constexpr (std::is_signed_v<T>) v = static_cast<T>(std::stoll(text, &used));
  else {
    if (!text.empty() && text[0] == '-') throw std::invalid_argument("negative");
    v = static_cast<T>(std::stoull(text, &used));
  }
  if (used != text.size()) throw std::invalid_argument("trailing text");
  return v;
}

struct Area {
  double south, west, north, east;
  bool contains(const LatLon& p) const { return p.lat >= south && p.lat <= north && p.lon >= west && p.lon <= east; }
};

Area parse_area(const std::string& text) {
  double v[4];
  std::size_t start = 0;
  for (int k = 0; k < 4; ++k) {
    const std::size_t comma = text.find(',', start);
    if ((k < 3) != (comma != std::string::npos)) throw std::invalid_argument("four numbers");
    v[k] = parse_whole<double>(text.substr(start, k < 3 ? comma - start : std::string::npos));
    start = comma + 1;
  }
  if (!(v[0] < v[2] && v[1] < v[3])) throw std::invalid_argument("south < north and west < east");
  return {v[0], v[1], v[2], v[3]};
}

std::string triplet_truth_default(const std::string& triplets) {
  const fs::path p(triplets);
  return (p.parent_path() / (p.stem().string() + "_truth.csv")).string();
}

}  // namespace

int main(int argc, char** argv) {
  std::int64_t rows = 100000;
  std::uint64_t seed = 1;
  std::string out = "-", format = "csv", images_dir, truth_path, triplets_path, triplet_truth_path, split_path, validation_path;
  Area validation_area{40.7455, -74.02, 40.7560, -73.96};
  bool unix_time = false, exif = false;
  std::int64_t image_limit = -1, triplet_count = 1000, timelapse_frames = -1;
  int image_size = 500;
  double hard_fraction = 0.5, query_fraction = 0.2;
  int threads = static_cast<int>(std::max(1u, std::thread::hardware_concurrency()));
  for (int i = 1; i < argc; ++i) {
    const std::string a = argv[i];
    auto value = [&]() -> std::string {
      if (i + 1 >= argc) { usage(("missing value for " + a).c_str()); std::exit(2); }
      return argv[++i];
    };
    try {
      if (a == "--rows") rows = parse_whole<std::int64_t>(value());
      else if (a == "--seed") seed = parse_whole<std::uint64_t>(value());
      else if (a == "--out") out = value();
      else if (a == "--threads") threads = parse_whole<int>(value());
      else if (a == "--format") {
        format = value();
        if (format != "csv" && format != "yfcc") return usage("--format is csv or yfcc");
      } else if (a == "--time-format") {
        const std::string f = value();
        if (f != "iso" && f != "unix") return usage("--time-format is iso or unix");
        unix_time = f == "unix";
      } else if (a == "--images") images_dir = value();
      else if (a == "--image-limit") image_limit = parse_whole<std::int64_t>(value());
      else if (a == "--timelapse-frames") timelapse_frames = parse_whole<std::int64_t>(value());
      else if (a == "--image-size") image_size = parse_whole<int>(value());
      else if (a == "--exif") exif = true;
      else if (a == "--truth") truth_path = value();
      else if (a == "--triplets") triplets_path = value();
      else if (a == "--triplet-truth") triplet_truth_path = value();
      else if (a == "--triplet-count") triplet_count = parse_whole<std::int64_t>(value());
      else if (a == "--hard-fraction") hard_fraction = parse_whole<double>(value());
      else if (a == "--split") split_path = value();
      else if (a == "--query-fraction") query_fraction = parse_whole<double>(value());
      else if (a == "--validation") validation_path = value();
      else if (a == "--validation-area") validation_area = parse_area(value());
      else if (a == "-h" || a == "--help") { usage("synthetic Flickr-NYC-like photo metadata and photos"); return 0; }
      else return usage(("unknown argument " + a).c_str());
    } catch (const std::exception&) {
      return usage(("bad value for " + a).c_str());
    }
  }
  if (rows < 1 || rows > 2000000000) return usage("--rows must be in 1..2e9");
  if (threads < 1 || threads > 1024) return usage("--threads must be in 1..1024");
  if (images_dir.empty() && exif) return usage("--exif writes EXIF into rendered photos: it needs --images DIR");
  if (images_dir.empty() && (!truth_path.empty() || !triplets_path.empty() || !split_path.empty() || !validation_path.empty() ||
                             image_limit >= 0))
    return usage("--truth, --triplets, --split, --validation and --image-limit describe rendered photos: they need --images DIR");
  if (!triplet_truth_path.empty() && triplets_path.empty()) return usage("--triplet-truth describes --triplets: it needs --triplets FILE");
  if (image_size < 32 || image_size > 4096) return usage("--image-size must be in 32..4096");
  if (hard_fraction < 0 || hard_fraction > 1) return usage("--hard-fraction must be in [0, 1]");
  if (query_fraction <= 0 || query_fraction >= 1) return usage("--query-fraction must be in (0, 1)");
  if (triplet_count < 1) return usage("--triplet-count must be at least 1");
  if (!triplets_path.empty() && triplet_truth_path.empty()) triplet_truth_path = triplet_truth_default(triplets_path);
  Plan plan = make_plan(rows, seed, timelapse_frames);
  plan.unix_time = unix_time;
  plan.yfcc = format == "yfcc";
  if (!images_dir.empty()) {
    plan.images = image_limit < 0 ? rows : std::min(rows, image_limit);
    std::error_code ec;
    fs::create_directories(images_dir, ec);
    if (ec) { std::fprintf(stderr, "gen_photos: cannot create %s: %s\n", images_dir.c_str(), ec.message().c_str()); return 1; }
    // The image column is relative to the CSV's folder, so the two move together.
    const fs::path csv_dir = out == "-" ? fs::current_path() : fs::absolute(fs::path(out)).parent_path();
    const fs::path rel = fs::weakly_canonical(fs::absolute(images_dir)).lexically_relative(fs::weakly_canonical(csv_dir));
    plan.image_prefix = rel.empty() ? fs::absolute(images_dir).string() + "/" : rel == "." ? std::string() : rel.string() + "/";
  }
  std::vector<PhotoInfo> info(static_cast<std::size_t>(plan.images));

  std::FILE* f = out == "-" ? stdout : std::fopen(out.c_str(), "wb");
  if (!f) { std::fprintf(stderr, "gen_photos: cannot write %s: %s\n", out.c_str(), std::strerror(errno)); return 1; }
  if (!plan.yfcc) std::fputs(plan.images > 0 ? "id,lat,lon,time,user,accuracy,title,description,image\n" : "id,lat,lon,time,user,accuracy,title,description\n", f);
  const std::size_t chunk_rows = 1 << 16;
  const std::size_t n_chunks = (static_cast<std::size_t>(rows) + chunk_rows - 1) / chunk_rows;
  // Chunks are generated in parallel waves and written in order, so the file does not depend on
  // the thread count. A chunk only reads info of its own rows (duplicates copy the row before).
  const std::size_t wave = static_cast<std::size_t>(threads) * 2;
  std::vector<std::string> bufs(wave);
  for (std::size_t w0 = 0; w0 < n_chunks; w0 += wave) {
    const std::size_t w1 = std::min(n_chunks, w0 + wave);
    std::atomic<std::size_t> next{w0};
    std::vector<std::thread> pool;
    for (int t = 0; t < threads; ++t)
      pool.emplace_back([&] {
        for (std::size_t c; (c = next++) < w1;)
          bufs[c - w0] = make_chunk(plan, c, c * chunk_rows, std::min<std::size_t>(rows, (c + 1) * chunk_rows), info);
      });
    for (auto& th : pool) th.join();
    for (std::size_t c = w0; c < w1; ++c)
      if (std::fwrite(bufs[c - w0].data(), 1, bufs[c - w0].size(), f) != bufs[c - w0].size()) {
        std::fprintf(stderr, "gen_photos: write failed: %s\n", std::strerror(errno));
        return 1;
      }
  }
  if (f != stdout && std::fclose(f) != 0) { std::fprintf(stderr, "gen_photos: close failed\n"); return 1; }
  if (plan.images == 0) return 0;

  // ---- Photos.
  const std::vector<SceneSite> sites = scene_sites(plan);
  const SiteIndex index(sites);
  const auto n = static_cast<std::size_t>(plan.images);
  // Scenes of every site (cheap: a few dozen boxes each), in the site's own frame.
  std::vector<gen_photos::Scene> scenes(sites.size());
  for (std::size_t k = 0; k < sites.size(); ++k) {
    const SceneSite& site = sites[k];
    if (site.kind == kBridgeSite)
      scenes[k] = gen_photos::make_bridge_scene(seed, kBridgeAzimuthDeg, kBridgeTowerY, kBridgeLengthM / 2);
    else
      scenes[k] = gen_photos::make_landmark_scene(seed, site.key, gen_photos::make_palette(seed, region_key(site.at)), kGridDeg,
                                                  site.kind == kVenueSite);
  }
  std::vector<Shot> shots(n);
  {
    std::atomic<std::size_t> next{0};
    std::vector<std::thread> pool;
    for (int t = 0; t < threads; ++t)
      pool.emplace_back([&] {
        for (std::size_t i; (i = next++) < n;) shots[i] = plan_shot(plan, sites, index, info, scenes, i);
      });
    for (auto& th : pool) th.join();
  }
  // The photos are rendered in parallel here; OpenCV's own pool inside each call would only
  // oversubscribe the cores.
  cv::setNumThreads(1);
  const int width = image_size, height = static_cast<int>(std::lround(image_size * 0.75));
  const cv::Mat noise = gen_photos::make_noise(seed, width, height);
  std::atomic<bool> failed{false};
  {
    std::atomic<std::size_t> next{0};
    std::vector<std::thread> pool;
    for (int t = 0; t < threads; ++t)
      pool.emplace_back([&] {
        std::vector<std::uint8_t> jpeg;
        const std::vector<int> params{cv::IMWRITE_JPEG_QUALITY, 90};
        for (std::size_t i; !failed && (i = next++) < n;) {
          const Shot& s = shots[i];
          const gen_photos::Scene street =
              s.scene < 0 ? gen_photos::make_street_scene(seed, s.scene_key, gen_photos::make_palette(seed, s.region), s.frame_bearing,
                                                          s.cell_lo, s.cell_hi)
                          : gen_photos::Scene();
          const cv::Mat img = gen_photos::render(s.scene >= 0 ? scenes[static_cast<std::size_t>(s.scene)] : street, s.view, s.light,
                                                 width, height, noise);
          if (!exif) {
            cv::imencode(".jpg", img, jpeg, params);
          } else {
            // Stored turned the other way, so that applying the Orientation tag shows the upright
            // render; a duplicate upload keeps its original's orientation (the same pixels).
            const int orientation = exif_orientation_of(static_cast<std::size_t>(info[i].source));
            cv::imencode(".jpg", stored_for_orientation(img, orientation), jpeg, params);
            gen_photos::ExifRecord r;
            r.lat = info[i].at.lat;
            r.lon = info[i].at.lon;
            r.h_error_m = horizontal_error_m(i);
            r.utc_time = info[i].row_time;
            r.offset_seconds = gen_photos::new_york_offset(r.utc_time);
            r.artist = info[i].user;
            r.orientation = orientation;
            r.little_endian = i % 2 == 1;
            jpeg = gen_photos::with_exif(jpeg, gen_photos::make_exif_block(r));
          }
          const std::string path = (fs::path(images_dir) / (std::to_string(i + 1) + ".jpg")).string();
          std::FILE* jf = std::fopen(path.c_str(), "wb");
          if (!jf || std::fwrite(jpeg.data(), 1, jpeg.size(), jf) != jpeg.size() || std::fclose(jf) != 0) {
            std::fprintf(stderr, "gen_photos: cannot write %s: %s\n", path.c_str(), std::strerror(errno));
            failed = true;
          }
        }
      });
    for (auto& th : pool) th.join();
  }
  if (failed) return 1;

  // ---- Truth files, from the render parameters.
  if (!truth_path.empty()) {
    std::string t =
        "id,source,scene,scene_key,timelapse,heading_deg,zoom,distance_m,sun_elevation_deg,brightness,season,"
        "facade_key,faces,cell,region,cam_east_m,cam_north_m,target_east_m,target_north_m,pitch_deg,fov_deg,sun_azimuth_deg,overcast,visibility_m,snow,"
        "kelvin,exposure_ev,saturation\n";
    char buf[512];
    for (std::size_t i = 0; i < n; ++i) {
      const Shot& s = shots[i];
      const double heading = std::fmod(s.frame_bearing + s.view.cam.heading_deg + 360.0, 360.0);
      char tx[32] = "", ty[32] = "";
      if (!std::isnan(s.target_city[0])) {
        std::snprintf(tx, sizeof tx, "%.2f", s.target_city[0]);
        std::snprintf(ty, sizeof ty, "%.2f", s.target_city[1]);
      }
      std::snprintf(buf, sizeof buf, "%zu,%lld,%lld,%s,%d,%.4f,%.5f,%.2f,%.3f,%.5f,%d,%s,%d,%s,%s,%.2f,%.2f,%s,%s,%.3f,%.3f,%.3f,%d,%.0f,%d,%.0f,%.4f,%.4f\n",
                    i + 1, static_cast<long long>(info[i].source + 1), static_cast<long long>(s.scene), s.scene_key.c_str(),
                    info[i].timelapse ? 1 : 0, heading, gen_photos::zoom_of(s.view.cam.fov_deg), s.distance_m, s.light.sun_elevation_deg,
                    s.light.brightness, s.light.season, s.facade_key.c_str(), s.faces, s.cell.c_str(), s.region.c_str(), s.cam_city[0],
                    s.cam_city[1], tx, ty, s.view.cam.pitch_deg, s.view.cam.fov_deg, s.light.sun_azimuth_deg, s.light.overcast ? 1 : 0,
                    s.light.visibility_m, s.light.snow ? 1 : 0, s.view.kelvin, s.view.exposure_ev, s.view.saturation);
      t += buf;
    }
    if (!write_text(truth_path, t)) return 1;
  }
  // The validation area: a scene's photos by where the scene is, other photos by their geotag.
  std::vector<char> held_out(n, 0);
  if (!validation_path.empty()) {
    std::string t = "id,label\n";
    std::int64_t scored = 0, listed = 0;
    for (std::size_t i = 0; i < n; ++i) {
      const Shot& s = shots[i];
      const LatLon where = s.scene >= 0 ? sites[static_cast<std::size_t>(s.scene)].at : info[i].at;
      if (!validation_area.contains(where)) continue;
      held_out[i] = 1;
      const bool original = info[i].source == static_cast<std::int64_t>(i) && !info[i].timelapse;
      const std::int64_t label = original && s.scene >= 0 ? s.scene : -1;
      t += std::to_string(i + 1) + "," + std::to_string(label) + "\n";
      ++listed;
      scored += label >= 0;
    }
    if (!write_text(validation_path, t)) return 1;
    std::fprintf(stderr, "gen_photos: %lld photos in the validation area (%lld of them scene photos) in %s\n",
                 static_cast<long long>(listed), static_cast<long long>(scored), validation_path.c_str());
  }
  // Photos the triplets and the split may use: originals (no duplicate uploads, which would be
  // trivially matched), no time-lapse frames (one view, kept for the invariance experiment) and
  // none of the validation area.
  std::map<std::int64_t, std::vector<std::size_t>> by_scene;
  std::vector<std::size_t> usable;
  for (std::size_t i = 0; i < n; ++i)
    if (info[i].source == static_cast<std::int64_t>(i) && !info[i].timelapse && !held_out[i]) {
      usable.push_back(i);
      if (shots[i].scene >= 0) by_scene[shots[i].scene].push_back(i);
    }
  if (!triplets_path.empty()) {
    // Judged by what the photos show (render parameters), never by their geotags:
    //   positive: shows the query's facade (same facade_key);
    //   easy, other_place: the negative is of another place at least 2 km away;
    //   hard, neighbour_scene: the negative shows another scene whose centre is 150-800 m from
    //     the query's scene's centre;
    //   hard, other_side: the negative shows the query's scene but none of the sides the query
    //     sees (disjoint face masks);
    //   hard, neighbour_cell: query and positive in one street cell facing one way; the negative
    //     a street photo within 400 m that shows another cell or direction.
    std::map<std::string, std::vector<std::size_t>> by_facade;
    for (std::size_t i : usable) by_facade[shots[i].facade_key].push_back(i);
    std::vector<std::size_t> scene_q, street_q;  // photos with at least one other photo of their facade
    for (std::size_t i : usable)
      if (by_facade[shots[i].facade_key].size() >= 2) (shots[i].scene >= 0 ? scene_q : street_q).push_back(i);
    if (scene_q.empty() || usable.size() < 3) {
      std::fprintf(stderr, "gen_photos: too few rendered photos share a facade for triplets; render more rows\n");
      return 1;
    }
    std::vector<std::size_t> streets;
    for (std::size_t i : usable)
      if (shots[i].scene < 0) streets.push_back(i);
    std::map<std::size_t, std::vector<std::size_t>> street_near;  // street photo -> other facades within 400 m
    std::map<std::int64_t, std::vector<std::int64_t>> neighbours;  // scene -> scenes 150-800 m away with photos
    for (const auto& [a, ma] : by_scene)
      for (const auto& [b, mb] : by_scene) {
        if (a == b) continue;
        const double d = metres(sites[static_cast<std::size_t>(a)].at, sites[static_cast<std::size_t>(b)].at);
        if (d >= 150 && d <= 800) neighbours[a].push_back(b);
      }
    auto place = [&](std::size_t i) { return shots[i].scene >= 0 ? shots[i].scene_key : shots[i].cell; };
    auto at = [&](std::size_t i) { return info[i].at; };
    Gen g(embedflow::derive_seed(seed, "triplets"));
    std::string t = "query,positive,negative\n";
    std::string tt = "query,positive,negative,half,kind,positive_facade,negative_facade,metres_query_positive,metres_query_negative\n";
    std::int64_t hard = 0, easy = 0;
    std::map<std::string, std::int64_t> kinds;
    auto positive_of = [&](std::size_t q) -> std::size_t {
      const auto& m = by_facade[shots[q].facade_key];
      for (;;) {
        const std::size_t p = m[g.below(m.size())];
        if (p != q) return p;
      }
    };
    auto emit = [&](std::size_t q, std::size_t p, std::size_t neg, const char* half, const char* kind) {
      t += std::to_string(q + 1) + "," + std::to_string(p + 1) + "," + std::to_string(neg + 1) + "\n";
      char buf[96];
      std::snprintf(buf, sizeof buf, ",%.1f,%.1f\n", metres(at(q), at(p)), metres(at(q), at(neg)));
      tt += std::to_string(q + 1) + "," + std::to_string(p + 1) + "," + std::to_string(neg + 1) + "," + half + "," + kind + "," +
            shots[p].facade_key + "," + shots[neg].facade_key + buf;
      ++kinds[kind];
    };
    for (std::int64_t k = 0; k < triplet_count; ++k) {
      bool done = false;
      if (g.uniform() < hard_fraction) {
        const double u = g.uniform();
        // neighbour_scene half of the time, other_side 30%, neighbour_cell 20% (each falls back
        // to the next when the city has none).
        const int first = u < 0.5 ? 0 : u < 0.8 ? 1 : 2;
        for (int c = 0; c < 3 && !done; ++c) {
          const int kind = (first + c) % 3;
          for (int attempt = 0; attempt < 60 && !done; ++attempt) {
            if (kind == 2) {
              if (street_q.empty()) break;
              const std::size_t q = street_q[g.below(street_q.size())];
              auto [it, fresh] = street_near.try_emplace(q);
              std::vector<std::size_t>& near = it->second;
              if (fresh)
                for (std::size_t j : streets)
                  if (shots[j].facade_key != shots[q].facade_key && metres(at(q), at(j)) <= 400) near.push_back(j);
              if (near.empty()) continue;
              emit(q, positive_of(q), near[g.below(near.size())], "hard", "neighbour_cell");
              done = true;
            } else {
              const std::size_t q = scene_q[g.below(scene_q.size())];
              if (kind == 0) {
                const auto it = neighbours.find(shots[q].scene);
                if (it == neighbours.end()) continue;
                const auto& m = by_scene[it->second[g.below(it->second.size())]];
                emit(q, positive_of(q), m[g.below(m.size())], "hard", "neighbour_scene");
                done = true;
              } else {
                const auto& m = by_scene[shots[q].scene];
                const std::size_t neg = m[g.below(m.size())];
                if ((shots[neg].faces & shots[q].faces) != 0) continue;
                emit(q, positive_of(q), neg, "hard", "other_side");
                done = true;
              }
            }
          }
        }
        if (done) ++hard;
      }
      for (int attempt = 0; attempt < 200 && !done; ++attempt) {
        const std::size_t q = g.uniform() < static_cast<double>(street_q.size()) / static_cast<double>(scene_q.size() + street_q.size())
                                  ? street_q[g.below(street_q.size())]
                                  : scene_q[g.below(scene_q.size())];
        const std::size_t neg = usable[g.below(usable.size())];
        if (place(neg) == place(q) || metres(at(q), at(neg)) < 2000) continue;
        emit(q, positive_of(q), neg, "easy", "other_place");
        ++easy;
        done = true;
      }
    }
    if (!write_text(triplets_path, t) || !write_text(triplet_truth_path, tt)) return 1;
    std::string summary;
    for (const auto& [kind, count] : kinds) summary += " " + kind + " " + std::to_string(count);
    std::fprintf(stderr, "gen_photos: %lld triplets (%lld hard, %lld easy:%s) in %s, judgements in %s\n",
                 static_cast<long long>(hard + easy), static_cast<long long>(hard), static_cast<long long>(easy), summary.c_str(),
                 triplets_path.c_str(), triplet_truth_path.c_str());
  }
  if (!split_path.empty()) {
    // Per scene with at least two usable photos: a query_fraction of them (at least one) are
    // queries, chosen by a hash of (seed, id), and the rest the gallery.
    std::string t = "id,label,role\n";
    std::int64_t queries = 0, gallery = 0;
    for (const auto& [scene, members] : by_scene) {
      if (members.size() < 2) continue;
      std::vector<std::pair<std::uint64_t, std::size_t>> order;
      for (std::size_t i : members) order.emplace_back(embedflow::derive_seed(embedflow::derive_seed(seed, "split"), i + 1), i);
      std::sort(order.begin(), order.end());
      const std::size_t nq = std::clamp<std::size_t>(static_cast<std::size_t>(std::lround(query_fraction * members.size())), 1,
                                                     members.size() - 1);
      std::vector<std::pair<std::size_t, bool>> rows_out;
      for (std::size_t k = 0; k < order.size(); ++k) rows_out.emplace_back(order[k].second, k < nq);
      std::sort(rows_out.begin(), rows_out.end());
      for (const auto& [i, q] : rows_out) {
        t += std::to_string(i + 1) + "," + std::to_string(scene) + (q ? ",query\n" : ",gallery\n");
        (q ? queries : gallery) += 1;
      }
    }
    if (!write_text(split_path, t)) return 1;
    std::fprintf(stderr, "gen_photos: split of %lld queries and %lld gallery photos in %s\n", static_cast<long long>(queries),
                 static_cast<long long>(gallery), split_path.c_str());
  }
  return 0;
}
