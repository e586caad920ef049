// File bytes through the zip walk every checkpoint, snapshot and `weights` file passes before
// LibTorch reads it (plugins/torch/zip_integrity.cpp): any input must give the entries or a
// DataError, never read outside the buffer, overflow or allocate without bound. Entries it
// accepts lie inside the buffer, before each other's ends, with distinct names.
#include <cstdint>
#include <cstdlib>
#include <set>
#include <string>
#include <vector>

#include "embedflow/error.hpp"
#include "zip_integrity.hpp"

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  // An exact-size heap copy, so AddressSanitizer catches a read one byte past the end.
  std::vector<unsigned char> bytes(data, data + size);
  try {
    const auto entries = embedflow::torchfam::verify_zip_bytes(bytes.data(), bytes.size(), "fuzz.pt");
    std::set<std::string> names;
    for (const auto& e : entries) {
      if (e.data_offset > size || size - e.data_offset < e.size) std::abort();
      if (!names.insert(e.name).second) std::abort();
    }
  } catch (const embedflow::DataError& e) {
    if (std::string(e.what()).rfind("fuzz.pt: ", 0) != 0) std::abort();  // every refusal names the file
  }
  return 0;
}
