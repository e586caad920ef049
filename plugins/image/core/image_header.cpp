#include "core/image_header.hpp"

#include <cstring>
#include <limits>

namespace embedflow::image {
namespace {

// A read-only view with bounds-checked little- and big-endian reads: every read past the end
// reports "cut off" instead of touching memory.
struct Bytes {
  const unsigned char* p;
  std::size_t n;
  bool has(std::size_t at, std::size_t len) const { return at <= n && len <= n - at; }
  std::uint64_t le(std::size_t at, int len) const {
    std::uint64_t v = 0;
    for (int i = len - 1; i >= 0; --i) v = (v << 8) | p[at + static_cast<std::size_t>(i)];
    return v;
  }
  std::uint64_t be(std::size_t at, int len) const {
    std::uint64_t v = 0;
    for (int i = 0; i < len; ++i) v = (v << 8) | p[at + static_cast<std::size_t>(i)];
    return v;
  }
  bool starts(const char* s) const {
    const std::size_t len = std::strlen(s);
    return n >= len && std::memcmp(p, s, len) == 0;
  }
};

bool fail(std::string& error, const char* format, const char* what) {
  error = std::string(format) + " header: " + what;
  return false;
}

bool set(ImageHeader& h, const char* format, std::uint64_t w, std::uint64_t height) {
  h.format = format;
  h.width = w;
  h.height = height;
  return true;
}

bool png(const Bytes& b, ImageHeader& h, std::string& error) {
  // Signature, then the first chunk, which must be IHDR: length 13, type, width, height (big-endian).
  if (!b.has(8, 16)) return fail(error, "PNG", "cut off before the IHDR chunk's size");
  if (std::memcmp(b.p + 12, "IHDR", 4) != 0) return fail(error, "PNG", "the first chunk is not IHDR");
  if (b.be(8, 4) != 13) return fail(error, "PNG", "IHDR is not 13 bytes long");
  return set(h, "PNG", b.be(16, 4), b.be(20, 4));
}

// Start-of-frame markers: C0-CF except C4 (DHT), C8 (JPG, reserved) and CC (DAC).
bool is_sof(unsigned char m) { return m >= 0xC0 && m <= 0xCF && m != 0xC4 && m != 0xC8 && m != 0xCC; }

bool jpeg(const Bytes& b, ImageHeader& h, std::string& error) {
  // Markers after SOI, as libjpeg reads them: bytes other than FF before a marker are skipped,
  // FF fill bytes repeat, standalone markers (TEM, RSTn) carry no length, every other segment
  // starts with a big-endian length that includes itself. The first SOF gives the size.
  std::size_t at = 2;
  for (;;) {
    while (at < b.n && b.p[at] != 0xFF) ++at;
    while (at < b.n && b.p[at] == 0xFF) ++at;
    if (at >= b.n) return fail(error, "JPEG", "cut off before the frame header (SOF marker)");
    const unsigned char m = b.p[at++];
    if (m == 0x00) continue;  // a stuffed FF: not a marker
    if (m == 0x01 || (m >= 0xD0 && m <= 0xD7)) continue;
    if (m == 0xD8) return fail(error, "JPEG", "a second SOI marker before the frame header");
    if (m == 0xD9) return fail(error, "JPEG", "EOI before the frame header");
    if (m == 0xDA) return fail(error, "JPEG", "scan data before the frame header");
    if (!b.has(at, 2)) return fail(error, "JPEG", "cut off in a segment length");
    const std::uint64_t len = b.be(at, 2);
    if (len < 2) return fail(error, "JPEG", "a segment length below 2");
    if (is_sof(m)) {
      // Length, precision, height, width.
      if (len < 8 || !b.has(at, 7)) return fail(error, "JPEG", "cut off in the frame header");
      const std::uint64_t height = b.be(at + 3, 2), width = b.be(at + 5, 2);
      if (height == 0) return fail(error, "JPEG", "height 0 (a DNL marker, not supported)");
      return set(h, "JPEG", width, height);
    }
    at += static_cast<std::size_t>(len);
  }
}

bool bmp(const Bytes& b, ImageHeader& h, std::string& error) {
  if (!b.has(14, 4)) return fail(error, "BMP", "cut off before the info header");
  const std::uint64_t info = b.le(14, 4);
  if (info == 12) {  // OS/2 BITMAPCOREHEADER: 16-bit width and height
    if (!b.has(18, 4)) return fail(error, "BMP", "cut off in the core header");
    return set(h, "BMP", b.le(18, 2), b.le(20, 2));
  }
  if (info < 16) return fail(error, "BMP", "an info header shorter than 16 bytes");
  if (!b.has(18, 8)) return fail(error, "BMP", "cut off in the info header");
  // Signed 32-bit: a negative height is a top-down image of |height| rows.
  auto magnitude = [](std::uint64_t v) -> std::uint64_t {
    const auto s = static_cast<std::int32_t>(static_cast<std::uint32_t>(v));
    return s < 0 ? static_cast<std::uint64_t>(-static_cast<std::int64_t>(s)) : static_cast<std::uint64_t>(s);
  };
  return set(h, "BMP", magnitude(b.le(18, 4)), magnitude(b.le(22, 4)));
}

bool tiff(const Bytes& b, ImageHeader& h, std::string& error) {
  if (!b.has(0, 8)) return fail(error, "TIFF", "cut off in the file header");
  const bool little = b.p[0] == 'I';
  auto u = [&](std::size_t at, int len) { return little ? b.le(at, len) : b.be(at, len); };
  const std::uint64_t version = u(2, 2);
  const bool big = version == 43;
  if (version != 42 && !big) return fail(error, "TIFF", "version is neither 42 (TIFF) nor 43 (BigTIFF)");
  std::uint64_t ifd = 0;
  if (big) {
    if (!b.has(0, 16)) return fail(error, "TIFF", "cut off in the BigTIFF header");
    if (u(4, 2) != 8) return fail(error, "TIFF", "BigTIFF offsets are not 8 bytes");
    ifd = u(8, 8);
  } else {
    ifd = u(4, 4);
  }
  const std::size_t count_len = big ? 8 : 2, entry_len = big ? 20 : 12;
  if (ifd >= b.n || !b.has(static_cast<std::size_t>(ifd), count_len))
    return fail(error, "TIFF", "the first image directory lies past the end of the file");
  const std::uint64_t entries = u(static_cast<std::size_t>(ifd), static_cast<int>(count_len));
  std::uint64_t width = 0, height = 0;
  bool have_w = false, have_h = false;
  for (std::uint64_t i = 0; i < entries && !(have_w && have_h); ++i) {
    // Checked before the multiplication: `entries` comes from the file.
    if (i > b.n / entry_len) return fail(error, "TIFF", "cut off in the first image directory");
    const std::uint64_t at64 = ifd + count_len + i * entry_len;
    if (at64 > b.n || !b.has(static_cast<std::size_t>(at64), entry_len))
      return fail(error, "TIFF", "cut off in the first image directory");
    const auto at = static_cast<std::size_t>(at64);
    const std::uint64_t tag = u(at, 2), type = u(at + 2, 2);
    const std::uint64_t count = big ? u(at + 4, 8) : u(at + 4, 4);
    if (tag != 256 && tag != 257) continue;
    const std::size_t value = at + (big ? 12 : 8);
    std::uint64_t v = 0;
    if (count != 1) return fail(error, "TIFF", "ImageWidth or ImageLength holds more than one value");
    if (type == 3) v = u(value, 2);                 // SHORT
    else if (type == 4) v = u(value, 4);            // LONG
    else if (type == 16 && big) v = u(value, 8);    // LONG8
    else return fail(error, "TIFF", "ImageWidth or ImageLength is not an unsigned integer");
    if (tag == 256) { width = v; have_w = true; }
    else { height = v; have_h = true; }
  }
  if (!have_w || !have_h) return fail(error, "TIFF", "the first image directory has no ImageWidth or ImageLength");
  return set(h, "TIFF", width, height);
}

bool webp(const Bytes& b, ImageHeader& h, std::string& error) {
  if (!b.has(12, 8)) return fail(error, "WebP", "cut off before the first chunk");
  const unsigned char* fourcc = b.p + 12;
  if (std::memcmp(fourcc, "VP8 ", 4) == 0) {
    // Frame tag (3 bytes), start code 9D 01 2A, then 14-bit width and height.
    if (!b.has(20, 10)) return fail(error, "WebP", "cut off in the VP8 frame header");
    if (b.p[23] != 0x9D || b.p[24] != 0x01 || b.p[25] != 0x2A) return fail(error, "WebP", "no VP8 start code");
    return set(h, "WebP", b.le(26, 2) & 0x3FFF, b.le(28, 2) & 0x3FFF);
  }
  if (std::memcmp(fourcc, "VP8L", 4) == 0) {
    // Signature 2F, then width - 1 and height - 1 in 14 bits each.
    if (!b.has(20, 5)) return fail(error, "WebP", "cut off in the VP8L header");
    if (b.p[20] != 0x2F) return fail(error, "WebP", "no VP8L signature");
    const std::uint64_t bits = b.le(21, 4);
    return set(h, "WebP", (bits & 0x3FFF) + 1, ((bits >> 14) & 0x3FFF) + 1);
  }
  if (std::memcmp(fourcc, "VP8X", 4) == 0) {
    // Flags (4 bytes), then canvas width - 1 and height - 1 in 24 bits each.
    if (!b.has(20, 10)) return fail(error, "WebP", "cut off in the VP8X header");
    return set(h, "WebP", b.le(24, 3) + 1, b.le(27, 3) + 1);
  }
  return fail(error, "WebP", "the first chunk is not VP8, VP8L or VP8X");
}

// The ASCII headers (PNM, PAM, PFM, Radiance HDR): a cursor over text with '#' comments.
struct Text {
  const Bytes& b;
  std::size_t at;
  static bool space(unsigned char c) { return c == ' ' || c == '\t' || c == '\n' || c == '\r' || c == '\v' || c == '\f'; }
  void skip_space_and_comments() {
    for (;;) {
      while (at < b.n && space(b.p[at])) ++at;
      if (at < b.n && b.p[at] == '#') {
        while (at < b.n && b.p[at] != '\n' && b.p[at] != '\r') ++at;
        continue;
      }
      return;
    }
  }
  // A decimal number of at most 19 digits (more is refused as damaged, not wrapped).
  bool number(std::uint64_t& v) {
    v = 0;
    std::size_t digits = 0;
    while (at < b.n && b.p[at] >= '0' && b.p[at] <= '9') {
      if (++digits > 19) return false;
      v = v * 10 + static_cast<std::uint64_t>(b.p[at++] - '0');
    }
    return digits > 0;
  }
  std::string word() {
    std::string w;
    while (at < b.n && !space(b.p[at]) && w.size() < 32) w += static_cast<char>(b.p[at++]);
    return w;
  }
};

bool pnm(const Bytes& b, const char* format, ImageHeader& h, std::string& error) {
  // "P6 640 480 255": magic, whitespace or comments, width, height.
  Text t{b, 2};
  std::uint64_t w = 0, height = 0;
  t.skip_space_and_comments();
  if (!t.number(w)) return fail(error, format, "no width");
  t.skip_space_and_comments();
  if (!t.number(height)) return fail(error, format, "no height");
  return set(h, format, w, height);
}

bool pam(const Bytes& b, ImageHeader& h, std::string& error) {
  // "P7\nWIDTH 4\nHEIGHT 3\nDEPTH 3\nMAXVAL 255\nTUPLTYPE RGB\nENDHDR\n"
  Text t{b, 2};
  std::uint64_t w = 0, height = 0;
  bool have_w = false, have_h = false;
  for (int tokens = 0; tokens < 64; ++tokens) {
    t.skip_space_and_comments();
    const std::string key = t.word();
    if (key.empty()) break;
    if (key == "ENDHDR") {
      if (!have_w || !have_h) return fail(error, "PAM", "ENDHDR before WIDTH and HEIGHT");
      return set(h, "PAM", w, height);
    }
    if (key == "WIDTH" || key == "HEIGHT") {
      t.skip_space_and_comments();
      std::uint64_t v = 0;
      if (!t.number(v)) return fail(error, "PAM", "WIDTH or HEIGHT is not a number");
      (key == "WIDTH" ? w : height) = v;
      (key == "WIDTH" ? have_w : have_h) = true;
    }
  }
  return fail(error, "PAM", "no ENDHDR line");
}

bool hdr(const Bytes& b, ImageHeader& h, std::string& error) {
  // Lines up to an empty one, then the resolution line: "-Y 480 +X 640" (either axis first,
  // either sign).
  std::size_t at = 0;
  for (int lines = 0;; ++lines) {
    if (lines > 4096) return fail(error, "HDR", "no empty line ends the header");
    const std::size_t start = at;
    while (at < b.n && b.p[at] != '\n') ++at;
    if (at >= b.n) return fail(error, "HDR", "cut off before the resolution line");
    ++at;
    if (at - start == 1 && lines > 0) break;
  }
  Text t{b, at};
  std::uint64_t first = 0, second = 0;
  char first_axis = 0, second_axis = 0;
  for (int i = 0; i < 2; ++i) {
    while (t.at < b.n && (b.p[t.at] == ' ' || b.p[t.at] == '\t')) ++t.at;
    if (!b.has(t.at, 2) || (b.p[t.at] != '+' && b.p[t.at] != '-') || (b.p[t.at + 1] != 'X' && b.p[t.at + 1] != 'Y'))
      return fail(error, "HDR", "no resolution line (-Y h +X w)");
    (i ? second_axis : first_axis) = static_cast<char>(b.p[t.at + 1]);
    t.at += 2;
    while (t.at < b.n && (b.p[t.at] == ' ' || b.p[t.at] == '\t')) ++t.at;
    if (!t.number(i ? second : first)) return fail(error, "HDR", "the resolution line has no number");
  }
  if (first_axis == second_axis) return fail(error, "HDR", "the resolution line names one axis twice");
  return first_axis == 'Y' ? set(h, "HDR", second, first) : set(h, "HDR", first, second);
}

}  // namespace

std::uint64_t ImageHeader::pixels() const {
  if (width != 0 && height > std::numeric_limits<std::uint64_t>::max() / width) return std::numeric_limits<std::uint64_t>::max();
  return width * height;
}

bool read_image_header(const unsigned char* data, std::size_t size, ImageHeader& header, std::string& error) {
  header = ImageHeader();
  const Bytes b{data, data ? size : 0};
  if (b.starts("\x89PNG\r\n\x1a\n")) return png(b, header, error);
  if (b.n >= 3 && b.p[0] == 0xFF && b.p[1] == 0xD8 && b.p[2] == 0xFF) return jpeg(b, header, error);
  if (b.starts("BM")) return bmp(b, header, error);
  if (b.n >= 4 && ((b.p[0] == 'I' && b.p[1] == 'I' && (b.p[2] == 42 || b.p[2] == 43) && b.p[3] == 0) ||
                   (b.p[0] == 'M' && b.p[1] == 'M' && b.p[2] == 0 && (b.p[3] == 42 || b.p[3] == 43))))
    return tiff(b, header, error);
  if (b.starts("RIFF") && b.n >= 12 && std::memcmp(b.p + 8, "WEBP", 4) == 0) return webp(b, header, error);
  if (b.n >= 3 && b.p[0] == 'P' && Text::space(b.p[2])) {
    if (b.p[1] >= '1' && b.p[1] <= '6') {
      static const char* kNames[] = {"PBM", "PGM", "PPM", "PBM", "PGM", "PPM"};
      return pnm(b, kNames[b.p[1] - '1'], header, error);
    }
    if (b.p[1] == '7') return pam(b, header, error);
    if (b.p[1] == 'F' || b.p[1] == 'f') return pnm(b, "PFM", header, error);
  }
  if (b.n >= 4 && b.be(0, 4) == 0x59A66A95) {
    if (!b.has(4, 8)) return fail(error, "Sun raster", "cut off in the header");
    return set(header, "Sun raster", b.be(4, 4), b.be(8, 4));
  }
  if (b.starts("#?RADIANCE") || b.starts("#?RGBE")) return hdr(b, header, error);
  error = "not a PNG, JPEG, BMP, TIFF, WebP, PNM, PAM, PFM, Sun raster or Radiance HDR file "
          "(other formats are not decoded: their size is unknown until decoded)";
  return false;
}

}  // namespace embedflow::image
