// Perceptual hashes of image files (OpenCV img_hash's PHash) and their Hamming distances: what
// image.phash computes and image.near_duplicates compares. Plain C++ so tests call it directly.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include <opencv2/core.hpp>

#include "core/image_files.hpp"

namespace embedflow::image {

// The 64-bit PHash of a grey 8-bit image (any size): cv::img_hash::PHash (32 x 32 image, DCT,
// the 8 x 8 lowest frequencies against their mean with the DC term zeroed). Bit 8*r + c is the
// coefficient at row r, column c of that 8 x 8 block, as PHash's 8 bytes hold them (byte r, bit c).
std::uint64_t phash_of(const cv::Mat& grey);

// The PHash of an image file: decoded as grey straight to 32 x 32 (image files' decode_image
// with height = width = 32: libjpeg's DCT-domain reduction, then area averaging), so PHash's own
// bilinear resize to 32 x 32 is an identity. Area averaging sees every pixel; a bilinear 32 x 32
// sample of a full-size photo sees 4 pixels per cell and aliases, which makes re-encoded and
// resized copies disagree in more bits. EXIF orientation as `o.exif_orientation` says.
// Returns false and sets `error` for a file decode_image refuses.
bool phash_file(const std::string& path, const DecodeOptions& o, std::uint64_t& hash, std::string& error);

// DecodeOptions for phash_file: grey, 32 x 32, the rest as given.
DecodeOptions phash_decode_options(DecodeOptions o);

inline int hamming(std::uint64_t a, std::uint64_t b) { return __builtin_popcountll(a ^ b); }

// For each position k, the positions m < k whose hashes are within max_bits of hash[k],
// ascending: every pair compared once (a 64-bit XOR and popcount), in parallel (oneTBB). The scan
// is compiled twice, with and without the POPCNT instruction, and picks the first when the CPU
// has it (without it, a popcount is a library call, five times slower).
std::vector<std::vector<std::uint32_t>> hamming_neighbours_before(const std::vector<std::uint64_t>& hash, int max_bits);

}  // namespace embedflow::image
