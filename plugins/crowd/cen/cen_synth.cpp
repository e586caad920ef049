// crowd.cen_synthesize — grid synthesis with a trained CEN's context encoder (the paper's Fig. 10):
// samples many random grids of S distinct images, computes each grid's softmax(a^g) and keeps,
// for each embedding dimension, the grids whose distribution peaks on that dimension with the
// lowest entropy: grids that highlight one attribute. Writes them as image mosaics.
//
// Inputs:  images — optional: one record with every image, id [N] and image u8[N,H,W,C] (RGB or
//                   grey; io.hdf5_reader on gen_crowd's images.h5 + image.collect), for the
//                   mosaics; its ids are also the pool the grids are drawn from;
//          model — side port: a torch.train snapshot of a crowd.cen with a context encoder.
// Outputs: grids — one record at the end: dimension i64[M], entropy f64[M], probability f64[M]
//                  (softmax(a^g) at the dimension), peak i64[M] (its argmax), members i64[M,S]:
//                  `keep` grids per dimension, lowest entropy first among the grids peaking on
//                  it; when none does, the grids with the highest probability there (logged);
//                  sampled_probability f64[M], the probability before refinement.
// Refinement (refine_steps > 0): random grids almost always vary in every attribute, so even the
// best of many peaks weakly. Each kept grid then climbs: per step, refine_batch random swaps (one
// member for one image outside the grid) are scored in one batch and the best is taken if it
// raises the probability at the dimension; the paper sampled ten million grids instead.
// Files:   <out>dim<k>.png per kept dimension (the best grid, rows x cols thumbnails), when out
//          is set and images are given.
// Caveats: without an images input the pool is ids 0..context_images-1. Sampling is seeded by the
// node seed.
#include <opencv2/imgcodecs.hpp>
#include <opencv2/imgproc.hpp>

#include <embedflow/atomic_file.hpp>

#include <filesystem>
#include <numeric>
#include <set>

#include "bridge.hpp"
#include "catalog.hpp"
#include "cen.hpp"
#include "crowd_types.hpp"

namespace embedflow::crowd {
using namespace torchfam;
namespace {

class CenSynthesize final : public Node {
 public:
  void open(NodeContext& ctx) override { ctx_ = &ctx; }
  void on_side(std::size_t, const RecordPtr& snapshot, Emitter&) override { snapshot_ = snapshot; }
  void process(std::size_t, const RecordPtr& r, Emitter&) override { images_ = r; }

  void close(Emitter& out) override {
    if (!snapshot_) throw DataError("the side port `model` ended without a snapshot");
    const Params& p = ctx_->params();
    set_torch_threads(p.integer("threads"), ctx_->threads(), ctx_->id());
    torch::NoGradGuard no_grad;
    const std::string what = cat("model snapshot of step ", snapshot_->get("step").as_int(0));
    auto model = build_model(spec_from_text(snapshot_->get("spec").string_at(0)), ctx_->seed(), cat("node '", ctx_->id(), "' model"),
                             ctx_->registry());
    auto* cen = dynamic_cast<CenModel*>(model.get());
    if (!cen || !cen->uses_context())
      throw DataError(cat(what, ": grid synthesis needs a crowd.cen with a context encoder (variant context or mixture)"));
    if (cen->has_table()) model->prepare(torch::zeros({1}));
    else throw DataError(cat(what, ": grid synthesis supports id-table CENs only"));
    torch::serialize::InputArchive a;
    const Array& w = snapshot_->get("weights");
    load_archive(a, w.raw(), static_cast<std::size_t>(w.nbytes()), what);
    read_model_state(*model, a, what);
    model->set_training(false);

    // The pool of image ids.
    std::vector<std::int64_t> pool;
    std::map<std::int64_t, std::int64_t> row_of;
    if (images_) {
      const Array& id = images_->get("id");
      for (std::int64_t i = 0; i < id.numel(); ++i) {
        if (id.as_int(i) < cen->context_images()) pool.push_back(id.as_int(i));
        row_of[id.as_int(i)] = i;
      }
    } else {
      pool.resize(static_cast<std::size_t>(cen->context_images()));
      std::iota(pool.begin(), pool.end(), 0);
    }
    const std::int64_t s = p.integer("rows") * p.integer("cols"), g = p.integer("grids"), keep = p.integer("keep");
    if (static_cast<std::int64_t>(pool.size()) < s) throw DataError(cat("the pool has ", pool.size(), " images, fewer than S = ", s));
    // Partial Fisher-Yates per grid with the node's RNG (seeded by graph seed and node id).
    Rng& rng = ctx_->rng();
    torch::Tensor members = torch::empty({g, s}, torch::kInt64);
    auto acc = members.accessor<std::int64_t, 2>();
    std::vector<std::int64_t> work = pool;
    for (std::int64_t k = 0; k < g; ++k)
      for (std::int64_t j = 0; j < s; ++j) {
        const std::size_t pick = static_cast<std::size_t>(j) + static_cast<std::size_t>(rng() % (work.size() - static_cast<std::size_t>(j)));
        std::swap(work[static_cast<std::size_t>(j)], work[pick]);
        acc[k][j] = work[static_cast<std::size_t>(j)];
      }
    // softmax(a^g) of grids [B,S].
    auto distribution = [&](const torch::Tensor& grids) { return torch::softmax(cen->context_activation(grids), 1); };
    torch::Tensor prob = distribution(members);
    torch::Tensor entropy = -(prob * torch::log(prob.clamp_min(1e-30))).sum(1);
    torch::Tensor peak = prob.argmax(1);

    std::vector<std::int64_t> dims = p.integers("dimensions");
    if (dims.empty()) {
      dims.resize(static_cast<std::size_t>(cen->dim()));
      std::iota(dims.begin(), dims.end(), 0);
    }
    const std::int64_t steps = p.integer("refine_steps"), batch = p.integer("refine_batch");
    auto refine = [&](std::vector<std::int64_t> grid, std::int64_t d) {
      std::set<std::int64_t> in(grid.begin(), grid.end());
      double best = distribution(torch::tensor(grid).unsqueeze(0))[0][d].item<double>();
      for (std::int64_t step = 0; step < steps; ++step) {
        torch::Tensor cand = torch::tensor(grid).unsqueeze(0).repeat({batch, 1});
        auto c = cand.accessor<std::int64_t, 2>();
        for (std::int64_t b = 0; b < batch; ++b) {
          std::int64_t img;
          do img = pool[static_cast<std::size_t>(rng() % pool.size())];
          while (in.count(img));
          c[b][static_cast<std::int64_t>(rng() % static_cast<std::uint64_t>(s))] = img;
        }
        torch::Tensor q = distribution(cand).select(1, d);
        const std::int64_t b = q.argmax().item<std::int64_t>();
        if (q[b].item<double>() <= best) continue;
        best = q[b].item<double>();
        for (std::int64_t j = 0; j < s; ++j)
          if (c[b][j] != grid[static_cast<std::size_t>(j)]) {
            in.erase(grid[static_cast<std::size_t>(j)]);
            in.insert(c[b][j]);
            grid[static_cast<std::size_t>(j)] = c[b][j];
          }
      }
      return grid;
    };
    if (steps > 0 && static_cast<std::int64_t>(pool.size()) == s)
      throw DataError(cat("refinement needs images outside the grid, but the pool has exactly S = ", s));
    std::vector<std::int64_t> out_dim, out_members;
    std::vector<double> out_entropy, out_prob, out_sampled;
    std::vector<std::int64_t> out_peak;
    for (std::int64_t d : dims) {
      if (d < 0 || d >= cen->dim()) throw ConfigError(cat("dimensions: ", d, " is outside 0..", cen->dim() - 1));
      torch::Tensor idx = (peak == d).nonzero().flatten();
      torch::Tensor order;
      if (idx.numel() == 0) {
        // No grid peaks here: fall back to the grids giving this dimension the most probability.
        log_info(ctx_->id(), "no sampled grid peaks on dimension ", d, "; keeping the grids with the highest p(", d, ")");
        idx = torch::arange(g, torch::kInt64);
        order = prob.select(1, d).argsort(0, /*descending=*/true);
      } else {
        order = entropy.index_select(0, idx).argsort();
      }
      for (std::int64_t k = 0; k < std::min<std::int64_t>(keep, idx.numel()); ++k) {
        const std::int64_t row = idx[order[k].item<std::int64_t>()].item<std::int64_t>();
        std::vector<std::int64_t> grid(static_cast<std::size_t>(s));
        for (std::int64_t j = 0; j < s; ++j) grid[static_cast<std::size_t>(j)] = acc[row][j];
        if (steps > 0) grid = refine(std::move(grid), d);
        torch::Tensor q = distribution(torch::tensor(grid).unsqueeze(0))[0];
        out_dim.push_back(d);
        out_entropy.push_back(-(q * torch::log(q.clamp_min(1e-30))).sum().item<double>());
        out_prob.push_back(q[d].item<double>());
        out_sampled.push_back(prob[row][d].item<double>());
        out_peak.push_back(q.argmax().item<std::int64_t>());
        out_members.insert(out_members.end(), grid.begin(), grid.end());
        if (k == 0 && images_ && !p.string("out").empty()) write_mosaic(p, d, grid, row_of, s);
      }
    }
    Record r;
    const auto m = static_cast<std::int64_t>(out_dim.size());
    r.set("dimension", Array::from_vector<std::int64_t>({m}, std::move(out_dim)));
    r.set("entropy", Array::from_vector<double>({m}, std::move(out_entropy)));
    r.set("probability", Array::from_vector<double>({m}, std::move(out_prob)));
    r.set("peak", Array::from_vector<std::int64_t>({m}, std::move(out_peak)));
    r.set("sampled_probability", Array::from_vector<double>({m}, std::move(out_sampled)));
    r.set("members", Array::from_vector<std::int64_t>({m, s}, std::move(out_members)));
    out.emit(0, std::move(r));
  }

 private:
  void write_mosaic(const Params& p, std::int64_t d, const std::vector<std::int64_t>& row, const std::map<std::int64_t, std::int64_t>& row_of, std::int64_t s) {
    const Array& img = images_->get(p.string("image_field"));
    if (img.dtype() != DType::u8 || img.rank() < 3)
      throw DataError(cat("mosaics need u8 images [N,H,W,C], got ", images_->describe()));
    const std::int64_t h = img.shape()[1], wd = img.shape()[2], c = img.rank() == 4 ? img.shape()[3] : 1;
    const int gap = 2, rows = static_cast<int>(p.integer("rows")), cols = static_cast<int>(p.integer("cols"));
    const int scale = static_cast<int>(p.integer("scale"));
    const int th = static_cast<int>(h) * scale, tw = static_cast<int>(wd) * scale;
    cv::Mat canvas(rows * (th + gap) + gap, cols * (tw + gap) + gap, CV_8UC3, cv::Scalar(128, 128, 128));
    const auto* base = static_cast<const std::uint8_t*>(img.raw());
    for (std::int64_t j = 0; j < s; ++j) {
      auto it = row_of.find(row[static_cast<std::size_t>(j)]);
      if (it == row_of.end()) continue;
      cv::Mat tile(static_cast<int>(h), static_cast<int>(wd), c == 3 ? CV_8UC3 : CV_8UC1,
                   const_cast<std::uint8_t*>(base + it->second * h * wd * c));
      cv::Mat bgr, big;
      if (c == 3) cv::cvtColor(tile, bgr, cv::COLOR_RGB2BGR);
      else cv::cvtColor(tile, bgr, cv::COLOR_GRAY2BGR);
      cv::resize(bgr, big, cv::Size(tw, th), 0, 0, cv::INTER_NEAREST);
      const int r0 = static_cast<int>(j / cols), c0 = static_cast<int>(j % cols);
      big.copyTo(canvas(cv::Rect(gap + c0 * (tw + gap), gap + r0 * (th + gap), tw, th)));
    }
    const std::string path = cat(p.string("out"), "dim", d, ".png");
    std::filesystem::path parent = std::filesystem::path(path).parent_path();
    if (!parent.empty()) std::filesystem::create_directories(parent);
    std::vector<unsigned char> png;
    if (!cv::imencode(".png", canvas, png)) throw DataError(cat("cannot encode ", path));
    write_file_atomic(path, std::string_view(reinterpret_cast<const char*>(png.data()), png.size()));
  }

  NodeContext* ctx_ = nullptr;
  RecordPtr snapshot_, images_;
};

}  // namespace

NodeType cen_synthesize_type() {
  return NodeTypeBuilder("crowd.cen_synthesize")
      .doc("Grid synthesis (the CEN paper's Fig. 10): samples random grids, and per embedding dimension keeps those "
           "whose softmax(a^g) peaks there with the lowest entropy; writes them as image mosaics <out>dim<k>.png.")
      .param(Param::integer("grids").default_value(20000).min(1).doc("random grids to sample"))
      .param(Param::integer("rows").default_value(4).min(1).doc("grid rows (S = rows x cols images)"))
      .param(Param::integer("cols").default_value(6).min(1).doc("grid columns"))
      .param(Param::integer("refine_steps").default_value(0).min(0).doc(
          "hill-climbing steps per kept grid (0: the sampled grids as they are, the paper's method)"))
      .param(Param::integer("refine_batch").default_value(64).min(1).doc("random single-member swaps scored per refinement step"))
      .param(Param::integer("keep").default_value(3).min(1).doc("grids kept per dimension (lowest entropy first)"))
      .param(Param::integers("dimensions").default_value(std::vector<std::int64_t>{}).doc(
          "embedding dimensions to synthesise grids for (the attribute's dimension); empty: all"))
      .param(Param::path("out").default_value("").not_fingerprinted().doc("mosaic path prefix, e.g. out/cen/synth_; empty: no files"))
      .param(Param::string("image_field").default_value("image").doc("image field of the images record"))
      .param(Param::integer("scale").default_value(2).min(1).doc("pixel repetition in the mosaics"))
      .param(Param::integer("threads").default_value(0).min(0).not_fingerprinted().doc("LibTorch intra-op threads; 0: --threads"))
      .optional_input("images", "id: i64[N]", "one record with every image (id, image u8[N,H,W,C]): the pool and the thumbnails")
      .side_input("model", "weights: u8[N], spec: str[1], step: i64[1], epoch: i64[1]", "torch.train's crowd.cen snapshot")
      .output("grids", "dimension: i64[M], entropy: f64[M], probability: f64[M], peak: i64[M], members: i64[M,S], sampled_probability: f64[M]",
              "the kept grids")
      .create<CenSynthesize>();
}

}  // namespace embedflow::crowd
