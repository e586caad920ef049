// The 63-bit photo id derived from text: geo.photo_folder hashes each file's relative path, and
// geo.csv_photos (id_from: hash) hashes id columns that are not integers (Flickr ids written as
// strings, hex digests). One function, so both give the same id for the same text.
#pragma once

#include <cstdint>
#include <string_view>

namespace embedflow::geo {

// The first 8 bytes of SHA-256 of the UTF-8 text, read big-endian, with the top bit cleared (a
// non-negative i64). In Python:
//   int.from_bytes(hashlib.sha256(text.encode()).digest()[:8], "big") & (2**63 - 1)
std::int64_t photo_id(std::string_view text);

}  // namespace embedflow::geo
