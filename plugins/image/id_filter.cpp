// image.id_filter — keeps the records (or the rows of batches) whose id is listed in a CSV file
// with a header, e.g. gen_photos' landmark split (id,label,role): `role: query` keeps the rows
// the file marks as queries, and the file's label replaces the record's, so photos read by id
// (image.files_reader over the metadata CSV) become a labelled query or gallery set.
//
// With `keep: unlisted` it keeps the others instead (the records are passed on as they are): a
// held-out set, e.g. the photos of gen_photos' --validation area, left out of training.
//
// Inputs: in — records with a scalar `id`, or batches / tables with id [B] (every field sharing
//         the leading dim B)
// Outputs: out — the records kept, with `label` from the file's label column (i64, scalar or
//          [B]; unless label_column is empty); batches keep their kept rows, in their order
//          (a batch left empty is dropped)
// Caveats: the file is read at open; a row whose id or label is not an integer, or an id listed
// twice, is an error naming file:line. Counts are logged at the end (ids of the file that never
// arrived included). Parallel-safe.
//
//   nodes:
//     photos:  {type: image.files_reader, params: {csv: tests/image/data/id_list.csv, height: 8, width: 8}}
//     queries: {type: image.id_filter, params: {path: tests/image/data/id_split.csv, role: query}}
//     show:    {type: core.sink, params: {mode: print}}
//   edges: [photos.out -> queries.in, queries.out -> show.in]
#include <embedflow/file_kind.hpp>
#include <algorithm>
#include <atomic>
#include <fstream>
#include <unordered_map>

#include "core/arrays.hpp"
#include "image_types.hpp"

namespace embedflow::image {
namespace {

std::vector<std::string> split_csv_line(const std::string& line) {
  std::vector<std::string> out(1);
  for (char ch : line) {
    if (ch == ',') out.emplace_back();
    else if (ch != '\r') out.back() += ch;
  }
  return out;
}

bool parse_int(const std::string& s, std::int64_t& v) {
  if (s.empty()) return false;
  std::size_t used = 0;
  try {
    v = std::stoll(s, &used);
  } catch (const std::exception&) {
    return false;
  }
  return used == s.size();
}

class IdFilter final : public Node {
 public:
  void open(NodeContext& ctx) override {
    ctx_ = &ctx;
    const Params& p = ctx.params();
    const std::string path = p.string("path");
    refuse_special_input(path, "id list");
    std::ifstream in(path);
    if (!in) throw ConfigError(cat(path, ": cannot open"));
    std::string line;
    if (!std::getline(in, line)) throw ConfigError(cat(path, ": empty file (a header row is expected)"));
    const std::vector<std::string> header = split_csv_line(line);
    auto column = [&](const std::string& name) -> int {
      if (name.empty()) return -1;
      for (std::size_t i = 0; i < header.size(); ++i)
        if (header[i] == name) return static_cast<int>(i);
      throw ConfigError(cat(path, ":1: no column '", name, "' (columns: ", line, ")"));
    };
    const int id_col = column(p.string("id_column"));
    const int label_col = column(p.string("label_column"));
    const std::string role = p.string("role");
    const int role_col = role.empty() ? -1 : column(p.string("role_column"));
    keep_listed_ = p.string("keep") == "listed";
    with_label_ = label_col >= 0 && keep_listed_;
    std::int64_t line_no = 1;
    while (std::getline(in, line)) {
      ++line_no;
      if (line.empty() || line == "\r") continue;
      const std::vector<std::string> row = split_csv_line(line);
      const auto need = static_cast<std::size_t>(std::max({id_col, label_col, role_col})) + 1;
      if (row.size() < need) throw DataError(cat(path, ":", line_no, ": ", row.size(), " columns, expected ", header.size()));
      if (role_col >= 0 && row[static_cast<std::size_t>(role_col)] != role) continue;
      std::int64_t id = 0, label = -1;
      if (!parse_int(row[static_cast<std::size_t>(id_col)], id))
        throw DataError(cat(path, ":", line_no, ": id '", row[static_cast<std::size_t>(id_col)], "' is not an integer"));
      if (with_label_ && !parse_int(row[static_cast<std::size_t>(label_col)], label))
        throw DataError(cat(path, ":", line_no, ": label '", row[static_cast<std::size_t>(label_col)], "' is not an integer"));
      if (!labels_.emplace(id, label).second) throw DataError(cat(path, ":", line_no, ": id ", id, " is listed twice"));
    }
    log_info(ctx.id(), labels_.size(), " ids listed in ", path, role.empty() ? "" : cat(" with ", p.string("role_column"), " ", role));
  }

  void process(std::size_t, const RecordPtr& in, Emitter& out) override {
    const Array& id = in->get("id");
    if (id.rank() == 0) {
      seen_.fetch_add(1, std::memory_order_relaxed);
      auto it = labels_.find(id.as_int(0));
      if ((it != labels_.end()) != keep_listed_) return;
      kept_.fetch_add(1, std::memory_order_relaxed);
      if (!with_label_) return out.emit(in);
      Record r = *in;
      r.set("label", Array::scalar<std::int64_t>(it->second));
      return out.emit(share(std::move(r)));
    }
    const std::vector<std::int64_t> ids = int_values(id, "id");
    std::vector<std::int64_t> rows, labels;
    for (std::size_t i = 0; i < ids.size(); ++i) {
      auto it = labels_.find(ids[i]);
      if ((it != labels_.end()) != keep_listed_) continue;
      rows.push_back(static_cast<std::int64_t>(i));
      if (keep_listed_) labels.push_back(it->second);
    }
    seen_.fetch_add(ids.size(), std::memory_order_relaxed);
    kept_.fetch_add(rows.size(), std::memory_order_relaxed);
    if (rows.empty()) return;
    Record r;
    try {
      r = rows.size() == ids.size() ? *in : take_record_rows(*in, rows, static_cast<std::int64_t>(ids.size()));
    } catch (const DataError& e) {
      throw DataError(cat("record ", out.sequence(), ": ", e.what()));
    }
    const auto n = static_cast<std::int64_t>(rows.size());
    if (with_label_) r.set("label", Array::from_vector<std::int64_t>({n}, std::move(labels)));
    out.emit(share(std::move(r)));
  }

  void close(Emitter&) override {
    const std::uint64_t kept = kept_.load();
    log_info(ctx_->id(), "kept ", kept, " of ", seen_.load(), " records",
             keep_listed_ && kept < labels_.size() ? cat("; ", labels_.size() - kept, " listed ids never arrived") : "");
  }

 private:
  NodeContext* ctx_ = nullptr;
  std::unordered_map<std::int64_t, std::int64_t> labels_;
  bool keep_listed_ = true;
  bool with_label_ = true;
  std::atomic<std::uint64_t> seen_{0}, kept_{0};
};

}  // namespace

NodeType id_filter_type() {
  return NodeTypeBuilder("image.id_filter")
      .deterministic()
      .doc("Keeps records, or rows of batches, whose id is listed in a CSV file (optionally only the file's rows of one role), "
           "taking their label from the file: gen_photos' landmark split as query and gallery sets.")
      .example(
          "nodes:\n"
          "  photos:  {type: image.files_reader, params: {csv: tests/image/data/id_list.csv, height: 8, width: 8}}\n"
          "  queries: {type: image.id_filter, params: {path: tests/image/data/id_split.csv, role: query}}\n"
          "  show:    {type: core.sink, params: {mode: print}}\n"
          "edges: [photos.out -> queries.in, queries.out -> show.in]\n")
      .param(Param::path("path").doc("CSV file with a header row, e.g. gen_photos' --split file (id,label,role)"))
      .param(Param::string("id_column").default_value("id").doc("column holding the ids"))
      .param(Param::string("label_column").default_value("label").doc("column whose integer replaces the record's label; empty: keep the records' own"))
      .param(Param::string("role_column").default_value("role").doc("column compared with `role`"))
      .param(Param::string("role").default_value("").doc("keep only the file's rows whose role_column equals this (e.g. query, gallery); empty: every row"))
      .param(Param::choice("keep", {"listed", "unlisted"}).default_value("listed")
                 .doc("listed: the records whose id the file lists (labelled from it); unlisted: the others, unchanged (a held-out set left out)"))
      .input("in", "*", "records with a scalar id, or batches / tables with id [B]")
      .output("out", "*", "the records (rows) kept, labelled from the file")
      .parallel()
      .forward("in", "out")
      .check([](SchemaContext& c) {
        // The file's label is added (or replaces the record's), shaped like the id.
        if (c.params().string("label_column").empty() || c.params().string("keep") != "listed") return;
        PortSchema out = c.output("out");
        if (out.is_any()) return;
        const FieldSchema* id = out.find("id");
        out.add(FieldSchema{"label", DType::i64, id ? id->shape : std::nullopt});
        c.set_output("out", out);
      })
      .create<IdFilter>();
}

}  // namespace embedflow::image
