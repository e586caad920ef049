#include "h5util.hpp"

#include <cstring>
#include <exception>

namespace embedflow::hdf5::detail {

void quiet() {
  thread_local bool silenced = false;
  if (!silenced) {
    H5Eset_auto2(H5E_DEFAULT, nullptr, nullptr);
    silenced = true;
  }
}

namespace {
herr_t collect_error(unsigned n, const H5E_error2_t* e, void* data) {
  auto* lines = static_cast<std::vector<std::string>*>(data);
  if (e->desc && *e->desc) {
    std::string d = e->desc;
    bool seen = false;
    for (const auto& l : *lines) seen = seen || l == d;
    if (!seen && lines->size() < 3) lines->push_back(d);
  }
  (void)n;
  return 0;
}
}  // namespace

std::string last_error() {
  std::vector<std::string> lines;
  H5Ewalk2(H5E_DEFAULT, H5E_WALK_UPWARD, collect_error, &lines);
  H5Eclear2(H5E_DEFAULT);
  std::string s;
  for (const auto& l : lines) s += (s.empty() ? "" : "; ") + l;
  return s.empty() ? "unknown HDF5 error" : s;
}

hid_t check(hid_t id, const std::filesystem::path& path, const std::string& what) {
  if (id < 0) throw DataError(cat(path.string(), ": ", what, ": ", last_error()));
  return id;
}

void check_status(herr_t status, const std::filesystem::path& path, const std::string& what) {
  if (status < 0) throw DataError(cat(path.string(), ": ", what, ": ", last_error()));
}

namespace {
// h5py stores numpy bool as this enum, so h5py reads our bool columns back as bool.
Handle bool_enum(hid_t base) {
  hid_t t = H5Tenum_create(base);
  signed char f = 0, tr = 1;
  H5Tenum_insert(t, "FALSE", &f);
  H5Tenum_insert(t, "TRUE", &tr);
  return Handle(t, H5Tclose);
}

Handle vlen_utf8() {
  hid_t t = H5Tcopy(H5T_C_S1);
  H5Tset_size(t, H5T_VARIABLE);
  H5Tset_cset(t, H5T_CSET_UTF8);
  return Handle(t, H5Tclose);
}

Handle copy(hid_t t) { return Handle(H5Tcopy(t), H5Tclose); }
}  // namespace

Handle file_type_for(DType dtype) {
  switch (dtype) {
    case DType::u8: return copy(H5T_STD_U8LE);
    case DType::i32: return copy(H5T_STD_I32LE);
    case DType::i64: return copy(H5T_STD_I64LE);
    case DType::f32: return copy(H5T_IEEE_F32LE);
    case DType::f64: return copy(H5T_IEEE_F64LE);
    case DType::boolean: return bool_enum(H5T_STD_I8LE);
    case DType::string: return vlen_utf8();
  }
  throw Error("file_type_for: unknown dtype");
}

Handle memory_type_for(DType dtype) {
  switch (dtype) {
    case DType::u8: return copy(H5T_NATIVE_UINT8);
    case DType::i32: return copy(H5T_NATIVE_INT32);
    case DType::i64: return copy(H5T_NATIVE_INT64);
    case DType::f32: return copy(H5T_NATIVE_FLOAT);
    case DType::f64: return copy(H5T_NATIVE_DOUBLE);
    case DType::boolean: return bool_enum(H5T_NATIVE_INT8);
    case DType::string: return vlen_utf8();
  }
  throw Error("memory_type_for: unknown dtype");
}

namespace {
H5T_conv_ret_t fail_on_overflow(H5T_conv_except_t kind, hid_t, hid_t, void*, void*, void* data) {
  if (kind == H5T_CONV_EXCEPT_RANGE_HI || kind == H5T_CONV_EXCEPT_RANGE_LOW) {
    *static_cast<bool*>(data) = true;
    return H5T_CONV_ABORT;
  }
  return H5T_CONV_UNHANDLED;
}
}  // namespace

Handle range_checked_transfer(bool* overflow) {
  Handle dxpl(H5Pcreate(H5P_DATASET_XFER), H5Pclose);
  H5Pset_type_conv_cb(dxpl, fail_on_overflow, overflow);
  return dxpl;
}

Handle unchecked_transfer() {
  Handle dxpl(H5Pcreate(H5P_DATASET_XFER), H5Pclose);
  H5Pset_edc_check(dxpl, H5Z_DISABLE_EDC);
  return dxpl;
}

std::optional<ReadType> read_type_for(hid_t file_type, std::string& why) {
  ReadType r;
  H5T_class_t cls = H5Tget_class(file_type);
  std::size_t size = H5Tget_size(file_type);
  switch (cls) {
    case H5T_INTEGER: {
      bool is_signed = H5Tget_sign(file_type) == H5T_SGN_2;
      // Widen to the nearest embedflow dtype that holds every value; HDF5 converts on read.
      if (size == 1 && !is_signed) r.dtype = DType::u8;
      else if (size < 4 || (size == 4 && is_signed)) r.dtype = DType::i32;
      else r.dtype = DType::i64;  // u32, i64, u64 (values >= 2^63 are an error on read)
      r.unsigned64 = !is_signed && size == 8;
      r.memory_type = memory_type_for(r.dtype);
      return r;
    }
    case H5T_FLOAT:
      r.dtype = size <= 4 ? DType::f32 : DType::f64;
      r.memory_type = memory_type_for(r.dtype);
      return r;
    case H5T_ENUM: {
      int n = H5Tget_nmembers(file_type);
      bool is_bool = n == 2;
      for (int i = 0; i < n && is_bool; ++i) {
        char* name = H5Tget_member_name(file_type, static_cast<unsigned>(i));
        std::string s = name ? name : "";
        H5free_memory(name);
        is_bool = s == "FALSE" || s == "TRUE";
      }
      if (!is_bool) {
        why = "an enum type other than h5py's bool";
        return std::nullopt;
      }
      r.dtype = DType::boolean;
      r.memory_type = memory_type_for(DType::boolean);
      return r;
    }
    case H5T_STRING: {
      r.dtype = DType::string;
      if (H5Tis_variable_str(file_type) > 0) {
        r.vlen_string = true;
        r.memory_type = Handle(H5Tcopy(H5T_C_S1), H5Tclose);
        H5Tset_size(r.memory_type, H5T_VARIABLE);
        H5Tset_cset(r.memory_type, H5Tget_cset(file_type));
      } else {
        r.fixed_string_size = size;
        r.memory_type = Handle(H5Tcopy(H5T_C_S1), H5Tclose);
        H5Tset_size(r.memory_type, size);
        H5Tset_cset(r.memory_type, H5Tget_cset(file_type));
        H5Tset_strpad(r.memory_type, H5T_STR_NULLPAD);
      }
      return r;
    }
    case H5T_COMPOUND: why = "a compound type (read its members as separate datasets)"; return std::nullopt;
    case H5T_ARRAY: why = "an HDF5 array type"; return std::nullopt;
    case H5T_VLEN: why = "a variable-length sequence type"; return std::nullopt;
    case H5T_OPAQUE: why = "an opaque type"; return std::nullopt;
    case H5T_REFERENCE: why = "a reference type"; return std::nullopt;
    case H5T_BITFIELD: why = "a bitfield type"; return std::nullopt;
    case H5T_TIME: why = "a time type"; return std::nullopt;
    default: why = "an unknown type class"; return std::nullopt;
  }
}

bool has_attribute(hid_t obj, const char* name) { return H5Aexists(obj, name) > 0; }

namespace {
void replace_attribute(hid_t obj, const char* name) {
  if (H5Aexists(obj, name) > 0) H5Adelete(obj, name);
}
}  // namespace

void write_string_attribute(hid_t obj, const char* name, const std::string& value) {
  replace_attribute(obj, name);
  Handle type = vlen_utf8();
  Handle space(H5Screate(H5S_SCALAR), H5Sclose);
  Handle attr(H5Acreate2(obj, name, type, space, H5P_DEFAULT, H5P_DEFAULT), H5Aclose);
  if (!attr.valid()) throw Error(cat("cannot create attribute ", name, ": ", last_error()));
  const char* p = value.c_str();
  if (H5Awrite(attr, type, &p) < 0) throw Error(cat("cannot write attribute ", name, ": ", last_error()));
}

void write_string_list_attribute(hid_t obj, const char* name, const std::vector<std::string>& values) {
  replace_attribute(obj, name);
  Handle type = vlen_utf8();
  hsize_t n = values.size();
  Handle space(H5Screate_simple(1, &n, nullptr), H5Sclose);
  Handle attr(H5Acreate2(obj, name, type, space, H5P_DEFAULT, H5P_DEFAULT), H5Aclose);
  if (!attr.valid()) throw Error(cat("cannot create attribute ", name, ": ", last_error()));
  std::vector<const char*> ptrs;
  for (const auto& v : values) ptrs.push_back(v.c_str());
  if (!values.empty() && H5Awrite(attr, type, ptrs.data()) < 0)
    throw Error(cat("cannot write attribute ", name, ": ", last_error()));
}

void write_int_attribute(hid_t obj, const char* name, std::int64_t value) {
  replace_attribute(obj, name);
  Handle space(H5Screate(H5S_SCALAR), H5Sclose);
  Handle attr(H5Acreate2(obj, name, H5T_STD_I64LE, space, H5P_DEFAULT, H5P_DEFAULT), H5Aclose);
  if (!attr.valid() || H5Awrite(attr, H5T_NATIVE_INT64, &value) < 0)
    throw Error(cat("cannot write attribute ", name, ": ", last_error()));
}

namespace {
std::optional<std::vector<std::string>> read_strings(hid_t attr) {
  Handle ftype(H5Aget_type(attr), H5Tclose);
  if (H5Tget_class(ftype) != H5T_STRING) return std::nullopt;
  Handle space(H5Aget_space(attr), H5Sclose);
  hssize_t n = H5Sget_simple_extent_npoints(space);
  if (n < 0) return std::nullopt;
  std::vector<std::string> out;
  if (H5Tis_variable_str(ftype) > 0) {
    check_vlen_attribute(attr);
    Handle mtype(H5Tcopy(H5T_C_S1), H5Tclose);
    H5Tset_size(mtype, H5T_VARIABLE);
    H5Tset_cset(mtype, H5Tget_cset(ftype));
    std::vector<char*> ptrs(static_cast<std::size_t>(n), nullptr);
    if (n > 0 && H5Aread(attr, mtype, ptrs.data()) < 0) return std::nullopt;
    for (char* p : ptrs) out.emplace_back(p ? p : "");
    if (n > 0) H5Dvlen_reclaim(mtype, space, H5P_DEFAULT, ptrs.data());
  } else {
    std::size_t size = H5Tget_size(ftype);
    std::vector<char> buf(size * static_cast<std::size_t>(n) + 1, 0);
    if (n > 0 && H5Aread(attr, ftype, buf.data()) < 0) return std::nullopt;
    for (hssize_t i = 0; i < n; ++i) {
      const char* p = buf.data() + static_cast<std::size_t>(i) * size;
      out.emplace_back(p, strnlen(p, size));
    }
  }
  return out;
}
}  // namespace

std::optional<std::string> read_string_attribute(hid_t obj, const char* name) {
  if (H5Aexists(obj, name) <= 0) return std::nullopt;
  Handle attr(H5Aopen(obj, name, H5P_DEFAULT), H5Aclose);
  if (!attr.valid()) return std::nullopt;
  auto v = read_strings(attr);
  if (!v || v->size() != 1) return std::nullopt;
  return (*v)[0];
}

std::optional<std::vector<std::string>> read_string_list_attribute(hid_t obj, const char* name) {
  if (H5Aexists(obj, name) <= 0) return std::nullopt;
  Handle attr(H5Aopen(obj, name, H5P_DEFAULT), H5Aclose);
  if (!attr.valid()) return std::nullopt;
  return read_strings(attr);
}

std::optional<std::int64_t> read_int_attribute(hid_t obj, const char* name) {
  if (H5Aexists(obj, name) <= 0) return std::nullopt;
  Handle attr(H5Aopen(obj, name, H5P_DEFAULT), H5Aclose);
  if (!attr.valid()) return std::nullopt;
  Handle ftype(H5Aget_type(attr), H5Tclose);
  if (H5Tget_class(ftype) != H5T_INTEGER) return std::nullopt;
  Handle space(H5Aget_space(attr), H5Sclose);
  if (H5Sget_simple_extent_npoints(space) != 1) return std::nullopt;
  std::int64_t v = 0;
  if (H5Aread(attr, H5T_NATIVE_INT64, &v) < 0) return std::nullopt;
  return v;
}

namespace {
struct AttrWalk {
  std::vector<std::pair<std::string, std::string>> out;
  std::exception_ptr error;  // thrown inside the walk: HDF5's C iteration must not unwind
};
herr_t visit_attribute(hid_t obj, const char* name, const H5A_info_t*, void* data) {
  auto* walk = static_cast<AttrWalk*>(data);
  Handle attr(H5Aopen(obj, name, H5P_DEFAULT), H5Aclose);
  if (!attr.valid()) return 0;
  Handle ftype(H5Aget_type(attr), H5Tclose);
  Handle space(H5Aget_space(attr), H5Sclose);
  H5T_class_t cls = H5Tget_class(ftype);
  if (cls == H5T_STRING) {
    try {
      if (auto v = read_strings(attr); v && v->size() == 1) walk->out.emplace_back(name, (*v)[0]);
    } catch (...) {
      walk->error = std::current_exception();
      return -1;
    }
  } else if (cls == H5T_INTEGER && H5Sget_simple_extent_npoints(space) == 1) {
    std::int64_t v = 0;
    if (H5Aread(attr, H5T_NATIVE_INT64, &v) >= 0) walk->out.emplace_back(name, std::to_string(v));
  } else if (cls == H5T_FLOAT && H5Sget_simple_extent_npoints(space) == 1) {
    double v = 0;
    if (H5Aread(attr, H5T_NATIVE_DOUBLE, &v) >= 0) walk->out.emplace_back(name, cat(v));
  }
  return 0;
}
}  // namespace

std::vector<std::pair<std::string, std::string>> read_all_text_attributes(hid_t obj) {
  AttrWalk walk;
  hsize_t idx = 0;
  H5Aiterate2(obj, H5_INDEX_NAME, H5_ITER_NATIVE, &idx, visit_attribute, &walk);
  if (walk.error) std::rethrow_exception(walk.error);
  return walk.out;
}

}  // namespace embedflow::hdf5::detail
