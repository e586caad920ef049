#include "embedflow/testing/node_runner.hpp"

#include <deque>
#include <stdexcept>

#include "embedflow/node_check.hpp"
#include "embedflow/suggest.hpp"
#include "embedflow/testing/capture.hpp"
#include "embedflow/yaml.hpp"

namespace embedflow::testing {

struct NodeRunner::State final : NodeContext {
  const Registry& reg;
  const NodeType* type = nullptr;
  Options options;
  Value written;
  Params validated;
  std::uint64_t node_seed = 0;
  Rng generator;
  std::vector<Diagnostic> found;
  std::vector<PortSchema> inputs, outputs;
  std::vector<bool> connected;

  std::unique_ptr<Node> node;
  bool opened = false, closed = false, exhausted = false, stop = false;
  std::vector<RecordPtr> side_values;
  int sides_missing = 0;
  std::deque<std::pair<std::size_t, RecordPtr>> pending;  // stream records waiting for side values
  std::vector<std::uint64_t> received;                    // per input port; [0] shared when gated
  bool gated = false;
  std::uint64_t produced = 0, expected = 0;
  std::vector<std::vector<RecordPtr>> emitted;
  std::vector<std::vector<std::uint64_t>> emitted_seq;
  std::string log_text, out_text;

  State(const Registry& r, Options o) : reg(r), options(std::move(o)) {}

  // --- NodeContext ---------------------------------------------------------------------------
  const std::string& id() const override { return options.id; }
  const Params& params() const override { return validated; }
  std::uint64_t seed() const override { return node_seed; }
  Rng& rng() override { return generator; }
  RecordPtr side(std::size_t port) const override { return port < side_values.size() ? side_values[port] : nullptr; }
  const PortSchema& input_schema(std::size_t port) const override { return inputs.at(port); }
  const PortSchema& output_schema(std::size_t port) const override { return outputs.at(port); }
  bool input_connected(std::size_t port) const override { return connected.at(port); }
  bool output_connected(std::size_t port) const override { return port < outputs.size(); }
  int threads() const override { return options.threads; }
  bool stop_requested() const override { return stop; }
  void set_expected_items(std::uint64_t n) override { expected += n; }
  const std::string& graph_file() const override { return options.graph_file; }
  const Registry& registry() const override { return reg; }
  std::unique_ptr<Component> make_component(const std::string& param) const override {
    if (!validated.has(param)) return nullptr;
    return reg.instantiate(validated.value(param), derive_seed(node_seed, param),
                           cat("node '", options.id, "' param '", param, "'"));
  }

  class Emit final : public Emitter {
   public:
    Emit(State& s, std::uint64_t seq, bool counting) : s_(s), seq_(seq), counting_(counting) {}
    void emit(std::size_t port, RecordPtr record) override {
      if (port >= s_.emitted.size())
        throw Error(cat("emitted on output ", port, " but ", s_.type->name, " has ", s_.emitted.size(), " outputs"));
      if (!record) throw Error("emitted a null record");
      s_.emitted[port].push_back(std::move(record));
      s_.emitted_seq[port].push_back(seq_);
      if (counting_) ++seq_;  // a source: each record it emits is the next in its stream
    }
    std::uint64_t sequence() const override { return seq_; }

   private:
    State& s_;
    std::uint64_t seq_;
    bool counting_;
  };

  std::size_t input_port(const std::string& name) const {
    int i = type->input_index(name);
    if (i < 0) throw std::invalid_argument(cat(type->name, " has no input port '", name, "'"));
    return static_cast<std::size_t>(i);
  }
  std::size_t output_port(const std::string& name) const {
    int o = type->output_index(name);
    if (o < 0) throw std::invalid_argument(cat(type->name, " has no output port '", name, "'"));
    return static_cast<std::size_t>(o);
  }

  void process(std::size_t port, const RecordPtr& record) {
    std::uint64_t& count = received[gated ? 0 : port];
    Emit out(*this, count++, false);
    node->process(port, record, out);
  }
};

namespace {

// Captures the log and std::cout around one call into the node.
class CallCapture {
 public:
  CallCapture(std::string& log, std::string& out) : log_(log), out_(out) {}
  ~CallCapture() {
    log_ += log_capture_.text();
    out_ += cout_capture_.text();
  }

 private:
  std::string& log_;
  std::string& out_;
  LogCapture log_capture_;
  CoutCapture cout_capture_;
};

Value parse_params(const std::string& type, const std::string& yaml) {
  if (yaml.find_first_not_of(" \t\r\n") == std::string::npos) return Value();
  return parse_yaml(yaml, type + " params");
}

}  // namespace

NodeRunner::NodeRunner(const Registry& registry, const std::string& type_name, const Value& given, Options options)
    : s_(std::make_unique<State>(registry, std::move(options))) {
  State& s = *s_;
  s.type = registry.node_type(type_name);
  if (!s.type) {
    throw ConfigError(cat("unknown node type '", type_name, "'", did_you_mean(type_name, registry.node_type_names())));
  }
  const NodeType& t = *s.type;
  for (const auto& [port, schema] : s.options.inputs)
    if (t.input_index(port) < 0) throw ConfigError(cat("Options::inputs: ", t.name, " has no input port '", port, "'"));
  s.written = given;
  s.node_seed = derive_seed(s.options.graph_seed, s.options.id);
  s.generator.seed(s.node_seed);
  validate_params(t.params, s.written, &registry, s.validated, s.found, s.options.id);

  // Schemas as resolve() computes them for a node whose producers guarantee what Options says.
  const auto param_ints = s.validated.integer_values();
  DimBindings bindings;
  for (std::size_t p = 0; p < t.inputs.size(); ++p) {
    const PortSpec& port = t.inputs[p];
    PortSchema required = substitute(port.schema, param_ints, {});
    s.inputs.push_back(required);
    auto given_schema = s.options.inputs.find(port.name);
    s.connected.push_back(given_schema != s.options.inputs.end() || !port.optional);
    if (given_schema == s.options.inputs.end()) continue;
    PortSchema produced = PortSchema::parse(given_schema->second.empty() ? "*" : given_schema->second);
    std::vector<std::string> mismatches;
    unify(produced, required, bindings, mismatches);
    for (const auto& m : mismatches) {
      Diagnostic d;
      d.node = s.options.id;
      d.message = cat("input '", port.name, "': ", m);
      s.found.push_back(std::move(d));
    }
    if (!produced.is_any()) s.inputs.back() = produced;
  }
  for (const auto& port : t.outputs) s.outputs.push_back(substitute(port.schema, param_ints, bindings));

  CheckedNode checked;
  checked.type = &t;
  checked.id = s.options.id;
  checked.params = &s.validated;
  checked.written = &s.written;
  checked.inputs = s.inputs;
  checked.outputs = std::move(s.outputs);
  checked.input_connected = s.connected;
  checked.output_connected.assign(t.outputs.size(), true);
  run_check_hook(checked, registry, s.found);
  s.outputs = std::move(checked.outputs);

  s.side_values.resize(t.inputs.size());
  s.received.resize(t.inputs.size());
  s.emitted.resize(t.outputs.size());
  s.emitted_seq.resize(t.outputs.size());
  std::size_t stream_ports = 0;
  for (std::size_t p = 0; p < t.inputs.size(); ++p) {
    const PortSpec& port = t.inputs[p];
    if (port.side && !port.optional && s.connected[p]) ++s.sides_missing;
    if (!port.side && s.connected[p]) ++stream_ports;
  }
  s.gated = t.concurrency == Concurrency::parallel && stream_ports > 1;
}

NodeRunner::NodeRunner(const Registry& registry, const std::string& type, const std::string& yaml_params, Options options)
    : NodeRunner(registry, type, parse_params(type, yaml_params), std::move(options)) {}

NodeRunner::~NodeRunner() = default;

const std::vector<Diagnostic>& NodeRunner::problems() const { return s_->found; }

std::string NodeRunner::problem_text() const {
  std::string text;
  for (const auto& d : s_->found) text += d.str() + "\n";
  return text;
}

const NodeType& NodeRunner::type() const { return *s_->type; }
const Params& NodeRunner::params() const { return s_->validated; }
std::uint64_t NodeRunner::seed() const { return s_->node_seed; }
const PortSchema& NodeRunner::input_schema(const std::string& port) const { return s_->inputs[s_->input_port(port)]; }
const PortSchema& NodeRunner::output_schema(const std::string& port) const { return s_->outputs[s_->output_port(port)]; }

void NodeRunner::open() {
  State& s = *s_;
  if (s.opened) return;
  if (!s.found.empty())
    throw ConfigError(cat(s.type->name, " node '", s.options.id, "' does not validate:\n", problem_text()));
  s.opened = true;
  s.node = s.type->create();
  CallCapture capture(s.log_text, s.out_text);
  s.node->open(s);
}

void NodeRunner::push(const std::string& port_name, RecordPtr record) {
  State& s = *s_;
  if (s.closed) throw std::logic_error("NodeRunner::push after close()");
  if (!record) throw std::invalid_argument("NodeRunner::push: null record");
  const std::size_t port = s.input_port(port_name);
  if (!s.connected[port])
    throw std::logic_error(cat("input '", port_name, "' is optional and not connected: list it in Options::inputs"));
  open();
  CallCapture capture(s.log_text, s.out_text);
  if (!s.type->inputs[port].side) {
    if (s.sides_missing > 0) s.pending.emplace_back(port, std::move(record));
    else s.process(port, record);
    return;
  }
  const bool first = !s.side_values[port];
  s.side_values[port] = record;
  if (first && !s.type->inputs[port].optional) --s.sides_missing;
  {
    State::Emit out(s, s.received[port]++, false);
    s.node->on_side(port, record, out);
  }
  // Stream records that waited for the side values run now, in arrival order.
  if (s.sides_missing == 0)
    while (!s.pending.empty()) {
      auto [p, r] = std::move(s.pending.front());
      s.pending.pop_front();
      s.process(p, r);
    }
}

bool NodeRunner::produce() {
  State& s = *s_;
  if (!s.type->source) throw std::logic_error(cat(s.type->name, " is not a source: push records instead"));
  if (s.closed) throw std::logic_error("NodeRunner::produce after close()");
  if (s.exhausted) return false;
  open();
  if (s.sides_missing > 0) throw std::logic_error("the source waits for its side inputs: push a value on each first");
  CallCapture capture(s.log_text, s.out_text);
  State::Emit out(s, s.produced, true);
  const bool more = s.node->produce(out);
  s.produced = out.sequence();
  if (!more) s.exhausted = true;
  return more;
}

void NodeRunner::close() {
  State& s = *s_;
  if (s.closed) throw std::logic_error("NodeRunner::close called twice");
  open();
  s.closed = true;
  if (s.sides_missing > 0)
    for (std::size_t p = 0; p < s.type->inputs.size(); ++p) {
      const PortSpec& port = s.type->inputs[p];
      if (port.side && !port.optional && s.connected[p] && !s.side_values[p])
        throw Error(cat("side input '", port.name, "' ended without a value",
                        s.pending.empty() ? "" : cat("; ", s.pending.size(), " records waited for it")));
    }
  CallCapture capture(s.log_text, s.out_text);
  State::Emit out(s, 0, false);
  s.node->close(out);
}

void NodeRunner::run(const std::string& port, const std::vector<RecordPtr>& records) {
  open();
  for (const auto& r : records) push(port, r);
  close();
}

void NodeRunner::run_source() {
  while (!s_->stop && produce()) {
  }
  close();
}

void NodeRunner::request_stop() { s_->stop = true; }

const std::vector<RecordPtr>& NodeRunner::outputs(const std::string& port) const { return s_->emitted[s_->output_port(port)]; }

const std::vector<std::uint64_t>& NodeRunner::sequences(const std::string& port) const {
  return s_->emitted_seq[s_->output_port(port)];
}

void NodeRunner::clear_outputs() {
  for (auto& v : s_->emitted) v.clear();
  for (auto& v : s_->emitted_seq) v.clear();
}

std::uint64_t NodeRunner::expected_items() const { return s_->expected; }
std::string NodeRunner::log() const { return s_->log_text; }
std::string NodeRunner::out() const { return s_->out_text; }

std::vector<std::string> format_records(const std::vector<RecordPtr>& records) {
  std::vector<std::string> lines;
  lines.reserve(records.size());
  for (const auto& r : records) lines.push_back(format_record(*r));
  return lines;
}

}  // namespace embedflow::testing
