#include "photo_folder.hpp"

#include <algorithm>
#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <memory>
#include <set>
#include <utility>

#include <dirent.h>
#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <openssl/evp.h>

#ifdef EMBEDFLOW_HAVE_LIBHEIF
#include <libheif/heif.h>
#endif

#include "embedflow/error.hpp"
#include "embedflow/file_kind.hpp"
#include "embedflow/hdf5/stream_file.hpp"

namespace embedflow::geo {
namespace fs = std::filesystem;
namespace {

// Bumped whenever the header reader or the index layout changes what a row means, so an index
// written by an older reader is rebuilt rather than trusted.
constexpr const char* kIndexFormat = "embedflow-photo-headers/1";
// Most EXIF blocks without a thumbnail fit; a longer one costs one more read of exactly the rest.
constexpr std::size_t kFirstRead = 8 * 1024;
constexpr std::size_t kMaxHeaderBytes = 16 * 1024 * 1024;

bool photo_format(const std::string& name, PhotoFormat& format) {
  const auto dot = name.rfind('.');
  if (dot == std::string::npos) return false;
  std::string e = name.substr(dot + 1);
  std::transform(e.begin(), e.end(), e.begin(), [](unsigned char c) { return static_cast<char>(std::tolower(c)); });
  if (e == "jpg" || e == "jpeg") format = PhotoFormat::jpeg;
  else if (e == "png") format = PhotoFormat::png;
  else if (e == "heic" || e == "heif") format = PhotoFormat::heic;
  else return false;
  return true;
}

std::int64_t mtime_ns(const struct stat& st) {
  return static_cast<std::int64_t>(st.st_mtim.tv_sec) * 1000000000 + st.st_mtim.tv_nsec;
}

struct Walker {
  fs::path root;
  FolderListing out;
  // (device, inode) of the directories on the current path from the root: meeting one again is a loop.
  std::vector<std::pair<dev_t, ino_t>> stack;

  void problem(const std::string& rel, std::string why) {
    FolderEntry e;
    e.rel_path = rel;
    e.problem = std::move(why);
    out.entries.push_back(std::move(e));
  }

  void walk(const fs::path& dir, const std::string& rel_dir) {
    DIR* d = ::opendir(dir.c_str());
    if (!d) {
      problem(rel_dir.empty() ? "." : rel_dir, std::string("cannot list the directory (") + std::strerror(errno) + ")");
      return;
    }
    std::vector<std::string> names;
    while (const dirent* e = ::readdir(d)) {
      const std::string n = e->d_name;
      if (n != "." && n != "..") names.push_back(n);
    }
    ::closedir(d);
    std::sort(names.begin(), names.end());
    for (const std::string& name : names) {
      const fs::path full = dir / name;
      const std::string rel = rel_dir.empty() ? name : rel_dir + "/" + name;
      struct stat st {};
      if (::stat(full.c_str(), &st) != 0) {
        // A dangling link or a link to itself (ELOOP): named if it looks like a photo, or is a link.
        struct stat lst {};
        PhotoFormat f;
        const bool is_link = ::lstat(full.c_str(), &lst) == 0 && S_ISLNK(lst.st_mode);
        if (photo_format(name, f) || is_link)
          problem(rel, std::string(is_link ? "symbolic link cannot be followed (" : "cannot stat (") + std::strerror(errno) + ")");
        continue;
      }
      if (S_ISDIR(st.st_mode)) {
        const auto key = std::make_pair(st.st_dev, st.st_ino);
        if (std::find(stack.begin(), stack.end(), key) != stack.end()) {
          problem(rel, "symbolic link loop: leads back to a directory above it (not entered)");
          continue;
        }
        stack.push_back(key);
        walk(full, rel);
        stack.pop_back();
        continue;
      }
      PhotoFormat format;
      if (!photo_format(name, format)) {
        ++out.other_files;
        continue;
      }
      FolderEntry e;
      e.rel_path = rel;
      e.format = format;
      if (!S_ISREG(st.st_mode)) {
        e.problem = "is a " + special_file_kind(full) + ", not a regular file (not opened)";
      } else {
        e.size = static_cast<std::int64_t>(st.st_size);
        e.mtime_ns = mtime_ns(st);
      }
      out.entries.push_back(std::move(e));
    }
  }
};

PhotoHeader bad(std::string why) {
  PhotoHeader h;
  h.status = PhotoHeader::Status::bad;
  h.error = std::move(why);
  return h;
}

PhotoHeader from_exif(bool ok, bool found, image::ExifFields fields, std::string error) {
  if (!ok) return bad(std::move(error));
  PhotoHeader h;
  h.status = found ? PhotoHeader::Status::ok : PhotoHeader::Status::no_exif;
  h.exif = std::move(fields);
  return h;
}

PhotoHeader read_jpeg_or_png(const fs::path& path) {
  // O_NONBLOCK: a FIFO that appeared after the walk opens at once and is refused by fstat.
  const int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC | O_NONBLOCK);
  if (fd < 0) return bad(std::string("cannot open (") + std::strerror(errno) + ")");
  struct stat st {};
  if (::fstat(fd, &st) != 0 || !S_ISREG(st.st_mode)) {
    ::close(fd);
    return bad("not a regular file");
  }
  const auto file_size = static_cast<std::size_t>(st.st_size);
  std::vector<unsigned char> bytes;
  std::size_t want = std::min(kFirstRead, file_size);
  std::string error;
  for (;;) {
    const std::size_t had = bytes.size();
    bytes.resize(want);
    std::size_t got = had;
    while (got < want) {
      const ssize_t r = ::pread(fd, bytes.data() + got, want - got, static_cast<off_t>(got));
      if (r < 0 && errno == EINTR) continue;
      if (r < 0) {
        const int e = errno;
        ::close(fd);
        return bad(std::string("read error (") + std::strerror(e) + ")");
      }
      if (r == 0) break;
      got += static_cast<std::size_t>(r);
    }
    bytes.resize(got);
    const image::ExifBlock b = image::locate_exif_block(bytes.data(), bytes.size());
    if (b.status != image::ExifBlock::Status::need_more || got >= file_size || got < want) break;
    if (b.need > kMaxHeaderBytes) {
      ::close(fd);
      return bad("EXIF: the metadata reaches past the first 16 MiB of the file (byte " + std::to_string(b.need) + ")");
    }
    want = std::min(std::max(b.need, got * 2), std::min(file_size, kMaxHeaderBytes));
  }
  ::close(fd);
  if (bytes.empty()) return bad("empty file");
  image::ExifFields fields;
  bool found = false;
  const bool ok = image::read_exif_header(bytes.data(), bytes.size(), fields, found, error);
  return from_exif(ok, found, std::move(fields), std::move(error));
}

#ifdef EMBEDFLOW_HAVE_LIBHEIF
PhotoHeader read_heic(const fs::path& path) {
  // libheif opens the path itself: refuse what is not a regular file first (a FIFO blocks open()).
  struct stat st {};
  if (::stat(path.c_str(), &st) != 0) return bad(std::string("cannot stat (") + std::strerror(errno) + ")");
  if (!S_ISREG(st.st_mode)) return bad("not a regular file");
  if (::access(path.c_str(), R_OK) != 0) return bad(std::string("cannot open (") + std::strerror(errno) + ")");
  std::unique_ptr<heif_context, void (*)(heif_context*)> ctx(heif_context_alloc(), heif_context_free);
  heif_error e = heif_context_read_from_file(ctx.get(), path.c_str(), nullptr);
  if (e.code != heif_error_Ok) return bad(std::string("libheif cannot open it: ") + (e.message ? e.message : "unknown error"));
  heif_image_handle* raw = nullptr;
  e = heif_context_get_primary_image_handle(ctx.get(), &raw);
  if (e.code != heif_error_Ok) return bad(std::string("libheif: no primary image: ") + (e.message ? e.message : ""));
  std::unique_ptr<heif_image_handle, void (*)(const heif_image_handle*)> handle(raw, heif_image_handle_release);
  heif_item_id id = 0;
  if (heif_image_handle_get_list_of_metadata_block_IDs(handle.get(), "Exif", &id, 1) < 1) {
    PhotoHeader h;
    h.status = PhotoHeader::Status::no_exif;
    return h;
  }
  const std::size_t size = heif_image_handle_get_metadata_size(handle.get(), id);
  if (size > kMaxHeaderBytes) return bad("EXIF: the Exif item holds " + std::to_string(size) + " bytes (more than 16 MiB)");
  std::vector<unsigned char> block(size);
  e = heif_image_handle_get_metadata(handle.get(), id, block.data());
  if (e.code != heif_error_Ok) return bad(std::string("libheif cannot read the Exif item: ") + (e.message ? e.message : ""));
  // ISO/IEC 23008-12 A.2.1: the item starts with a 32-bit big-endian offset to the TIFF header
  // from the end of that field.
  if (size < 4) return bad("EXIF: the Exif item is shorter than its 4-byte header offset");
  const std::uint64_t skip = (std::uint64_t(block[0]) << 24) | (std::uint64_t(block[1]) << 16) | (std::uint64_t(block[2]) << 8) | block[3];
  if (skip > size - 4) return bad("EXIF: the Exif item's TIFF header offset " + std::to_string(skip) + " is past its end");
  image::ExifFields fields;
  std::string error;
  const bool ok = image::parse_exif_block(block.data() + 4 + skip, size - 4 - skip, fields, error);
  return from_exif(ok, true, std::move(fields), std::move(error));
}
#endif

}  // namespace

FolderListing list_photo_folder(const fs::path& root) {
  struct stat st {};
  if (::stat(root.c_str(), &st) != 0 || !S_ISDIR(st.st_mode)) throw ConfigError(cat(root.string(), ": not a directory"));
  Walker w;
  w.root = root;
  w.stack.emplace_back(st.st_dev, st.st_ino);
  w.walk(root, "");
  std::sort(w.out.entries.begin(), w.out.entries.end(),
            [](const FolderEntry& a, const FolderEntry& b) { return a.rel_path < b.rel_path; });
  return std::move(w.out);
}

bool heic_supported() {
#ifdef EMBEDFLOW_HAVE_LIBHEIF
  return true;
#else
  return false;
#endif
}

PhotoHeader read_photo_header(const fs::path& path, PhotoFormat format) {
  if (format != PhotoFormat::heic) return read_jpeg_or_png(path);
#ifdef EMBEDFLOW_HAVE_LIBHEIF
  return read_heic(path);
#else
  return bad("this build has no HEIC support (libheif was not found when embedflow was configured)");
#endif
}

fs::path default_header_index(const fs::path& root) {
  fs::path cache;
  if (const char* d = std::getenv("EMBEDFLOW_CACHE_DIR"); d && *d) cache = d;
  else if (const char* x = std::getenv("XDG_CACHE_HOME"); x && *x) cache = fs::path(x) / "embedflow";
  else if (const char* h = std::getenv("HOME"); h && *h) cache = fs::path(h) / ".cache" / "embedflow";
  else cache = ".embedflow-cache";
  std::error_code ec;
  fs::path abs = fs::weakly_canonical(fs::absolute(root), ec);
  if (ec) abs = fs::absolute(root);
  unsigned char digest[EVP_MAX_MD_SIZE];
  unsigned int n = 0;
  const std::string text = abs.string();
  EVP_Digest(text.data(), text.size(), digest, &n, EVP_sha256(), nullptr);
  static const char* hex = "0123456789abcdef";
  std::string name;
  for (int i = 0; i < 8; ++i) {
    name += hex[digest[i] >> 4];
    name += hex[digest[i] & 15];
  }
  return cache / "photo_folder" / (name + ".h5");
}

bool parse_utc_offset(const std::string& text, int& seconds) {
  if (text == "UTC" || text == "Z" || text == "utc" || text == "GMT") {
    seconds = 0;
    return true;
  }
  std::string t = text;
  if (t.rfind("UTC", 0) == 0) t = t.substr(3);
  if (t.size() < 2 || (t[0] != '+' && t[0] != '-')) return false;
  const int sign = t[0] == '-' ? -1 : 1;
  std::string digits;
  for (std::size_t i = 1; i < t.size(); ++i) {
    if (t[i] == ':' && i == 3) continue;
    if (t[i] < '0' || t[i] > '9') return false;
    digits += t[i];
  }
  int h = 0, m = 0;
  if (digits.size() == 1 || digits.size() == 2) h = std::stoi(digits);
  else if (digits.size() == 4) {
    h = std::stoi(digits.substr(0, 2));
    m = std::stoi(digits.substr(2));
  } else {
    return false;
  }
  if (h > 14 || m > 59) return false;
  seconds = sign * (h * 3600 + m * 60);
  return true;
}

std::vector<std::pair<std::string, IndexedHeader>> load_header_index(const fs::path& index, std::string& why_not) {
  std::vector<std::pair<std::string, IndexedHeader>> out;
  std::error_code ec;
  if (!fs::exists(index, ec)) {
    why_not = "no index yet";
    return out;
  }
  try {
    hdf5::StreamFileReader reader(index);
    if (reader.attribute("index_format").value_or("") != kIndexFormat) {
      why_not = "written by another version of the header reader";
      return out;
    }
    const hdf5::Table& t = reader.port("headers");
    if (t.rows() == 0) return out;
    const Record r = t.read_rows(0, t.rows());
    const auto n = t.rows();
    const Array& rel = r.get("rel_path");
    auto i64 = [&](const char* f) { return r.get(f).data<std::int64_t>(); };
    auto f64 = [&](const char* f) { return r.get(f).data<double>(); };
    const std::int64_t *size = i64("size"), *mtime = i64("mtime_ns"), *status = i64("status"), *local = i64("local_time"),
                       *has_time = i64("has_time"), *has_offset = i64("has_offset"), *offset = i64("offset_seconds"),
                       *orientation = i64("orientation"), *has_gps = i64("has_gps"), *has_gps_tags = i64("has_gps_tags");
    const double *lat = f64("lat"), *lon = f64("lon"), *hpe = f64("h_positioning_error_m");
    const Array &artist = r.get("artist"), &serial = r.get("body_serial"), &error = r.get("error");
    out.reserve(static_cast<std::size_t>(n));
    for (std::int64_t i = 0; i < n; ++i) {
      IndexedHeader h;
      h.size = size[i];
      h.mtime_ns = mtime[i];
      h.header.status = static_cast<PhotoHeader::Status>(status[i]);
      h.header.error = error.string_at(i);
      image::ExifFields& f = h.header.exif;
      f.has_gps = has_gps[i] != 0;
      f.has_gps_tags = has_gps_tags[i] != 0;
      f.lat = lat[i];
      f.lon = lon[i];
      f.h_positioning_error_m = hpe[i];
      f.has_time = has_time[i] != 0;
      f.local_time = local[i];
      f.has_offset = has_offset[i] != 0;
      f.offset_seconds = static_cast<int>(offset[i]);
      f.artist = artist.string_at(i);
      f.body_serial = serial.string_at(i);
      f.orientation = static_cast<int>(orientation[i]);
      out.emplace_back(rel.string_at(i), std::move(h));
    }
  } catch (const std::exception& e) {
    why_not = cat("unreadable (", e.what(), "); rebuilt");
    out.clear();
  }
  return out;
}

void save_header_index(const fs::path& index, const fs::path& root, const std::vector<FolderEntry>& entries,
                       const std::vector<PhotoHeader>& headers) {
  std::vector<std::string> rel, artist, serial, error;
  std::vector<std::int64_t> size, mtime, status, local, has_time, has_offset, offset, orientation, has_gps, has_gps_tags;
  std::vector<double> lat, lon, hpe;
  for (std::size_t i = 0; i < entries.size(); ++i) {
    if (!entries[i].problem.empty()) continue;  // found by the walk, not read: nothing to keep
    const PhotoHeader& h = headers[i];
    const image::ExifFields& f = h.exif;
    rel.push_back(entries[i].rel_path);
    size.push_back(entries[i].size);
    mtime.push_back(entries[i].mtime_ns);
    status.push_back(static_cast<std::int64_t>(h.status));
    error.push_back(h.error);
    has_gps.push_back(f.has_gps);
    has_gps_tags.push_back(f.has_gps_tags);
    lat.push_back(f.lat);
    lon.push_back(f.lon);
    hpe.push_back(f.h_positioning_error_m);
    has_time.push_back(f.has_time);
    local.push_back(f.local_time);
    has_offset.push_back(f.has_offset);
    offset.push_back(f.offset_seconds);
    artist.push_back(f.artist);
    serial.push_back(f.body_serial);
    orientation.push_back(f.orientation);
  }
  const auto n = static_cast<std::int64_t>(rel.size());
  Record r;
  r.set("rel_path", Array::strings(std::move(rel)));
  r.set("size", Array::from_vector<std::int64_t>({n}, std::move(size)));
  r.set("mtime_ns", Array::from_vector<std::int64_t>({n}, std::move(mtime)));
  r.set("status", Array::from_vector<std::int64_t>({n}, std::move(status)));
  r.set("error", Array::strings(std::move(error)));
  r.set("has_gps", Array::from_vector<std::int64_t>({n}, std::move(has_gps)));
  r.set("has_gps_tags", Array::from_vector<std::int64_t>({n}, std::move(has_gps_tags)));
  r.set("lat", Array::from_vector<double>({n}, std::move(lat)));
  r.set("lon", Array::from_vector<double>({n}, std::move(lon)));
  r.set("h_positioning_error_m", Array::from_vector<double>({n}, std::move(hpe)));
  r.set("has_time", Array::from_vector<std::int64_t>({n}, std::move(has_time)));
  r.set("local_time", Array::from_vector<std::int64_t>({n}, std::move(local)));
  r.set("has_offset", Array::from_vector<std::int64_t>({n}, std::move(has_offset)));
  r.set("offset_seconds", Array::from_vector<std::int64_t>({n}, std::move(offset)));
  r.set("artist", Array::strings(std::move(artist)));
  r.set("body_serial", Array::strings(std::move(serial)));
  r.set("orientation", Array::from_vector<std::int64_t>({n}, std::move(orientation)));
  fs::create_directories(index.parent_path());
  hdf5::WriterOptions o;
  o.checksum = true;
  hdf5::StreamFileWriter w(index, {{"index_format", kIndexFormat}, {"root", fs::absolute(root).string()}}, o);
  w.add_port("headers", hdf5::Layout::batches);
  if (n > 0) w.append("headers", r);
  w.commit();
}

}  // namespace embedflow::geo
