// StreamFileReader: opens an embedflow stream file, validates its structure (format, commit, every
// port's record index against its datasets) and, on request, every stored chunk and string checksum.

#include <algorithm>

#include "column.hpp"

namespace embedflow::hdf5 {
using detail::Handle;
using detail::chunk_stored;
using detail::join_names;
using detail::list_group;
using detail::open_column;
using detail::open_file;
namespace fs = std::filesystem;

namespace {
std::vector<std::int64_t> read_i64_column(const Table::Column& c) {
  std::vector<std::int64_t> v(static_cast<std::size_t>(c.rows));
  if (c.rows > 0) c.read(0, c.rows, v.data(), nullptr);
  return v;
}
}  // namespace

// Loads a stream-file port and checks its record index against its datasets.
Table load_stream_port(const std::shared_ptr<File>& file, const std::string& port, Table t) {
  const fs::path& path = file->path;
  std::string object = "/" + port;
  if (H5Lexists(file->handle, port.c_str(), H5P_DEFAULT) <= 0)
    throw CorruptFileError(path, cat("missing group '", object, "' (listed in the 'ports' attribute)"));
  Handle group(H5Gopen2(file->handle, port.c_str(), H5P_DEFAULT), H5Gclose);
  if (!group.valid()) throw CorruptFileError(path, cat("cannot open group '", object, "': ", detail::last_error()));
  auto layout = detail::read_string_attribute(group, "layout");
  auto fields = detail::read_string_list_attribute(group, "fields");
  auto records = detail::read_int_attribute(group, "records");
  auto rows = detail::read_int_attribute(group, "rows");
  if (!layout || (*layout != "records" && *layout != "batches") || !fields || !records || !rows)
    throw CorruptFileError(path, cat("group '", object, "' lacks its layout/fields/records/rows attributes"));
  t.layout_ = *layout == "records" ? Layout::records : Layout::batches;
  t.rows_ = *rows;
  for (const char* index : {"record_offsets", "record_sizes"})
    if (H5Lexists(group, index, H5P_DEFAULT) <= 0)
      throw CorruptFileError(path, cat("missing dataset '", object, "/", index, "'"));
  auto offsets_col = open_column(file, group, "record_offsets", object + "/record_offsets");
  auto sizes_col = open_column(file, group, "record_sizes", object + "/record_sizes");
  if (offsets_col->rows != *records || sizes_col->rows != *records)
    throw CorruptFileError(path, cat("group '", object, "' says ", *records, " records but record_offsets has ",
                                     offsets_col->rows, " and record_sizes ", sizes_col->rows));
  auto offsets = read_i64_column(*offsets_col);
  auto sizes = read_i64_column(*sizes_col);
  std::int64_t row = 0;
  for (std::size_t i = 0; i < offsets.size(); ++i) {
    if (offsets[i] != row || sizes[i] < 0 || (t.layout_ == Layout::records && sizes[i] != 1))
      throw CorruptFileError(path, cat("group '", object, "': record ", i, " has offset ", offsets[i], " and size ", sizes[i],
                                       " but the records before it end at row ", row));
    row += sizes[i];
  }
  if (row != t.rows_)
    throw CorruptFileError(path, cat("group '", object, "': record_sizes add up to ", row, " rows but the group says ", t.rows_));
  t.offsets_.reserve(offsets.size() + 1);
  t.offsets_ = std::move(offsets);
  t.offsets_.push_back(row);
  for (const auto& name : *fields) {
    if (H5Lexists(group, name.c_str(), H5P_DEFAULT) <= 0)
      throw CorruptFileError(path, cat("missing dataset '", object, "/", name, "' (listed in the 'fields' attribute)"));
    auto c = open_column(file, group, name, object + "/" + name);
    if (c->rows != t.rows_)
      throw CorruptFileError(path, cat("dataset '", object, "/", name, "' has ", c->rows, " rows but record_offsets/record_sizes describe ",
                                       t.rows_));
    t.fields_.push_back(c->info);
    t.columns_.push_back(std::move(c));
  }
  return t;
}

bool is_stream_file(const fs::path& path) {
  detail::quiet();
  std::error_code ec;
  if (!fs::is_regular_file(path, ec) || H5Fis_hdf5(path.c_str()) <= 0) {
    H5Eclear2(H5E_DEFAULT);
    return false;
  }
  Handle fapl(H5Pcreate(H5P_FILE_ACCESS), H5Pclose);
  H5Pset_file_locking(fapl, false, true);
  Handle f(H5Fopen(path.c_str(), H5F_ACC_RDONLY, fapl), H5Fclose);
  if (!f.valid()) {
    H5Eclear2(H5E_DEFAULT);
    return false;
  }
  return detail::has_attribute(f, "embedflow_format");
}

StreamFileReader::StreamFileReader(const fs::path& path, bool allow_partial) {
  file_ = open_file(path);
  hid_t root = file_->handle;
  auto format = detail::read_string_attribute(root, "embedflow_format");
  if (!format) throw CorruptFileError(path, "not an embedflow stream file (no embedflow_format attribute)");
  if (*format != kFormat)
    throw CorruptFileError(path, cat("stream file format '", *format, "' is not the supported '", kFormat, "'"));
  auto complete = detail::read_int_attribute(root, "complete");
  partial_ = complete && *complete == 0 && detail::has_attribute(root, "partial");
  if (partial_ && !allow_partial)
    throw CorruptFileError(path, "a partial stream (complete = 0): the run that wrote it was interrupted, so it holds "
                                 "only the records written before the stop");
  if (!partial_ && (!complete || *complete != 1))
    throw CorruptFileError(path, "incomplete: the writer never committed it (killed or failed mid-write)");
  auto ports = detail::read_string_list_attribute(root, "ports");
  if (!ports) throw CorruptFileError(path, "lacks the 'ports' attribute");
  for (const auto& [k, v] : detail::read_all_text_attributes(root))
    if (k != "ports") attributes_[k] = v;
  port_names_ = *ports;
  for (const auto& name : port_names_) {
    Table t;
    t.file_ = file_;
    t.object_ = "/" + name;
    ports_.emplace(name, load_stream_port(file_, name, std::move(t)));
  }
}

void StreamFileReader::skip_checksums() const { file_->skip_checksums.store(true); }

void StreamFileReader::verify_checksums() const {
  detail::quiet();
  const bool strings_summed = detail::has_attribute(file_->handle, "string_checksums");
  for (const auto& name : port_names_) {
    Handle group(H5Gopen2(file_->handle, name.c_str(), H5P_DEFAULT), H5Gclose);
    if (!group.valid()) throw CorruptFileError(file_->path, cat("cannot open port group '/", name, "'"));
    for (const auto& ds : list_group(group).datasets) {
      const std::string object = cat("/", name, "/", ds);
      auto c = open_column(file_, group, ds, object);
      Handle dcpl(H5Dget_create_plist(c->dataset), H5Pclose);
      if (H5Pget_layout(dcpl) == H5D_CHUNKED && c->rows > 0) {
        // Chunks the shape declares but the file does not store would read back as fill values.
        // (open_column checked the last one, so this loop is as long as the data is.)
        Handle space(H5Dget_space(c->dataset), H5Sclose);
        int rank = H5Sget_simple_extent_ndims(space);
        std::vector<hsize_t> chunk(static_cast<std::size_t>(rank)), coord(static_cast<std::size_t>(rank), 0);
        H5Pget_chunk(dcpl, rank, chunk.data());
        for (hsize_t row = 0; row < static_cast<hsize_t>(c->rows); row += std::max<hsize_t>(chunk[0], 1)) {
          coord[0] = row;
          if (!chunk_stored(c->dataset, coord))
            throw CorruptFileError(file_->path, cat("dataset '", object, "' does not store the chunk at row ", row,
                                                    ": truncated or damaged"));
        }
      }
      // Whole chunks per read, about 1 MiB at a time; the filter pipeline checks each chunk.
      std::int64_t step = std::max<std::int64_t>(1, static_cast<std::int64_t>((1u << 20) / std::max<std::size_t>(c->row_bytes, 1)));
      if (c->info.chunk_rows > 0) step = std::max<std::int64_t>(1, step / c->info.chunk_rows) * c->info.chunk_rows;
      std::vector<std::uint8_t> buf;
      std::vector<std::string> strings;
      detail::StringChecksum sum;
      for (std::int64_t b = 0; b < c->rows; b += step) {
        std::int64_t e = std::min(c->rows, b + step);
        if (c->info.dtype == DType::string) {
          strings.clear();
          c->read(b, e, nullptr, &strings);
          for (const auto& text : strings) sum.add(text);
        } else {
          buf.resize(static_cast<std::size_t>(e - b) * c->row_bytes);
          c->read(b, e, buf.data(), nullptr);
        }
      }
      // HDF5 has no checksum filter for variable-length strings: the writer stored one of its own.
      if (c->info.dtype == DType::string) {
        auto stored = detail::read_string_attribute(c->dataset, detail::kStringChecksumAttribute);
        if (!stored && strings_summed)
          throw CorruptFileError(file_->path, cat("string column '", object, "' lacks its checksum attribute"));
        if (stored && *stored != sum.text())
          throw CorruptFileError(file_->path, cat("string column '", object, "' does not match its checksum (",
                                                  *stored, " stored, ", sum.text(), " read): edited or damaged"));
      }
    }
  }
}

const fs::path& StreamFileReader::path() const { return file_->path; }
bool StreamFileReader::has_port(const std::string& port) const { return ports_.count(port) != 0; }

const Table& StreamFileReader::port(const std::string& port) const {
  auto it = ports_.find(port);
  if (it == ports_.end())
    throw DataError(cat(file_->path.string(), ": no port '", port, "'; the file has ", join_names(port_names_)));
  return it->second;
}

std::optional<std::string> StreamFileReader::attribute(const std::string& key) const {
  auto it = attributes_.find(key);
  if (it == attributes_.end()) return std::nullopt;
  return it->second;
}

Cursor StreamFileReader::replay(const std::string& p, ReadOptions options) const { return port(p).cursor(std::move(options)); }

void StreamFileReader::read_port(const std::string& p, const std::function<void(const RecordPtr&)>& fn) const {
  port(p).for_each(fn);
}

RecordPtr StreamFileReader::read_record(const std::string& p, std::int64_t index) const { return port(p).read_record(index); }

}  // namespace embedflow::hdf5
