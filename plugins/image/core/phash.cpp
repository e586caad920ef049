#include "core/phash.hpp"

#include <opencv2/img_hash.hpp>
#include <tbb/blocked_range.h>
#include <tbb/parallel_for.h>

namespace embedflow::image {
namespace {

__attribute__((target_clones("popcnt", "default"))) void scan_before(const std::uint64_t* hash, std::size_t k, int max_bits,
                                                                     std::vector<std::uint32_t>& out) {
  const std::uint64_t h = hash[k];
  for (std::size_t m = 0; m < k; ++m)
    if (__builtin_popcountll(h ^ hash[m]) <= max_bits) out.push_back(static_cast<std::uint32_t>(m));
}

}  // namespace

std::vector<std::vector<std::uint32_t>> hamming_neighbours_before(const std::vector<std::uint64_t>& hash, int max_bits) {
  std::vector<std::vector<std::uint32_t>> out(hash.size());
  tbb::parallel_for(tbb::blocked_range<std::size_t>(0, hash.size(), 64), [&](const tbb::blocked_range<std::size_t>& r) {
    for (std::size_t k = r.begin(); k != r.end(); ++k) scan_before(hash.data(), k, max_bits, out[k]);
  });
  return out;
}

std::uint64_t phash_of(const cv::Mat& grey) {
  // PHash keeps buffers in its implementation, so one per thread.
  thread_local cv::Ptr<cv::img_hash::PHash> algo = cv::img_hash::PHash::create();
  cv::Mat bytes;
  algo->compute(grey, bytes);
  std::uint64_t h = 0;
  for (int r = 0; r < 8; ++r) h |= static_cast<std::uint64_t>(bytes.at<std::uint8_t>(0, r)) << (8 * r);
  return h;
}

DecodeOptions phash_decode_options(DecodeOptions o) {
  o.color = false;
  o.height = 32;
  o.width = 32;
  o.dct_scaling = true;
  return o;
}

bool phash_file(const std::string& path, const DecodeOptions& o, std::uint64_t& hash, std::string& error) {
  const cv::Mat grey = decode_image(path, phash_decode_options(o), error);
  if (grey.empty()) return false;
  hash = phash_of(grey);
  return true;
}

}  // namespace embedflow::image
