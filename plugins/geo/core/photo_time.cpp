// Photo times as the CSV readers accept them: unix seconds, ISO 8601 (extended and basic forms,
// with an optional offset) and EXIF's "YYYY:MM:DD HH:MM:SS"; `automatic` tells them apart and
// refuses text that reads as two of them.
#include <string>

#include "embedflow/error.hpp"
#include "geodesy.hpp"
#include "photo_csv.hpp"
#include "photo_fields.hpp"

namespace embedflow::geo {
namespace {

using photo_fields::parse_int;
using photo_fields::trim;

// Reads exactly `n` digits at s[i..]; advances i.
bool digits(std::string_view s, std::size_t& i, int n, int& out) {
  if (i + n > s.size()) return false;
  out = 0;
  for (int k = 0; k < n; ++k) {
    const char c = s[i + k];
    if (c < '0' || c > '9') return false;
    out = out * 10 + (c - '0');
  }
  i += n;
  return true;
}

bool looks_numeric(std::string_view s) {
  std::size_t i = 0;
  if (i < s.size() && (s[i] == '-' || s[i] == '+')) ++i;
  const std::size_t start = i;
  while (i < s.size() && s[i] >= '0' && s[i] <= '9') ++i;
  if (i == start) return false;
  if (i < s.size() && s[i] == '.') {
    ++i;
    while (i < s.size() && s[i] >= '0' && s[i] <= '9') ++i;
  }
  return i == s.size();
}

bool parse_unix(std::string_view s, std::int64_t& out) {
  if (!looks_numeric(s)) return false;
  const auto dot = s.find('.');
  const bool negative = s.front() == '-';
  std::string_view whole = s.substr(0, dot);
  if (!parse_int(whole, out)) return false;
  if (dot != std::string_view::npos && negative) {
    // Floor, so -1.5 is the second before -1, like every other time in the file.
    const std::string_view frac = s.substr(dot + 1);
    if (frac.find_first_not_of('0') != std::string_view::npos) out -= 1;
  }
  return true;
}

bool all_digits(std::string_view s) {
  return !s.empty() && s.find_first_not_of("0123456789") == std::string_view::npos;
}

bool parse_iso(std::string_view s, std::int64_t& out);

// The ISO 8601 basic forms YYYYMMDD and YYYYMMDDhhmmss, read through the extended form.
bool parse_iso_basic(std::string_view s, std::int64_t& out) {
  if (!all_digits(s) || (s.size() != 8 && s.size() != 14)) return false;
  std::string extended = cat(s.substr(0, 4), "-", s.substr(4, 2), "-", s.substr(6, 2));
  if (s.size() == 14) extended += cat("T", s.substr(8, 2), ":", s.substr(10, 2), ":", s.substr(12, 2));
  return parse_iso(extended, out);
}

bool parse_iso(std::string_view s, std::int64_t& out) {
  if (all_digits(s)) return parse_iso_basic(s, out);
  std::size_t i = 0;
  int y, mo, d, h = 0, mi = 0, sec = 0;
  if (!digits(s, i, 4, y) || i >= s.size() || s[i++] != '-' || !digits(s, i, 2, mo) || i >= s.size() ||
      s[i++] != '-' || !digits(s, i, 2, d))
    return false;
  if (mo < 1 || mo > 12 || d < 1) return false;
  static const int month_days[] = {31, 28, 31, 30, 31, 30, 31, 31, 30, 31, 30, 31};
  const bool leap = (y % 4 == 0 && y % 100 != 0) || y % 400 == 0;
  if (d > month_days[mo - 1] + (mo == 2 && leap ? 1 : 0)) return false;
  std::int64_t offset = 0;
  if (i < s.size()) {
    if (s[i] != 'T' && s[i] != ' ') return false;
    ++i;
    if (!digits(s, i, 2, h) || i >= s.size() || s[i++] != ':' || !digits(s, i, 2, mi)) return false;
    if (i < s.size() && s[i] == ':') {
      ++i;
      if (!digits(s, i, 2, sec)) return false;
      if (i < s.size() && (s[i] == '.' || s[i] == ',')) {
        ++i;
        const std::size_t start = i;
        while (i < s.size() && s[i] >= '0' && s[i] <= '9') ++i;
        if (i == start) return false;
      }
    }
    if (h > 23 || mi > 59 || sec > 59) return false;
    if (i < s.size()) {
      if (s[i] == 'Z') {
        ++i;
      } else if (s[i] == '+' || s[i] == '-') {
        const int sign = s[i++] == '-' ? -1 : 1;
        int oh, om = 0;
        if (!digits(s, i, 2, oh)) return false;
        if (i < s.size() && s[i] == ':') ++i;
        if (i < s.size() && !digits(s, i, 2, om)) return false;
        if (oh > 23 || om > 59) return false;
        offset = sign * (oh * 3600 + om * 60);
      } else {
        return false;
      }
    }
  }
  if (i != s.size()) return false;
  out = days_from_civil(y, static_cast<unsigned>(mo), static_cast<unsigned>(d)) * 86400 + h * 3600 +
        mi * 60 + sec - offset;
  return true;
}

// "YYYY:MM:DD HH:MM:SS" with an optional offset: the date's colons are the only difference from
// ISO 8601's "YYYY-MM-DD HH:MM:SS+02:00", so it is read by parse_iso once they are replaced.
bool looks_exif(std::string_view s) {
  return s.size() >= 19 && all_digits(s.substr(0, 4)) && s[4] == ':' && s[7] == ':' && s[10] == ' ';
}

bool parse_exif(std::string_view s, std::int64_t& out) {
  if (!looks_exif(s)) return false;
  std::string iso(s);
  iso[4] = iso[7] = '-';
  // The offset may follow the time directly or after one space.
  if (iso.size() > 20 && iso[19] == ' ' && (iso[20] == '+' || iso[20] == '-')) iso.erase(19, 1);
  return parse_iso(iso, out);
}

}  // namespace

bool time_is_ambiguous(std::string_view text) {
  text = trim(text);
  std::int64_t unused;
  return parse_iso_basic(text, unused);
}

bool parse_time(std::string_view text, TimeFormat format, std::int64_t& out) {
  text = trim(text);
  if (text.empty()) return false;
  switch (format) {
    case TimeFormat::unix_seconds: return parse_unix(text, out);
    case TimeFormat::iso8601: return parse_iso(text, out);
    case TimeFormat::exif: return parse_exif(text, out);
    case TimeFormat::automatic:
      if (looks_numeric(text)) return !time_is_ambiguous(text) && parse_unix(text, out);
      return looks_exif(text) ? parse_exif(text, out) : parse_iso(text, out);
  }
  return false;
}

}  // namespace embedflow::geo
