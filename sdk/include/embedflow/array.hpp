// Array: a typed, shaped view of an immutable shared buffer, or a column of strings.
//
// Arrays are cheap to copy (two shared pointers and a shape) and never copy their data: slicing
// the leading axis and wrapping foreign memory (a torch::Tensor, a cv::Mat, an HDF5 read buffer)
// keep the owner alive through the aliasing shared_ptr. Data is written only while an array is
// being built (mutable_data); once it is placed in an emitted Record it must not change.
#pragma once

#include <cstddef>
#include <cstdint>
#include <cstring>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "embedflow/error.hpp"

namespace embedflow {

enum class DType : std::uint8_t { u8, i32, i64, f32, f64, boolean, string };

using Shape = std::vector<std::int64_t>;

std::string_view dtype_name(DType t);             // "u8", "i32", ..., "bool", "str"
bool parse_dtype(std::string_view s, DType& out);  // inverse of dtype_name
std::size_t dtype_size(DType t);                   // bytes per element; 0 for string
std::int64_t shape_numel(const Shape& shape);
std::string shape_str(const Shape& shape);         // "[2,3]"

template <class T> struct dtype_of;
template <> struct dtype_of<std::uint8_t> { static constexpr DType value = DType::u8; };
template <> struct dtype_of<std::int32_t> { static constexpr DType value = DType::i32; };
template <> struct dtype_of<std::int64_t> { static constexpr DType value = DType::i64; };
template <> struct dtype_of<float> { static constexpr DType value = DType::f32; };
template <> struct dtype_of<double> { static constexpr DType value = DType::f64; };
template <> struct dtype_of<bool> { static constexpr DType value = DType::boolean; };
template <class T> inline constexpr DType dtype_v = dtype_of<T>::value;

class Array {
 public:
  Array() = default;

  // A new zero-filled array to be written through mutable_data before it is shared.
  static Array zeros(DType dtype, Shape shape);
  // Takes ownership of a vector without copying.
  template <class T>
  static Array from_vector(Shape shape, std::vector<T> values);
  template <class T>
  static Array scalar(T value) { return from_vector<T>({}, std::vector<T>{value}); }
  // Wraps memory owned elsewhere; `owner` is kept alive as long as any view of this array.
  static Array wrap(DType dtype, Shape shape, const void* data, std::shared_ptr<const void> owner);
  // A string column of shape [n] (or a scalar string with shape []).
  static Array strings(std::vector<std::string> values);
  static Array string_scalar(std::string value);

  DType dtype() const { return dtype_; }
  const Shape& shape() const { return shape_; }
  std::size_t rank() const { return shape_.size(); }
  std::int64_t dim(std::size_t i) const { return shape_.at(i); }
  std::int64_t numel() const { return shape_numel(shape_); }
  std::size_t nbytes() const { return static_cast<std::size_t>(numel()) * dtype_size(dtype_); }
  bool empty() const { return !data_ && !strings_; }
  bool is_string() const { return dtype_ == DType::string; }

  const void* raw() const { return data_.get(); }
  void* mutable_raw() { return const_cast<void*>(data_.get()); }
  // Typed element access; throws if T does not match the dtype (bool is stored as one byte).
  template <class T>
  const T* data() const {
    check_type(dtype_v<T>);
    return static_cast<const T*>(data_.get());
  }
  template <class T>
  T* mutable_data() {
    check_type(dtype_v<T>);
    return static_cast<T*>(const_cast<void*>(data_.get()));
  }
  // The single element of a scalar or one-element array.
  template <class T>
  T item() const;
  // Any numeric element converted to double / int64 (for generic nodes such as printers).
  double as_double(std::int64_t flat_index) const;
  std::int64_t as_int(std::int64_t flat_index) const;

  const std::vector<std::string>& string_values() const;
  const std::string& string_at(std::int64_t i) const;

  // Rows [begin, end) of the leading axis; shares the buffer.
  Array slice(std::int64_t begin, std::int64_t end) const;
  // Row i of the leading axis, without that axis; shares the buffer.
  Array row(std::int64_t i) const;
  // Same data, new shape with the same element count.
  Array reshape(Shape shape) const;
  // The owner that keeps data alive (for zero-copy bridges).
  const std::shared_ptr<const void>& buffer() const { return data_; }

  // Stacks equally shaped arrays along a new leading axis (copies).
  static Array stack(const std::vector<Array>& parts);
  // Concatenates along the existing leading axis (copies).
  static Array concat(const std::vector<Array>& parts);

  std::string describe() const;  // "f32[2,3]"
  bool equals(const Array& other) const;  // same dtype, shape and contents

 private:
  void check_type(DType requested) const;
  DType dtype_ = DType::f32;
  Shape shape_;
  std::shared_ptr<const void> data_;                         // numeric buffer (aliasing allowed)
  std::shared_ptr<const std::vector<std::string>> strings_;  // string column
  std::int64_t string_offset_ = 0;                           // first row of a sliced string column
};

template <class T>
Array Array::from_vector(Shape shape, std::vector<T> values) {
  static_assert(!std::is_same_v<T, bool>, "use std::uint8_t storage with Array::zeros(DType::boolean)");
  if (shape_numel(shape) != static_cast<std::int64_t>(values.size()))
    throw Error(cat("Array::from_vector: shape ", shape_str(shape), " needs ", shape_numel(shape),
                    " elements, got ", values.size()));
  auto owner = std::make_shared<std::vector<T>>(std::move(values));
  const void* p = owner->data();
  return wrap(dtype_v<T>, std::move(shape), p, std::shared_ptr<const void>(owner, p));
}

template <class T>
T Array::item() const {
  if (numel() != 1) throw Error(cat("Array::item: expected one element, got ", describe()));
  if constexpr (std::is_same_v<T, bool>) {
    check_type(DType::boolean);
    return *static_cast<const std::uint8_t*>(data_.get()) != 0;
  } else {
    return *data<T>();
  }
}

}  // namespace embedflow
