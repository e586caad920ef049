// image.idx_reader — streams Fashion-MNIST (or MNIST) from its IDX .gz files: by default the
// Debian dataset-fashion-mnist files in /usr/share/datasets/fashion-mnist, split train (60k) or
// test (10k). Records carry id (the image's index in its file, plus id_offset), label, epoch and
// image u8 [28,28,1] (HWC, grey), zero-copy views of one decompressed buffer.
//
// Outputs: out — per image {id: i64[], label: i64[], epoch: i64[], image: u8[H,W,1]};
//          with batch_size N > 0, batches of N ([B] / [B,H,W,1]); with batch_size -1, one
//          record holding the whole (filtered) split: the table that image.class_batches,
//          image.pk_batches and the joins take on their side ports.
// Caveats: the file is decompressed into memory in open() (47 MB for train; with `limit` and
// no `classes`, only the first `limit` images are read). `classes` keeps labels (e.g. "0-4");
// `limit` then keeps the first N kept images in file order; `shuffle` permutes them per epoch
// (seeded from the node seed and the epoch). A truncated or corrupt file is a DataError naming
// the file and the first incomplete record.
// Sharding (shard_world_size W, shard_rank r; off by default): the epoch's order and its batches
// are the unsharded ones, and rank r emits rows rank_rows(B) of every batch (B >= W, a located
// error otherwise) with `unsharded_rows` B, exactly what core.shard after the reader would pass,
// so torch.train weights and checks the shares the same way and every rank takes the same number
// of steps; only the rank's rows are copied out. Per record (batch_size 0) and as one table
// (-1), rank r takes positions rank_rows(N) of the epoch's order (counts differ by at most one).
// The plan is core/reader.hpp's ReaderShard, which image.files_reader shares. The IDX file is
// gzip, read whole either way.
//
//   nodes:
//     train: {type: image.idx_reader, params: {split: train, classes: "0-4", limit: 1000}}
//     count: {type: core.sink, params: {mode: count, expect: 1000}}
//   edges: [train.out -> count.in]
#include <chrono>
#include <filesystem>
#include <memory>
#include <numeric>

#include "core/arrays.hpp"
#include "core/classes.hpp"
#include "core/idx.hpp"
#include "core/reader.hpp"
#include "image_types.hpp"

namespace embedflow::image {
namespace {

namespace fs = std::filesystem;

struct IdxPaths {
  std::string images, labels;
};

IdxPaths idx_paths(const Params& p) {
  const std::string split = p.string("split") == "test" ? "t10k" : "train";
  IdxPaths out;
  out.images = p.string("images").empty() ? (fs::path(p.string("dir")) / (split + "-images-idx3-ubyte.gz")).string()
                                          : p.string("images");
  out.labels = p.string("labels").empty() ? (fs::path(p.string("dir")) / (split + "-labels-idx1-ubyte.gz")).string()
                                          : p.string("labels");
  return out;
}

class IdxReader final : public Node {
 public:
  void open(NodeContext& ctx) override {
    ctx_ = &ctx;
    const Params& p = ctx.params();
    const auto t0 = std::chrono::steady_clock::now();
    const IdxPaths paths = idx_paths(p);
    const ClassSet classes = ClassSet::from_params(p);
    const std::int64_t limit = p.integer("limit");
    // Without a class filter the first `limit` images are all we need.
    const std::int64_t max_records = classes.all() && limit > 0 ? limit : -1;
    IdxData images = read_idx(paths.images, 3, max_records);
    IdxData labels = read_idx(paths.labels, 1, max_records);
    if (images.count != labels.count)
      throw DataError(cat(paths.images, " holds ", images.count, " images but ", paths.labels, " holds ", labels.count, " labels"));
    const std::int64_t n = images.data.dim(0);
    const std::uint8_t* lab = labels.data.data<std::uint8_t>();
    const std::int64_t offset = p.integer("id_offset");
    std::vector<std::int64_t> ids(static_cast<std::size_t>(n)), labs(static_cast<std::size_t>(n));
    for (std::int64_t i = 0; i < n; ++i) {
      ids[static_cast<std::size_t>(i)] = i + offset;
      labs[static_cast<std::size_t>(i)] = lab[i];
      select_row(selected_, i, lab[i], classes, limit);
    }
    images_ = images.data;
    ids_ = Array::from_vector<std::int64_t>({n}, std::move(ids));
    labels_ = Array::from_vector<std::int64_t>({n}, std::move(labs));
    shuffle_ = p.boolean("shuffle");
    epochs_ = p.integer("epochs");
    batch_ = p.integer("batch_size");
    shard_ = std::make_unique<ReaderShard>(p);
    const auto k = static_cast<std::int64_t>(selected_.size());
    contiguous_ = !selected_.empty() && selected_.back() - selected_.front() + 1 == k;
    ctx.set_expected_items(shard_->records(k) * static_cast<std::uint64_t>(epochs_));
    const double secs = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    log_info(ctx.id(), "read ", n, " of ", images.count, " images ", images.rows, "x", images.cols, " from ", paths.images,
             " in ", secs, " s; ", k, " selected (classes ", classes.str(), limit ? cat(", limit ", limit) : "", ")");
    start_epoch();
  }

  bool produce(Emitter& out) override {
    if (slice_ >= plan_.size()) {
      if (++epoch_ >= epochs_) return false;
      start_epoch();
      return true;
    }
    const ReaderSlice& s = plan_[slice_];
    if (batch_ == 0) {  // one record per position of this rank's slice
      if (pos_ >= s.last) {
        ++slice_;
        return true;
      }
      const std::int64_t i = order_[static_cast<std::size_t>(pos_++)];
      Record r;
      r.set("id", ids_.row(i));
      r.set("label", labels_.row(i));
      r.set("epoch", epoch_scalar_);
      r.set("image", images_.row(i));
      out.emit(std::move(r));
      return true;
    }
    emit_rows(s, out);
    ++slice_;
    return true;
  }

 private:
  void start_epoch() {
    order_ = epoch_order(selected_, shuffle_, ctx_->seed(), epoch_);
    plan_ = shard_->plan(static_cast<std::int64_t>(order_.size()), epoch_);  // this rank's records (core/reader.hpp)
    slice_ = 0;
    pos_ = plan_.empty() ? 0 : plan_.front().first;
    epoch_scalar_ = Array::scalar<std::int64_t>(epoch_);
  }

  // This rank's rows of slice s, positions [first, last) of the epoch's order; a sharded batch
  // adds unsharded_rows (the batch's B).
  void emit_rows(const ReaderSlice& s, Emitter& out) {
    const std::int64_t begin = s.first, end = s.last, n = end - begin;
    Record r;
    if (!shuffle_ && contiguous_) {  // file order: views of the decompressed buffer
      const std::int64_t first = order_[static_cast<std::size_t>(begin)];
      r.set("id", ids_.slice(first, first + n));
      r.set("label", labels_.slice(first, first + n));
      r.set("epoch", Array::from_vector<std::int64_t>({n}, std::vector<std::int64_t>(static_cast<std::size_t>(n), epoch_)));
      r.set("image", images_.slice(first, first + n));
    } else {
      std::vector<std::int64_t> rows(order_.begin() + begin, order_.begin() + end);
      r.set("id", take_rows(ids_, rows));
      r.set("label", take_rows(labels_, rows));
      r.set("epoch", Array::from_vector<std::int64_t>({n}, std::vector<std::int64_t>(static_cast<std::size_t>(n), epoch_)));
      r.set("image", take_rows(images_, rows));
    }
    if (shard_->sharded() && batch_ > 0) r.set("unsharded_rows", ReaderShard::unsharded_rows(n, s));
    out.emit(std::move(r));
  }

  NodeContext* ctx_ = nullptr;
  Array images_, ids_, labels_, epoch_scalar_;
  std::vector<std::int64_t> selected_, order_;
  bool shuffle_ = false, contiguous_ = false;
  std::int64_t epochs_ = 1, epoch_ = 0, batch_ = 0, pos_ = 0;
  std::unique_ptr<ReaderShard> shard_;  // which positions of each epoch this rank emits
  std::vector<ReaderSlice> plan_;       // the epoch's records
  std::size_t slice_ = 0;
};

}  // namespace

NodeType idx_reader_type() {
  NodeTypeBuilder b("image.idx_reader");
  b
      .doc("Streams Fashion-MNIST / MNIST IDX (.gz) images with labels: per image, in batches, or as one table record; "
           "class filter, limit, seeded shuffle, epochs.")
      .example(
          "nodes:\n"
          "  train: {type: image.idx_reader, params: {split: train, classes: \"0-4\", limit: 1000}}\n"
          "  count: {type: core.sink, params: {mode: count, expect: 1000}}\n"
          "edges: [train.out -> count.in]\n")
      .source()
      .param(Param::choice("split", {"train", "test"}).default_value("train")
                 .doc("train (train-*-ubyte.gz, 60k images) or test (t10k-*-ubyte.gz, 10k)"))
      .param(Param::path("dir").default_value("/usr/share/datasets/fashion-mnist")
                 .doc("directory holding the four IDX .gz files (Debian's dataset-fashion-mnist)"))
      .param(Param::path("images").default_value("").doc("explicit image IDX file (.gz or plain); overrides dir/split"))
      .param(Param::path("labels").default_value("").doc("explicit label IDX file (.gz or plain); overrides dir/split"))
      .param(classes_param(" (e.g. \"0-4\" to train on the first five classes)"))
      .param(Param::integer("limit").default_value(0).min(0).doc("keep the first N selected images (file order); 0: all"))
      .param(Param::boolean("shuffle").default_value(false).doc("permute the images each epoch (seeded by node seed and epoch)"))
      .param(Param::integer("epochs").default_value(1).min(1).doc("passes over the data; records carry their epoch"))
      .param(Param::integer("batch_size").default_value(0).min(-1)
                 .doc("0: one record per image; N: batches of N; -1: one record with every image (a table for side ports)"))
      .param(Param::boolean("drop_last").default_value(false).doc("drop each epoch's final partial batch"))
      .param(Param::integer("id_offset").default_value(0).doc("added to the file index to form ids (e.g. 60000 for test ids after train's)"));
  add_shard_params(b);
  return b.output("out", "id: i64, label: i64, epoch: i64, image: u8", "images with ids, labels and epochs")
      .check([](SchemaContext& c) {
        const Params& p = c.params();
        check_classes(c);
        check_reader_batching(c);
        std::int64_t rows = -1, cols = -1;
        const IdxPaths paths = idx_paths(p);
        try {
          IdxData head = read_idx(paths.images, 3, 0);
          rows = head.rows;
          cols = head.cols;
          read_idx(paths.labels, 1, 0);
        } catch (const Error& e) {
          c.error(e.what(), p.string("images").empty() ? "dir" : "images");
        }
        c.set_output("out", reader_schema(p, rows, cols, 1));
      })
      .create<IdxReader>();
}

}  // namespace embedflow::image
