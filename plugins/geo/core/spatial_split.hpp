// A spatially blocked split of a photo table into train, validation and test parts: the map is
// cut into square cells, each cell goes wholly to one part by a seeded hash of its index, and
// photos of train and validation cells that lie near the other parts are set aside as a buffer,
// so that no photo of a part has a photo of a part it must not see within the buffer distance.
// Plain C++ (tests call it without a graph); geo.spatial_split (spatial_split.cpp) is the node.
#pragma once

#include <array>
#include <cstdint>
#include <vector>

namespace embedflow::geo {

enum class SplitPart : std::uint8_t { train = 0, validation = 1, test = 2, buffer = 3 };
inline constexpr const char* kSplitPartNames[] = {"train", "validation", "test", "buffer"};

// Buffer queries ask the spatial index for a ball this much wider than buffer_m (see
// spatial_split.cpp), so buffer_m is limited to the index's largest radius divided by it.
inline constexpr double kBufferQueryWidening = 1.1;
inline constexpr double kMaxBufferM = 90000.0;

struct SpatialSplitOptions {
  double cell_m = 1000.0;             // cell side, metres (> 0)
  double validation_fraction = 0.1;   // of the cells; the rest after test and validation is train
  double test_fraction = 0.2;
  double buffer_m = 0.0;              // >= 0, at most kMaxBufferM
  std::uint64_t seed = 0;
};

struct SpatialSplitSummary {
  std::array<std::int64_t, 3> cells{};   // cells holding photos, per part (train, validation, test)
  std::array<std::int64_t, 4> photos{};  // photos per part, the buffer last
  std::int64_t buffer_from_train = 0;       // train-cell photos within buffer_m of a test or validation photo
  std::int64_t buffer_from_validation = 0;  // validation-cell photos within buffer_m of a test photo
};

// Each photo's part. Cells are cell_m squares of the local metric projection the geo indexes use
// (geodesy.hpp's Projection, fitted to the photos' extent), so a cell's index depends on the
// data's bounding box as well as on the position. A cell is test when its hash u in [0, 1) is
// below test_fraction, validation when below test_fraction + validation_fraction, else train.
// Then a validation photo with a test photo within buffer_m (great-circle, inclusive), and a
// train photo with a test photo or a kept validation photo within buffer_m, become buffer. After
// it, every kept train photo is more than buffer_m from every test and validation photo, and
// every kept validation photo more than buffer_m from every test photo.
// Throws ConfigError for cell_m <= 0, buffer_m < 0 or too large, fractions outside [0, 1] or
// summing above 1, and for extents the projection cannot hold.
std::vector<SplitPart> spatial_split(const std::vector<double>& lat, const std::vector<double>& lon,
                                     const SpatialSplitOptions& options, SpatialSplitSummary* summary = nullptr);

}  // namespace embedflow::geo
