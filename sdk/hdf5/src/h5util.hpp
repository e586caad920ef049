// Internal helpers over the HDF5 C API: owning handles, quiet error stacks turned into messages,
// dtype <-> HDF5 type mapping, string attributes. Not installed.
#pragma once

#include <hdf5.h>

#include <cstdint>
#include <filesystem>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "embedflow/array.hpp"
#include "embedflow/hdf5/stream_file.hpp"

namespace embedflow::hdf5::detail {

// Owns one HDF5 identifier and closes it with the function matching its kind.
class Handle {
 public:
  using Closer = herr_t (*)(hid_t);
  Handle() = default;
  Handle(hid_t id, Closer closer) : id_(id), closer_(closer) {}
  Handle(Handle&& o) noexcept : id_(std::exchange(o.id_, H5I_INVALID_HID)), closer_(o.closer_) {}
  Handle& operator=(Handle&& o) noexcept {
    if (this != &o) {
      reset();
      id_ = std::exchange(o.id_, H5I_INVALID_HID);
      closer_ = o.closer_;
    }
    return *this;
  }
  Handle(const Handle&) = delete;
  Handle& operator=(const Handle&) = delete;
  ~Handle() { reset(); }
  // Closes now; returns false when HDF5 reported a failure (it matters for files being written).
  bool reset() {
    bool ok = true;
    if (id_ >= 0 && closer_) ok = closer_(id_) >= 0;
    id_ = H5I_INVALID_HID;
    return ok;
  }
  hid_t get() const { return id_; }
  operator hid_t() const { return id_; }  // NOLINT: handles pass straight into the C API
  bool valid() const { return id_ >= 0; }

 private:
  hid_t id_ = H5I_INVALID_HID;
  Closer closer_ = nullptr;
};

// HDF5 prints its error stack to stderr by default, per thread in thread-safe builds; we turn
// failures into exceptions instead, so each thread silences it before its first call.
void quiet();
// The current thread's HDF5 error stack as one line, innermost cause first.
std::string last_error();

// Throws DataError "<path>: <what>: <hdf5 reason>" when id < 0.
hid_t check(hid_t id, const std::filesystem::path& path, const std::string& what);
void check_status(herr_t status, const std::filesystem::path& path, const std::string& what);

Handle file_type_for(DType dtype);    // type stored in files we write
Handle memory_type_for(DType dtype);  // type of our in-memory buffers

// How a dataset's stored type is read: the embedflow dtype and the memory type HDF5 converts to.
struct ReadType {
  DType dtype = DType::f32;
  Handle memory_type;
  bool vlen_string = false;
  std::size_t fixed_string_size = 0;  // > 0 for fixed-length strings
  // u64 is read as i64: values >= 2^63 do not fit, and HDF5 would clamp them to INT64_MAX.
  // Reads of such a column abort on the first value out of range instead (range_checked_read).
  bool unsigned64 = false;
};
// A dataset-transfer property list whose conversion callback fails the read on a value out of
// the memory type's range, recording that it happened in *overflow.
Handle range_checked_transfer(bool* overflow);
// A dataset-transfer property list that skips the filters' error detection (Fletcher32).
Handle unchecked_transfer();
// nullopt with `why` set when the type has no embedflow equivalent.
std::optional<ReadType> read_type_for(hid_t file_type, std::string& why);

// libhdf5 1.10 follows a variable-length string's reference into the file's global heap without
// checking it: a damaged heap makes it loop forever or copy past its buffer. These check the
// references of a string attribute, or of a dataset selection of `elements` strings, against the
// heap collections in the file (global_heap.cpp). The attribute check throws CorruptFileError
// naming the file and the attribute; the selection check returns "" when sound, else what is
// wrong. Files open for writing are this process's own and are not checked.
void check_vlen_attribute(hid_t attr);
std::string check_vlen_selection(hid_t dataset, hid_t memory_space, hid_t file_space, std::size_t elements);

bool has_attribute(hid_t obj, const char* name);
void write_string_attribute(hid_t obj, const char* name, const std::string& value);
void write_string_list_attribute(hid_t obj, const char* name, const std::vector<std::string>& values);
void write_int_attribute(hid_t obj, const char* name, std::int64_t value);
// Reads a string (fixed or variable, scalar or one element), a string list, or an integer;
// nullopt when absent or of another kind.
std::optional<std::string> read_string_attribute(hid_t obj, const char* name);
std::optional<std::vector<std::string>> read_string_list_attribute(hid_t obj, const char* name);
std::optional<std::int64_t> read_int_attribute(hid_t obj, const char* name);
// Checksum of a string column (HDF5 has no filter for variable-length strings, so Fletcher32
// cannot cover them): 64-bit FNV-1a over each string's length (8 bytes, little-endian) and bytes,
// in row order. Stored on the dataset as kStringChecksumAttribute, "fnv1a64:<16 hex digits>".
inline constexpr const char* kStringChecksumAttribute = "embedflow_checksum";
struct StringChecksum {
  std::uint64_t h = 0xcbf29ce484222325ull;
  void byte(unsigned char b) {
    h ^= b;
    h *= 0x100000001b3ull;
  }
  void add(const std::string& s) {
    std::uint64_t n = s.size();
    for (int i = 0; i < 8; ++i) byte(static_cast<unsigned char>(n >> (8 * i)));
    for (char c : s) byte(static_cast<unsigned char>(c));
  }
  std::string text() const {
    static const char* hex = "0123456789abcdef";
    std::string out = "fnv1a64:";
    for (int i = 15; i >= 0; --i) out += hex[(h >> (4 * i)) & 15];
    return out;
  }
};

// All scalar string-or-number attributes of an object, as text.
std::vector<std::pair<std::string, std::string>> read_all_text_attributes(hid_t obj);

}  // namespace embedflow::hdf5::detail
