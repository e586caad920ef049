// geo.synthetic_geotags: gives labelled images (Fashion-MNIST, say) fake geotags so the geo pair
// sampler turns them into weak, fuzzy similarity labels with a known ground truth.
//
// Each class owns `neighbourhoods_per_class` neighbourhoods: centres drawn in the bbox at least
// `separation_m` from every other centre, photos spread around a centre with a Gaussian of
// `neighbourhood_sigma_m`. A fraction `fuzziness` of photos is placed in a neighbourhood drawn at
// random among all classes' neighbourhoods instead of one of their own: their positives are then
// mostly of other classes, which is the label fuzziness the experiment varies. A fraction
// `hotspot_fraction` is snapped onto one of a neighbourhood's exact-coordinate hot spots (a
// venue's default location; Zipf-sized), the duplicates the sampler must handle in O(group).
// Time and user are drawn per photo (2009-2016, Zipf users), so time and user filters have
// something to act on.
//
// Input `in`: batches with id: i64[B], label: i64[B] (other fields ignored).
// Output `out`: id, lat, lon, time (unix s), user, label (the true class) and placed_class (the
// class whose neighbourhood hosts the photo; differs from label for fuzzy photos).
// Deterministic: centres come from the node seed, each photo from (node seed, id), so the result
// does not depend on batch sizes or thread count.
#include <cmath>
#include <random>

#include "embedflow/embedflow.hpp"
#include "geo_types.hpp"
#include "geodesy.hpp"

namespace embedflow::geo {
namespace {

constexpr double kMetresPerDegLat = 111320.0;

struct Neighbourhood {
  double lat = 0, lon = 0;
  std::int64_t owner = 0;                       // class
  std::vector<std::pair<double, double>> hot;   // exact hot-spot coordinates
};

class SyntheticGeotags final : public Node {
 public:
  void open(NodeContext& ctx) override {
    const Params& p = ctx.params();
    id_ = ctx.id();
    seed_ = ctx.seed();
    classes_ = p.integer("classes");
    fuzziness_ = p.number("fuzziness");
    sigma_m_ = p.number("neighbourhood_sigma_m");
    hotspot_fraction_ = p.number("hotspot_fraction");
    users_ = p.integer("users");
    const auto bbox = p.numbers("bbox");
    const std::int64_t per_class = p.integer("neighbourhoods_per_class");
    const double separation = p.number("separation_m");
    const std::int64_t hot_per = p.integer("hotspots_per_neighbourhood");

    // Centres by rejection sampling, kept 1 km inside the bbox.
    Rng rng(derive_seed(seed_, "centres"));
    const double mid_lat = 0.5 * (bbox[1] + bbox[3]);
    const double margin_lat = 1000.0 / kMetresPerDegLat;
    const double margin_lon = 1000.0 / (kMetresPerDegLat * std::cos(mid_lat * kDegToRad));
    std::uniform_real_distribution<double> ulon(bbox[0] + margin_lon, bbox[2] - margin_lon);
    std::uniform_real_distribution<double> ulat(bbox[1] + margin_lat, bbox[3] - margin_lat);
    for (std::int64_t c = 0; c < classes_; ++c)
      for (std::int64_t k = 0; k < per_class; ++k) {
        Neighbourhood n;
        n.owner = c;
        bool placed = false;
        for (int attempt = 0; attempt < 100000 && !placed; ++attempt) {
          n.lat = ulat(rng);
          n.lon = ulon(rng);
          placed = true;
          for (const auto& o : hoods_)
            if (haversine_m(n.lat, n.lon, o.lat, o.lon) < separation) {
              placed = false;
              break;
            }
        }
        if (!placed)
          throw ConfigError(cat(id_, ": cannot place ", classes_ * per_class, " neighbourhoods ", separation,
                                " m apart in the bbox; lower separation_m or neighbourhoods_per_class"));
        std::normal_distribution<double> spread(0.0, sigma_m_);
        for (std::int64_t h = 0; h < hot_per; ++h) n.hot.push_back(offset(n.lat, n.lon, spread(rng), spread(rng)));
        hoods_.push_back(std::move(n));
      }
    // Zipf weights over a neighbourhood's hot spots: the first is the busiest venue.
    for (std::int64_t h = 0; h < hot_per; ++h) hot_weights_.push_back(1.0 / static_cast<double>(h + 1));
  }

  void process(std::size_t, const RecordPtr& in, Emitter& out) override {
    const Array& ids = in->get("id");
    const Array& labels = in->get("label");
    const std::int64_t n = ids.shape().empty() ? 1 : ids.shape()[0];
    std::vector<std::int64_t> id(n), label(n), placed(n), time(n);
    std::vector<double> lat(n), lon(n);
    std::vector<std::string> user(n);
    const auto* id_data = ids.data<std::int64_t>();
    const auto* label_data = labels.data<std::int64_t>();
    const std::int64_t per_class = static_cast<std::int64_t>(hoods_.size()) / classes_;
    // 2009-01-01 .. 2017-01-01 UTC.
    std::uniform_int_distribution<std::int64_t> utime(1230768000, 1483228800 - 1);
    std::uniform_real_distribution<double> u01(0.0, 1.0);
    std::normal_distribution<double> spread(0.0, sigma_m_);
    std::discrete_distribution<std::size_t> pick_hot(hot_weights_.begin(), hot_weights_.end());
    for (std::int64_t i = 0; i < n; ++i) {
      id[i] = id_data[i];
      label[i] = label_data[i];
      if (label[i] < 0 || label[i] >= classes_)
        throw DataError(cat(id_, ": record with id ", id[i], " has label ", label[i], ", outside [0, ", classes_,
                            ") (set `classes`)"));
      Rng rng(derive_seed(seed_, static_cast<std::uint64_t>(id[i])));
      std::size_t hood;
      if (u01(rng) < fuzziness_) {
        hood = static_cast<std::size_t>(rng() % hoods_.size());
        ++fuzzy_;
      } else {
        hood = static_cast<std::size_t>(label[i] * per_class + static_cast<std::int64_t>(rng() % per_class));
      }
      const Neighbourhood& nb = hoods_[hood];
      placed[i] = nb.owner;
      if (!nb.hot.empty() && u01(rng) < hotspot_fraction_) {
        std::tie(lat[i], lon[i]) = nb.hot[pick_hot(rng)];
        ++on_hotspots_;
      } else {
        std::tie(lat[i], lon[i]) = offset(nb.lat, nb.lon, spread(rng), spread(rng));
      }
      time[i] = utime(rng);
      // Zipf-ish users: rank = floor(users^u) concentrates photos on few users.
      auto rank = static_cast<std::int64_t>(std::pow(static_cast<double>(users_), u01(rng))) - 1;
      user[i] = cat("u", rank);
      if (nb.owner != label[i]) ++foreign_;
    }
    total_ += n;
    out.emit(Record()
                 .set("id", Array::from_vector<std::int64_t>({n}, std::move(id)))
                 .set("lat", Array::from_vector<double>({n}, std::move(lat)))
                 .set("lon", Array::from_vector<double>({n}, std::move(lon)))
                 .set("time", Array::from_vector<std::int64_t>({n}, std::move(time)))
                 .set("user", Array::strings(std::move(user)))
                 .set("label", Array::from_vector<std::int64_t>({n}, std::move(label)))
                 .set("placed_class", Array::from_vector<std::int64_t>({n}, std::move(placed))));
  }

  void close(Emitter&) override {
    log_info(id_, total_, " photos geotagged: ", fuzzy_, " placed at random (", foreign_,
             " in another class's neighbourhood), ", on_hotspots_, " on exact-coordinate hot spots");
  }

 private:
  static std::pair<double, double> offset(double lat, double lon, double north_m, double east_m) {
    return {lat + north_m / kMetresPerDegLat, lon + east_m / (kMetresPerDegLat * std::cos(lat * kDegToRad))};
  }

  std::string id_;
  std::uint64_t seed_ = 0;
  std::int64_t classes_ = 10, users_ = 1;
  double fuzziness_ = 0, sigma_m_ = 1, hotspot_fraction_ = 0;
  std::vector<Neighbourhood> hoods_;
  std::vector<double> hot_weights_;
  std::int64_t total_ = 0, fuzzy_ = 0, foreign_ = 0, on_hotspots_ = 0;
};

}  // namespace

NodeType synthetic_geotags_type() {
  return NodeTypeBuilder("geo.synthetic_geotags")
      .doc("Fake geotags for labelled images: each class lives in its own neighbourhoods, a fraction `fuzziness` "
           "of photos is placed in a random neighbourhood (label fuzziness), some sit on exact-coordinate hot spots. "
           "Feeds geo.pair_sampler with a known ground truth.")
      .example("tags: {type: geo.synthetic_geotags, params: {classes: 5, fuzziness: 0.2}}")
      .param(Param::number("fuzziness").default_value(0.0).range(0, 1)
                 .doc("fraction of photos placed in a neighbourhood drawn among all classes' instead of their own"))
      .param(Param::integer("classes").default_value(10).min(1).doc("labels are 0..classes-1"))
      .param(Param::integer("neighbourhoods_per_class").default_value(2).min(1).doc("neighbourhoods each class owns"))
      .param(Param::number("neighbourhood_sigma_m").default_value(40.0).min(0.1)
                 .doc("standard deviation of photo positions around a neighbourhood centre, metres"))
      .param(Param::number("separation_m").default_value(2500.0).min(0)
                 .doc("minimum distance between neighbourhood centres (keep above the sampler's negative_min_m)"))
      .param(Param::number("hotspot_fraction").default_value(0.05).range(0, 1)
                 .doc("fraction of photos snapped onto a hot spot of their neighbourhood (exact duplicates)"))
      .param(Param::integer("hotspots_per_neighbourhood").default_value(3).min(0).doc("exact-coordinate spots per neighbourhood, Zipf-sized"))
      .param(Param::integer("users").default_value(500).min(1).doc("number of simulated users (Zipf activity)"))
      .param(Param::numbers("bbox").default_value(std::vector<double>{-74.052544, 40.525070, -73.740685, 40.889249})
                 .doc("min_lon, min_lat, max_lon, max_lat (default: the Flickr NYC bbox)"))
      .input("in", "id: i64[B], label: i64[B]", "labelled records, batched")
      .output("out", "id: i64[B], lat: f64[B], lon: f64[B], time: i64[B], user: str[B], label: i64[B], placed_class: i64[B]",
              "photos for geo.pair_sampler")
      .check([](SchemaContext& c) {
        if (c.params().numbers("bbox").size() != 4) c.error("bbox takes 4 numbers: min_lon, min_lat, max_lon, max_lat", "bbox");
      })
      .create<SyntheticGeotags>();
}

}  // namespace embedflow::geo
