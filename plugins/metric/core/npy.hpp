// Writes NumPy .npy files (version 1.0, little-endian, C order): checkpoints and learned
// matrices that numpy.load reads without any extra package.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

namespace embedflow::metriccore {

void write_npy(const std::string& path, const std::vector<double>& data, const std::vector<std::int64_t>& shape);
// Reads back a float64 C-order .npy (what write_npy writes); throws naming the file otherwise.
std::vector<double> read_npy(const std::string& path, std::vector<std::int64_t>& shape);

}  // namespace embedflow::metriccore
