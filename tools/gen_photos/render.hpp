// Rendering synthetic photos whose content follows the city's geometry (docs/photos.md).
//
// A scene is a small 3D world in local metres (x east, y north, z up): buildings made of boxes,
// spires and domes whose faces carry facades (wall, trim, glass, a window layout), trees, ground
// patches (roads, plazas) and line segments (kerbs, cables). A photo is a pinhole projection of
// that world from a camera (position, heading, pitch, roll, field of view) that gen_photos places
// from the photo's own position, so photos taken metres apart see the same facades from
// slightly different angles. Faces are drawn far to near (painter's algorithm), each window
// projected through its face's homography. The light (sun elevation and azimuth from the
// timestamp, the day's weather from the date) shades each face by its orientation to the sun;
// the camera (white balance, exposure, saturation) colours the whole frame last, as a camera's
// processing does. Every random choice is SplitMix64 over a key derived from the seed, so a scene
// is fixed by (seed, place), a camera by (seed, photo), the weather by (seed, day).
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include <opencv2/core.hpp>

namespace gen_photos {

// The generator of every random choice: SplitMix64 over a derived seed. std::*_distribution is
// avoided because its output differs between standard libraries.
class Draw {
 public:
  explicit Draw(std::uint64_t seed) : state_(seed) {}
  std::uint64_t next();
  double uniform() { return static_cast<double>(next() >> 11) * 0x1.0p-53; }
  double uniform(double lo, double hi) { return lo + (hi - lo) * uniform(); }
  int below(int n) { return static_cast<int>(uniform() * n); }
  double normal();

 private:
  std::uint64_t state_;
};

// One face's appearance. Albedos are BGR in [0, 255].
struct Facade {
  cv::Vec3d wall, trim, glass;
  int style = 0;        // 0 punched windows, 1 vertical strips, 2 ribbon bands, 3 arched windows,
                        // 4 curtain wall (glass with mullions), 5 two tall gothic arches (bridge towers)
  double floor_m = 3.5;  // storey height
  double bay_m = 3.0;    // window spacing along the face
  double win_w = 0.5, win_h = 0.55;  // window size as fractions of the bay and the storey
  double base_m = 4.5;   // ground-floor storefront (trim colour) height
  std::uint64_t lit_seed = 0;  // which windows are lit at night
};

// A box (rectangle footprint rotated by angle_deg counter-clockwise from east, from z0 to z1), a
// spire (pyramid over the footprint up to z1) or a dome (half-ellipsoid over the footprint).
struct Part {
  enum Shape { kBox = 0, kSpire, kDome } shape = kBox;
  double cx = 0, cy = 0, hw = 1, hd = 1, angle_deg = 0, z0 = 0, z1 = 1;
  int facade[4] = {0, 0, 0, 0};  // faces +a, +b, -a, -b (a = the rotated x axis)
  cv::Vec3d colour;              // spires and domes
};

struct Building {
  std::vector<Part> parts;       // drawn in order (base first)
  std::vector<Facade> facades;
  double cx = 0, cy = 0, radius = 1;
};

struct Tree {
  double x = 0, y = 0, height = 8, crown = 3;
};

// A flat patch on the ground (z = 0), a convex quad.
struct Patch {
  cv::Vec2d p[4];
  cv::Vec3d colour;
};

// A straight 3D line: kerbs, lane marks, railings, cables.
struct Segment {
  cv::Vec3d a, b;
  cv::Vec3d colour;
  double width_m = 0.15;
};

struct Scene {
  std::vector<Building> buildings;
  std::vector<Tree> trees;
  std::vector<Patch> patches;
  std::vector<Segment> lines;
  cv::Vec3d ground;              // the ground's albedo where no patch lies
  double frame_bearing_deg = 0;  // true bearing of the scene's +y axis (the sun is in true bearings)
  int target = -1;               // the building photographed (landmarks, bridge towers), or -1
};

// A district's building materials: facades of one district share them (a district's buildings
// are of one era and built of the same materials).
struct Palette {
  cv::Vec3d materials[3];
  cv::Vec3d glass, ground;
  double height_scale = 1;       // taller districts (Midtown) vs low-rise ones
};

// The district palette of (seed, region key).
Palette make_palette(std::uint64_t seed, const std::string& region);

// A landmark (or, small, a venue at a hot spot): one distinctive building at the origin whose
// four sides differ, on a plaza, ringed by district buildings; grid_deg is the street grid's
// bearing (the buildings' orientation). Fixed by (seed, key).
Scene make_landmark_scene(std::uint64_t seed, const std::string& key, const Palette& palette, double grid_deg, bool venue);

// A suspension bridge along +y (bearing frame_bearing_deg): two stone towers at y = +-tower_y,
// deck from -half_length to +half_length, cables and suspenders.
Scene make_bridge_scene(std::uint64_t seed, double frame_bearing_deg, double tower_y, double half_length);

// A street along +y (x across, the street's centre line at x = 0), 80 m cells (a cross street
// every 80 m at y = 80k), buildings of each cell and side fixed by (seed, street key, cell, side);
// cells first..last are built. Palettes per cell side come from `palette_of(cell)`.
constexpr double kCellM = 80.0;
constexpr double kStreetHalfM = 10.0;  // building line to centre line: 12 m road, 4 m sidewalks
Scene make_street_scene(std::uint64_t seed, const std::string& street_key, const Palette& palette, double frame_bearing_deg,
                        long first_cell, long last_cell);

struct Camera {
  double x = 0, y = 0, z = 1.6;  // metres in the scene's frame
  double heading_deg = 0;         // optical axis, clockwise from the scene's +y
  double pitch_deg = 0, roll_deg = 0;
  double fov_deg = 65;            // horizontal field of view
};

// What the camera adds: its colour processing and the people and vehicles in front of it.
struct View {
  Camera cam;
  double kelvin = 5500;      // the white balance's assumed colour temperature (5500 K: neutral in daylight)
  double exposure_ev = 0;    // exposure error, stops
  double saturation = 1;     // picture style
  int noise_x = 0, noise_y = 0;
  struct Person { double x, height, feet; cv::Vec3d colour; };
  struct Vehicle { double x, width, height; cv::Vec3d colour; };
  std::vector<Person> people;
  std::vector<Vehicle> vehicles;
};

// The camera's own choices for a photo, fixed by (seed, view key): framing jitter, white balance,
// exposure, saturation, occluders. The caller sets cam from the geometry.
View make_view(std::uint64_t seed, const std::string& key);

// Field of view (degrees, horizontal) for a zoom: zoom 1 is a phone's 65 deg (26 mm equivalent).
double field_of_view_deg(double zoom);
double zoom_of(double fov_deg);

struct Light {
  double sun_elevation_deg = 0, sun_azimuth_deg = 0;  // azimuth clockwise from true north
  double day = 1;            // 0 night, 1 full daylight
  double brightness = 1;     // multiplies albedo
  cv::Vec3d tint{1, 1, 1};   // BGR, the illuminant's colour
  cv::Vec3d sky_top, sky_horizon;
  int season = 0;            // 0 winter, 1 spring, 2 summer, 3 autumn
  bool windows_lit = false;
  bool overcast = false;     // no direct sun: faces shaded alike, grey sky
  bool snow = false;         // snow on the ground
  double visibility_m = 20000;  // meteorological visibility (haze, fog)
};

// Light in New York (40.7 N, 74.0 W) at a unix time; the weather (overcast, visibility, snow) is
// one draw per calendar day, fixed by (seed, day), so photos of one day share it.
Light light_at(std::uint64_t seed, std::int64_t unix_time);

// A noise texture the renders crop from, fixed by the seed; at least 2x the image size.
cv::Mat make_noise(std::uint64_t seed, int width, int height);

// Renders one photo, width x height BGR u8.
cv::Mat render(const Scene& scene, const View& view, const Light& light, int width, int height, const cv::Mat& noise);

// Which faces of a building's first part (bit k: face k, as Part::facade) a camera at (x, y)
// sees at more than 15 deg from grazing, and the one it faces most.
int visible_faces(const Building& building, double cam_x, double cam_y, int* primary);

}  // namespace gen_photos
