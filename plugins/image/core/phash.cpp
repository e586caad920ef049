#include "core/phash.hpp"

#include <opencv2/img_hash.hpp>

namespace embedflow::image {

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
