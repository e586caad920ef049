// One dataset read as a column of rows (Table::Column): direct row addressing through the file
// mapping, reads of row ranges, and opening one with its checks against storage a damaged file
// declares but does not hold. Private to embedflow_hdf5.
#pragma once

#include <cstdint>
#include <memory>
#include <mutex>
#include <string>
#include <utility>
#include <vector>

#include "buffer_pool.hpp"
#include "embedflow/hdf5/stream_file.hpp"
#include "h5util.hpp"
#include "read_file.hpp"

namespace embedflow::hdf5 {

// One dataset read as a column of rows.
struct Table::Column {
  std::shared_ptr<File> file;
  std::string name, object;  // field name, dataset path
  detail::Handle dataset;
  detail::ReadType type;
  FieldInfo info;
  std::int64_t rows = 0;
  std::int64_t row_elems = 1;
  std::size_t row_bytes = 0;
  bool filtered = false;  // chunks pass through a filter (deflate, Fletcher32): read whole

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
  void will_need(std::int64_t begin, std::int64_t end) const;

  // Reads rows [begin, end) into dst (numeric) or appends to out (strings).
  void read(std::int64_t begin, std::int64_t end, void* dst, std::vector<std::string>* out) const;

  using Ranges = std::vector<std::pair<std::int64_t, std::int64_t>>;
  // Rows of several ranges, concatenated into one array with the leading axis. Ascending ranges
  // are read in spans (see spans()); each span is one hyperslab read.
  Array read_ranges(const Ranges& ranges, BufferPool* pool = nullptr) const;
  // Ascending ranges grouped into the spans worth one read each: ranges whose gap holds no byte
  // the storage would not fetch anyway are merged, i.e. that share a chunk of a filtered column
  // (HDF5 decompresses whole chunks), or lie less than a page apart otherwise (the kernel reads
  // whole pages). Each span is [first, last) of `ranges` with its row range.
  struct Span {
    std::size_t first, last;
    std::int64_t begin, end;
  };
  std::vector<Span> spans(const Ranges& ranges) const;

 private:
  bool compute_direct() const;

  mutable std::once_flag direct_once_;
  mutable bool direct_ok_ = false;
  mutable const std::uint8_t* map_base_ = nullptr;
  mutable std::uint64_t base_addr_ = 0;
  mutable std::vector<std::uint64_t> chunk_addr_;
};

namespace detail {

// Whether the chunk holding `coord` is allocated in the file.
bool chunk_stored(hid_t dataset, const std::vector<hsize_t>& coord);

// Opens dataset `name` of `parent` (`object`: its path, for messages) as a column. DataError for a
// type embedflow cannot read or a scalar; CorruptFileError when it declares rows it does not store.
std::shared_ptr<Table::Column> open_column(const std::shared_ptr<File>& file, hid_t parent, const std::string& name,
                                           const std::string& object);

// The indices in t.fields() of `fields` in their order (all when empty); ConfigError naming the
// fields for an unknown one.
std::vector<std::size_t> select_columns(const Table& t, const std::vector<std::string>& fields);

}  // namespace detail
}  // namespace embedflow::hdf5
