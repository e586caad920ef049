// Reading: Table (rows of same-length datasets), StreamFileReader (validated stream files) and
// Cursor (sequential or chunk-aware shuffled replay in large slabs, with prefetch).

#include <algorithm>
#include <cmath>
#include <condition_variable>
#include <cstring>
#include <deque>
#include <exception>
#include <mutex>
#include <thread>
#include <numeric>
#include <random>

#include <fcntl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include "embedflow/file_kind.hpp"
#include "embedflow/rng.hpp"
#include "h5util.hpp"

namespace embedflow::hdf5 {
using detail::Handle;
namespace fs = std::filesystem;

const char* hdf5_version() { return H5_VERSION; }

class File {
 public:
  File(fs::path p, Handle h) : path(std::move(p)), handle(std::move(h)) {}
  ~File() {
    if (map_ && map_ != MAP_FAILED) munmap(map_, map_size_);
  }
  fs::path path;
  Handle handle;

  // The whole file mapped read-only, or null when mapping fails. Shuffled batches copy rows
  // straight out of the page cache through it instead of reading blocks and copying again.
  // Only ever used to copy out (never handed to records), so a file replaced meanwhile cannot
  // fault a consumer; files at final names are replaced by rename, never truncated.
  const std::uint8_t* mapping(std::size_t& size) {
    std::call_once(map_once_, [this] {
      int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
      if (fd < 0) return;
      struct stat st {};
      if (fstat(fd, &st) == 0 && st.st_size > 0) {
        map_size_ = static_cast<std::size_t>(st.st_size);
        map_ = mmap(nullptr, map_size_, PROT_READ, MAP_SHARED, fd, 0);
        if (map_ == MAP_FAILED) map_ = nullptr;
      }
      ::close(fd);
    });
    size = map_size_;
    return static_cast<const std::uint8_t*>(map_);
  }

 private:
  std::once_flag map_once_;
  void* map_ = nullptr;
  std::size_t map_size_ = 0;
};

namespace {

// Opens read-only. A missing file is a DataError; an unopenable one a CorruptFileError.
std::shared_ptr<File> open_file(const fs::path& path) {
  detail::quiet();
  std::error_code ec;
  if (!fs::exists(path, ec)) throw DataError(cat(path.string(), ": no such file"));
  if (fs::is_directory(path, ec)) throw DataError(cat(path.string(), ": is a directory, not an HDF5 file"));
  const std::string kind = special_file_kind(path);  // a FIFO would block HDF5's open for ever
  if (!kind.empty()) throw DataError(cat(path.string(), ": is a ", kind, ", not an HDF5 file"));
  if (H5Fis_hdf5(path.c_str()) <= 0) {
    H5Eclear2(H5E_DEFAULT);
    auto size = fs::file_size(path, ec);
    throw CorruptFileError(path, size == 0 ? "empty file (not HDF5)" : "not an HDF5 file (no HDF5 signature)");
  }
  Handle fapl(H5Pcreate(H5P_FILE_ACCESS), H5Pclose);
  // Readers never need the lock (files at final names are not written again), and some file
  // systems refuse it.
  H5Pset_file_locking(fapl, false, true);
  hid_t f = H5Fopen(path.c_str(), H5F_ACC_RDONLY, fapl);
  if (f < 0) throw CorruptFileError(path, cat("cannot open as HDF5 (truncated or damaged?): ", detail::last_error()));
  return std::make_shared<File>(path, Handle(f, H5Fclose));
}

std::string join_names(const std::vector<std::string>& names) {
  std::string s;
  for (const auto& n : names) s += (s.empty() ? "" : ", ") + n;
  return s.empty() ? "(none)" : s;
}

std::string child_path(const std::string& group, const std::string& name) {
  return group == "/" ? "/" + name : group + "/" + name;
}

}  // namespace

// Recycles read buffers across all cursors of the process. A fresh multi-MiB allocation is
// mmap'd by glibc and page-faulted on first touch, which costs more than the HDF5 read into it
// (measured: ~2x the whole replay time); replays reuse a bounded set of slab-sized buffers
// instead. Buffers are uninitialised (HDF5 overwrites them) and come back when the last record
// viewing them is dropped.
class BufferPool {
 public:
  static BufferPool& instance() {
    static auto* pool = new BufferPool();  // never destroyed: deleters may run at exit
    return *pool;
  }
  std::shared_ptr<std::uint8_t> get(std::size_t bytes) {
    bytes = std::max<std::size_t>(bytes, 1);
    std::uint8_t* p = nullptr;
    {
      std::lock_guard<std::mutex> lock(mutex_);
      for (auto it = free_.rbegin(); it != free_.rend(); ++it)
        if (it->first == bytes) {
          p = it->second;
          kept_bytes_ -= bytes;
          free_.erase(std::next(it).base());
          break;
        }
    }
    if (!p) p = new std::uint8_t[bytes];
    return std::shared_ptr<std::uint8_t>(p, [this, bytes](std::uint8_t* q) { give_back(q, bytes); });
  }

 private:
  void give_back(std::uint8_t* p, std::size_t bytes) {
    std::lock_guard<std::mutex> lock(mutex_);
    if (bytes > kMaxKeptBytes / 4) {
      delete[] p;
      return;
    }
    free_.emplace_back(bytes, p);
    kept_bytes_ += bytes;
    while (kept_bytes_ > kMaxKeptBytes || free_.size() > kMaxKept) {  // drop the least recently returned
      kept_bytes_ -= free_.front().first;
      delete[] free_.front().second;
      free_.pop_front();
    }
  }
  static constexpr std::size_t kMaxKept = 256;
  static constexpr std::size_t kMaxKeptBytes = 128u << 20;
  std::mutex mutex_;
  std::deque<std::pair<std::size_t, std::uint8_t*>> free_;
  std::size_t kept_bytes_ = 0;
};

namespace {
std::shared_ptr<std::uint8_t> raw_buffer(BufferPool* pool, std::size_t bytes) {
  if (pool) return pool->get(bytes);
  return std::shared_ptr<std::uint8_t>(new std::uint8_t[std::max<std::size_t>(bytes, 1)], std::default_delete<std::uint8_t[]>());
}
}  // namespace

// One dataset read as a column of rows.
struct Table::Column {
  std::shared_ptr<File> file;
  std::string name, object;  // field name, dataset path
  Handle dataset;
  detail::ReadType type;
  FieldInfo info;
  std::int64_t rows = 0;
  std::int64_t row_elems = 1;
  std::size_t row_bytes = 0;

  [[noreturn]] void fail(const std::string& what) const {
    throw CorruptFileError(file->path, cat("reading dataset '", object, "': ", what, ": ", detail::last_error()));
  }

  // Direct row addressing through the file mapping: possible when rows are stored as raw bytes
  // identical to our memory layout (unfiltered, no type conversion, chunks spanning whole rows,
  // every chunk allocated). Computed once, on first use.
  bool direct() const {
    std::call_once(direct_once_, [this] { direct_ok_ = compute_direct(); });
    return direct_ok_;
  }
  const std::uint8_t* row_address(std::int64_t row) const {
    if (info.chunk_rows == 0) return map_base_ + base_addr_ + static_cast<std::size_t>(row) * row_bytes;
    std::int64_t k = row / info.chunk_rows;
    return map_base_ + chunk_addr_[static_cast<std::size_t>(k)] + static_cast<std::size_t>(row - k * info.chunk_rows) * row_bytes;
  }
  // Asks the kernel to read rows [begin, end) ahead of use (prefetch for a cold page cache).
  void will_need(std::int64_t begin, std::int64_t end) const {
    if (!direct() || end <= begin) return;
    const long page = sysconf(_SC_PAGESIZE);
    auto advise = [&](const std::uint8_t* from, const std::uint8_t* to) {
      auto lo = reinterpret_cast<std::uintptr_t>(from) & ~static_cast<std::uintptr_t>(page - 1);
      madvise(reinterpret_cast<void*>(lo), static_cast<std::size_t>(reinterpret_cast<std::uintptr_t>(to) - lo), MADV_WILLNEED);
    };
    if (info.chunk_rows == 0) {
      advise(row_address(begin), row_address(end - 1) + row_bytes);
      return;
    }
    for (std::int64_t r = begin; r < end;) {
      std::int64_t chunk_end = std::min(end, (r / info.chunk_rows + 1) * info.chunk_rows);
      advise(row_address(r), row_address(chunk_end - 1) + row_bytes);
      r = chunk_end;
    }
  }

 private:
  bool compute_direct() const {
    if (info.dtype == DType::string || row_bytes == 0 || rows == 0) return false;
    Handle ftype(H5Dget_type(dataset), H5Tclose);
    if (H5Tequal(ftype, type.memory_type) <= 0) return false;
    Handle dcpl(H5Dget_create_plist(dataset), H5Pclose);
    std::size_t file_size = 0;
    const std::uint8_t* base = nullptr;
    H5D_layout_t layout = H5Pget_layout(dcpl);
    if (layout == H5D_CONTIGUOUS) {
      haddr_t addr = H5Dget_offset(dataset);
      if (addr == HADDR_UNDEF) return false;
      base = file->mapping(file_size);
      if (!base || addr + static_cast<std::size_t>(rows) * row_bytes > file_size) return false;
      base_addr_ = addr;
    } else if (layout == H5D_CHUNKED) {
      if (H5Pget_nfilters(dcpl) != 0) return false;
      std::vector<hsize_t> chunk(info.inner.size() + 1);
      if (H5Pget_chunk(dcpl, static_cast<int>(chunk.size()), chunk.data()) < 0) return false;
      for (std::size_t i = 0; i < info.inner.size(); ++i)
        if (chunk[i + 1] != static_cast<hsize_t>(info.inner[i])) return false;  // rows split across chunks
      base = file->mapping(file_size);
      if (!base) return false;
      std::int64_t chunks = (rows + info.chunk_rows - 1) / info.chunk_rows;
      std::size_t chunk_bytes = static_cast<std::size_t>(info.chunk_rows) * row_bytes;
      // The table below is sized from the declared shape: a damaged or hostile file declaring
      // 2^40 rows must not make it terabytes. Whole chunks that cannot fit are not there.
      if (static_cast<double>(chunks) * static_cast<double>(chunk_bytes) > static_cast<double>(file_size)) return false;
      std::vector<hsize_t> coord(chunk.size(), 0);
      chunk_addr_.resize(static_cast<std::size_t>(chunks));
      for (std::int64_t k = 0; k < chunks; ++k) {
        coord[0] = static_cast<hsize_t>(k * info.chunk_rows);
        unsigned mask = 0;
        haddr_t addr = HADDR_UNDEF;
        hsize_t size = 0;
        if (H5Dget_chunk_info_by_coord(dataset, coord.data(), &mask, &addr, &size) < 0 || addr == HADDR_UNDEF ||
            size != chunk_bytes || addr + size > file_size) {
          H5Eclear2(H5E_DEFAULT);
          return false;
        }
        chunk_addr_[static_cast<std::size_t>(k)] = addr;
      }
    } else {
      return false;  // compact: tiny, read normally
    }
    map_base_ = base;
    return true;
  }

  mutable std::once_flag direct_once_;
  mutable bool direct_ok_ = false;
  mutable const std::uint8_t* map_base_ = nullptr;
  mutable std::uint64_t base_addr_ = 0;
  mutable std::vector<std::uint64_t> chunk_addr_;

 public:

  // Reads rows [begin, end) into dst (numeric) or appends to out (strings).
  void read(std::int64_t begin, std::int64_t end, void* dst, std::vector<std::string>* out) const {
    std::int64_t n = end - begin;
    if (n <= 0 || row_elems == 0) {
      if (out) out->resize(out->size() + static_cast<std::size_t>(n * row_elems));
      return;
    }
    detail::quiet();
    std::vector<hsize_t> start(info.inner.size() + 1, 0), count(info.inner.size() + 1);
    start[0] = static_cast<hsize_t>(begin);
    count[0] = static_cast<hsize_t>(n);
    for (std::size_t i = 0; i < info.inner.size(); ++i) count[i + 1] = static_cast<hsize_t>(info.inner[i]);
    Handle fspace(H5Dget_space(dataset), H5Sclose);
    if (!fspace.valid()) fail("no dataspace");
    if (H5Sselect_hyperslab(fspace, H5S_SELECT_SET, start.data(), nullptr, count.data(), nullptr) < 0)
      fail(cat("selecting rows [", begin, ",", end, ")"));
    Handle mspace(H5Screate_simple(static_cast<int>(count.size()), count.data(), nullptr), H5Sclose);
    std::size_t elems = static_cast<std::size_t>(n * row_elems);
    if (info.dtype != DType::string) {
      if (type.unsigned64) {
        bool overflow = false;
        Handle dxpl = detail::range_checked_transfer(&overflow);
        if (H5Dread(dataset, type.memory_type, mspace, fspace, dxpl, dst) >= 0) return;
        if (overflow)
          throw DataError(cat(file->path.string(), ": dataset '", object, "' holds unsigned 64-bit values >= 2^63 in rows [",
                              begin, ",", end, "), which embedflow's i64 cannot carry (store them as i64, or as strings)"));
        fail(cat("rows [", begin, ",", end, ")"));
      }
      if (H5Dread(dataset, type.memory_type, mspace, fspace, H5P_DEFAULT, dst) < 0)
        fail(cat("rows [", begin, ",", end, ")"));
      return;
    }
    if (type.vlen_string) {
      if (std::string why = detail::check_vlen_selection(dataset, mspace, fspace, elems); !why.empty())
        throw CorruptFileError(file->path, cat("reading dataset '", object, "': rows [", begin, ",", end, "): ", why));
      std::vector<char*> ptrs(elems, nullptr);
      if (H5Dread(dataset, type.memory_type, mspace, fspace, H5P_DEFAULT, ptrs.data()) < 0)
        fail(cat("rows [", begin, ",", end, ")"));
      out->reserve(out->size() + elems);
      for (char* p : ptrs) out->emplace_back(p ? p : "");
      H5Dvlen_reclaim(type.memory_type, mspace, H5P_DEFAULT, ptrs.data());
    } else {
      std::size_t size = type.fixed_string_size;
      std::vector<char> buf(elems * size);
      if (H5Dread(dataset, type.memory_type, mspace, fspace, H5P_DEFAULT, buf.data()) < 0)
        fail(cat("rows [", begin, ",", end, ")"));
      out->reserve(out->size() + elems);
      for (std::size_t i = 0; i < elems; ++i) {
        const char* p = buf.data() + i * size;
        std::size_t len = strnlen(p, size);
        while (len > 0 && p[len - 1] == ' ') --len;  // space-padded (Fortran-style) strings
        out->emplace_back(p, len);
      }
    }
  }

  // Rows of several ranges, concatenated into one array with the leading axis.
  Array read_ranges(const std::vector<std::pair<std::int64_t, std::int64_t>>& ranges, BufferPool* pool = nullptr) const {
    std::int64_t total = 0;
    for (const auto& [b, e] : ranges) total += e - b;
    Shape shape = info.inner;
    shape.insert(shape.begin(), total);
    if (info.dtype == DType::string) {
      std::vector<std::string> values;
      for (const auto& [b, e] : ranges) read(b, e, nullptr, &values);
      return Array::strings(std::move(values)).reshape(shape);
    }
    auto buf = raw_buffer(pool, static_cast<std::size_t>(total) * row_bytes);
    std::uint8_t* dst = buf.get();
    for (const auto& [b, e] : ranges) {
      read(b, e, dst, nullptr);
      dst += static_cast<std::size_t>(e - b) * row_bytes;
    }
    std::uint8_t* p = buf.get();
    return Array::wrap(info.dtype, std::move(shape), p, std::shared_ptr<const void>(std::move(buf), p));
  }
};

namespace {

// Whether the chunk holding `coord` is allocated in the file.
bool chunk_stored(hid_t dataset, const std::vector<hsize_t>& coord) {
  unsigned mask = 0;
  haddr_t addr = HADDR_UNDEF;
  hsize_t size = 0;
  if (H5Dget_chunk_info_by_coord(dataset, coord.data(), &mask, &addr, &size) < 0) {
    H5Eclear2(H5E_DEFAULT);
    return false;
  }
  return addr != HADDR_UNDEF && size > 0;
}

std::shared_ptr<Table::Column> open_column(const std::shared_ptr<File>& file, hid_t parent, const std::string& name,
                                           const std::string& object) {
  auto c = std::make_shared<Table::Column>();
  c->file = file;
  c->name = name;
  c->object = object;
  Handle dapl(H5Pcreate(H5P_DATASET_ACCESS), H5Pclose);
  c->dataset = Handle(H5Dopen2(parent, name.c_str(), H5P_DEFAULT), H5Dclose);
  if (!c->dataset.valid()) throw CorruptFileError(file->path, cat("cannot open dataset '", object, "': ", detail::last_error()));
  Handle ftype(H5Dget_type(c->dataset), H5Tclose);
  std::string why;
  auto rt = detail::read_type_for(ftype, why);
  if (!rt) throw DataError(cat(file->path.string(), ": dataset '", object, "' has ", why, ", which embedflow cannot read"));
  c->type = std::move(*rt);
  Handle space(H5Dget_space(c->dataset), H5Sclose);
  int rank = H5Sget_simple_extent_ndims(space);
  if (rank < 1)
    throw DataError(cat(file->path.string(), ": dataset '", object, "' is a scalar; a table column needs a leading axis"));
  std::vector<hsize_t> dims(static_cast<std::size_t>(rank));
  H5Sget_simple_extent_dims(space, dims.data(), nullptr);
  c->rows = static_cast<std::int64_t>(dims[0]);
  c->info.name = name;
  c->info.dtype = c->type.dtype;
  for (int i = 1; i < rank; ++i) c->info.inner.push_back(static_cast<std::int64_t>(dims[static_cast<std::size_t>(i)]));
  c->row_elems = shape_numel(c->info.inner);
  c->row_bytes = static_cast<std::size_t>(c->row_elems) * dtype_size(c->info.dtype);
  Handle dcpl(H5Dget_create_plist(c->dataset), H5Pclose);
  bool filtered = false;
  if (H5Pget_layout(dcpl) == H5D_CHUNKED) {
    std::vector<hsize_t> chunk(static_cast<std::size_t>(rank));
    H5Pget_chunk(dcpl, rank, chunk.data());
    c->info.chunk_rows = static_cast<std::int64_t>(chunk[0]);
    filtered = H5Pget_nfilters(dcpl) > 0;
    // Slabs cover whole chunks, so unfiltered chunks are read straight into our buffers; the
    // chunk cache would add a copy. Filtered chunks must be cached (decompressed once even when
    // a slab ends inside one).
    // Variable-length strings hold a 16-byte heap reference per element in the chunk.
    std::size_t stored_row_bytes = c->info.dtype == DType::string ? static_cast<std::size_t>(c->row_elems) * 16 : c->row_bytes;
    std::size_t chunk_bytes = static_cast<std::size_t>(c->info.chunk_rows) * stored_row_bytes;
    Handle access(H5Pcreate(H5P_DATASET_ACCESS), H5Pclose);
    H5Pset_chunk_cache(access, 521, filtered ? 4 * chunk_bytes + 4096 : 0, 1.0);
    // Re-open with the access list. The first handle must be closed before: while a dataset is
    // open, HDF5 shares its state (and first chunk-cache setting) with every further open.
    c->dataset.reset();
    c->dataset = Handle(H5Dopen2(parent, name.c_str(), access), H5Dclose);
    if (!c->dataset.valid()) throw CorruptFileError(file->path, cat("cannot open dataset '", object, "': ", detail::last_error()));
  }
  // Filtered chunks have no fixed stored size, so look the last declared one up instead: a
  // writer fills chunks in order, and a compressed 2^40-row declaration would stream zeros.
  if (filtered && c->rows > 0) {
    std::vector<hsize_t> chunk(static_cast<std::size_t>(rank)), last(static_cast<std::size_t>(rank));
    H5Pget_chunk(dcpl, rank, chunk.data());
    for (std::size_t k = 0; k < last.size(); ++k)
      last[k] = dims[k] > 0 && chunk[k] > 0 ? (dims[k] - 1) / chunk[k] * chunk[k] : 0;
    if (!chunk_stored(c->dataset, last))
      throw CorruptFileError(file->path, cat("dataset '", object, "' declares ", c->rows,
                                             " rows but does not store the chunk at row ", last[0], ": truncated or damaged"));
  }
  // Unallocated chunks read back as fill values: rows a file declares but does not store would
  // arrive as zeros. Unfiltered fixed-size data must be stored whole.
  if (!filtered && c->info.dtype != DType::string && c->rows > 0) {
    Handle stored_type(H5Dget_type(c->dataset), H5Tclose);  // the file's element size (f16 is read as f32)
    double declared = static_cast<double>(c->rows) * static_cast<double>(c->row_elems) *
                      static_cast<double>(H5Tget_size(stored_type));
    double stored = static_cast<double>(H5Dget_storage_size(c->dataset));
    if (stored < declared)
      throw CorruptFileError(file->path, cat("dataset '", object, "' declares ", c->rows, " rows (", declared,
                                             " bytes) but stores ", stored, " bytes: truncated or damaged"));
  }
  return c;
}

struct LinkList {
  std::vector<std::string> datasets, groups;
};
// H5Iget_type on an opened object works the same on HDF5 1.10 and 1.12 (whose H5O_info differ).
H5I_type_t object_kind(hid_t loc, const char* name) {
  Handle obj(H5Oopen(loc, name, H5P_DEFAULT), H5Oclose);
  if (!obj.valid()) {
    H5Eclear2(H5E_DEFAULT);
    return H5I_BADID;
  }
  return H5Iget_type(obj);
}

herr_t list_link(hid_t group, const char* name, const H5L_info_t*, void* data) {
  auto* out = static_cast<LinkList*>(data);
  H5I_type_t kind = object_kind(group, name);
  if (kind == H5I_DATASET) out->datasets.emplace_back(name);
  else if (kind == H5I_GROUP) out->groups.emplace_back(name);
  return 0;
}

LinkList list_group(hid_t group) {
  LinkList l;
  hsize_t idx = 0;
  H5Literate(group, H5_INDEX_NAME, H5_ITER_INC, &idx, list_link, &l);
  return l;
}

std::vector<std::int64_t> read_i64_column(const Table::Column& c) {
  std::vector<std::int64_t> v(static_cast<std::size_t>(c.rows));
  if (c.rows > 0) c.read(0, c.rows, v.data(), nullptr);
  return v;
}

}  // namespace

// ----------------------------------------------------------------------------------- Table

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

namespace {
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
}  // namespace

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

// ---------------------------------------------------------------------------------- Cursor

namespace {

// Rows of every selected column for one load (a run of blocks), concatenated.
// Rows of every selected column for one contiguous block of the file.
struct Slab {
  std::vector<Array> columns;
};
using SlabPtr = std::shared_ptr<const Slab>;
// A load's blocks, one slab each: separate chunk-sized buffers rather than one window-sized
// one, so they recycle through the buffer pool.
using LoadData = std::vector<SlabPtr>;

// One read: blocks (row ranges) to fetch, and the units to return from them, in order. A unit
// is [begin, end) rows within one block.
struct Unit {
  std::uint32_t block;
  std::int64_t begin, end;
};
struct Load {
  std::vector<std::pair<std::int64_t, std::int64_t>> ranges;
  std::vector<Unit> units;
};

}  // namespace

struct Cursor::Impl {
  std::shared_ptr<const Table> table;  // a copy: keeps columns and file open
  std::vector<std::size_t> columns;
  std::vector<std::string> names;
  ReadOptions options;
  bool slice_records = false;  // units are stored batches (slice) rather than single rows
  std::vector<Load> loads;
  BufferPool* pool = &BufferPool::instance();
  // Prefetch: one worker reads loads in order into `ready`, at most kDepth ahead.
  static constexpr std::size_t kDepth = 2;
  std::thread worker;
  std::mutex mutex;
  std::condition_variable changed;
  std::deque<LoadData> ready;
  std::exception_ptr failure;
  bool stopping = false;
  std::size_t next_load = 0;  // next load the consumer takes (without prefetch: reads)
  LoadData slab;
  std::size_t current_load = 0;
  std::size_t unit_in_load = 0;
  std::int64_t total_units = 0, returned = 0, total_out = 0;
  // Columns gathered straight from the file mapping (shuffled batches), parallel to `columns`.
  std::vector<bool> mapped;
  bool any_mapped = false;
  // Rows collected for the batch being built.
  struct Pending {
    SlabPtr slab;
    std::int64_t row;     // within the slab
    std::int64_t global;  // within the table
  };
  std::vector<Pending> pending;

  ~Impl() {
    if (worker.joinable()) {
      {
        std::lock_guard<std::mutex> lock(mutex);
        stopping = true;
      }
      changed.notify_all();
      worker.join();
    }
  }

  LoadData read_load(std::size_t i) const {
    LoadData blocks;
    for (const auto& range : loads[i].ranges) {
      auto s = std::make_shared<Slab>();
      for (std::size_t i = 0; i < columns.size(); ++i) {
        const Table::Column& col = *table->columns_[columns[i]];
        if (mapped[i]) {
          col.will_need(range.first, range.second);
          s->columns.emplace_back();
        } else {
          s->columns.push_back(col.read_ranges({range}, pool));
        }
      }
      blocks.push_back(std::move(s));
    }
    return blocks;
  }

  void start_prefetch() {
    if (!options.prefetch || loads.size() < 2) return;
    worker = std::thread([this] {
      try {
        for (std::size_t i = 0; i < loads.size(); ++i) {
          {
            std::unique_lock<std::mutex> lock(mutex);
            changed.wait(lock, [this] { return stopping || ready.size() < kDepth; });
            if (stopping) return;
          }
          LoadData s = read_load(i);
          {
            std::lock_guard<std::mutex> lock(mutex);
            ready.push_back(std::move(s));
          }
          changed.notify_all();
        }
      } catch (...) {
        std::lock_guard<std::mutex> lock(mutex);
        failure = std::current_exception();
        changed.notify_all();
      }
    });
  }

  // Advances to the next load; false at the end.
  bool advance() {
    slab.clear();  // lets its buffers return to the pool once emitted records are dropped
    if (next_load >= loads.size()) return false;
    if (!worker.joinable()) {
      slab = read_load(next_load);
    } else {
      std::unique_lock<std::mutex> lock(mutex);
      changed.wait(lock, [this] { return !ready.empty() || failure; });
      if (ready.empty()) std::rethrow_exception(failure);
      slab = std::move(ready.front());
      ready.pop_front();
      lock.unlock();
      changed.notify_all();
    }
    current_load = next_load++;
    unit_in_load = 0;
    return true;
  }

  Record make_slice(const Slab& s, std::int64_t b, std::int64_t e) const {
    Record r;
    for (std::size_t i = 0; i < names.size(); ++i) r.set(names[i], s.columns[i].slice(b, e));
    return r;
  }

  Record make_row(const Slab& s, std::int64_t row) const {
    Record r;
    for (std::size_t i = 0; i < names.size(); ++i) r.set(names[i], s.columns[i].row(row));
    return r;
  }

  // Copies the pending rows into one batch (used when they are not one contiguous slice).
  Record gather() const {
    Record r;
    auto n = static_cast<std::int64_t>(pending.size());
    for (std::size_t i = 0; i < names.size(); ++i) {
      const Table::Column& col = *table->columns_[columns[i]];
      Shape shape = col.info.inner;
      shape.insert(shape.begin(), n);
      if (col.info.dtype == DType::string) {
        const Array& proto = pending[0].slab->columns[i];
        std::int64_t per_row = proto.dim(0) ? proto.numel() / proto.dim(0) : 0;
        std::vector<std::string> values;
        values.reserve(static_cast<std::size_t>(n * per_row));
        for (const auto& p : pending)
          for (std::int64_t k = 0; k < per_row; ++k) values.push_back(p.slab->columns[i].string_at(p.row * per_row + k));
        r.set(names[i], Array::strings(std::move(values)).reshape(shape));
        continue;
      }
      std::size_t row_bytes = col.row_bytes;
      auto buf = raw_buffer(pool, static_cast<std::size_t>(n) * row_bytes);
      std::uint8_t* dst = buf.get();
      auto source = [&](std::size_t k) {
        if (mapped[i]) return col.row_address(pending[k].global);
        return static_cast<const std::uint8_t*>(pending[k].slab->columns[i].raw()) +
               static_cast<std::size_t>(pending[k].row) * row_bytes;
      };
      if (row_bytes == 8) {  // labels, ids: a fixed-size copy the compiler inlines
        for (std::size_t k = 0; k < pending.size(); ++k, dst += 8) std::memcpy(dst, source(k), 8);
      } else {
        // Rows come from random places in a window larger than the CPU caches; prefetching a
        // few rows ahead hides most of the memory latency that dominates shuffled replay.
        constexpr std::size_t kAhead = 8;
        for (std::size_t k = 0; k < pending.size(); ++k, dst += row_bytes) {
          if (k + kAhead < pending.size() && row_bytes >= 64) {
            const std::uint8_t* next = source(k + kAhead);
            for (std::size_t off = 0; off < row_bytes; off += 64) __builtin_prefetch(next + off);
          }
          std::memcpy(dst, source(k), row_bytes);
        }
      }
      std::uint8_t* p = buf.get();
      r.set(names[i], Array::wrap(col.info.dtype, shape, p, std::shared_ptr<const void>(std::move(buf), p)));
    }
    return r;
  }

  Record take_batch() {
    bool contiguous = !any_mapped;
    for (std::size_t k = 1; k < pending.size() && contiguous; ++k)
      contiguous = pending[k].slab == pending[0].slab && pending[k].row == pending[k - 1].row + 1;
    Record r = contiguous ? make_slice(*pending[0].slab, pending[0].row, pending[0].row + static_cast<std::int64_t>(pending.size()))
                          : gather();
    pending.clear();
    return r;
  }

  RecordPtr next() {
    std::int64_t batch = options.batch_size;
    for (;;) {
      if (slab.empty() || unit_in_load >= loads[current_load].units.size()) {
        if (!advance()) break;
        continue;
      }
      const Unit& u = loads[current_load].units[unit_in_load++];
      const SlabPtr& block = slab[u.block];
      if (batch == 0) {
        ++returned;
        return share(slice_records ? make_slice(*block, u.begin, u.end) : make_row(*block, u.begin));
      }
      pending.push_back(Pending{block, u.begin, loads[current_load].ranges[u.block].first + u.begin});
      if (static_cast<std::int64_t>(pending.size()) == batch) {
        ++returned;
        return share(take_batch());
      }
    }
    if (!pending.empty() && !options.drop_last) {
      ++returned;
      return share(take_batch());
    }
    pending.clear();
    slab.clear();
    return nullptr;
  }

  void plan() {
    const Table& t = *table;
    // Shuffled batches copy every row anyway: copy it once, from the page cache, rather than
    // reading blocks into buffers and copying again.
    for (std::size_t c : columns) {
      bool m = options.shuffle && options.batch_size > 0 && t.columns_[c]->direct();
      mapped.push_back(m);
      any_mapped = any_mapped || m;
    }
    slice_records = options.batch_size == 0 && t.has_records() && t.layout() == Layout::batches;
    // Units: records when replaying stored batches, rows otherwise.
    std::int64_t available = slice_records ? t.records() : t.rows();
    std::int64_t start = std::clamp<std::int64_t>(options.start, 0, available);
    std::int64_t stop = options.stop < 0 ? available : std::clamp<std::int64_t>(options.stop, start, available);
    auto unit_rows = [&](std::int64_t u) -> std::pair<std::int64_t, std::int64_t> {
      return slice_records ? std::make_pair(t.record_begin(u), t.record_end(u)) : std::make_pair(u, u + 1);
    };
    std::size_t row_bytes = 0;
    std::int64_t chunk_rows = 0;
    std::size_t widest = 0;
    for (std::size_t c : columns) {
      const auto& col = *t.columns_[c];
      std::size_t rb = col.info.dtype == DType::string ? static_cast<std::size_t>(col.row_elems) * 16 : col.row_bytes;
      row_bytes += rb;
      if (rb >= widest) {
        widest = rb;
        chunk_rows = col.info.chunk_rows;
      }
    }
    row_bytes = std::max<std::size_t>(row_bytes, 1);
    // Sequential: slabs of about slab_bytes. Shuffled: blocks of whole chunks of the widest
    // column (at least 256 KiB), so each block is one contiguous run of chunks on disk.
    std::int64_t target_rows = std::max<std::int64_t>(1, static_cast<std::int64_t>(options.slab_bytes / row_bytes));
    if (options.shuffle) {
      std::int64_t min_rows = std::max<std::int64_t>(1, static_cast<std::int64_t>((256u << 10) / row_bytes));
      std::int64_t c = chunk_rows > 0 ? chunk_rows : min_rows;
      target_rows = ((std::max(min_rows, c) + c - 1) / c) * c;
    }
    // Blocks: [unit_begin, unit_end), cut at multiples of target_rows (aligned to the dataset,
    // not to `start`, so they coincide with chunk boundaries).
    std::vector<std::pair<std::int64_t, std::int64_t>> blocks;
    for (std::int64_t u = start; u < stop;) {
      std::int64_t first_row = unit_rows(u).first;
      std::int64_t limit = (first_row / target_rows + 1) * target_rows;
      std::int64_t v = u + 1;
      while (v < stop && unit_rows(v).second <= limit) ++v;
      blocks.emplace_back(u, v);
      u = v;
    }
    total_units = stop - start;
    if (!options.shuffle) {
      for (const auto& [ub, ue] : blocks) {
        Load l;
        std::int64_t base = unit_rows(ub).first;
        l.ranges.emplace_back(base, unit_rows(ue - 1).second);
        for (std::int64_t u = ub; u < ue; ++u) {
          auto [rb, re] = unit_rows(u);
          l.units.push_back(Unit{0, rb - base, re - base});
        }
        loads.push_back(std::move(l));
      }
    } else {
      Rng rng(options.seed);
      std::shuffle(blocks.begin(), blocks.end(), rng);
      std::int64_t window_units = options.shuffle_window;
      if (window_units <= 0) window_units = std::max<std::int64_t>(1, static_cast<std::int64_t>((16u << 20) / row_bytes));
      for (std::size_t i = 0; i < blocks.size();) {
        Load l;
        std::int64_t units = 0;
        // A window takes whole blocks until it holds window_units units (at least one block).
        while (i < blocks.size() && (units == 0 || units + (blocks[i].second - blocks[i].first) <= window_units)) {
          auto [ub, ue] = blocks[i++];
          std::int64_t base = unit_rows(ub).first;
          std::int64_t end = unit_rows(ue - 1).second;
          l.ranges.emplace_back(base, end);
          for (std::int64_t u = ub; u < ue; ++u) {
            auto [rb, re] = unit_rows(u);
            l.units.push_back(Unit{static_cast<std::uint32_t>(l.ranges.size() - 1), rb - base, re - base});
          }
          units += ue - ub;
        }
        std::shuffle(l.units.begin(), l.units.end(), rng);
        loads.push_back(std::move(l));
      }
    }
    if (options.batch_size > 0) {
      total_out = total_units / options.batch_size + (!options.drop_last && total_units % options.batch_size ? 1 : 0);
    } else {
      total_out = total_units;
    }
    start_prefetch();
  }
};

Cursor Table::cursor(ReadOptions options) const {
  if (options.batch_size < 0) throw ConfigError(cat(file_->path.string(), ": batch_size must be >= 0"));
  auto impl = std::make_unique<Cursor::Impl>();
  impl->table = std::make_shared<const Table>(*this);
  impl->columns = select_columns(*this, options.fields);
  for (std::size_t c : impl->columns) impl->names.push_back(fields_[c].name);
  impl->options = std::move(options);
  impl->plan();
  return Cursor(std::move(impl));
}

Cursor::Cursor(std::unique_ptr<Impl> impl) : impl_(std::move(impl)) {}
Cursor::Cursor(Cursor&&) noexcept = default;
Cursor& Cursor::operator=(Cursor&&) noexcept = default;
Cursor::~Cursor() = default;
RecordPtr Cursor::next() { return impl_->next(); }
std::int64_t Cursor::units() const { return impl_->total_out; }
std::int64_t Cursor::returned() const { return impl_->returned; }

// ------------------------------------------------------------------------- open_table etc.

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
