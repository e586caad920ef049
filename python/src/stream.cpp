#include "stream.hpp"

#include "embedflow/suggest.hpp"
#include "embedflow_python/numpy_record.hpp"
#include "torch_record.hpp"

namespace embedflow::python {
using namespace engine;
using namespace runs;

Stream::Stream(const GraphArgs& a, const std::string& output, std::size_t capacity, bool as_torch, int threads,
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
  request.consumers[index] = reader_;
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

Stream::~Stream() {
  try {
    close();
  } catch (...) {
  }
}

py::dict Stream::next() {
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

void Stream::close(bool interrupt) {
  if (closed_) return;
  closed_ = true;
  if (!queue_) return;
  // The reader is done: the streamed node and the producers feeding only it stop, and what else
  // the graph computes runs to its end, unless the whole run is to stop (Ctrl-C).
  {
    std::lock_guard<std::mutex> lock(queue_->mutex);
    left_early_ = !queue_->finished();
    if (interrupt && left_early_) stop_.store(true);
  }
  reader_->stop();
  queue_->abandon();
  if (runner_.joinable()) {
    py::gil_scoped_release release;
    runner_.join();
  }
}

void Stream::raise_failure() {
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

}  // namespace embedflow::python
