// core.shard — data-parallel input sharding: passes this rank's rows [B r / W, B (r+1) / W) of
// every batch, and adds `unsharded_rows: i64[rows]` holding B.
//
// Why: with torch.train's world_size > 1 every rank runs the same graph and so reads the same
// batches; without a shard each rank also decodes and augments the whole batch and the trainer
// slices out its rows at the end. A core.shard right after the reader (or batcher) makes each
// rank augment only the rows it trains on. torch.train recognises the `unsharded_rows` field:
// it trains on the batch as it comes, weights the rank's loss by rows / B, and checks that the
// ranks' rows add up to B (a shard whose world does not match the trainer's is a located error,
// not a silent 1/W² of the data). The rows are the same ones the trainer would have sliced, so a
// sharded run takes the same steps as an unsharded data-parallel run.
//
// Inputs: in (batches: every field with the same leading dimension B >= W)   Outputs: out
//
//   nodes:
//     data:  {type: io.hdf5_reader, params: {path: pairs.h5, batch_size: 256, shuffle: true}}
//     shard: {type: core.shard}                      # WORLD_SIZE and RANK from the environment
//     aug:   {type: image.augment, params: {...}}
//     train: {type: torch.train, params: {world_size: 0, ...}}
//   edges: [data.out -> shard.in, shard.out -> aug.in, aug.out -> train.in]
#include "core_types.hpp"

namespace embedflow::core {
namespace {

class Shard final : public Node {
 public:
  void open(NodeContext& ctx) override {
    // The SDK's reading of world_size / rank (and WORLD_SIZE / RANK), the one torch.train uses.
    place_ = resolve_parallel_place(ctx.params().integer("world_size"), ctx.params().integer("rank"));
  }

  void process(std::size_t, const RecordPtr& in, Emitter& out) override {
    const std::int64_t index = out.sequence();
    if (in->find("unsharded_rows"))
      throw DataError(cat("record ", index, " was sharded already (it has 'unsharded_rows'): one core.shard per stream"));
    std::int64_t rows = 0;
    try {
      rows = in->batch_size();
    } catch (const DataError& e) {
      throw DataError(cat("record ", index, ": core.shard splits batches, and ", e.what()));
    }
    if (rows < place_.world_size)
      throw DataError(cat("record ", index, " has ", rows, " rows, fewer than the ", place_.world_size, " ranks it is shared among"));
    const RowRange mine = rank_rows(rows, place_);  // the rows torch.train would slice
    const std::int64_t n = mine.last - mine.first;
    Record r;
    for (const auto& [name, array] : in->fields()) r.set(name, array.slice(mine.first, mine.last));  // views, nothing copied
    r.set("unsharded_rows", Array::from_vector<std::int64_t>({n}, std::vector<std::int64_t>(static_cast<std::size_t>(n), rows)));
    out.emit(std::move(r));
  }

 private:
  ParallelPlace place_;
};

}  // namespace

NodeType shard_type() {
  return NodeTypeBuilder("core.shard")
      .doc("Data-parallel input sharding: passes rank r's rows [B r/W, B (r+1)/W) of each batch and adds "
           "unsharded_rows (B), which torch.train reads to weight and check the ranks' shares.")
      .param(Param::integer("world_size").default_value(0).min(0).doc(
          "ranks W; 0: the WORLD_SIZE environment variable (torchrun's), 1 if unset"))
      .param(Param::integer("rank").default_value(-1).min(-1).doc("this rank r in [0, W); -1: the RANK environment variable, 0 if unset"))
      .input("in", "*", "batches (every field with the same leading dimension)")
      .output("out", "*", "this rank's rows of each batch, plus unsharded_rows: i64[rows]")
      .check([](SchemaContext& c) {
        PortSchema s = c.input("in");
        if (s.is_any()) return;
        if (s.find("unsharded_rows")) c.error("the input was sharded already (it has 'unsharded_rows'): one core.shard per stream");
        s.add(PortSchema::parse("unsharded_rows: i64[B]").fields().front());
        c.set_output("out", s);
      })
      .example("shard: {type: core.shard, params: {world_size: 2, rank: 0}}")
      .create<Shard>();
}

}  // namespace embedflow::core
