// Reading a dataset as a column (column.hpp): direct addressing through the mapping, row ranges
// (numbers, variable- and fixed-length strings), and opening a column with its storage checks.

#include "column.hpp"

#include <algorithm>
#include <cstring>

#include <sys/mman.h>
#include <unistd.h>

namespace embedflow::hdf5 {
using detail::Handle;
namespace fs = std::filesystem;

void Table::Column::will_need(std::int64_t begin, std::int64_t end) const {
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

bool Table::Column::compute_direct() const {
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

void Table::Column::read(std::int64_t begin, std::int64_t end, void* dst, std::vector<std::string>* out) const {
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
    Handle unchecked = file->skip_checksums.load(std::memory_order_relaxed) ? detail::unchecked_transfer() : Handle();
    if (H5Dread(dataset, type.memory_type, mspace, fspace, unchecked.valid() ? hid_t(unchecked) : H5P_DEFAULT, dst) < 0)
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

std::vector<Table::Column::Span> Table::Column::spans(const Ranges& ranges) const {
  constexpr std::size_t kPage = 4096;
  std::vector<Span> out;
  for (std::size_t k = 0; k < ranges.size(); ++k) {
    const auto [b, e] = ranges[k];
    if (!out.empty()) {
      Span& s = out.back();
      const bool same_chunk = filtered && info.chunk_rows > 0 && (s.end - 1) / info.chunk_rows >= b / info.chunk_rows;
      const std::size_t stored = info.dtype == DType::string ? static_cast<std::size_t>(row_elems) * 16 : row_bytes;
      const bool near = !filtered && static_cast<std::size_t>(b - s.end) * stored < kPage;
      if (b >= s.end && (same_chunk || near)) {
        s.last = k + 1;
        s.end = e;
        continue;
      }
    }
    out.push_back(Span{k, k + 1, b, e});
  }
  return out;
}

Array Table::Column::read_ranges(const Ranges& ranges, BufferPool* pool) const {
  std::int64_t total = 0;
  bool ascending = true;
  for (std::size_t k = 0; k < ranges.size(); ++k) {
    total += ranges[k].second - ranges[k].first;
    if (k > 0 && ranges[k].first < ranges[k - 1].second) ascending = false;
  }
  // One read per span; a span holding several ranges is read whole and the ranges copied out.
  // (One H5Dread over the union of the ranges' hyperslabs would read only their rows, but
  // HDF5 1.10.8 reads such a selection much more slowly than the same rows as spans.)
  std::vector<Span> plan;
  if (ascending) plan = spans(ranges);
  else
    for (std::size_t k = 0; k < ranges.size(); ++k) plan.push_back(Span{k, k + 1, ranges[k].first, ranges[k].second});
  Shape shape = info.inner;
  shape.insert(shape.begin(), total);
  if (info.dtype == DType::string) {
    std::vector<std::string> values;
    values.reserve(static_cast<std::size_t>(total * row_elems));
    for (const Span& s : plan) {
      if (s.last - s.first == 1) {
        read(s.begin, s.end, nullptr, &values);
        continue;
      }
      std::vector<std::string> span;
      read(s.begin, s.end, nullptr, &span);
      for (std::size_t k = s.first; k < s.last; ++k)
        for (std::int64_t i = (ranges[k].first - s.begin) * row_elems; i < (ranges[k].second - s.begin) * row_elems; ++i)
          values.push_back(std::move(span[static_cast<std::size_t>(i)]));
    }
    return Array::strings(std::move(values)).reshape(shape);
  }
  auto buf = detail::raw_buffer(pool, static_cast<std::size_t>(total) * row_bytes);
  std::uint8_t* dst = buf.get();
  std::vector<std::uint8_t> scratch;
  for (const Span& s : plan) {
    if (s.last - s.first == 1) {
      read(s.begin, s.end, dst, nullptr);
      dst += static_cast<std::size_t>(s.end - s.begin) * row_bytes;
      continue;
    }
    scratch.resize(static_cast<std::size_t>(s.end - s.begin) * row_bytes);
    read(s.begin, s.end, scratch.data(), nullptr);
    for (std::size_t k = s.first; k < s.last; ++k) {
      const std::size_t n = static_cast<std::size_t>(ranges[k].second - ranges[k].first) * row_bytes;
      std::memcpy(dst, scratch.data() + static_cast<std::size_t>(ranges[k].first - s.begin) * row_bytes, n);
      dst += n;
    }
  }
  std::uint8_t* p = buf.get();
  return Array::wrap(info.dtype, std::move(shape), p, std::shared_ptr<const void>(std::move(buf), p));
}

namespace detail {

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
    c->filtered = filtered;
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

}  // namespace detail
}  // namespace embedflow::hdf5
