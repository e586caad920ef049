// The io family's node types; plugin.cpp registers each one explicitly.
#pragma once

#include <embedflow/embedflow.hpp>

namespace embedflow::io {

NodeType hdf5_reader_type();
NodeType hdf5_writer_type();

}  // namespace embedflow::io
