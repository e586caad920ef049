// Nodes: the stages of a graph. A node type declares, in one place, its name, doc, parameters,
// ports with schemas and concurrency; its body implements open / process / close, or produce
// for a source. The engine calls them from oneTBB tasks:
//   open(ctx)                     once, before any record (serially, in topological order)
//   produce(out)                  sources: called until it returns false (end of stream)
//   process(port, record, out)    per input record; concurrently for parallel nodes
//   on_side(port, record, out)    when a side port receives a new latest value
//   close(out)                    once, after every input reached end of stream: flush here
// Exceptions thrown from any of these cancel the graph; the engine reports them with the node id
// and where the node is declared in the graph file.
#pragma once

#include <cstddef>
#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "embedflow/component.hpp"
#include "embedflow/params.hpp"
#include "embedflow/record.hpp"
#include "embedflow/rng.hpp"
#include "embedflow/schema.hpp"

namespace embedflow {

// Where a node sends its output records.
class Emitter {
 public:
  virtual ~Emitter() = default;
  virtual void emit(std::size_t port, RecordPtr record) = 0;
  void emit(RecordPtr record) { emit(0, std::move(record)); }
  void emit(std::size_t port, Record record) { emit(port, share(std::move(record))); }
  void emit(Record record) { emit(0, share(std::move(record))); }
  // Sequence number of the record being processed on its input edge (sources: of the record
  // about to be produced). Deterministic for a given graph and seed: parallel nodes derive
  // per-record seeds from it.
  virtual std::uint64_t sequence() const = 0;
};

// What a node sees of the running graph.
class NodeContext {
 public:
  virtual ~NodeContext() = default;
  virtual const std::string& id() const = 0;
  virtual const Params& params() const = 0;
  // Seed derived from (graph seed, node id).
  virtual std::uint64_t seed() const = 0;
  // Generator seeded with seed(); for serial use only (parallel nodes seed per record).
  virtual Rng& rng() = 0;
  // Latest value received on a side input port; null until one arrives.
  virtual RecordPtr side(std::size_t port) const = 0;
  // Schemas resolved at graph load (after unification and inference).
  virtual const PortSchema& input_schema(std::size_t port) const = 0;
  virtual const PortSchema& output_schema(std::size_t port) const = 0;
  virtual bool input_connected(std::size_t port) const = 0;
  virtual bool output_connected(std::size_t port) const = 0;
  // Worker threads the graph runs with (--threads); nodes that use their own pools
  // (LibTorch intra-op, OpenCV) size them from this.
  virtual int threads() const = 0;
  // True once SIGINT arrived: long loops inside open/close should return early.
  virtual bool stop_requested() const = 0;
  // Sources that know how many records they will produce say so, for the progress ETA.
  virtual void set_expected_items(std::uint64_t n) = 0;
  // The graph file, for messages and for resolving paths relative to it where a node wants to.
  virtual const std::string& graph_file() const = 0;
  // The registry of the loaded plugins: nodes build components from specs they hold or receive
  // (a model snapshot's spec) with build_component (registry.hpp), and resolve their contracts.
  virtual const Registry& registry() const = 0;
  // Instantiates the component given in a `component` parameter.
  virtual std::unique_ptr<Component> make_component(const std::string& param) const = 0;
  // Says this node wants no more stream records (a trainer past max_steps, a limit past its
  // count). Records still on their way to it are dropped unprocessed and its close() runs when
  // its inputs end, as usual; side inputs are still delivered. Upstream, a node whose every
  // stream consumer is done stops too — a source produces no more, a node in between drops its
  // inputs — and their output counts as cut short: their stage caches are not written. As in
  // GStreamer and MediaPipe, work nobody will read is not done.
  virtual void done_consuming() {}
  // False once every stream consumer of this node's outputs is done consuming (true while any
  // is live, and for a node with no outputs connected): a node that emits from one long call,
  // such as core.epochs's close(), checks it to stop early.
  virtual bool output_wanted() const { return true; }
  template <class T>
  std::unique_ptr<T> component(const std::string& param) const {
    return component_cast<T>(make_component(param), cat("node '", id(), "': component '", param, "'"));
  }
};

class Node {
 public:
  virtual ~Node() = default;
  virtual void open(NodeContext& ctx) { (void)ctx; }
  // Sources only: emit zero or more records; return false once exhausted.
  virtual bool produce(Emitter& out) { (void)out; return false; }
  virtual void process(std::size_t port, const RecordPtr& record, Emitter& out) {
    (void)port; (void)record; (void)out;
  }
  virtual void on_side(std::size_t port, const RecordPtr& record, Emitter& out) {
    (void)port; (void)record; (void)out;
  }
  virtual void close(Emitter& out) { (void)out; }
};

// What a node type's check hook sees at graph load: resolved params and the schemas arriving on
// its inputs. It reports cross-field problems and sets output schemas that depend on inputs or
// params (e.g. a batcher adds a leading dim; a reader opens its file to learn its fields).
class SchemaContext {
 public:
  virtual ~SchemaContext() = default;
  virtual const std::string& node_id() const = 0;
  virtual const Params& params() const = 0;
  virtual const PortSchema& input(const std::string& port) const = 0;  // any when unknown
  virtual bool connected(const std::string& port) const = 0;
  virtual const PortSchema& output(const std::string& port) const = 0;
  virtual void set_output(const std::string& port, PortSchema schema) = 0;
  // A validation problem; `param` (optional) points the location at that parameter's value.
  virtual void error(const std::string& message, const std::string& param = "") = 0;
  // The contract of the component in parameter `param` fed `inputs` (component.hpp); what it
  // consumes that the inputs lack, and its own check's findings, are reported as errors at the
  // parameter. An unset parameter gives an empty contract (produces any).
  virtual ComponentContract component(const std::string& param, const ContractInputs& inputs) = 0;
  // The same for a spec the node holds itself (`what` names it in messages).
  virtual ComponentContract component_spec(const Value& spec, const ContractInputs& inputs, const std::string& what,
                                           const std::string& param = "") = 0;
};

enum class Concurrency { serial, parallel };

struct PortSpec {
  std::string name;
  std::string doc;
  std::string schema_text;  // as declared, for inspect
  PortSchema schema;
  bool side = false;        // latched latest value instead of a stream
  bool optional = false;    // may be left unconnected
};

struct NodeType {
  std::string name;  // "family.name"
  std::string doc;
  std::string example;  // a YAML snippet that runs as pasted
  std::vector<ParamSpec> params;
  std::vector<PortSpec> inputs, outputs;
  Concurrency concurrency = Concurrency::serial;
  bool source = false;
  // Output depends only on parameters and inputs, never on the node's seed: the stage cache then
  // keys it without the seed, so runs that differ only in seed (a sweep's seeds) share its entry.
  bool deterministic = false;
  // A boolean parameter that, when true, makes a deterministic node draw random numbers after
  // all (a reader's `shuffle`); empty: none.
  std::string random_when;
  std::function<void(SchemaContext&)> check;
  std::function<std::unique_ptr<Node>()> create;
  std::string plugin, plugin_file, plugin_version;  // filled in by the registry

  int input_index(const std::string& port) const;   // -1 when absent
  int output_index(const std::string& port) const;
};

// Chained declaration, read by the engine, `inspect` and the schema dump alike.
class NodeTypeBuilder {
 public:
  explicit NodeTypeBuilder(std::string name) { type_.name = std::move(name); }
  NodeTypeBuilder& doc(std::string d) { type_.doc = std::move(d); return *this; }
  NodeTypeBuilder& example(std::string yaml) { type_.example = std::move(yaml); return *this; }
  NodeTypeBuilder& param(ParamSpec p) { type_.params.push_back(std::move(p)); return *this; }
  NodeTypeBuilder& input(std::string name, std::string schema, std::string doc = "");
  NodeTypeBuilder& optional_input(std::string name, std::string schema, std::string doc = "");
  NodeTypeBuilder& side_input(std::string name, std::string schema, std::string doc = "", bool optional = false);
  NodeTypeBuilder& output(std::string name, std::string schema, std::string doc = "");
  NodeTypeBuilder& parallel() { type_.concurrency = Concurrency::parallel; return *this; }
  NodeTypeBuilder& source() { type_.source = true; return *this; }
  // The node draws no random numbers (see NodeType::deterministic), unless the boolean
  // parameter `random_when` is true.
  NodeTypeBuilder& deterministic(std::string random_when = "") {
    type_.deterministic = true;
    type_.random_when = std::move(random_when);
    return *this;
  }
  // Runs at graph load; hooks accumulate in declaration order.
  NodeTypeBuilder& check(std::function<void(SchemaContext&)> hook);
  // Output `to` carries the schema arriving on input `from` (pass-through nodes).
  NodeTypeBuilder& forward(const std::string& from, const std::string& to);
  template <class T>
  NodeType create() {
    type_.create = [] { return std::unique_ptr<Node>(new T()); };
    return type_;
  }

 private:
  NodeType type_;
};

}  // namespace embedflow
