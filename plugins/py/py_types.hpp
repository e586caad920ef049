// The py family: node types whose work is a Python function.
#pragma once

#include <pybind11/pybind11.h>

#include <string>

#include "embedflow/embedflow.hpp"

namespace embedflow::py_family {

NodeType map_type();

// Starts the Python interpreter the first time a node needs it, unless the process already runs
// one (a graph started from the embedflow Python module). The interpreter then lives until the
// process exits; the GIL is released between calls so any engine worker can take it.
void ensure_interpreter();

// The traceback of a Python exception, as `traceback.format_exception` prints it. Call with the
// GIL held.
std::string python_traceback(const pybind11::error_already_set& e);

}  // namespace embedflow::py_family
