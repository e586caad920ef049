// io.hdf5_reader — streams a dataset or a group of an HDF5 file as records or batches. Reads our
// stream files (a port group: records replay as written, batches keep their sizes) and plain
// files written by h5py (a group of datasets sharing their first dimension, or one dataset, whose
// field is named after it). Reads are large slabs with prefetch on a background thread.
//
// Outputs: out — the selected fields; without batch_size, one record per row (fields without
//          the leading axis) or per stored record; with batch_size, batches [B, ...].
// Caveats: start/stop count rows, except when replaying a stream file's stored batches
//          (batch_size 0), where they count records. Shuffling is chunk-aware: blocks of whole
//          HDF5 chunks are visited in random order and rows are shuffled within windows of
//          `shuffle_window` rows (default about 16 MiB), so it is a local shuffle, not a
//          uniform permutation of a file larger than the window. Each epoch reshuffles with a
//          seed from the graph seed, the node id and the epoch. Dtypes map to the nearest
//          embedflow dtype (i16 -> i32, u32 -> i64, f16 -> f32); compound types are refused.
//          Relative paths are relative to the working directory.
// Sharding (shard_world_size W, shard_rank r; off by default): every rank walks the unsharded epoch
//          (same rows, same seeded shuffle, same batches) and reads and emits only its share,
//          through the SDK's rank_rows. With batch_size B, rank r emits rows rank_rows(n) of every
//          batch of n rows plus `unsharded_rows: i64[rows]` holding n, exactly what core.shard
//          after the reader would pass, so torch.train scales the shares correctly and every rank
//          takes the same number of steps; a batch of fewer than W rows that drop_last does not
//          drop is an error naming the epoch and the batch. Replaying a stream file's stored
//          batches (batch_size 0) splits each stored batch the same way (one of fewer than W rows
//          is an error; a port that already has `unsharded_rows` is refused). Per row (batch_size 0
//          on rows), rank r takes positions rank_rows(N) of the epoch's order. A world of one
//          (shard_world_size 0 without a launcher) emits every row, with unsharded_rows as the
//          schema declares. Only the share is read (hdf5::ReadOptions): without shuffle a rank's
//          part of a batch is one contiguous hyperslab; shuffled, a rank reads its rows of each
//          window in ascending runs, only the chunks holding them of a deflated column (whole: HDF5
//          decompresses whole chunks), and copies only its rows from the file mapping. Ranks whose
//          rows share a chunk or a page both read it: for rows much smaller than a chunk (deflated)
//          or a page (uncompressed) a shuffled rank reads more than 1/W of the bytes.
//
// Example (reads the file that the io.hdf5_writer example writes):
//   nodes:
//     read: {type: io.hdf5_reader, params: {path: out/numbers.h5, fields: [index, value], batch_size: 64, shuffle: true}}
//     show: {type: core.sink, params: {mode: print}}
//   edges: [read.out -> show.in]
#include <embedflow/hdf5/stream_file.hpp>

#include "io_types.hpp"

namespace embedflow::io {
namespace {

hdf5::ReadOptions read_options(const Params& p) {
  hdf5::ReadOptions o;
  o.fields = p.strings("fields");
  o.batch_size = p.integer("batch_size");
  o.drop_last = p.boolean("drop_last");
  o.start = p.integer("start");
  o.stop = p.integer("stop");
  o.shuffle = p.boolean("shuffle");
  o.shuffle_window = p.integer("shuffle_window");
  o.prefetch = p.boolean("prefetch");
  // Sharded whenever asked (shard_world_size != 1), even when the world read from the
  // environment is 1: the schema then promised unsharded_rows.
  if (p.integer("shard_world_size") != 1) {
    const ParallelPlace place = shard_place(p);
    o.shard_world_size = place.world_size;
    o.shard_rank = place.rank;
  }
  return o;
}

hdf5::Table open_from_params(const Params& p) {
  return hdf5::open_table(p.string("path"), p.string("object"), p.strings("fields"));
}

// The output schema the file implies: fields, dtypes and shapes, batched or not.
PortSchema schema_of(const hdf5::Table& t, const Params& p) {
  const std::int64_t batch = p.integer("batch_size");
  bool stored_batches = batch == 0 && t.has_records() && t.layout() == hdf5::Layout::batches;
  const bool sharded = p.integer("shard_world_size") != 1;
  PortSchema s;
  std::vector<std::string> names = p.strings("fields");
  if (names.empty())
    for (const auto& f : t.fields()) names.push_back(f.name);
  for (const auto& name : names) {
    const hdf5::FieldInfo& f = t.field(name);
    std::vector<Dim> dims;
    if (stored_batches || batch > 0) {
      // A rank's share of a batch varies by a row between ranks.
      if (batch > 0 && p.boolean("drop_last") && !sharded) dims.push_back(Dim{Dim::Kind::fixed, batch, ""});
      else dims.push_back(Dim{Dim::Kind::symbol, -1, "B"});
    }
    for (auto d : f.inner) dims.push_back(Dim{Dim::Kind::fixed, d, ""});
    s.add(FieldSchema{name, f.dtype, dims});
  }
  // Sharded batches carry their unsharded size, as core.shard's do.
  if (sharded && (stored_batches || batch > 0) && std::find(names.begin(), names.end(), "unsharded_rows") != names.end())
    throw ConfigError(cat(t.path().string(), ": '", t.object(), "' has a field 'unsharded_rows' (its batches were sharded "
                          "already); leave it out of fields or read it unsharded"));
  if (sharded && (stored_batches || batch > 0)) s.add(PortSchema::parse("unsharded_rows: i64[B]").fields().front());
  return s;
}

class Hdf5Reader final : public Node {
 public:
  void open(NodeContext& ctx) override {
    ctx_ = &ctx;
    table_ = std::make_unique<hdf5::Table>(open_from_params(ctx.params()));
    options_ = read_options(ctx.params());
    epochs_ = ctx.params().integer("epochs");
    start_epoch();
    ctx.set_expected_items(static_cast<std::uint64_t>(cursor_->units() * epochs_));
  }

  bool produce(Emitter& out) override {
    for (;;) {
      if (ctx_->stop_requested()) return false;
      if (RecordPtr r = cursor_->next()) {
        out.emit(std::move(r));
        return true;
      }
      if (++epoch_ >= epochs_) return false;
      start_epoch();
    }
  }

 private:
  void start_epoch() {
    hdf5::ReadOptions o = options_;
    o.seed = derive_seed(ctx_->seed(), static_cast<std::uint64_t>(epoch_));
    try {
      cursor_ = std::make_unique<hdf5::Cursor>(table_->cursor(o));
    } catch (const DataError& e) {  // a batch too small to share among the ranks
      throw DataError(cat("epoch ", epoch_, ": ", e.what()));
    }
  }

  NodeContext* ctx_ = nullptr;
  std::unique_ptr<hdf5::Table> table_;
  std::unique_ptr<hdf5::Cursor> cursor_;
  hdf5::ReadOptions options_;
  std::int64_t epochs_ = 1, epoch_ = 0;
};

}  // namespace

NodeType hdf5_reader_type() {
  NodeTypeBuilder b("io.hdf5_reader");
  b.deterministic("shuffle")
      .doc("Streams a dataset or group of an HDF5 file (embedflow stream files and h5py files) as records or "
           "batches, with field selection, slicing and seeded chunk-aware shuffling.")
      .source()
      .param(Param::path("path").doc("HDF5 file to read"))
      .param(Param::string("object").default_value("").doc(
          "group or dataset inside the file; empty: the only port of a stream file, else the root group"))
      .param(Param::strings("fields").default_value(std::vector<std::string>{}).doc("datasets to emit, in this order; empty: all"))
      .param(Param::integer("batch_size").default_value(0).min(0).doc(
          "rows per batch; 0: one record per row, or per stored record of a stream file"))
      .param(Param::boolean("drop_last").default_value(false).doc("drop the final partial batch"))
      .param(Param::integer("start").default_value(0).min(0).doc("first row (or stored record) to read"))
      .param(Param::integer("stop").default_value(-1).min(-1).doc("row (or stored record) to stop before; -1: the end"))
      .param(Param::boolean("shuffle").default_value(false).doc("chunk-aware seeded shuffle (block order, then rows within a window)"))
      .param(Param::integer("shuffle_window").default_value(0).min(0).doc("rows shuffled together; 0: about 16 MiB of rows"))
      .param(Param::integer("epochs").default_value(1).min(1).doc("passes over the data, reshuffled each time"))
      .param(Param::boolean("prefetch").default_value(true).not_fingerprinted().doc("read the next slab on a background thread"));
  add_shard_params(b);
  return b.output("out", "*", "the selected fields, per row, per stored record or per batch (sharded batches add unsharded_rows)")
      .check([](SchemaContext& c) {
        const Params& p = c.params();
        if (p.integer("stop") >= 0 && p.integer("stop") < p.integer("start")) {
          c.error("stop must be -1 or >= start", "stop");
          return;
        }
        if (p.boolean("drop_last") && p.integer("batch_size") == 0) c.error("drop_last needs batch_size > 0", "drop_last");
        try {
          shard_place(p);
        } catch (const ConfigError& e) {
          c.error(e.what(), "shard_rank");
        }
        try {
          hdf5::Table t = open_from_params(p);
          c.set_output("out", schema_of(t, p));
        } catch (const Error& e) {
          c.error(e.what(), "path");
        }
      })
      .example("read: {type: io.hdf5_reader, params: {path: out/numbers.h5, fields: [index, value], batch_size: 64, shuffle: true}}")
      .create<Hdf5Reader>();
}

}  // namespace embedflow::io
