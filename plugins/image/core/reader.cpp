#include "core/reader.hpp"

#include <algorithm>

#include "core/arrays.hpp"

namespace embedflow::image {

void select_row(std::vector<std::int64_t>& selected, std::int64_t row, std::int64_t label, const ClassSet& classes,
                std::int64_t limit) {
  if (classes.contains(label) && (limit == 0 || static_cast<std::int64_t>(selected.size()) < limit)) selected.push_back(row);
}

std::vector<std::int64_t> epoch_order(const std::vector<std::int64_t>& selected, bool shuffle, std::uint64_t node_seed,
                                      std::int64_t epoch) {
  std::vector<std::int64_t> order = selected;
  if (shuffle) {
    Rng rng(derive_seed(node_seed, static_cast<std::uint64_t>(epoch)));
    shuffle_in_place(order, rng);
  }
  return order;
}

ReaderShard::ReaderShard(const Params& p)
    : place_(shard_place(p)), sharded_(p.integer("shard_world_size") != 1), drop_last_(p.boolean("drop_last")),
      batch_(p.integer("batch_size")) {}

std::vector<ReaderSlice> ReaderShard::plan(std::int64_t n, std::int64_t epoch) const {
  std::vector<ReaderSlice> slices;
  if (batch_ <= 0) {
    const RowRange mine = rank_rows(n, place_);
    slices.push_back(ReaderSlice{0, n, mine.first, mine.last});
    return slices;
  }
  for (std::int64_t begin = 0; begin < n; begin += batch_) {
    const std::int64_t end = std::min(n, begin + batch_), rows = end - begin;
    if (rows < batch_ && drop_last_) break;
    if (!sharded_) {
      slices.push_back(ReaderSlice{begin, end, begin, end});
      continue;
    }
    const auto index = static_cast<std::int64_t>(slices.size());
    if (rows < place_.world_size)
      throw DataError(cat("epoch ", epoch, ", batch ", index, ": a batch of ", rows, " images",
                          end == n ? cat(" (the last of ", n, ")") : std::string(), " is fewer than the ",
                          place_.world_size, " ranks sharing it; ",
                          end == n && rows < batch_ ? "set drop_last: true" : "raise batch_size"));
    const RowRange mine = rank_rows(rows, place_);  // the rows core.shard would pass
    slices.push_back(ReaderSlice{begin, end, begin + mine.first, begin + mine.last});
  }
  return slices;
}

std::uint64_t ReaderShard::records(std::int64_t n) const {
  if (batch_ < 0) return 1;
  if (batch_ == 0) {
    const RowRange mine = rank_rows(n, place_);
    return static_cast<std::uint64_t>(mine.last - mine.first);
  }
  return static_cast<std::uint64_t>(drop_last_ ? n / batch_ : (n + batch_ - 1) / batch_);
}

Array ReaderShard::unsharded_rows(std::int64_t rows, const ReaderSlice& s) {
  return Array::from_vector<std::int64_t>({rows}, std::vector<std::int64_t>(static_cast<std::size_t>(rows), s.end - s.begin));
}

void check_reader_batching(SchemaContext& c) {
  const Params& p = c.params();
  if (p.integer("batch_size") < 0 && p.integer("epochs") > 1)
    c.error("batch_size -1 (one table record) takes epochs: 1; the batchers own epochs", "epochs");
  if (p.boolean("drop_last") && p.integer("batch_size") <= 0) c.error("drop_last needs batch_size > 0", "drop_last");
  // A world from WORLD_SIZE (0) is only known when the run starts: plan() checks every batch then.
  const std::int64_t world = p.integer("shard_world_size"), batch = p.integer("batch_size");
  if (batch > 0 && world > batch)
    c.error(cat("batch_size ", batch, " is smaller than shard_world_size ", world, ": every rank needs a row of each batch"),
            "batch_size");
}

PortSchema reader_schema(const Params& p, std::int64_t height, std::int64_t width, std::int64_t channels) {
  const bool sharded = p.integer("shard_world_size") != 1;
  const std::int64_t b = p.integer("batch_size");
  std::vector<Dim> lead;
  if (b != 0) lead.push_back(b > 0 && p.boolean("drop_last") && !sharded ? Dim{Dim::Kind::fixed, b, ""} : Dim{Dim::Kind::symbol, -1, b < 0 ? "N" : "B"});
  auto dims = [&](std::vector<Dim> inner) {
    std::vector<Dim> d = lead;
    d.insert(d.end(), inner.begin(), inner.end());
    return d;
  };
  PortSchema s;
  s.add(FieldSchema{"id", DType::i64, dims({})});
  s.add(FieldSchema{"label", DType::i64, dims({})});
  s.add(FieldSchema{"epoch", DType::i64, dims({})});
  const Dim h = height > 0 ? Dim{Dim::Kind::fixed, height, ""} : Dim{Dim::Kind::symbol, -1, "H"};
  const Dim w = width > 0 ? Dim{Dim::Kind::fixed, width, ""} : Dim{Dim::Kind::symbol, -1, "W"};
  s.add(FieldSchema{"image", DType::u8, dims({h, w, Dim{Dim::Kind::fixed, channels, ""}})});
  if (sharded && b > 0) s.add(FieldSchema{"unsharded_rows", DType::i64, dims({})});
  if (sharded && b > 0 && p.has("on_bad_image") && p.string("on_bad_image") == "skip")
    s.add(FieldSchema{"skipped_rows", DType::i64, dims({})});
  return s;
}

}  // namespace embedflow::image
