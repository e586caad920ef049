#include "core/idx.hpp"
#include <embedflow/file_kind.hpp>

#include <zlib.h>

#include <cerrno>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <memory>

namespace embedflow::image {
namespace {

struct GzCloser {
  void operator()(gzFile_s* f) const { gzclose(f); }
};
using GzFile = std::unique_ptr<gzFile_s, GzCloser>;

std::uint32_t be32(const unsigned char* p) {
  return (std::uint32_t{p[0]} << 24) | (std::uint32_t{p[1]} << 16) | (std::uint32_t{p[2]} << 8) | std::uint32_t{p[3]};
}

std::string gz_error(gzFile_s* f) {
  int code = 0;
  const char* msg = gzerror(f, &code);
  if (code == Z_ERRNO) return std::strerror(errno);
  return msg && *msg ? msg : "unexpected end of file";
}

// Reads up to n bytes; returns how many arrived (fewer only at end of data or on error).
std::size_t read_fully(gzFile_s* f, void* dst, std::size_t n) {
  auto* p = static_cast<unsigned char*>(dst);
  std::size_t got = 0;
  while (got < n) {
    // gzread takes an unsigned count; read in 1 GiB pieces.
    const unsigned piece = static_cast<unsigned>(std::min<std::size_t>(n - got, std::size_t{1} << 30));
    const int r = gzread(f, p + got, piece);
    if (r <= 0) break;
    got += static_cast<std::size_t>(r);
  }
  return got;
}

}  // namespace

IdxData read_idx(const std::string& path, int rank, std::int64_t max_records) {
  refuse_special_input(path, "IDX file");
  GzFile f(gzopen(path.c_str(), "rb"));
  if (!f) throw DataError(cat(path, ": cannot open (", std::strerror(errno), ")"));
  gzbuffer(f.get(), 1 << 18);
  unsigned char header[16];
  const std::size_t header_bytes = 4 + 4 * static_cast<std::size_t>(rank);
  if (read_fully(f.get(), header, header_bytes) != header_bytes)
    throw DataError(cat(path, ": truncated IDX header (", gz_error(f.get()), ")"));
  const std::uint32_t magic = be32(header);
  const std::uint32_t want = 0x0800u | static_cast<std::uint32_t>(rank);
  if (magic != want)
    throw DataError(cat(path, ": bad IDX magic 0x", std::hex, magic, std::dec, ", expected 0x", std::hex, want, std::dec,
                        " (u8 data, ", rank, " dims)", (magic >> 8) == 0x08 ? "" : "; is this an IDX file?"));
  IdxData d;
  d.count = be32(header + 4);
  if (rank == 3) {
    d.rows = be32(header + 8);
    d.cols = be32(header + 12);
    if (d.rows <= 0 || d.cols <= 0 || d.rows > 65536 || d.cols > 65536)
      throw DataError(cat(path, ": implausible image size ", d.rows, "x", d.cols));
  }
  if (d.count > (std::int64_t{1} << 31)) throw DataError(cat(path, ": implausible record count ", d.count));
  const std::int64_t n = max_records < 0 ? d.count : std::min(max_records, d.count);
  const std::size_t record_bytes = rank == 3 ? static_cast<std::size_t>(d.rows * d.cols) : 1;
  // The header's sizes must fit in the file before they size an allocation: deflate expands at
  // most 1032:1, a plain file not at all. A damaged header is then an error, not gigabytes.
  {
    std::error_code ec;
    const auto file_bytes = static_cast<double>(std::filesystem::file_size(path, ec));
    std::ifstream raw(path, std::ios::binary);
    const bool gzipped = raw.get() == 0x1f && raw.get() == 0x8b;
    const double can_hold = ec ? 0 : (gzipped ? 1032.0 * file_bytes : file_bytes);
    const double declared = static_cast<double>(n) * static_cast<double>(record_bytes) + static_cast<double>(header_bytes);
    if (!ec && declared > can_hold)
      throw DataError(cat(path, ": header declares ", d.count, " records of ", record_bytes, " bytes (", declared,
                          " bytes), more than the ", static_cast<std::uint64_t>(file_bytes), "-byte file can hold",
                          gzipped ? " compressed" : "", ": truncated or damaged"));
  }
  d.data = rank == 3 ? Array::zeros(DType::u8, {n, d.rows, d.cols, 1}) : Array::zeros(DType::u8, {n});
  const std::size_t want_bytes = static_cast<std::size_t>(n) * record_bytes;
  const std::size_t got = read_fully(f.get(), d.data.mutable_raw(), want_bytes);
  if (got != want_bytes) {
    const std::size_t record = got / record_bytes;
    throw DataError(cat(path, ": truncated at record ", record, " of ", d.count, " (", got, " of ", want_bytes,
                        " data bytes; ", gz_error(f.get()), ")"));
  }
  // A gzip member that was cut after the last byte we needed still fails its CRC; only check
  // when the whole file was read, so `limit` does not pay for decompressing the rest.
  if (n == d.count) {
    unsigned char extra;
    if (gzread(f.get(), &extra, 1) < 0) throw DataError(cat(path, ": ", gz_error(f.get())));
  }
  return d;
}

}  // namespace embedflow::image
