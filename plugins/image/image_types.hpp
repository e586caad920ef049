// The image family's node types; plugin.cpp registers each one explicitly.
#pragma once

#include <embedflow/embedflow.hpp>

namespace embedflow::image {

// Readers and filters.
NodeType idx_reader_type();
NodeType files_reader_type();
NodeType class_filter_type();
NodeType id_filter_type();
NodeType collect_type();
// Augmenters (one op each) and their composition.
NodeType resize_type();
NodeType random_resized_crop_type();
NodeType flip_type();
NodeType rotate_type();
NodeType color_jitter_type();
NodeType gaussian_blur_type();
NodeType normalize_type();
NodeType to_tensor_type();
NodeType augment_type();
// Samplers and batchers.
NodeType decode_by_id_type();
NodeType pair_join_type();
NodeType triplet_join_type();
NodeType judged_triplets_type();
NodeType class_batches_type();
NodeType pk_batches_type();
NodeType batch_pairs_type();
// Embeddings without training (baselines).
NodeType color_histogram_type();
NodeType pixel_embedding_type();
// Near-duplicate photos: perceptual hashes and their removal.
NodeType phash_type();
NodeType near_duplicates_type();

// The decode budgets every node that decodes image files declares alike (files_reader,
// decode_by_id): max_pixels, checked against each file's header, and max_decoding_pixels, the
// header pixels decoding at once.
Param max_pixels_param();
Param max_decoding_pixels_param();
// exif_orientation: whether a decode turns the pixels upright by the file's EXIF Orientation tag;
// image.files_reader and image.decode_by_id both declare it through this one definition.
Param exif_orientation_param();

}  // namespace embedflow::image
