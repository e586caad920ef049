// geo.pair_sampler: weakly labelled pairs or triplets from geotags, per anchor with budgets.
//
// Input `photos`: batches with id i64, lat/lon f64 (degrees), time i64 (unix s), user str, and
// optionally path str (enables duplicate-file removal). The node collects the whole stream,
// then, at end of stream, builds a nanoflann KD-tree over unique locations (local metric
// projection, exact great-circle test on candidates) and samples every anchor:
//   positives: up to k_pos photos within positive_radius_m (positives: radius), or frames of
//              the same time-lapse sequence (positives: timelapse: one user, consecutive frames
//              at most timelapse_gap_s apart and within positive_radius_m, >= timelapse_min_frames);
//   negatives: up to k_neg photos at least negative_min_m away, and at most negative_max_m when
//              it is > 0 (a ring, e.g. P_{10,[30,100]}).
// Constraints: the dataset window [date_from, date_to); same_month / same_year / max_time_gap_s
// relative to the anchor (on positives and negatives); positive_user any / same / different.
// Duplicates (same coordinates and user, times <= duplicate_time_s apart; identical image files)
// are dropped before sampling.
// Output `out`: output: pairs -> anchor, other i64[N], distance_m f64[N], label i64[N] (1 similar,
// 0 dissimilar); output: triplets -> anchor, positive, negative i64[N], positive_m, negative_m
// f64[N] (min(#pos, #neg) per anchor). Anchors without a positive emit nothing.
// Output `summary`: one record at the end (name, positive, negative, time_frame, other str[1],
// size, anchors, photos i64[1]) for geo.pair_stats' dataset table.
// Bound: more than max_pairs pair rows (default 10^8) stops the run with an error naming it;
// sampling stops drawing once past it, so a huge k_neg cannot hold every pair in memory.
// Sharding: shard_world_size W > 1 makes rank r sample only the anchors of its contiguous share
// of the location-ordered photos (rank_rows; whole locations), partners still drawn from the
// whole index, so every rank needs the whole photo stream and holds the whole index; it saves
// the sampling time and the output rows, not the index. The ranks' outputs concatenated in rank
// order equal the unsharded output row for row. Their lengths differ (anchors without positives
// emit nothing), so a trainer needing equal step counts must equalise downstream.
// The photo stream must be the whole table: a photo source sharded itself (geo.csv_photos,
// geo.yfcc_photos, geo.photo_folder with shard_world_size other than 1) would give a partial index
// and silently different pairs. Its batches carry shard_rank, so such a graph is refused at
// validation (or, when a node between them hid the field from the schema, at the first batch);
// shard here, with shard_world_size on this node, instead.
// Caveats: holds the photo columns in memory (~40 bytes a photo); output is grouped by location,
// not shuffled; each anchor's draws are seeded from (node seed, photo id), so results do not
// depend on --threads.
//
//   seed: 7
//   nodes:
//     photos: {type: geo.csv_photos, params: {path: tests/geo/data/photos_small.csv, on_bad_row: skip}}
//     pairs:  {type: geo.pair_sampler, params: {positive_radius_m: 10, negative_min_m: 2000, k_pos: 2, k_neg: 2}}
//     stats:  {type: geo.pair_stats, params: {out: out/pair_sampler_example, histogram_pairs: 1000}}
//   edges:
//     - photos.out -> pairs.photos
//     - pairs.summary -> stats.sets
#include <algorithm>
#include <cstdint>
#include <cstdio>

#include "embedflow/embedflow.hpp"
#include "geo_types.hpp"
#include "pair_sampler.hpp"
#include "photo_csv.hpp"
#include "photo_table_source.hpp"

namespace embedflow::geo {
namespace {

const char* kPairsSchema = "anchor: i64[N], other: i64[N], distance_m: f64[N], label: i64[N]";
const char* kTripletsSchema =
    "anchor: i64[N], positive: i64[N], negative: i64[N], positive_m: f64[N], negative_m: f64[N]";

bool parse_date_param(const Params& p, const std::string& name, std::int64_t& out) {
  const std::string& text = p.string(name);
  if (text.empty()) return true;
  return parse_time(text, TimeFormat::iso8601, out);
}

std::string metres(double m) {
  char buf[32];
  std::snprintf(buf, sizeof buf, "%g m", m);
  return buf;
}

class PairSamplerNode : public Node {
 public:
  void open(NodeContext& ctx) override {
    ctx_ = &ctx;
    const Params& p = ctx.params();
    c_.positive_radius_m = p.number("positive_radius_m");
    c_.negative_min_m = p.number("negative_min_m");
    c_.negative_max_m = p.number("negative_max_m");
    // A photo set holds fewer than 2^31 photos, so larger counts mean "all there are".
    c_.k_pos = static_cast<int>(std::min<std::int64_t>(p.integer("k_pos"), INT32_MAX));
    c_.k_neg = static_cast<int>(std::min<std::int64_t>(p.integer("k_neg"), INT32_MAX));
    parse_date_param(p, "date_from", c_.date_from);
    parse_date_param(p, "date_to", c_.date_to);
    c_.same_month = p.boolean("same_month");
    c_.same_year = p.boolean("same_year");
    c_.max_time_gap_s = p.integer("max_time_gap_s");
    const std::string& pu = p.string("positive_user");
    c_.positive_user = pu == "same" ? UserRule::same : pu == "different" ? UserRule::different : UserRule::any;
    c_.mode = p.string("positives") == "timelapse" ? PositiveMode::timelapse : PositiveMode::radius;
    c_.timelapse_gap_s = p.integer("timelapse_gap_s");
    c_.timelapse_min_frames = static_cast<int>(p.integer("timelapse_min_frames"));
    c_.duplicate_time_s = p.integer("duplicate_time_s");
    c_.duplicate_files = p.boolean("duplicate_files");
    c_.image_root = p.string("image_root");
    c_.max_rows = static_cast<std::uint64_t>(p.integer("max_pairs"));
    c_.seed = ctx.seed();
    c_.place = shard_place(p);
    c_.threads = ctx.threads();
    triplets_ = p.string("output") == "triplets";
    batch_size_ = static_cast<std::size_t>(p.integer("batch_size"));
    name_ = p.string("name").empty() ? ctx.id() : p.string("name");
  }

  void process(std::size_t, const RecordPtr& record, Emitter&) override {
    const Record& r = *record;
    if (r.find(kShardRankField))
      throw DataError(cat("photo batch ", batches_, " carries '", kShardRankField, "': it is one rank's share of a photo "
                          "table sharded at its source, and the sampler needs the whole table (every rank holds the "
                          "whole index); set shard_world_size on this node instead of on the photo source"));
    ++batches_;
    const Array& id = r.get("id");
    const Array& lat = r.get("lat");
    const Array& lon = r.get("lon");
    const Array& time = r.get("time");
    const Array& user = r.get("user");
    const Array* path = r.find("path");
    const std::int64_t n = id.numel();
    const auto* ids = id.data<std::int64_t>();
    const auto* la = lat.data<double>();
    const auto* lo = lon.data<double>();
    const auto* t = time.data<std::int64_t>();
    const bool has_path = path && c_.duplicate_files;
    if (has_path) photos_.path.resize(photos_.id.size());  // earlier batches had none
    for (std::int64_t i = 0; i < n; ++i) {
      // Photos outside the dataset window are dropped here, so a one-month set never holds the
      // whole collection in memory.
      if (t[i] < c_.date_from || t[i] >= c_.date_to) {
        ++outside_dates_;
        continue;
      }
      photos_.id.push_back(ids[i]);
      photos_.lat.push_back(la[i]);
      photos_.lon.push_back(lo[i]);
      photos_.time.push_back(t[i]);
      photos_.user.push_back(users_.intern(user.string_at(i)));
      if (has_path) photos_.path.push_back(path->string_at(i));
    }
  }

  void close(Emitter& out) override {
    if (!photos_.path.empty()) photos_.path.resize(photos_.id.size());
    PairSampler sampler(photos_, c_);
    photos_ = PhotoSet();  // the sampler keeps what it needs; three full-size sets may close at once
    users_ = UserInterner();
    std::int64_t rows = 0;
    sampler.run(
        [&](PairRows&& block) {
          if (triplets_) {
            TripletRows t = to_triplets(block);
            rows += static_cast<std::int64_t>(t.size());
            emit_triplets(t, out);
          } else {
            rows += static_cast<std::int64_t>(block.size());
            emit_pairs(block, out);
          }
        },
        [&] { return ctx_->stop_requested(); });
    const SamplerStats& s = sampler.stats();
    log_info(ctx_->id(), s.input + outside_dates_, " photos: ", s.outside_dates + outside_dates_, " outside the dates, ", s.duplicates, " duplicates, ",
             s.duplicate_files, " duplicate files; ", s.kept, " kept at ", s.unique_locations, " locations; ",
             s.anchors_with_positive, " of ", s.anchors, " anchors have positives; ", rows, " rows (",
             s.positives, " positives, ", s.negatives, " negatives); index ", s.build_seconds, " s, sampling ",
             s.sample_seconds, " s");
    if (c_.mode == PositiveMode::timelapse)
      log_info(ctx_->id(), s.timelapse_sequences, " time-lapse sequences with ", s.timelapse_frames, " frames");
    emit_summary(s, rows, out);
  }

 private:
  void emit_pairs(const PairRows& b, Emitter& out) {
    for (std::size_t i = 0; i < b.size(); i += batch_size_) {
      const std::size_t j = std::min(b.size(), i + batch_size_);
      const auto n = static_cast<std::int64_t>(j - i);
      Record r;
      r.set("anchor", Array::from_vector<std::int64_t>({n}, {b.anchor.begin() + i, b.anchor.begin() + j}));
      r.set("other", Array::from_vector<std::int64_t>({n}, {b.other.begin() + i, b.other.begin() + j}));
      r.set("distance_m", Array::from_vector<double>({n}, {b.distance_m.begin() + i, b.distance_m.begin() + j}));
      r.set("label", Array::from_vector<std::int64_t>({n}, {b.label.begin() + i, b.label.begin() + j}));
      out.emit(0, std::move(r));
    }
  }

  void emit_triplets(const TripletRows& b, Emitter& out) {
    for (std::size_t i = 0; i < b.size(); i += batch_size_) {
      const std::size_t j = std::min(b.size(), i + batch_size_);
      const auto n = static_cast<std::int64_t>(j - i);
      Record r;
      r.set("anchor", Array::from_vector<std::int64_t>({n}, {b.anchor.begin() + i, b.anchor.begin() + j}));
      r.set("positive", Array::from_vector<std::int64_t>({n}, {b.positive.begin() + i, b.positive.begin() + j}));
      r.set("negative", Array::from_vector<std::int64_t>({n}, {b.negative.begin() + i, b.negative.begin() + j}));
      r.set("positive_m", Array::from_vector<double>({n}, {b.positive_m.begin() + i, b.positive_m.begin() + j}));
      r.set("negative_m", Array::from_vector<double>({n}, {b.negative_m.begin() + i, b.negative_m.begin() + j}));
      out.emit(0, std::move(r));
    }
  }

  void emit_summary(const SamplerStats& s, std::int64_t rows, Emitter& out) {
    const Params& p = ctx_->params();
    std::string positive = c_.mode == PositiveMode::timelapse
                               ? cat("time-lapse frames <= ", c_.timelapse_gap_s, " s apart, <= ", metres(c_.positive_radius_m))
                               : cat("<= ", metres(c_.positive_radius_m));
    std::string negative = c_.negative_max_m > 0 ? cat(metres(c_.negative_min_m), " .. ", metres(c_.negative_max_m))
                                                 : cat(">= ", metres(c_.negative_min_m));
    std::string frame;
    if (!p.string("date_from").empty() || !p.string("date_to").empty())
      frame = cat(p.string("date_from").empty() ? "..." : p.string("date_from"), " to ",
                  p.string("date_to").empty() ? "..." : p.string("date_to"));
    else
      frame = "all";
    std::vector<std::string> other;
    if (c_.same_month) other.push_back("same month");
    if (c_.same_year) other.push_back("same year");
    if (c_.max_time_gap_s > 0) other.push_back(cat("time gap <= ", c_.max_time_gap_s, " s"));
    if (c_.positive_user == UserRule::same) other.push_back("same-user positives");
    if (c_.positive_user == UserRule::different) other.push_back("different-user positives");
    if (c_.mode == PositiveMode::timelapse) other.push_back(cat("time-lapse (", s.timelapse_sequences, s.timelapse_sequences == 1 ? " sequence, " : " sequences, ",
                                                      s.timelapse_frames, " frames)"));
    std::string other_text;
    for (const auto& o : other) other_text += (other_text.empty() ? "" : ", ") + o;
    Record r;
    r.set("name", Array::strings({name_}));
    r.set("positive", Array::strings({positive}));
    r.set("negative", Array::strings({negative}));
    r.set("time_frame", Array::strings({frame}));
    r.set("other", Array::strings({other_text}));
    r.set("size", Array::from_vector<std::int64_t>({1}, {rows}));
    r.set("anchors", Array::from_vector<std::int64_t>({1}, {s.anchors_with_positive}));
    r.set("photos", Array::from_vector<std::int64_t>({1}, {s.kept}));
    out.emit(1, std::move(r));
  }

  NodeContext* ctx_ = nullptr;
  SamplerConfig c_;
  bool triplets_ = false;
  std::size_t batch_size_ = 0;
  std::size_t batches_ = 0;  // photo batches received
  std::string name_;
  PhotoSet photos_;
  std::int64_t outside_dates_ = 0;
  UserInterner users_;
};

}  // namespace

NodeType pair_sampler_type() {
  NodeTypeBuilder b("geo.pair_sampler");
  b.doc("Samples similar/dissimilar photo pairs or triplets per anchor from geotags (KD-tree, exact great-circle "
           "distances, time and user constraints, duplicate removal).")
      .example("nodes:\n  pairs: {type: geo.pair_sampler, params: {positive_radius_m: 10, negative_min_m: 2000}}\n")
      .param(Param::number("positive_radius_m").default_value(10.0).range(0, 100000)
                 .doc("r+: positives lie within this great-circle distance of the anchor (metres)"))
      .param(Param::number("negative_min_m").default_value(2000.0).min(0)
                 .doc("r-: negatives lie at least this far from the anchor (metres)"))
      .param(Param::number("negative_max_m").default_value(0.0).range(0, 100000)
                 .doc("> 0: ring negatives, at most this far (metres); 0: no upper bound"))
      .param(Param::integer("k_pos").default_value(4).min(1).doc("positives drawn per anchor (fewer when fewer exist; a huge k takes them all)"))
      .param(Param::integer("k_neg").default_value(4).min(0).doc("negatives drawn per anchor (fewer when fewer exist; a huge k takes them all)"))
      .param(Param::string("date_from").default_value("").doc("ISO 8601: drop photos taken before this (inclusive bound)"))
      .param(Param::string("date_to").default_value("").doc("ISO 8601: drop photos taken at or after this"))
      .param(Param::boolean("same_month").default_value(false).doc("partners taken in the anchor's calendar month"))
      .param(Param::boolean("same_year").default_value(false).doc("partners taken in the anchor's calendar year"))
      .param(Param::integer("max_time_gap_s").default_value(0).min(0)
                 .doc("> 0: partners taken at most this many seconds from the anchor"))
      .param(Param::choice("positive_user", {"any", "same", "different"}).default_value("any")
                 .doc("positives by the anchor's user, by another user, or either"))
      .param(Param::choice("positives", {"radius", "timelapse"}).default_value("radius")
                 .doc("radius: within positive_radius_m; timelapse: frames of the anchor's time-lapse sequence"))
      .param(Param::integer("timelapse_gap_s").default_value(3600).min(1)
                 .doc("time-lapse: consecutive frames at most this far apart, and positives within it of the anchor"))
      .param(Param::integer("timelapse_min_frames").default_value(100).min(2)
                 .doc("time-lapse: shortest run of one user's frames that counts as a sequence"))
      .param(Param::integer("duplicate_time_s").default_value(1).min(-1)
                 .doc("drop photos at the same coordinates by the same user within this many seconds; -1 keeps them"))
      .param(Param::boolean("duplicate_files").default_value(true)
                 .doc("drop photos whose image file (path column) is identical to an earlier one"))
      .param(Param::string("image_root").default_value("").doc("directory prefixed to relative image paths"))
      .param(Param::choice("output", {"pairs", "triplets"}).default_value("pairs")
                 .doc("pairs: one row per (anchor, partner) with a label; triplets: (anchor, positive, negative)"))
      .param(Param::integer("max_pairs").default_value(100000000).min(1)
                 .doc("most pair rows (positives plus negatives, before triplets are formed) the set may have; more "
                      "stops the run naming this parameter (the rows are held, 32 bytes each: a huge k_pos or k_neg "
                      "on a large photo set asks for every pair)"))
      .param(Param::integer("batch_size").default_value(65536).min(1).doc("rows per emitted batch"))
      .param(Param::string("name").default_value("").doc("set name in the summary (default: the node id)"));
  // Anchors of this rank only, partners from the whole index (the whole photo stream must arrive).
  add_shard_params(b);
  return b.input("photos", "id: i64[B], lat: f64[B], lon: f64[B], time: i64[B], user: str[B]",
             "photo batches (a path str[B] field enables duplicate-file removal)")
      .output("out", kPairsSchema, "pair or triplet batches")
      .output("summary", "name: str[1], positive: str[1], negative: str[1], time_frame: str[1], other: str[1], size: i64[1]",
              "one record at the end describing the set, for geo.pair_stats")
      .check([](SchemaContext& c) {
        const Params& p = c.params();
        if (c.input("photos").find(kShardRankField))
          c.error(cat("the photos arrive sharded (they carry '", kShardRankField, "': a photo source with "
                      "shard_world_size other than 1 upstream), but the sampler needs the whole table: every rank "
                      "samples its anchors against the whole index. Leave the source unsharded and set "
                      "shard_world_size on this node"));
        const double rp = p.number("positive_radius_m"), rn = p.number("negative_min_m"), rx = p.number("negative_max_m");
        if (rn <= rp) c.error(cat("negative_min_m (", rn, ") must exceed positive_radius_m (", rp, ")"), "negative_min_m");
        if (rx > 0 && rx < rn) c.error(cat("negative_max_m (", rx, ") is below negative_min_m (", rn, ")"), "negative_max_m");
        std::int64_t from = INT64_MIN, to = INT64_MAX;
        if (!parse_date_param(p, "date_from", from))
          c.error(cat("date_from '", p.string("date_from"), "' is not an ISO 8601 date"), "date_from");
        if (!parse_date_param(p, "date_to", to))
          c.error(cat("date_to '", p.string("date_to"), "' is not an ISO 8601 date"), "date_to");
        if (from != INT64_MIN && to != INT64_MAX && from >= to) c.error("date_from must be before date_to", "date_to");
        c.set_output("out", PortSchema::parse(p.string("output") == "triplets" ? kTripletsSchema : kPairsSchema));
      })
      .create<PairSamplerNode>();
}

}  // namespace embedflow::geo
