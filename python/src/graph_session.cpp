#include "graph_session.hpp"

#include <algorithm>

#include "embedflow_engine/graph_file.hpp"
#include "embedflow_runs/plugins.hpp"

namespace embedflow::python {
using namespace engine;
using namespace runs;

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

[[noreturn]] void raise_graph_error(const std::vector<Diagnostic>& problems) {
  py::object errors = py::module_::import("embedflow._errors");
  py::object exc = errors.attr("graph_error")(problems_to_python(problems));
  PyErr_SetObject(reinterpret_cast<PyObject*>(Py_TYPE(exc.ptr())), exc.ptr());
  throw py::error_already_set();
}

[[noreturn]] void raise_config_error(const ConfigError& e) {
  Diagnostic d;
  d.message = e.what();
  raise_graph_error({d});
}
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

}  // namespace embedflow::python
