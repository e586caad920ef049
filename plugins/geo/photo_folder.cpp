// geo.photo_folder: a folder of one's own photos (JPEG, PNG, HEIC, in any sub-folders) read as
// the photo table geo.csv_photos and geo.yfcc_photos emit, from each file's EXIF.
//
// Output `out`: id i64[B] (the first 8 bytes of SHA-256 of the path relative to `dir`, top bit
// cleared; two paths with one id stop the run naming both), lat f64[B], lon f64[B] (GPSLatitude
// and GPSLongitude with their N/S/E/W references), time i64[B] (unix seconds: DateTimeOriginal
// at OffsetTimeOriginal, or at `timezone` when the photo has no offset, counted), user str[B]
// (Artist, else BodySerialNumber, else `user`), accuracy i64[B] (GPSHPositioningError in whole
// metres, rounded up; -1 when absent -- metres here, where the CSV readers give Flickr levels),
// path str[B] (`dir` joined with the relative path), in relative-path order.
// Headers are read in parallel (the first 8 KiB of a JPEG or PNG; HEIC's Exif item through
// libheif) and kept in a header index (an HDF5 file per folder, keyed by relative path, size and
// mtime), so a re-run reads only new and changed files; `cache: true` replays the whole table
// while the folder's listing (names, sizes, mtimes) is unchanged.
// Caveats: a photo without a GPS fix is skipped and counted (the first few named) or, with
// on_missing_gps: error, stops the run naming it. A bad file (damaged EXIF, a zero denominator,
// coordinates out of range, a missing reference, an unreadable file, a FIFO, a symlink loop,
// HEIC that libheif cannot open) stops the run naming the file and the tag, or with
// on_bad_image: skip is skipped and counted.
// Sharding (shard_world_size W, shard_rank r; off by default): rank r takes the files at positions
// rank_rows(N) of the sorted listing of N photo files and reads EXIF only from those, so a bad
// file is reported (or skipped and counted) by the rank that owns it alone, and the ranks' rows in
// rank order are the unsharded rows. Every batch then carries shard_rank i64[B] (photo_table_source.hpp).
// Counts in the log and the id collision check cover the rank's files; each rank keeps its own
// header index (the index path with ".rank<r>of<W>" before its extension), so ranks never
// rewrite one file at once.
//
//   seed: 1
//   nodes:
//     photos: {type: geo.photo_folder, params: {dir: tests/geo/data/photo_folder, header_index: "off"}}
//     stats:  {type: geo.pair_stats, params: {out: out/photo_folder_example, histogram_pairs: 100}}
//   edges:
//     - photos.out -> stats.photos
// The table is the one photo_table_source.hpp declares and photo_record() builds for the CSV
// readers; their PhotoTableSource body is not used, as it streams a CSV file.
#include <atomic>
#include <chrono>
#include <cmath>
#include <filesystem>
#include <unordered_map>

#include <tbb/parallel_for.h>

#include "embedflow/embedflow.hpp"
#include "embedflow/progress.hpp"
#include "geo_types.hpp"
#include "photo_csv.hpp"
#include "photo_folder.hpp"
#include "photo_table_source.hpp"

namespace embedflow::geo {
namespace {
namespace fs = std::filesystem;

constexpr std::size_t kNamedInLog = 5;

class PhotoFolderNode final : public Node {
 public:
  void open(NodeContext& ctx) override {
    const Params& p = ctx.params();
    id_ = ctx.id();
    root_ = p.string("dir");
    batch_size_ = static_cast<std::size_t>(p.integer("batch_size"));
    if (!parse_utc_offset(p.string("timezone"), fallback_offset_))
      throw ConfigError(cat("timezone '", p.string("timezone"), "' is not UTC or a fixed offset such as +02:00"));

    const auto t0 = std::chrono::steady_clock::now();
    FolderListing listing = list_photo_folder(root_);
    const double listed_seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    // This rank's files: a contiguous share of the sorted listing, the only ones it reads.
    sharded_ = shard_requested(p);
    place_ = shard_place(p);
    const std::size_t listed = listing.entries.size();
    const RowRange share = rank_rows(static_cast<std::int64_t>(listed), place_);
    const std::vector<FolderEntry> entries(listing.entries.begin() + share.first, listing.entries.begin() + share.last);
    rank_note_ = place_.world_size > 1 ? cat(" (rank ", place_.rank, " of ", place_.world_size, ": files ", share.first,
                                             " to ", share.last, " of ", listed, ")")
                                       : std::string();
    const std::vector<PhotoHeader> headers = read_headers(ctx, entries, listed_seconds);
    build_rows(p, entries, headers, listing.other_files);
    ctx.set_expected_items((cols_.size() + batch_size_ - 1) / batch_size_);
  }

  bool produce(Emitter& out) override {
    if (next_ >= cols_.size()) return false;  // no photos at all: an empty stream
    PhotoColumns batch;
    const std::size_t end = std::min(cols_.size(), next_ + batch_size_);
    auto slice = [&](auto& from, auto& to) { to.assign(std::make_move_iterator(from.begin() + next_), std::make_move_iterator(from.begin() + end)); };
    slice(cols_.id, batch.id);
    slice(cols_.lat, batch.lat);
    slice(cols_.lon, batch.lon);
    slice(cols_.time, batch.time);
    slice(cols_.user, batch.user);
    slice(cols_.accuracy, batch.accuracy);
    slice(cols_.path, batch.path);
    next_ = end;
    Record r = photo_record(batch, true);
    add_shard_rank(r, sharded_, place_);
    out.emit(std::move(r));
    return true;
  }

 private:
  // The files' headers: from the header index where a file's size and mtime are unchanged, else
  // read in parallel (and the index rewritten).
  std::vector<PhotoHeader> read_headers(NodeContext& ctx, const std::vector<FolderEntry>& entries, double listed_seconds) {
    const Params& p = ctx.params();
    const std::size_t n = entries.size();
    const auto t_listed = std::chrono::steady_clock::now();
    const std::string index_param = p.string("header_index");
    const bool use_index = index_param != "off";
    fs::path index = index_param == "auto" ? default_header_index(root_) : fs::path(index_param);
    if (place_.world_size > 1)
      index.replace_filename(cat(index.stem().string(), ".rank", place_.rank, "of", place_.world_size, index.extension().string()));
    std::unordered_map<std::string, IndexedHeader> known;
    std::string why_not;
    if (use_index)
      for (auto& [rel, h] : load_header_index(index, why_not)) known.emplace(rel, std::move(h));
    std::vector<PhotoHeader> headers(n);
    std::vector<std::size_t> to_read;
    std::size_t reused = 0;
    for (std::size_t i = 0; i < n; ++i) {
      if (!entries[i].problem.empty()) continue;  // found unreadable by the walk: nothing to read
      const auto it = known.find(entries[i].rel_path);
      if (it != known.end() && it->second.size == entries[i].size && it->second.mtime_ns == entries[i].mtime_ns) {
        headers[i] = std::move(it->second.header);
        ++reused;
      } else {
        to_read.push_back(i);
      }
    }

    std::atomic<std::uint64_t> done{0};
    const std::uint64_t total = to_read.size();
    ProgressReport progress;
    progress.total = total;
    progress.unit = "headers";
    tbb::parallel_for(std::size_t{0}, to_read.size(), [&](std::size_t k) {
      if (ctx.stop_requested()) return;
      const std::size_t i = to_read[k];
      headers[i] = read_photo_header(fs::path(root_) / entries[i].rel_path, entries[i].format);
      const std::uint64_t d = ++done;
      if (d % 256 == 0 || d == total) {
        ProgressReport r = progress;
        r.done = d;
        report_progress(ctx, r);
      }
    });
    if (ctx.stop_requested()) throw Error("interrupted while reading photo headers");
    const auto t_read = std::chrono::steady_clock::now();
    // Rewritten when a header was read or a file the index holds is gone.
    if (use_index && (!to_read.empty() || known.size() != reused)) save_header_index(index, root_, entries, headers);
    log_info(id_, root_, rank_note_, ": ", n, " photo files, ", reused, " headers from the index",
              use_index ? cat(" (", index.string(), why_not.empty() ? "" : "; " + why_not, ")") : std::string(" (off)"), ", ",
              to_read.size(), " read (listed in ", listed_seconds, " s, read in ",
              std::chrono::duration<double>(t_read - t_listed).count(), " s)");
    return headers;
  }

  // The table's rows, in relative-path order: bad files and photos without a GPS fix stop the run
  // or are skipped and counted (the first few named); ids are checked for collisions.
  void build_rows(const Params& p, const std::vector<FolderEntry>& entries, const std::vector<PhotoHeader>& headers,
                  std::size_t other_files) {
    const bool skip_bad = p.string("on_bad_image") == "skip";
    const bool skip_missing = p.string("on_missing_gps") == "skip";
    const std::string fallback_user = p.string("user");
    const std::size_t n = entries.size();
    std::unordered_map<std::int64_t, std::size_t> id_rows;
    std::int64_t bad = 0, missing = 0, fallback = 0;
    std::vector<std::string> first_bad, first_missing;
    for (std::size_t i = 0; i < n; ++i) {
      const FolderEntry& e = entries[i];
      const PhotoHeader& h = headers[i];
      const std::string where = (fs::path(root_) / e.rel_path).string();
      std::string problem = e.problem.empty() && h.status == PhotoHeader::Status::bad ? h.error : e.problem;
      if (problem.empty() && h.exif.has_gps && !h.exif.has_time)
        problem = "DateTimeOriginal: missing (a photo needs the time it was taken)";
      if (!problem.empty()) {
        if (!skip_bad) throw DataError(cat(where, ": ", problem, " (on_bad_image: skip skips such files)"));
        ++bad;
        if (first_bad.size() < kNamedInLog) first_bad.push_back(cat(where, ": ", problem));
        continue;
      }
      if (!h.exif.has_gps) {
        const char* why = h.status == PhotoHeader::Status::no_exif ? "no EXIF" : "no GPS position in its EXIF";
        if (!skip_missing) throw DataError(cat(where, ": ", why, " (on_missing_gps: skip skips such photos)"));
        ++missing;
        if (first_missing.size() < kNamedInLog) first_missing.push_back(cat(where, ": ", why));
        continue;
      }
      const std::int64_t id = photo_id(e.rel_path);
      const auto [it, fresh] = id_rows.emplace(id, i);
      if (!fresh)
        throw DataError(cat(where, ": photo id ", id, " (from the hash of the relative path) equals that of ",
                            (fs::path(root_) / entries[it->second].rel_path).string(), "; rename one of the two files"));
      const image::ExifFields& f = h.exif;
      cols_.id.push_back(id);
      cols_.lat.push_back(f.lat);
      cols_.lon.push_back(f.lon);
      if (!f.has_offset) ++fallback;
      cols_.time.push_back(f.local_time - (f.has_offset ? f.offset_seconds : fallback_offset_));
      cols_.user.push_back(!f.artist.empty() ? f.artist : !f.body_serial.empty() ? f.body_serial : fallback_user);
      cols_.accuracy.push_back(f.h_positioning_error_m < 0 ? -1 : static_cast<std::int64_t>(std::ceil(f.h_positioning_error_m)));
      cols_.path.push_back(where);
    }
    log_info(id_, root_, rank_note_, ": ", cols_.size(), " of ", n, " photos emitted; ", missing, " without a GPS position skipped, ", bad,
              " bad files skipped, ", fallback, " without OffsetTimeOriginal timed at timezone ", p.string("timezone"), ", ",
              other_files, " other files ignored");
    if (missing > 0) {
      std::string names;
      for (const auto& m : first_missing) names += "\n  " + m;
      log_warning(id_, "skipped ", missing, " photos without a GPS position; first ones:", names);
    }
    if (bad > 0) {
      std::string names;
      for (const auto& b : first_bad) names += "\n  " + b;
      log_warning(id_, "skipped ", bad, " bad files (on_bad_image: skip); first ones:", names);
    }
  }

  std::string id_, root_;
  std::string rank_note_;  // " (rank r of W: files a to b of N)" when sharded, for the log lines
  int fallback_offset_ = 0;  // seconds east of UTC for photos without OffsetTimeOriginal (`timezone`)
  std::size_t batch_size_ = 0, next_ = 0;
  PhotoColumns cols_;
  bool sharded_ = false;
  ParallelPlace place_;
};

}  // namespace

NodeType photo_folder_type() {
  NodeTypeBuilder builder("geo.photo_folder");
  builder.deterministic()
      .doc("Reads a folder tree of JPEG, PNG and HEIC photos as a photo table (id, lat, lon, time, user, accuracy, "
           "path) from their EXIF: GPS position, DateTimeOriginal with OffsetTimeOriginal, Artist or body serial, "
           "GPSHPositioningError.")
      .example("nodes:\n  photos: {type: geo.photo_folder, params: {dir: tests/geo/data/photo_folder, header_index: \"off\"}}\n")
      .source()
      .param(Param::path("dir").doc("the folder; every .jpg, .jpeg, .png, .heic and .heif file below it (any case) is a "
                                    "photo, symbolic links followed"))
      .param(Param::integer("batch_size").default_value(65536).min(1).doc("photos per emitted batch"))
      .param(Param::choice("on_missing_gps", {"skip", "error"}).default_value("skip")
                 .doc("a photo without EXIF or without GPSLatitude/GPSLongitude: skip counts it and names the first "
                      "few in a warning; error stops the run naming it"))
      .param(Param::choice("on_bad_image", {"error", "skip"}).default_value("error")
                 .doc("a file that cannot be read or whose EXIF is damaged or invalid (zero denominators, coordinates "
                      "out of range, a missing N/S/E/W reference, no DateTimeOriginal, a FIFO, a symlink loop, HEIC "
                      "that libheif cannot open): error stops the run naming the file and tag; skip counts it"))
      .param(Param::string("timezone").default_value("UTC")
                 .doc("offset of the camera clock for photos without OffsetTimeOriginal: UTC or a fixed offset "
                      "(+02:00, -0530); such photos are counted in the log"))
      .param(Param::string("user").default_value("unknown")
                 .doc("user of photos with neither an Artist nor a BodySerialNumber tag"))
      .param(Param::string("header_index").default_value("auto").not_fingerprinted()
                 .doc("where the header index is kept (headers keyed by relative path, size and mtime, so a re-run "
                      "reads only changed files): auto = <cache dir>/photo_folder/<hash of the folder>.h5, a file "
                      "path, or off"));
  // The rank's share of the sorted file list only; each rank keeps its own header index.
  add_shard_params(builder);
  return builder
      .output("out", cat(kPhotoTableFields, ", path: str[B]"),
              "one batch of photos, in relative-path order (accuracy: metres of horizontal error, -1 when unknown)")
      .check([](SchemaContext& c) {
        declare_shard_rank(c);
        int seconds = 0;
        if (!parse_utc_offset(c.params().string("timezone"), seconds))
          c.error(cat("timezone '", c.params().string("timezone"), "' is not UTC or a fixed offset such as +02:00 or -0530"),
                  "timezone");
      })
      .create<PhotoFolderNode>();
}

}  // namespace embedflow::geo
