// Rendering synthetic photos whose content follows their metadata.
//
// A scene is a ring of structures (towers, halls, domes, spires), trees and a ground surface
// around a point, with an appearance fixed by (seed, scene key): palette, shapes, window grids,
// roofs. A view looks at a scene from a heading with a zoom, a horizon height, a roll, a
// perspective distortion, occluders (people, vehicles) and a sensor-noise offset, all fixed by
// (seed, view key). The light (sun elevation, sky, tint, season, lit windows at night) comes
// from the photo's timestamp only. So two renders with the same scene, view and time are the
// same bytes, a time-lapse (one view key, many times) keeps its geometry while the light
// changes, and another seed shares no appearance.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include <opencv2/core.hpp>

namespace gen_photos {

struct Structure {
  double azimuth_deg = 0, width_deg = 0, height_deg = 0;  // angular size at zoom 1
  int layer = 0;                                          // 0 farthest, drawn first
  double taper = 0;                                       // top width = width * (1 - taper)
  cv::Vec3d body, accent, window;                         // BGR albedo in [0, 255]
  int roof = 0;                                           // flat, gable, dome, spire, setback
  int window_style = 0;                                   // grid, vertical bands, horizontal bands, arches
  int window_rows = 0, window_cols = 0;
  std::uint64_t lit_seed = 0;                             // which windows are lit at night
};

struct Tree {
  double azimuth_deg = 0, size_deg = 0;
};

struct Scene {
  std::vector<Structure> structures;  // sorted by layer
  std::vector<Tree> trees;
  cv::Vec3d ground, ground_line;
  bool street = false;                // a generic street, not a landmark
};

// Appearance of a scene from (seed, key). `street` scenes are generic streets: duller palettes,
// buildings all round, no tall landmark structure.
Scene make_scene(std::uint64_t seed, const std::string& key, bool street);

struct View {
  double heading_deg = 0;
  double zoom = 1;          // >1 closer: the field of view narrows
  double horizon = 0.55;    // horizon height as a fraction of the image height
  double roll_deg = 0;
  double corners[8] = {};   // perspective jitter of the four corners, fractions of the size
  double exposure = 1;
  int noise_x = 0, noise_y = 0;
  struct Person { double x, height, feet; cv::Vec3d colour; };
  struct Vehicle { double x, width, height; cv::Vec3d colour; };
  std::vector<Person> people;
  std::vector<Vehicle> vehicles;
};

// A view of a scene from `distance_m` from its centre (closer means larger zoom), fixed by
// (seed, view key).
View make_view(std::uint64_t seed, const std::string& key, double distance_m);

// Field of view in degrees for a zoom (the horizontal angle the image spans).
double field_of_view_deg(double zoom);

struct Light {
  double sun_elevation_deg = 0;
  double brightness = 1;    // multiplies albedo
  cv::Vec3d tint{1, 1, 1};  // BGR
  cv::Vec3d sky_top, sky_horizon;
  int season = 0;           // 0 winter, 1 spring, 2 summer, 3 autumn
  bool windows_lit = false;
};

// Light in New York (40.7 N, 74.0 W, UTC-5, daylight saving from March to October) at a unix time.
Light light_at(std::int64_t unix_time);

// A noise texture the renders crop from, fixed by the seed; at least 2x the image size.
cv::Mat make_noise(std::uint64_t seed, int width, int height);

// Renders one photo, width x height BGR u8.
cv::Mat render(const Scene& scene, const View& view, const Light& light, int width, int height, const cv::Mat& noise);

}  // namespace gen_photos
