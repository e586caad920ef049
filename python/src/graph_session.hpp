// What the module's calls share: a graph's arguments as the package passes them, preparing it
// through the runs library's session (the same steps as `embedflow run`), its problems and
// failures as the package's exceptions, and waiting for a graph with the GIL released.
#pragma once

#include <pybind11/pybind11.h>

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <mutex>
#include <optional>
#include <string>
#include <vector>

#include "embedflow/error.hpp"
#include "embedflow_engine/graph.hpp"
#include "embedflow_runs/session.hpp"

namespace embedflow::python {

namespace py = pybind11;

constexpr auto kSignalPoll = std::chrono::milliseconds(100);

py::list problems_to_python(const std::vector<Diagnostic>& problems);
// Raises embedflow.GraphError (defined in Python) carrying every problem.
[[noreturn]] void raise_graph_error(const std::vector<Diagnostic>& problems);
// A graph's problems so far, or the one ConfigError that stopped loading it, as a GraphError.
[[noreturn]] void raise_config_error(const ConfigError& e);

struct GraphArgs {
  std::string graph;
  std::vector<std::string> sets;
  std::optional<std::uint64_t> seed;
  std::vector<std::string> plugin_path;
  std::string out;  // as --out: the run record's folder, and the graph's variable `out` when it has one
};

struct Prepared {
  engine::ResolvedGraph graph;
  std::vector<std::string> sets;  // the overrides applied, in order
  std::vector<engine::LoadedPlugin> plugins;
  std::vector<Diagnostic> problems;
};

// Plugins, parse, overrides, resolution: what `embedflow validate` does.
Prepared prepare(const GraphArgs& a);
// The session's request for a prepared graph, as `embedflow run` would make it.
runs::RunRequest make_request(const GraphArgs& a, const Prepared& p, int threads, const std::string& cache_dir,
                              bool no_cache, const std::atomic<bool>* stop);
py::dict outcome_to_python(const runs::RunOutcome& o);

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

}  // namespace embedflow::python
