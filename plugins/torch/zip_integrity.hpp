// Integrity of a LibTorch archive before LibTorch reads it. A LibTorch archive (a checkpoint, a
// snapshot, a `weights` file) is a zip file of stored entries (tensors, pickles) and deflated ones
// (code), each with a CRC-32 in the zip's central directory; LibTorch's reader never checks them (PyTorch builds miniz with
// MINIZ_DISABLE_ZIP_READER_CRC32_CHECKS), so a flipped bit in a tensor loads silently as a
// different weight. Every archive embedflow loads is first walked here: the end-of-central-
// directory record (zip64 too), each central entry against its local header, each entry's bytes
// inside the file and before the directory, and each entry's CRC-32 (zlib; over the inflated
// bytes of a deflated entry, whose inflated length must be the recorded one). Standard library and
// zlib only, so the walk is fuzzed without LibTorch (fuzz/checkpoint_zip.cpp).
#pragma once

#include <cstddef>
#include <cstdint>
#include <filesystem>
#include <string>
#include <vector>

namespace embedflow::torchfam {

// Random access to the archive's bytes: a file, or a buffer (a snapshot record's `weights`).
class ByteSource {
 public:
  virtual ~ByteSource() = default;
  virtual std::uint64_t size() const = 0;
  // Reads exactly n bytes at offset (the caller keeps offset + n <= size()).
  virtual void read(std::uint64_t offset, void* out, std::size_t n) const = 0;
};

struct ZipEntry {
  std::string name;
  std::uint64_t data_offset = 0;  // first byte of the entry's data in the archive
  std::uint64_t size = 0;         // its bytes in the archive (deflated when `deflated`)
  bool deflated = false;
  std::uint32_t crc32 = 0;
};

// Walks the archive and checks every entry's CRC-32. Returns the entries in directory order.
// Throws embedflow::DataError "<what>: <reason>" naming the entry and offset when the archive is
// damaged: truncated, a directory that does not add up, an entry whose local header disagrees
// with the directory, an encrypted entry or a compression other than deflate (LibTorch writes
// neither), a deflated entry that does not inflate to its recorded length, a duplicate
// name, or bytes whose CRC-32 differs from the recorded one.
std::vector<ZipEntry> verify_zip(const ByteSource& bytes, const std::string& what);

// The same over a file (read in 1 MiB pieces) or a buffer.
std::vector<ZipEntry> verify_zip_file(const std::filesystem::path& file, const std::string& what);
std::vector<ZipEntry> verify_zip_bytes(const void* data, std::size_t size, const std::string& what);

}  // namespace embedflow::torchfam
