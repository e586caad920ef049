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
#include <opencv2/imgproc.hpp>

#include <embedflow/plot/png.hpp>

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

// Random grids of S distinct pool images scored by the context encoder, and the hill climb that
// swaps images in to raise one dimension's probability. Draws come from the node's RNG in a
// fixed order, so a seed gives the same grids.
struct GridSynth {
  CenModel& cen;
  const std::vector<std::int64_t>& pool;
  std::int64_t s, steps, batch;
  Rng& rng;

  // softmax(a^g) of grids [B,S].
  torch::Tensor distribution(const torch::Tensor& grids) const { return torch::softmax(cen.context_activation(grids), 1); }

  // g grids [g,S]: a partial Fisher-Yates per grid.
  torch::Tensor sample(std::int64_t g) {
    torch::Tensor members = torch::empty({g, s}, torch::kInt64);
    auto acc = members.accessor<std::int64_t, 2>();
    std::vector<std::int64_t> work = pool;
    for (std::int64_t k = 0; k < g; ++k)
      for (std::int64_t j = 0; j < s; ++j) {
        const std::size_t pick = static_cast<std::size_t>(j) + static_cast<std::size_t>(rng() % (work.size() - static_cast<std::size_t>(j)));
        std::swap(work[static_cast<std::size_t>(j)], work[pick]);
        acc[k][j] = work[static_cast<std::size_t>(j)];
      }
    return members;
  }

  std::vector<std::int64_t> refine(std::vector<std::int64_t> grid, std::int64_t d) {
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
  }
};

// The sampled grids and what the encoder says of each: its distribution, entropy and peak.
struct SampledGrids {
  torch::Tensor members, prob, entropy, peak;
};

// The kept grids, one row each, as the output record's columns.
struct KeptGrids {
  std::vector<std::int64_t> dim, members, peak;
  std::vector<double> entropy, prob, sampled;
  Record record(std::int64_t s) {
    Record r;
    const auto m = static_cast<std::int64_t>(dim.size());
    r.set("dimension", Array::from_vector<std::int64_t>({m}, std::move(dim)));
    r.set("entropy", Array::from_vector<double>({m}, std::move(entropy)));
    r.set("probability", Array::from_vector<double>({m}, std::move(prob)));
    r.set("peak", Array::from_vector<std::int64_t>({m}, std::move(peak)));
    r.set("sampled_probability", Array::from_vector<double>({m}, std::move(sampled)));
    r.set("members", Array::from_vector<std::int64_t>({m, s}, std::move(members)));
    return r;
  }
};

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
    std::unique_ptr<Model> model = load_model();
    CenModel& cen = dynamic_cast<CenModel&>(*model);
    std::map<std::int64_t, std::int64_t> row_of;
    const std::vector<std::int64_t> pool = image_pool(cen, row_of);
    const std::int64_t s = p.integer("rows") * p.integer("cols"), g = p.integer("grids");
    if (static_cast<std::int64_t>(pool.size()) < s) throw DataError(cat("the pool has ", pool.size(), " images, fewer than S = ", s));
    GridSynth synth{cen, pool, s, p.integer("refine_steps"), p.integer("refine_batch"), ctx_->rng()};
    SampledGrids sampled;
    sampled.members = synth.sample(g);
    sampled.prob = synth.distribution(sampled.members);
    sampled.entropy = -(sampled.prob * torch::log(sampled.prob.clamp_min(1e-30))).sum(1);
    sampled.peak = sampled.prob.argmax(1);
    std::vector<std::int64_t> dims = p.integers("dimensions");
    if (dims.empty()) {
      dims.resize(static_cast<std::size_t>(cen.dim()));
      std::iota(dims.begin(), dims.end(), 0);
    }
    if (synth.steps > 0 && static_cast<std::int64_t>(pool.size()) == s)
      throw DataError(cat("refinement needs images outside the grid, but the pool has exactly S = ", s));
    KeptGrids kept;
    for (std::int64_t d : dims) {
      if (d < 0 || d >= cen.dim()) throw ConfigError(cat("dimensions: ", d, " is outside 0..", cen.dim() - 1));
      keep_grids(p, synth, sampled, d, row_of, kept);
    }
    out.emit(0, kept.record(s));
  }

 private:
  // The snapshot's model, which must be an id-table crowd.cen with a context encoder.
  std::unique_ptr<Model> load_model() {
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
    return model;
  }

  // The pool of image ids: the images input's (those the context encoder knows), else every id
  // it knows. `row_of` maps an id to its row in the images record.
  std::vector<std::int64_t> image_pool(const CenModel& cen, std::map<std::int64_t, std::int64_t>& row_of) const {
    std::vector<std::int64_t> pool;
    if (images_) {
      const Array& id = images_->get("id");
      for (std::int64_t i = 0; i < id.numel(); ++i) {
        if (id.as_int(i) < cen.context_images()) pool.push_back(id.as_int(i));
        row_of[id.as_int(i)] = i;
      }
    } else {
      pool.resize(static_cast<std::size_t>(cen.context_images()));
      std::iota(pool.begin(), pool.end(), 0);
    }
    return pool;
  }

  // Dimension d's `keep` grids: lowest entropy first among those peaking on d, else (logged) the
  // highest probability at d; each refined when asked, the first drawn as a mosaic.
  void keep_grids(const Params& p, GridSynth& synth, const SampledGrids& sampled, std::int64_t d,
                  const std::map<std::int64_t, std::int64_t>& row_of, KeptGrids& kept) {
    const std::int64_t s = synth.s, keep = p.integer("keep");
    auto acc = sampled.members.accessor<std::int64_t, 2>();
    torch::Tensor idx = (sampled.peak == d).nonzero().flatten();
    torch::Tensor order;
    if (idx.numel() == 0) {
      // No grid peaks here: fall back to the grids giving this dimension the most probability.
      log_info(ctx_->id(), "no sampled grid peaks on dimension ", d, "; keeping the grids with the highest p(", d, ")");
      idx = torch::arange(sampled.members.size(0), torch::kInt64);
      order = sampled.prob.select(1, d).argsort(0, /*descending=*/true);
    } else {
      order = sampled.entropy.index_select(0, idx).argsort();
    }
    for (std::int64_t k = 0; k < std::min<std::int64_t>(keep, idx.numel()); ++k) {
      const std::int64_t row = idx[order[k].item<std::int64_t>()].item<std::int64_t>();
      std::vector<std::int64_t> grid(static_cast<std::size_t>(s));
      for (std::int64_t j = 0; j < s; ++j) grid[static_cast<std::size_t>(j)] = acc[row][j];
      if (synth.steps > 0) grid = synth.refine(std::move(grid), d);
      torch::Tensor q = synth.distribution(torch::tensor(grid).unsqueeze(0))[0];
      kept.dim.push_back(d);
      kept.entropy.push_back(-(q * torch::log(q.clamp_min(1e-30))).sum().item<double>());
      kept.prob.push_back(q[d].item<double>());
      kept.sampled.push_back(sampled.prob[row][d].item<double>());
      kept.peak.push_back(q.argmax().item<std::int64_t>());
      kept.members.insert(kept.members.end(), grid.begin(), grid.end());
      if (k == 0 && images_ && !p.string("out").empty()) write_mosaic(p, d, grid, row_of, s);
    }
  }

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
    // The canvas is BGR, OpenCV's order.
    save_png(cat(p.string("out"), "dim", d, ".png"), canvas.ptr<std::uint8_t>(), canvas.rows, canvas.cols, 3,
             PixelOrder::bgr);
  }

  NodeContext* ctx_ = nullptr;
  RecordPtr snapshot_, images_;
};

}  // namespace

NodeType cen_synthesize_type() {
  return NodeTypeBuilder("crowd.cen_synthesize")
      .doc("Grid synthesis (the CEN paper's Fig. 10): samples random grids, and per embedding dimension keeps those "
           "whose softmax(a^g) peaks there with the lowest entropy; writes them as image mosaics <out>dim<k>.png.")
      .example("synth: {type: crowd.cen_synthesize, params: {grids: 20000, refine_steps: 300, keep: 3, out: out/cen_crowd/mixture/synth_}}")
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
