// How a photo table's columns are found: the fixed YFCC100M layouts, the header row mapped to the
// fields (aliases, case, a suggestion for a near miss), the fixed layout picked from the first
// row's width, and the image path template. PhotoCsvReader's constructor runs these; the reading
// itself is in photo_csv.cpp.
#include "photo_csv.hpp"

#include <algorithm>
#include <cstring>
#include <filesystem>

#include "embedflow/csv.hpp"
#include "embedflow/error.hpp"
#include "embedflow/suggest.hpp"
#include "photo_fields.hpp"

namespace embedflow::geo {

using photo_fields::trim;

void set_yfcc_format(CsvReadOptions& o, const std::string& layout) {
  o.time_format = TimeFormat::iso8601;
  o.delimiter = '\t';
  o.quoting = false;
  o.missing_coordinates_bad = false;
  o.url_decode_text = true;
  o.layouts.clear();
  if (layout != "commons") o.layouts.push_back(yfcc_columns(YfccLayout::webscope));
  if (layout != "webscope") o.layouts.push_back(yfcc_columns(YfccLayout::commons));
}

FixedColumns yfcc_columns(YfccLayout layout) {
  // Positions in the Webscope release; the Multimedia Commons copy shifts them: a line number
  // comes first and the photo hash follows the id.
  FixedColumns c;
  const int shift = layout == YfccLayout::commons ? 2 : 0;
  c.name = layout == YfccLayout::commons ? "YFCC100M, Multimedia Commons copy, 25 columns" : "YFCC100M, Webscope release, 23 columns";
  c.n_columns = 23 + shift;
  c.id = layout == YfccLayout::commons ? 1 : 0;
  c.user = 1 + shift;
  c.time = 3 + shift;
  c.title = 6 + shift;
  c.description = 7 + shift;
  c.lon = 10 + shift;
  c.lat = 11 + shift;
  c.accuracy = 12 + shift;
  c.marker = 22 + shift;
  c.named = {{"nickname", 2 + shift}, {"server", 17 + shift}, {"farm", 18 + shift}, {"secret", 19 + shift},
             {"secret_original", 20 + shift}, {"extension_original", 21 + shift}};
  if (layout == YfccLayout::commons) c.named.emplace_back("hash", 2);
  return c;
}

const std::vector<std::string>& photo_csv_fields() {
  static const std::vector<std::string> fields = {"id",       "lat",   "lon",         "time", "user",
                                                  "accuracy", "title", "description", "path"};
  return fields;
}

void PhotoCsvReader::pick_layout() {
  std::vector<std::string_view> header;
  int line = 0;
  if (!read_record(header, line)) throw DataError(cat(path_, ": empty file"));
  const FixedColumns* match = nullptr;
  std::string expected;
  for (const auto& l : options_.layouts) {
    if (static_cast<std::size_t>(l.n_columns) == header.size()) match = &l;
    expected += cat(expected.empty() ? "" : " or ", l.n_columns, " (", l.name, ")");
  }
  if (!match)
    throw DataError(cat(path_, ":", line, ": first row has ", header.size(), " fields; expected ", expected));
  use_layout(*match);
  pos_ = 0;  // the buffer still starts at the file's first byte
  line_ = 1;
}

// The header row names the columns: `columns` maps fields to header names first, then each
// field's default names claim the columns left.
void PhotoCsvReader::map_header() {
  std::vector<std::string_view> header;
  int line = 0;
  if (!read_record(header, line)) throw DataError(cat(path_, ": empty file, expected a header row"));
  if (!record_problem_.empty()) throw DataError(cat(path_, ":", line, ": header row: ", record_problem_));
  n_columns_ = static_cast<int>(header.size());
  auto lower = [](std::string name) {
    std::transform(name.begin(), name.end(), name.begin(), [](unsigned char ch) { return std::tolower(ch); });
    return name;
  };
  std::vector<std::string> names;  // lower case, for matching
  for (int c = 0; c < n_columns_; ++c) {
    std::string name(trim(header[c]));
    if (c == 0 && name.size() >= 3 && name.compare(0, 3, "\xEF\xBB\xBF") == 0) name.erase(0, 3);  // UTF-8 BOM
    header_.push_back(name);
    names.push_back(lower(name));
  }
  // Each field's default header names, in photo_csv_fields() order.
  struct FieldColumn {
    const char* field;
    int* col;
    std::vector<const char*> defaults;
    bool mapped = false;
  };
  FieldColumn slots[] = {{"id", &col_id_, {"id"}},
                         {"lat", &col_lat_, {"lat", "latitude"}},
                         {"lon", &col_lon_, {"lon", "lng", "longitude"}},
                         {"time", &col_time_, {"time", "datetaken", "date_taken"}},
                         {"user", &col_user_, {"user", "owner"}},
                         {"accuracy", &col_accuracy_, {"accuracy"}},
                         {"title", &col_title_, {"title"}},
                         {"description", &col_description_, {"description"}},
                         {"path", &col_path_, {"path", "image"}}};
  std::vector<const char*> claimed(n_columns_, nullptr);  // column -> the field a mapping gave it
  for (const auto& [field, wanted] : options_.columns) {
    FieldColumn* slot = nullptr;
    for (auto& f : slots)
      if (field == f.field) slot = &f;
    if (!slot) {
      throw DataError(cat(path_, ": columns: unknown field '", field, "'", did_you_mean(field, photo_csv_fields()),
                          " (fields: id, lat, lon, time, user, accuracy, title, description, path)"));
    }
    const std::string want = lower(std::string(trim(wanted)));
    const auto it = std::find(names.begin(), names.end(), want);
    if (it == names.end()) {
      std::string listed;
      for (const auto& h : header_) listed += (listed.empty() ? "" : ", ") + h;
      throw DataError(cat(path_, ":", line, ": columns maps '", field, "' to '", wanted, "', but the header has no such column",
                          did_you_mean(want, names, header_),
                          " (header: ", listed, ")"));
    }
    const int c = static_cast<int>(it - names.begin());
    if (claimed[c]) throw DataError(cat(path_, ":", line, ": columns maps both '", claimed[c], "' and '", field, "' to column '", header_[c], "'"));
    claimed[c] = slot->field;
    *slot->col = c;
    slot->mapped = true;
  }
  for (int c = 0; c < n_columns_; ++c) {
    if (claimed[c]) continue;
    for (auto& f : slots) {
      if (f.mapped || std::find_if(f.defaults.begin(), f.defaults.end(), [&](const char* d) { return names[c] == d; }) == f.defaults.end())
        continue;
      if (*f.col >= 0) throw DataError(cat(path_, ":", line, ": column '", names[c], "' appears twice in the header"));
      *f.col = c;
    }
  }
  const std::pair<const char*, int> required[] = {
      {"id", col_id_}, {"lat", col_lat_}, {"lon", col_lon_}, {"time", col_time_}, {"user", col_user_}};
  for (const auto& [name, col] : required)
    if (col < 0)
      throw DataError(cat(path_, ":", line, ": header has no '", name,
                          "' column (needs id, lat, lon, time, user; optional accuracy, title, description, path; "
                          "columns: {", name, ": <header name>} reads it under another name)"));
  if (options_.min_accuracy > 0 && col_accuracy_ < 0)
    throw DataError(cat(path_, ":", line, ": min_accuracy is set but the header has no 'accuracy' column"));
}

// The image template: literal text and {name} placeholders resolved to columns once.
void PhotoCsvReader::compile_image_template() {
  const std::string& t = options_.image_template;
  for (std::size_t i = 0; i < t.size();) {
    const std::size_t open = t.find('{', i);
    if (open == std::string::npos) { image_template_.emplace_back(t.substr(i), -2); break; }
    const std::size_t close = t.find('}', open);
    if (close == std::string::npos) throw DataError(cat("image path template '", t, "': '{' without '}'"));
    if (open > i) image_template_.emplace_back(t.substr(i, open - i), -2);
    const std::string name = t.substr(open + 1, close - open - 1);
    int col = -3;
    std::string known = "id";
    if (name == "id") col = -1;
    const FixedColumns* layout = nullptr;
    for (const auto& l : options_.layouts)
      if (l.name == layout_name_) layout = &l;
    if (layout)
      for (const auto& [n, c] : layout->named) {
        known += ", " + n;
        if (n == name) col = c;
      }
    if (col == -3) throw DataError(cat("image path template '", t, "': unknown placeholder {", name, "}; known: ", known));
    image_template_.emplace_back(std::string(), col);
    i = close + 1;
  }
}

void PhotoCsvReader::use_layout(const FixedColumns& l) {
  layout_name_ = l.name;
  n_columns_ = l.n_columns;
  col_id_ = l.id; col_lat_ = l.lat; col_lon_ = l.lon; col_time_ = l.time; col_user_ = l.user;
  col_accuracy_ = l.accuracy; col_title_ = l.title; col_description_ = l.description; col_marker_ = l.marker;
}

std::string PhotoCsvReader::column_label(int col, const char* field) const {
  if (header_.empty()) return field;
  if (header_[col] == field) return cat(field);
  return cat(field, " (column '", header_[col], "')");
}

std::string PhotoCsvReader::image_path(const std::vector<std::string_view>& f, std::int64_t id) const {
  std::string out;
  for (const auto& [text, col] : image_template_) {
    if (col == -2) out += text;
    else if (col == -1) out += std::to_string(id);
    else out += trim(f[col]);
  }
  return out;
}

}  // namespace embedflow::geo
