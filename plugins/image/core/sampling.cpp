#include "core/sampling.hpp"

#include <algorithm>
#include <map>
#include <numeric>

#include "core/arrays.hpp"
#include "core/classes.hpp"

namespace embedflow::image {

ClassIndex ClassIndex::build(const std::vector<std::int64_t>& labels) {
  std::map<std::int64_t, std::vector<std::int64_t>> by;
  for (std::size_t i = 0; i < labels.size(); ++i) by[labels[i]].push_back(static_cast<std::int64_t>(i));
  ClassIndex c;
  for (auto& [label, rows] : by) {
    c.labels.push_back(label);
    c.rows.push_back(std::move(rows));
  }
  return c;
}

std::vector<std::vector<std::int64_t>> class_batch_plan(const ClassIndex& index, const ClassBatchOptions& o, Rng& rng) {
  const std::size_t classes = index.labels.size();
  const auto k = static_cast<std::size_t>(o.per_class);
  std::vector<std::vector<std::vector<std::int64_t>>> groups(classes);
  for (std::size_t c = 0; c < classes; ++c) {
    std::vector<std::int64_t> rows = index.rows[c];
    shuffle_in_place(rows, rng);
    const std::size_t full = rows.size() / k, rest = rows.size() % k;
    for (std::size_t g = 0; g < full; ++g) groups[c].emplace_back(rows.begin() + static_cast<std::ptrdiff_t>(g * k),
                                                                  rows.begin() + static_cast<std::ptrdiff_t>((g + 1) * k));
    if (rest == 0 || o.incomplete == Incomplete::drop) continue;
    std::vector<std::int64_t> last(rows.end() - static_cast<std::ptrdiff_t>(rest), rows.end());
    const std::size_t others = rows.size() - rest, need = k - rest;
    if (others >= need) {
      // Distinct fillers from the rows already grouped: a partial Fisher-Yates over them.
      std::vector<std::int64_t> pool(rows.begin(), rows.begin() + static_cast<std::ptrdiff_t>(others));
      for (std::size_t i = 0; i < need; ++i) {
        auto j = static_cast<std::size_t>(uniform_int(rng, static_cast<std::int64_t>(i), static_cast<std::int64_t>(others - 1)));
        std::swap(pool[i], pool[j]);
        last.push_back(pool[i]);
      }
    } else {
      // The class is smaller than K: repeat its rows.
      for (std::size_t i = 0; i < need; ++i)
        last.push_back(rows[static_cast<std::size_t>(uniform_int(rng, 0, static_cast<std::int64_t>(rows.size() - 1)))]);
    }
    groups[c].push_back(std::move(last));
  }
  std::vector<std::size_t> next(classes, 0);
  std::vector<std::vector<std::int64_t>> batches;
  const auto n = static_cast<std::size_t>(o.classes_per_batch);
  for (;;) {
    std::vector<std::pair<std::size_t, std::uint64_t>> candidates;  // (class, tie-break key)
    for (std::size_t c = 0; c < classes; ++c)
      if (next[c] < groups[c].size()) candidates.emplace_back(c, rng());
    if (candidates.empty() || (candidates.size() < n && o.drop_last)) break;
    std::sort(candidates.begin(), candidates.end(), [&](const auto& a, const auto& b) {
      const std::size_t la = groups[a.first].size() - next[a.first], lb = groups[b.first].size() - next[b.first];
      return la != lb ? la > lb : a.second < b.second;
    });
    if (candidates.size() > n) candidates.resize(n);
    std::vector<std::int64_t> batch;
    batch.reserve(candidates.size() * k);
    for (const auto& [c, key] : candidates) {
      const auto& g = groups[c][next[c]++];
      batch.insert(batch.end(), g.begin(), g.end());
    }
    batches.push_back(std::move(batch));
  }
  return batches;
}

std::vector<std::int64_t> pk_batch(const ClassIndex& index, int p, int k, Rng& rng) {
  const std::size_t classes = index.labels.size();
  if (classes < static_cast<std::size_t>(p))
    throw DataError(cat("PK batches need ", p, " classes but the table has ", classes));
  std::vector<std::size_t> pick(classes);
  std::iota(pick.begin(), pick.end(), 0);
  for (std::size_t i = 0; i < static_cast<std::size_t>(p); ++i) {
    auto j = static_cast<std::size_t>(uniform_int(rng, static_cast<std::int64_t>(i), static_cast<std::int64_t>(classes - 1)));
    std::swap(pick[i], pick[j]);
  }
  std::vector<std::int64_t> batch;
  batch.reserve(static_cast<std::size_t>(p) * static_cast<std::size_t>(k));
  for (std::size_t i = 0; i < static_cast<std::size_t>(p); ++i) {
    std::vector<std::int64_t> rows = index.rows[pick[i]];
    const auto kk = static_cast<std::size_t>(k);
    if (rows.size() >= kk) {
      for (std::size_t a = 0; a < kk; ++a) {
        auto j = static_cast<std::size_t>(uniform_int(rng, static_cast<std::int64_t>(a), static_cast<std::int64_t>(rows.size() - 1)));
        std::swap(rows[a], rows[j]);
        batch.push_back(rows[a]);
      }
    } else {
      for (std::size_t a = 0; a < kk; ++a)
        batch.push_back(rows[static_cast<std::size_t>(uniform_int(rng, 0, static_cast<std::int64_t>(rows.size() - 1)))]);
    }
  }
  return batch;
}

std::shared_ptr<ImageTable> ImageTable::from_record(const RecordPtr& r, bool need_ids, bool need_labels, const std::string& what) {
  auto t = std::make_shared<ImageTable>();
  t->record = r;
  if (r->size() == 0) throw DataError(cat(what, ": the table record has no fields"));
  const Array* label = r->find("label");
  const Array* id = r->find("id");
  const Array& ref = label ? *label : id ? *id : r->fields().front().second;
  if (ref.rank() == 0)
    throw DataError(cat(what, " expects one table record holding every image (id [N], label [N], image [N,...]); got a single image ",
                        r->describe(), ". Use batch_size: -1 on the reader or image.collect"));
  t->rows = ref.dim(0);
  for (const auto& [name, value] : r->fields())
    if (value.rank() == 0 || value.dim(0) != t->rows)
      throw DataError(cat(what, ": table field '", name, "' is ", value.describe(), " but the table has ", t->rows, " rows"));
  if (need_ids) {
    if (!id) throw DataError(cat(what, ": the table has no 'id' field (it has ", r->describe(), ")"));
    t->ids = int_values(*id, "id");
  } else if (id) {
    t->ids = int_values(*id, "id");
  }
  if (label) t->labels = int_values(*label, "label");
  else if (need_labels) throw DataError(cat(what, ": the table has no 'label' field (it has ", r->describe(), ")"));
  return t;
}

void ImageTable::index_ids() {
  row_of.clear();
  row_of.reserve(ids.size() * 2);
  for (std::size_t i = 0; i < ids.size(); ++i)
    if (!row_of.emplace(ids[i], static_cast<std::int64_t>(i)).second)
      throw DataError(cat("id ", ids[i], " appears twice in the image table (rows ", row_of[ids[i]], " and ", i,
                          "); ids must be unique (did a reader run several epochs into it?)"));
}

std::int64_t ImageTable::row(std::int64_t id, const char* role) const {
  auto it = row_of.find(id);
  if (it == row_of.end())
    throw DataError(cat(role, " id ", id, " is not in the image table (", rows, " images", ids.empty() ? "" : cat(", ids ",
                        *std::min_element(ids.begin(), ids.end()), "..", *std::max_element(ids.begin(), ids.end())), ")"));
  return it->second;
}

Record ImageTable::gather(const std::vector<std::int64_t>& at) const {
  return take_record_rows(*record, at, rows);
}

ClassTable ClassTable::load(const RecordPtr& r, const ClassSet& classes, const std::string& what) {
  ClassTable t;
  t.table = ImageTable::from_record(r, true, true, what);
  std::vector<std::int64_t> labels;
  for (std::int64_t i = 0; i < t.table->rows; ++i) {
    const std::int64_t label = t.table->labels[static_cast<std::size_t>(i)];
    if (!classes.contains(label)) continue;
    t.rows.push_back(i);
    labels.push_back(label);
  }
  t.index = ClassIndex::build(labels);
  return t;
}

Record ClassTable::batch(const std::vector<std::int64_t>& positions, std::int64_t epoch) const {
  std::vector<std::int64_t> at(positions.size());
  for (std::size_t i = 0; i < positions.size(); ++i) at[i] = rows[static_cast<std::size_t>(positions[i])];
  Record r = table->gather(at);
  const auto b = static_cast<std::int64_t>(at.size());
  r.set("epoch", Array::from_vector<std::int64_t>({b}, std::vector<std::int64_t>(at.size(), epoch)));
  return r;
}

void batcher_schema(SchemaContext& c) {
  const PortSchema& table = c.input("table");
  const Dim b{Dim::Kind::symbol, -1, "B"};
  PortSchema out;
  if (!table.is_any()) {
    for (const FieldSchema& f : table.fields())
      if (f.shape && f.shape->empty()) c.error(cat("table field '", f.name, "' is a scalar; the table must hold every image in one record "
                                                   "(batch_size: -1 on the reader, or image.collect)"));
    out = batched(unbatched(table), b);
  }
  out.add(FieldSchema{"id", DType::i64, std::vector<Dim>{b}});
  out.add(FieldSchema{"label", DType::i64, std::vector<Dim>{b}});
  out.add(FieldSchema{"epoch", DType::i64, std::vector<Dim>{b}});
  c.set_output("out", out);
}

}  // namespace embedflow::image
