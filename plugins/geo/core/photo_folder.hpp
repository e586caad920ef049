// A folder of photos (JPEG, PNG, HEIC) read as a photo table: the walk, each file's EXIF header
// (core/exif.hpp in the image family; HEIC through libheif's metadata API), and the per-folder
// header index that lets a re-run read only the files that changed. Plain C++ so tests call it
// without a graph; geo.photo_folder (photo_folder.cpp) is the node over it.
#pragma once

#include <cstdint>
#include <filesystem>
#include <functional>
#include <string>
#include <vector>

#include "core/exif.hpp"
#include "photo_id.hpp"

namespace embedflow::geo {

enum class PhotoFormat { jpeg, png, heic };

// A file the walk found: a photo by its extension (.jpg .jpeg .png .heic .heif, any case), or a
// problem with a path under the root (a symlink loop, an unreadable directory, a FIFO named like
// a photo) that is reported like a bad photo.
struct FolderEntry {
  std::string rel_path;  // relative to the root, '/'-separated
  PhotoFormat format = PhotoFormat::jpeg;
  std::int64_t size = 0;
  std::int64_t mtime_ns = 0;
  std::string problem;   // non-empty: not readable as a photo, and why
};

struct FolderListing {
  std::vector<FolderEntry> entries;  // sorted by rel_path (bytewise)
  std::int64_t other_files = 0;      // files with other extensions, ignored
};

// Walks `root` recursively, following symbolic links to files and directories; a directory
// reached twice along one path (a symlink loop) becomes a problem entry and is not entered again.
// Never opens a file (a FIFO is recognised by stat and reported, not read).
FolderListing list_photo_folder(const std::filesystem::path& root);

// What one header read gives (the EXIF fields, or why the file is unusable).
struct PhotoHeader {
  enum class Status : std::int64_t { ok = 0, no_exif = 1, bad = 2 };
  Status status = Status::ok;
  image::ExifFields exif;
  std::string error;  // status bad: "tag: what is wrong", or the I/O problem
};

// Reads the EXIF block of one photo: for JPEG and PNG the first 8 KiB, and more only when the
// block (or the segments before it) reach further, at most 16 MiB; HEIC through libheif.
PhotoHeader read_photo_header(const std::filesystem::path& path, PhotoFormat format);

// True when this build reads HEIC files (libheif was found at configure time).
bool heic_supported();

// The photo id is photo_id() of the UTF-8 relative path ('/'-separated): core/photo_id.hpp.

// The header index: one HDF5 stream file per folder holding each file's header read, keyed by
// relative path, size and mtime, so that a re-run reads only new or changed files.
struct IndexedHeader {
  std::int64_t size = 0, mtime_ns = 0;
  PhotoHeader header;
};

// The index's rows (rel_path -> IndexedHeader), or none when the file is absent, unreadable or
// written by another version of the header reader (then it is rebuilt).
std::vector<std::pair<std::string, IndexedHeader>> load_header_index(const std::filesystem::path& index,
                                                                      std::string& why_not);
// Writes the index atomically (temporary file renamed into place).
void save_header_index(const std::filesystem::path& index, const std::filesystem::path& root,
                       const std::vector<FolderEntry>& entries, const std::vector<PhotoHeader>& headers);

// The default index path: <cache dir>/photo_folder/<16 hex digits of SHA-256 of the absolute
// root>.h5, the cache dir being $EMBEDFLOW_CACHE_DIR, else $XDG_CACHE_HOME/embedflow, else
// ~/.cache/embedflow (the stage cache's).
std::filesystem::path default_header_index(const std::filesystem::path& root);

// Parses a fixed UTC offset: "UTC", "Z", "+02:00", "-0530", "+2". False on other text.
bool parse_utc_offset(const std::string& text, int& seconds);

}  // namespace embedflow::geo
