// File bytes through the HDF5 readers: a stream file opened, its checksums verified and every
// port replayed; any file opened as a table and read in batches. Damage must be a
// CorruptFileError or DataError naming the file; sizes declared by the file must not drive
// allocations beyond what the file holds.
#include <cstdint>
#include <string>

#include "embedflow/error.hpp"
#include "embedflow/hdf5/stream_file.hpp"
#include "fuzz_input_file.hpp"

namespace h5 = embedflow::hdf5;

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  const std::string path = embedflow::fuzz::input_file(data, size, ".h5");
  try {
    h5::StreamFileReader reader(path);
    reader.verify_checksums();
    for (const auto& port : reader.ports()) {
      h5::Cursor c = reader.replay(port);
      for (int i = 0; i < 10000 && c.next(); ++i) {
      }
    }
  } catch (const embedflow::Error&) {
  }
  try {
    h5::Table t = h5::open_table(path);
    h5::ReadOptions o;
    o.batch_size = 16;
    o.prefetch = false;
    h5::Cursor c = t.cursor(o);
    for (int i = 0; i < 1000 && c.next(); ++i) {
    }
  } catch (const embedflow::Error&) {
  }
  return 0;
}
