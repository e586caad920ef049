// Crowd clustering annotations: worker w saw grid g (S images) and put each image in a cluster.
// Two file formats carry the same thing (docs/crowd.md has examples):
//   CSV, one row per (worker, grid, image): header with columns worker, grid, image, cluster
//     (any order; other columns are ignored). Rows of one (worker, grid) need not be adjacent;
//     their order is the grid's image order. An empty cluster or -1 means "left unassigned".
//   JSON: {"annotations": [{"worker": 3, "grid": 17, "images": [..S ids..], "clusters": [..S..]},
//     ...]} or the bare array; other keys are ignored; a null cluster means unassigned.
// Ids are non-negative integers used as given (image ids refer to the image table's `id`).
#pragma once

#include <cstdint>
#include <string>
#include <vector>

namespace embedflow::crowd {

// One submission: worker `worker` clustered the images of grid `grid`.
struct Annotation {
  std::int64_t worker = 0, grid = 0;
  std::vector<std::int64_t> images;    // the grid's images, in the order the file lists them
  std::vector<std::int64_t> clusters;  // cluster id per image; -1 = left unassigned
  std::string where;                   // "file:line" of its first row (CSV) or object (JSON)
};

struct AnnotationSet {
  std::string file;
  std::int64_t grid_size = 0;           // S, the same for every annotation
  std::vector<Annotation> annotations;  // in order of first appearance in the file
};

enum class AnnotationFormat { automatic, csv, json };
// "auto" | "csv" | "json"; automatic picks json for a .json file name, else csv.
AnnotationFormat parse_format(const std::string& name);

// Reads and checks a whole annotation file. Throws DataError naming file:line (and column for
// JSON) for: a malformed row or value, a missing column or key, a negative id, a cluster below
// -1, an image listed twice in one annotation, the same (worker, grid) annotated twice (CSV
// groups rows, so only JSON can say it twice), annotations of one grid that list different
// image sets, and a grid size other than `grid_size` (0: the first annotation's size).
// An empty file (no annotation) is a DataError too: a reader with nothing to read is a mistake.
AnnotationSet read_annotations(const std::string& path, AnnotationFormat format, std::int64_t grid_size);

}  // namespace embedflow::crowd
