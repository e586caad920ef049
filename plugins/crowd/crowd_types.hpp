// The crowd family's node types; plugin.cpp registers each one explicitly.
#pragma once

#include <embedflow/embedflow.hpp>

namespace embedflow::crowd {

NodeType grid_reader_type();

}  // namespace embedflow::crowd
