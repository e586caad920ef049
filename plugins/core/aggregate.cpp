// core.aggregate — reduces one numeric field over the whole stream with an aggregate component
// chosen in YAML (core.sum, core.mean, core.max, core.quantile), emitting one record at end of
// stream: {<field>: f64[], count: i64[]}. It shows the component mechanism: swapping the
// reduction is a one-line edit of `op`.
//
// Inputs: in {<field>: numeric}   Outputs: out {<field>: f64[], count: i64[]}
//
// Example graph: `embedflow inspect core.aggregate`.
#include <algorithm>
#include <cmath>
#include <limits>

#include "core_types.hpp"

namespace embedflow::core {
namespace {

// Interface of components of kind "aggregate".
class Aggregate : public Component {
 public:
  virtual void add(double x) = 0;
  virtual double result() const = 0;
};

class Sum final : public Aggregate {
 public:
  explicit Sum(const ComponentContext&) {}
  void add(double x) override { total_ += x; }
  double result() const override { return total_; }

 private:
  double total_ = 0;
};

class Mean final : public Aggregate {
 public:
  explicit Mean(const ComponentContext&) {}
  void add(double x) override {
    ++n_;
    mean_ += (x - mean_) / static_cast<double>(n_);  // Welford: stable for long streams
  }
  double result() const override { return n_ ? mean_ : std::numeric_limits<double>::quiet_NaN(); }

 private:
  double mean_ = 0;
  std::int64_t n_ = 0;
};

class Max final : public Aggregate {
 public:
  explicit Max(const ComponentContext&) {}
  void add(double x) override { best_ = std::max(best_, x); }
  double result() const override { return best_; }

 private:
  double best_ = -std::numeric_limits<double>::infinity();
};

class Quantile final : public Aggregate {
 public:
  explicit Quantile(const ComponentContext& ctx) : q_(ctx.params().number("q")) {}
  void add(double x) override { values_.push_back(x); }
  double result() const override {
    if (values_.empty()) return std::numeric_limits<double>::quiet_NaN();
    std::vector<double> v = values_;
    std::sort(v.begin(), v.end());
    // Linear interpolation between closest ranks (numpy's default).
    double pos = q_ * static_cast<double>(v.size() - 1);
    auto lo = static_cast<std::size_t>(std::floor(pos));
    std::size_t hi = std::min(lo + 1, v.size() - 1);
    return v[lo] + (pos - static_cast<double>(lo)) * (v[hi] - v[lo]);
  }

 private:
  double q_;
  std::vector<double> values_;
};

class AggregateNode final : public Node {
 public:
  void open(NodeContext& ctx) override {
    field_ = ctx.params().string("field");
    op_ = ctx.component<Aggregate>("op");
  }
  void process(std::size_t, const RecordPtr& in, Emitter&) override {
    const Array& a = in->get(field_);
    for (std::int64_t i = 0; i < a.numel(); ++i) op_->add(a.as_double(i));
    count_ += a.numel();
  }
  void close(Emitter& out) override {
    Record r;
    r.set(field_, Array::scalar<double>(op_->result()));
    r.set("count", Array::scalar<std::int64_t>(count_));
    out.emit(std::move(r));
  }

 private:
  std::string field_;
  std::unique_ptr<Aggregate> op_;
  std::int64_t count_ = 0;
};

}  // namespace

NodeType aggregate_type() {
  return NodeTypeBuilder("core.aggregate")
      .doc("Reduces a numeric field over the stream with an aggregate component; one record at end.")
      .example(R"(nodes:
  numbers: {type: core.range, params: {count: 101}}
  median:  {type: core.aggregate, params: {field: value, op: {type: core.quantile, q: 0.5}}}
  show:    {type: core.sink, params: {mode: print}}
edges: [numbers.out -> median.in, median.out -> show.in]
)")
      .param(Param::string("field").default_value("value").doc("numeric field to reduce (all elements)"))
      .param(Param::component("op", "aggregate").default_value(Value::map({{"type", Value::string("core.sum")}}))
                 .doc("the reduction: core.sum, core.mean, core.max, core.quantile"))
      .input("in", "*")
      .output("out", "*")
      .check([](SchemaContext& c) {
        const std::string& f = c.params().string("field");
        PortSchema out;
        out.add(FieldSchema{f, DType::f64, std::vector<Dim>{}});
        out.add(FieldSchema{"count", DType::i64, std::vector<Dim>{}});
        c.set_output("out", out);
      })
      .create<AggregateNode>();
}

std::vector<ComponentType> aggregate_components() {
  return {
      ComponentTypeBuilder("core.sum", "aggregate").doc("Sum of all values.").create<Sum>(),
      ComponentTypeBuilder("core.mean", "aggregate").doc("Arithmetic mean (Welford).").create<Mean>(),
      ComponentTypeBuilder("core.max", "aggregate").doc("Largest value.").create<Max>(),
      ComponentTypeBuilder("core.quantile", "aggregate")
          .doc("The q-quantile, linearly interpolated (numpy's default).")
          .param(Param::number("q").range(0.0, 1.0).doc("quantile in [0, 1]"))
          .create<Quantile>(),
  };
}

}  // namespace embedflow::core
