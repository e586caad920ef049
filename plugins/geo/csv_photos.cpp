// geo.csv_photos: streams photo metadata from a CSV file as record batches.
//
// Output `out`: id i64[B], lat f64[B], lon f64[B] (degrees), time i64[B] (unix seconds, UTC),
// user str[B], accuracy i64[B] (-1 when the file has no accuracy column), title str[B] and
// description str[B] (when text: true), path str[B] (when the file has a path column).
// Columns are found by header name (id, lat, lon, time, user required; accuracy, title,
// description, path optional; `image` is another name for path), or under the file's own names
// through `columns: {id: photo_id, time: taken, user: owner}` (fields left out keep their
// default names; a name the header lacks is an error naming the file, the header line and the
// closest header name). Fields follow RFC 4180 quoting, so titles may hold commas, quotes and
// newlines. Times (`time_format`) are ISO 8601, EXIF "YYYY:MM:DD HH:MM:SS[+HH:MM]" or unix
// seconds (integer or fractional, rounded down); an offset is honoured, none means UTC; auto
// decides per value and refuses 8- or 14-digit numbers that are also compact dates. Ids are
// integers, or with `id_from: hash` the SHA-256 id geo.photo_folder gives paths, of the id text.
// Caveats: a malformed row stops the run with file:line unless on_bad_row: skip, which skips
// and counts it (logged at the end with the first few locations). Rows outside `bbox` or below
// `min_accuracy` are dropped and counted. The `path` parameter is relative to the working
// directory; relative paths in the file's path column are relative to the file's folder.
// Sharding (shard_world_size W, shard_rank r; off by default): rank r reads only the data rows whose
// first byte lies in [S r / W, S (r+1) / W) of the file's S bytes (it seeks there and skips to the
// next line start; the header is read by every rank), so the ranks' rows in rank order are the
// file's rows, each once, and each batch carries shard_rank i64[B]. Every record must then be one
// line: a record spanning lines (a quoted line break) stops the run naming its line, even under
// on_bad_row: skip. Duplicate ids and the counts logged at the end cover the rank's rows only.
// A sharded table must not feed geo.pair_sampler, which needs the whole table (refused at validation).
//
//   seed: 1
//   nodes:
//     photos: {type: geo.csv_photos, params: {path: tests/geo/data/photos_small.csv, on_bad_row: skip}}
//     stats:  {type: geo.pair_stats, params: {out: out/csv_photos_example, histogram_pairs: 1000}}
//   edges:
//     - photos.out -> stats.photos
#include "embedflow/csv.hpp"
#include "embedflow/embedflow.hpp"
#include "geo_types.hpp"
#include "photo_table_source.hpp"

namespace embedflow::geo {
namespace {

class CsvPhotosNode final : public PhotoTableSource {
 protected:
  void read_options(const Params& p, CsvReadOptions& o) override {
    const std::string& tf = p.string("time_format");
    o.time_format = tf == "unix"                     ? TimeFormat::unix_seconds
                    : tf == "iso" || tf == "iso8601" ? TimeFormat::iso8601
                    : tf == "exif"                   ? TimeFormat::exif
                                                     : TimeFormat::automatic;
    o.id_from = p.string("id_from") == "hash" ? IdSource::hash : IdSource::column;
    if (p.has("columns"))
      for (const auto& [field, name] : p.value("columns").as_map()) o.columns.emplace_back(field, name.as_string());
  }
};

}  // namespace

NodeType csv_photos_type() {
  NodeTypeBuilder builder("geo.csv_photos");
  builder.deterministic()
      .doc("Streams photo metadata (id, lat, lon, time, user, accuracy, text, path) from a CSV file in batches.")
      .example("nodes:\n  photos: {type: geo.csv_photos, params: {path: tests/geo/data/photos_small.csv}}\n")
      .source()
      .param(Param::path("path").doc("CSV file with a header row (id, lat, lon, time, user; optional accuracy, title, description, path or image)"))
      .param(Param::integer("batch_size").default_value(65536).min(1).doc("photos per emitted batch"))
      .param(Param::choice("on_bad_row", {"error", "skip"}).default_value("error")
                 .doc("error: a malformed row stops the run naming file:line; skip: skip it and count it"))
      .param(Param::choice("duplicate_ids", {"error", "keep_first"}).default_value("error")
                 .doc("a photo id on two kept rows: error stops the run naming the file and both lines; keep_first "
                      "keeps the first row of each id and drops (counts and logs) the later ones"))
      .param(Param::numbers("bbox").optional()
                 .doc("[min_lon, min_lat, max_lon, max_lat]: rows outside are dropped and counted"))
      .param(Param::integer("min_accuracy").default_value(0).range(0, 16)
                 .doc("drop rows whose Flickr accuracy level is below this (16 = street level); 0 keeps all"))
      .param(Param::choice("time_format", {"auto", "iso", "iso8601", "exif", "unix"}).default_value("auto")
                 .doc("how the time column is written: iso (ISO 8601; iso8601 is the same), exif (YYYY:MM:DD HH:MM:SS, "
                      "optional +HH:MM), unix (seconds, integer or fractional); auto decides per value and refuses "
                      "8- or 14-digit numbers that are also compact dates"))
      .param(Param::any("columns").optional()
                 .doc("the file's header names for the reader's fields, e.g. {id: photo_id, time: taken, user: owner} "
                      "(fields: id, lat, lon, time, user, accuracy, title, description, path); fields left out keep "
                      "their default names"))
      .param(Param::choice("id_from", {"column", "hash"}).default_value("column")
                 .doc("column: the id column holds 64-bit integers; hash: the id is the first 63 bits of SHA-256 of "
                      "the id text, as geo.photo_folder derives ids from paths (for string or hex ids)"))
      .param(Param::boolean("text").default_value(true).doc("emit the title and description columns"));
  // The rank's byte range of the file only (photo_table_source.hpp, CsvReadOptions::shard).
  add_shard_params(builder);
  return builder
      .output("out", kPhotoTableFields,
              "one batch of photos; also title, description (text: true) and path (when the file has it)")
      .check([](SchemaContext& c) {
        declare_shard_rank(c);
        if (c.params().has("columns")) check_column_map(c, "columns", photo_csv_fields());
        if (c.params().has("bbox")) {
          const auto b = c.params().numbers("bbox");
          if (b.size() != 4) c.error(cat("bbox needs 4 numbers [min_lon, min_lat, max_lon, max_lat], got ", b.size()), "bbox");
          else if (b[0] >= b[2] || b[1] >= b[3]) c.error("bbox must have min_lon < max_lon and min_lat < max_lat", "bbox");
        }
      })
      .create<CsvPhotosNode>();
}

}  // namespace embedflow::geo
