// Table: rows of same-length datasets (a stream-file port, a plain group, a single dataset), read
// by range or record, and open_table, which opens any HDF5 group or dataset as one.

#include <algorithm>

#include "column.hpp"

namespace embedflow::hdf5 {
using detail::Handle;
using detail::join_names;
using detail::LinkList;
using detail::list_group;
using detail::object_kind;
using detail::open_column;
using detail::open_file;
using detail::select_columns;
namespace fs = std::filesystem;

const fs::path& Table::path() const { return file_->path; }
const std::string& Table::object() const { return object_; }

const FieldInfo& Table::field(const std::string& name) const {
  for (const auto& f : fields_)
    if (f.name == name) return f;
  std::vector<std::string> names;
  for (const auto& f : fields_) names.push_back(f.name);
  throw ConfigError(cat(file_->path.string(), ": '", object_, "' has no field '", name, "'; it has ", join_names(names)));
}

std::int64_t Table::records() const {
  return has_records() ? static_cast<std::int64_t>(offsets_.size()) - 1 : rows_;
}
std::int64_t Table::record_begin(std::int64_t i) const { return has_records() ? offsets_[static_cast<std::size_t>(i)] : i; }
std::int64_t Table::record_end(std::int64_t i) const { return has_records() ? offsets_[static_cast<std::size_t>(i) + 1] : i + 1; }

namespace detail {
std::vector<std::size_t> select_columns(const Table& t, const std::vector<std::string>& fields) {
  std::vector<std::size_t> idx;
  if (fields.empty()) {
    for (std::size_t i = 0; i < t.fields().size(); ++i) idx.push_back(i);
    return idx;
  }
  for (const auto& name : fields) {
    t.field(name);  // throws naming the available fields
    for (std::size_t i = 0; i < t.fields().size(); ++i)
      if (t.fields()[i].name == name) idx.push_back(i);
  }
  return idx;
}
}  // namespace detail

Record Table::read_rows(std::int64_t begin, std::int64_t end, const std::vector<std::string>& fields) const {
  if (begin < 0 || end < begin || end > rows_)
    throw DataError(cat(file_->path.string(), ": rows [", begin, ",", end, ") out of range for '", object_, "' with ",
                        rows_, " rows"));
  Record r;
  for (std::size_t i : select_columns(*this, fields)) r.set(fields_[i].name, columns_[i]->read_ranges({{begin, end}}));
  return r;
}

RecordPtr Table::read_record(std::int64_t i, const std::vector<std::string>& fields) const {
  if (i < 0 || i >= records())
    throw DataError(cat(file_->path.string(), ": record ", i, " out of range for '", object_, "' with ", records(), " records"));
  bool slice = has_records() && layout_ == Layout::batches;
  Record rows = read_rows(record_begin(i), record_end(i), fields);
  if (slice) return share(std::move(rows));
  Record r;
  for (const auto& [name, a] : rows.fields()) r.set(name, a.row(0));
  return share(std::move(r));
}

void Table::for_each(const std::function<void(const RecordPtr&)>& fn, ReadOptions options) const {
  Cursor c = cursor(std::move(options));
  while (RecordPtr r = c.next()) fn(r);
}

namespace {
std::string child_path(const std::string& group, const std::string& name) {
  return group == "/" ? "/" + name : group + "/" + name;
}
}  // namespace

Table open_table(const fs::path& path, const std::string& object_in, const std::vector<std::string>& fields) {
  detail::quiet();
  std::string object = object_in;
  while (object.size() > 1 && object.back() == '/') object.pop_back();
  if (is_stream_file(path)) {
    StreamFileReader reader(path);
    std::string port = object;
    if (!port.empty() && port[0] == '/') port.erase(0, 1);
    if (port.empty()) {
      if (reader.ports().size() != 1)
        throw ConfigError(cat(path.string(), ": stream file has ports ", join_names(reader.ports()),
                              "; name one with 'object'"));
      port = reader.ports()[0];
    }
    if (!reader.has_port(port))
      throw ConfigError(cat(path.string(), ": no port '", port, "' in this stream file; it has ", join_names(reader.ports())));
    return reader.port(port);
  }
  auto file = open_file(path);
  if (object.empty()) object = "/";
  // Walk the path one link at a time so a missing part is named precisely.
  hid_t root = file->handle;
  if (object != "/") {
    std::string partial;
    std::size_t pos = object[0] == '/' ? 1 : 0;
    while (pos <= object.size()) {
      std::size_t next = object.find('/', pos);
      std::string part = object.substr(pos, next == std::string::npos ? std::string::npos : next - pos);
      partial += "/" + part;
      if (H5Lexists(root, partial.c_str(), H5P_DEFAULT) <= 0) {
        std::string parent = partial.substr(0, partial.size() - part.size() - 1);
        if (parent.empty()) parent = "/";
        Handle g(H5Gopen2(root, parent.c_str(), H5P_DEFAULT), H5Gclose);
        LinkList l = g.valid() ? list_group(g) : LinkList{};
        std::vector<std::string> all = l.datasets;
        all.insert(all.end(), l.groups.begin(), l.groups.end());
        std::sort(all.begin(), all.end());
        H5Eclear2(H5E_DEFAULT);
        throw ConfigError(cat(path.string(), ": no object '", partial, "'; '", parent, "' holds ", join_names(all)));
      }
      if (next == std::string::npos) break;
      pos = next + 1;
    }
    if (object[0] != '/') object = "/" + object;
  }
  H5I_type_t kind = object_kind(root, object.c_str());
  Table t;
  t.file_ = file;
  t.object_ = object;
  if (kind == H5I_DATASET) {
    std::string name = object.substr(object.rfind('/') + 1);
    auto c = open_column(file, root, object, object);
    c->name = name;
    c->info.name = name;
    t.rows_ = c->rows;
    t.fields_.push_back(c->info);
    t.columns_.push_back(std::move(c));
    return t;
  }
  if (kind != H5I_GROUP) throw ConfigError(cat(path.string(), ": '", object, "' is neither a group nor a dataset"));
  Handle group(H5Gopen2(root, object.c_str(), H5P_DEFAULT), H5Gclose);
  LinkList l = list_group(group);
  if (l.datasets.empty())
    throw ConfigError(cat(path.string(), ": group '", object, "' holds no datasets",
                          l.groups.empty() ? std::string() : cat("; its groups are ", join_names(l.groups))));
  std::string lengths;
  bool disagree = false;
  if (!fields.empty()) {
    for (const auto& f : fields)
      if (std::find(l.datasets.begin(), l.datasets.end(), f) == l.datasets.end())
        throw ConfigError(cat(path.string(), ": group '", object, "' has no dataset '", f, "'; it has ", join_names(l.datasets)));
    l.datasets = fields;
  }
  for (const auto& name : l.datasets) {
    auto c = open_column(file, group, name, child_path(object, name));
    if (!t.columns_.empty() && c->rows != t.rows_) disagree = true;
    t.rows_ = t.columns_.empty() ? c->rows : t.rows_;
    lengths += cat(lengths.empty() ? "" : ", ", name, ": ", c->rows);
    t.fields_.push_back(c->info);
    t.columns_.push_back(std::move(c));
  }
  if (disagree)
    throw DataError(cat(path.string(), ": datasets in '", object, "' differ in length (", lengths,
                        "); read one with 'object' naming the dataset"));
  return t;
}

}  // namespace embedflow::hdf5
