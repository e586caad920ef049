// core.keep_best — passes on, at end of stream, the one record whose scalar `field` is smallest
// (mode: min) or largest (mode: max) of all records received.
//
// The use it was made for: restarts. Non-convex training lands in different optima from
// different initialisations (a CEN's embedding sometimes fails to give an attribute a dimension
// of its own), so a graph trains the same model in N nodes, each seeded by its own node id, fans
// their final snapshots into one keep_best and keeps the lowest training loss, as k-means keeps
// the best of n_init starts by inertia. torch.train's snapshots carry `loss` (the mean training
// loss of their latest epoch) for that. Records whose value is NaN never win (a diverged run):
// they are counted in the log line. Any record stream with a numeric scalar field works. The log
// line names the kept record by its `name_field` (torch.train snapshots: `source`, the trainer's
// node id) when it has one. Ties go to the record whose `name_field` sorts first (strings by
// bytes, numbers by value), so which of the tied restarts is kept does not depend on which branch
// finished first; records without that field tie-break by arrival.
//
// Inputs: in (fan-in allowed)   Outputs: out (at most one record: the best)
//
//   nodes:
//     fit_a: {type: torch.train, params: &fit {model: ..., loss: ..., epochs: 8}}
//     fit_b: {type: torch.train, params: {<<: *fit, log_dir: out/b}}
//     best:  {type: core.keep_best, params: {field: loss}}
//   edges: [fit_a.model -> best.in, fit_b.model -> best.in, best.out -> embed.model]
#include <cmath>

#include "core_types.hpp"

namespace embedflow::core {
namespace {

// True when both records carry a one-value `field` of the same kind and a's sorts before b's.
bool name_before(const Record& a, const Record& b, const std::string& field) {
  const Array* x = a.find(field);
  const Array* y = b.find(field);
  if (!x || !y || x->numel() != 1 || y->numel() != 1 || x->is_string() != y->is_string()) return false;
  return x->is_string() ? x->string_at(0) < y->string_at(0) : x->as_double(0) < y->as_double(0);
}

class KeepBest final : public Node {
 public:
  void open(NodeContext& ctx) override {
    ctx_ = &ctx;
    field_ = ctx.params().string("field");
    maximize_ = ctx.params().string("mode") == "max";
    name_field_ = ctx.params().string("name_field");
  }

  void process(std::size_t, const RecordPtr& in, Emitter&) override {
    const auto index = static_cast<std::int64_t>(values_.size());
    const Array* a = in->find(field_);
    if (!a) throw DataError(cat("record ", index, " has no field '", field_, "' (record: ", in->describe(), ")"));
    if (a->is_string() || a->numel() != 1)
      throw DataError(cat("record ", index, ": field '", field_, "' must be one number, got ", a->describe()));
    const double v = a->as_double(0);
    values_.push_back(v);
    if (std::isnan(v)) return;
    if (!best_ || (maximize_ ? v > best_value_ : v < best_value_) || (v == best_value_ && name_before(*in, *best_, name_field_))) {
      best_ = in;
      best_value_ = v;
      best_index_ = index;
    }
  }

  void close(Emitter& out) override {
    if (values_.empty()) {
      log_warning(ctx_->id(), "no records received: nothing to keep");
      return;
    }
    std::string all;
    for (double v : values_) all += (all.empty() ? "" : ", ") + cat(v);
    if (!best_)
      throw DataError(cat("every one of the ", values_.size(), " records has ", field_, " = NaN: none to keep"));
    std::string name;
    if (const Array* n = best_->find(name_field_); n && n->is_string() && n->numel() == 1) name = cat(" '", n->string_at(0), "'");
    log_info(ctx_->id(), "kept record ", best_index_, name, " of ", values_.size(), " (", maximize_ ? "largest " : "smallest ", field_,
             " ", best_value_, "; all: ", all, ")");
    out.emit(best_);
  }

 private:
  NodeContext* ctx_ = nullptr;
  std::string field_, name_field_;
  bool maximize_ = false;
  RecordPtr best_;
  double best_value_ = 0;
  std::int64_t best_index_ = -1;
  std::vector<double> values_;  // every candidate's value, in arrival order
};

}  // namespace

NodeType keep_best_type() {
  return NodeTypeBuilder("core.keep_best")
      .doc("At end of stream, passes on the one record whose numeric scalar `field` is smallest (or largest) of all "
           "it received; NaN never wins. Restarts: fan N trainings' snapshots in and keep the lowest loss.")
      .param(Param::string("field").default_value("loss").doc("the numeric field compared (one value per record)"))
      .param(Param::choice("mode", {"min", "max"}).default_value("min").doc("keep the smallest or the largest value"))
      .param(Param::string("name_field").default_value("source").doc(
          "a field naming each candidate: in the log line, and exact ties go to the name that sorts first"))
      .input("in", "*", "the candidates (several edges may feed it)")
      .output("out", "*", "the best candidate, once, at end of stream")
      .forward("in", "out")
      .example("best: {type: core.keep_best, params: {field: loss, mode: min}}")
      .create<KeepBest>();
}

}  // namespace embedflow::core
