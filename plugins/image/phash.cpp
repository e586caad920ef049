// image.phash — the perceptual hash (OpenCV img_hash's PHash, 64 bits) of each photo's image
// file, added to the photo table as `phash`; image.near_duplicates groups photos by it. Hashing
// is the costly part (a decode per photo), so this is a node of its own: with `cache: true` (the
// engine's stage cache) a re-run replays the hashes, and near_duplicates' thresholds can be
// changed without decoding anything again.
//
// Inputs:  in — the photo table (geo.photo_folder, geo.csv_photos, geo.yfcc_photos, or any
//          batches with id i64[B] and the string field `path_field`), in any number of batches.
// Outputs: out — each batch with phash i64[B] added (the 64 bits of core/phash.hpp's phash_of,
//          stored as a signed integer), rows and every other field as they came.
// Decoding: grey, straight to 32 x 32 (DCT-domain reduction, then area averaging; see
//          core/phash.hpp for why), in parallel over a batch's rows (oneTBB, within --threads).
//          EXIF orientation is applied by default (exif_orientation), as image.decode_by_id does:
//          the hash is then that of the photo as viewers show it, so a copy re-saved upright by
//          an editor hashes as its original tagged "rotate 90".
// Caveats: a missing, unreadable or corrupt file (a truncated JPEG included) stops the run with
// a DataError naming the photo id and file; on_bad_image: skip drops its row instead, counted
// and the first few named in the log at the end. The stage cache keys on the table (and so on
// what its reader fingerprints: geo.photo_folder's folder listing, the CSV file of the CSV
// readers), not on the image files' bytes: an image file replaced under the same name in a
// CSV-listed collection needs --rebuild-cache.
//
//   nodes:
//     photos: {type: geo.csv_photos, params: {path: tests/image/data/tiny_photos.csv}}
//     hash:   {type: image.phash, cache: true}
//     show:   {type: core.sink, params: {mode: print}}
//   edges: [photos.out -> hash.in, hash.out -> show.in]
#include <atomic>
#include <filesystem>

#include <tbb/parallel_for.h>

#include "core/arrays.hpp"
#include "core/phash.hpp"
#include "image_types.hpp"

namespace embedflow::image {
namespace {

constexpr std::size_t kNamedInLog = 5;

class PHashNode final : public Node {
 public:
  void open(NodeContext& ctx) override {
    ctx_ = &ctx;
    const Params& p = ctx.params();
    path_field_ = p.string("path_field");
    root_ = p.string("root");
    decode_.exif_orientation = p.boolean("exif_orientation");
    decode_.max_pixels = static_cast<std::uint64_t>(p.integer("max_pixels"));
    budget_ = std::make_unique<DecodeBudget>(static_cast<std::uint64_t>(p.integer("max_decoding_pixels")));
    decode_.budget = budget_.get();
    skip_bad_ = p.string("on_bad_image") == "skip";
  }

  void process(std::size_t, const RecordPtr& in, Emitter& out) override {
    const Record& rec = *in;
    const Array* paths = rec.find(path_field_);
    if (!paths || !paths->is_string() || paths->rank() != 1)
      throw DataError(cat("record ", out.sequence(), ": the photo table needs a string column '", path_field_,
                          "' (path_field); it carries ", rec.describe()));
    const std::vector<std::int64_t> ids = int_values(rec.get("id"), "id");
    const std::size_t n = ids.size();
    if (static_cast<std::int64_t>(n) != paths->numel())
      throw DataError(cat("record ", out.sequence(), ": ", n, " ids but ", paths->numel(), " paths"));
    std::vector<std::uint64_t> hash(n);
    std::vector<std::string> error(n);
    std::vector<char> ok(n, 0);
    tbb::parallel_for(std::size_t{0}, n, [&](std::size_t i) {
      if (ctx_->stop_requested()) return;
      ok[i] = phash_file(resolve(paths->string_at(static_cast<std::int64_t>(i))), decode_, hash[i], error[i]);
    });
    if (ctx_->stop_requested()) throw Error("interrupted while hashing photos");
    std::vector<std::int64_t> keep;
    std::vector<std::int64_t> kept_hash;
    keep.reserve(n);
    kept_hash.reserve(n);
    for (std::size_t i = 0; i < n; ++i) {
      if (!ok[i]) {
        const std::string what = cat("photo ", ids[i], ": ", resolve(paths->string_at(static_cast<std::int64_t>(i))), ": ", error[i]);
        if (!skip_bad_) throw DataError(cat(what, " (on_bad_image: skip drops such photos)"));
        ++bad_;
        if (first_bad_.size() < kNamedInLog) first_bad_.push_back(what);
        continue;
      }
      keep.push_back(static_cast<std::int64_t>(i));
      kept_hash.push_back(static_cast<std::int64_t>(hash[i]));
    }
    hashed_ += keep.size();
    Record r = keep.size() == n ? rec : take_record_rows(rec, keep, static_cast<std::int64_t>(n));
    const auto rows = static_cast<std::int64_t>(kept_hash.size());
    r.set("phash", Array::from_vector<std::int64_t>({rows}, std::move(kept_hash)));
    out.emit(std::move(r));
  }

  void close(Emitter&) override {
    log_info(ctx_->id(), "hashed ", hashed_, " photos", bad_ > 0 ? cat("; skipped ", bad_, " bad image files") : std::string());
    if (bad_ > 0) {
      std::string names;
      for (const auto& b : first_bad_) names += "\n  " + b;
      log_warning(ctx_->id(), "skipped ", bad_, " photos whose image files could not be decoded (on_bad_image: skip); first ones:", names);
    }
  }

 private:
  std::string resolve(const std::string& p) const {
    if (root_.empty() || std::filesystem::path(p).is_absolute()) return p;
    return (std::filesystem::path(root_) / p).string();
  }

  NodeContext* ctx_ = nullptr;
  std::string path_field_, root_;
  DecodeOptions decode_;
  std::unique_ptr<DecodeBudget> budget_;
  bool skip_bad_ = false;
  std::uint64_t hashed_ = 0, bad_ = 0;
  std::vector<std::string> first_bad_;
};

}  // namespace

NodeType phash_type() {
  return NodeTypeBuilder("image.phash")
      .deterministic()
      .doc("Adds each photo's perceptual hash (OpenCV img_hash PHash, 64 bits as phash: i64) to a photo table, "
           "decoding the files in parallel; bad files are errors naming the photo id and file, or skipped and counted.")
      .example(
          "nodes:\n"
          "  photos: {type: geo.csv_photos, params: {path: tests/image/data/tiny_photos.csv}}\n"
          "  hash:   {type: image.phash, cache: true}\n"
          "  show:   {type: core.sink, params: {mode: print}}\n"
          "edges: [photos.out -> hash.in, hash.out -> show.in]\n")
      .param(Param::string("path_field").default_value("path").doc("the photo table's column holding each photo's image file"))
      .param(Param::path("root").default_value("").not_fingerprinted()
                 .doc("prefix for relative paths; empty: as given (relative to the working directory)"))
      .param(Param::choice("on_bad_image", {"error", "skip"}).default_value("error")
                 .doc("error: a missing or undecodable file stops the run naming the photo id and file; skip: its row is "
                      "dropped, counted and the first few named in the log"))
      .param(max_pixels_param())
      .param(exif_orientation_param())
      .param(max_decoding_pixels_param())
      .input("in", "id: i64[B]", "the photo table: id and the path field, in batches (other fields pass through)")
      .output("out", "id: i64[B], phash: i64[B]", "the photo table with phash, the 64 PHash bits of each photo's file")
      .check([](SchemaContext& c) {
        const PortSchema& in = c.input("in");
        if (in.is_any()) return;
        PortSchema out = in;
        const FieldSchema* id = in.find("id");
        out.add(FieldSchema{"phash", DType::i64, id ? id->shape : std::nullopt});
        c.set_output("out", out);
      })
      .create<PHashNode>();
}

}  // namespace embedflow::image
