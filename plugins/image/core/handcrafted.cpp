#include "core/handcrafted.hpp"

#include <opencv2/imgproc.hpp>

#include "core/arrays.hpp"

namespace embedflow::image {

void pixel_vector(const cv::Mat& rgb, int height, int width, float* out) {
  cv::Mat small;
  cv::resize(rgb, small, cv::Size(width, height), 0, 0, cv::INTER_AREA);
  cv::Mat f(small.rows, small.cols, CV_MAKETYPE(CV_32F, small.channels()), out);
  small.convertTo(f, CV_32F, 1.0 / 255.0);  // writes into `out`: the Mat wraps it
}

void hs_histogram(const cv::Mat& rgb, int h_bins, int s_bins, float* out) {
  const std::size_t bins = static_cast<std::size_t>(h_bins) * static_cast<std::size_t>(s_bins);
  std::fill(out, out + bins, 0.0f);
  if (rgb.channels() == 1) {
    out[0] = 1.0f;
    return;
  }
  cv::Mat hsv;
  cv::cvtColor(rgb, hsv, cv::COLOR_RGB2HSV);
  const double n = static_cast<double>(hsv.rows) * hsv.cols;
  std::vector<double> counts(bins, 0.0);
  for (int y = 0; y < hsv.rows; ++y) {
    const auto* p = hsv.ptr<cv::Vec3b>(y);
    for (int x = 0; x < hsv.cols; ++x) {
      const int h = std::min(h_bins - 1, p[x][0] * h_bins / 180);
      const int s = std::min(s_bins - 1, p[x][1] * s_bins / 256);
      counts[static_cast<std::size_t>(h * s_bins + s)] += 1;
    }
  }
  for (std::size_t i = 0; i < bins; ++i) out[i] = static_cast<float>(counts[i] / n);
}

Record embed_image_field(const Record& in, const std::string& field, std::int64_t dim,
                         const std::function<void(const cv::Mat&, float*)>& fill) {
  const Array& images = in.get(field);
  if (images.dtype() != DType::u8 || !is_hwc_image(images))
    throw DataError(cat("field '", field, "' must be a u8 image [H,W,C] or batch [B,H,W,C], got ", images.describe()));
  const bool batch = images.rank() == 4;
  const std::int64_t n = batch ? images.dim(0) : 1;
  Array emb = uninitialized_array(DType::f32, batch ? Shape{n, dim} : Shape{dim});
  float* dst = emb.mutable_data<float>();
  for (std::int64_t i = 0; i < n; ++i) fill(image_view(images, batch ? i : -1), dst + i * dim);
  Record out;
  for (const auto& [name, array] : in.fields())
    if (name != field) out.set(name, array);
  out.set("embedding", std::move(emb));
  return out;
}

void check_image_embedding_schema(SchemaContext& c, const std::string& field, std::int64_t dim) {
  const PortSchema& in = c.input("in");
  if (in.is_any()) return;
  const FieldSchema* f = in.find(field);
  if (!f) {
    c.error(cat("input has no field '", field, "' (fields: ", in.str(), ")"), "field");
    return;
  }
  if (f->dtype && *f->dtype != DType::u8) {
    c.error(cat("field '", field, "' must be u8 HWC images (before to_tensor), got ", f->str()), "field");
    return;
  }
  PortSchema out = in;
  out.remove(field);
  FieldSchema e;
  e.name = "embedding";
  e.dtype = DType::f32;
  Dim d;
  d.kind = Dim::Kind::fixed;
  d.value = dim;
  if (f->shape && f->shape->size() == 4) e.shape = std::vector<Dim>{(*f->shape)[0], d};
  else if (f->shape && f->shape->size() == 3) e.shape = std::vector<Dim>{d};
  out.add(e);
  c.set_output("out", out);
}

}  // namespace embedflow::image
