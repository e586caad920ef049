// _embedflow: the compiled half of the `embedflow` Python package (embedflow/__init__.py is the
// API; this file is what it calls). Everything that runs a graph goes through the runs
// library's session functions, the same code path as `embedflow run`.
//
// Threads and the GIL: a graph always runs on a thread of its own (its oneTBB workers do the
// work); the Python thread that started it waits with the GIL released, waking every 100 ms to
// let Ctrl-C through (PyErr_CheckSignals), which stops the graph as the CLI's SIGINT does. A
// py.map node in the graph takes the GIL on the worker that calls it.
#include <pybind11/numpy.h>
#include <pybind11/pybind11.h>
#include <pybind11/stl.h>

#include <algorithm>
#include <chrono>
#include <condition_variable>
#include <deque>
#include <mutex>
#include <sstream>
#include <thread>

#include "embedflow/log.hpp"
#include "embedflow/suggest.hpp"
#include "embedflow/version.hpp"
#include "embedflow_engine/describe.hpp"
#include "embedflow_engine/graph_file.hpp"
#include "embedflow_runs/plugins.hpp"
#include "embedflow_runs/run_record.hpp"
#include "embedflow_runs/session.hpp"
#include "embedflow_python/numpy_record.hpp"
#include "embedflow_runs/report.hpp"
#include "embedflow_runs/sweep.hpp"

namespace py = pybind11;
using namespace embedflow;
using namespace embedflow::engine;
using namespace embedflow::runs;
using embedflow::python::record_to_dict;

namespace {

constexpr auto kSignalPoll = std::chrono::milliseconds(100);

py::list problems_to_python(const std::vector<Diagnostic>& problems) {
  py::list out;
  for (const auto& d : problems) {
    py::dict p;
    p["file"] = d.where.file.empty() ? py::object(py::none()) : py::object(py::str(d.where.file));
    p["line"] = d.where.line > 0 ? py::object(py::int_(d.where.line)) : py::object(py::none());
    p["column"] = d.where.column > 0 ? py::object(py::int_(d.where.column)) : py::object(py::none());
    p["node"] = d.node.empty() ? py::object(py::none()) : py::object(py::str(d.node));
    p["message"] = d.message;
    p["text"] = d.str();
    out.append(p);
  }
  return out;
}

// Raises embedflow.GraphError (defined in Python) carrying every problem.
[[noreturn]] void raise_graph_error(const std::vector<Diagnostic>& problems) {
  py::object errors = py::module_::import("embedflow._errors");
  py::object exc = errors.attr("graph_error")(problems_to_python(problems));
  PyErr_SetObject(reinterpret_cast<PyObject*>(Py_TYPE(exc.ptr())), exc.ptr());
  throw py::error_already_set();
}

// A graph's problems so far, or the one ConfigError that stopped loading it, as a GraphError.
[[noreturn]] void raise_config_error(const ConfigError& e) {
  Diagnostic d;
  d.message = e.what();
  raise_graph_error({d});
}

struct GraphArgs {
  std::string graph;
  std::vector<std::string> sets;
  std::optional<std::uint64_t> seed;
  std::vector<std::string> plugin_path;
  std::string out;  // as --out: the run record's folder, and the graph's variable `out` when it has one
};

struct Prepared {
  ResolvedGraph graph;
  std::vector<std::string> sets;  // the overrides applied, in order
  std::vector<LoadedPlugin> plugins;
  std::vector<Diagnostic> problems;
};

// Plugins, parse, overrides, resolution: what `embedflow validate` does.
Prepared prepare(const GraphArgs& a) {
  Prepared p;
  try {
    std::vector<std::string> extra = graph_plugin_dirs(a.graph);
    const LoadedPlugins& plugins = loaded_plugins(a.plugin_path, extra);
    const Registry& registry = plugins.registry;
    p.plugins = plugins.loader->plugins();
    GraphSpec spec = load_graph_file(a.graph, p.problems);
    p.sets = a.sets;
    // As `embedflow run --out`: the whole run moves, outputs under the graph's `out` included.
    if (!a.out.empty() && std::any_of(spec.vars.begin(), spec.vars.end(), [](const auto& v) { return v.first == "out"; }))
      p.sets.insert(p.sets.begin(), "out=" + a.out);
    p.graph = prepare_graph(std::move(spec), p.problems, p.sets, a.seed, registry);
  } catch (const ConfigError& e) {
    Diagnostic d;
    d.message = e.what();
    p.problems.push_back(d);
  }
  return p;
}

py::list validate(const GraphArgs& a) { return problems_to_python(prepare(a).problems); }

RunRequest make_request(const GraphArgs& a, const Prepared& p, int threads, const std::string& cache_dir,
                        bool no_cache, const std::atomic<bool>* stop) {
  RunRequest r;
  r.graph_file = a.graph;
  r.command = {"python", "embedflow", a.graph};
  for (const auto& s : a.sets) r.command.push_back("--set=" + s);
  r.overrides = p.sets;
  r.seed_override = a.seed;
  r.threads = threads;
  r.out_option = a.out;
  r.cache_dir = cache_dir;
  r.no_cache = no_cache;
  r.stop = stop;
  r.plugins = p.plugins;
  return r;
}

py::dict outcome_to_python(const RunOutcome& o) {
  py::dict d;
  d["exit_code"] = o.result.exit_code;
  d["error"] = o.result.error;
  d["record_dir"] = o.record_dir.string();
  d["seconds"] = o.result.seconds;
  d["source_records"] = o.result.source_records;
  return d;
}

// Waits for `done` with the GIL released, letting signals through: a KeyboardInterrupt (or
// any exception a signal handler raises) sets `stop`, waits for the graph to drain, and
// propagates.
template <class Done>
void wait_releasing_gil(std::mutex& m, std::condition_variable& cv, Done done, std::atomic<bool>& stop) {
  for (;;) {
    {
      py::gil_scoped_release release;
      std::unique_lock<std::mutex> lock(m);
      if (cv.wait_for(lock, kSignalPoll, done)) return;
    }
    if (PyErr_CheckSignals() != 0) {
      stop.store(true);
      {
        py::gil_scoped_release release;
        std::unique_lock<std::mutex> lock(m);
        cv.wait(lock, done);
      }
      throw py::error_already_set();
    }
  }
}

// run(): the graph to its end on a thread of its own. Returns the outcome; problems raise.
py::dict run(const GraphArgs& a, int threads, const std::string& cache_dir, bool no_cache, bool report) {
  Prepared p = prepare(a);
  if (!p.problems.empty()) raise_graph_error(p.problems);
  std::atomic<bool> stop{false};
  RunRequest request = make_request(a, p, threads, cache_dir, no_cache, &stop);
  std::mutex m;
  std::condition_variable cv;
  bool finished = false;
  RunOutcome outcome;
  std::exception_ptr failure;
  std::thread runner([&] {
    try {
      outcome = execute_run(p.graph, request);
      if (report) runs::write_run_report(outcome.record_dir, true);
    } catch (...) {
      failure = std::current_exception();
    }
    std::lock_guard<std::mutex> lock(m);
    finished = true;
    cv.notify_all();
  });
  try {
    wait_releasing_gil(m, cv, [&] { return finished; }, stop);
  } catch (...) {
    runner.join();
    throw;
  }
  runner.join();
  if (failure) {
    try {
      std::rethrow_exception(failure);
    } catch (const ConfigError& e) {
      raise_config_error(e);
    }
  }
  return outcome_to_python(outcome);
}

std::string inspect_json(const std::string& type, const std::vector<std::string>& plugin_path) {
  const Registry* registry = nullptr;
  try {
    registry = &loaded_plugins(plugin_path, {}).registry;
  } catch (const ConfigError& e) {
    raise_config_error(e);
  }
  if (!type.empty() && !registry->node_type(type) && !registry->component_type(type)) {
    std::vector<std::string> names = registry->node_type_names();
    for (const auto& n : registry->component_type_names()) names.push_back(n);
    throw py::key_error(cat("no node or component type '", type, "'", did_you_mean(type, names)));
  }
  std::ostringstream out;
  write_schema_json(out, *registry, type);
  return out.str();
}

// --- DLPack: torch tensors over a record's buffers ------------------------------------------
// The DLPack ABI (dlpack.h, v0.x), declared here because the module does not include LibTorch.
struct DLDevice { std::int32_t device_type, device_id; };
struct DLDataType { std::uint8_t code, bits; std::uint16_t lanes; };
struct DLTensor {
  void* data;
  DLDevice device;
  std::int32_t ndim;
  DLDataType dtype;
  std::int64_t* shape;
  std::int64_t* strides;
  std::uint64_t byte_offset;
};
struct DLManagedTensor {
  DLTensor dl_tensor;
  void* manager_ctx;
  void (*deleter)(DLManagedTensor*);
};
constexpr std::int32_t kDLCPU = 1;
constexpr std::uint8_t kDLInt = 0, kDLUInt = 1, kDLFloat = 2;

// What a DLPack tensor owns: a reference to the record (no Python object, so the consumer may
// free it on any thread without the GIL) and its shape.
struct DLPackOwner {
  RecordPtr record;
  std::vector<std::int64_t> shape;
  DLManagedTensor managed;
};

// A "dltensor" capsule over one numeric field; torch.utils.dlpack.from_dlpack consumes it.
py::capsule field_dlpack(const RecordPtr& record, const Array& a) {
  auto owner = std::make_unique<DLPackOwner>();
  owner->record = record;
  owner->shape.assign(a.shape().begin(), a.shape().end());
  DLTensor& t = owner->managed.dl_tensor;
  t.data = const_cast<void*>(a.raw());
  t.device = {kDLCPU, 0};
  t.ndim = static_cast<std::int32_t>(owner->shape.size());
  switch (a.dtype()) {
    case DType::u8: t.dtype = {kDLUInt, 8, 1}; break;
    case DType::boolean: t.dtype = {kDLUInt, 8, 1}; break;  // torch 1.13 takes no DLPack bool
    case DType::i32: t.dtype = {kDLInt, 32, 1}; break;
    case DType::i64: t.dtype = {kDLInt, 64, 1}; break;
    case DType::f32: t.dtype = {kDLFloat, 32, 1}; break;
    case DType::f64: t.dtype = {kDLFloat, 64, 1}; break;
    case DType::string: throw Error("field_dlpack: a string column");
  }
  t.shape = owner->shape.data();
  t.strides = nullptr;  // compact row-major
  t.byte_offset = 0;
  owner->managed.manager_ctx = owner.get();
  owner->managed.deleter = [](DLManagedTensor* self) { delete static_cast<DLPackOwner*>(self->manager_ctx); };
  DLManagedTensor* managed = &owner.release()->managed;
  // The protocol: a consumer renames the capsule "used_dltensor" and calls the deleter itself;
  // a capsule never consumed frees the tensor here.
  return py::capsule(managed, "dltensor", [](PyObject* capsule) {
    if (PyCapsule_IsValid(capsule, "dltensor")) {
      auto* m = static_cast<DLManagedTensor*>(PyCapsule_GetPointer(capsule, "dltensor"));
      m->deleter(m);
    } else {
      PyErr_Clear();
    }
  });
}

py::dict record_to_torch(const RecordPtr& record) {
  // Held for the life of the process (a static py::object would be released after the
  // interpreter has finalized).
  static py::handle from_dlpack = py::object(py::module_::import("torch.utils.dlpack").attr("from_dlpack")).release();
  py::dict out;
  py::object owner;  // strings only
  for (const auto& [name, array] : record->fields()) {
    if (array.is_string()) {
      if (!owner) owner = python::record_owner(record);
      out[py::str(name)] = python::array_to_python(array, owner);
    } else {
      py::object tensor = from_dlpack(field_dlpack(record, array));
      if (array.dtype() == DType::boolean) tensor = tensor.attr("bool")();  // a copy: bool has no DLPack code here
      out[py::str(name)] = tensor;
    }
  }
  return out;
}

// --- stream(): one port's records, in order, through a bounded queue ------------------------

// The tap on the streamed node. The engine calls it serially, on a worker; a full queue blocks
// that worker, and the message it is handling keeps counting against its sources, so a consumer
// that stops reading stops the sources at their in_flight cap. Once the consumer has gone, records are
// dropped so the graph drains.
class StreamQueue final : public OutputTap {
 public:
  StreamQueue(std::size_t port, std::size_t capacity) : port_(port), capacity_(capacity) {}
  void on_record(std::size_t port, const RecordPtr& record) override {
    if (port != port_) return;
    std::unique_lock<std::mutex> lock(mutex);
    not_full_.wait(lock, [&] { return queue_.size() < capacity_ || abandoned_; });
    if (abandoned_) return;
    queue_.push_back(record);
    changed.notify_all();
  }
  void on_finish(bool) override {}
  // The graph thread has ended.
  void finish(RunOutcome outcome, std::exception_ptr failure) {
    std::lock_guard<std::mutex> lock(mutex);
    outcome_ = std::move(outcome);
    failure_ = failure;
    finished_ = true;
    changed.notify_all();
  }
  void abandon() {
    std::lock_guard<std::mutex> lock(mutex);
    abandoned_ = true;
    queue_.clear();
    not_full_.notify_all();
  }
  bool ready() const { return !queue_.empty() || finished_; }  // call with the mutex held
  RecordPtr pop() {  // call with the mutex held; null at the end
    if (queue_.empty()) return nullptr;
    RecordPtr r = std::move(queue_.front());
    queue_.pop_front();
    not_full_.notify_all();
    return r;
  }
  bool finished() const { return finished_; }
  const RunOutcome& outcome() const { return outcome_; }
  std::exception_ptr failure() const { return failure_; }
  std::size_t size() const { return queue_.size(); }

  std::mutex mutex;
  std::condition_variable changed;

 private:
  std::size_t port_, capacity_;
  std::condition_variable not_full_;
  std::deque<RecordPtr> queue_;
  bool abandoned_ = false, finished_ = false;
  RunOutcome outcome_;
  std::exception_ptr failure_;
};

class Stream {
 public:
  Stream(const GraphArgs& a, const std::string& output, std::size_t capacity, bool as_torch, int threads,
         const std::string& cache_dir, bool no_cache)
      : as_torch_(as_torch) {
    if (capacity == 0) throw py::value_error("capacity must be at least 1");
    prepared_ = std::make_unique<Prepared>(prepare(a));
    if (!prepared_->problems.empty()) raise_graph_error(prepared_->problems);
    const ResolvedGraph& g = prepared_->graph;
    const std::size_t dot = output.find('.');
    const std::string node = output.substr(0, dot), port = dot == std::string::npos ? "" : output.substr(dot + 1);
    std::size_t index = 0;
    while (index < g.nodes.size() && g.nodes[index].id() != node) ++index;
    auto problem = [&](const std::string& message, const SourceLocation& where, const std::string& node_id) {
      Diagnostic d;
      d.where = where;
      d.node = node_id;
      d.message = message;
      raise_graph_error({d});
    };
    if (index == g.nodes.size()) {
      std::vector<std::string> ids;
      for (const auto& n : g.nodes) ids.push_back(n.id());
      problem(cat("stream(\"", output, "\"): the graph has no node '", node, "'", did_you_mean(node, ids)),
              SourceLocation{a.graph, 0, 0}, "");
    }
    const ResolvedNode& rn = g.nodes[index];
    std::vector<std::string> names;
    for (const auto& o : rn.type->outputs) names.push_back(o.name);
    int port_index = port.empty() && names.size() == 1 ? 0 : rn.type->output_index(port);
    if (port_index < 0) {
      std::string list;
      for (const auto& n : names) list += (list.empty() ? "" : ", ") + n;
      problem(cat("stream(\"", output, "\"): ", rn.type->name, " has no output '", port, "' (outputs: ",
                  list.empty() ? "none" : list, ")"),
              rn.spec->where, node);
    }
    port_name_ = node + "." + names[port_index];
    queue_ = std::make_shared<StreamQueue>(static_cast<std::size_t>(port_index), capacity);
    RunRequest request = make_request(a, *prepared_, threads, cache_dir, no_cache, &stop_);
    request.taps[index] = queue_;
    runner_ = std::thread([this, request = std::move(request)] {
      RunOutcome outcome;
      std::exception_ptr failure;
      try {
        outcome = execute_run(prepared_->graph, request);
      } catch (...) {
        failure = std::current_exception();
      }
      queue_->finish(std::move(outcome), failure);
    });
  }
  ~Stream() {
    try {
      close();
    } catch (...) {
    }
  }

  // The next record as a dict; StopIteration at the end; the run's failure as NodeError.
  py::dict next() {
    if (closed_) throw py::stop_iteration();
    RecordPtr record;
    try {
      wait_releasing_gil(queue_->mutex, queue_->changed, [&] { return queue_->ready(); }, stop_);
    } catch (...) {
      close();
      throw;
    }
    {
      std::lock_guard<std::mutex> lock(queue_->mutex);
      record = queue_->pop();
    }
    if (!record) {
      close();
      raise_failure();
      throw py::stop_iteration();
    }
    ++delivered_;
    return as_torch_ ? record_to_torch(record) : record_to_dict(record);
  }

  // Stops the graph (when it is still running), waits for it to drain, and ends the iteration.
  void close() {
    if (closed_) return;
    closed_ = true;
    if (!queue_) return;
    {
      std::lock_guard<std::mutex> lock(queue_->mutex);
      if (!queue_->finished()) stop_.store(true);
    }
    queue_->abandon();
    if (runner_.joinable()) {
      py::gil_scoped_release release;
      runner_.join();
    }
  }

  py::object result() const {
    if (!queue_ || !queue_->finished()) return py::none();
    return outcome_to_python(queue_->outcome());
  }
  const std::string& port() const { return port_name_; }
  std::uint64_t delivered() const { return delivered_; }
  bool stopped() const { return stop_.load(); }

 private:
  // A run that failed (a node threw, or the cache or output folder could not be used) raises
  // once its records before the failure have been delivered.
  void raise_failure() {
    if (auto f = queue_->failure()) {
      try {
        std::rethrow_exception(f);
      } catch (const ConfigError& e) {
        raise_config_error(e);
      }
    }
    const RunResult& r = queue_->outcome().result;
    if (r.exit_code != 0 && r.exit_code != 130) {
      py::object exc = py::module_::import("embedflow._errors").attr("run_error")(outcome_to_python(queue_->outcome()));
      PyErr_SetObject(reinterpret_cast<PyObject*>(Py_TYPE(exc.ptr())), exc.ptr());
      throw py::error_already_set();
    }
  }

  bool as_torch_;
  std::unique_ptr<Prepared> prepared_;
  std::shared_ptr<StreamQueue> queue_;
  std::atomic<bool> stop_{false};
  std::thread runner_;
  std::string port_name_;
  bool closed_ = false;
  std::uint64_t delivered_ = 0;
};

// embedflow.sweep(): the CLI's sweep, points run by the `embedflow` executable the package names.
// Returns sweep.json as JSON text (the package parses it).
std::string sweep(const std::string& graph, const std::vector<std::string>& grid, const std::vector<std::string>& points,
                  const std::string& seeds, int jobs, int threads, const std::string& out, const std::vector<std::string>& sets,
                  const std::string& select, const std::vector<std::string>& then, const std::string& cache_dir,
                  bool report, const std::vector<std::string>& plugin_path, const std::string& executable, bool quiet,
                  const std::vector<std::string>& baselines, const std::vector<std::string>& against) {
  runs::SweepOptions o;
  o.graph = graph;
  o.seeds = seeds;
  o.jobs = jobs;
  o.threads = threads;
  o.out = out;
  o.sets = sets;
  o.select = select;
  o.then = then;
  o.cache_dir = cache_dir;
  o.report = report;
  o.plugin_path = plugin_path;
  o.executable = executable;
  o.baselines = baselines;
  o.against = against;
  o.command = {"embedflow.sweep", graph};
  std::ostringstream discard;
  if (quiet) o.messages = &discard;
  runs::SweepResult r;
  try {
    for (const auto& g : grid) o.grid.push_back(runs::parse_grid_axis(g));
    for (const auto& p : points) o.points.push_back(runs::parse_point(p));
    py::gil_scoped_release release;
    r = runs::run_sweep(o);
  } catch (const ConfigError& e) {
    raise_config_error(e);
  }
  return r.record.dump(-1, ' ', false, nlohmann::ordered_json::error_handler_t::replace);
}

GraphArgs graph_args(const std::string& graph, const std::vector<std::string>& sets, std::optional<std::uint64_t> seed,
                     const std::vector<std::string>& plugin_path, const std::string& out = "") {
  return GraphArgs{graph, sets, seed, plugin_path, out};
}

}  // namespace

PYBIND11_MODULE(_embedflow, m) {
  m.doc() = "embedflow's engine, for the embedflow package (use `import embedflow`)";
  m.attr("version") = std::string(kVersion);
  m.attr("abi_version") = kAbiVersion;

  m.def("validate",
        [](const std::string& graph, const std::vector<std::string>& sets, std::optional<std::uint64_t> seed,
           const std::vector<std::string>& plugin_path) { return validate(graph_args(graph, sets, seed, plugin_path)); },
        py::arg("graph"), py::arg("sets"), py::arg("seed"), py::arg("plugin_path"));
  m.def("run",
        [](const std::string& graph, const std::vector<std::string>& sets, std::optional<std::uint64_t> seed,
           const std::vector<std::string>& plugin_path, int threads, const std::string& out, const std::string& cache_dir,
           bool no_cache, bool report) {
          return run(graph_args(graph, sets, seed, plugin_path, out), threads, cache_dir, no_cache, report);
        },
        py::arg("graph"), py::arg("sets"), py::arg("seed"), py::arg("plugin_path"), py::arg("threads"), py::arg("out"),
        py::arg("cache_dir"), py::arg("no_cache"), py::arg("report"));
  m.def("inspect_json", &inspect_json, py::arg("type"), py::arg("plugin_path"));
  m.def("sweep", &sweep, py::arg("graph"), py::arg("grid"), py::arg("points"), py::arg("seeds"), py::arg("jobs"),
        py::arg("threads"), py::arg("out"), py::arg("sets"), py::arg("select"), py::arg("then"), py::arg("cache_dir"),
        py::arg("report"), py::arg("plugin_path"), py::arg("executable"), py::arg("quiet"), py::arg("baselines"),
        py::arg("against"));
  m.def("set_log_level", [](const std::string& level) {
    if (level == "debug") set_log_level(LogLevel::debug);
    else if (level == "info") set_log_level(LogLevel::info);
    else if (level == "warning") set_log_level(LogLevel::warning);
    else throw py::value_error("log level: debug, info or warning");
  });

  py::class_<Stream>(m, "Stream")
      .def(py::init([](const std::string& graph, const std::string& output, const std::vector<std::string>& sets,
                       std::optional<std::uint64_t> seed, const std::vector<std::string>& plugin_path, std::size_t capacity,
                       bool as_torch, int threads, const std::string& out, const std::string& cache_dir, bool no_cache) {
             return std::make_unique<Stream>(graph_args(graph, sets, seed, plugin_path, out), output, capacity, as_torch,
                                             threads, cache_dir, no_cache);
           }),
           py::arg("graph"), py::arg("output"), py::arg("sets"), py::arg("seed"), py::arg("plugin_path"),
           py::arg("capacity"), py::arg("as_torch"), py::arg("threads"), py::arg("out"), py::arg("cache_dir"),
           py::arg("no_cache"))
      .def("__iter__", [](py::object self) { return self; })
      .def("__next__", &Stream::next)
      .def("close", &Stream::close)
      .def_property_readonly("result", &Stream::result)
      .def_property_readonly("port", &Stream::port)
      .def_property_readonly("delivered", &Stream::delivered)
      .def_property_readonly("stopped", &Stream::stopped);
}
