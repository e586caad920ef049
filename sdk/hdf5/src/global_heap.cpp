// Checks the global-heap references of variable-length strings before libhdf5 follows them.
//
// A variable-length string is stored as a reference (length, heap collection address, object
// index) into a "global heap collection" elsewhere in the file. libhdf5 1.10 trusts that
// collection: a free-space object of size 0 makes its parser loop forever, and an object larger
// than the string's recorded length is copied past the end of the buffer sized for it. So before
// any variable-length string is read from a file opened read-only, its raw references are read
// through a conversion that stops short of the heap (to an opaque type, below), every collection
// they name is parsed here against the file's real bytes with the same rules libhdf5 applies, and
// only a sound set of references is handed on to libhdf5.
#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cstring>
#include <map>

#include "h5util.hpp"

namespace embedflow::hdf5::detail {
namespace {

// One variable-length element as stored: the string's length and where its bytes live.
struct HeapRef {
  std::uint32_t length = 0;
  std::uint32_t index = 0;
  std::uint64_t collection = 0;  // file address; 0 for a null string
};
static_assert(sizeof(HeapRef) == 16);

constexpr const char* kRawTag = "embedflow.vlen_heap_reference";

std::uint64_t decode_le(const std::uint8_t* p, std::size_t n) {
  std::uint64_t v = 0;
  for (std::size_t i = n; i-- > 0;) v = (v << 8) | p[i];
  return v;
}

// Soft conversion from a variable-length string in its file encoding (u32 length, address of
// sizeof_addr bytes, u32 index) to a HeapRef, without touching the heap.
herr_t convert_to_heap_refs(hid_t src, hid_t dst, H5T_cdata_t* cdata, size_t nelmts, size_t buf_stride, size_t,
                            void* buf, void*, hid_t) {
  switch (cdata->command) {
    case H5T_CONV_INIT: {
      if (H5Tis_variable_str(src) <= 0 || H5Tget_class(dst) != H5T_OPAQUE) return -1;
      char* tag = H5Tget_tag(dst);
      bool ours = tag && std::strcmp(tag, kRawTag) == 0;
      H5free_memory(tag);
      if (!ours) return -1;
      cdata->need_bkg = H5T_BKG_NO;
      return 0;
    }
    case H5T_CONV_FREE: return 0;
    case H5T_CONV_CONV: {
      std::size_t src_size = H5Tget_size(src), dst_size = H5Tget_size(dst);
      // Only the file encoding carries an address; a string already in memory has none to check.
      if (src_size < 12 || src_size > 16 || dst_size != sizeof(HeapRef)) return -1;
      std::size_t addr_size = src_size - 8;
      std::size_t src_step = buf_stride ? buf_stride : src_size;
      std::size_t dst_step = buf_stride ? buf_stride : dst_size;
      auto* bytes = static_cast<std::uint8_t*>(buf);
      auto convert_one = [&](std::size_t i) {
        std::uint8_t raw[16];
        std::memcpy(raw, bytes + i * src_step, src_size);
        HeapRef r;
        r.length = static_cast<std::uint32_t>(decode_le(raw, 4));
        r.collection = decode_le(raw + 4, addr_size);
        r.index = static_cast<std::uint32_t>(decode_le(raw + 4 + addr_size, 4));
        std::memcpy(bytes + i * dst_step, &r, sizeof r);
      };
      // In place: grow from the back, shrink from the front, so no element is overwritten unread.
      if (dst_step > src_step)
        for (std::size_t i = nelmts; i-- > 0;) convert_one(i);
      else
        for (std::size_t i = 0; i < nelmts; ++i) convert_one(i);
      return 0;
    }
    default: return -1;
  }
}

// The memory type that receives HeapRefs; registering its conversion once per process.
hid_t heap_ref_type() {
  static hid_t type = [] {
    hid_t t = H5Tcreate(H5T_OPAQUE, sizeof(HeapRef));
    H5Tset_tag(t, kRawTag);
    hid_t vlen_string = H5Tcopy(H5T_C_S1);
    H5Tset_size(vlen_string, H5T_VARIABLE);
    H5Tregister(H5T_PERS_SOFT, "embedflow_vlen_heap_refs", vlen_string, t, convert_to_heap_refs);
    H5Tclose(vlen_string);
    return t;
  }();
  return type;
}

// The file's bytes, read through a descriptor of its own.
class RawFile {
 public:
  explicit RawFile(const std::string& path) : fd_(::open(path.c_str(), O_RDONLY | O_CLOEXEC)) {
    struct stat st{};
    if (fd_ >= 0 && ::fstat(fd_, &st) == 0) size_ = static_cast<std::uint64_t>(st.st_size);
  }
  ~RawFile() {
    if (fd_ >= 0) ::close(fd_);
  }
  RawFile(const RawFile&) = delete;
  RawFile& operator=(const RawFile&) = delete;
  bool ok() const { return fd_ >= 0; }
  std::uint64_t size() const { return size_; }
  bool read(std::uint64_t offset, std::size_t n, std::uint8_t* out) const {
    if (offset > size_ || n > size_ - offset) return false;
    std::size_t done = 0;
    while (done < n) {
      ssize_t got = ::pread(fd_, out + done, n - done, static_cast<off_t>(offset + done));
      if (got <= 0) return false;
      done += static_cast<std::size_t>(got);
    }
    return true;
  }

 private:
  int fd_ = -1;
  std::uint64_t size_ = 0;
};

constexpr std::uint64_t align8(std::uint64_t x) { return (x + 7) / 8 * 8; }

// Parses one collection with libhdf5's layout rules (H5HGcache.c), strictly: every object must
// advance the walk and end inside the collection, and the walk must end on its last byte.
// Returns the size of each object by index, or sets `why`.
std::map<std::uint32_t, std::uint64_t> parse_collection(const RawFile& file, std::uint64_t offset,
                                                        std::size_t size_bytes, std::string& why) {
  std::map<std::uint32_t, std::uint64_t> objects;
  const std::uint64_t header = align8(4 + 1 + 3 + size_bytes);
  const std::uint64_t object_header = 2 + 2 + 4 + size_bytes;
  std::uint8_t head[24] = {};
  if (!file.read(offset, static_cast<std::size_t>(header), head)) {
    why = "lies beyond the end of the file";
    return objects;
  }
  if (std::memcmp(head, "GCOL", 4) != 0 || head[4] != 1) {
    why = "has no heap collection signature";
    return objects;
  }
  const std::uint64_t size = decode_le(head + 8, size_bytes);
  if (size < header || size > file.size() - offset) {
    why = cat("declares ", size, " bytes, more than the file holds after it");
    return objects;
  }
  std::vector<std::uint8_t> chunk(static_cast<std::size_t>(size));
  if (!file.read(offset, chunk.size(), chunk.data())) {
    why = "cannot be read";
    return objects;
  }
  std::uint64_t p = header;
  while (p < size) {
    if (p + object_header > size) break;  // the tail too small for an object is free space
    const std::uint8_t* o = chunk.data() + p;
    auto index = static_cast<std::uint32_t>(decode_le(o, 2));
    std::uint64_t object_size = decode_le(o + 8, size_bytes);
    std::uint64_t need = 0;
    if (index > 0) {
      if (object_size > size) {
        why = cat("has object ", index, " declaring ", object_size, " bytes, more than the collection holds");
        return {};
      }
      need = object_header + align8(object_size);
      if (!objects.emplace(index, object_size).second) {
        why = cat("holds object ", index, " twice");
        return {};
      }
    } else {
      need = object_size;  // free space: its size includes its header and is never padded
      if (need < object_header) {
        why = cat("has a free-space object of ", need, " bytes");
        return {};
      }
    }
    if (need > size - p) {
      why = cat("has object ", index, " running past its end");
      return {};
    }
    p += need;
  }
  if (objects.empty()) why = "holds no objects";
  return objects;
}

// The name the file holding `obj` was opened by; "" if HDF5 cannot say.
std::string file_name_of(hid_t obj) {
  ssize_t n = H5Fget_name(obj, nullptr, 0);
  if (n <= 0) return "";
  std::string name(static_cast<std::size_t>(n), '\0');
  H5Fget_name(obj, name.data(), name.size() + 1);
  return name;
}

// Checks every reference against the collections it names; "" when all are sound.
std::string check_refs(hid_t obj, const std::vector<HeapRef>& refs) {
  Handle fid(H5Iget_file_id(obj), H5Fclose);
  if (!fid.valid()) return "cannot find the file it belongs to";
  unsigned intent = 0;
  // A file open for writing is one this process is writing: its heap may not be on disk yet.
  if (H5Fget_intent(fid, &intent) < 0 || intent != H5F_ACC_RDONLY) return "";
  Handle fcpl(H5Fget_create_plist(fid), H5Pclose);
  std::size_t addr_size = 8, size_bytes = 8;
  hsize_t userblock = 0;
  if (!fcpl.valid() || H5Pget_sizes(fcpl, &addr_size, &size_bytes) < 0 || H5Pget_userblock(fcpl, &userblock) < 0)
    return "cannot read the file's creation properties";
  if (size_bytes < 2 || size_bytes > 8) return cat("declares ", size_bytes, "-byte lengths");
  std::string name = file_name_of(obj);
  if (name.empty()) return "cannot name the file it belongs to";
  RawFile file(name);
  if (!file.ok()) return "cannot reopen the file to check it";

  std::map<std::uint64_t, std::map<std::uint32_t, std::uint64_t>> collections;
  for (std::size_t i = 0; i < refs.size(); ++i) {
    const HeapRef& r = refs[i];
    if (r.collection == 0) continue;  // a null string
    auto it = collections.find(r.collection);
    if (it == collections.end()) {
      std::string why;
      auto objects = parse_collection(file, userblock + r.collection, size_bytes, why);
      if (!why.empty()) return cat("string ", i, ": its heap collection at byte ", r.collection, " ", why);
      it = collections.emplace(r.collection, std::move(objects)).first;
    }
    auto object = it->second.find(r.index);
    if (r.index == 0 || object == it->second.end())
      return cat("string ", i, " refers to heap object ", r.index, ", which its collection does not hold");
    if (object->second != r.length)
      return cat("string ", i, " has length ", r.length, " but its heap object holds ", object->second, " bytes");
  }
  return "";
}

}  // namespace

void check_vlen_attribute(hid_t attr) {
  Handle space(H5Aget_space(attr), H5Sclose);
  hssize_t n = space.valid() ? H5Sget_simple_extent_npoints(space) : -1;
  std::string why;
  std::vector<HeapRef> refs(static_cast<std::size_t>(std::max<hssize_t>(n, 0)));
  if (n < 0) why = "has no readable dataspace";
  else if (n > 0 && H5Aread(attr, heap_ref_type(), refs.data()) < 0)
    why = cat("cannot read its string references: ", last_error());
  else why = check_refs(attr, refs);
  if (why.empty()) return;
  char name[256] = "?";
  H5Aget_name(attr, sizeof name, name);
  throw CorruptFileError(file_name_of(attr), cat("attribute '", name, "': ", why));
}

std::string check_vlen_selection(hid_t dataset, hid_t memory_space, hid_t file_space, std::size_t elements) {
  std::vector<HeapRef> refs(elements);
  if (elements > 0 && H5Dread(dataset, heap_ref_type(), memory_space, file_space, H5P_DEFAULT, refs.data()) < 0)
    return cat("cannot read its string references: ", last_error());
  return check_refs(dataset, refs);
}

}  // namespace embedflow::hdf5::detail
