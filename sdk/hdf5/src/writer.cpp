// StreamFileWriter: buffers appended records per field and writes them in slabs of whole chunks,
// so a stream of tiny records costs one H5Dset_extent + H5Dwrite per few MiB, not per record.

#include <fcntl.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cerrno>
#include <chrono>
#include <cstring>
#include <ctime>

#include "embedflow/file_kind.hpp"
#include "embedflow/version.hpp"
#include "h5util.hpp"

namespace embedflow::hdf5 {
using detail::Handle;
namespace fs = std::filesystem;

const char* layout_name(Layout l) { return l == Layout::records ? "records" : "batches"; }

CorruptFileError::CorruptFileError(fs::path path, const std::string& what)
    : DataError(cat(path.string(), ": ", what)), path_(std::move(path)) {}

namespace {

std::string utc_now_iso8601() {
  std::time_t t = std::time(nullptr);
  std::tm tm{};
  gmtime_r(&t, &tm);
  char buf[32];
  std::strftime(buf, sizeof buf, "%Y-%m-%dT%H:%M:%SZ", &tm);
  return buf;
}

// One dataset being written: its schema, what is in the file and what is still buffered.
struct FieldWriter {
  std::string name;
  DType dtype = DType::f32;
  Shape inner;
  std::int64_t row_elems = 1;
  std::size_t row_bytes = 0;  // numeric only
  Handle dataset, file_type, memory_type;
  std::int64_t rows_in_file = 0;
  std::int64_t chunk_rows = 0;  // fixed when the dataset is created
  std::int64_t buffered_rows = 0;
  std::vector<std::uint8_t> bytes;    // numeric rows
  std::vector<std::string> strings;   // string rows (row_elems per row)
  std::size_t string_bytes = 0;
  detail::StringChecksum string_checksum;  // every string appended, in order

  std::size_t buffered_bytes() const { return dtype == DType::string ? string_bytes : bytes.size(); }
  // Bytes per row used to size chunks; a variable-length string costs a 16-byte heap reference.
  std::size_t chunk_row_bytes() const {
    return std::max<std::size_t>(1, dtype == DType::string ? static_cast<std::size_t>(row_elems) * 16 : row_bytes);
  }

  void init(std::string n, DType t, Shape in) {
    name = std::move(n);
    dtype = t;
    inner = std::move(in);
    row_elems = shape_numel(inner);
    row_bytes = static_cast<std::size_t>(row_elems) * dtype_size(dtype);
    file_type = detail::file_type_for(dtype);
    memory_type = detail::memory_type_for(dtype);
  }

  void push(const Array& a) {
    std::int64_t n = a.numel();
    if (dtype == DType::string) {
      for (std::int64_t i = 0; i < n; ++i) {
        strings.push_back(a.string_at(i));
        string_checksum.add(strings.back());
        string_bytes += strings.back().size() + 16;
      }
    } else {
      std::size_t off = bytes.size();
      bytes.resize(off + a.nbytes());
      if (a.nbytes()) std::memcpy(bytes.data() + off, a.raw(), a.nbytes());
      // HDF5 refuses to convert enum values it does not know, so any nonzero bool byte is TRUE.
      if (dtype == DType::boolean)
        for (std::size_t i = off; i < bytes.size(); ++i) bytes[i] = bytes[i] != 0;
    }
    buffered_rows += row_elems ? n / row_elems : 0;
  }
  void push_rows_of_empty_inner(std::int64_t rows) {  // fields whose rows hold no elements
    buffered_rows += rows;
  }
};

struct PortWriter {
  std::string name;
  Handle group;
  std::optional<Layout> layout;
  bool schema_fixed = false;
  std::vector<FieldWriter> fields;
  FieldWriter offsets, sizes;  // the record index, written like any other column
  std::int64_t records = 0, rows = 0;

  FieldWriter* find(const std::string& n) {
    for (auto& f : fields)
      if (f.name == n) return &f;
    return nullptr;
  }
};

std::atomic<unsigned> temp_counter{0};

void fsync_path(const fs::path& p, bool directory) {
  int fd = ::open(p.c_str(), directory ? (O_RDONLY | O_DIRECTORY) : O_RDONLY);
  if (fd < 0) throw DataError(cat(p.string(), ": cannot open for fsync: ", std::strerror(errno)));
  int rc = ::fsync(fd);
  int err = errno;
  ::close(fd);
  if (rc != 0) throw DataError(cat(p.string(), ": fsync failed: ", std::strerror(err)));
}

}  // namespace

struct StreamFileWriter::Impl {
  fs::path final_path, temp_path;
  WriterOptions options;
  std::map<std::string, std::string> attributes;
  Handle file;
  std::vector<std::unique_ptr<PortWriter>> ports;

  PortWriter* find(const std::string& name) {
    for (auto& p : ports)
      if (p->name == name) return p.get();
    return nullptr;
  }

  PortWriter& declare(const std::string& name) {
    if (PortWriter* p = find(name)) return *p;
    if (name.empty() || name.find('/') != std::string::npos || name == ".")
      throw ConfigError(cat(final_path.string(), ": invalid port name '", name, "' (no '/' allowed)"));
    auto p = std::make_unique<PortWriter>();
    p->name = name;
    p->group = Handle(detail::check(H5Gcreate2(file, name.c_str(), H5P_DEFAULT, H5P_DEFAULT, H5P_DEFAULT),
                                    final_path, cat("cannot create group '/", name, "'")),
                      H5Gclose);
    p->offsets.init("record_offsets", DType::i64, {});
    p->sizes.init("record_sizes", DType::i64, {});
    ports.push_back(std::move(p));
    return *ports.back();
  }

  void create_dataset(PortWriter& port, FieldWriter& f, bool final) {
    std::int64_t target = std::max<std::int64_t>(
        1, static_cast<std::int64_t>(options.chunk_bytes / f.chunk_row_bytes()));
    // A short stream written in one go gets chunks no larger than itself.
    f.chunk_rows = final && f.rows_in_file == 0 ? std::clamp<std::int64_t>(f.buffered_rows, 1, target) : target;
    std::vector<hsize_t> dims{0}, maxdims{H5S_UNLIMITED}, chunk{static_cast<hsize_t>(f.chunk_rows)};
    for (auto d : f.inner) {
      dims.push_back(static_cast<hsize_t>(d));
      // HDF5 needs chunk dims >= 1, which a fixed zero-length dim cannot hold.
      maxdims.push_back(d == 0 ? H5S_UNLIMITED : static_cast<hsize_t>(d));
      chunk.push_back(static_cast<hsize_t>(std::max<std::int64_t>(d, 1)));
    }
    Handle space(H5Screate_simple(static_cast<int>(dims.size()), dims.data(), maxdims.data()), H5Sclose);
    Handle dcpl(H5Pcreate(H5P_DATASET_CREATE), H5Pclose);
    H5Pset_chunk(dcpl, static_cast<int>(chunk.size()), chunk.data());
    // Every row is written, so skip fill writes (HDF5 insists on them for variable-length types).
    if (f.dtype != DType::string) H5Pset_fill_time(dcpl, H5D_FILL_TIME_NEVER);
    // HDF5 refuses filters on variable-length strings (their chunks hold heap references).
    const bool fixed_size = f.dtype != DType::string;
    const bool filtered = fixed_size && (options.deflate_level > 0 || options.checksum);
    if (fixed_size && options.deflate_level > 0) {
      H5Pset_shuffle(dcpl);
      H5Pset_deflate(dcpl, static_cast<unsigned>(options.deflate_level));
    }
    // Last in the pipeline, so the checksum covers the bytes as stored (compressed or not).
    if (fixed_size && options.checksum) H5Pset_fletcher32(dcpl);
    Handle dapl(H5Pcreate(H5P_DATASET_ACCESS), H5Pclose);
    // Unfiltered chunks are written whole, straight from our buffer; the chunk cache would only
    // add a copy. Filtered chunks must pass through it, so it holds a couple of them.
    std::size_t chunk_bytes = static_cast<std::size_t>(f.chunk_rows) * f.chunk_row_bytes();
    H5Pset_chunk_cache(dapl, 521, filtered ? 2 * chunk_bytes + 4096 : 0, 1.0);
    f.dataset = Handle(detail::check(H5Dcreate2(port.group, f.name.c_str(), f.file_type, space, H5P_DEFAULT, dcpl, dapl),
                                     final_path, cat("cannot create dataset '/", port.name, "/", f.name, "'")),
                       H5Dclose);
  }

  // Writes buffered rows: whole chunks only, unless `final`.
  void flush(PortWriter& port, FieldWriter& f, bool final) {
    if (!f.dataset.valid()) {
      if (!final && f.buffered_rows == 0) return;
      create_dataset(port, f, final);
    }
    std::int64_t n = final ? f.buffered_rows : (f.buffered_rows / f.chunk_rows) * f.chunk_rows;
    if (n == 0) return;
    std::vector<hsize_t> dims{static_cast<hsize_t>(f.rows_in_file + n)};
    for (auto d : f.inner) dims.push_back(static_cast<hsize_t>(d));
    std::string where = cat("writing '/", port.name, "/", f.name, "'");
    detail::check_status(H5Dset_extent(f.dataset, dims.data()), final_path, where);
    Handle fspace(detail::check(H5Dget_space(f.dataset), final_path, where), H5Sclose);
    std::vector<hsize_t> start(dims.size(), 0), count = dims;
    start[0] = static_cast<hsize_t>(f.rows_in_file);
    count[0] = static_cast<hsize_t>(n);
    H5Sselect_hyperslab(fspace, H5S_SELECT_SET, start.data(), nullptr, count.data(), nullptr);
    Handle mspace(H5Screate_simple(static_cast<int>(count.size()), count.data(), nullptr), H5Sclose);
    std::int64_t elems = n * f.row_elems;
    if (elems > 0) {
      if (f.dtype == DType::string) {
        std::vector<const char*> ptrs(static_cast<std::size_t>(elems));
        for (std::int64_t i = 0; i < elems; ++i) ptrs[static_cast<std::size_t>(i)] = f.strings[static_cast<std::size_t>(i)].c_str();
        detail::check_status(H5Dwrite(f.dataset, f.memory_type, mspace, fspace, H5P_DEFAULT, ptrs.data()), final_path, where);
        for (std::int64_t i = 0; i < elems; ++i) f.string_bytes -= f.strings[static_cast<std::size_t>(i)].size() + 16;
        f.strings.erase(f.strings.begin(), f.strings.begin() + elems);
      } else {
        detail::check_status(H5Dwrite(f.dataset, f.memory_type, mspace, fspace, H5P_DEFAULT, f.bytes.data()), final_path, where);
        f.bytes.erase(f.bytes.begin(), f.bytes.begin() + static_cast<std::ptrdiff_t>(static_cast<std::size_t>(n) * f.row_bytes));
      }
    }
    f.rows_in_file += n;
    f.buffered_rows -= n;
  }

  void maybe_flush(PortWriter& port, FieldWriter& f) {
    std::size_t threshold = std::max(options.flush_bytes, 2 * options.chunk_bytes);
    if (f.buffered_bytes() >= threshold) flush(port, f, false);
  }

  std::string record_where(const PortWriter& port) const {
    return cat(final_path.string(), ": port '", port.name, "' record ", port.records);
  }

  void fix_schema(PortWriter& port, const Record& r) {
    if (!port.layout) {
      bool batches = r.size() > 0;
      for (const auto& [name, a] : r.fields())
        batches = batches && a.rank() >= 1 && a.dim(0) == r.fields()[0].second.dim(0);
      port.layout = batches ? Layout::batches : Layout::records;
    }
    for (const auto& [name, a] : r.fields()) {
      if (name == "record_offsets" || name == "record_sizes")
        throw DataError(cat(record_where(port), ": field name '", name, "' is reserved for the record index"));
      if (name.empty() || name.find('/') != std::string::npos)
        throw DataError(cat(record_where(port), ": field name '", name, "' cannot be an HDF5 dataset name"));
      Shape inner = a.shape();
      if (*port.layout == Layout::batches) {
        if (inner.empty())
          throw DataError(cat(record_where(port), ": layout 'batches' needs a leading axis but field '", name,
                              "' is ", a.describe()));
        inner.erase(inner.begin());
      }
      port.fields.emplace_back();
      port.fields.back().init(name, a.dtype(), std::move(inner));
    }
    port.schema_fixed = true;
  }

  std::string first_schema(const PortWriter& port) const {
    std::string s;
    for (const auto& f : port.fields) {
      Shape shown = f.inner;
      if (*port.layout == Layout::batches) shown.insert(shown.begin(), -1);
      std::string dims = shape_str(shown);
      if (*port.layout == Layout::batches) dims.replace(1, 2, "B");
      s += (s.empty() ? "" : ", ") + f.name + ": " + std::string(dtype_name(f.dtype)) + dims;
    }
    return "{" + s + "}";
  }

  void append(const std::string& port_name, const Record& r) {
    PortWriter& port = declare(port_name);
    if (!port.schema_fixed) fix_schema(port, r);
    // Validate everything before buffering anything, so a bad record leaves the port intact.
    if (r.size() != port.fields.size())
      throw DataError(cat(record_where(port), ": has fields ", r.describe(), " but the port's first record had ",
                          first_schema(port)));
    std::int64_t rows = 1;
    std::vector<FieldWriter*> targets;
    targets.reserve(r.size());
    for (std::size_t i = 0; i < r.size(); ++i) {
      const auto& [name, a] = r.fields()[i];
      FieldWriter* f = i < port.fields.size() && port.fields[i].name == name ? &port.fields[i] : port.find(name);
      if (!f)
        throw DataError(cat(record_where(port), ": has fields ", r.describe(), " but the port's first record had ",
                            first_schema(port)));
      bool ok = a.dtype() == f->dtype;
      if (*port.layout == Layout::records) {
        ok = ok && a.shape() == f->inner;
      } else {
        ok = ok && a.rank() == f->inner.size() + 1 && std::equal(f->inner.begin(), f->inner.end(), a.shape().begin() + 1);
        if (ok && i == 0) rows = a.dim(0);
        if (ok && a.dim(0) != rows)
          throw DataError(cat(record_where(port), ": fields disagree on the batch size: ", r.describe()));
      }
      if (!ok)
        throw DataError(cat(record_where(port), ": field '", name, "' is ", a.describe(), " but the port's first record had ",
                            first_schema(port)));
      targets.push_back(f);
    }
    for (std::size_t i = 0; i < r.size(); ++i) {
      FieldWriter& f = *targets[i];
      const Array& a = r.fields()[i].second;
      if (f.row_elems == 0) f.push_rows_of_empty_inner(rows);
      else f.push(a);
      maybe_flush(port, f);
    }
    port.offsets.push(Array::scalar<std::int64_t>(port.rows));
    port.sizes.push(Array::scalar<std::int64_t>(rows));
    maybe_flush(port, port.offsets);
    maybe_flush(port, port.sizes);
    port.rows += rows;
    port.records += 1;
  }

  void open_existing() {
    // Validate before copying: appending to a damaged file would hide the damage.
    StreamFileReader existing(final_path);
    std::error_code ec;
    fs::copy_file(final_path, temp_path, fs::copy_options::overwrite_existing, ec);
    if (ec) throw DataError(cat(final_path.string(), ": cannot copy to ", temp_path.string(), " for appending: ", ec.message()));
    Handle fapl(H5Pcreate(H5P_FILE_ACCESS), H5Pclose);
    H5Pset_file_locking(fapl, false, true);
    file = Handle(detail::check(H5Fopen(temp_path.c_str(), H5F_ACC_RDWR, fapl), final_path,
                                "cannot reopen for appending"),
                  H5Fclose);
    for (const auto& [k, v] : existing.attributes())
      if (!attributes.count(k) && k != "complete" && k != "ports") attributes[k] = v;
    for (const auto& name : existing.ports()) {
      const Table& t = existing.port(name);
      auto p = std::make_unique<PortWriter>();
      p->name = name;
      p->group = Handle(detail::check(H5Gopen2(file, name.c_str(), H5P_DEFAULT), final_path, cat("cannot open group '/", name, "'")), H5Gclose);
      p->layout = t.layout();
      p->records = t.records();
      p->rows = t.rows();
      p->schema_fixed = p->records > 0;
      auto reopen = [&](FieldWriter& f, std::int64_t rows) {
        f.dataset = Handle(detail::check(H5Dopen2(p->group, f.name.c_str(), H5P_DEFAULT), final_path,
                                         cat("cannot open dataset '/", name, "/", f.name, "'")),
                           H5Dclose);
        Handle dcpl(H5Dget_create_plist(f.dataset), H5Pclose);
        std::vector<hsize_t> chunk(f.inner.size() + 1);
        if (H5Pget_chunk(dcpl, static_cast<int>(chunk.size()), chunk.data()) < 0)
          throw DataError(cat(final_path.string(), ": dataset '/", name, "/", f.name, "' is not chunked; cannot append"));
        f.chunk_rows = static_cast<std::int64_t>(chunk[0]);
        f.rows_in_file = rows;
      };
      if (p->schema_fixed)
        for (const auto& fi : t.fields()) {
          p->fields.emplace_back();
          p->fields.back().init(fi.name, fi.dtype, fi.inner);
        }
      for (auto& f : p->fields) reopen(f, p->rows);
      // The checksum of a string column covers the rows already there, then the appended ones.
      for (auto& f : p->fields)
        if (f.dtype == DType::string && options.checksum && p->rows > 0) {
          Record existing_rows = t.read_rows(0, p->rows, {f.name});
          const Array& column = existing_rows.get(f.name);
          for (std::int64_t i = 0; i < column.numel(); ++i) f.string_checksum.add(column.string_at(i));
        }
      p->offsets.init("record_offsets", DType::i64, {});
      p->sizes.init("record_sizes", DType::i64, {});
      reopen(p->offsets, p->records);
      reopen(p->sizes, p->records);
      ports.push_back(std::move(p));
    }
  }

  // `partial`: the stream was cut short (an interrupted run); the file says so with complete = 0
  // and a `partial` attribute, so no reader takes it for a whole stream.
  void commit(const fs::path& target, bool partial = false) {
    std::vector<std::string> port_names;
    for (auto& p : ports) {
      for (auto& f : p->fields) flush(*p, f, true);
      if (options.checksum)
        for (auto& f : p->fields)
          if (f.dtype == DType::string && f.dataset.valid())
            detail::write_string_attribute(f.dataset, detail::kStringChecksumAttribute, f.string_checksum.text());
      flush(*p, p->offsets, true);
      flush(*p, p->sizes, true);
      port_names.push_back(p->name);
      std::vector<std::string> field_names;
      for (auto& f : p->fields) field_names.push_back(f.name);
      detail::write_string_attribute(p->group, "layout", layout_name(p->layout.value_or(Layout::records)));
      detail::write_string_list_attribute(p->group, "fields", field_names);
      detail::write_int_attribute(p->group, "records", p->records);
      detail::write_int_attribute(p->group, "rows", p->rows);
    }
    detail::write_string_attribute(file, "embedflow_format", kFormat);
    for (const auto& [k, v] : attributes) detail::write_string_attribute(file, k.c_str(), v);
    detail::write_string_list_attribute(file, "ports", port_names);
    if (options.checksum) detail::write_string_attribute(file, "string_checksums", "fnv1a64");
    if (partial)
      detail::write_string_attribute(file, "partial", "the run was interrupted: this stream was cut short");
    // Written last: a file without it was never committed, whatever its name.
    detail::write_int_attribute(file, "complete", partial ? 0 : 1);
    bool closed = true;
    for (auto& p : ports) {
      for (auto& f : p->fields) closed = f.dataset.reset() && closed;
      closed = p->offsets.dataset.reset() && closed;
      closed = p->sizes.dataset.reset() && closed;
      closed = p->group.reset() && closed;
    }
    detail::check_status(H5Fflush(file, H5F_SCOPE_GLOBAL), final_path, "flush failed");
    closed = file.reset() && closed;
    if (!closed) throw DataError(cat(final_path.string(), ": closing the HDF5 file failed: ", detail::last_error()));
    if (options.fsync) fsync_path(temp_path, false);
    if (std::rename(temp_path.c_str(), target.c_str()) != 0)
      throw DataError(cat(target.string(), ": cannot rename ", temp_path.string(), ": ", std::strerror(errno)));
    if (options.fsync) {
      fs::path dir = target.parent_path();
      fsync_path(dir.empty() ? fs::path(".") : dir, true);
    }
  }

  void discard() noexcept {
    ports.clear();
    file.reset();
    std::error_code ec;
    fs::remove(temp_path, ec);
  }
};

StreamFileWriter::StreamFileWriter(fs::path final_path, std::map<std::string, std::string> attributes,
                                   WriterOptions options)
    : final_path_(std::move(final_path)), impl_(std::make_unique<Impl>()) {
  detail::quiet();
  temp_path_ = final_path_;
  temp_path_ += cat(".tmp-", ::getpid(), "-", temp_counter.fetch_add(1));
  impl_->final_path = final_path_;
  impl_->temp_path = temp_path_;
  impl_->options = options;
  if (impl_->options.deflate_level < 0 || impl_->options.deflate_level > 9)
    throw ConfigError(cat(final_path_.string(), ": deflate level must be 0..9, got ", options.deflate_level));
  impl_->options.chunk_bytes = std::max<std::size_t>(impl_->options.chunk_bytes, 1);
  impl_->attributes = std::move(attributes);
  if (!impl_->attributes.count("created")) impl_->attributes["created"] = utc_now_iso8601();
  impl_->attributes["embedflow_version"] = kVersion;
  try {
    refuse_special_output(final_path_);  // a device node or FIFO is never replaced by the rename
    if (options.append && fs::exists(final_path_)) {
      impl_->open_existing();
      return;
    }
    Handle fapl(H5Pcreate(H5P_FILE_ACCESS), H5Pclose);
    // Version-1.8 objects at least: their headers carry checksums, so damaged metadata is
    // detected on open rather than read as garbage.
    H5Pset_libver_bounds(fapl, H5F_LIBVER_V18, H5F_LIBVER_LATEST);
    // The temporary name is ours alone (pid + counter), so HDF5's flock buys nothing, and some
    // file systems (NFS, some containers) refuse it.
    H5Pset_file_locking(fapl, false, true);
    impl_->file = Handle(detail::check(H5Fcreate(temp_path_.c_str(), H5F_ACC_TRUNC, H5P_DEFAULT, fapl), final_path_,
                                       cat("cannot create temporary file ", temp_path_.string())),
                         H5Fclose);
  } catch (...) {
    impl_->discard();
    throw;
  }
}

StreamFileWriter::~StreamFileWriter() {
  if (!committed_ && impl_) {
    detail::quiet();
    impl_->discard();
  }
}

void StreamFileWriter::add_port(const std::string& port, std::optional<Layout> layout) {
  std::lock_guard<std::mutex> lock(mutex_);
  if (committed_ || !impl_->file.valid()) throw Error(cat(final_path_.string(), ": writer is closed"));
  detail::quiet();
  PortWriter& p = impl_->declare(port);
  if (layout && !p.layout) p.layout = layout;
}

void StreamFileWriter::append(const std::string& port, const Record& record) {
  std::lock_guard<std::mutex> lock(mutex_);
  if (committed_ || !impl_->file.valid()) throw Error(cat(final_path_.string(), ": writer is closed"));
  detail::quiet();
  impl_->append(port, record);
}

void StreamFileWriter::set_attribute(const std::string& key, const std::string& value) {
  std::lock_guard<std::mutex> lock(mutex_);
  static const char* reserved[] = {"embedflow_format", "complete", "ports", "partial", "string_checksums"};
  for (const char* r : reserved)
    if (key == r) throw ConfigError(cat(final_path_.string(), ": attribute '", key, "' is reserved"));
  impl_->attributes[key] = value;
}

void StreamFileWriter::commit() { commit_as(final_path_); }

void StreamFileWriter::commit_as(const fs::path& target) { commit_to(target, false); }

void StreamFileWriter::commit_partial(const fs::path& target) { commit_to(target, true); }

void StreamFileWriter::commit_to(const fs::path& target, bool partial) {
  std::lock_guard<std::mutex> lock(mutex_);
  if (committed_) return;
  if (!impl_->file.valid()) throw Error(cat(final_path_.string(), ": writer was aborted"));
  detail::quiet();
  try {
    impl_->commit(target, partial);
  } catch (...) {
    impl_->discard();
    throw;
  }
  committed_ = true;
}

void StreamFileWriter::abort() {
  std::lock_guard<std::mutex> lock(mutex_);
  if (committed_) return;
  detail::quiet();
  impl_->discard();
}

std::int64_t StreamFileWriter::records(const std::string& port) const {
  std::lock_guard<std::mutex> lock(mutex_);
  for (const auto& p : impl_->ports)
    if (p->name == port) return p->records;
  return 0;
}

std::optional<long> StreamFileWriter::temp_owner_pid(const fs::path& path) {
  std::string name = path.filename().string();
  auto pos = name.rfind(".tmp-");
  if (pos == std::string::npos) return std::nullopt;
  std::string rest = name.substr(pos + 5);
  auto dash = rest.find('-');
  if (dash == std::string::npos || dash == 0 || dash + 1 >= rest.size()) return std::nullopt;
  for (std::size_t i = 0; i < rest.size(); ++i)
    if (i != dash && !std::isdigit(static_cast<unsigned char>(rest[i]))) return std::nullopt;
  return std::stol(rest.substr(0, dash));
}

}  // namespace embedflow::hdf5
