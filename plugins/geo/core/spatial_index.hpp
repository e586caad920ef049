// Spatial index over unique photo locations: a nanoflann KD-tree over the local metric
// projection, answering ball and ring queries exactly in great-circle distance.
//
// Photos are grouped by identical coordinates first (Flickr venues give thousands of photos one
// default location), so a 10k-photo hot spot is one tree point and one query, not 10k.
#pragma once

#include <cstdint>
#include <memory>
#include <vector>

#include "geodesy.hpp"

namespace embedflow::geo {

// Photos grouped by identical (lat, lon). order[start[u] .. start[u+1]) are the photo indices
// at location u; within a location they keep the order of `tiebreak` (ascending), then index.
struct LocationGroups {
  std::vector<double> lat, lon;             // degrees, one per unique location
  std::vector<std::uint32_t> start;         // size() + 1 offsets into order
  std::vector<std::uint32_t> order;         // photo indices
  std::vector<std::uint32_t> location_of;   // photo index -> location (size = photos)
  std::size_t size() const { return lat.size(); }
  std::uint32_t count(std::size_t u) const { return start[u + 1] - start[u]; }
};

// `subset`: photo indices to group (all when empty). `tiebreak` may be empty.
LocationGroups group_by_location(const std::vector<double>& lat, const std::vector<double>& lon,
                                 const std::vector<std::int64_t>& tiebreak,
                                 const std::vector<std::uint32_t>& subset = {});

// Points are renumbered into the KD-tree's storage order: every subtree is then a contiguous run
// of point numbers, which is what lets a query return whole runs instead of single points.
class LocationIndex {
 public:
  // Index over points given in degrees. Throws ConfigError when they span too much of the
  // globe for a local projection (beyond +-85 deg latitude or across the antimeridian).
  LocationIndex(const std::vector<double>& lat_deg, const std::vector<double>& lon_deg);
  ~LocationIndex();
  LocationIndex(const LocationIndex&) = delete;
  LocationIndex& operator=(const LocationIndex&) = delete;

  std::size_t size() const { return lat_.size(); }
  // order()[t] is the input index of point t; every other member speaks point numbers t.
  const std::vector<std::uint32_t>& order() const { return order_; }

  // The points with r_min <= distance <= r_max metres of (lat, lon) in degrees, as ascending,
  // disjoint, non-adjacent runs [begin, end) of point numbers (cleared first). Subtrees wholly
  // inside the region come back as one run without visiting their points, so a dense ball costs
  // about its boundary, not its size.
  // With `uncertain`, leaves the region only partly covers are not resolved point by point but
  // appended there whole (ascending, disjoint from `runs`): a superset a caller can sample from
  // by rejection, deciding single points with within(); resolve() settles them exactly.
  using Runs = std::vector<std::pair<std::uint32_t, std::uint32_t>>;
  void query_runs(double lat_deg, double lon_deg, double r_min, double r_max, Runs& runs,
                  Runs* uncertain = nullptr) const;
  // Moves the points of `uncertain` that lie in the region into `runs`, keeping runs ascending.
  void resolve(double lat_deg, double lon_deg, double r_min, double r_max, Runs& runs, Runs& uncertain) const;
  // Exact test: r_min <= distance(t, v) <= r_max, given as hav_of_distance() of both radii.
  bool within(std::uint32_t t, std::uint32_t v, double hav_min, double hav_max) const {
    const double h = haversine_term(lat_[t], lon_[t], cos_lat_[t], lat_[v], lon_[v], cos_lat_[v]);
    return h >= hav_min && h <= hav_max;
  }
  // The same region as a list of point numbers, ascending.
  void query(double lat_deg, double lon_deg, double r_min, double r_max, std::vector<std::uint32_t>& out) const;
  // Exact great-circle distance in metres.
  double distance_m(std::uint32_t t, double lat_deg, double lon_deg) const;
  double distance_m(std::uint32_t t, std::uint32_t v) const;
  // True when the great-circle distance between points t and v is >= metres (no asin).
  bool at_least(std::uint32_t t, std::uint32_t v, double hav_metres) const {
    return haversine_term(lat_[t], lon_[t], cos_lat_[t], lat_[v], lon_[v], cos_lat_[v]) >= hav_metres;
  }
  const Projection& projection() const { return proj_; }
  // Radii beyond this are not supported by the projection bound.
  static constexpr double kMaxQueryRadiusM = 100000.0;

 private:
  struct Tree;
  std::vector<double> lat_, lon_, cos_lat_, xy_;  // radians; xy_ interleaved projected metres
  std::vector<std::uint32_t> order_;
  Projection proj_;
  std::unique_ptr<Tree> tree_;
};

}  // namespace embedflow::geo
