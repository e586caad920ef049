// crowd.grid_reader — reads crowd clustering annotations (worker w clustered the S images of grid
// g; CSV or JSON, formats in core/annotations.hpp and docs/crowd.md) and streams their pair
// labels: each grid annotation yields (S^2 - S)/2 pairs (w, g, i, j, l), l = 1 when the worker
// put images i and j in the same cluster. With a split, only the train or the test part is read;
// the parts are grid-disjoint (split_by: grid) or worker- and grid-disjoint (split_by: worker),
// and the test part is made of whole grids.
//
// Outputs: out — pair batches {worker, grid, a_id, b_id: i64[B], pair_label: f32[B],
//                epoch: i64[B]} (+ members: i64[B,S] with with_members); scalars with
//                batch_size 0. a_id/b_id/pair_label are the torch contract's pair-batch names.
//          grids — one record, emitted first: the split's distinct grids {grid: i64[G],
//                members: i64[G,S]} (image ids in the first annotation's order), for a context
//                encoder's S-hot grid vectors (a side port).
//          annotations — one record, emitted first: the split's annotations {worker, grid:
//                i64[N], members, clusters: i64[N,S]} (clusters -1 = unassigned), for
//                per-submission evaluation.
// Caveats: the whole file and the split's pair index (8 bytes a pair) are held in memory.
// Pairs with an unassigned image are skipped (logged). The split depends only on the ids,
// split_seed and the fractions, so a train and a test reader with the same split parameters
// are complementary whatever their node ids; shuffle uses the node seed and the epoch.
// To join images by id, names: sampler emits image.pair_join's input names (anchor, other,
// label i64); pair_join then emits a_id, b_id, a_image, b_image, pair_label (docs/crowd.md).
// names: ids adds a_image, b_image: f32[B] holding the image ids themselves, the input of an
// embedding-table image encoder (crowd.cen, crowd.id_table): torch.train and its losses read
// model inputs from the image fields, and f32 holds ids below 2^24 exactly.
//
//   nodes:
//     train: {type: crowd.grid_reader, params: {path: tests/crowd/data/tiny.csv, grid_size: 4, split: train,
//                                               test_fraction: 0.25, batch_size: 4}}
//     show:  {type: core.sink, params: {mode: print}}
//   edges: [train.out -> show.in]
#include <algorithm>
#include <filesystem>
#include <map>

#include "core/annotations.hpp"
#include "core/split.hpp"
#include "crowd_types.hpp"

namespace embedflow::crowd {
namespace {

SplitOptions split_options(const Params& p) {
  SplitOptions o;
  const std::string& part = p.string("split");
  o.part = part == "train" ? SplitPart::train : part == "test" ? SplitPart::test : SplitPart::all;
  o.by = p.string("split_by") == "worker" ? SplitBy::worker : SplitBy::grid;
  o.test_fraction = p.number("test_fraction");
  o.train_fraction = p.number("train_fraction");
  o.seed = static_cast<std::uint64_t>(p.integer("split_seed"));
  return o;
}

class GridReader final : public Node {
 public:
  void open(NodeContext& ctx) override {
    ctx_ = &ctx;
    const Params& p = ctx.params();
    set_ = read_annotations(p.string("path"), parse_format(p.string("format")), p.integer("grid_size"));
    const SplitResult split = split_annotations(set_, split_options(p));
    selected_ = split.selected;
    pairs_ = expand_pairs(set_, selected_);
    batch_ = p.integer("batch_size");
    drop_last_ = p.boolean("drop_last");
    shuffle_ = p.boolean("shuffle");
    shuffle_submissions_ = p.string("shuffle_unit") == "submission";
    epochs_ = p.integer("epochs");
    with_members_ = p.boolean("with_members");
    sampler_names_ = p.string("names") == "sampler";
    id_images_ = p.string("names") == "ids";

    std::int64_t positives = 0;
    for (const PairRef& r : pairs_) positives += same_cluster(set_.annotations[r.annotation], r) ? 1 : 0;
    const std::int64_t s = set_.grid_size;
    const auto full = static_cast<std::int64_t>(selected_.size()) * (s * (s - 1) / 2);
    const std::int64_t unassigned = full - static_cast<std::int64_t>(pairs_.size());
    std::string part = p.string("split");
    if (part != "all")
      part = cat(part, " split by ", p.string("split_by"), " (", split.test_grids, " of ", split.grids, " grids",
                 p.string("split_by") == "worker" ? cat(", ", split.test_workers, " of ", split.workers, " workers") : "",
                 " held out for test",
                 split.dropped ? cat("; ", split.dropped, " annotations by train workers on test grids left out") : "",
                 part == "train" && split.kept_train_grids < split.train_grids
                     ? cat("; train_fraction keeps ", split.kept_train_grids, " of ", split.train_grids, " train grids")
                     : "",
                 ")");
    log_info(ctx.id(), set_.file, ": ", set_.annotations.size(), " annotations of ", split.grids, " grids (S = ", s, ") by ",
             split.workers, " workers; ", part, ": ", selected_.size(), " annotations, ", pairs_.size(), " pairs, ",
             pairs_.empty() ? 0.0 : static_cast<double>(positives) / static_cast<double>(pairs_.size()), " positive",
             unassigned ? cat("; ", unassigned, " pairs with an unassigned image skipped") : "");
    if (selected_.empty()) log_warning(ctx.id(), "the ", p.string("split"), " split is empty");

    const auto n = static_cast<std::uint64_t>(pairs_.size());
    const std::uint64_t per_epoch =
        batch_ == 0 ? n : drop_last_ ? n / static_cast<std::uint64_t>(batch_) : (n + static_cast<std::uint64_t>(batch_) - 1) / static_cast<std::uint64_t>(batch_);
    ctx.set_expected_items(per_epoch * static_cast<std::uint64_t>(epochs_) + 2);
    start_epoch();
  }

  bool produce(Emitter& out) override {
    if (!tables_sent_) {
      // Tables first, so consumers that take them on side ports have them before any pair.
      tables_sent_ = true;
      out.emit(1, grids_table());
      out.emit(2, annotations_table());
      return true;
    }
    for (;;) {
      if (ctx_->stop_requested()) return false;
      const std::size_t left = pairs_.size() - next_;
      const std::size_t want = batch_ == 0 ? 1 : static_cast<std::size_t>(batch_);
      if (left > 0 && (left >= want || !drop_last_)) {
        emit_pairs(std::min(want, left), out);
        return true;
      }
      if (++epoch_ >= epochs_) return false;
      start_epoch();
    }
  }

 private:
  void start_epoch() {
    next_ = 0;
    if (!shuffle_) return;
    // Fisher-Yates with raw mt19937_64 draws: std::uniform_int_distribution is
    // implementation-defined, and a seed must give the same order on every platform.
    Rng rng(derive_seed(ctx_->seed(), static_cast<std::uint64_t>(epoch_)));
    if (shuffle_submissions_) {
      // Permute the submissions and keep each one's pairs together, in their order: a batch of
      // whole submissions holds few distinct images (24 per grid), which a pixel encoder that
      // embeds each distinct image once (crowd.cen, crowd.unique) turns into a ~20x cheaper step.
      std::vector<std::size_t> order(selected_.size());
      for (std::size_t i = 0; i < order.size(); ++i) order[i] = i;
      for (std::size_t i = order.size(); i > 1; --i) std::swap(order[i - 1], order[rng() % i]);
      std::map<std::size_t, std::size_t> rank;
      for (std::size_t i = 0; i < order.size(); ++i) rank[selected_[order[i]]] = i;
      std::stable_sort(pairs_.begin(), pairs_.end(),
                       [&](const PairRef& a, const PairRef& b) { return rank.at(a.annotation) < rank.at(b.annotation); });
      return;
    }
    for (std::size_t i = pairs_.size(); i > 1; --i) std::swap(pairs_[i - 1], pairs_[rng() % i]);
  }

  void emit_pairs(std::size_t n, Emitter& out) {
    const auto b = static_cast<std::int64_t>(n);
    const auto s = static_cast<std::size_t>(set_.grid_size);
    std::vector<std::int64_t> worker(n), grid(n), a(n), bb(n), members;
    std::vector<float> label(n);
    std::vector<std::int64_t> label_int;
    if (sampler_names_) label_int.resize(n);
    if (with_members_) members.resize(n * s);
    for (std::size_t k = 0; k < n; ++k) {
      const PairRef& r = pairs_[next_ + k];
      const Annotation& ann = set_.annotations[r.annotation];
      worker[k] = ann.worker;
      grid[k] = ann.grid;
      a[k] = ann.images[r.p];
      bb[k] = ann.images[r.q];
      label[k] = same_cluster(ann, r) ? 1.0f : 0.0f;
      if (sampler_names_) label_int[k] = same_cluster(ann, r) ? 1 : 0;
      if (with_members_) std::copy(ann.images.begin(), ann.images.end(), members.begin() + static_cast<std::ptrdiff_t>(k * s));
    }
    next_ += n;
    Record r;
    auto put = [&](const char* name, Array arr) { r.set(name, batch_ == 0 ? arr.row(0) : arr); };
    put("worker", Array::from_vector<std::int64_t>({b}, std::move(worker)));
    put("grid", Array::from_vector<std::int64_t>({b}, std::move(grid)));
    put(sampler_names_ ? "anchor" : "a_id", Array::from_vector<std::int64_t>({b}, std::move(a)));
    put(sampler_names_ ? "other" : "b_id", Array::from_vector<std::int64_t>({b}, std::move(bb)));
    if (sampler_names_) put("label", Array::from_vector<std::int64_t>({b}, std::move(label_int)));
    else put("pair_label", Array::from_vector<float>({b}, std::move(label)));
    put("epoch", Array::from_vector<std::int64_t>({b}, std::vector<std::int64_t>(n, epoch_)));
    if (with_members_) put("members", Array::from_vector<std::int64_t>({b, set_.grid_size}, std::move(members)));
    if (id_images_) {
      for (const char* role : {"a", "b"}) {
        const Array& ids = r.get(cat(role, "_id"));
        std::vector<float> f(n);
        for (std::size_t k = 0; k < n; ++k) f[k] = static_cast<float>(ids.as_int(static_cast<std::int64_t>(k)));
        put(cat(role, "_image").c_str(), Array::from_vector<float>({b}, std::move(f)));
      }
    }
    out.emit(0, std::move(r));
  }

  Record grids_table() const {
    std::vector<std::int64_t> grid, members;
    // The first annotation of each grid, in order of appearance.
    std::vector<std::pair<std::int64_t, std::size_t>> by_grid;
    for (std::size_t i : selected_) by_grid.emplace_back(set_.annotations[i].grid, i);
    std::stable_sort(by_grid.begin(), by_grid.end(), [](const auto& x, const auto& y) { return x.first < y.first; });
    std::vector<std::size_t> first;
    for (std::size_t k = 0; k < by_grid.size(); ++k)
      if (k == 0 || by_grid[k].first != by_grid[k - 1].first) first.push_back(by_grid[k].second);
    std::sort(first.begin(), first.end());
    for (std::size_t i : first) {
      const Annotation& a = set_.annotations[i];
      grid.push_back(a.grid);
      members.insert(members.end(), a.images.begin(), a.images.end());
    }
    const auto g = static_cast<std::int64_t>(grid.size());
    Record r;
    r.set("grid", Array::from_vector<std::int64_t>({g}, std::move(grid)));
    r.set("members", Array::from_vector<std::int64_t>({g, set_.grid_size}, std::move(members)));
    return r;
  }

  Record annotations_table() const {
    std::vector<std::int64_t> worker, grid, members, clusters;
    for (std::size_t i : selected_) {
      const Annotation& a = set_.annotations[i];
      worker.push_back(a.worker);
      grid.push_back(a.grid);
      members.insert(members.end(), a.images.begin(), a.images.end());
      clusters.insert(clusters.end(), a.clusters.begin(), a.clusters.end());
    }
    const auto n = static_cast<std::int64_t>(worker.size());
    Record r;
    r.set("worker", Array::from_vector<std::int64_t>({n}, std::move(worker)));
    r.set("grid", Array::from_vector<std::int64_t>({n}, std::move(grid)));
    r.set("members", Array::from_vector<std::int64_t>({n, set_.grid_size}, std::move(members)));
    r.set("clusters", Array::from_vector<std::int64_t>({n, set_.grid_size}, std::move(clusters)));
    return r;
  }

  NodeContext* ctx_ = nullptr;
  AnnotationSet set_;
  std::vector<std::size_t> selected_;
  std::vector<PairRef> pairs_;
  std::int64_t batch_ = 256, epochs_ = 1, epoch_ = 0;
  std::size_t next_ = 0;
  bool drop_last_ = false, shuffle_ = false, with_members_ = false, sampler_names_ = false, id_images_ = false,
       shuffle_submissions_ = false,
       tables_sent_ = false;
};

}  // namespace

NodeType grid_reader_type() {
  return NodeTypeBuilder("crowd.grid_reader")
      .doc("Reads crowd grid clusterings (worker, grid, image ids, cluster per image; CSV or JSON) into pair-label "
           "batches (worker, grid, a_id, b_id, pair_label), with seeded grid- or worker-disjoint train/test splits "
           "and the split's grids as a table.")
      .example(
          "nodes:\n"
          "  train: {type: crowd.grid_reader, params: {path: tests/crowd/data/tiny.csv, grid_size: 4, split: train,\n"
          "                                            test_fraction: 0.25, batch_size: 4}}\n"
          "  show:  {type: core.sink, params: {mode: print}}\n"
          "edges: [train.out -> show.in]\n")
      .source()
      .param(Param::path("path").doc("annotation file: CSV (worker,grid,image,cluster rows) or JSON ({annotations: [...]})"))
      .param(Param::choice("format", {"auto", "csv", "json"}).default_value("auto").doc("file format; auto: json for *.json, else csv"))
      .param(Param::integer("grid_size").default_value(24).range(0, 65536)
                 .doc("images per grid S (every annotation must have S); 0: take S from the file (output dim S stays symbolic)"))
      .param(Param::choice("split", {"all", "train", "test"}).default_value("all").doc("which part to read"))
      .param(Param::choice("split_by", {"grid", "worker"}).default_value("grid")
                 .doc("grid: test = whole held-out grids; worker: test = held-out workers' annotations (their grids are "
                      "kept out of train too)"))
      .param(Param::number("test_fraction").default_value(0.15).range(0.0, 1.0)
                 .doc("fraction of grids (split_by grid) or workers (split_by worker) in the test part"))
      .param(Param::integer("split_seed").default_value(0).min(0)
                 .doc("seed of the split; independent of the graph seed so train and test readers agree"))
      .param(Param::number("train_fraction").default_value(1.0).range(0.0, 1.0)
                 .doc("split train only: keep this fraction of the train grids (nested: smaller fractions keep subsets), "
                      "for accuracy-against-data curves"))
      .param(Param::integer("batch_size").default_value(256).min(0).doc("pairs per batch; 0: one record per pair"))
      .param(Param::boolean("drop_last").default_value(false).doc("drop each epoch's final partial batch"))
      .param(Param::boolean("shuffle").default_value(false)
                 .doc("permute all the split's pairs each epoch (seeded by node seed and epoch); false: file order"))
      .param(Param::choice("shuffle_unit", {"pair", "submission"}).default_value("pair")
                 .doc("what shuffle permutes: pair = every pair of the split; submission = the submissions, each "
                      "one's pairs kept together (batches of few distinct images, for pixel encoders)"))
      .param(Param::integer("epochs").default_value(1).min(1).doc("passes over the pairs; records carry their epoch"))
      .param(Param::choice("names", {"contract", "sampler", "ids"}).default_value("contract")
                 .doc("pair field names: contract = a_id, b_id, pair_label f32 (the torch pair batches); sampler = "
                      "anchor, other, label i64 (geo.pair_sampler's, which image.pair_join takes); ids = contract "
                      "plus a_image, b_image f32 holding the ids (model input of an embedding-table image encoder)"))
      .param(Param::boolean("with_members").default_value(false)
                 .doc("add members: i64[B,S], each pair's grid images, to the pair batches"))
      .output("out", "worker: i64, grid: i64, a_id: i64, b_id: i64, pair_label: f32, epoch: i64", "pair-label batches")
      .output("grids", "grid: i64[G], members: i64[G,S]", "one record, first: the split's grids and their image ids")
      .output("annotations", "worker: i64[N], grid: i64[N], members: i64[N,S], clusters: i64[N,S]",
              "one record, first: the split's annotations (clusters -1 = unassigned)")
      .check([](SchemaContext& c) {
        const Params& p = c.params();
        if (p.number("train_fraction") < 1.0 && p.string("split") != "train")
          c.error("train_fraction applies to split: train only", "train_fraction");
        if (p.number("train_fraction") <= 0.0) c.error("train_fraction must be > 0", "train_fraction");
        if (p.string("split") != "all" && p.number("test_fraction") <= 0.0)
          c.error(cat("split: ", p.string("split"), " needs test_fraction > 0"), "test_fraction");
        if (p.boolean("drop_last") && p.integer("batch_size") == 0) c.error("drop_last needs batch_size > 0", "drop_last");
        const std::string& path = p.string("path");
        std::error_code ec;
        if (!std::filesystem::is_regular_file(path, ec)) c.error(cat(path, ": no such annotation file"), "path");
        const std::int64_t b = p.integer("batch_size");
        const std::int64_t s = p.integer("grid_size");
        const Dim S = s > 0 ? Dim{Dim::Kind::fixed, s, ""} : Dim{Dim::Kind::symbol, -1, "S"};
        std::vector<Dim> lead;
        if (b > 0) lead.push_back(p.boolean("drop_last") ? Dim{Dim::Kind::fixed, b, ""} : Dim{Dim::Kind::symbol, -1, "B"});
        PortSchema out;
        const bool sampler = p.string("names") == "sampler";
        for (const char* f : {"worker", "grid", sampler ? "anchor" : "a_id", sampler ? "other" : "b_id"})
          out.add(FieldSchema{f, DType::i64, lead});
        out.add(sampler ? FieldSchema{"label", DType::i64, lead} : FieldSchema{"pair_label", DType::f32, lead});
        out.add(FieldSchema{"epoch", DType::i64, lead});
        if (p.string("names") == "ids") {
          out.add(FieldSchema{"a_image", DType::f32, lead});
          out.add(FieldSchema{"b_image", DType::f32, lead});
        }
        if (p.boolean("with_members")) {
          std::vector<Dim> m = lead;
          m.push_back(S);
          out.add(FieldSchema{"members", DType::i64, m});
        }
        c.set_output("out", out);
        const Dim G{Dim::Kind::symbol, -1, "G"}, N{Dim::Kind::symbol, -1, "N"};
        PortSchema grids;
        grids.add(FieldSchema{"grid", DType::i64, std::vector<Dim>{G}});
        grids.add(FieldSchema{"members", DType::i64, std::vector<Dim>{G, S}});
        c.set_output("grids", grids);
        PortSchema anns;
        anns.add(FieldSchema{"worker", DType::i64, std::vector<Dim>{N}});
        anns.add(FieldSchema{"grid", DType::i64, std::vector<Dim>{N}});
        anns.add(FieldSchema{"members", DType::i64, std::vector<Dim>{N, S}});
        anns.add(FieldSchema{"clusters", DType::i64, std::vector<Dim>{N, S}});
        c.set_output("annotations", anns);
      })
      .create<GridReader>();
}

}  // namespace embedflow::crowd
