// geo.spatial_split — a spatially blocked, leak-free train / validation / test split of a photo
// table. The map is cut into square cells of `cell_m` metres; each cell goes wholly to one part
// by a hash of its index seeded from the graph's seed (test_fraction and validation_fraction of
// the cells; the rest train). Then every photo of a validation cell within `buffer_m` of a test
// photo, and every photo of a train cell within `buffer_m` of a test or kept validation photo,
// becomes `buffer`: it is left out of the parts (or kept in `out` marked buffer). After it no
// test photo has a training or validation photo within buffer_m, and no validation photo a
// training photo. A pair sampler with positive radius r+ can then pair no training photo with a
// held-out one when buffer_m >= r+ (give pair_radius_m and the node checks it).
//
// Inputs:  photos — the photo table (geo.csv_photos, geo.yfcc_photos, geo.photo_folder), in any
//          number of batches; the split is made at the end of the stream.
// Outputs: out — the photo table (id, lat, lon, time, user, accuracy; title, description and
//          path when the input has them) with part: str[B] (train, validation, test; buffer rows
//          only with buffer_rows: mark), in input order; train, validation, test — the photo
//          table of each part.
// Summary: logged and published as the results table "spatial split": per part its cells and
//          photos, and the photos lost to the buffer.
// Caveats: cells are squares of the local projection fitted to the photos' extent (geodesy.hpp),
//          so adding photos that widen the extent moves the cell grid. Holds the table in memory.
//
//   seed: 1
//   nodes:
//     photos: {type: geo.csv_photos, params: {path: tests/geo/data/photos_small.csv, on_bad_row: skip}}
//     split:  {type: geo.spatial_split, params: {cell_m: 500, buffer_m: 100, pair_radius_m: 100}}
//     show:   {type: core.sink, params: {mode: print}}
//   edges: [photos.out -> split.photos, split.test -> show.in]
#include <algorithm>
#include <cmath>
#include <string>
#include <vector>

#include "embedflow/embedflow.hpp"
#include "embedflow/results.hpp"
#include "geo_types.hpp"
#include "photo_csv.hpp"
#include "photo_table_source.hpp"
#include "spatial_split.hpp"

namespace embedflow::geo {
namespace {

enum Port : std::size_t { kOut = 0, kTrain = 1, kValidation = 2, kTest = 3 };

class SpatialSplitNode final : public Node {
 public:
  void open(NodeContext& ctx) override {
    const Params& p = ctx.params();
    id_ = ctx.id();
    o_.cell_m = p.number("cell_m");
    o_.buffer_m = p.number("buffer_m");
    o_.validation_fraction = p.number("validation_fraction");
    o_.test_fraction = p.number("test_fraction");
    o_.seed = ctx.seed();
    mark_buffer_ = p.string("buffer_rows") == "mark";
    batch_size_ = static_cast<std::size_t>(p.integer("batch_size"));
  }

  void process(std::size_t, const RecordPtr& record, Emitter&) override {
    const Record& r = *record;
    const Array& id = r.get("id");
    const Array& lat = r.get("lat");
    const Array& lon = r.get("lon");
    const Array& time = r.get("time");
    const Array& user = r.get("user");
    const Array* accuracy = r.find("accuracy");
    const Array* title = r.find("title");
    const Array* description = r.find("description");
    const Array* path = r.find("path");
    has_text_ = has_text_ || (title && description);
    has_path_ = has_path_ || path;
    for (std::int64_t i = 0; i < id.numel(); ++i) {
      photos_.id.push_back(id.as_int(i));
      photos_.lat.push_back(lat.data<double>()[i]);
      photos_.lon.push_back(lon.data<double>()[i]);
      photos_.time.push_back(time.as_int(i));
      photos_.user.push_back(user.string_at(i));
      photos_.accuracy.push_back(accuracy ? accuracy->as_int(i) : -1);
      photos_.title.push_back(title && description ? title->string_at(i) : std::string());
      photos_.description.push_back(title && description ? description->string_at(i) : std::string());
      photos_.path.push_back(path ? path->string_at(i) : std::string());
    }
  }

  void close(Emitter& out) override {
    SpatialSplitSummary s;
    const std::vector<SplitPart> part = spatial_split(photos_.lat, photos_.lon, o_, &s);
    report(s);
    std::vector<std::size_t> rows[4];
    for (std::size_t i = 0; i < part.size(); ++i) rows[static_cast<int>(part[i])].push_back(i);
    // out: every kept row (and the buffer rows when marked), in input order.
    std::vector<std::size_t> all;
    for (std::size_t i = 0; i < part.size(); ++i)
      if (part[i] != SplitPart::buffer || mark_buffer_) all.push_back(i);
    emit_rows(out, kOut, all, &part);
    emit_rows(out, kTrain, rows[static_cast<int>(SplitPart::train)], nullptr);
    emit_rows(out, kValidation, rows[static_cast<int>(SplitPart::validation)], nullptr);
    emit_rows(out, kTest, rows[static_cast<int>(SplitPart::test)], nullptr);
    photos_ = PhotoColumns();
  }

 private:
  void report(const SpatialSplitSummary& s) const {
    log_info(id_, "cells of ", o_.cell_m, " m: ", s.cells[0], " train, ", s.cells[1], " validation, ", s.cells[2],
             " test; photos: ", s.photos[0], " train, ", s.photos[1], " validation, ", s.photos[2], " test, ", s.photos[3],
             " within buffer_m ", o_.buffer_m, " of a held-out part (", s.buffer_from_train, " from train cells, ",
             s.buffer_from_validation, " from validation cells)", mark_buffer_ ? ", marked buffer" : ", left out");
    ResultTable t;
    t.title = "spatial split";
    t.columns = {{"cell_m", "cell size", "m", 1.0, true},
                 {"buffer_m", "buffer", "m", 1.0, true},
                 {"cells", "cells", "", 1.0, true},
                 {"photos", "photos", "", 1.0, true}};
    for (int k = 0; k < 4; ++k) {
      const double cells = k < 3 ? static_cast<double>(s.cells[k]) : NAN;
      t.rows.push_back({kSplitPartNames[k],
                        {{"cell_m", o_.cell_m}, {"buffer_m", o_.buffer_m}, {"cells", cells}, {"photos", static_cast<double>(s.photos[k])}},
                        {}});
    }
    publish_results(id_, t);
  }

  // The rows `rows` of the collected table in batches of batch_size (one empty batch when there
  // are none, so a downstream node sees the table's fields); with `part`, the part column too.
  void emit_rows(Emitter& out, std::size_t port, const std::vector<std::size_t>& rows,
                 const std::vector<SplitPart>* part) const {
    std::size_t begin = 0;
    do {
      const std::size_t end = std::min(rows.size(), begin + batch_size_);
      PhotoColumns c;
      std::vector<std::string> part_names;
      for (std::size_t k = begin; k < end; ++k) {
        const std::size_t i = rows[k];
        c.id.push_back(photos_.id[i]);
        c.lat.push_back(photos_.lat[i]);
        c.lon.push_back(photos_.lon[i]);
        c.time.push_back(photos_.time[i]);
        c.user.push_back(photos_.user[i]);
        c.accuracy.push_back(photos_.accuracy[i]);
        if (has_text_) {
          c.title.push_back(photos_.title[i]);
          c.description.push_back(photos_.description[i]);
        }
        if (has_path_) c.path.push_back(photos_.path[i]);
        if (part) part_names.emplace_back(kSplitPartNames[static_cast<int>((*part)[i])]);
      }
      const bool empty_text = !has_text_ && c.size() == 0;
      Record r = photo_record(c, has_path_);
      if (empty_text) {  // photo_record gives an empty batch text columns; keep the schema steady
        r.erase("title");
        r.erase("description");
      }
      if (part) r.set("part", Array::strings(std::move(part_names)));
      out.emit(port, std::move(r));
      begin = end;
    } while (begin < rows.size());
  }

  std::string id_;
  SpatialSplitOptions o_;
  bool mark_buffer_ = false, has_text_ = false, has_path_ = false;
  std::size_t batch_size_ = 0;
  PhotoColumns photos_;
};

}  // namespace

NodeType spatial_split_type() {
  // Not deterministic(): the cells' parts are drawn from the node's seed.
  return NodeTypeBuilder("geo.spatial_split")
      .doc("Splits a photo table into train, validation and test by square map cells (seeded), leaving out the "
           "photos of train and validation cells within buffer_m of a held-out part, so no test photo has a "
           "training photo within buffer_m.")
      .example(
          "nodes:\n"
          "  photos: {type: geo.csv_photos, params: {path: tests/geo/data/photos_small.csv, on_bad_row: skip}}\n"
          "  split:  {type: geo.spatial_split, params: {cell_m: 500, buffer_m: 100, pair_radius_m: 100}}\n"
          "  show:   {type: core.sink, params: {mode: print}}\n"
          "edges: [photos.out -> split.photos, split.test -> show.in]\n")
      .param(Param::number("cell_m").default_value(1000.0).doc("cell side in metres (> 0); each cell goes wholly to one part"))
      .param(Param::number("test_fraction").default_value(0.2).range(0, 1).doc("fraction of the cells that are test"))
      .param(Param::number("validation_fraction").default_value(0.1).range(0, 1)
                 .doc("fraction of the cells that are validation (with test_fraction at most 1; the rest is train)"))
      .param(Param::number("buffer_m").default_value(0.0)
                 .doc("train and validation photos within this great-circle distance (metres, >= 0, at most 90 km) of "
                      "a held-out photo are set aside; at least the pair sampler's positive_radius_m"))
      .param(Param::number("pair_radius_m").optional()
                 .doc("the positive radius r+ of the pairs sampled from the training part: buffer_m below it is an "
                      "error, as a training photo could then be paired with a photo as near a held-out one"))
      .param(Param::choice("buffer_rows", {"drop", "mark"}).default_value("drop")
                 .doc("drop: buffer photos are left out of `out`; mark: kept in `out` with part buffer"))
      .param(Param::integer("batch_size").default_value(65536).min(1).doc("photos per emitted batch"))
      .input("photos", kPhotoTableFields, "the photo table, in batches (title, description and path are carried when present)")
      .output("out", std::string(kPhotoTableFields) + ", part: str[B]", "the photo table with each photo's part")
      .output("train", kPhotoTableFields, "the training part's photos")
      .output("validation", kPhotoTableFields, "the validation part's photos")
      .output("test", kPhotoTableFields, "the test part's photos")
      .check([](SchemaContext& c) {
        const Params& p = c.params();
        if (!(p.number("cell_m") > 0)) c.error(cat("cell_m must be > 0 metres, got ", p.number("cell_m")), "cell_m");
        const double buffer = p.number("buffer_m");
        if (!(buffer >= 0)) c.error(cat("buffer_m must be >= 0 metres, got ", buffer), "buffer_m");
        else if (buffer > kMaxBufferM) c.error(cat("buffer_m ", buffer, " is beyond the supported ", kMaxBufferM, " m"), "buffer_m");
        if (p.number("test_fraction") + p.number("validation_fraction") > 1)
          c.error(cat("test_fraction ", p.number("test_fraction"), " and validation_fraction ", p.number("validation_fraction"),
                      " sum to more than 1"),
                  "validation_fraction");
        if (p.has("pair_radius_m") && buffer < p.number("pair_radius_m"))
          c.error(cat("buffer_m ", buffer, " is below pair_radius_m ", p.number("pair_radius_m"),
                      ": a training photo could be a positive partner of a photo that near a test photo; "
                      "buffer_m must be at least the pair radius r+"),
                  "buffer_m");
      })
      .create<SpatialSplitNode>();
}

}  // namespace embedflow::geo
