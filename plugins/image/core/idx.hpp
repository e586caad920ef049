// IDX files (the MNIST / Fashion-MNIST format), gzip-compressed or plain: a big-endian header
// (magic 0x0000 08 <rank>, then rank u32 dims) followed by u8 data. zlib reads both forms.
#pragma once

#include <cstdint>
#include <string>

#include <embedflow/embedflow.hpp>

namespace embedflow::image {

struct IdxData {
  std::int64_t count = 0;         // records in the file (first dim)
  std::int64_t rows = 0, cols = 0;  // per-record dims (images); 0 for a label file
  Array data;                     // u8[loaded, rows, cols, 1] or u8[loaded]
};

// Reads the first `max_records` records (-1: all) of an IDX u8 file of the given rank (3 for
// images, 1 for labels). Throws DataError naming the file for a bad magic number, implausible
// dims, a gzip error, or a file that ends early (naming the first incomplete record).
IdxData read_idx(const std::string& path, int rank, std::int64_t max_records = -1);

}  // namespace embedflow::image
