// The zip walk of zip_integrity.hpp. Field layouts follow PKWARE's APPNOTE.TXT (sections 4.3.7
// local file header, 4.3.12 central directory header, 4.3.14-4.3.16 zip64 and end records).
#include "zip_integrity.hpp"

#include <zlib.h>

#include <algorithm>
#include <cstring>
#include <fstream>
#include <memory>
#include <set>

#include "embedflow/error.hpp"

namespace embedflow::torchfam {
namespace {

constexpr std::uint32_t kLocalHeader = 0x04034b50, kCentralHeader = 0x02014b50, kEnd = 0x06054b50,
                        kZip64End = 0x06064b50, kZip64Locator = 0x07064b50;
constexpr std::size_t kEndSize = 22, kCentralSize = 46, kLocalSize = 30, kZip64EndSize = 56, kLocatorSize = 20;
constexpr std::uint64_t kMaxComment = 0xffff;

std::uint64_t le(const unsigned char* p, int n) {
  std::uint64_t v = 0;
  for (int i = n - 1; i >= 0; --i) v = (v << 8) | p[i];
  return v;
}

class FileSource final : public ByteSource {
 public:
  FileSource(const std::filesystem::path& file, const std::string& what) : what_(what) {
    in_.open(file, std::ios::binary);
    if (!in_) throw DataError(cat(what, ": cannot open the file"));
    in_.seekg(0, std::ios::end);
    size_ = static_cast<std::uint64_t>(in_.tellg());
  }
  std::uint64_t size() const override { return size_; }
  void read(std::uint64_t offset, void* out, std::size_t n) const override {
    in_.clear();
    in_.seekg(static_cast<std::streamoff>(offset));
    in_.read(static_cast<char*>(out), static_cast<std::streamsize>(n));
    if (static_cast<std::size_t>(in_.gcount()) != n) throw DataError(cat(what_, ": read error at byte ", offset));
  }

 private:
  std::string what_;
  mutable std::ifstream in_;
  std::uint64_t size_ = 0;
};

class BufferSource final : public ByteSource {
 public:
  BufferSource(const void* data, std::size_t size) : data_(static_cast<const unsigned char*>(data)), size_(size) {}
  std::uint64_t size() const override { return size_; }
  void read(std::uint64_t offset, void* out, std::size_t n) const override {
    if (n) std::memcpy(out, data_ + offset, n);
  }

 private:
  const unsigned char* data_;
  std::size_t size_;
};

struct Directory {
  std::uint64_t entries = 0, offset = 0, size = 0;
};

// The end-of-central-directory record: the last signature within the largest comment's reach
// whose comment length reaches exactly the file's end; then the zip64 record it points to when
// one of its fields is saturated.
Directory find_directory(const ByteSource& src, const std::string& what) {
  const std::uint64_t size = src.size();
  if (size < kEndSize) throw DataError(cat(what, ": ", size, " bytes, too short for a zip archive (truncated?)"));
  const std::uint64_t tail = std::min<std::uint64_t>(size, kEndSize + kMaxComment);
  std::vector<unsigned char> buf(static_cast<std::size_t>(tail));
  src.read(size - tail, buf.data(), buf.size());
  std::uint64_t end_at = 0;
  const unsigned char* end = nullptr;
  for (std::size_t i = buf.size() - kEndSize + 1; i-- > 0;) {
    if (le(&buf[i], 4) == kEnd && i + kEndSize + le(&buf[i + 20], 2) == buf.size()) {
      end = &buf[i];
      end_at = size - tail + i;
      break;
    }
  }
  if (!end) throw DataError(cat(what, ": no zip end-of-directory record (truncated or not a LibTorch archive)"));
  if (le(end + 4, 2) != 0 || le(end + 6, 2) != 0)
    throw DataError(cat(what, ": a multi-disk zip archive (not written by LibTorch)"));
  Directory d{le(end + 10, 2), le(end + 16, 4), le(end + 12, 4)};
  if (le(end + 8, 2) != d.entries) throw DataError(cat(what, ": the end record's two entry counts differ"));
  // LibTorch (miniz) always writes a zip64 end record and its locator before the classic one,
  // and the zip64 record's fields then hold the real counts; other writers add them only when a
  // classic field is saturated.
  std::uint64_t directory_end = end_at;
  unsigned char loc[kLocatorSize];
  const bool has_locator = end_at >= kLocatorSize && (src.read(end_at - kLocatorSize, loc, sizeof loc), le(loc, 4) == kZip64Locator);
  if (has_locator) {
    // miniz (LibTorch's reader) refuses these disk numbers as a multi-disk archive: so does the walk,
    // naming the field, rather than passing the file on to fail there.
    if (le(loc + 16, 4) != 1)
      throw DataError(cat(what, ": the zip64 locator counts ", le(loc + 16, 4), " disks (a multi-disk zip archive, or damaged)"));
    const std::uint64_t at = le(loc + 8, 8);
    if (at > end_at - kLocatorSize || end_at - kLocatorSize - at < kZip64EndSize)
      throw DataError(cat(what, ": the zip64 end record's offset ", at, " is outside the file"));
    unsigned char z[kZip64EndSize];
    src.read(at, z, sizeof z);
    if (le(z, 4) != kZip64End) throw DataError(cat(what, ": no zip64 end record at byte ", at));
    const std::uint64_t disk = le(z + 16, 4), directory_disk = le(z + 20, 4);
    if ((disk | directory_disk) != 0 && (disk != 1 || directory_disk != 1))
      throw DataError(cat(what, ": the zip64 end record names disk ", disk, " and directory disk ", directory_disk,
                          " (a multi-disk zip archive, or damaged)"));
    d = Directory{le(z + 32, 8), le(z + 48, 8), le(z + 40, 8)};
    if (le(z + 24, 8) != d.entries) throw DataError(cat(what, ": the zip64 end record's two entry counts differ"));
    directory_end = at;
  } else if (d.entries == 0xffff || d.offset == 0xffffffff || d.size == 0xffffffff) {
    throw DataError(cat(what, ": saturated end record fields without a zip64 locator"));
  }
  if (d.offset > directory_end || d.size != directory_end - d.offset)
    throw DataError(cat(what, ": the central directory (", d.size, " bytes at byte ", d.offset,
                        ") does not end where the end record begins (byte ", directory_end, ")"));
  if (d.entries > d.size / kCentralSize)
    throw DataError(cat(what, ": ", d.entries, " entries cannot fit a ", d.size, "-byte central directory"));
  return d;
}

// The zip64 extended information (header 0x0001) replaces, in order, each saturated field.
void read_zip64_extra(const unsigned char* extra, std::size_t n, std::uint64_t& usize, std::uint64_t& csize,
                      std::uint64_t& offset, const std::string& where) {
  const bool need_u = usize == 0xffffffff, need_c = csize == 0xffffffff, need_o = offset == 0xffffffff;
  if (!need_u && !need_c && !need_o) return;
  for (std::size_t i = 0; i + 4 <= n;) {
    const std::uint64_t id = le(extra + i, 2), len = le(extra + i + 2, 2);
    if (i + 4 + len > n) break;
    if (id == 1) {
      const unsigned char* p = extra + i + 4;
      std::uint64_t left = len;
      auto take = [&](std::uint64_t& field) {
        if (left < 8) throw DataError(cat(where, ": a zip64 field too short for its sizes"));
        field = le(p, 8);
        p += 8;
        left -= 8;
      };
      if (need_u) take(usize);
      if (need_c) take(csize);
      if (need_o) take(offset);
      return;
    }
    i += 4 + len;
  }
  throw DataError(cat(where, ": saturated sizes without a zip64 field"));
}

std::uint32_t crc_of(const ByteSource& src, std::uint64_t offset, std::uint64_t size) {
  std::vector<unsigned char> piece(static_cast<std::size_t>(std::min<std::uint64_t>(size, 1u << 20)));
  uLong crc = crc32(0L, Z_NULL, 0);
  for (std::uint64_t done = 0; done < size;) {
    const auto n = static_cast<std::size_t>(std::min<std::uint64_t>(size - done, piece.size()));
    src.read(offset + done, piece.data(), n);
    crc = crc32(crc, piece.data(), static_cast<uInt>(n));
    done += n;
  }
  return static_cast<std::uint32_t>(crc);
}

// A deflated entry (LibTorch compresses its code/ entries): inflated in pieces, its length
// checked against the directory's and the CRC-32 taken over the inflated bytes.
std::uint32_t inflated_crc_of(const ByteSource& src, std::uint64_t offset, std::uint64_t csize, std::uint64_t usize,
                              const std::string& entry) {
  z_stream z{};
  if (inflateInit2(&z, -MAX_WBITS) != Z_OK) throw DataError(cat(entry, ": cannot start zlib's inflate"));
  std::unique_ptr<z_stream, int (*)(z_stream*)> guard(&z, inflateEnd);
  std::vector<unsigned char> in(static_cast<std::size_t>(std::min<std::uint64_t>(csize, 1u << 16))), out(1u << 16);
  uLong crc = crc32(0L, Z_NULL, 0);
  std::uint64_t read = 0, produced = 0;
  int status = Z_OK;
  while (status != Z_STREAM_END) {
    if (z.avail_in == 0) {
      if (read == csize) throw DataError(cat(entry, ": its deflated bytes end before the stream does (damaged)"));
      const auto n = static_cast<std::size_t>(std::min<std::uint64_t>(csize - read, in.size()));
      src.read(offset + read, in.data(), n);
      read += n;
      z.next_in = in.data();
      z.avail_in = static_cast<uInt>(n);
    }
    z.next_out = out.data();
    z.avail_out = static_cast<uInt>(out.size());
    status = inflate(&z, Z_NO_FLUSH);
    if (status != Z_OK && status != Z_STREAM_END)
      throw DataError(cat(entry, " is damaged: zlib cannot inflate it (", z.msg ? z.msg : "error ", status, ")"));
    const std::size_t n = out.size() - z.avail_out;
    produced += n;
    if (produced > usize) throw DataError(cat(entry, " is damaged: it inflates past its recorded ", usize, " bytes"));
    crc = crc32(crc, out.data(), static_cast<uInt>(n));
  }
  if (produced != usize)
    throw DataError(cat(entry, " is damaged: it inflates to ", produced, " bytes, the archive recorded ", usize));
  return static_cast<std::uint32_t>(crc);
}

}  // namespace

std::vector<ZipEntry> verify_zip(const ByteSource& src, const std::string& what) {
  const Directory d = find_directory(src, what);
  std::vector<unsigned char> dir(static_cast<std::size_t>(d.size));
  src.read(d.offset, dir.data(), dir.size());
  std::vector<ZipEntry> entries;
  std::set<std::string> names;
  std::size_t at = 0;
  for (std::uint64_t k = 0; k < d.entries; ++k) {
    const std::string here = cat(what, ": central directory entry ", k, " (byte ", d.offset + at, ")");
    if (dir.size() - at < kCentralSize || le(&dir[at], 4) != kCentralHeader)
      throw DataError(cat(here, ": no central directory header"));
    const unsigned char* h = &dir[at];
    const std::uint64_t flags = le(h + 8, 2), method = le(h + 10, 2), name_len = le(h + 28, 2),
                        extra_len = le(h + 30, 2), comment_len = le(h + 32, 2);
    std::uint64_t csize = le(h + 20, 4), usize = le(h + 24, 4), local = le(h + 42, 4);
    if (dir.size() - at - kCentralSize < name_len + extra_len + comment_len)
      throw DataError(cat(here, ": its name and fields run past the directory"));
    ZipEntry e;
    e.name.assign(reinterpret_cast<const char*>(h + kCentralSize), static_cast<std::size_t>(name_len));
    e.crc32 = static_cast<std::uint32_t>(le(h + 16, 4));
    const std::string entry = cat(what, ": entry '", e.name, "'");
    read_zip64_extra(h + kCentralSize + name_len, static_cast<std::size_t>(extra_len), usize, csize, local, entry);
    // miniz reads an entry on another disk than 0 or 1 as a multi-disk archive and refuses it.
    if (const std::uint64_t disk = le(h + 34, 2); disk > 1)
      throw DataError(cat(entry, " is on disk ", disk, " (a multi-disk zip archive, or damaged)"));
    if (flags & 1) throw DataError(cat(entry, " is encrypted (LibTorch never encrypts)"));
    if (method != 0 && method != 8)
      throw DataError(cat(entry, " uses compression method ", method, " (LibTorch writes stored and deflated entries only)"));
    if (method == 0 && csize != usize)
      throw DataError(cat(entry, ": a stored entry of ", usize, " bytes recorded as ", csize, " (damaged)"));
    if (!names.insert(e.name).second) throw DataError(cat(entry, " appears twice"));
    // The local header: same name, and the data it introduces lies before the directory.
    unsigned char lh[kLocalSize];
    if (local > d.offset || d.offset - local < kLocalSize)
      throw DataError(cat(entry, ": its local header offset ", local, " is outside the entries' area"));
    src.read(local, lh, sizeof lh);
    if (le(lh, 4) != kLocalHeader) throw DataError(cat(entry, ": no local header at byte ", local));
    const std::uint64_t local_name = le(lh + 26, 2), local_extra = le(lh + 28, 2);
    if (local_name != name_len || le(lh + 8, 2) != method)
      throw DataError(cat(entry, ": the local header at byte ", local, " disagrees with the directory"));
    e.data_offset = local + kLocalSize + local_name + local_extra;
    e.size = csize;
    e.deflated = method == 8;
    if (e.data_offset > d.offset || d.offset - e.data_offset < e.size)
      throw DataError(cat(entry, ": its ", e.size, " bytes at byte ", e.data_offset, " run into the central directory"));
    std::string stored_name(static_cast<std::size_t>(local_name), '\0');
    src.read(local + kLocalSize, stored_name.data(), stored_name.size());
    if (stored_name != e.name)
      throw DataError(cat(entry, ": the local header at byte ", local, " names another entry"));
    const std::uint32_t crc =
        e.deflated ? inflated_crc_of(src, e.data_offset, csize, usize, entry) : crc_of(src, e.data_offset, e.size);
    if (crc != e.crc32)
      throw DataError(cat(entry, " is damaged: its ", usize, " bytes at byte ", e.data_offset, " have CRC-32 ", crc,
                          ", the archive recorded ", e.crc32));
    entries.push_back(std::move(e));
    at += static_cast<std::size_t>(kCentralSize + name_len + extra_len + comment_len);
  }
  if (at != dir.size()) throw DataError(cat(what, ": ", dir.size() - at, " bytes after the last directory entry"));
  return entries;
}

std::vector<ZipEntry> verify_zip_file(const std::filesystem::path& file, const std::string& what) {
  FileSource src(file, what);
  return verify_zip(src, what);
}

std::vector<ZipEntry> verify_zip_bytes(const void* data, std::size_t size, const std::string& what) {
  BufferSource src(data, size);
  return verify_zip(src, what);
}

}  // namespace embedflow::torchfam
