// Image file lists (from a CSV column or a class-per-subdirectory tree) and OpenCV decoding.
#pragma once

#include <cstdint>
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

struct DecodeOptions {
  bool color = false;  // true: 3 channels, RGB order; false: 1 grey channel
  int height = 0, width = 0;  // > 0: resize to this size (area when shrinking, bilinear else)
};

// Decodes one file; returns an empty Mat and sets `error` when it is missing, unreadable or not
// an image OpenCV can decode.
cv::Mat decode_image(const std::string& path, const DecodeOptions& o, std::string& error);

}  // namespace embedflow::image
