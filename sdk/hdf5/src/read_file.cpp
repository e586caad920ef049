// Opening HDF5 files for reading (read_file.hpp): File's mapping, open_file's checks, group listings.

#include "read_file.hpp"

#include <fcntl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include "embedflow/file_kind.hpp"

namespace embedflow::hdf5 {
using detail::Handle;
namespace fs = std::filesystem;

const char* hdf5_version() { return H5_VERSION; }

File::~File() {
  if (map_ && map_ != MAP_FAILED) munmap(map_, map_size_);
}

const std::uint8_t* File::mapping(std::size_t& size) {
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

namespace detail {

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

// H5Iget_type on an opened object works the same on HDF5 1.10 and 1.12 (whose H5O_info differ).
H5I_type_t object_kind(hid_t loc, const char* name) {
  Handle obj(H5Oopen(loc, name, H5P_DEFAULT), H5Oclose);
  if (!obj.valid()) {
    H5Eclear2(H5E_DEFAULT);
    return H5I_BADID;
  }
  return H5Iget_type(obj);
}

namespace {
herr_t list_link(hid_t group, const char* name, const H5L_info_t*, void* data) {
  auto* out = static_cast<LinkList*>(data);
  H5I_type_t kind = object_kind(group, name);
  if (kind == H5I_DATASET) out->datasets.emplace_back(name);
  else if (kind == H5I_GROUP) out->groups.emplace_back(name);
  return 0;
}
}  // namespace

LinkList list_group(hid_t group) {
  LinkList l;
  hsize_t idx = 0;
  H5Literate(group, H5_INDEX_NAME, H5_ITER_INC, &idx, list_link, &l);
  return l;
}

}  // namespace detail
}  // namespace embedflow::hdf5
