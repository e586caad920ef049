// The node body geo.csv_photos and geo.yfcc_photos share (and the photo table's fields, which
// geo.photo_folder declares too): a PhotoCsvReader streamed as photo
// record batches, with the rows it dropped or skipped reported once at the end. Each node fills
// the reader's options from its own parameters (read_options) and inherits the rest.
// Sharding (shard_world_size W, shard_rank r; off by default): the reader reads only rank r's
// byte range of the file (CsvReadOptions::shard in core/photo_csv.hpp), and every batch carries
// shard_rank i64[B] (r on every row) so that a node needing the whole table (geo.pair_sampler)
// refuses a rank's share at validation, or at run time when a node between them hid the field.
#pragma once

#include <memory>
#include <string>

#include "embedflow/embedflow.hpp"
#include "photo_csv.hpp"

namespace embedflow::geo {

// The fields of the photo table on every photo source's `out` port (geo.csv_photos,
// geo.yfcc_photos, geo.photo_folder), each emitted by photo_record(); a source adds its optional
// ones (title, description, path) after these.
inline constexpr const char* kPhotoTableFields =
    "id: i64[B], lat: f64[B], lon: f64[B], time: i64[B], user: str[B], accuracy: i64[B]";

// The field a sharded photo source adds to each batch: the rank whose share the rows are.
inline constexpr const char* kShardRankField = "shard_rank";

// True when the node's parameters ask for sharding (shard_world_size other than 1; 0 may resolve
// to one process at run time, but the schema must not depend on the environment).
inline bool shard_requested(const Params& p) { return p.integer("shard_world_size") != 1; }

// Check hook part of a sharded photo source: its `out` port also carries shard_rank i64[B].
inline void declare_shard_rank(SchemaContext& c) {
  if (!shard_requested(c.params())) return;
  PortSchema s = c.output("out");
  s.add(PortSchema::parse(cat(kShardRankField, ": i64[B]")).fields().front());
  c.set_output("out", s);
}

// Adds shard_rank (the rank, on each of the batch's rows) when the source shards.
inline void add_shard_rank(Record& r, bool sharded, const ParallelPlace& place) {
  if (!sharded) return;
  const std::int64_t n = r.get("id").numel();
  r.set(kShardRankField, Array::from_vector<std::int64_t>({n}, std::vector<std::int64_t>(static_cast<std::size_t>(n), place.rank)));
}

class PhotoTableSource : public Node {
 public:
  void open(NodeContext& ctx) override {
    const Params& p = ctx.params();
    id_ = ctx.id();
    CsvReadOptions o;
    o.skip_bad_rows = p.string("on_bad_row") == "skip";
    o.duplicate_ids = p.string("duplicate_ids") == "keep_first" ? DuplicateIds::keep_first : DuplicateIds::error;
    o.min_accuracy = p.integer("min_accuracy");
    o.keep_text = p.boolean("text");
    if (p.has("bbox")) {
      const auto b = p.numbers("bbox");
      o.bbox = BBox{b[0], b[1], b[2], b[3]};
    }
    read_options(p, o);
    sharded_ = shard_requested(p);
    o.shard = shard_place(p);
    batch_size_ = static_cast<std::size_t>(p.integer("batch_size"));
    reader_ = std::make_unique<PhotoCsvReader>(p.string("path"), o);
    if (o.shard.world_size > 1) {
      const auto [first, last] = reader_->share_bytes();
      log_info(id_, file_label(), ": rank ", o.shard.rank, " of ", o.shard.world_size, " reads bytes [", first, ", ",
               last, ") of the file");
    }
  }

  bool produce(Emitter& out) override {
    if (!reader_) return false;  // the file was read to its end
    if (!reader_->next(batch_size_, cols_)) {
      report();
      // Past the end of the file its duplicate-id table (24 bytes a row) and read buffer serve
      // nothing, while the node below (geo.pair_sampler) builds its index over the whole table.
      reader_.reset();
      cols_ = PhotoColumns{};
      return false;
    }
    Record r = photo_record(cols_, reader_->has_path_column());
    add_shard_rank(r, sharded_, reader_->shard());
    out.emit(std::move(r));
    return true;
  }

 protected:
  // The options that depend on the file's format (time format, delimiter, layouts, image paths).
  virtual void read_options(const Params& p, CsvReadOptions& o) = 0;
  // How the log names the file: its path, and the layout when the format has several.
  virtual std::string file_label() const { return reader_->path(); }
  const PhotoCsvReader& reader() const { return *reader_; }

 private:
  void report() {
    if (reported_) return;
    reported_ = true;
    const CsvReadStats& s = reader_->stats();
    const ParallelPlace& place = reader_->shard();
    // Sharded: every figure is this rank's (its rows, and duplicate ids among them only).
    log_info(id_, file_label(), place.world_size > 1 ? cat(" (rank ", place.rank, " of ", place.world_size, ")") : "",
             ": ", describe(s));
    if (s.bad_rows > 0) {
      std::string first;
      for (const auto& b : s.first_bad) first += "\n  " + b;
      log_warning(id_, "skipped ", s.bad_rows, " malformed rows; first ones:", first);
    }
    if (s.duplicate_ids > 0) {
      std::string first;
      for (const auto& d : s.first_duplicates) first += "\n  " + d;
      log_warning(id_, "dropped ", s.duplicate_ids, " rows repeating an earlier row's photo id (duplicate_ids: keep_first); first ones:", first);
    }
  }

  std::string id_;
  std::size_t batch_size_ = 0;
  std::unique_ptr<PhotoCsvReader> reader_;
  PhotoColumns cols_;
  bool reported_ = false;
  bool sharded_ = false;
};

}  // namespace embedflow::geo
