// geo.yfcc_photos: streams photo metadata from the YFCC100M metadata file (yfcc100m_dataset) as
// the same record batches as geo.csv_photos, so it feeds geo.pair_sampler unchanged.
//
// The file is tab-separated with no header and no quoting; titles and descriptions are
// percent-encoded and are decoded. Two layouts exist: the Webscope release (23 columns: photo id,
// user NSID, nickname, date taken, date uploaded, device, title, description, user tags, machine
// tags, longitude, latitude, accuracy, page URL, download URL, licence name, licence URL, server,
// farm, secret, original secret, original extension, photo/video marker) and the Multimedia
// Commons copy (a line number first and the photo hash after the id, 25 columns); `layout: auto`
// picks by the first row's column count.
//
// Output `out`: id i64[B], lat f64[B], lon f64[B], time i64[B] (date taken, read as UTC: the file
// has no zone), user str[B] (the NSID), accuracy i64[B], title and description str[B] (text:
// true), path str[B] (when `images` or `image_path` is given).
// Kept rows: photos (videos are dropped and counted) with coordinates (rows without are dropped
// and counted, as most of the collection is not geotagged) and an accuracy level of at least
// `min_accuracy` (16, street level, by default). Caveats: a malformed row (wrong column count, a
// bad id, coordinate, date or marker) stops the run with file:line unless on_bad_row: skip, which
// skips and counts it.
// Sharding (shard_world_size W, shard_rank r; off by default): rank r reads only the rows whose
// first byte lies in [S r / W, S (r+1) / W) of the file's S bytes (the file is unquoted, so every
// row is one line; with layout: auto every rank reads the first row to pick the layout), as
// geo.csv_photos does; each batch carries shard_rank i64[B]. Duplicate ids and the counts logged
// at the end cover the rank's rows only. A sharded table must not feed geo.pair_sampler.
//
//   seed: 1
//   nodes:
//     photos: {type: geo.yfcc_photos, params: {path: tests/geo/data/yfcc_sample.tsv, on_bad_row: skip}}
//     stats:  {type: geo.pair_stats, params: {out: out/yfcc_example, histogram_pairs: 1000}}
//   edges:
//     - photos.out -> stats.photos
#include "embedflow/embedflow.hpp"
#include "geo_types.hpp"
#include "photo_table_source.hpp"

namespace embedflow::geo {
namespace {

class YfccPhotosNode final : public PhotoTableSource {
 protected:
  void read_options(const Params& p, CsvReadOptions& o) override {
    set_yfcc_format(o, p.string("layout"));
    if (p.has("images")) o.image_template = p.string("images") + "/{id}.jpg";
    else if (p.has("image_path")) o.image_template = p.string("image_path");
  }
  std::string file_label() const override { return cat(reader().path(), " (", reader().layout_name(), ")"); }
};

}  // namespace

NodeType yfcc_photos_type() {
  NodeTypeBuilder builder("geo.yfcc_photos");
  builder.deterministic()
      .doc("Streams geotagged photos (id, lat, lon, time, user, accuracy, text, path) from the YFCC100M metadata file.")
      .example("nodes:\n  photos: {type: geo.yfcc_photos, params: {path: tests/geo/data/yfcc_sample.tsv, images: photos}}\n")
      .source()
      .param(Param::path("path").doc("yfcc100m_dataset: tab-separated, no header, 23 or 25 columns"))
      .param(Param::choice("layout", {"auto", "webscope", "commons"}).default_value("auto")
                 .doc("webscope: the 23-column release; commons: the 25-column Multimedia Commons copy; auto: by the first row"))
      .param(Param::path("images").optional().doc("folder of the images, named <photo id>.jpg: emits path"))
      .param(Param::string("image_path").optional()
                 .doc("image path template instead of `images`, e.g. photos/{farm}/{server}/{id}_{secret}.jpg; "
                      "placeholders: id, nickname, server, farm, secret, secret_original, extension_original, hash (commons)"))
      .param(Param::integer("batch_size").default_value(65536).min(1).doc("photos per emitted batch"))
      .param(Param::choice("on_bad_row", {"error", "skip"}).default_value("error")
                 .doc("error: a malformed row stops the run naming file:line; skip: skip it and count it"))
      .param(Param::choice("duplicate_ids", {"error", "keep_first"}).default_value("error")
                 .doc("a photo id on two kept rows: error stops the run naming the file and both lines; keep_first "
                      "keeps the first row of each id and drops (counts and logs) the later ones"))
      .param(Param::numbers("bbox").optional()
                 .doc("[min_lon, min_lat, max_lon, max_lat]: rows outside are dropped and counted"))
      .param(Param::integer("min_accuracy").default_value(16).range(0, 16)
                 .doc("drop rows whose Flickr accuracy level is below this (16 = street level); 0 keeps all geotagged rows"))
      .param(Param::boolean("text").default_value(true).doc("emit the title and description columns, percent-decoded"));
  // The rank's byte range of the file only (photo_table_source.hpp, CsvReadOptions::shard).
  add_shard_params(builder);
  return builder
      .output("out", kPhotoTableFields,
              "one batch of photos; also title, description (text: true) and path (images or image_path)")
      .check([](SchemaContext& c) {
        declare_shard_rank(c);
        if (c.params().has("images") && c.params().has("image_path"))
          c.error("give either images (a folder of <photo id>.jpg) or image_path (a template), not both", "image_path");
        if (c.params().has("bbox")) {
          const auto b = c.params().numbers("bbox");
          if (b.size() != 4) c.error(cat("bbox needs 4 numbers [min_lon, min_lat, max_lon, max_lat], got ", b.size()), "bbox");
          else if (b[0] >= b[2] || b[1] >= b[3]) c.error("bbox must have min_lon < max_lon and min_lat < max_lat", "bbox");
        }
      })
      .create<YfccPhotosNode>();
}

}  // namespace embedflow::geo
