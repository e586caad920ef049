// geo.position_embedding — a photo's geotag as its embedding: east and north metres from a
// reference point (local equirectangular projection), so the Euclidean distance between two
// embeddings is the distance between where the photos were taken (within 0.6% across New York's
// 40 km; metres-scale neighbours far more exactly). The
// "nearest in metres" oracle: what an embedding that had learnt the geotags perfectly would do,
// the ceiling for a geo-trained model on a triplet or retrieval test.
//
// Inputs: in — photo tables (geo.csv_photos, geo.yfcc_photos): id, lat, lon
// Outputs: out — id i64[B], embedding f32[B,2] (x east, y north, metres)
// Caveats: deterministic; the reference is the first photo unless origin_lat/origin_lon are set.
//
//   nodes:
//     photos: {type: geo.csv_photos, params: {path: tests/geo/data/photos_small.csv, on_bad_row: skip}}
//     where:  {type: geo.position_embedding}
//     show:   {type: core.sink, params: {mode: count}}
//   edges: [photos.out -> where.in, where.out -> show.in]
#include <cmath>

#include "embedflow/embedflow.hpp"
#include "geo_types.hpp"
#include "geodesy.hpp"

namespace embedflow::geo {
namespace {

class PositionEmbedding final : public Node {
 public:
  void open(NodeContext& ctx) override {
    const Params& p = ctx.params();
    if (p.has("origin_lat")) set_origin(p.number("origin_lat"), p.number("origin_lon"));
  }
  void process(std::size_t, const RecordPtr& in, Emitter& out) override {
    const Array& id = in->get("id");
    const Array& lat = in->get("lat");
    const Array& lon = in->get("lon");
    const std::int64_t n = id.numel();
    if (n == 0) return;
    if (!origin_set_) set_origin(lat.as_double(0), lon.as_double(0));
    Array emb = Array::zeros(DType::f32, {n, 2});
    float* e = emb.mutable_data<float>();
    for (std::int64_t i = 0; i < n; ++i) {
      e[2 * i] = static_cast<float>((lon.as_double(i) - lon0_) * kx_);
      e[2 * i + 1] = static_cast<float>((lat.as_double(i) - lat0_) * ky_);
    }
    Record r;
    r.set("id", id);
    r.set("embedding", std::move(emb));
    out.emit(std::move(r));
  }

 private:
  void set_origin(double lat, double lon) {
    lat0_ = lat;
    lon0_ = lon;
    ky_ = kEarthRadiusM * kDegToRad;
    kx_ = ky_ * std::cos(lat * kDegToRad);
    origin_set_ = true;
  }
  bool origin_set_ = false;
  double lat0_ = 0, lon0_ = 0, kx_ = 0, ky_ = 0;
};

}  // namespace

NodeType position_embedding_type() {
  return NodeTypeBuilder("geo.position_embedding")
      .deterministic()
      .doc("A photo's geotag as a 2-d embedding in metres (east, north): the nearest-in-metres oracle.")
      .example(
          "nodes:\n"
          "  photos: {type: geo.csv_photos, params: {path: tests/geo/data/photos_small.csv, on_bad_row: skip}}\n"
          "  where:  {type: geo.position_embedding}\n"
          "  show:   {type: core.sink, params: {mode: count}}\n"
          "edges: [photos.out -> where.in, where.out -> show.in]\n")
      .param(Param::number("origin_lat").optional().range(-89, 89).doc("reference latitude (default: the first photo's)"))
      .param(Param::number("origin_lon").optional().range(-180, 180).doc("reference longitude (with origin_lat)"))
      .input("in", "id: i64[B], lat: f64[B], lon: f64[B]", "photo tables")
      .output("out", "id: i64[B], embedding: f32[B,2]", "x east and y north of the reference, metres")
      .check([](SchemaContext& c) {
        if (c.params().has("origin_lat") != c.params().has("origin_lon"))
          c.error("give origin_lat and origin_lon together", "origin_lat");
      })
      .create<PositionEmbedding>();
}

}  // namespace embedflow::geo
