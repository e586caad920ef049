// The io plugin: HDF5 readers and writers (stream files and plain h5py-style tables).
#include <embedflow/hdf5/config.hpp>

#include "io_types.hpp"

namespace {
void register_types(embedflow::Registry& r) {
  r.add(embedflow::io::hdf5_reader_type());
  r.add(embedflow::io::hdf5_writer_type());
}
}  // namespace

EMBEDFLOW_PLUGIN("io", "0.1.0", "HDF5 " EMBEDFLOW_HDF5_VERSION, register_types)
