// Image operations: the shared shape of every augmenter. Each op (flip, rotate, ...) lives in its
// own node file beside its node type and declares an OpSpec: name, doc, parameters, cross-field
// checks, output size rule and a factory. The single-op node (image.flip) and the composition
// node (image.augment, a list of ops in one node like torchvision's Compose) read the same
// OpSpec, so a parameter is declared once and validated the same way in both.
//
// Randomness: every image gets its own generator, seeded from (node seed, input sequence number,
// field name) and, inside a batch, the image's index. Outputs therefore do not depend on which
// thread ran which record, and nodes are parallel-safe.
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include <opencv2/core.hpp>

#include <embedflow/embedflow.hpp>

namespace embedflow::image {

class ImageOp {
 public:
  virtual ~ImageOp() = default;
  // Transforms one HWC image (u8 or f32 Mat, 1..4 channels). May return `in` itself (same
  // data) when the draw leaves the image unchanged; must never write into `in`.
  virtual cv::Mat apply(const cv::Mat& in, Rng& rng) const = 0;
};

struct OpSpec {
  enum class Effect { pixels, to_tensor, normalize };
  std::string name;     // op name in image.augment; the node type is image.<name>
  std::string doc;
  std::string example;  // YAML for the single-op node
  std::vector<ParamSpec> params;
  Effect effect = Effect::pixels;
  // Cross-field rules: returns "" or a problem, and the parameter it concerns in `param`.
  std::function<std::string(const Params&, std::string& param)> validate;
  // Ops with a fixed output size set h and w and return true (for schema inference).
  std::function<bool(const Params&, std::int64_t& h, std::int64_t& w)> size;
  std::function<std::unique_ptr<ImageOp>(const Params&)> create;
};

// Every op image.augment accepts, in documentation order.
const std::vector<const OpSpec*>& all_ops();
const OpSpec* find_op(const std::string& name);
// The op specs, defined in their node files.
const OpSpec& resize_op();
const OpSpec& random_resized_crop_op();
const OpSpec& flip_op();
const OpSpec& rotate_op();
const OpSpec& color_jitter_op();
const OpSpec& gaussian_blur_op();
const OpSpec& to_tensor_op();
const OpSpec& normalize_op();

// Instantiates an op from a validated map of its parameters (defaults applied); throws
// ConfigError naming the op and the problem.
std::unique_ptr<ImageOp> make_op(const OpSpec& op, const Value& given, Params* resolved = nullptr);

// Seed of one field of one record: (node seed, input sequence number, field name).
std::uint64_t record_seed(std::uint64_t node_seed, std::uint64_t sequence, const std::string& field);

using ImageFn = std::function<cv::Mat(const cv::Mat&, Rng&)>;
// Applies fn to an HWC image (rank 3) or to each image of a BHWC batch (rank 4, image i seeded
// from derive_seed(seed, i)). chw_out writes CHW / BCHW. A single image that fn leaves
// unchanged is forwarded without a copy. Images of one batch must come out the same size.
// u8_to_f32 (with chw_out): fn's u8 results are written as f32 / 255, the to_tensor of the
// list's end, without an f32 HWC image in between.
Array map_images(const Array& a, std::uint64_t seed, const ImageFn& fn, bool chw_out, bool u8_to_f32 = false);

// Parameter every image node that transforms fields carries.
ParamSpec fields_param();

// Schema inference for HWC image fields: checks each field's dtype (u8/f32) and rank (3 or 4),
// then sets the output schema with the new size (when fixed), dtype f32 and CHW layout when
// `to_tensor`. Unknown inputs give unknown outputs.
struct ImageSchemaRule {
  bool to_tensor = false;
  bool has_size = false;
  std::int64_t height = 0, width = 0;
  bool needs_f32 = false;  // e.g. normalize inside augment without a to_tensor before it
};
void infer_image_schema(SchemaContext& c, const std::vector<std::string>& fields, const ImageSchemaRule& rule,
                        const std::string& in = "in", const std::string& out = "out");

// The node type of a single pixel op (image.resize, image.flip, ...): parallel, `fields` param.
NodeType op_node_type(const OpSpec& op);

// cv::resize, antialiased when shrinking as PIL's resampling and torchvision's
// antialias=True are: with linear or cubic interpolation, an axis that shrinks is resized with
// INTER_AREA (each output pixel the mean of the input area it covers) and an axis that grows
// with the interpolation asked for. OpenCV's INTER_LINEAR alone samples 2 input pixels per
// output pixel whatever the scale, so shrinking by 2x or more aliases. antialias false, nearest
// and area: plain cv::resize.
cv::Mat resize_image(const cv::Mat& in, cv::Size size, int interpolation, bool antialias);
ParamSpec antialias_param();

// Helpers for ops' parameters.
ParamSpec interpolation_param(const std::string& default_value = "linear");
int interpolation_flag(const std::string& name);
// A two-number [lo, hi] range parameter's values; validate rejects other lengths.
std::string check_range(const Params& p, const std::string& name, double min, double max, std::string& param);

}  // namespace embedflow::image
