// Reading's view of an HDF5 file: File (open read-only, shared by tables and cursors, with a
// read-only mapping for direct row copies), opening one with precise errors, and listing a group's
// datasets and subgroups. Private to embedflow_hdf5.
#pragma once

#include <cstdint>
#include <filesystem>
#include <memory>
#include <mutex>
#include <atomic>
#include <string>
#include <vector>

#include "h5util.hpp"

namespace embedflow::hdf5 {

class File {
 public:
  File(std::filesystem::path p, detail::Handle h) : path(std::move(p)), handle(std::move(h)) {}
  ~File();
  std::filesystem::path path;
  detail::Handle handle;

  // The whole file mapped read-only, or null when mapping fails. Shuffled batches copy rows
  // straight out of the page cache through it instead of reading blocks and copying again.
  // Only ever used to copy out (never handed to records), so a file replaced meanwhile cannot
  // fault a consumer; files at final names are replaced by rename, never truncated.
  const std::uint8_t* mapping(std::size_t& size);

  // Reads skip the filters' error detection (Fletcher32): the file's checksums were verified and
  // it has not changed since (StreamFileReader::skip_checksums).
  std::atomic<bool> skip_checksums{false};

 private:
  std::once_flag map_once_;
  void* map_ = nullptr;
  std::size_t map_size_ = 0;
};

namespace detail {

// Opens read-only. A missing file is a DataError; an unopenable one a CorruptFileError.
std::shared_ptr<File> open_file(const std::filesystem::path& path);

// "a, b, c" for messages; "(none)" when empty.
std::string join_names(const std::vector<std::string>& names);

struct LinkList {
  std::vector<std::string> datasets, groups;
};
// H5I_DATASET, H5I_GROUP, ... for the object `name` under `loc`; H5I_BADID when it does not open.
H5I_type_t object_kind(hid_t loc, const char* name);
// The datasets and groups directly under `group`, in name order.
LinkList list_group(hid_t group);

}  // namespace detail
}  // namespace embedflow::hdf5
