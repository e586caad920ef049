// A record's numeric fields as torch tensors without copying: DLPack capsules over the record's
// buffers (torch.utils.dlpack.from_dlpack consumes them), declared here because the module does
// not include LibTorch.
#pragma once

#include <pybind11/pybind11.h>

#include "embedflow/record.hpp"

namespace embedflow::python {

// The record as a dict: numeric fields as DLPack capsules, the rest as record_to_dict gives them.
pybind11::dict record_to_torch(const RecordPtr& record);

}  // namespace embedflow::python
