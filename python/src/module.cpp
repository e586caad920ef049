// _embedflow: the compiled half of the `embedflow` Python package (embedflow/__init__.py is the
// API; this file is what it calls). Everything that runs a graph goes through the runs
// library's session functions, the same code path as `embedflow run`.
//
// Threads and the GIL: a graph always runs on a thread of its own (its oneTBB workers do the
// work); the Python thread that started it waits with the GIL released, waking every 100 ms to
// let Ctrl-C through (PyErr_CheckSignals), which stops the graph as the CLI's SIGINT does. A
// py.map node in the graph takes the GIL on the worker that calls it.
//
// Preparing a graph and its errors are in graph_session.cpp, stream() in stream.cpp, torch
// tensors over a record's buffers in torch_record.cpp; this file binds the calls.
#include <pybind11/numpy.h>
#include <pybind11/pybind11.h>
#include <pybind11/stl.h>

#include <condition_variable>
#include <exception>
#include <mutex>
#include <sstream>
#include <thread>

#include "embedflow/log.hpp"
#include "embedflow/suggest.hpp"
#include "embedflow/version.hpp"
#include "embedflow_engine/describe.hpp"
#include "embedflow_runs/plugins.hpp"
#include "embedflow_runs/report.hpp"
#include "embedflow_runs/session.hpp"
#include "embedflow_runs/sweep.hpp"
#include "graph_session.hpp"
#include "stream.hpp"

namespace py = pybind11;
using namespace embedflow;
using namespace embedflow::engine;
using namespace embedflow::runs;
using namespace embedflow::python;

namespace {

py::list validate(const GraphArgs& a) { return problems_to_python(prepare(a).problems); }

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
      .def("close", &Stream::close, py::arg("interrupt") = false)
      .def_property_readonly("result", &Stream::result)
      .def_property_readonly("port", &Stream::port)
      .def_property_readonly("delivered", &Stream::delivered)
      .def_property_readonly("stopped", &Stream::stopped);
}
