#include "torch_record.hpp"

#include <cstdint>
#include <memory>
#include <vector>

#include "embedflow_python/numpy_record.hpp"

namespace embedflow::python {
namespace py = pybind11;

namespace {

// The DLPack ABI (dlpack.h, v0.x), declared here because the module does not include LibTorch.
struct DLDevice { std::int32_t device_type, device_id; };
struct DLDataType { std::uint8_t code, bits; std::uint16_t lanes; };
struct DLTensor {
  void* data;
  DLDevice device;
  std::int32_t ndim;
  DLDataType dtype;
  std::int64_t* shape;
  std::int64_t* strides;
  std::uint64_t byte_offset;
};
struct DLManagedTensor {
  DLTensor dl_tensor;
  void* manager_ctx;
  void (*deleter)(DLManagedTensor*);
};
constexpr std::int32_t kDLCPU = 1;
constexpr std::uint8_t kDLInt = 0, kDLUInt = 1, kDLFloat = 2;

// What a DLPack tensor owns: a reference to the record (no Python object, so the consumer may
// free it on any thread without the GIL) and its shape.
struct DLPackOwner {
  RecordPtr record;
  std::vector<std::int64_t> shape;
  DLManagedTensor managed;
};

// A "dltensor" capsule over one numeric field; torch.utils.dlpack.from_dlpack consumes it.
py::capsule field_dlpack(const RecordPtr& record, const Array& a) {
  auto owner = std::make_unique<DLPackOwner>();
  owner->record = record;
  owner->shape.assign(a.shape().begin(), a.shape().end());
  DLTensor& t = owner->managed.dl_tensor;
  t.data = const_cast<void*>(a.raw());
  t.device = {kDLCPU, 0};
  t.ndim = static_cast<std::int32_t>(owner->shape.size());
  switch (a.dtype()) {
    case DType::u8: t.dtype = {kDLUInt, 8, 1}; break;
    case DType::boolean: t.dtype = {kDLUInt, 8, 1}; break;  // torch 1.13 takes no DLPack bool
    case DType::i32: t.dtype = {kDLInt, 32, 1}; break;
    case DType::i64: t.dtype = {kDLInt, 64, 1}; break;
    case DType::f32: t.dtype = {kDLFloat, 32, 1}; break;
    case DType::f64: t.dtype = {kDLFloat, 64, 1}; break;
    case DType::string: throw Error("field_dlpack: a string column");
  }
  t.shape = owner->shape.data();
  t.strides = nullptr;  // compact row-major
  t.byte_offset = 0;
  owner->managed.manager_ctx = owner.get();
  owner->managed.deleter = [](DLManagedTensor* self) { delete static_cast<DLPackOwner*>(self->manager_ctx); };
  DLManagedTensor* managed = &owner.release()->managed;
  // The protocol: a consumer renames the capsule "used_dltensor" and calls the deleter itself;
  // a capsule never consumed frees the tensor here.
  return py::capsule(managed, "dltensor", [](PyObject* capsule) {
    if (PyCapsule_IsValid(capsule, "dltensor")) {
      auto* m = static_cast<DLManagedTensor*>(PyCapsule_GetPointer(capsule, "dltensor"));
      m->deleter(m);
    } else {
      PyErr_Clear();
    }
  });
}

}  // namespace

py::dict record_to_torch(const RecordPtr& record) {
  // Held for the life of the process (a static py::object would be released after the
  // interpreter has finalized).
  static py::handle from_dlpack = py::object(py::module_::import("torch.utils.dlpack").attr("from_dlpack")).release();
  py::dict out;
  py::object owner;  // strings only
  for (const auto& [name, array] : record->fields()) {
    if (array.is_string()) {
      if (!owner) owner = python::record_owner(record);
      out[py::str(name)] = python::array_to_python(array, owner);
    } else {
      py::object tensor = from_dlpack(field_dlpack(record, array));
      if (array.dtype() == DType::boolean) tensor = tensor.attr("bool")();  // a copy: bool has no DLPack code here
      out[py::str(name)] = tensor;
    }
  }
  return out;
}

}  // namespace embedflow::python
