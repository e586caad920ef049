// py.map — calls a Python function on every record and emits what it returns: a stage
// prototyped in Python without writing C++.
//
// The function gets the record as a dict of read-only numpy views (no copy; string fields are
// str or lists of str) plus the `kwargs` parameter as keyword arguments, and returns a dict of
// fields (numpy arrays of u8/i32/i64/f32/f64/bool, numbers, str, lists of str) for one record,
// a list of such dicts for several, or None for none. Returned arrays are copied, except an
// input field returned unchanged, which is forwarded.
//
// `function` is "module:name" (imported from sys.path, to which the graph file's folder and the
// working directory are added) or "path/to/file.py:name" (relative to the working directory,
// else to the graph file's folder; loaded as module embedflow_py_<node id>). The interpreter is started once, when the first py node
// opens, unless the graph runs inside a Python program (the embedflow module), whose
// interpreter it then shares. Calls take the GIL; with `parallel: false` (the default) they are
// also made one at a time, so a function may keep state. Declare `parallel: true` only for
// functions safe to call from several threads at once; outputs stay in input order either way.
//
// A Python exception fails the node: the message names the node where it is declared, the
// function, and carries the Python traceback. A returned value of the wrong type names the field
// and what it got.
//
// Inputs: in (any record)   Outputs: out (what the function returns)
//
//   nodes:
//     numbers: {type: core.range, params: {count: 3}}
//     same:    {type: py.map, params: {function: "builtins:dict"}}
//     show:    {type: core.sink, params: {mode: print}}
//   edges: [numbers.out -> same.in, same.out -> show.in]
//
// (builtins:dict returns the record's fields unchanged: a pass-through. tests/python/graphs/
// stage.yaml and stages.py have functions that compute, filter and fan out.)
#include <pybind11/embed.h>

#include <filesystem>
#include <mutex>

#include "embedflow_python/numpy_record.hpp"
#include "py_types.hpp"

namespace embedflow::py_family {
namespace {
namespace py = pybind11;
namespace fs = std::filesystem;

py::object to_python(const Value& v) {
  if (v.is_null()) return py::none();
  if (v.is_boolean()) return py::bool_(v.as_boolean());
  if (v.is_integer()) return py::int_(v.as_integer());
  if (v.is_number()) return py::float_(v.as_number());
  if (v.is_string()) return py::str(v.as_string());
  if (v.is_list()) {
    py::list out;
    for (const auto& item : v.as_list()) out.append(to_python(item));
    return std::move(out);
  }
  py::dict out;
  for (const auto& [k, item] : v.as_map()) out[py::str(k)] = to_python(item);
  return std::move(out);
}

// "module:name" or "file.py:name" -> (where, name).
std::pair<std::string, std::string> split_function(const std::string& spec) {
  const auto colon = spec.rfind(':');
  if (colon == std::string::npos || colon == 0 || colon + 1 == spec.size())
    throw ConfigError(cat("function '", spec, "': expected module:function or path/to/file.py:function"));
  return {spec.substr(0, colon), spec.substr(colon + 1)};
}

bool names_file(const std::string& where) {
  return where.find('/') != std::string::npos || (where.size() > 3 && where.compare(where.size() - 3, 3, ".py") == 0);
}

class Map final : public Node {
 public:
  ~Map() override {
    if (!function_) return;
    py::gil_scoped_acquire gil;  // the Python objects are released under the GIL
    function_ = py::object();
    kwargs_ = py::object();
  }

  void open(NodeContext& ctx) override {
    spec_ = ctx.params().string("function");
    parallel_ = ctx.params().boolean("parallel");
    ensure_interpreter();
    py::gil_scoped_acquire gil;
    auto [where, name] = split_function(spec_);
    const fs::path graph_dir = fs::absolute(ctx.graph_file()).parent_path();
    try {
      py::module_ sys = py::module_::import("sys");
      py::list path = sys.attr("path");
      for (const fs::path& dir : {graph_dir, fs::current_path()})
        if (!path.contains(py::str(dir.string()))) path.append(py::str(dir.string()));
      py::object module;
      if (names_file(where)) {
        fs::path file = where;
        std::error_code ec;
        if (!fs::exists(file, ec) && file.is_relative() && fs::exists(graph_dir / file, ec)) file = graph_dir / file;
        if (!fs::exists(file, ec)) throw ConfigError(cat("function '", spec_, "': no file ", where));
        py::module_ util = py::module_::import("importlib.util");
        py::object loader_spec = util.attr("spec_from_file_location")(cat("embedflow_py_", ctx.id()), file.string());
        module = util.attr("module_from_spec")(loader_spec);
        // Registered like an import, so the program hosting the graph can reach its state.
        py::module_::import("sys").attr("modules")[py::str(cat("embedflow_py_", ctx.id()))] = module;
        loader_spec.attr("loader").attr("exec_module")(module);
      } else {
        module = py::module_::import(where.c_str());
      }
      if (!py::hasattr(module, name.c_str()))
        throw ConfigError(cat("function '", spec_, "': ", where, " has no attribute '", name, "'"));
      function_ = module.attr(name.c_str());
      if (!PyCallable_Check(function_.ptr()))
        throw ConfigError(cat("function '", spec_, "': ", name, " is not callable"));
      py::object kwargs = to_python(ctx.params().value("kwargs"));
      if (!py::isinstance<py::dict>(kwargs)) throw ConfigError("kwargs must be a map");
      kwargs_ = kwargs;
    } catch (py::error_already_set& e) {
      throw ConfigError(cat("function '", spec_, "' cannot be loaded:\n", python_traceback(e)));
    }
  }

  void process(std::size_t, const RecordPtr& in, Emitter& out) override {
    std::unique_lock<std::mutex> serial(mutex_, std::defer_lock);
    if (!parallel_) serial.lock();
    std::vector<Record> records;
    {
      py::gil_scoped_acquire gil;
      try {
        py::object owner = python::record_owner(in);
        py::dict fields;
        for (const auto& [name, array] : in->fields()) fields[py::str(name)] = python::array_to_python(array, owner);
        py::object result = function_(fields, **kwargs_);
        const std::string where = cat(spec_, "() returned");
        if (result.is_none()) return;
        if (py::isinstance<py::dict>(result)) {
          records.push_back(python::record_from_dict(result, in.get(), owner, where));
        } else if (py::isinstance<py::list>(result) || py::isinstance<py::tuple>(result)) {
          for (auto item : result) {
            if (!py::isinstance<py::dict>(item))
              throw DataError(cat(where, " a list holding a ",
                                  py::str(py::type::of(item).attr("__name__")).cast<std::string>(),
                                  "; expected a dict of fields per record"));
            records.push_back(python::record_from_dict(py::reinterpret_borrow<py::dict>(item), in.get(), owner, where));
          }
        } else {
          throw DataError(cat(where, " a ", py::str(py::type::of(result).attr("__name__")).cast<std::string>(),
                              "; expected a dict of fields, a list of dicts, or None"));
        }
      } catch (py::error_already_set& e) {
        throw DataError(cat("Python function ", spec_, " raised:\n", python_traceback(e)));
      }
    }
    for (auto& r : records) out.emit(std::move(r));
  }

 private:
  std::string spec_;
  bool parallel_ = false;
  std::mutex mutex_;
  py::object function_;
  py::object kwargs_;  // a dict once open; objects are made only under the GIL
};

}  // namespace

NodeType map_type() {
  return NodeTypeBuilder("py.map")
      .doc("Calls a Python function on each record (a dict of numpy arrays) and emits what it returns: a dict, a "
           "list of dicts, or None.")
      .example(R"(nodes:
  numbers: {type: core.range, params: {count: 3}}
  same:    {type: py.map, params: {function: "builtins:dict"}}
  show:    {type: core.sink, params: {mode: print}}
edges: [numbers.out -> same.in, same.out -> show.in]
)")
      .param(Param::string("function").doc("module:function, or path/to/file.py:function"))
      .param(Param::any("kwargs").default_value(Value::map({})).doc("keyword arguments passed to every call"))
      .param(Param::boolean("parallel").default_value(false).doc(
          "the function may be called from several threads at once (it keeps no unguarded state)"))
      .input("in", "*", "any record")
      .output("out", "*", "the records the function returns")
      .parallel()
      .check([](SchemaContext& c) {
        try {
          split_function(c.params().string("function"));
        } catch (const ConfigError& e) {
          c.error(e.what(), "function");
        }
        if (!c.params().value("kwargs").is_map()) c.error("kwargs must be a map of argument names to values", "kwargs");
      })
      .create<Map>();
}

}  // namespace embedflow::py_family
