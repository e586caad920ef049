// Image file lists (from a CSV column or a class-per-subdirectory tree) and OpenCV decoding.
#pragma once

#include <condition_variable>
#include <cstdint>
#include <mutex>
#include <string>
#include <vector>

#include <opencv2/core.hpp>

namespace embedflow::image {

struct ImageEntry {
  std::string path;    // as opened
  std::int64_t id = 0;
  std::int64_t label = -1;
  std::string where;   // "list.csv:12" or the path, for messages
};

struct CsvListOptions {
  std::string path_column = "path";
  std::string id_column = "auto";     // "auto": "id" when present, else the row index
  std::string label_column = "auto";  // "auto": "label" when present, else -1
  std::string root;                   // prefix for relative paths; empty: the CSV's directory
};

// Rows of a CSV image list. Bad ids/labels and unknown columns are errors naming file:line.
std::vector<ImageEntry> list_csv(const std::string& csv, const CsvListOptions& o);

// dir/<class>/.../<image>: ids are positions in the byte-wise sorted list of relative paths
// (stable whatever filter follows); labels are the class directory names when every name is an
// integer, else their positions in the sorted name list (as torchvision's ImageFolder).
// `class_names` receives the sorted class directory names.
std::vector<ImageEntry> list_directory(const std::string& dir, std::vector<std::string>& class_names);

// Bounds the pixels a node decodes at once: each decode leases the pixel count its file's header
// declares and waits while the leases held would exceed the capacity. A file alone always
// starts (a capacity below one file's size serialises, never blocks for good), and a thread that
// already holds a lease never waits for another (a nested decode cannot wait on itself).
class DecodeBudget {
 public:
  explicit DecodeBudget(std::uint64_t capacity) : capacity_(capacity) {}
  DecodeBudget(const DecodeBudget&) = delete;
  DecodeBudget& operator=(const DecodeBudget&) = delete;

  class Lease {
   public:
    Lease() = default;
    Lease(DecodeBudget* budget, std::uint64_t pixels) : budget_(budget), pixels_(pixels) {}
    Lease(Lease&& o) noexcept : budget_(o.budget_), pixels_(o.pixels_) { o.budget_ = nullptr; }
    Lease& operator=(Lease&&) = delete;
    ~Lease() { if (budget_) budget_->release(pixels_); }

   private:
    DecodeBudget* budget_ = nullptr;
    std::uint64_t pixels_ = 0;
  };
  Lease acquire(std::uint64_t pixels);
  std::uint64_t capacity() const { return capacity_; }
  // The largest sum of leases held at once so far (tests).
  std::uint64_t peak() const;

 private:
  void release(std::uint64_t pixels);
  const std::uint64_t capacity_;
  mutable std::mutex mutex_;
  std::condition_variable freed_;
  std::uint64_t in_use_ = 0, peak_ = 0;
};

// The default of the readers' max_pixels: 100 megapixels (a 12000 x 8000 camera file is 96),
// 300 MB decoded as RGB.
constexpr std::int64_t kDefaultMaxPixels = 100000000;

struct DecodeOptions {
  // Files whose header declares more pixels (width x height) are refused before decoding, with
  // an error naming `max_pixels_param` (the node's parameter).
  std::uint64_t max_pixels = kDefaultMaxPixels;
  const char* max_pixels_param = "max_pixels";
  // Shared by the node's parallel decodes; null: no bound on decodes at once.
  DecodeBudget* budget = nullptr;
  bool color = false;  // true: 3 channels, RGB order; false: 1 grey channel
  int height = 0, width = 0;  // > 0: resize to this size (antialiased: area when shrinking, bilinear else)
  // JPEG only: decode at 1/2, 1/4 or 1/8 in the DCT domain (libjpeg-turbo's scaled IDCT) when
  // the reduced image still covers height x width, then resize. Much faster for thumbnails;
  // pixels differ from a full decode + resize by the two filters' difference.
  bool dct_scaling = true;
  // Turn the pixels upright as the file's EXIF Orientation tag (JPEG APP1 or PNG eXIf) says,
  // before any resize, as viewers and PIL's ImageOps.exif_transpose do; height x width is the
  // size of the upright image.
  bool exif_orientation = true;
};

// The pixels of `m` turned as EXIF Orientation `orientation` (1..8) says the stored image must be
// to appear upright (1: as stored; 6: rotated 90 degrees clockwise; ...).
cv::Mat apply_exif_orientation(const cv::Mat& m, int orientation);

// The largest of 1, 2, 4, 8 that keeps a w x h image at least target_w x target_h.
int jpeg_reduction(int w, int h, int target_w, int target_h);

// Decodes one file; returns an empty Mat and sets `error` when it is missing, unreadable, not
// an image OpenCV can decode, or declares more than o.max_pixels pixels in its header
// (core/image_header.hpp: checked before any decoder runs). JPEGs are decoded strictly (core/jpeg.hpp): a truncated or
// corrupt JPEG is an error even where libjpeg would only warn.
cv::Mat decode_image(const std::string& path, const DecodeOptions& o, std::string& error);

// Decodes the bytes of a file already read, as decode_image.
cv::Mat decode_image_bytes(const std::vector<unsigned char>& bytes, const DecodeOptions& o, std::string& error);

// Reads a whole file with POSIX calls; false and `error` when missing, not regular or short.
bool read_file_bytes(const std::string& path, std::vector<unsigned char>& bytes, std::string& error);

}  // namespace embedflow::image
