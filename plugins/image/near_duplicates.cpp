// image.near_duplicates — removes near-duplicate photos (re-uploads, resized, re-encoded, lightly
// cropped or recoloured copies) from a photo table before pairs are sampled from it: photos whose
// perceptual hashes (image.phash's phash column) differ in at most max_hamming of 64 bits, and,
// when max_metres is given, whose geotags are also at most max_metres apart (great circle), are
// collapsed to one representative.
//
// Grouping (deterministic): photos are ordered by (time, id) when the table has time, else by id.
// Walking that order, a photo whose near-duplicates (within both thresholds) include an earlier
// representative joins the first such representative's group and is removed; otherwise it is a
// representative itself. So the earliest photo of a group is kept (the first upload; ties by the
// smallest id), and every removed photo is within the thresholds of the photo that replaces it
// (no chains: two copies of one photo each max_hamming from it may be 2 * max_hamming apart and
// are still one group, but a photo only similar to a removed one is not pulled in).
//
// Inputs:  in — the photo table with phash (image.phash after geo.photo_folder, geo.csv_photos or
//          geo.yfcc_photos), in any number of batches; lat and lon f64 are needed with max_metres.
// Outputs: out — the representatives: the input table minus the removed rows, every field kept,
//          in input order, in batches of batch_size (one empty batch when nothing is left);
//          groups — one record, for every input photo: id, representative (the id of the photo
//          kept in its place; its own id for a representative), hamming (bits from it).
// Report:  photos, representatives, duplicate groups (of two or more) and removed photos, logged
//          and published as the results table "near-duplicates"; with `out`, mosaic.png there:
//          the `mosaic_groups` largest groups, one row each, the representative first (captioned kept),
//          each copy captioned with its Hamming distance to it (d=).
// Caveats: all pairs are compared (N^2 / 2 64-bit XORs and popcounts, in parallel: 40,000 photos,
// 8 x 10^8 pairs, take about a second on two cores); the table is held in memory until end of
// stream, and photo positions in it are 32-bit (at most 4 x 10^9 photos).
//
//   nodes:
//     photos: {type: geo.csv_photos, params: {path: tests/image/data/tiny_photos.csv}}
//     hash:   {type: image.phash, cache: true}
//     dedup:  {type: image.near_duplicates, params: {max_hamming: 8, max_metres: 100, out: out/dedup}}
//     show:   {type: core.sink, params: {mode: print}}
//   edges: [photos.out -> hash.in, hash.out -> dedup.in, dedup.out -> show.in]
#include <algorithm>
#include <cmath>
#include <filesystem>
#include <numeric>

#include <opencv2/imgproc.hpp>
#include <tbb/parallel_for.h>

#include <embedflow/plot/png.hpp>
#include <embedflow/results.hpp>

#include "core/arrays.hpp"
#include "core/phash.hpp"
#include "image_types.hpp"

namespace embedflow::image {
namespace {

// Great-circle metres, haversine on the sphere geo's indexes use (plugins/geo/core/geodesy.hpp).
double great_circle_m(double lat1, double lon1, double lat2, double lon2) {
  constexpr double kR = 6371000.0, kRad = 3.14159265358979323846 / 180.0;
  const double s_lat = std::sin(0.5 * (lat2 - lat1) * kRad), s_lon = std::sin(0.5 * (lon2 - lon1) * kRad);
  const double h = s_lat * s_lat + std::cos(lat1 * kRad) * std::cos(lat2 * kRad) * s_lon * s_lon;
  return 2.0 * kR * std::asin(std::sqrt(std::min(1.0, h)));
}

class NearDuplicates final : public Node {
 public:
  void open(NodeContext& ctx) override {
    ctx_ = &ctx;
    const Params& p = ctx.params();
    max_hamming_ = static_cast<int>(p.integer("max_hamming"));
    use_metres_ = p.has("max_metres");
    if (use_metres_) max_metres_ = p.number("max_metres");
    batch_size_ = static_cast<std::size_t>(p.integer("batch_size"));
    out_dir_ = p.has("out") ? p.string("out") : std::string();
    mosaic_groups_ = static_cast<std::size_t>(p.integer("mosaic_groups"));
    path_field_ = p.string("path_field");
    root_ = p.string("root");
  }

  void process(std::size_t, const RecordPtr& in, Emitter&) override { parts_.push_back(in); }

  void close(Emitter& out) override {
    Record table = concatenate();
    const std::int64_t n = parts_.empty() ? 0 : table.get("id").numel();
    parts_.clear();
    const std::vector<std::int64_t> id = n ? int_values(table.get("id"), "id") : std::vector<std::int64_t>();
    const std::vector<std::int64_t> hash_signed = n ? int_values(table.get("phash"), "phash") : std::vector<std::int64_t>();
    std::vector<std::uint64_t> hash(hash_signed.begin(), hash_signed.end());
    const Array* time = n ? table.find("time") : nullptr;
    const Array* lat = n ? table.find("lat") : nullptr;
    const Array* lon = n ? table.find("lon") : nullptr;
    if (use_metres_ && n && (!lat || !lon))
      throw DataError(cat("max_metres needs the photo table's lat and lon; it carries ", table.describe()));
    std::vector<double> la, lo;
    if (use_metres_)
      for (std::int64_t i = 0; i < n; ++i) la.push_back(lat->as_double(i)), lo.push_back(lon->as_double(i));

    // Order: (time, id), else id.
    std::vector<std::size_t> order(static_cast<std::size_t>(n)), rank(static_cast<std::size_t>(n));
    std::iota(order.begin(), order.end(), std::size_t{0});
    std::vector<std::int64_t> t(static_cast<std::size_t>(n), 0);
    if (time)
      for (std::int64_t i = 0; i < n; ++i) t[static_cast<std::size_t>(i)] = time->as_int(i);
    std::sort(order.begin(), order.end(), [&](std::size_t a, std::size_t b) { return std::tie(t[a], id[a]) < std::tie(t[b], id[b]); });
    for (std::size_t k = 0; k < order.size(); ++k) rank[order[k]] = k;

    // Every pair within both thresholds, as lists of earlier positions in the order.
    std::vector<std::uint64_t> ordered(order.size());
    for (std::size_t k = 0; k < order.size(); ++k) ordered[k] = hash[order[k]];
    std::vector<std::vector<std::uint32_t>> earlier = hamming_neighbours_before(ordered, max_hamming_);
    if (use_metres_)
      tbb::parallel_for(std::size_t{0}, earlier.size(), [&](std::size_t k) {
        const std::size_t i = order[k];
        auto far = [&](std::uint32_t m) { return great_circle_m(la[i], lo[i], la[order[m]], lo[order[m]]) > max_metres_; };
        earlier[k].erase(std::remove_if(earlier[k].begin(), earlier[k].end(), far), earlier[k].end());
      });
    // The greedy walk: join the first earlier representative, else represent.
    std::vector<std::size_t> rep_of(order.size());  // by position in the order
    for (std::size_t k = 0; k < order.size(); ++k) {
      rep_of[k] = k;
      for (const std::uint32_t m : earlier[k])  // ascending
        if (rep_of[m] == m) {
          rep_of[k] = m;
          break;
        }
    }

    // Groups, counts, the groups record.
    std::vector<std::int64_t> keep, rep_id(static_cast<std::size_t>(n)), dist(static_cast<std::size_t>(n));
    std::vector<std::size_t> group_size(order.size(), 0);
    for (std::size_t i = 0; i < static_cast<std::size_t>(n); ++i) {
      const std::size_t rep = order[rep_of[rank[i]]];
      rep_id[i] = id[rep];
      dist[i] = hamming(hash[i], hash[rep]);
      ++group_size[rep];
      if (rep == i) keep.push_back(static_cast<std::int64_t>(i));
    }
    std::int64_t groups = 0, largest = n ? 1 : 0;
    for (std::size_t s : group_size)
      if (s >= 2) ++groups, largest = std::max<std::int64_t>(largest, static_cast<std::int64_t>(s));
    const std::int64_t removed = n - static_cast<std::int64_t>(keep.size());
    report(n, static_cast<std::int64_t>(keep.size()), groups, removed, largest);
    if (!out_dir_.empty()) write_mosaic(table, order, rep_of, group_size, dist);

    // out: the kept rows, in input order.
    std::size_t begin = 0;
    do {
      const std::size_t end = std::min(keep.size(), begin + batch_size_);
      std::vector<std::int64_t> rows(keep.begin() + static_cast<std::ptrdiff_t>(begin), keep.begin() + static_cast<std::ptrdiff_t>(end));
      if (!table.fields().empty()) out.emit(0, take_record_rows(table, rows, n));
      begin = end;
    } while (begin < keep.size());
    Record g;
    g.set("id", Array::from_vector<std::int64_t>({n}, id));
    g.set("representative", Array::from_vector<std::int64_t>({n}, std::move(rep_id)));
    g.set("hamming", Array::from_vector<std::int64_t>({n}, std::move(dist)));
    out.emit(1, std::move(g));
  }

 private:
  Record concatenate() const {
    Record table;
    if (parts_.empty()) return table;
    for (const auto& [name, value] : parts_.front()->fields()) {
      std::vector<Array> pieces;
      pieces.reserve(parts_.size());
      for (std::size_t i = 0; i < parts_.size(); ++i) {
        const Array* a = parts_[i]->find(name);
        if (!a) throw DataError(cat("batch ", i, " of the photo table has no field '", name, "' but batch 0 has"));
        pieces.push_back(*a);
      }
      table.set(name, Array::concat(pieces));
    }
    if (!table.find("phash"))
      throw DataError(cat("the photo table has no phash column (put image.phash before this node); it carries ", table.describe()));
    return table;
  }

  void report(std::int64_t n, std::int64_t kept, std::int64_t groups, std::int64_t removed, std::int64_t largest) const {
    log_info(ctx_->id(), n, " photos, ", kept, " kept: ", removed, " near-duplicates removed from ", groups,
             " groups of two or more (largest ", largest, "; max_hamming ", max_hamming_,
             use_metres_ ? cat(", max_metres ", max_metres_) : std::string(", any distance"), ")");
    ResultTable t;
    t.title = "near-duplicates";
    t.columns = {{"photos", "photos", "", 1.0, true},
                 {"kept", "kept", "", 1.0, true},
                 {"groups", "duplicate groups", "", 1.0, false},
                 {"removed", "removed", "", 1.0, false},
                 {"removed_fraction", "removed", "%", 100.0, false},
                 {"largest_group", "largest group", "", 1.0, false}};
    t.rows.push_back({cat("max_hamming ", max_hamming_, use_metres_ ? cat(", max_metres ", max_metres_) : std::string()),
                      {{"photos", static_cast<double>(n)},
                       {"kept", static_cast<double>(kept)},
                       {"groups", static_cast<double>(groups)},
                       {"removed", static_cast<double>(removed)},
                       {"removed_fraction", n ? static_cast<double>(removed) / static_cast<double>(n) : NAN},
                       {"largest_group", static_cast<double>(largest)}},
                      {}});
    publish_results(*ctx_, t);
  }

  // The largest groups (ties: earliest representative), one row each: the representative, then
  // its copies in order, at most kPerRow; thumbnails of kCell pixels with the Hamming distance.
  void write_mosaic(const Record& table, const std::vector<std::size_t>& order, const std::vector<std::size_t>& rep_of,
                    const std::vector<std::size_t>& group_size,
                    const std::vector<std::int64_t>& dist) const {
    constexpr int kCell = 96, kCaption = 14, kGap = 4;
    constexpr std::size_t kPerRow = 8;
    const std::string file = (std::filesystem::path(out_dir_) / "mosaic.png").string();
    const Array* paths = table.find(path_field_);
    std::vector<std::size_t> reps;  // by position in the order
    for (std::size_t k = 0; k < order.size(); ++k)
      if (rep_of[k] == k && group_size[order[k]] >= 2) reps.push_back(k);
    std::stable_sort(reps.begin(), reps.end(), [&](std::size_t a, std::size_t b) { return group_size[order[a]] > group_size[order[b]]; });
    if (reps.size() > mosaic_groups_) reps.resize(mosaic_groups_);
    if (!paths || !paths->is_string() || reps.empty()) {
      log_info(ctx_->id(), "no mosaic: ", reps.empty() ? "no duplicate groups" : cat("no string column '", path_field_, "'"));
      return;
    }
    std::vector<std::vector<std::size_t>> rows;  // input rows
    for (std::size_t r : reps) {
      std::vector<std::size_t> members{order[r]};
      for (std::size_t k = r + 1; k < order.size() && members.size() < kPerRow; ++k)
        if (rep_of[k] == r) members.push_back(order[k]);
      rows.push_back(std::move(members));
    }
    const int height = static_cast<int>(rows.size()) * (kCell + kCaption + kGap) + kGap;
    std::size_t widest = 0;
    for (const auto& r : rows) widest = std::max(widest, r.size());
    const int width = static_cast<int>(widest) * (kCell + kGap) + kGap;
    cv::Mat canvas(height, width, CV_8UC3, cv::Scalar(255, 255, 255));
    DecodeOptions o;
    o.color = true;
    o.height = kCell;
    o.width = kCell;
    for (std::size_t r = 0; r < rows.size(); ++r)
      for (std::size_t c = 0; c < rows[r].size(); ++c) {
        const std::size_t i = rows[r][c];
        const int x = kGap + static_cast<int>(c) * (kCell + kGap), y = kGap + static_cast<int>(r) * (kCell + kCaption + kGap);
        std::string error;
        std::filesystem::path file = paths->string_at(static_cast<std::int64_t>(i));
        if (!root_.empty() && file.is_relative()) file = std::filesystem::path(root_) / file;
        const cv::Mat thumb = decode_image(file.string(), o, error);
        if (!thumb.empty()) thumb.copyTo(canvas(cv::Rect(x, y, kCell, kCell)));
        else cv::rectangle(canvas, cv::Rect(x, y, kCell, kCell), cv::Scalar(200, 200, 200), cv::FILLED);
        const std::string caption = c == 0 ? std::string("kept") : cat("d=", dist[i]);
        cv::putText(canvas, caption, cv::Point(x + 2, y + kCell + kCaption - 3), cv::FONT_HERSHEY_SIMPLEX, 0.38,
                    c == 0 ? cv::Scalar(0, 110, 0) : cv::Scalar(160, 0, 0), 1, cv::LINE_AA);
      }
    save_png(file, canvas.ptr<std::uint8_t>(), canvas.rows, canvas.cols, 3);  // canvas is RGB
    log_info(ctx_->id(), "mosaic of ", rows.size(), " groups: ", file);
    publish_figure(*ctx_, {"near-duplicate groups", file, cat("the ", rows.size(), " largest groups, one per row, their kept photo first")});
  }

  NodeContext* ctx_ = nullptr;
  int max_hamming_ = 0;
  bool use_metres_ = false;
  double max_metres_ = 0;
  std::size_t batch_size_ = 0, mosaic_groups_ = 0;
  std::string out_dir_, path_field_, root_;
  std::vector<RecordPtr> parts_;
};

}  // namespace

NodeType near_duplicates_type() {
  return NodeTypeBuilder("image.near_duplicates")
      .deterministic()
      .doc("Collapses near-duplicate photos (perceptual hashes within max_hamming bits and, optionally, geotags within "
           "max_metres) to their earliest photo; emits the photo table without the others, a groups record, a "
           "results table and a mosaic of the largest groups.")
      .example(
          "nodes:\n"
          "  photos: {type: geo.csv_photos, params: {path: tests/image/data/tiny_photos.csv}}\n"
          "  hash:   {type: image.phash, cache: true}\n"
          "  dedup:  {type: image.near_duplicates, params: {max_hamming: 8, max_metres: 100}}\n"
          "  show:   {type: core.sink, params: {mode: print}}\n"
          "edges: [photos.out -> hash.in, hash.out -> dedup.in, dedup.out -> show.in]\n")
      .param(Param::integer("max_hamming").default_value(8).range(0, 64)
                 .doc("largest number of differing PHash bits (of 64) between a photo and the representative it joins; "
                      "8 keeps re-encoded and resized copies together and few distinct photos, 12 also catches most "
                      "4% crops but joins more look-alike photos (docs/photos.md has the measurements)"))
      .param(Param::number("max_metres").optional()
                 .doc("when given, photos are near-duplicates only when their geotags are also at most this many metres "
                      "apart (great circle, >= 0); absent: at any distance"))
      .param(Param::integer("batch_size").default_value(65536).min(1).doc("photos per emitted batch on out"))
      .param(Param::path("out").optional().not_fingerprinted().doc("folder for mosaic.png (created if missing); absent: no mosaic"))
      .param(Param::integer("mosaic_groups").default_value(8).range(1, 100).not_fingerprinted()
                 .doc("groups drawn in the mosaic, largest first"))
      .param(Param::string("path_field").default_value("path").not_fingerprinted()
                 .doc("the column holding each photo's image file, for the mosaic's thumbnails"))
      .param(Param::path("root").default_value("").not_fingerprinted()
                 .doc("prefix for relative paths in the mosaic (as image.phash's root); empty: as given"))
      .input("in", "id: i64[B], phash: i64[B]", "the photo table with image.phash's phash, in batches")
      .output("out", "id: i64[B], phash: i64[B]", "the representatives: the input table minus the removed rows, in input order")
      .output("groups", "id: i64[N], representative: i64[N], hamming: i64[N]",
              "every input photo with the id of the photo kept in its place and the bits between their hashes")
      .check([](SchemaContext& c) {
        const Params& p = c.params();
        if (p.has("max_metres") && !(p.number("max_metres") >= 0))
          c.error(cat("max_metres must be >= 0 metres, got ", p.number("max_metres")), "max_metres");
        const PortSchema& in = c.input("in");
        if (in.is_any()) return;
        if (p.has("max_metres") && (!in.find("lat") || !in.find("lon")))
          c.error(cat("max_metres needs lat and lon on input 'in'; it carries ", in.str()), "max_metres");
        c.set_output("out", in);
      })
      .create<NearDuplicates>();
}

}  // namespace embedflow::image
