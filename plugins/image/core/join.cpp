#include "core/join.hpp"

#include "core/arrays.hpp"

namespace embedflow::image {

std::shared_ptr<const ImageTable> JoinTableCache::get(const RecordPtr& side, const std::string& what) {
  std::lock_guard<std::mutex> lock(mutex_);
  if (!table_ || table_->record != side) {
    auto t = ImageTable::from_record(side, true, false, what);
    t->index_ids();
    table_ = std::move(t);
  }
  return table_;
}

void join_role(const ImageTable& t, const Array& ids, const char* role, const std::string& prefix,
               const std::string& image_field, bool scalar, Record& out) {
  const std::vector<std::int64_t> id = int_values(ids, role);
  std::vector<std::int64_t> rows(id.size());
  for (std::size_t i = 0; i < id.size(); ++i) rows[i] = t.row(id[i], role);
  auto shape = [&](Array a) { return scalar ? a.row(0) : a; };
  const auto n = static_cast<std::int64_t>(id.size());
  out.set(prefix + "_id", shape(Array::from_vector<std::int64_t>({n}, id)));
  out.set(prefix + "_image", shape(take_rows(t.record->get(image_field), rows)));
  if (!t.labels.empty()) {
    std::vector<std::int64_t> labels(rows.size());
    for (std::size_t i = 0; i < rows.size(); ++i) labels[i] = t.labels[static_cast<std::size_t>(rows[i])];
    out.set(prefix + "_label", shape(Array::from_vector<std::int64_t>({n}, std::move(labels))));
  }
}

PortSchema join_schema(SchemaContext& c, const std::string& stream, const std::string& lead_field,
                       const std::vector<std::string>& prefixes, std::vector<std::pair<std::string, DType>> extra) {
  const PortSchema& in = c.input(stream);
  const PortSchema& table = c.input("table");
  const std::string img = c.params().string("image_field");
  if (!table.is_any() && !table.find(img))
    c.error(cat("the table has no field '", img, "' (it carries ", table.str(), ")"), "image_field");
  const FieldSchema* a = in.is_any() ? nullptr : in.find(lead_field);
  const bool known_lead = a && a->shape;
  std::vector<Dim> lead;
  if (known_lead && !a->shape->empty()) lead.push_back(a->shape->front());
  auto dims = [&](const std::vector<Dim>& inner) -> std::optional<std::vector<Dim>> {
    if (!known_lead) return std::nullopt;
    std::vector<Dim> d = lead;
    d.insert(d.end(), inner.begin(), inner.end());
    return d;
  };
  const FieldSchema* image = table.is_any() ? nullptr : table.find(img);
  std::optional<std::vector<Dim>> inner;
  if (image && image->shape && !image->shape->empty()) inner = std::vector<Dim>(image->shape->begin() + 1, image->shape->end());
  const bool labels = !table.is_any() && table.find("label");
  PortSchema out;
  for (const std::string& p : prefixes) {
    out.add(FieldSchema{p + "_id", DType::i64, dims({})});
    out.add(FieldSchema{p + "_image", image ? image->dtype : std::nullopt, inner ? dims(*inner) : std::nullopt});
    if (labels) out.add(FieldSchema{p + "_label", DType::i64, dims({})});
  }
  for (const auto& [name, dtype] : extra) out.add(FieldSchema{name, dtype, dims({})});
  return out;
}

void pass_through_fields(const Record& stream, ConsumedField consumed, Record& out) {
  for (const auto& [name, value] : stream.fields())
    if (!consumed(name) && !out.find(name)) out.set(name, value);
}

void add_pass_through_fields(const PortSchema& stream, ConsumedField consumed, PortSchema& out) {
  if (stream.is_any()) return;
  for (const FieldSchema& f : stream.fields())
    if (!consumed(f.name) && !out.find(f.name)) out.add(f);
}

void ImageJoinNode::open(NodeContext& ctx) {
  ctx_ = &ctx;
  image_field_ = ctx.params().string("image_field");
}

void ImageJoinNode::process(std::size_t, const RecordPtr& in, Emitter& out) {
  auto table = cache_.get(ctx_->side(1), cat("node '", ctx_->id(), "' port 'table'"));
  Record r;
  join_fields(*table, *in, out.sequence(), r);
  pass_through_fields(*in, consumed_, r);
  out.emit(std::move(r));
}

}  // namespace embedflow::image
