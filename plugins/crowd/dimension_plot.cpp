// crowd.dimension_plot — per-dimension 1-D embedding plots with example thumbnails (the CEN
// paper's Figs. 6-7): for each embedding dimension k, a strip where `count` images, chosen at
// evenly spaced quantiles of x_k, sit at their x_k (scaled to the strip) with a random vertical
// position (random, as in the paper: only the horizontal axis means something).
//
// Inputs:  embeddings — id i64[N], embedding f32[N,K] (crowd.cen_score's embeddings), any number
//                       of records;
//          images — one record with every image: id i64[M], image u8[M,H,W,C] (gen_crowd's
//                   images.h5 through io.hdf5_reader and image.collect).
// Outputs: none. File: `out` (PNG), one strip per dimension, labelled with the dimension, its
//          range and the standard deviation of x_k.
// Caveats: ids without an image are skipped; the vertical jitter is seeded by the node seed.
//
//   dims: {type: crowd.dimension_plot, params: {out: out/cen/dimensions.png, count: 40}}
#include <algorithm>
#include <cmath>
#include <map>
#include <numeric>

#include "core/draw.hpp"
#include "crowd_types.hpp"

namespace embedflow::crowd {
namespace {

class DimensionPlot final : public Node {
 public:
  void open(NodeContext& ctx) override { ctx_ = &ctx; }
  void process(std::size_t port, const RecordPtr& r, Emitter&) override {
    if (port == 1) {
      images_ = r;
      return;
    }
    const Array& id = r->get("id");
    const Array& e = r->get("embedding");
    if (e.rank() != 2 || e.shape()[0] != id.numel()) throw DataError(cat("embedding must be [N,K]: ", r->describe()));
    k_ = e.shape()[1];
    for (std::int64_t i = 0; i < id.numel(); ++i) {
      ids_.push_back(id.as_int(i));
      for (std::int64_t j = 0; j < k_; ++j) x_.push_back(e.as_double(i * k_ + j));
    }
  }
  void close(Emitter&) override {
    if (!images_) throw DataError("no images record arrived");
    if (ids_.empty()) throw DataError("no embeddings arrived");
    const Params& p = ctx_->params();
    const Array& iid = images_->get("id");
    const Array& img = images_->get(p.string("image_field"));
    if (img.dtype() != DType::u8 || img.rank() < 3) throw DataError(cat("images must be u8 [M,H,W(,C)]: ", images_->describe()));
    const int h = static_cast<int>(img.shape()[1]), w = static_cast<int>(img.shape()[2]), c = img.rank() == 4 ? static_cast<int>(img.shape()[3]) : 1;
    std::map<std::int64_t, std::int64_t> row;
    for (std::int64_t i = 0; i < iid.numel(); ++i) row[iid.as_int(i)] = i;
    const auto* base = static_cast<const unsigned char*>(img.raw());
    std::vector<std::size_t> have;
    for (std::size_t i = 0; i < ids_.size(); ++i)
      if (row.count(ids_[i])) have.push_back(i);
    if (have.empty()) throw DataError("no embedded id has an image");
    const std::int64_t count = std::min<std::int64_t>(p.integer("count"), static_cast<std::int64_t>(have.size()));
    std::vector<std::string> labels;
    std::vector<std::vector<Thumb>> strips;
    Rng& rng = ctx_->rng();
    for (std::int64_t k = 0; k < k_; ++k) {
      auto xk = [&](std::size_t i) { return x_[i * static_cast<std::size_t>(k_) + static_cast<std::size_t>(k)]; };
      std::vector<std::size_t> order = have;
      std::sort(order.begin(), order.end(), [&](std::size_t a, std::size_t b) { return xk(a) < xk(b); });
      const double lo = xk(order.front()), hi = xk(order.back());
      double mean = 0, var = 0;
      for (auto i : order) mean += xk(i) / static_cast<double>(order.size());
      for (auto i : order) var += (xk(i) - mean) * (xk(i) - mean) / static_cast<double>(order.size());
      char buf[160];
      std::snprintf(buf, sizeof buf, "dimension %lld: x from %.2f to %.2f, std %.3f", static_cast<long long>(k), lo, hi, std::sqrt(var));
      labels.push_back(buf);
      std::vector<Thumb> strip;
      for (std::int64_t q = 0; q < count; ++q) {
        const std::size_t i = order[static_cast<std::size_t>(count > 1 ? q * (static_cast<std::int64_t>(order.size()) - 1) / (count - 1) : 0)];
        const double pos = hi > lo ? (xk(i) - lo) / (hi - lo) : 0.5;
        const double jitter = static_cast<double>(rng() >> 11) * 0x1.0p-53;
        strip.push_back(Thumb{base + row[ids_[i]] * h * w * c, h, w, c, pos, jitter});
      }
      strips.push_back(std::move(strip));
    }
    write_strips(p.string("out"), labels, strips, static_cast<int>(p.integer("width")), static_cast<int>(p.integer("strip_height")),
                 static_cast<int>(p.integer("scale")));
  }

 private:
  NodeContext* ctx_ = nullptr;
  RecordPtr images_;
  std::vector<std::int64_t> ids_;
  std::vector<double> x_;
  std::int64_t k_ = 0;
};

}  // namespace

NodeType dimension_plot_type() {
  return NodeTypeBuilder("crowd.dimension_plot")
      .doc("Per-dimension 1-D embedding plots with thumbnails (PNG): for each dimension, `count` images at evenly spaced "
           "quantiles placed at their coordinate, with a random vertical position.")
      .example("dims: {type: crowd.dimension_plot, params: {out: out/cen_crowd/mixture/dimensions.png, count: 40}}")
      .param(Param::path("out").not_fingerprinted().doc("PNG path"))
      .param(Param::integer("count").default_value(40).min(1).doc("thumbnails per dimension"))
      .param(Param::integer("width").default_value(1600).min(100).doc("image width in pixels"))
      .param(Param::integer("strip_height").default_value(110).min(10).doc("height of each dimension's strip"))
      .param(Param::integer("scale").default_value(1).min(1).doc("pixel repetition of the thumbnails"))
      .param(Param::string("image_field").default_value("image").doc("image field of the images record"))
      .input("embeddings", "id: i64[N], embedding: f32[N,K]", "image embeddings")
      .input("images", "id: i64[M]", "one record with every image (u8 [M,H,W,C])")
      .create<DimensionPlot>();
}

}  // namespace embedflow::crowd
