// Array <-> torch::Tensor without copies, private to the torch family (LibTorch stays out of the
// SDK and the engine; only this family's translation units include it).
//
// to_tensor wraps an Array's buffer with torch::from_blob and a deleter that holds the Array's
// shared buffer, so the tensor keeps the record's memory alive however long it lives. Arrays are
// immutable once emitted: tensors made here must never be written in place (every op the family
// applies to inputs makes a new tensor: .to(), permute().contiguous(), arithmetic).
// to_array does the reverse for a contiguous CPU tensor: the Array's owner is a copy of the
// tensor handle, so the storage lives as long as the Array.
#pragma once

#include <torch/torch.h>

#include <embedflow/array.hpp>
#include <embedflow/error.hpp>

namespace embedflow::torchfam {

inline torch::ScalarType scalar_type_of(DType t) {
  switch (t) {
    case DType::u8: return torch::kUInt8;
    case DType::i32: return torch::kInt32;
    case DType::i64: return torch::kInt64;
    case DType::f32: return torch::kFloat32;
    case DType::f64: return torch::kFloat64;
    case DType::boolean: return torch::kBool;
    case DType::string: break;
  }
  throw DataError("a string column cannot become a tensor");
}

inline DType dtype_of_scalar(torch::ScalarType t) {
  switch (t) {
    case torch::kUInt8: return DType::u8;
    case torch::kInt32: return DType::i32;
    case torch::kInt64: return DType::i64;
    case torch::kFloat32: return DType::f32;
    case torch::kFloat64: return DType::f64;
    case torch::kBool: return DType::boolean;
    default: break;
  }
  throw DataError(cat("tensor dtype ", c10::toString(t), " has no embedflow dtype"));
}

// Zero-copy view of `a` (CPU). The tensor holds a.buffer() until its storage is released.
inline torch::Tensor to_tensor(const Array& a) {
  std::vector<std::int64_t> sizes(a.shape().begin(), a.shape().end());
  auto options = torch::TensorOptions().dtype(scalar_type_of(a.dtype()));
  if (a.numel() == 0) return torch::empty(sizes, options);
  std::shared_ptr<const void> keep = a.buffer();
  // from_blob wants void*; the buffer is never written through this tensor (see above).
  return torch::from_blob(const_cast<void*>(a.raw()), sizes, [keep](void*) mutable { keep.reset(); }, options);
}

// Zero-copy Array over a tensor's storage (made contiguous and moved to the CPU first if needed).
inline Array to_array(const torch::Tensor& t) {
  torch::Tensor c = t.detach().to(torch::kCPU).contiguous();
  Shape shape(c.sizes().begin(), c.sizes().end());
  auto holder = std::make_shared<torch::Tensor>(c);
  const void* p = holder->data_ptr();
  return Array::wrap(dtype_of_scalar(c.scalar_type()), std::move(shape), p, std::shared_ptr<const void>(holder, p));
}

}  // namespace embedflow::torchfam
