// image.decode_by_id — decodes the image files of photo ids: the members of pairs or triplets
// (geo.pair_sampler's output) or plain photo records, looked up by id in a photo table whose
// `path_field` holds each photo's file (geo.csv_photos' output). Random access, decoded in
// parallel (oneTBB, within --threads), resized to height x width on decode (antialiased; JPEGs
// reduced in the DCT domain first when the file is at least twice the target), u8 HWC until
// image.to_tensor.
//
// Inputs: in — one of three record shapes, batches [B] or single records:
//           pairs    anchor, other i64 (+ label i64) -> a_id, b_id, a_image, b_image, pair_label f32
//                    (as image.pair_join);
//           triplets anchor, positive, negative i64 -> anchor_id, positive_id, negative_id and
//                    *_image (as image.triplet_join);
//           photos   id i64 (no anchor field) -> the record plus `image`.
//         Every other field passes through (distance_m, positive_m, epoch, ...).
//         photos — side port: the photo table (id i64[N], <path_field> str[N]) in one record,
//           e.g. geo.csv_photos with a batch_size above the photo count, or image.collect after
//           it. Optional for photo records that carry their own path field.
// Outputs: out — the records with images u8 [B,height,width,C] (C = 3 RGB, 1 grey).
// Caveats: a missing, unreadable or corrupt file (a truncated JPEG included) is a DataError
// naming the photo id, its role and the path; on_bad_image: skip drops the pairs or triplets
// it is in (the photo records themselves in the photos shape), and the log counts them at
// the end. A file whose header declares more than max_pixels is such a bad file, refused before
// decoding; the parallel decodes hold at most max_decoding_pixels header pixels at once (one file
// always may start). Memory: the table's paths, `cache_images` decoded images (least recently used
// dropped first) and one output batch. `cache: true` (the engine's stage cache) on this node
// stores its output stream; on photo records that is each photo's decoded, resized u8 image
// once, which image.collect + image.pair_join can then join with pairs on every later run.
// Serial: the decodes inside a record run in parallel.
//
// Example (geotagged photos whose path column names their files; needs the geo plugin):
//   nodes:
//     photos: {type: geo.csv_photos, params: {path: tests/image/data/tiny_photos.csv}}
//     pairs:  {type: geo.pair_sampler, params: {positive_radius_m: 10, negative_min_m: 2000, batch_size: 4}}
//     decode: {type: image.decode_by_id, params: {path_field: path, height: 16, width: 16}}
//     show:   {type: core.sink, params: {mode: print}}
//   edges: [photos.out -> pairs.photos, photos.out -> decode.photos, pairs.out -> decode.in, decode.out -> show.in]
#include <cstring>
#include <filesystem>
#include <list>
#include <memory>
#include <mutex>
#include <set>
#include <unordered_map>

#include <tbb/parallel_for.h>

#include "core/arrays.hpp"
#include "core/image_files.hpp"
#include "image_types.hpp"

namespace embedflow::image {
namespace {

enum class Shape3 { pairs, triplets, photos };

struct Role {
  const char* field;   // id field of the input record
  std::string prefix;  // output fields <prefix>_id, <prefix>_image; "" for photo records
};

std::vector<Role> roles_of(Shape3 s) {
  switch (s) {
    case Shape3::pairs: return {{"anchor", "a"}, {"other", "b"}};
    case Shape3::triplets: return {{"anchor", "anchor"}, {"positive", "positive"}, {"negative", "negative"}};
    case Shape3::photos: return {{"id", ""}};
  }
  return {};
}

template <class HasField>
bool detect(const HasField& has, Shape3& shape) {
  if (has("anchor") && has("other")) shape = Shape3::pairs;
  else if (has("anchor") && has("positive") && has("negative")) shape = Shape3::triplets;
  else if (has("id") && !has("anchor")) shape = Shape3::photos;
  else return false;
  return true;
}

const char* kShapes = "pairs (anchor, other), triplets (anchor, positive, negative) or photos (id)";

bool consumed(Shape3 s, const std::string& name) {
  if (s == Shape3::pairs) return name == "anchor" || name == "other" || name == "label";
  if (s == Shape3::triplets) return name == "anchor" || name == "positive" || name == "negative";
  return false;
}

// Decoded images by photo id, least recently used dropped first.
class ImageLru {
 public:
  explicit ImageLru(std::size_t capacity) : capacity_(capacity) {}
  const Array* find(std::int64_t id) {
    auto it = index_.find(id);
    if (it == index_.end()) return nullptr;
    order_.splice(order_.begin(), order_, it->second);
    return &it->second->second;
  }
  void put(std::int64_t id, Array image) {
    if (capacity_ == 0 || index_.count(id)) return;
    order_.emplace_front(id, std::move(image));
    index_[id] = order_.begin();
    if (order_.size() > capacity_) {
      index_.erase(order_.back().first);
      order_.pop_back();
    }
  }

 private:
  std::size_t capacity_;
  std::list<std::pair<std::int64_t, Array>> order_;
  std::unordered_map<std::int64_t, std::list<std::pair<std::int64_t, Array>>::iterator> index_;
};

class DecodeById final : public Node {
 public:
  void open(NodeContext& ctx) override {
    ctx_ = &ctx;
    const Params& p = ctx.params();
    path_field_ = p.string("path_field");
    root_ = p.string("root");
    decode_.color = p.string("mode") == "color";
    decode_.height = static_cast<int>(p.integer("height"));
    decode_.width = static_cast<int>(p.integer("width"));
    decode_.dct_scaling = p.boolean("dct_scaling");
    decode_.exif_orientation = p.boolean("exif_orientation");
    decode_.max_pixels = static_cast<std::uint64_t>(p.integer("max_pixels"));
    budget_ = std::make_unique<DecodeBudget>(static_cast<std::uint64_t>(p.integer("max_decoding_pixels")));
    decode_.budget = budget_.get();
    skip_bad_ = p.string("on_bad_image") == "skip";
    lru_ = std::make_unique<ImageLru>(static_cast<std::size_t>(p.integer("cache_images")));
    has_table_ = ctx.input_connected(1);
  }

  void process(std::size_t, const RecordPtr& in, Emitter& out) override {
    const Record& rec = *in;
    Shape3 shape;
    if (!detect([&](const char* f) { return rec.find(f) != nullptr; }, shape))
      throw DataError(cat("record ", out.sequence(), " is not ", kShapes, "; it carries ", rec.describe()));
    const std::vector<Role> roles = roles_of(shape);
    const bool scalar = rec.get(roles[0].field).rank() == 0;
    std::vector<std::vector<std::int64_t>> ids;
    for (const Role& r : roles) ids.push_back(int_values(rec.get(r.field), r.field));
    const std::size_t rows = ids[0].size();

    // Paths: from the table, or from the photo records themselves.
    if (has_table_) refresh_table();
    else if (shape != Shape3::photos)
      throw ConfigError(cat("node '", ctx_->id(), "': ", shape == Shape3::pairs ? "pairs" : "triplets",
                            " need the photo table on port 'photos'"));
    const Array* own_paths = has_table_ ? nullptr : rec.find(path_field_);
    if (!has_table_ && !own_paths)
      throw DataError(cat("record ", out.sequence(), " has no path field '", path_field_, "' and port 'photos' is not connected"));

    // Every distinct id not cached, with its path and the first role and row naming it.
    struct Want {
      std::int64_t id;
      std::string path, role;
      cv::Mat image;
      std::string error;
    };
    std::vector<Want> wants;
    std::unordered_map<std::int64_t, std::size_t> want_of;
    // This record's images by id (shared buffers): cached ones now, decoded ones below, so
    // evictions from the cache while it fills cannot lose an image the record needs.
    std::unordered_map<std::int64_t, Array> have;
    for (std::size_t r = 0; r < roles.size(); ++r)
      for (std::size_t i = 0; i < rows; ++i) {
        const std::int64_t id = ids[r][i];
        if (have.count(id) || want_of.count(id) || bad_ids_.count(id)) continue;
        if (const Array* cached = lru_->find(id)) {
          have.emplace(id, *cached);
          continue;
        }
        want_of[id] = wants.size();
        wants.push_back(Want{id, own_paths ? resolve(own_paths->string_at(static_cast<std::int64_t>(i))) : path_of(id, roles[r].field),
                             roles[r].field, {}, {}});
      }
    tbb::parallel_for(std::size_t{0}, wants.size(), [&](std::size_t k) {
      Want& w = wants[k];
      w.image = decode_image(w.path, decode_, w.error);
    });
    for (Want& w : wants) {
      if (w.image.empty()) {
        const std::string what = cat("photo ", w.id, " (", w.role, " in record ", out.sequence(), "): ", w.path, ": ", w.error);
        if (!skip_bad_) throw DataError(what);
        if (bad_ids_.insert(w.id).second && first_bad_.empty()) first_bad_ = what;
        continue;
      }
      Array a = array_from_mat(std::move(w.image));
      lru_->put(w.id, a);
      have.emplace(w.id, std::move(a));
      ++decoded_;
    }

    // Rows whose members all decoded.
    std::vector<std::int64_t> keep;
    keep.reserve(rows);
    for (std::size_t i = 0; i < rows; ++i) {
      bool ok = true;
      for (const auto& role_ids : ids) ok = ok && !bad_ids_.count(role_ids[i]);
      if (ok) keep.push_back(static_cast<std::int64_t>(i));
    }
    dropped_ += rows - keep.size();
    if (keep.empty() && rows > 0) return;
    const bool all = keep.size() == rows;

    Record r;
    const auto n = static_cast<std::int64_t>(keep.size());
    auto fit = [&](Array a) { return scalar ? a.row(0) : a; };
    for (std::size_t k = 0; k < roles.size(); ++k) {
      const std::string id_name = roles[k].prefix.empty() ? "id" : roles[k].prefix + "_id";
      const std::string image_name = roles[k].prefix.empty() ? "image" : roles[k].prefix + "_image";
      std::vector<std::int64_t> kept_ids(keep.size());
      for (std::size_t i = 0; i < keep.size(); ++i) kept_ids[i] = ids[k][static_cast<std::size_t>(keep[i])];
      Shape image_shape{n, decode_.height, decode_.width, decode_.color ? 3 : 1};
      Array images = uninitialized_array(DType::u8, image_shape);
      const std::size_t bytes = static_cast<std::size_t>(decode_.height) * static_cast<std::size_t>(decode_.width) * (decode_.color ? 3u : 1u);
      auto* dst = static_cast<std::uint8_t*>(images.mutable_raw());
      for (std::size_t i = 0; i < kept_ids.size(); ++i) {
        std::memcpy(dst + i * bytes, have.at(kept_ids[i]).raw(), bytes);
      }
      r.set(id_name, fit(Array::from_vector<std::int64_t>({n}, std::move(kept_ids))));
      r.set(image_name, fit(images));
    }
    if (shape == Shape3::pairs && rec.find("label")) {
      const Array& label = rec.get("label");
      std::vector<float> pl(keep.size());
      for (std::size_t i = 0; i < keep.size(); ++i) pl[i] = static_cast<float>(label.as_double(keep[i]));
      r.set("pair_label", fit(Array::from_vector<float>({n}, std::move(pl))));
    }
    for (const auto& [name, value] : rec.fields()) {
      if (consumed(shape, name) || r.find(name)) continue;
      if (all || scalar || value.rank() == 0 || value.dim(0) != static_cast<std::int64_t>(rows)) r.set(name, value);
      else r.set(name, take_rows(value, keep));
    }
    out.emit(std::move(r));
  }

  void close(Emitter&) override {
    std::string skipped;
    if (!bad_ids_.empty())
      skipped = cat("; skipped ", bad_ids_.size(), " photos whose files could not be decoded and the ", dropped_,
                    " records or rows they were in (first: ", first_bad_, ")");
    log_info(ctx_->id(), "decoded ", decoded_, " image files", skipped);
  }

 private:
  std::string resolve(const std::string& p) const {
    if (root_.empty() || std::filesystem::path(p).is_absolute()) return p;
    return (std::filesystem::path(root_) / p).string();
  }

  void refresh_table() {
    RecordPtr side = ctx_->side(1);
    if (side == table_record_) return;
    if (!side) throw Error("the photo table has not arrived");
    const std::string what = cat("node '", ctx_->id(), "' port 'photos'");
    const Array* ids = side->find("id");
    const Array* paths = side->find(path_field_);
    if (!ids || !paths || !paths->is_string())
      throw DataError(cat(what, ": the photo table needs id and a string field '", path_field_, "'; it carries ", side->describe()));
    const std::vector<std::int64_t> id = int_values(*ids, "id");
    if (static_cast<std::int64_t>(id.size()) != paths->numel())
      throw DataError(cat(what, ": ", id.size(), " ids but ", paths->numel(), " paths"));
    std::unordered_map<std::int64_t, std::string> index;
    index.reserve(id.size());
    for (std::size_t i = 0; i < id.size(); ++i)
      if (!index.emplace(id[i], resolve(paths->string_at(static_cast<std::int64_t>(i)))).second)
        throw DataError(cat(what, ": photo id ", id[i], " appears twice in the table"));
    paths_ = std::move(index);
    table_record_ = side;
  }

  const std::string& path_of(std::int64_t id, const char* role) const {
    auto it = paths_.find(id);
    if (it == paths_.end())
      throw DataError(cat(role, " id ", id, " is not in the photo table (", paths_.size(), " photos)"));
    return it->second;
  }

  NodeContext* ctx_ = nullptr;
  std::string path_field_, root_;
  DecodeOptions decode_;
  std::unique_ptr<DecodeBudget> budget_;  // pixels decoding at once, across the parallel decodes
  bool skip_bad_ = false, has_table_ = false;
  std::unique_ptr<ImageLru> lru_;
  RecordPtr table_record_;
  std::unordered_map<std::int64_t, std::string> paths_;
  std::set<std::int64_t> bad_ids_;
  std::string first_bad_;
  std::uint64_t decoded_ = 0, dropped_ = 0;
};

Dim fixed(std::int64_t v) { return Dim{Dim::Kind::fixed, v, ""}; }

}  // namespace

NodeType decode_by_id_type() {
  return NodeTypeBuilder("image.decode_by_id")
      .deterministic()
      .doc("Decodes the image files of photo ids (pair or triplet members, or photo records) found in a photo table "
           "(id -> path), in parallel, resized on decode; bad files are errors naming the id and path, or skipped and "
           "counted.")
      .example(
          "nodes:\n"
          "  photos: {type: geo.csv_photos, params: {path: tests/image/data/tiny_photos.csv}}\n"
          "  pairs:  {type: geo.pair_sampler, params: {positive_radius_m: 10, negative_min_m: 2000, batch_size: 4}}\n"
          "  decode: {type: image.decode_by_id, params: {path_field: path, height: 16, width: 16}}\n"
          "  show:   {type: core.sink, params: {mode: print}}\n"
          "edges: [photos.out -> pairs.photos, photos.out -> decode.photos, pairs.out -> decode.in, decode.out -> show.in]\n")
      .param(Param::string("path_field").default_value("image").doc("photo table (or photo record) field holding the image file path"))
      .param(Param::path("root").default_value("").not_fingerprinted().doc("prefix for relative paths; empty: as given (relative to the working directory)"))
      .param(Param::choice("mode", {"grey", "color"}).default_value("color").doc("grey: 1 channel; color: 3 channels in RGB order"))
      .param(Param::integer("height").range(1, 65536).doc("height of every decoded image"))
      .param(Param::integer("width").range(1, 65536).doc("width of every decoded image"))
      .param(Param::boolean("dct_scaling").default_value(true)
                 .doc("JPEG: decode at 1/2, 1/4 or 1/8 in the DCT domain when that still covers height x width (faster)"))
      .param(Param::choice("on_bad_image", {"error", "skip"}).default_value("error")
                 .doc("error: a missing or undecodable file stops the run naming the photo id and path; skip: drop the "
                      "records (rows) it is in, counted in the log"))
      .param(max_pixels_param())
      .param(exif_orientation_param())
      .param(max_decoding_pixels_param())
      .param(Param::integer("cache_images").default_value(1024).range(0, 1 << 24).not_fingerprinted()
                 .doc("decoded images kept by id for reuse (least recently used dropped first); 0: none"))
      .input("in", "*", "pairs (anchor, other, label), triplets (anchor, positive, negative) or photo records (id), batches or single")
      .side_input("photos", "id: i64[N]", "the photo table: id [N] and the path field [N] in one record", true)
      .output("out", "*", "the records with images: a_image/b_image, anchor_image/..., or image: u8 [B,height,width,C]")
      .check([](SchemaContext& c) {
        const Params& p = c.params();
        const PortSchema& in = c.input("in");
        // The path field is not checked here: readers such as geo.csv_photos only know at run
        // time whether their file has one (a missing field is a DataError naming the port).
        if (in.is_any()) return;
        Shape3 shape;
        if (!detect([&](const char* f) { return in.find(f) != nullptr; }, shape)) {
          c.error(cat("input 'in' must carry ", kShapes, "; it carries ", in.str()), "");
          return;
        }
        if (shape != Shape3::photos && !c.connected("photos"))
          c.error("pairs and triplets need the photo table on port 'photos'", "");
        const FieldSchema* lead_field = in.find(roles_of(shape)[0].field);
        std::optional<std::vector<Dim>> lead;
        if (lead_field && lead_field->shape) lead = std::vector<Dim>(lead_field->shape->begin(), lead_field->shape->end());
        auto dims = [&](std::vector<Dim> inner) -> std::optional<std::vector<Dim>> {
          if (!lead) return std::nullopt;
          std::vector<Dim> d = *lead;
          d.insert(d.end(), inner.begin(), inner.end());
          return d;
        };
        PortSchema out;
        for (const Role& r : roles_of(shape)) {
          const std::string pre = r.prefix.empty() ? "" : r.prefix + "_";
          out.add(FieldSchema{pre + "id", DType::i64, dims({})});
          out.add(FieldSchema{pre + "image", DType::u8,
                              dims({fixed(p.integer("height")), fixed(p.integer("width")), fixed(p.string("mode") == "color" ? 3 : 1)})});
        }
        if (shape == Shape3::pairs && in.find("label")) out.add(FieldSchema{"pair_label", DType::f32, dims({})});
        for (const FieldSchema& f : in.fields())
          if (!consumed(shape, f.name) && !out.find(f.name)) out.add(f);
        c.set_output("out", out);
      })
      .create<DecodeById>();
}

}  // namespace embedflow::image
