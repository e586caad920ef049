// The geo plugin family: weak similarity labels from geotagged photos.
#include <nanoflann.hpp>
#include <opencv2/core/version.hpp>

#include "embedflow/plugin.hpp"
#include "geo_types.hpp"

namespace {
void register_types(embedflow::Registry& r) {
  r.add(embedflow::geo::csv_photos_type());
  r.add(embedflow::geo::pair_sampler_type());
  r.add(embedflow::geo::pair_stats_type());
  r.add(embedflow::geo::synthetic_geotags_type());
  r.add(embedflow::geo::yfcc_photos_type());
  r.add(embedflow::geo::photo_folder_type());
  r.add(embedflow::geo::position_embedding_type());
  r.add(embedflow::geo::pair_precision_type());
  r.add(embedflow::geo::spatial_split_type());
}
}  // namespace

// NANOFLANN_VERSION is 0x142 in Debian's 1.4.3 header, so the version is taken from it as is.
EMBEDFLOW_PLUGIN("geo", "0.1.0", "nanoflann " EMBEDFLOW_STRINGIFY(NANOFLANN_VERSION) ", OpenCV " CV_VERSION,
                 register_types)
