// Great-circle distances and the local metric projection the geo indexes are built on.
//
// Distances are haversine on a sphere of radius kEarthRadiusM, the same formula scikit-learn's
// BallTree(metric="haversine") uses, so exact counts can be compared with it. Spatial indexes
// work in a local equirectangular projection (metres around the data's centre); its distortion
// is bounded over the data's latitude span, so every index query is run with a radius widened by
// that bound and candidates are then decided by the exact haversine test.
#pragma once

#include <cmath>
#include <cstdint>

namespace embedflow::geo {

inline constexpr double kEarthRadiusM = 6371000.0;
inline constexpr double kDegToRad = 3.14159265358979323846 / 180.0;

// The haversine term hav(d/R) of two points given in radians with their latitude cosines
// precomputed: comparing it with hav_of_distance(r) decides d <= r without asin.
inline double haversine_term(double lat1, double lon1, double cos_lat1, double lat2, double lon2,
                             double cos_lat2) {
  const double s_lat = std::sin(0.5 * (lat2 - lat1));
  const double s_lon = std::sin(0.5 * (lon2 - lon1));
  return s_lat * s_lat + cos_lat1 * cos_lat2 * s_lon * s_lon;
}

inline double hav_of_distance(double metres) {
  const double s = std::sin(0.5 * metres / kEarthRadiusM);
  return s * s;
}

inline double distance_of_hav(double h) {
  return 2.0 * kEarthRadiusM * std::asin(std::sqrt(h < 1.0 ? h : 1.0));
}

// Great-circle distance in metres between two points in degrees.
inline double haversine_m(double lat1_deg, double lon1_deg, double lat2_deg, double lon2_deg) {
  const double la1 = lat1_deg * kDegToRad, la2 = lat2_deg * kDegToRad;
  return distance_of_hav(haversine_term(la1, lon1_deg * kDegToRad, std::cos(la1), la2,
                                        lon2_deg * kDegToRad, std::cos(la2)));
}

// Local equirectangular projection centred on the data. `ratio_low`/`ratio_high` bound
// projected distance / true distance for any two points inside the latitude span it was made
// for, so: projected <= r * ratio_low  implies true <= r, and projected > r * ratio_high implies
// true > r. Only the band in between needs the exact haversine test.
struct Projection {
  double lat0 = 0, lon0 = 0;      // degrees
  double kx = 0, ky = 0;          // metres per degree
  double ratio_low = 1, ratio_high = 1;

  // Throws embedflow::ConfigError when the span cannot be projected locally (poles, antimeridian).
  static Projection fit(double min_lat, double max_lat, double min_lon, double max_lon);
  double x(double lon_deg) const { return (lon_deg - lon0) * kx; }
  double y(double lat_deg) const { return (lat_deg - lat0) * ky; }
};

// Days since 1970-01-01 of a proleptic Gregorian date (H. Hinnant's algorithm).
inline std::int64_t days_from_civil(std::int64_t y, unsigned m, unsigned d) {
  y -= m <= 2;
  const std::int64_t era = (y >= 0 ? y : y - 399) / 400;
  const unsigned yoe = static_cast<unsigned>(y - era * 400);
  const unsigned doy = (153 * (m + (m > 2 ? -3 : 9)) + 2) / 5 + d - 1;
  const unsigned doe = yoe * 365 + yoe / 4 - yoe / 100 + doy;
  return era * 146097 + static_cast<std::int64_t>(doe) - 719468;
}

struct CivilDate {
  std::int64_t year;
  unsigned month, day;
};
inline CivilDate civil_from_days(std::int64_t z) {
  z += 719468;
  const std::int64_t era = (z >= 0 ? z : z - 146096) / 146097;
  const unsigned doe = static_cast<unsigned>(z - era * 146097);
  const unsigned yoe = (doe - doe / 1460 + doe / 36524 - doe / 146096) / 365;
  const std::int64_t y = static_cast<std::int64_t>(yoe) + era * 400;
  const unsigned doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
  const unsigned mp = (5 * doy + 2) / 153;
  const unsigned d = doy - (153 * mp + 2) / 5 + 1;
  const unsigned m = mp < 10 ? mp + 3 : mp - 9;
  return {y + (m <= 2), m, d};
}

inline std::int64_t floor_div(std::int64_t a, std::int64_t b) {
  return a / b - ((a % b != 0) && ((a < 0) != (b < 0)));
}

// Calendar interval [begin, end) in unix seconds (UTC) of the month / year containing t.
struct TimeInterval {
  std::int64_t begin, end;
};
inline TimeInterval month_of(std::int64_t t) {
  const CivilDate c = civil_from_days(floor_div(t, 86400));
  const std::int64_t b = days_from_civil(c.year, c.month, 1) * 86400;
  const std::int64_t e = c.month == 12 ? days_from_civil(c.year + 1, 1, 1) * 86400
                                       : days_from_civil(c.year, c.month + 1, 1) * 86400;
  return {b, e};
}
inline TimeInterval year_of(std::int64_t t) {
  const CivilDate c = civil_from_days(floor_div(t, 86400));
  return {days_from_civil(c.year, 1, 1) * 86400, days_from_civil(c.year + 1, 1, 1) * 86400};
}

}  // namespace embedflow::geo
