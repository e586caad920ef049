// The image plugin: Fashion-MNIST IDX and image-file readers, OpenCV augmenters, and the
// batchers that turn image streams into class-stratified, PK, pair and triplet batches.
#include <opencv2/core/version.hpp>

#include "image_types.hpp"

namespace {
void register_types(embedflow::Registry& r) {
  using namespace embedflow::image;
  r.add(idx_reader_type());
  r.add(files_reader_type());
  r.add(class_filter_type());
  r.add(id_filter_type());
  r.add(collect_type());
  r.add(resize_type());
  r.add(random_resized_crop_type());
  r.add(flip_type());
  r.add(rotate_type());
  r.add(color_jitter_type());
  r.add(gaussian_blur_type());
  r.add(normalize_type());
  r.add(to_tensor_type());
  r.add(augment_type());
  r.add(decode_by_id_type());
  r.add(pair_join_type());
  r.add(triplet_join_type());
  r.add(judged_triplets_type());
  r.add(class_batches_type());
  r.add(pk_batches_type());
  r.add(batch_pairs_type());
  r.add(color_histogram_type());
  r.add(pixel_embedding_type());
  r.add(phash_type());
  r.add(near_duplicates_type());
}
}  // namespace

EMBEDFLOW_PLUGIN("image", "0.1.0", "OpenCV " CV_VERSION, register_types)
