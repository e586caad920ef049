// Records as dicts of numpy arrays and back, shared by the Python module and the py.map node
// (header-only: the two are separate shared libraries and the plugin links only the SDK).
//
// A numeric field becomes a read-only numpy view of the record's own buffer: no copy. Every view
// of one record has the same base, a capsule named "embedflow.Record" that holds a reference to
// the record, so the buffer lives as long as any array views it, whatever happens to the graph
// that produced it. String columns become Python str (a scalar) or a list of str (copies).
//
// Going back (what a Python function returns), a value may be a numpy array of one of
// embedflow's dtypes (u8, i32, i64, f32, f64, bool), a Python int, float or bool, a str, or a
// list of str. Anything else is a DataError naming the field and what it got. Arrays are copied
// into a new buffer, except an unchanged view of an input field, which forwards that field.
#pragma once

#include <pybind11/numpy.h>
#include <pybind11/pybind11.h>

#include <string>
#include <vector>

#include "embedflow/error.hpp"
#include "embedflow/record.hpp"

namespace embedflow::python {
namespace py = pybind11;

inline constexpr const char* kRecordCapsuleName = "embedflow.Record";

// The object that keeps `record` alive for its numpy views.
inline py::capsule record_owner(RecordPtr record) {
  auto* held = new RecordPtr(std::move(record));
  return py::capsule(held, kRecordCapsuleName, [](PyObject* capsule) {
    delete static_cast<RecordPtr*>(PyCapsule_GetPointer(capsule, kRecordCapsuleName));
  });
}

inline py::dtype numpy_dtype(DType t) {
  switch (t) {
    case DType::u8: return py::dtype::of<std::uint8_t>();
    case DType::i32: return py::dtype::of<std::int32_t>();
    case DType::i64: return py::dtype::of<std::int64_t>();
    case DType::f32: return py::dtype::of<float>();
    case DType::f64: return py::dtype::of<double>();
    case DType::boolean: return py::dtype("bool");
    case DType::string: break;
  }
  throw Error("numpy_dtype: a string column has no numpy dtype");
}

// A read-only view of `a` whose base is `owner`, or the strings of a string column.
inline py::object array_to_python(const Array& a, const py::object& owner) {
  if (a.is_string()) {
    if (a.rank() == 0) return py::str(a.string_at(0));
    py::list values;
    for (std::int64_t i = 0; i < a.numel(); ++i) values.append(py::str(a.string_at(i)));
    return std::move(values);
  }
  std::vector<py::ssize_t> shape(a.shape().begin(), a.shape().end());
  std::vector<py::ssize_t> strides(shape.size());
  py::ssize_t step = static_cast<py::ssize_t>(dtype_size(a.dtype()));
  for (std::size_t i = shape.size(); i-- > 0;) {
    strides[i] = step;
    step *= shape[i];
  }
  py::array view(numpy_dtype(a.dtype()), shape, strides, a.raw(), owner);
  // Records are immutable once emitted: a write through the view would change what other nodes see.
  py::detail::array_proxy(view.ptr())->flags &= ~py::detail::npy_api::NPY_ARRAY_WRITEABLE_;
  return std::move(view);
}

// {field: numpy view or strings}, every view based on one owner capsule.
inline py::dict record_to_dict(const RecordPtr& record) {
  py::object owner = record_owner(record);
  py::dict out;
  for (const auto& [name, array] : record->fields()) out[py::str(name)] = array_to_python(array, owner);
  return out;
}

inline bool dtype_from_numpy(const py::dtype& dt, DType& out) {
  const char kind = dt.kind();
  const auto size = dt.itemsize();
  if (kind == 'u' && size == 1) out = DType::u8;
  else if (kind == 'i' && size == 4) out = DType::i32;
  else if (kind == 'i' && size == 8) out = DType::i64;
  else if (kind == 'f' && size == 4) out = DType::f32;
  else if (kind == 'f' && size == 8) out = DType::f64;
  else if (kind == 'b' && size == 1) out = DType::boolean;
  else return false;
  return true;
}

// One field value returned from Python. `input` and `input_owner` (may be null/None) let an
// unchanged view of an input field forward that field without a copy. `where` names the caller
// in messages ("node 'f': fn() returned").
inline Array array_from_python(const py::handle& value, const std::string& field, const Record* input,
                               const py::handle& input_owner, const std::string& where) {
  const std::string what = cat(where, " field '", field, "'");
  if (py::isinstance<py::str>(value)) return Array::string_scalar(value.cast<std::string>());
  if (py::isinstance<py::list>(value) || py::isinstance<py::tuple>(value)) {
    py::sequence items = py::reinterpret_borrow<py::sequence>(value);
    bool all_strings = py::len(items) > 0;
    for (auto item : items) all_strings = all_strings && py::isinstance<py::str>(item);
    if (all_strings) {
      std::vector<std::string> strings;
      for (auto item : items) strings.push_back(item.cast<std::string>());
      return Array::strings(std::move(strings));
    }
  }
  const bool numeric_scalar = py::isinstance<py::int_>(value) || py::isinstance<py::float_>(value) ||
                              py::isinstance<py::bool_>(value);
  if (!py::isinstance<py::array>(value) && !numeric_scalar && !py::isinstance<py::list>(value) &&
      !py::isinstance<py::tuple>(value))
    throw DataError(cat(what, " is a ", py::str(py::type::of(value).attr("__name__")).cast<std::string>(),
                        "; expected a numpy array, a number, a str or a list of str"));
  py::array arr = py::array::ensure(value);
  if (!arr) {
    PyErr_Clear();
    throw DataError(cat(what, " cannot be made a numpy array"));
  }
  DType dtype;
  if (!dtype_from_numpy(arr.dtype(), dtype))
    throw DataError(cat(what, " has numpy dtype ", py::str(arr.dtype()).cast<std::string>(),
                        "; embedflow fields are uint8, int32, int64, float32, float64 or bool (convert with .astype)"));
  Shape shape(arr.shape(), arr.shape() + arr.ndim());
  if (input && input_owner && arr.base().is(input_owner)) {
    if (const Array* original = input->find(field); original && original->raw() == arr.data() &&
                                                    original->dtype() == dtype && original->shape() == shape)
      return *original;
  }
  py::array contiguous = py::array::ensure(arr, py::array::c_style);
  Array out = Array::zeros(dtype, shape);
  if (out.nbytes() > 0) std::memcpy(out.mutable_raw(), contiguous.data(), out.nbytes());
  return out;
}

// A dict of fields returned from Python as a Record (field names must be str).
inline Record record_from_dict(const py::dict& fields, const Record* input, const py::handle& input_owner,
                               const std::string& where) {
  Record out;
  for (auto [key, value] : fields) {
    if (!py::isinstance<py::str>(key))
      throw DataError(cat(where, " a field name that is a ",
                          py::str(py::type::of(key).attr("__name__")).cast<std::string>(), ", not a str"));
    std::string name = key.cast<std::string>();
    out.set(name, array_from_python(value, name, input, input_owner, where));
  }
  return out;
}

}  // namespace embedflow::python
