// geo.pair_stats: statistics of a photo collection and of the pair sets sampled from it,
// written to an output directory with a JSON summary.
//
// Input `photos` (optional): photo batches with lat/lon f64 (degrees). From them:
//   - exact numbers of photo pairs within each radius in `radii`, by grid counting over unique
//     locations (never by enumerating pairs), and the fraction of all n(n-1)/2 pairs;
//   - pair-distance histograms over all pairs and pairs within 5000, 2000 and 200 m, from
//     uniformly drawn photo pairs (rejection until `histogram_pairs` fall in each range or the
//     draw budget of 50 x histogram_pairs per range runs out): hist_all.png, hist_5000.png, ...;
//   - a photo-density heat map, density.png (log colour scale).
// Input `sets` (optional, any number of edges): geo.pair_sampler summaries; they form the dataset
// table (positive distance, negative distance, time frame, other, size): datasets.csv, datasets.md.
// Everything lands in <out>/summary.json. Caveats: holds lat/lon of all photos (16 bytes each).
//
//   seed: 1
//   nodes:
//     photos: {type: geo.csv_photos, params: {path: tests/geo/data/photos_small.csv, on_bad_row: skip}}
//     stats:  {type: geo.pair_stats, params: {out: out/pair_stats_example, radii: [1, 10, 100], histogram_pairs: 1000}}
//   edges:
//     - photos.out -> stats.photos
#include <embedflow/atomic_file.hpp>
#include <algorithm>
#include <cmath>
#include <cstdio>
#include <filesystem>
#include <fstream>

#include "embedflow/embedflow.hpp"
#include "embedflow/report_files.hpp"
#include "embedflow/results.hpp"
#include "geo_types.hpp"
#include "geodesy.hpp"
#include "pair_count.hpp"
#include "plots.hpp"

namespace embedflow::geo {
namespace {

std::string csv_field(const std::string& s) {
  if (s.find_first_of(",\"\n") == std::string::npos) return s;
  std::string o = "\"";
  for (char c : s) { if (c == '"') o += '"'; o += c; }
  return o + "\"";
}

struct SetRow {
  std::string name, positive, negative, time_frame, other;
  std::int64_t size = 0, anchors = -1, photos = -1;
};

class PairStatsNode : public Node {
 public:
  void open(NodeContext& ctx) override {
    ctx_ = &ctx;
    out_dir_ = ctx.params().string("out");
    std::error_code ec;
    std::filesystem::create_directories(out_dir_, ec);
    if (ec) throw DataError(cat(out_dir_, ": cannot create output directory: ", ec.message()));
  }

  void process(std::size_t port, const RecordPtr& record, Emitter&) override {
    const Record& r = *record;
    if (port == 0) {
      const Array& la = r.get("lat");
      const Array& lo = r.get("lon");
      const auto n = la.numel();
      lat_.insert(lat_.end(), la.data<double>(), la.data<double>() + n);
      lon_.insert(lon_.end(), lo.data<double>(), lo.data<double>() + n);
      return;
    }
    const std::int64_t n = r.get("name").numel();
    for (std::int64_t i = 0; i < n; ++i) {
      SetRow s;
      auto text = [&](const char* f) { const Array* a = r.find(f); return a ? a->string_at(i) : std::string(); };
      auto number = [&](const char* f) { const Array* a = r.find(f); return a ? a->as_int(i) : std::int64_t(-1); };
      s.name = text("name"); s.positive = text("positive"); s.negative = text("negative");
      s.time_frame = text("time_frame"); s.other = text("other");
      s.size = r.get("size").as_int(i);
      s.anchors = number("anchors");
      s.photos = number("photos");
      sets_.push_back(std::move(s));
    }
  }

  void close(Emitter&) override {
    const Params& p = ctx_->params();
    namespace fs = std::filesystem;
    const fs::path dir(out_dir_);
    std::string json = "{\n";
    // Sets arrive in whatever order their samplers finish; sort so reruns write the same files.
    std::sort(sets_.begin(), sets_.end(), [](const SetRow& a, const SetRow& b) { return a.name < b.name; });
    json += "  \"datasets\": [";
    {
      AtomicOutputFile csv_file(dir / "datasets.csv"), md_file(dir / "datasets.md");
      std::ostream &csv = csv_file.stream(), &md = md_file.stream();
      csv << "dataset,positive_distance,negative_distance,time_frame,other,size\n";
      md << "| Dataset | Positive distance | Negative distance | Time frame | Other | Size |\n"
         << "|---|---|---|---|---|---|\n";
      for (std::size_t i = 0; i < sets_.size(); ++i) {
        const SetRow& s = sets_[i];
        csv << csv_field(s.name) << ',' << csv_field(s.positive) << ',' << csv_field(s.negative) << ','
            << csv_field(s.time_frame) << ',' << csv_field(s.other) << ',' << s.size << '\n';
        md << "| " << s.name << " | " << s.positive << " | " << s.negative << " | " << s.time_frame << " | "
           << (s.other.empty() ? "-" : s.other) << " | " << s.size << " |\n";
        json += cat(i ? "," : "", "\n    {\"name\": ", json_quote(s.name), ", \"positive_distance\": ",
                    json_quote(s.positive), ", \"negative_distance\": ", json_quote(s.negative),
                    ", \"time_frame\": ", json_quote(s.time_frame), ", \"other\": ", json_quote(s.other),
                    ", \"size\": ", s.size, ", \"anchors\": ", s.anchors, ", \"photos\": ", s.photos, "}");
      }
      if (!csv || !md) throw DataError(cat(out_dir_, ": cannot write datasets.csv / datasets.md"));
      csv_file.commit();
      md_file.commit();
    }
    json += sets_.empty() ? "],\n" : "\n  ],\n";

    const auto n = static_cast<std::int64_t>(lat_.size());
    json += cat("  \"photos\": ", n, ",\n");
    if (n > 0) {
      const int threads = ctx_->threads();
      json += "  \"pairs_within\": [";
      const auto radii = p.numbers("radii");
      const double all_pairs = 0.5 * static_cast<double>(n) * static_cast<double>(n - 1);
      for (std::size_t i = 0; i < radii.size(); ++i) {
        const PairCount c = count_pairs_within(lat_, lon_, radii[i], threads, false);
        json += cat(i ? "," : "", "\n    {\"radius_m\": ", json_number(radii[i]), ", \"pairs\": ", c.pairs,
                    ", \"fraction_of_all_pairs\": ", json_number(all_pairs > 0 ? c.pairs / all_pairs : 0.0),
                    ", \"unique_locations\": ", c.unique_locations, "}");
        log_info(ctx_->id(), c.pairs, " photo pairs within ", radii[i], " m (", c.unique_locations, " unique locations)");
      }
      json += radii.empty() ? "],\n" : "\n  ],\n";
      json += histograms(p, dir);
      json += heatmap(p, dir);
    }
    json += cat("  \"seed\": ", ctx_->seed(), "\n}\n");
    write_file_atomic(dir / "summary.json", json);
  }

 private:
  // A histogram as the report draws it: bars from each bin's lower edge.
  static ResultChart histogram_chart(const Histogram& h, const std::string& title, std::size_t samples) {
    ResultChart c;
    c.title = title;
    c.kind = "bars";
    c.x_label = "distance";
    c.x_unit = "m";
    c.y_label = cat("sampled pairs (of ", samples, ")");
    c.few_points = true;  // a histogram of few bins still says something
    ChartSeries s;
    s.name = "pairs";
    const double width = (h.hi - h.lo) / static_cast<double>(std::max<std::size_t>(1, h.counts.size()));
    for (std::size_t b = 0; b < h.counts.size(); ++b)
      s.x.push_back(h.lo + width * static_cast<double>(b)), s.y.push_back(static_cast<double>(h.counts[b]));
    c.series.push_back(std::move(s));
    return c;
  }

  std::string histograms(const Params& p, const std::filesystem::path& dir) {
    const auto want = static_cast<std::size_t>(p.integer("histogram_pairs"));
    const int bins = static_cast<int>(p.integer("bins"));
    const double limits[] = {0, 5000, 2000, 200};  // 0: all pairs
    const char* names[] = {"all", "5000", "2000", "200"};
    std::vector<double> samples[4];
    Rng& rng = ctx_->rng();
    const std::uint64_t n = lat_.size();
    std::string json = "  \"histograms\": [";
    if (n >= 2) {
      const std::uint64_t budget = 50 * static_cast<std::uint64_t>(want) * 4;
      for (std::uint64_t draw = 0; draw < budget; ++draw) {
        const std::uint64_t i = rng() % n;
        std::uint64_t j = rng() % (n - 1);
        if (j >= i) ++j;
        const double d = haversine_m(lat_[i], lon_[i], lat_[j], lon_[j]);
        bool need = false;
        for (int h = 0; h < 4; ++h) {
          if (samples[h].size() < want && (limits[h] == 0 || d <= limits[h])) samples[h].push_back(d);
          need = need || samples[h].size() < want;
        }
        if (!need) break;
      }
    }
    for (int h = 0; h < 4; ++h) {
      double hi = limits[h];
      if (hi == 0) hi = samples[h].empty() ? 1.0 : *std::max_element(samples[h].begin(), samples[h].end());
      const Histogram hist = make_histogram(samples[h], 0, hi, bins);
      const std::string file = cat("hist_", names[h], ".png");
      write_histogram_png((dir / file).string(), hist,
                          cat("pair distances", limits[h] > 0 ? cat(" <= ", limits[h], " m") : std::string(" (all)"),
                              ", ", samples[h].size(), " sampled pairs"),
                          "distance (m)", "sampled pairs");
      publish_chart(*ctx_, histogram_chart(hist, cat("pair distances", limits[h] > 0 ? cat(" within ", limits[h], " m") : std::string(" (all)")),
                                           samples[h].size()));
      json += cat(h ? "," : "", "\n    {\"range\": ", json_quote(names[h]), ", \"png\": ", json_quote(file),
                  ", \"samples\": ", samples[h].size(), ", \"lo_m\": 0, \"hi_m\": ", json_number(hi), ", \"counts\": [");
      for (std::size_t b = 0; b < hist.counts.size(); ++b) json += cat(b ? ", " : "", hist.counts[b]);
      json += "]}";
    }
    return json + "\n  ],\n";
  }

  std::string heatmap(const Params& p, const std::filesystem::path& dir) {
    double b[4];
    if (p.has("bbox")) {
      const auto v = p.numbers("bbox");
      std::copy(v.begin(), v.end(), b);
    } else {
      b[0] = *std::min_element(lon_.begin(), lon_.end());
      b[1] = *std::min_element(lat_.begin(), lat_.end());
      b[2] = *std::max_element(lon_.begin(), lon_.end());
      b[3] = *std::max_element(lat_.begin(), lat_.end());
      if (b[2] <= b[0]) b[2] = b[0] + 1e-3;
      if (b[3] <= b[1]) b[3] = b[1] + 1e-3;
    }
    const DensityGrid g = make_density_grid(lat_, lon_, b[0], b[1], b[2], b[3], static_cast<int>(p.integer("heatmap_width")));
    write_density_png((dir / "density.png").string(), g, cat(lat_.size(), " photos"));
    return cat("  \"density\": {\"png\": \"density.png\", \"width\": ", g.width, ", \"height\": ", g.height,
               ", \"bbox\": [", json_number(b[0]), ", ", json_number(b[1]), ", ", json_number(b[2]), ", ",
               json_number(b[3]), "], \"max_photos_per_pixel\": ", g.max_count(), "},\n");
  }

  NodeContext* ctx_ = nullptr;
  std::string out_dir_;
  std::vector<double> lat_, lon_;
  std::vector<SetRow> sets_;
};

}  // namespace

NodeType pair_stats_type() {
  return NodeTypeBuilder("geo.pair_stats")
      .doc("Writes photo-pair statistics to a directory: exact pair counts within radii (grid counting), distance "
           "histograms and a density heat map (PNG), the table of sampled sets, and summary.json.")
      .example("seed: 1\n"
               "nodes:\n"
               "  photos: {type: geo.csv_photos, params: {path: tests/geo/data/photos_small.csv, on_bad_row: skip}}\n"
               "  stats:  {type: geo.pair_stats, params: {out: out/pair_stats_example, radii: [1, 10, 100], histogram_pairs: 1000}}\n"
               "edges:\n"
               "  - photos.out -> stats.photos\n")
      .param(Param::path("out").not_fingerprinted().doc("output directory (created if missing)"))
      .param(Param::numbers("radii").default_value(std::vector<double>{1.0, 10.0}).range(0, 100000)
                 .doc("radii (metres) for the exact count of photo pairs within them"))
      .param(Param::integer("histogram_pairs").default_value(200000).min(1)
                 .doc("sampled photo pairs per distance histogram"))
      .param(Param::integer("bins").default_value(50).range(1, 1000).doc("histogram bins"))
      .param(Param::integer("heatmap_width").default_value(800).range(16, 8000).doc("heat map width in pixels"))
      .param(Param::numbers("bbox").optional().doc("[min_lon, min_lat, max_lon, max_lat] of the heat map; default: the data's"))
      .optional_input("photos", "lat: f64[B], lon: f64[B]", "photo batches")
      .optional_input("sets", "name: str[S], size: i64[S]", "geo.pair_sampler summaries (any number of edges)")
      .check([](SchemaContext& c) {
        if (!c.connected("photos") && !c.connected("sets")) c.error("connect at least one of 'photos' and 'sets'");
        if (c.params().has("bbox") && c.params().numbers("bbox").size() != 4)
          c.error("bbox needs 4 numbers [min_lon, min_lat, max_lon, max_lat]", "bbox");
      })
      .create<PairStatsNode>();
}

}  // namespace embedflow::geo
