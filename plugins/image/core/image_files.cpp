#include "core/image_files.hpp"

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <filesystem>
#include <optional>
#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <opencv2/imgcodecs.hpp>
#include <opencv2/imgproc.hpp>

#include <embedflow/csv.hpp>
#include <embedflow/error.hpp>
#include <embedflow/log.hpp>

#include "core/exif.hpp"
#include "core/image_header.hpp"
#include "core/jpeg.hpp"
#include "core/ops.hpp"

namespace embedflow::image {
namespace fs = std::filesystem;
namespace {

bool parse_i64(const std::string& s, std::int64_t& out) {
  if (s.empty()) return false;
  char* end = nullptr;
  errno = 0;
  long long v = std::strtoll(s.c_str(), &end, 10);
  if (errno || *end != '\0') return false;
  out = v;
  return true;
}

// Leases this thread holds (of any budget): a thread that holds one decodes without waiting.
thread_local int leases_held = 0;

bool is_image_extension(const fs::path& p) {
  std::string e = p.extension().string();
  std::transform(e.begin(), e.end(), e.begin(), [](unsigned char c) { return static_cast<char>(std::tolower(c)); });
  static const char* kExt[] = {".png", ".jpg", ".jpeg", ".bmp", ".tif", ".tiff", ".webp", ".pgm", ".ppm", ".pbm", ".pnm"};
  for (const char* k : kExt)
    if (e == k) return true;
  return false;
}

int pick_column(const CsvTable& t, const std::string& given, const std::string& fallback, const char* what) {
  if (given == "auto") return t.column(fallback);
  if (given.empty()) return -1;
  const int c = t.column(given);
  if (c < 0) {
    std::string cols;
    for (const auto& h : t.header) cols += (cols.empty() ? "" : ", ") + h;
    throw ConfigError(cat(t.file, ":", t.header_line, ": no ", what, " column '", given, "' (columns: ", cols, ")"));
  }
  return c;
}

}  // namespace

std::vector<ImageEntry> list_csv(const std::string& csv, const CsvListOptions& o) {
  const CsvTable t = read_csv_table(csv);
  if (o.path_column.empty()) throw ConfigError("path_column must name a column");
  const int pc = pick_column(t, o.path_column, o.path_column, "path");
  const int ic = pick_column(t, o.id_column, "id", "id");
  const int lc = pick_column(t, o.label_column, "label", "label");
  const fs::path root = o.root.empty() ? fs::path(csv).parent_path() : fs::path(o.root);
  std::vector<ImageEntry> out;
  out.reserve(t.rows.size());
  for (std::size_t r = 0; r < t.rows.size(); ++r) {
    const auto& row = t.rows[r];
    ImageEntry e;
    e.where = cat(csv, ":", t.lines[r]);
    const std::string& p = row[static_cast<std::size_t>(pc)];
    if (p.empty()) throw DataError(cat(e.where, ": empty path"));
    e.path = fs::path(p).is_absolute() ? p : (root / p).string();
    e.id = static_cast<std::int64_t>(r);
    if (ic >= 0 && !parse_i64(row[static_cast<std::size_t>(ic)], e.id))
      throw DataError(cat(e.where, ": id '", row[static_cast<std::size_t>(ic)], "' is not an integer"));
    if (lc >= 0 && !parse_i64(row[static_cast<std::size_t>(lc)], e.label))
      throw DataError(cat(e.where, ": label '", row[static_cast<std::size_t>(lc)], "' is not an integer"));
    out.push_back(std::move(e));
  }
  return out;
}

std::vector<ImageEntry> list_directory(const std::string& dir, std::vector<std::string>& class_names) {
  std::error_code ec;
  if (!fs::is_directory(dir, ec)) throw ConfigError(cat(dir, ": not a directory"));
  class_names.clear();
  std::size_t loose = 0;
  for (const auto& d : fs::directory_iterator(dir)) {
    if (d.is_directory()) class_names.push_back(d.path().filename().string());
    else if (d.is_regular_file() && is_image_extension(d.path())) ++loose;
  }
  // Images directly in dir have no class; say so rather than drop them silently.
  if (loose) log_warning("image", dir, ": ", loose, " images directly in the directory are ignored (expected dir/<class>/<image>)");
  std::sort(class_names.begin(), class_names.end());
  if (class_names.empty()) throw ConfigError(cat(dir, ": no class subdirectories (expected dir/<class>/<image>)"));
  bool numeric = true;
  std::vector<std::int64_t> numbers(class_names.size());
  for (std::size_t i = 0; i < class_names.size(); ++i) numeric = numeric && parse_i64(class_names[i], numbers[i]);
  std::vector<std::pair<std::string, std::int64_t>> files;  // relative path, label
  for (std::size_t i = 0; i < class_names.size(); ++i) {
    const fs::path sub = fs::path(dir) / class_names[i];
    const std::int64_t label = numeric ? numbers[i] : static_cast<std::int64_t>(i);
    // Entries come back as sub/...; the relative path is the class name plus that tail (string
    // work: fs::relative canonicalises every path with system calls, ~20 us a file).
    const std::string prefix = sub.string();
    for (const auto& f : fs::recursive_directory_iterator(sub, fs::directory_options::follow_directory_symlink))
      if (f.is_regular_file() && is_image_extension(f.path()))
        files.emplace_back(class_names[i] + f.path().string().substr(prefix.size()), label);
  }
  std::sort(files.begin(), files.end());
  std::vector<ImageEntry> out;
  out.reserve(files.size());
  for (std::size_t i = 0; i < files.size(); ++i) {
    ImageEntry e;
    e.path = (fs::path(dir) / files[i].first).string();
    e.where = e.path;
    e.id = static_cast<std::int64_t>(i);
    e.label = files[i].second;
    out.push_back(std::move(e));
  }
  return out;
}

bool read_file_bytes(const std::string& path, std::vector<unsigned char>& bytes, std::string& error) {
  // POSIX calls: an ifstream costs more than decoding a 28x28 PNG.
  // O_NONBLOCK: a FIFO opens at once (and is refused below) instead of waiting for a writer.
  const int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC | O_NONBLOCK);
  if (fd < 0) {
    error = cat("cannot open (", std::strerror(errno), ")");
    return false;
  }
  struct stat st {};
  if (::fstat(fd, &st) != 0 || !S_ISREG(st.st_mode)) {
    ::close(fd);
    error = "not a regular file";
    return false;
  }
  bytes.resize(static_cast<std::size_t>(st.st_size));
  std::size_t got = 0;
  while (got < bytes.size()) {
    const ssize_t r = ::read(fd, bytes.data() + got, bytes.size() - got);
    if (r < 0 && errno == EINTR) continue;
    if (r <= 0) break;
    got += static_cast<std::size_t>(r);
  }
  ::close(fd);
  if (got != bytes.size()) {
    error = cat("read error after ", got, " of ", bytes.size(), " bytes");
    return false;
  }
  if (bytes.empty()) {
    error = "empty file";
    return false;
  }
  return true;
}

DecodeBudget::Lease DecodeBudget::acquire(std::uint64_t pixels) {
  std::unique_lock<std::mutex> lock(mutex_);
  if (leases_held == 0) freed_.wait(lock, [&] { return in_use_ == 0 || pixels <= capacity_ - std::min(capacity_, in_use_); });
  in_use_ += pixels;
  peak_ = std::max(peak_, in_use_);
  ++leases_held;
  return Lease(this, pixels);
}

void DecodeBudget::release(std::uint64_t pixels) {
  {
    std::lock_guard<std::mutex> lock(mutex_);
    in_use_ -= pixels;
    --leases_held;
  }
  freed_.notify_all();
}

std::uint64_t DecodeBudget::peak() const {
  std::lock_guard<std::mutex> lock(mutex_);
  return peak_;
}

int jpeg_reduction(int w, int h, int target_w, int target_h) {
  for (int d : {8, 4, 2}) {
    const cv::Size s = reduced_size(w, h, d);
    if (s.width >= target_w && s.height >= target_h) return d;
  }
  return 1;
}

cv::Mat decode_image_bytes(const std::vector<unsigned char>& bytes, const DecodeOptions& o, std::string& error) {
  const bool resize = o.height > 0 && o.width > 0;
  // The size the header declares, before any decoder allocates for it.
  ImageHeader size;
  std::string header_error;
  if (!read_image_header(bytes.data(), bytes.size(), size, header_error)) {
    error = looks_like_jpeg(bytes.data(), bytes.size()) ? cat("corrupt JPEG: ", header_error)
                                                          : cat("not a decodable image (corrupt or unsupported format): ", header_error);
    return {};
  }
  if (size.pixels() > o.max_pixels) {
    error = cat(size.width, " x ", size.height, " pixels (", size.format, " header) exceed ", o.max_pixels_param, " = ",
                o.max_pixels, "; refused before decoding (raise ", o.max_pixels_param, " to decode it)");
    return {};
  }
  std::optional<DecodeBudget::Lease> lease;  // held until the decoded (and resized) image is made
  if (o.budget) lease.emplace(o.budget->acquire(size.pixels()));
  // Orientations 5-8 swap the axes: the stored image is width x height of the upright one.
  const int orientation = o.exif_orientation ? exif_orientation(bytes.data(), bytes.size()) : 1;
  const bool swaps_axes = orientation >= 5;
  cv::Mat m;
  JpegHeader header;
  std::string jpeg_error;
  if (looks_like_jpeg(bytes.data(), bytes.size())) {
    if (!read_jpeg_header(bytes.data(), bytes.size(), header, jpeg_error)) {
      error = cat("corrupt JPEG: ", jpeg_error);
      return {};
    }
  }
  if (header.plain) {
    JpegDecodeOptions j;
    j.color = o.color;
    if (resize && o.dct_scaling)
      j.reduce = swaps_axes ? jpeg_reduction(header.width, header.height, o.height, o.width)
                            : jpeg_reduction(header.width, header.height, o.width, o.height);
    m = decode_jpeg(bytes.data(), bytes.size(), j, jpeg_error);
    if (m.empty()) {
      error = cat("corrupt JPEG: ", jpeg_error);
      return {};
    }
  } else {
    try {
      // OpenCV would apply the EXIF orientation itself (PNG eXIf, CMYK JPEGs) but not on the
      // libjpeg path above; it is applied once, below, for every format alike.
      m = cv::imdecode(bytes, (o.color ? cv::IMREAD_COLOR : cv::IMREAD_GRAYSCALE) | cv::IMREAD_IGNORE_ORIENTATION);
    } catch (const cv::Exception& e) {
      error = cat("OpenCV cannot decode it: ", e.what());
      return {};
    }
    if (m.empty()) {
      error = "not a decodable image (corrupt or unsupported format)";
      return {};
    }
    if (o.color) cv::cvtColor(m, m, cv::COLOR_BGR2RGB);
  }
  if (orientation != 1) m = apply_exif_orientation(m, orientation);
  if (resize && (m.rows != o.height || m.cols != o.width)) m = resize_image(m, cv::Size(o.width, o.height), cv::INTER_LINEAR, true);
  return m;
}

cv::Mat apply_exif_orientation(const cv::Mat& m, int orientation) {
  cv::Mat out;
  switch (orientation) {
    case 2: cv::flip(m, out, 1); break;                             // mirrored left-right
    case 3: cv::rotate(m, out, cv::ROTATE_180); break;
    case 4: cv::flip(m, out, 0); break;                             // mirrored top-bottom
    case 5: cv::transpose(m, out); break;                           // mirrored along the main diagonal
    case 6: cv::rotate(m, out, cv::ROTATE_90_CLOCKWISE); break;
    case 7: cv::transpose(m, out); cv::flip(out, out, -1); break;   // mirrored along the other diagonal
    case 8: cv::rotate(m, out, cv::ROTATE_90_COUNTERCLOCKWISE); break;
    default: return m;
  }
  return out;
}

cv::Mat decode_image(const std::string& path, const DecodeOptions& o, std::string& error) {
  std::vector<unsigned char> bytes;
  if (!read_file_bytes(path, bytes, error)) return {};
  return decode_image_bytes(bytes, o, error);
}

}  // namespace embedflow::image
