#include "embedflow/array.hpp"

#include <cstring>
#include <sstream>

namespace embedflow {

std::string_view dtype_name(DType t) {
  switch (t) {
    case DType::u8: return "u8";
    case DType::i32: return "i32";
    case DType::i64: return "i64";
    case DType::f32: return "f32";
    case DType::f64: return "f64";
    case DType::boolean: return "bool";
    case DType::string: return "str";
  }
  return "?";
}

bool parse_dtype(std::string_view s, DType& out) {
  static const std::pair<std::string_view, DType> table[] = {
      {"u8", DType::u8},   {"i32", DType::i32},  {"i64", DType::i64},        {"f32", DType::f32},
      {"f64", DType::f64}, {"bool", DType::boolean}, {"str", DType::string}, {"string", DType::string}};
  for (const auto& [name, t] : table)
    if (s == name) {
      out = t;
      return true;
    }
  return false;
}

std::size_t dtype_size(DType t) {
  switch (t) {
    case DType::u8: return 1;
    case DType::boolean: return 1;
    case DType::i32: return 4;
    case DType::f32: return 4;
    case DType::i64: return 8;
    case DType::f64: return 8;
    case DType::string: return 0;
  }
  return 0;
}

std::int64_t shape_numel(const Shape& shape) {
  std::int64_t n = 1;
  for (auto d : shape) n *= d;
  return n;
}

std::string shape_str(const Shape& shape) {
  std::string s = "[";
  for (std::size_t i = 0; i < shape.size(); ++i) {
    if (i) s += ",";
    s += std::to_string(shape[i]);
  }
  return s + "]";
}

Array Array::zeros(DType dtype, Shape shape) {
  if (dtype == DType::string) {
    std::vector<std::string> v(static_cast<std::size_t>(shape_numel(shape)));
    Array a = strings(std::move(v));
    a.shape_ = std::move(shape);
    return a;
  }
  for (auto d : shape)
    if (d < 0) throw Error(cat("Array::zeros: negative dimension in ", shape_str(shape)));
  std::size_t bytes = static_cast<std::size_t>(shape_numel(shape)) * dtype_size(dtype);
  // operator new[] with value-init gives zeroed, suitably aligned memory for every dtype.
  std::shared_ptr<std::uint8_t[]> owner(new std::uint8_t[bytes > 0 ? bytes : 1]());
  Array a;
  a.dtype_ = dtype;
  a.shape_ = std::move(shape);
  a.data_ = std::shared_ptr<const void>(owner, owner.get());
  return a;
}

Array Array::wrap(DType dtype, Shape shape, const void* data, std::shared_ptr<const void> owner) {
  if (dtype == DType::string) throw Error("Array::wrap: use Array::strings for string columns");
  Array a;
  a.dtype_ = dtype;
  a.shape_ = std::move(shape);
  a.data_ = std::shared_ptr<const void>(std::move(owner), data);
  return a;
}

Array Array::strings(std::vector<std::string> values) {
  Array a;
  a.dtype_ = DType::string;
  a.shape_ = {static_cast<std::int64_t>(values.size())};
  a.strings_ = std::make_shared<const std::vector<std::string>>(std::move(values));
  return a;
}

Array Array::string_scalar(std::string value) {
  Array a = strings({std::move(value)});
  a.shape_ = {};
  return a;
}

void Array::check_type(DType requested) const {
  if (requested != dtype_)
    throw Error(cat("array of dtype ", dtype_name(dtype_), " accessed as ", dtype_name(requested)));
}

double Array::as_double(std::int64_t i) const {
  switch (dtype_) {
    case DType::u8: return static_cast<const std::uint8_t*>(raw())[i];
    case DType::boolean: return static_cast<const std::uint8_t*>(raw())[i] != 0;
    case DType::i32: return static_cast<const std::int32_t*>(raw())[i];
    case DType::i64: return static_cast<double>(static_cast<const std::int64_t*>(raw())[i]);
    case DType::f32: return static_cast<const float*>(raw())[i];
    case DType::f64: return static_cast<const double*>(raw())[i];
    case DType::string: break;
  }
  throw Error("as_double on a string array");
}

std::int64_t Array::as_int(std::int64_t i) const {
  switch (dtype_) {
    case DType::u8: return static_cast<const std::uint8_t*>(raw())[i];
    case DType::boolean: return static_cast<const std::uint8_t*>(raw())[i] != 0;
    case DType::i32: return static_cast<const std::int32_t*>(raw())[i];
    case DType::i64: return static_cast<const std::int64_t*>(raw())[i];
    case DType::f32: return static_cast<std::int64_t>(static_cast<const float*>(raw())[i]);
    case DType::f64: return static_cast<std::int64_t>(static_cast<const double*>(raw())[i]);
    case DType::string: break;
  }
  throw Error("as_int on a string array");
}

const std::vector<std::string>& Array::string_values() const {
  if (dtype_ != DType::string) throw Error(cat("array of dtype ", dtype_name(dtype_), " read as strings"));
  if (string_offset_ != 0 || numel() != static_cast<std::int64_t>(strings_->size()))
    throw Error("string_values() on a sliced string column: use string_at()");
  return *strings_;
}

const std::string& Array::string_at(std::int64_t i) const {
  if (dtype_ != DType::string) throw Error(cat("array of dtype ", dtype_name(dtype_), " read as strings"));
  if (i < 0 || i >= numel()) throw Error(cat("string index ", i, " out of range for ", describe()));
  return (*strings_)[static_cast<std::size_t>(string_offset_ + i)];
}

Array Array::slice(std::int64_t begin, std::int64_t end) const {
  if (shape_.empty()) throw Error("Array::slice on a scalar");
  if (begin < 0 || end < begin || end > shape_[0])
    throw Error(cat("Array::slice [", begin, ",", end, ") out of range for ", describe()));
  Array a = *this;
  a.shape_[0] = end - begin;
  std::int64_t row_elems = shape_[0] ? numel() / shape_[0] : 0;
  if (dtype_ == DType::string) {
    a.string_offset_ = string_offset_ + begin * row_elems;
  } else {
    const auto* base = static_cast<const std::uint8_t*>(data_.get());
    a.data_ = std::shared_ptr<const void>(data_, base + begin * row_elems * static_cast<std::int64_t>(dtype_size(dtype_)));
  }
  return a;
}

Array Array::row(std::int64_t i) const {
  Array a = slice(i, i + 1);
  a.shape_.erase(a.shape_.begin());
  return a;
}

Array Array::reshape(Shape shape) const {
  if (shape_numel(shape) != numel())
    throw Error(cat("Array::reshape: cannot view ", describe(), " as ", shape_str(shape)));
  Array a = *this;
  a.shape_ = std::move(shape);
  return a;
}

Array Array::stack(const std::vector<Array>& parts) {
  if (parts.empty()) throw Error("Array::stack of nothing");
  Shape inner = parts[0].shape();
  for (const auto& p : parts)
    if (p.dtype() != parts[0].dtype() || p.shape() != inner)
      throw Error(cat("Array::stack: ", p.describe(), " does not match ", parts[0].describe()));
  std::vector<Array> rows;
  rows.reserve(parts.size());
  Shape one = inner;
  one.insert(one.begin(), 1);
  for (const auto& p : parts) rows.push_back(p.reshape(one));
  return concat(rows);
}

Array Array::concat(const std::vector<Array>& parts) {
  if (parts.empty()) throw Error("Array::concat of nothing");
  const Array& first = parts[0];
  if (first.rank() == 0) throw Error("Array::concat of scalars: use stack");
  Shape shape = first.shape();
  std::int64_t rows = 0;
  for (const auto& p : parts) {
    if (p.dtype() != first.dtype() || p.rank() != first.rank() ||
        !std::equal(p.shape().begin() + 1, p.shape().end(), first.shape().begin() + 1))
      throw Error(cat("Array::concat: ", p.describe(), " does not match ", first.describe()));
    rows += p.dim(0);
  }
  shape[0] = rows;
  if (first.is_string()) {
    std::vector<std::string> out;
    out.reserve(static_cast<std::size_t>(shape_numel(shape)));
    for (const auto& p : parts)
      for (std::int64_t i = 0; i < p.numel(); ++i) out.push_back(p.string_at(i));
    Array a = strings(std::move(out));
    a.shape_ = shape;
    return a;
  }
  Array out = zeros(first.dtype(), shape);
  auto* dst = static_cast<std::uint8_t*>(out.mutable_raw());
  for (const auto& p : parts) {
    std::memcpy(dst, p.raw(), p.nbytes());
    dst += p.nbytes();
  }
  return out;
}

std::string Array::describe() const { return cat(dtype_name(dtype_), shape_str(shape_)); }

bool Array::equals(const Array& o) const {
  if (dtype_ != o.dtype_ || shape_ != o.shape_) return false;
  if (is_string()) {
    for (std::int64_t i = 0; i < numel(); ++i)
      if (string_at(i) != o.string_at(i)) return false;
    return true;
  }
  return nbytes() == 0 || std::memcmp(raw(), o.raw(), nbytes()) == 0;
}

}  // namespace embedflow
