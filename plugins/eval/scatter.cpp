// eval.scatter — a 2-D scatter plot (PNG) of embeddings coloured by label, with a legend: two
// chosen coordinates of each embedding (`dims`, default the first two) on the axes. For a latent
// space of more than two dims, put metric.pca (components: 2) and metric.transform in front, so
// the axes are the first two principal components.
//
// Inputs:  in  embedding f32[B,D] (D > every entry of `dims`), label i64[B]
// Outputs: none; writes `out` (PNG) at end of stream
//
// Caveats: holds the plotted coordinates (two floats and a label per point) until the end of the
// stream. With more points than `max_points`, an evenly spaced subset (every k-th point in arrival
// order, deterministic) is drawn and the title says so. Points are drawn in arrival order, so a
// stream sorted by label would draw its last class on top: shuffle such streams first.
//
//   seed: 1
//   nodes:
//     query:   {type: io.hdf5_reader, params: {path: data/reid_128.h5, object: query, batch_size: 256}}
//     pca:     {type: metric.pca, params: {components: 2}}
//     project: {type: metric.transform}
//     plot:    {type: eval.scatter, params: {out: out/reid_pca.png, title: "re-id queries, PCA", max_points: 600}}
//   edges:
//     - query.out -> pca.train
//     - pca.transform -> project.transform
//     - query.out -> project.in
//     - project.out -> plot.in
#include <algorithm>
#include <cmath>
#include <filesystem>
#include <map>

#include <embedflow/plot/line_chart.hpp>

#include "eval_types.hpp"

namespace embedflow::eval {
namespace {

class Scatter final : public Node {
 public:
  void open(NodeContext& ctx) override {
    const Params& p = ctx.params();
    out_ = p.string("out");
    title_ = p.string("title");
    x_label_ = p.string("x_label");
    y_label_ = p.string("y_label");
    label_names_ = p.strings("label_names");
    max_points_ = p.integer("max_points");
    const auto dims = p.integers("dims");
    dx_ = dims[0], dy_ = dims[1];
    width_ = static_cast<int>(p.integer("width"));
    height_ = static_cast<int>(p.integer("height"));
    radius_ = static_cast<int>(p.integer("marker_radius"));
  }

  void process(std::size_t, const RecordPtr& rec, Emitter&) override {
    const Array& e = rec->get("embedding");
    const Array& l = rec->get("label");
    if (e.dtype() != DType::f32 || e.rank() > 2 || e.rank() < 1)
      throw DataError(cat("embedding must be f32[B,D] or f32[D], got ", e.describe()));
    const std::int64_t n = e.rank() == 2 ? e.dim(0) : 1, d = e.rank() == 2 ? e.dim(1) : e.dim(0);
    if (std::max(dx_, dy_) >= d)
      throw DataError(cat("dims [", dx_, ", ", dy_, "] need embeddings of more than ", std::max(dx_, dy_),
                          " dims, got ", e.describe(), " (project to 2-D with metric.pca + metric.transform, or change dims)"));
    if (l.numel() != n) throw DataError(cat("label has ", l.numel(), " entries for ", n, " embeddings"));
    const float* x = e.data<float>();
    for (std::int64_t i = 0; i < n; ++i) {
      xs_.push_back(x[i * d + dx_]);
      ys_.push_back(x[i * d + dy_]);
      labels_.push_back(l.as_int(i));
    }
  }

  void close(Emitter&) override {
    if (xs_.empty()) throw DataError("no embeddings arrived before end of stream");
    const std::size_t n = xs_.size();
    const std::size_t stride =
        max_points_ > 0 && n > static_cast<std::size_t>(max_points_) ? (n + max_points_ - 1) / max_points_ : 1;
    // One series per label, in label order, so colours follow the labels whatever the arrival order.
    std::map<std::int64_t, PlotSeries> by_label;
    std::size_t drawn = 0;
    for (std::size_t i = 0; i < n; i += stride) {
      if (!std::isfinite(xs_[i]) || !std::isfinite(ys_[i])) continue;
      PlotSeries& s = by_label[labels_[i]];
      s.x.push_back(xs_[i]);
      s.y.push_back(ys_[i]);
      ++drawn;
    }
    LineChart chart;
    chart.title = title_;
    if (stride > 1) chart.title += cat(" (", drawn, " of ", n, " points)");
    chart.x_label = x_label_;
    chart.y_label = y_label_;
    chart.width = width_;
    chart.height = height_;
    chart.marker_radius = radius_;
    chart.legend_outside = true;
    // 4% padding on both axes, so the outermost dots are drawn whole.
    double x0 = 1e300, x1 = -1e300, y0 = 1e300, y1 = -1e300;
    for (const auto& [label, s] : by_label)
      for (std::size_t i = 0; i < s.x.size(); ++i)
        x0 = std::min(x0, s.x[i]), x1 = std::max(x1, s.x[i]), y0 = std::min(y0, s.y[i]), y1 = std::max(y1, s.y[i]);
    if (x0 <= x1) {
      const double px = x1 > x0 ? 0.04 * (x1 - x0) : 1.0, py = y1 > y0 ? 0.04 * (y1 - y0) : 1.0;
      chart.x_min = x0 - px, chart.x_max = x1 + px, chart.y_min = y0 - py, chart.y_max = y1 + py;
    }
    for (auto& [label, s] : by_label) {
      const bool named = label >= 0 && static_cast<std::size_t>(label) < label_names_.size();
      s.name = named ? cat(label_names_[static_cast<std::size_t>(label)], " (", label, ")") : cat("class ", label);
      s.line = false;
      chart.series.push_back(std::move(s));
    }
    const std::filesystem::path parent = std::filesystem::path(out_).parent_path();
    std::error_code ec;
    if (!parent.empty()) std::filesystem::create_directories(parent, ec);  // a failure shows in the write below
    save_line_chart(out_, chart);
    log_info("eval.scatter", "wrote ", drawn, " points in ", by_label.size(), " classes to ", out_);
  }

 private:
  std::string out_, title_, x_label_, y_label_;
  std::vector<std::string> label_names_;
  std::int64_t max_points_ = 0, dx_ = 0, dy_ = 1;
  int width_ = 800, height_ = 640, radius_ = 2;
  std::vector<float> xs_, ys_;
  std::vector<std::int64_t> labels_;
};

}  // namespace

NodeType scatter_type() {
  return NodeTypeBuilder("eval.scatter")
      .doc("2-D scatter plot (PNG) of embeddings coloured by label, with a legend; pair with metric.pca + "
           "metric.transform to plot the first two principal components.")
      .example("plot: {type: eval.scatter, params: {out: out/latents.png, title: latents}}")
      .param(Param::path("out").not_fingerprinted().doc("PNG file written at end of stream"))
      .param(Param::string("title").default_value("").doc("chart title"))
      .param(Param::integers("dims").default_value(std::vector<std::int64_t>{0, 1}).min(0)
                 .doc("the two embedding coordinates on the x and y axes"))
      .param(Param::strings("label_names").default_value(std::vector<std::string>{})
                 .doc("legend name of label i at index i (e.g. the ten Fashion-MNIST classes); others show as 'class i'"))
      .param(Param::integer("max_points").default_value(0).min(0)
                 .doc("draw at most this many points (every k-th in arrival order); 0: all"))
      .param(Param::string("x_label").default_value("component 1").doc("x-axis label"))
      .param(Param::string("y_label").default_value("component 2").doc("y-axis label"))
      .param(Param::integer("width").default_value(800).range(200, 8000).doc("plot width in pixels, legend excluded"))
      .param(Param::integer("height").default_value(640).range(200, 8000).doc("image height in pixels"))
      .param(Param::integer("marker_radius").default_value(2).range(1, 20).doc("dot radius in pixels"))
      .input("in", "embedding: f32[B,D], label: i64[B]", "embeddings and their labels")
      .check([](SchemaContext& c) {
        if (c.params().integers("dims").size() != 2) c.error("dims: give exactly two coordinates, e.g. [0, 1]", "dims");
      })
      .create<Scatter>();
}

}  // namespace embedflow::eval
