#include "core/reader.hpp"

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

void check_reader_batching(SchemaContext& c) {
  const Params& p = c.params();
  if (p.integer("batch_size") < 0 && p.integer("epochs") > 1)
    c.error("batch_size -1 (one table record) takes epochs: 1; the batchers own epochs", "epochs");
  if (p.boolean("drop_last") && p.integer("batch_size") <= 0) c.error("drop_last needs batch_size > 0", "drop_last");
}

PortSchema reader_schema(const Params& p, std::int64_t height, std::int64_t width, std::int64_t channels, bool sharded) {
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
  return s;
}

}  // namespace embedflow::image
