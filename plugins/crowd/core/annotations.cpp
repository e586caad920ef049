#include "core/annotations.hpp"

#include <algorithm>
#include <cctype>
#include <charconv>
#include <functional>
#include <map>
#include <unordered_map>

#include <embedflow/csv.hpp>
#include <embedflow/error.hpp>

#include "core/json.hpp"

namespace embedflow::crowd {

AnnotationFormat parse_format(const std::string& name) {
  if (name == "csv") return AnnotationFormat::csv;
  if (name == "json") return AnnotationFormat::json;
  if (name == "auto") return AnnotationFormat::automatic;
  throw ConfigError(cat("unknown annotation format '", name, "' (auto, csv or json)"));
}

namespace {

// Collects annotations row by row (CSV) or object by object (JSON) and runs the checks that
// need the whole file at the end.
class Builder {
 public:
  explicit Builder(std::string file) { set_.file = std::move(file); }

  // Index of the (worker, grid) annotation, created at `where` when new.
  std::size_t annotation(std::int64_t worker, std::int64_t grid, const std::string& where, bool must_be_new) {
    auto [it, fresh] = index_.try_emplace({worker, grid}, set_.annotations.size());
    if (fresh) {
      Annotation a;
      a.worker = worker;
      a.grid = grid;
      a.where = where;
      set_.annotations.push_back(std::move(a));
      lines_.emplace_back();
    } else if (must_be_new) {
      throw DataError(cat(where, ": worker ", worker, " annotated grid ", grid, " already at ",
                          set_.annotations[it->second].where));
    }
    return it->second;
  }

  void add(std::size_t a, std::int64_t image, std::int64_t cluster, std::string where) {
    set_.annotations[a].images.push_back(image);
    set_.annotations[a].clusters.push_back(cluster);
    lines_[a].push_back(std::move(where));
  }

  AnnotationSet finish(std::int64_t grid_size) {
    if (set_.annotations.empty()) throw DataError(cat(set_.file, ": no annotations in the file"));
    const bool from_param = grid_size > 0;
    set_.grid_size = from_param ? grid_size : static_cast<std::int64_t>(set_.annotations[0].images.size());
    std::unordered_map<std::int64_t, std::size_t> first_of_grid;
    for (std::size_t i = 0; i < set_.annotations.size(); ++i) {
      const Annotation& a = set_.annotations[i];
      const auto n = static_cast<std::int64_t>(a.images.size());
      if (n != set_.grid_size)
        throw DataError(cat(a.where, ": worker ", a.worker, ", grid ", a.grid, " has ", n, " images; expected ", set_.grid_size,
                            from_param ? " (the grid_size parameter; 0 takes the size from the file)"
                                       : cat(" like the first annotation (", set_.annotations[0].where, ")")));
      if (n < 2) throw DataError(cat(a.where, ": worker ", a.worker, ", grid ", a.grid, " has ", n, " image; a grid needs at least 2"));
      std::vector<std::int64_t> sorted = a.images;
      std::sort(sorted.begin(), sorted.end());
      const auto dup = std::adjacent_find(sorted.begin(), sorted.end());
      if (dup != sorted.end()) {
        // Name the second occurrence: that is the row a person fixes.
        std::size_t seen = 0;
        for (std::size_t k = 0; k < a.images.size(); ++k)
          if (a.images[k] == *dup && ++seen == 2)
            throw DataError(cat(lines_[i][k], ": image ", *dup, " is listed twice in worker ", a.worker, "'s grid ", a.grid));
      }
      auto [it, fresh] = first_of_grid.try_emplace(a.grid, i);
      if (!fresh) {
        const Annotation& f = set_.annotations[it->second];
        std::vector<std::int64_t> other = f.images;
        std::sort(other.begin(), other.end());
        if (other != sorted) {
          std::int64_t missing = -1;
          for (std::int64_t id : sorted)
            if (!std::binary_search(other.begin(), other.end(), id)) {
              missing = id;
              break;
            }
          throw DataError(cat(a.where, ": grid ", a.grid, " (worker ", a.worker, ") lists image ", missing,
                              ", which the same grid does not hold at ", f.where, " (worker ", f.worker,
                              "); annotations of one grid must list the same images"));
        }
      }
    }
    lines_.clear();
    return std::move(set_);
  }

 private:
  struct PairHash {
    std::size_t operator()(const std::pair<std::int64_t, std::int64_t>& p) const {
      return std::hash<std::int64_t>()(p.first * 1000003 ^ p.second);
    }
  };
  AnnotationSet set_;
  std::unordered_map<std::pair<std::int64_t, std::int64_t>, std::size_t, PairHash> index_;
  std::vector<std::vector<std::string>> lines_;  // per annotation, where each image came from
};

std::int64_t parse_int(const std::string& raw, const std::string& where, const char* column) {
  const std::string s = trim_csv_field(raw);
  std::int64_t v = 0;
  auto [p, ec] = std::from_chars(s.data(), s.data() + s.size(), v);
  if (s.empty() || ec != std::errc() || p != s.data() + s.size())
    throw DataError(cat(where, ": column '", column, "': '", raw, "' is not an integer"));
  return v;
}

void check_id(std::int64_t v, const std::string& where, const char* what) {
  if (v < 0) throw DataError(cat(where, ": ", what, " ", v, " is negative; ids must be >= 0"));
}

void check_cluster(std::int64_t v, const std::string& where) {
  if (v < -1) throw DataError(cat(where, ": cluster ", v, " is below -1 (-1 marks an unassigned image)"));
}

AnnotationSet read_csv(const std::string& path, std::int64_t grid_size) {
  const std::string text = read_file_text(path, "annotation CSV");
  Builder b(path);
  int worker = -1, grid = -1, image = -1, cluster = -1;
  std::size_t columns = 0;
  bool header = true;
  for_each_csv_row(text, path, [&](std::vector<std::string>& row, int line) {
    const std::string where = cat(path, ":", line);
    if (header) {
      header = false;
      columns = row.size();
      for (std::size_t c = 0; c < row.size(); ++c) {
        const std::string name = trim_csv_field(row[c]);
        int* slot = name == "worker" ? &worker : name == "grid" ? &grid : name == "image" ? &image : name == "cluster" ? &cluster : nullptr;
        if (slot) *slot = static_cast<int>(c);
      }
      std::string missing;
      const std::pair<int, const char*> wanted[] = {{worker, "worker"}, {grid, "grid"}, {image, "image"}, {cluster, "cluster"}};
      for (const auto& [slot, name] : wanted)
        if (slot < 0) missing += cat(missing.empty() ? "" : ", ", name);
      if (!missing.empty())
        throw DataError(cat(where, ": the header lacks column(s) ", missing, "; an annotation CSV needs worker, grid, image, cluster"));
      return;
    }
    if (row.size() != columns) throw DataError(cat(where, ": ", row.size(), " fields, the header has ", columns));
    const std::int64_t w = parse_int(row[static_cast<std::size_t>(worker)], where, "worker");
    const std::int64_t g = parse_int(row[static_cast<std::size_t>(grid)], where, "grid");
    const std::int64_t im = parse_int(row[static_cast<std::size_t>(image)], where, "image");
    const std::string& cl = row[static_cast<std::size_t>(cluster)];
    const std::int64_t c = trim_csv_field(cl).empty() ? -1 : parse_int(cl, where, "cluster");
    check_id(w, where, "worker");
    check_id(g, where, "grid");
    check_id(im, where, "image");
    check_cluster(c, where);
    b.add(b.annotation(w, g, where, false), im, c, where);
  });
  if (header) throw DataError(cat(path, ": empty file (expected a header worker,grid,image,cluster)"));
  return b.finish(grid_size);
}

std::string at(const std::string& file, const JsonValue& v) { return cat(file, ":", v.line, ":", v.column); }

const JsonValue& member(const JsonValue& obj, const char* key, const std::string& file) {
  const JsonValue* v = obj.find(key);
  if (!v) throw DataError(cat(at(file, obj), ": annotation object lacks \"", key, "\" (needs worker, grid, images, clusters)"));
  return *v;
}

std::int64_t json_int(const JsonValue& v, const std::string& file, const char* what) {
  if (v.kind != JsonValue::Kind::integer) throw DataError(cat(at(file, v), ": ", what, " must be an integer, found ", v.kind_name()));
  return v.integer;
}

AnnotationSet read_json(const std::string& path, std::int64_t grid_size) {
  const JsonValue doc = parse_json_file(path);
  const JsonValue* list = &doc;
  if (doc.kind == JsonValue::Kind::object) {
    list = doc.find("annotations");
    if (!list) throw DataError(cat(at(path, doc), ": the top-level object lacks \"annotations\""));
  }
  if (list->kind != JsonValue::Kind::array)
    throw DataError(cat(at(path, *list), ": expected an array of annotation objects, found ", list->kind_name()));
  Builder b(path);
  for (const JsonValue& obj : list->items) {
    if (obj.kind != JsonValue::Kind::object)
      throw DataError(cat(at(path, obj), ": expected an annotation object, found ", obj.kind_name()));
    const JsonValue& wv = member(obj, "worker", path);
    const JsonValue& gv = member(obj, "grid", path);
    const JsonValue& images = member(obj, "images", path);
    const JsonValue& clusters = member(obj, "clusters", path);
    const std::int64_t w = json_int(wv, path, "worker");
    const std::int64_t g = json_int(gv, path, "grid");
    check_id(w, at(path, wv), "worker");
    check_id(g, at(path, gv), "grid");
    for (const JsonValue* arr : {&images, &clusters})
      if (arr->kind != JsonValue::Kind::array)
        throw DataError(cat(at(path, *arr), ": \"", arr == &images ? "images" : "clusters", "\" must be an array, found ", arr->kind_name()));
    if (images.items.size() != clusters.items.size())
      throw DataError(cat(at(path, clusters), ": ", clusters.items.size(), " clusters for ", images.items.size(), " images"));
    const std::size_t a = b.annotation(w, g, cat(path, ":", obj.line), true);
    for (std::size_t k = 0; k < images.items.size(); ++k) {
      const JsonValue& iv = images.items[k];
      const JsonValue& cv = clusters.items[k];
      const std::int64_t im = json_int(iv, path, "an image id");
      check_id(im, at(path, iv), "image");
      const std::int64_t c = cv.kind == JsonValue::Kind::null ? -1 : json_int(cv, path, "a cluster id");
      check_cluster(c, at(path, cv));
      b.add(a, im, c, at(path, iv));
    }
  }
  return b.finish(grid_size);
}

bool ends_with(const std::string& s, const std::string& suffix) {
  return s.size() >= suffix.size() && std::equal(suffix.rbegin(), suffix.rend(), s.rbegin(),
                                                 [](char a, char b) { return std::tolower(a) == std::tolower(b); });
}

}  // namespace

AnnotationSet read_annotations(const std::string& path, AnnotationFormat format, std::int64_t grid_size) {
  if (format == AnnotationFormat::automatic) format = ends_with(path, ".json") ? AnnotationFormat::json : AnnotationFormat::csv;
  return format == AnnotationFormat::json ? read_json(path, grid_size) : read_csv(path, grid_size);
}

}  // namespace embedflow::crowd
