// image.files_reader — decodes image files (PNG, JPEG, BMP, TIFF, WebP, PNM) with OpenCV, listed
// either in a CSV (a path column plus optional id and label columns) or as a directory tree
// dir/<class>/<image> (label from the class directory name, ids from the sorted path list).
// Files are decoded ahead in parallel chunks (TBB, within --threads); output order is the list
// order (or the seeded shuffle), whatever the thread count.
//
// Outputs: out — per image {id: i64[], label: i64[], epoch: i64[], image: u8[H,W,C]} (C = 1 for
//          mode grey, 3 in RGB order for mode color); batches with batch_size N; one table
//          record with batch_size -1 (for the batchers' side ports).
// Caveats: a missing, empty or undecodable file (a truncated or corrupt JPEG included: libjpeg's
// warnings are errors here) stops the run with a DataError naming the file, the CSV line and the
// image's id unless on_bad_image: skip, which skips it and logs the count and the first
// few names at the end. A file whose header declares more than max_pixels (width x height) is
// such a bad file, refused before any decoder allocates; the parallel decodes hold at most
// max_decoding_pixels header pixels at once (one file always may start). Without height/width, images keep their own sizes, so batches need
// equally sized files. Directory labels: integer class names are used as labels, other names
// get their index in sorted order (logged). Relative CSV paths are relative to `root`, default
// the CSV's directory.
// Sharding (shard_world_size W, shard_rank r; off by default), with image.idx_reader's plan
// (core/reader.hpp's ReaderShard): every rank lists the whole CSV or tree and walks the same
// epoch order (same seeded shuffle, classes and limit). With batch_size B > 0 rank r emits rows
// rank_rows(B) of every global batch with `unsharded_rows` B, what core.shard after an unsharded
// reader would pass, so every rank takes the same number of steps; a batch of fewer rows than
// ranks is an error naming the epoch and the batch. Per image (0) and as one table (-1) rank r
// takes positions rank_rows(N) of the epoch's order. A rank decodes, and so opens, only the files
// of its own rows. With on_bad_image: skip a rank leaves its unreadable files out of its rows and
// the batch keeps unsharded_rows B, the planned size (no rank knows which of the others' files
// fail), with `skipped_rows` the rank's rows left out: torch.train adds the ranks' rows and skipped
// rows up to B and trains on the mean over the rows the ranks hold. A rank with no readable file
// in its share of a batch would miss a step the others take: an error naming the epoch, the
// batch and a file.
//
//   nodes:
//     photos: {type: image.files_reader, params: {dir: tests/image/data/tiny, mode: grey, height: 32, width: 32}}
//     count:  {type: core.sink, params: {mode: count}}
//   edges: [photos.out -> count.in]
#include <chrono>
#include <cstring>
#include <deque>
#include <memory>
#include <set>

#include <tbb/parallel_for.h>

#include "core/arrays.hpp"
#include "core/classes.hpp"
#include "core/image_files.hpp"
#include "core/reader.hpp"
#include "image_types.hpp"

namespace embedflow::image {
namespace {

std::vector<ImageEntry> list_from_params(const Params& p, std::vector<std::string>& class_names) {
  if (!p.string("csv").empty()) {
    CsvListOptions o;
    o.path_column = p.string("path_column");
    o.id_column = p.string("id_column");
    o.label_column = p.string("label_column");
    o.root = p.string("root");
    return list_csv(p.string("csv"), o);
  }
  return list_directory(p.string("dir"), class_names);
}

// Array::stack, into a pooled buffer (a batch of photos is tens of MB; see uninitialized_array).
Array stack_images(const std::vector<Array>& images) {
  Shape shape = images[0].shape();
  shape.insert(shape.begin(), static_cast<std::int64_t>(images.size()));
  Array out = uninitialized_array(images[0].dtype(), shape);
  auto* dst = static_cast<std::uint8_t*>(out.mutable_raw());
  const std::size_t bytes = images[0].nbytes();
  for (std::size_t i = 0; i < images.size(); ++i) std::memcpy(dst + i * bytes, images[i].raw(), bytes);
  return out;
}

class FilesReader final : public Node {
 public:
  void open(NodeContext& ctx) override {
    ctx_ = &ctx;
    const Params& p = ctx.params();
    std::vector<std::string> class_names;
    entries_ = list_from_params(p, class_names);
    const ClassSet classes = ClassSet::from_params(p);
    const std::int64_t limit = p.integer("limit");
    for (std::size_t i = 0; i < entries_.size(); ++i) select_row(selected_, static_cast<std::int64_t>(i), entries_[i].label, classes, limit);
    decode_.color = p.string("mode") == "color";
    decode_.height = static_cast<int>(p.integer("height"));
    decode_.width = static_cast<int>(p.integer("width"));
    decode_.dct_scaling = p.boolean("dct_scaling");
    decode_.exif_orientation = p.boolean("exif_orientation");
    decode_.max_pixels = static_cast<std::uint64_t>(p.integer("max_pixels"));
    budget_ = std::make_unique<DecodeBudget>(static_cast<std::uint64_t>(p.integer("max_decoding_pixels")));
    decode_.budget = budget_.get();
    skip_bad_ = p.string("on_bad_image") == "skip";
    shuffle_ = p.boolean("shuffle");
    epochs_ = p.integer("epochs");
    batch_ = p.integer("batch_size");
    drop_last_ = p.boolean("drop_last");
    chunk_ = static_cast<std::size_t>(p.integer("chunk"));
    shard_ = std::make_unique<ReaderShard>(p);
    if (!class_names.empty()) {
      std::string names;
      for (std::size_t i = 0; i < class_names.size() && i < 20; ++i) names += (i ? ", " : "") + class_names[i];
      log_info(ctx.id(), entries_.size(), " images in ", class_names.size(), " class directories (", names,
               class_names.size() > 20 ? ", ..." : "", ")");
    }
    const auto k = static_cast<std::int64_t>(selected_.size());
    if (shard_->sharded()) {
      const ParallelPlace& w = shard_->place();
      const RowRange mine = rank_rows(batch_ > 0 ? batch_ : k, w);
      log_info(ctx.id(), "rank ", w.rank, " of ", w.world_size, ": decodes ", mine.last - mine.first,
               batch_ > 0 ? cat(" of each batch of ", batch_) : cat(" of ", k), " images");
    }
    ctx.set_expected_items(shard_->records(k) * static_cast<std::uint64_t>(epochs_));
    t0_ = std::chrono::steady_clock::now();
    start_epoch();
  }

  bool produce(Emitter& out) override {
    if (batch_ > 0 && shard_->sharded()) {
      if (slice_ < plan_.size()) {
        emit_slice(out);
        return true;
      }
    } else if (batch_ == 0) {
      if (fill(1)) {
        emit_record(queue_.front(), out);
        queue_.pop_front();
        return true;
      }
    } else {
      // Unsharded batches are the next B readable images, so a skipped file's place goes to the
      // next one; the table (-1) is every readable image of the rank's share.
      const std::size_t want = batch_ < 0 ? SIZE_MAX : static_cast<std::size_t>(batch_);
      fill(want);
      const bool full = queue_.size() >= want;
      if (!queue_.empty() && (full || !drop_last_)) {
        const std::size_t n = std::min(want, queue_.size());
        emit_batch(n, out, nullptr);
        return true;
      }
      queue_.clear();
    }
    if (++epoch_ >= epochs_) return false;
    start_epoch();
    return true;
  }

  void close(Emitter&) override {
    const double secs = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0_).count();
    log_info(ctx_->id(), "decoded ", decoded_, " images in ", secs, " s", skip_bad_ ? cat("; skipped ", bad_.size(), " unreadable files") : "",
             bad_.empty() ? "" : cat(" (first: ", first_bad_, ")"));
  }

 private:
  struct Decoded {
    std::int64_t entry;
    std::size_t slot;  // its position in todo_
    Array image;
  };

  // The epoch's order, and from it the entries this rank decodes, in emission order: all of them
  // unsharded; the rank's positions of each planned slice sharded (core/reader.hpp), so nothing
  // outside its share is ever opened.
  void start_epoch() {
    order_ = epoch_order(selected_, shuffle_, ctx_->seed(), epoch_);
    todo_.clear();
    slice_end_.clear();
    plan_.clear();
    if (!shard_->sharded()) {
      todo_ = order_;
    } else {
      plan_ = shard_->plan(static_cast<std::int64_t>(order_.size()), epoch_);
      for (const ReaderSlice& s : plan_) {
        todo_.insert(todo_.end(), order_.begin() + s.first, order_.begin() + s.last);
        slice_end_.push_back(todo_.size());
      }
    }
    slice_ = 0;
    next_ = 0;
    queue_.clear();
    epoch_scalar_ = Array::scalar<std::int64_t>(epoch_);
  }

  // Decodes chunks of todo_ until `want` images wait in the queue and the first `slots` entries
  // of todo_ are decoded, or todo_ is exhausted. Returns whether the queue holds an image.
  bool fill(std::size_t want, std::size_t slots = 0) {
    while ((queue_.size() < want || next_ < slots) && next_ < todo_.size()) {
      const std::size_t end = std::min(todo_.size(), next_ + chunk_);
      const std::size_t n = end - next_;
      std::vector<cv::Mat> mats(n);
      std::vector<std::string> errors(n);
      tbb::parallel_for(std::size_t{0}, n, [&](std::size_t i) {
        mats[i] = decode_image(entries_[static_cast<std::size_t>(todo_[next_ + i])].path, decode_, errors[i]);
      });
      for (std::size_t i = 0; i < n; ++i) {
        const std::int64_t e = todo_[next_ + i];
        const ImageEntry& entry = entries_[static_cast<std::size_t>(e)];
        if (mats[i].empty()) {
          // The file, its CSV line and its id: a photo's id is how pairs and triplets name it.
          const std::string where = entry.where == entry.path ? cat(entry.path, " (id ", entry.id, ")")
                                                              : cat(entry.path, " (", entry.where, ", id ", entry.id, ")");
          if (!skip_bad_) throw DataError(cat(where, ": ", errors[i]));
          last_bad_ = cat(where, ": ", errors[i]);
          if (bad_.empty()) first_bad_ = last_bad_;
          bad_.insert(e);
          continue;
        }
        queue_.push_back(Decoded{e, next_ + i, array_from_mat(std::move(mats[i]))});
        ++decoded_;
      }
      next_ = end;
      if (ctx_->stop_requested()) break;
    }
    return !queue_.empty();
  }

  // A sharded batch: this rank's rows of the planned global batch, less the files skipped as
  // unreadable, with unsharded_rows the planned B (no rank knows which of the others' files fail)
  // and, in skip mode, skipped_rows the rank's rows left out.
  void emit_slice(Emitter& out) {
    const ReaderSlice& s = plan_[slice_];
    const std::size_t end = slice_end_[slice_];
    fill(0, end);
    std::size_t n = 0;
    while (n < queue_.size() && queue_[n].slot < end) ++n;
    if (n == 0) {
      if (ctx_->stop_requested()) return;
      const ParallelPlace& w = shard_->place();
      throw DataError(cat("epoch ", epoch_, ", batch ", slice_, ": every file of rank ", w.rank, "'s ", s.last - s.first,
                          " of the batch's ", s.end - s.begin, " images is unreadable, and the other ranks train on the "
                          "batch (last: ", last_bad_, ")"));
    }
    emit_batch(n, out, &s);
    ++slice_;
  }
  void emit_record(const Decoded& d, Emitter& out) {
    const ImageEntry& e = entries_[static_cast<std::size_t>(d.entry)];
    Record r;
    r.set("id", Array::scalar<std::int64_t>(e.id));
    r.set("label", Array::scalar<std::int64_t>(e.label));
    r.set("epoch", epoch_scalar_);
    r.set("image", d.image);
    out.emit(std::move(r));
  }

  // The first n images of the queue as one batch; `sharded`: the planned batch they are a rank's
  // rows of (adds unsharded_rows).
  void emit_batch(std::size_t n, Emitter& out, const ReaderSlice* sharded) {
    std::vector<std::int64_t> ids(n), labels(n);
    std::vector<Array> images(n);
    for (std::size_t i = 0; i < n; ++i) {
      const Decoded& d = queue_[i];
      const ImageEntry& e = entries_[static_cast<std::size_t>(d.entry)];
      ids[i] = e.id;
      labels[i] = e.label;
      images[i] = d.image;
      if (d.image.shape() != images[0].shape()) {
        const ImageEntry& e0 = entries_[static_cast<std::size_t>(queue_[0].entry)];
        throw DataError(cat(e.path, " is ", shape_str(d.image.shape()), " but ", e0.path, " in the same batch is ",
                            shape_str(images[0].shape()), "; set height and width to resize"));
      }
    }
    const auto b = static_cast<std::int64_t>(n);
    Record r;
    r.set("id", Array::from_vector<std::int64_t>({b}, std::move(ids)));
    r.set("label", Array::from_vector<std::int64_t>({b}, std::move(labels)));
    r.set("epoch", Array::from_vector<std::int64_t>({b}, std::vector<std::int64_t>(n, epoch_)));
    r.set("image", stack_images(images));
    if (sharded) r.set("unsharded_rows", ReaderShard::unsharded_rows(b, *sharded));
    if (sharded && skip_bad_)
      r.set("skipped_rows", Array::from_vector<std::int64_t>({b}, std::vector<std::int64_t>(n, sharded->last - sharded->first - b)));
    queue_.erase(queue_.begin(), queue_.begin() + static_cast<std::ptrdiff_t>(n));
    out.emit(std::move(r));
  }

  NodeContext* ctx_ = nullptr;
  std::vector<ImageEntry> entries_;
  std::vector<std::int64_t> selected_, order_;
  std::vector<std::int64_t> todo_;       // the entries this rank decodes this epoch, in emission order
  std::unique_ptr<ReaderShard> shard_;   // which positions of each epoch this rank emits
  std::vector<ReaderSlice> plan_;        // sharded: the epoch's records
  std::vector<std::size_t> slice_end_;   // sharded: where each record's entries end in todo_
  std::size_t slice_ = 0;
  DecodeOptions decode_;
  std::unique_ptr<DecodeBudget> budget_;  // pixels decoding at once, across the parallel decodes
  bool skip_bad_ = false, shuffle_ = false, drop_last_ = false;
  std::int64_t epochs_ = 1, epoch_ = 0, batch_ = 0;
  std::size_t chunk_ = 256, next_ = 0;
  std::deque<Decoded> queue_;
  Array epoch_scalar_;
  std::set<std::int64_t> bad_;
  std::string first_bad_, last_bad_;
  std::uint64_t decoded_ = 0;
  std::chrono::steady_clock::time_point t0_;
};

}  // namespace

Param max_pixels_param() {
  return Param::integer("max_pixels").default_value(kDefaultMaxPixels).range(1, std::int64_t{1} << 40)
      .doc("largest width x height a file's header may declare; larger files are refused before decoding "
           "(an error naming the file, or skipped with on_bad_image: skip)");
}

Param exif_orientation_param() {
  return Param::boolean("exif_orientation").default_value(true)
      .doc("turn each photo upright as its EXIF Orientation tag says (JPEG APP1 or PNG eXIf), before any resize, "
           "as PIL's ImageOps.exif_transpose does; false: pixels as stored");
}

Param max_decoding_pixels_param() {
  return Param::integer("max_decoding_pixels").default_value(kDefaultMaxPixels).range(1, std::int64_t{1} << 40)
      .not_fingerprinted()
      .doc("header pixels of the files decoding at once, summed; a decode waits until it fits (one file "
           "always may start), so parallel decodes of large files take turns");
}

NodeType files_reader_type() {
  NodeTypeBuilder b("image.files_reader");
  b.deterministic("shuffle")
      .doc("Decodes image files listed in a CSV column or a dir/<class>/<image> tree (OpenCV; grey or RGB; optional "
           "resize); bad files are errors naming the file, or skipped and counted; shards by rank (shard_world_size).")
      .example(
          "nodes:\n"
          "  photos: {type: image.files_reader, params: {dir: tests/image/data/tiny, mode: grey, height: 32, width: 32}}\n"
          "  count:  {type: core.sink, params: {mode: count}}\n"
          "edges: [photos.out -> count.in]\n")
      .source()
      .param(Param::path("csv").default_value("").doc("CSV list of images (header row; see path_column, id_column, label_column)"))
      .param(Param::path("dir").default_value("").doc("directory tree dir/<class>/<image>; used when csv is empty"))
      .param(Param::string("path_column").default_value("path").doc("CSV column holding image paths"))
      .param(Param::string("id_column").default_value("auto")
                 .doc("CSV column holding integer ids; auto: 'id' when present, else the row index; empty: the row index"))
      .param(Param::string("label_column").default_value("auto")
                 .doc("CSV column holding integer labels; auto: 'label' when present, else -1; empty: -1"))
      .param(Param::path("root").default_value("").doc("prefix for relative CSV paths; empty: the CSV file's directory"))
      .param(Param::choice("mode", {"grey", "color"}).default_value("grey").doc("grey: 1 channel; color: 3 channels in RGB order"))
      .param(Param::integer("height").default_value(0).range(0, 65536).doc("> 0 (with width): resize every image to this height"))
      .param(Param::integer("width").default_value(0).range(0, 65536).doc("> 0 (with height): resize every image to this width"))
      .param(Param::boolean("dct_scaling").default_value(true)
                 .doc("JPEG with height/width: decode at 1/2, 1/4 or 1/8 in the DCT domain when that still covers the size"))
      .param(classes_param())
      .param(Param::integer("limit").default_value(0).min(0).doc("keep the first N selected images (list order); 0: all"))
      .param(Param::boolean("shuffle").default_value(false).doc("permute the images each epoch (seeded by node seed and epoch)"))
      .param(Param::integer("epochs").default_value(1).min(1).doc("passes over the list; records carry their epoch"))
      .param(Param::integer("batch_size").default_value(0).min(-1)
                 .doc("0: one record per image; N: batches of N; -1: one record with every image (a table for side ports)"))
      .param(Param::boolean("drop_last").default_value(false).doc("drop each epoch's final partial batch"))
      .param(Param::choice("on_bad_image", {"error", "skip"}).default_value("error")
                 .doc("error: a missing or undecodable file stops the run naming it; skip: skip it, count logged at the end"))
      .param(max_pixels_param())
      .param(exif_orientation_param())
      .param(max_decoding_pixels_param())
      .param(Param::integer("chunk").default_value(256).range(1, 1 << 20).not_fingerprinted()
                 .doc("images decoded ahead in parallel"));
  add_shard_params(b);
  return b.output("out", "id: i64, label: i64, epoch: i64, image: u8", "decoded images with ids, labels and epochs")
      .check([](SchemaContext& c) {
        const Params& p = c.params();
        check_classes(c);
        if (p.string("csv").empty() == p.string("dir").empty()) c.error("give exactly one of csv and dir", "csv");
        if ((p.integer("height") > 0) != (p.integer("width") > 0)) c.error("height and width go together", "height");
        check_reader_batching(c);
        c.set_output("out", reader_schema(p, p.integer("height"), p.integer("width"), p.string("mode") == "color" ? 3 : 1));
      })
      .create<FilesReader>();
}

}  // namespace embedflow::image
