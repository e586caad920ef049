#include "spatial_index.hpp"

#include <algorithm>
#include <cmath>
#include <numeric>

#include <nanoflann.hpp>
#include <tbb/parallel_sort.h>

#include "embedflow/error.hpp"

namespace embedflow::geo {

Projection Projection::fit(double min_lat, double max_lat, double min_lon, double max_lon) {
  if (min_lat < -85 || max_lat > 85)
    throw ConfigError(cat("geo: latitudes ", min_lat, "..", max_lat,
                          " reach beyond +-85 degrees; the local projection does not hold there"));
  if (max_lon - min_lon > 180)
    throw ConfigError(cat("geo: longitudes ", min_lon, "..", max_lon,
                          " span more than 180 degrees (data across the antimeridian is not supported)"));
  Projection p;
  p.lat0 = 0.5 * (min_lat + max_lat);
  p.lon0 = 0.5 * (min_lon + max_lon);
  const double c0 = std::cos(p.lat0 * kDegToRad);
  p.ky = kEarthRadiusM * kDegToRad;
  p.kx = p.ky * c0;
  // Only the east-west scale is distorted: by cos(lat0)/cos(lat) at latitude lat.
  const double nearest_equator = (min_lat <= 0 && max_lat >= 0) ? 0.0 : std::min(std::fabs(min_lat), std::fabs(max_lat));
  const double farthest = std::max(std::fabs(min_lat), std::fabs(max_lat));
  const double q_low = c0 / std::cos(nearest_equator * kDegToRad);
  const double q_high = c0 / std::cos(farthest * kDegToRad);
  // The 1e-3 margin covers flat-vs-sphere error, (d/R)^2 < 3e-4 for d <= 100 km.
  p.ratio_low = std::min(1.0, q_low) * (1 - 1e-3);
  p.ratio_high = std::max(1.0, q_high) * (1 + 1e-3);
  return p;
}

LocationGroups group_by_location(const std::vector<double>& lat, const std::vector<double>& lon,
                                 const std::vector<std::int64_t>& tiebreak,
                                 const std::vector<std::uint32_t>& subset) {
  LocationGroups g;
  if (subset.empty()) {
    g.order.resize(lat.size());
    std::iota(g.order.begin(), g.order.end(), 0u);
  } else {
    g.order = subset;
  }
  tbb::parallel_sort(g.order.begin(), g.order.end(), [&](std::uint32_t a, std::uint32_t b) {
    if (lat[a] != lat[b]) return lat[a] < lat[b];
    if (lon[a] != lon[b]) return lon[a] < lon[b];
    if (!tiebreak.empty() && tiebreak[a] != tiebreak[b]) return tiebreak[a] < tiebreak[b];
    return a < b;
  });
  g.location_of.assign(lat.size(), UINT32_MAX);
  for (std::size_t i = 0; i < g.order.size(); ++i) {
    const std::uint32_t p = g.order[i];
    if (i == 0 || lat[p] != g.lat.back() || lon[p] != g.lon.back()) {
      g.lat.push_back(lat[p]);
      g.lon.push_back(lon[p]);
      g.start.push_back(static_cast<std::uint32_t>(i));
    }
    g.location_of[p] = static_cast<std::uint32_t>(g.lat.size() - 1);
  }
  g.start.push_back(static_cast<std::uint32_t>(g.order.size()));
  return g;
}

namespace {
struct XYAdaptor {
  const std::vector<double>* xy;
  std::size_t kdtree_get_point_count() const { return xy->size() / 2; }
  double kdtree_get_pt(std::size_t i, std::size_t dim) const { return (*xy)[2 * i + dim]; }
  template <class B>
  bool kdtree_get_bbox(B&) const { return false; }
};
using KDTree = nanoflann::KDTreeSingleIndexAdaptor<nanoflann::L2_Simple_Adaptor<double, XYAdaptor>, XYAdaptor, 2,
                                                   std::uint32_t>;
using TreeNode = KDTree::Node;

// Membership of r_min <= distance <= r_max around a query point. The projected distance decides
// nearly every point (the projection's distortion bounds give certain-in and certain-out
// thresholds); only points in the thin band between them pay for the trigonometric test.
struct RegionTest {
  double qx, qy, la, lo, cl;
  double outer_sq, outer_sure_sq, inner_out_sq, inner_in_sq, h_min, h_max;
  RegionTest(const Projection& proj, double lat_deg, double lon_deg, double r_min, double r_max)
      : qx(proj.x(lon_deg)), qy(proj.y(lat_deg)), la(lat_deg * kDegToRad), lo(lon_deg * kDegToRad), cl(std::cos(la)) {
    const double outer = r_max * proj.ratio_high + 1e-6;
    outer_sq = outer * outer;
    outer_sure_sq = std::pow(r_max * proj.ratio_low, 2);
    inner_out_sq = r_min > 0 ? std::pow(r_min * proj.ratio_high + 1e-6, 2) : -1.0;
    inner_in_sq = r_min > 0 ? std::pow(r_min * proj.ratio_low, 2) : -1.0;
    h_max = hav_of_distance(r_max);
    h_min = r_min > 0 ? hav_of_distance(r_min) : -1.0;
  }
  bool contains(double x, double y, double lat, double lon, double cos_lat) const {
    const double dx = x - qx, dy = y - qy;
    const double d2 = dx * dx + dy * dy;
    if (d2 > outer_sq || d2 < inner_in_sq) return false;
    if (d2 <= outer_sure_sq && d2 > inner_out_sq) return true;
    const double h = haversine_term(la, lo, cl, lat, lon, cos_lat);
    return h <= h_max && h >= h_min;
  }
};
}  // namespace

struct LocationIndex::Tree {
  XYAdaptor adaptor;
  KDTree tree;
  explicit Tree(const std::vector<double>* xy)
      : adaptor{xy}, tree(2, adaptor, nanoflann::KDTreeSingleIndexAdaptorParams(16)) {}
};

LocationIndex::LocationIndex(const std::vector<double>& lat_deg, const std::vector<double>& lon_deg) {
  const std::size_t n = lat_deg.size();
  double min_lat = 0, max_lat = 0, min_lon = 0, max_lon = 0;
  if (n > 0) {
    auto [a, b] = std::minmax_element(lat_deg.begin(), lat_deg.end());
    auto [c, d] = std::minmax_element(lon_deg.begin(), lon_deg.end());
    min_lat = *a; max_lat = *b; min_lon = *c; max_lon = *d;
  }
  proj_ = Projection::fit(min_lat, max_lat, min_lon, max_lon);
  std::vector<double> xy(2 * n);
  for (std::size_t i = 0; i < n; ++i) {
    xy[2 * i] = proj_.x(lon_deg[i]);
    xy[2 * i + 1] = proj_.y(lat_deg[i]);
  }
  xy_.swap(xy);
  tree_ = std::make_unique<Tree>(&xy_);
  order_.resize(n);
  if (n == 0) return;
  tree_->tree.buildIndex();
  // Renumber points into storage order and make the tree's own index the identity, so the tree
  // stays valid and subtrees are runs of point numbers.
  auto& vacc = tree_->tree.vAcc;
  std::copy(vacc.begin(), vacc.end(), order_.begin());
  xy.resize(2 * n);
  lat_.resize(n); lon_.resize(n); cos_lat_.resize(n);
  for (std::size_t t = 0; t < n; ++t) {
    const std::uint32_t i = order_[t];
    xy[2 * t] = xy_[2 * i];
    xy[2 * t + 1] = xy_[2 * i + 1];
    lat_[t] = lat_deg[i] * kDegToRad;
    lon_[t] = lon_deg[i] * kDegToRad;
    cos_lat_[t] = std::cos(lat_[t]);
    vacc[t] = static_cast<std::uint32_t>(t);
  }
  xy_.swap(xy);
}

LocationIndex::~LocationIndex() = default;

void LocationIndex::query_runs(double lat_deg, double lon_deg, double r_min, double r_max, Runs& runs,
                               Runs* uncertain) const {
  runs.clear();
  if (uncertain) uncertain->clear();
  if (size() == 0 || r_max < 0 || r_min > r_max) return;
  if (r_max > kMaxQueryRadiusM)
    throw ConfigError(cat("geo: query radius ", r_max, " m exceeds the supported ", kMaxQueryRadiusM, " m"));
  const RegionTest test(proj_, lat_deg, lon_deg, r_min, r_max);
  const double qx = test.qx, qy = test.qy;
  const double outer_sq = test.outer_sq, outer_sure_sq = test.outer_sure_sq;
  const double inner_out_sq = test.inner_out_sq, inner_in_sq = test.inner_in_sq;
  auto add = [&](std::uint32_t b, std::uint32_t e) {
    if (!runs.empty() && runs.back().second == b) runs.back().second = e;
    else runs.emplace_back(b, e);
  };
  struct Item {
    const TreeNode* node;
    double xlo, xhi, ylo, yhi;
  };
  thread_local std::vector<Item> stack;
  stack.clear();
  const auto& rb = tree_->tree.root_bbox;
  stack.push_back({tree_->tree.root_node, rb[0].low, rb[0].high, rb[1].low, rb[1].high});
  while (!stack.empty()) {
    const Item it = stack.back();
    stack.pop_back();
    const double nx = std::max({it.xlo - qx, 0.0, qx - it.xhi}), ny = std::max({it.ylo - qy, 0.0, qy - it.yhi});
    const double dmin_sq = nx * nx + ny * ny;
    if (dmin_sq > outer_sq) continue;
    const double fx = std::max(std::fabs(qx - it.xlo), std::fabs(qx - it.xhi));
    const double fy = std::max(std::fabs(qy - it.ylo), std::fabs(qy - it.yhi));
    const double dmax_sq = fx * fx + fy * fy;
    if (dmax_sq < inner_in_sq) continue;  // wholly inside the hole of a ring
    const TreeNode* node = it.node;
    if (dmax_sq <= outer_sure_sq && dmin_sq > inner_out_sq) {
      // Whole subtree: its points are the run from its leftmost to its rightmost leaf.
      const TreeNode* l = node;
      while (l->child1) l = l->child1;
      const TreeNode* r = node;
      while (r->child2) r = r->child2;
      add(static_cast<std::uint32_t>(l->node_type.lr.left), static_cast<std::uint32_t>(r->node_type.lr.right));
      continue;
    }
    if (!node->child1 && uncertain) {
      uncertain->emplace_back(static_cast<std::uint32_t>(node->node_type.lr.left),
                              static_cast<std::uint32_t>(node->node_type.lr.right));
      continue;
    }
    if (!node->child1) {
      for (auto t = node->node_type.lr.left; t < node->node_type.lr.right; ++t)
        if (test.contains(xy_[2 * t], xy_[2 * t + 1], lat_[t], lon_[t], cos_lat_[t]))
          add(static_cast<std::uint32_t>(t), static_cast<std::uint32_t>(t + 1));
      continue;
    }
    // Children tighten the box along the split dimension; child1 goes on top so runs come out
    // in ascending order.
    const int f = node->node_type.sub.divfeat;
    Item c1 = it, c2 = it;
    c1.node = node->child1;
    c2.node = node->child2;
    if (f == 0) { c1.xhi = node->node_type.sub.divlow; c2.xlo = node->node_type.sub.divhigh; }
    else { c1.yhi = node->node_type.sub.divlow; c2.ylo = node->node_type.sub.divhigh; }
    stack.push_back(c2);
    stack.push_back(c1);
  }
}

void LocationIndex::resolve(double lat_deg, double lon_deg, double r_min, double r_max, Runs& runs,
                            Runs& uncertain) const {
  const RegionTest test(proj_, lat_deg, lon_deg, r_min, r_max);
  Runs merged;
  merged.reserve(runs.size() + uncertain.size());
  auto add = [&](std::uint32_t b, std::uint32_t e) {
    if (!merged.empty() && merged.back().second == b) merged.back().second = e;
    else merged.emplace_back(b, e);
  };
  std::size_t i = 0;
  for (const auto& [b, e] : uncertain) {
    while (i < runs.size() && runs[i].first < b) { add(runs[i].first, runs[i].second); ++i; }
    for (std::uint32_t t = b; t < e; ++t)
      if (test.contains(xy_[2 * t], xy_[2 * t + 1], lat_[t], lon_[t], cos_lat_[t])) add(t, t + 1);
  }
  for (; i < runs.size(); ++i) add(runs[i].first, runs[i].second);
  runs.swap(merged);
  uncertain.clear();
}

void LocationIndex::query(double lat_deg, double lon_deg, double r_min, double r_max,
                          std::vector<std::uint32_t>& out) const {
  thread_local std::vector<std::pair<std::uint32_t, std::uint32_t>> runs;
  query_runs(lat_deg, lon_deg, r_min, r_max, runs);
  out.clear();
  for (auto [b, e] : runs)
    for (std::uint32_t t = b; t < e; ++t) out.push_back(t);
}

double LocationIndex::distance_m(std::uint32_t u, double lat_deg, double lon_deg) const {
  const double la = lat_deg * kDegToRad;
  return distance_of_hav(haversine_term(lat_[u], lon_[u], cos_lat_[u], la, lon_deg * kDegToRad, std::cos(la)));
}

double LocationIndex::distance_m(std::uint32_t u, std::uint32_t v) const {
  return distance_of_hav(haversine_term(lat_[u], lon_[u], cos_lat_[u], lat_[v], lon_[v], cos_lat_[v]));
}

}  // namespace embedflow::geo
