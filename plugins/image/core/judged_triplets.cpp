#include "core/judged_triplets.hpp"

#include <algorithm>
#include <cctype>
#include <filesystem>
#include <system_error>
#include <unordered_map>

#include "embedflow/csv.hpp"
#include "embedflow/error.hpp"
#include "embedflow/params.hpp"
#include "embedflow/suggest.hpp"

namespace embedflow::image {

namespace fs = std::filesystem;

namespace {

std::string lower(std::string s) {
  std::transform(s.begin(), s.end(), s.begin(), [](unsigned char c) { return static_cast<char>(std::tolower(c)); });
  return s;
}

std::string listed(const std::vector<std::string>& names) {
  std::string out;
  for (const auto& n : names) out += (out.empty() ? "" : ", ") + n;
  return out;
}

// The column of `name` in t's header (case-insensitive), or -1.
int find_column(const CsvTable& t, const std::string& name) {
  const std::string want = lower(trim_csv_field(name));
  for (std::size_t c = 0; c < t.header.size(); ++c)
    if (lower(t.header[c]) == want) return static_cast<int>(c);
  return -1;
}

// A header lacking `name`: the file, its header line, `what` and the closest header name.
DataError no_column(const CsvTable& t, const std::string& what, const std::string& name) {
  std::vector<std::string> names;
  for (const auto& h : t.header) names.push_back(lower(h));
  return DataError(cat(t.file, ":", t.header_line, ": ", what, did_you_mean(lower(name), names, t.header), " (header: ", listed(t.header), ")"));
}

std::string resolve(const std::string& root, const std::string& p) {
  const fs::path path(p);
  return path.is_absolute() || root.empty() ? path.string() : (fs::path(root) / path).string();
}

std::string folder_of(const std::string& file) {
  const fs::path parent = fs::path(file).parent_path();
  return parent.empty() ? std::string(".") : parent.string();
}

// The URL index: url -> (path with root applied, index line).
struct UrlIndex {
  std::string file;
  std::unordered_map<std::string, std::pair<std::string, int>> paths;
};

UrlIndex read_index(const std::string& path, const std::string& root) {
  const CsvTable t = read_csv_table(path, "URL index");
  const int url = find_column(t, "url"), file = find_column(t, "path");
  if (url < 0) throw no_column(t, "the URL index has no column 'url'", "url");
  if (file < 0) throw no_column(t, "the URL index has no column 'path'", "path");
  UrlIndex index;
  index.file = path;
  for (std::size_t i = 0; i < t.rows.size(); ++i) {
    const std::string u = trim_csv_field(t.rows[i][static_cast<std::size_t>(url)]);
    const std::string p = trim_csv_field(t.rows[i][static_cast<std::size_t>(file)]);
    if (u.empty() || p.empty())
      throw DataError(cat(path, ":", t.lines[i], ": empty ", u.empty() ? "url" : "path", " (each row maps a URL to a file)"));
    const std::string resolved = resolve(root, p);
    auto [it, fresh] = index.paths.emplace(u, std::make_pair(resolved, t.lines[i]));
    if (!fresh && it->second.first != resolved)
      throw DataError(cat(path, ":", t.lines[i], ": URL '", u, "' is mapped to '", p, "' here and to '", it->second.first,
                          "' on line ", it->second.second));
  }
  return index;
}

}  // namespace

const char* judgement_name(Judgement j) {
  switch (j) {
    case Judgement::a: return "A";
    case Judgement::b: return "B";
    case Judgement::both: return "both";
    case Judgement::neither: return "neither";
  }
  return "?";
}

bool parse_judgement(const std::string& text, Judgement& out) {
  const std::string v = lower(trim_csv_field(text));
  if (v == "a") out = Judgement::a;
  else if (v == "b") out = Judgement::b;
  else if (v == "both") out = Judgement::both;
  else if (v == "neither") out = Judgement::neither;
  else return false;
  return true;
}

const std::vector<std::string>& judged_triplet_fields() {
  static const std::vector<std::string> fields = {"query", "a", "b", "judgement"};
  return fields;
}

std::int64_t JudgedTripletFile::count(Judgement j) const {
  return std::count_if(triplets.begin(), triplets.end(), [&](const JudgedTriplet& t) { return t.judgement == j; });
}

JudgedTripletFile read_judged_triplets(const std::string& path, const JudgedTripletOptions& o) {
  const bool by_url = !o.index.empty();
  UrlIndex index;
  if (by_url) index = read_index(o.index, o.root.empty() ? folder_of(o.index) : o.root);
  const std::string root = by_url ? "" : o.root.empty() ? folder_of(path) : o.root;

  const CsvTable t = read_csv_table(path, "triplet file");
  // Field -> header name: the defaults, then the mapping.
  std::vector<std::string> names = judged_triplet_fields();
  std::vector<bool> mapped(names.size(), false);
  for (const auto& [field, name] : o.columns) {
    const auto& fields = judged_triplet_fields();
    const auto it = std::find(fields.begin(), fields.end(), field);
    if (it == fields.end()) {
      throw DataError(cat(path, ": columns: unknown field '", field, "'", did_you_mean(field, fields),
                          " (fields: query, a, b, judgement)"));
    }
    names[static_cast<std::size_t>(it - fields.begin())] = name;
    mapped[static_cast<std::size_t>(it - fields.begin())] = true;
  }
  int col[4];
  for (std::size_t f = 0; f < 4; ++f) {
    col[f] = find_column(t, names[f]);
    const bool required = f < 3 || mapped[f];
    if (col[f] < 0 && required)
      throw no_column(t,
                      mapped[f] ? cat("columns maps '", judged_triplet_fields()[f], "' to '", names[f], "', but the header has no such column")
                                : cat("no column '", names[f], "' (or map the file's own name with columns)"),
                      names[f]);
    for (std::size_t g = 0; g < f; ++g)
      if (col[f] >= 0 && col[f] == col[g])
        throw DataError(cat(path, ":", t.header_line, ": fields '", judged_triplet_fields()[g], "' and '", judged_triplet_fields()[f],
                            "' both read column '", t.header[static_cast<std::size_t>(col[f])], "'"));
  }

  JudgedTripletFile out;
  out.has_judgement = col[3] >= 0;
  std::unordered_map<std::string, std::int64_t> ids;  // file -> id
  static const char* kRoles[] = {"query", "A", "B"};
  for (std::size_t i = 0; i < t.rows.size(); ++i) {
    const auto& row = t.rows[i];
    const int line = t.lines[i];
    JudgedTriplet tr;
    tr.line = line;
    std::int64_t* slots[] = {&tr.query, &tr.a, &tr.b};
    for (int r = 0; r < 3; ++r) {
      const std::string cell = trim_csv_field(row[static_cast<std::size_t>(col[r])]);
      if (cell.empty()) throw DataError(cat(path, ":", line, ": empty ", kRoles[r], " (column '", t.header[static_cast<std::size_t>(col[r])], "')"));
      std::string file;
      std::string whence;  // for the missing-file message
      if (by_url) {
        const auto it = index.paths.find(cell);
        if (it == index.paths.end())
          throw DataError(cat(path, ":", line, ": ", kRoles[r], " URL '", cell, "' is not in the URL index '", index.file, "'"));
        file = it->second.first;
        whence = cat(" (URL '", cell, "', ", index.file, ":", it->second.second, ")");
      } else {
        file = resolve(root, cell);
      }
      auto [it, fresh] = ids.emplace(file, static_cast<std::int64_t>(out.paths.size()));
      if (fresh) {
        if (o.check_files) {
          std::error_code ec;
          if (!fs::is_regular_file(file, ec))
            throw DataError(cat(path, ":", line, ": ", kRoles[r], " image '", file, "'", whence,
                                fs::exists(file, ec) ? " is not a file" : ": no such file"));
        }
        out.paths.push_back(file);
      }
      *slots[r] = it->second;
    }
    if (col[3] >= 0) {
      const std::string j = row[static_cast<std::size_t>(col[3])];
      if (!parse_judgement(j, tr.judgement))
        throw DataError(cat(path, ":", line, ": judgement '", trim_csv_field(j), "' is not one of A, B, both, neither"));
    }
    out.triplets.push_back(tr);
  }
  if (out.triplets.empty()) throw DataError(cat(path, ": no triplets (a header row and nothing after it)"));
  return out;
}

}  // namespace embedflow::image
