// eval.reconstruction — reconstruction error of an autoencoder on a stream of images: the mean
// squared error per pixel between each image and its `reconstruction` (what torch.embed adds with
// `outputs: [reconstruction]`, the images kept with `keep: [id, label, image]`), over every image
// of the stream. Emits one metrics record {method, recon_mse} for eval.report, which merges it
// with the retrieval and clustering records of the same method into one table row.
//
// Inputs:  in  image u8[B,H,W,C] (scaled by 1/255, as torch.embed and image.to_tensor do) or
//              f32[B,C,H,W]; reconstruction f32[B,C,H,W]
// Outputs: metrics  method: str[], recon_mse: f64[] (one record at end of stream)
//
// Caveats: the error is computed in double precision, summed over the stream; images and
// reconstructions must have equal shapes (after the HWC -> CHW view of u8 images). With `out`,
// <out>.json holds the MSE, the PSNR (10 log10(1/MSE), for images in [0,1]), the image count and
// the MSE per label.
//
//   seed: 1
//   nodes:
//     test:  {type: image.idx_reader, params: {split: test, classes: "5-9", batch_size: 500}}
//     embed: {type: torch.embed, params: {checkpoint: out/ae/ckpt, keep: [id, label, image], outputs: [reconstruction]}}
//     error: {type: eval.reconstruction, params: {name: AE, out: out/ae_reconstruction}}
//   edges: [test.out -> embed.in, embed.out -> error.in]
#include <cmath>
#include <map>

#include "eval_types.hpp"
#include "report.hpp"

namespace embedflow::eval {
namespace {

using namespace evalcore;

class Reconstruction final : public Node {
 public:
  void open(NodeContext& ctx) override {
    const Params& p = ctx.params();
    name_ = p.has("name") ? p.string("name") : ctx.id();
    out_ = p.has("out") ? p.string("out") : "";
    field_ = p.string("field");
  }

  void process(std::size_t, const RecordPtr& rec, Emitter&) override {
    const Array* img = rec->find(field_);
    if (!img) throw DataError(cat("the record has no image field '", field_, "': ", rec->describe()));
    const Array& r = rec->get("reconstruction");
    if (r.dtype() != DType::f32 || r.rank() != 4)
      throw DataError(cat("reconstruction must be f32[B,C,H,W], got ", r.describe()));
    const std::int64_t n = r.dim(0), c = r.dim(1), h = r.dim(2), w = r.dim(3);
    const bool u8 = img->dtype() == DType::u8;
    // u8 images are HWC (the readers' layout); f32 images are CHW (image.to_tensor's).
    const bool same = img->rank() == 4 && img->dim(0) == n &&
                      (u8 ? img->dim(1) == h && img->dim(2) == w && img->dim(3) == c
                          : img->dim(1) == c && img->dim(2) == h && img->dim(3) == w);
    if (!same || (!u8 && img->dtype() != DType::f32))
      throw DataError(cat("image ", img->describe(), " does not match reconstruction ", r.describe(),
                          " (want u8[B,H,W,C] or f32[B,C,H,W] with the same B, C, H, W)"));
    const Array* label = rec->find("label");
    const float* rp = r.data<float>();
    const std::int64_t plane = h * w, per_image = c * plane;
    for (std::int64_t i = 0; i < n; ++i) {
      double sum = 0;
      for (std::int64_t k = 0; k < c; ++k)
        for (std::int64_t p = 0; p < plane; ++p) {
          const double x = u8 ? img->data<std::uint8_t>()[(i * plane + p) * c + k] / 255.0
                              : static_cast<double>(img->data<float>()[i * per_image + k * plane + p]);
          const double e = static_cast<double>(rp[i * per_image + k * plane + p]) - x;
          sum += e * e;
        }
      total_ += sum;
      pixels_ += per_image;
      ++images_;
      if (label && label->numel() == n) {
        auto& [s, px] = by_label_[label->as_int(i)];
        s += sum;
        px += per_image;
      }
    }
  }

  void close(Emitter& out) override {
    if (images_ == 0) throw DataError("no images arrived before end of stream");
    const double mse = total_ / static_cast<double>(pixels_);
    log_info(name_, "reconstruction MSE per pixel ", mse, " over ", images_, " images");
    if (!out_.empty()) {
      JsonWriter j;
      j.begin_object().field("method", name_).field("images", images_).field("mse", mse);
      j.field("psnr_db", 10 * std::log10(1.0 / mse));
      j.key("mse_by_label").begin_object();
      for (const auto& [label, v] : by_label_) j.field(cat(label), v.first / static_cast<double>(v.second));
      j.end_object().end_object();
      write_text_atomic(out_ + ".json", j.str() + "\n");
    }
    Record m;
    m.set("method", Array::string_scalar(name_));
    m.set("recon_mse", Array::scalar<double>(mse));
    out.emit(0, std::move(m));
  }

 private:
  std::string name_, out_, field_;
  double total_ = 0;
  std::int64_t pixels_ = 0, images_ = 0;
  std::map<std::int64_t, std::pair<double, std::int64_t>> by_label_;
};

}  // namespace

NodeType reconstruction_type() {
  return NodeTypeBuilder("eval.reconstruction")
      .doc("Mean squared reconstruction error per pixel of an autoencoder over a stream of images and their "
           "reconstructions; one metrics record for eval.report.")
      .example("error: {type: eval.reconstruction, params: {name: AE, out: out/ae_reconstruction}}")
      .param(Param::string("name").optional().doc("method name in tables (default: the node id)"))
      .param(Param::path("out").optional().not_fingerprinted().doc("output prefix: <out>.json (MSE, PSNR, MSE per label)"))
      .param(Param::string("field").default_value("image").doc("the image field compared with `reconstruction`"))
      .input("in", "reconstruction: f32[B,C,H,W]", "images (the `field`) with their reconstructions")
      .output("metrics", "method: str[], recon_mse: f64[]", "one record at end of stream")
      .create<Reconstruction>();
}

}  // namespace embedflow::eval
