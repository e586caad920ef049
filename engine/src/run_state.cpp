#include "run_state.hpp"

#include <utility>

namespace embedflow::engine::exec {

void RunState::note_progress(std::string_view id, const ProgressReport& report) {
  auto it = index_of.find(std::string(id));
  if (it != index_of.end()) {
    std::int64_t now = TraceRecorder::now_ns();
    std::lock_guard<std::mutex> lock(progress_mutex);
    ReportedProgress& p = progress[it->second];
    if (!p.reported || report.done < p.latest.done) {  // first report, or the node started over
      p.first_done = report.done;
      p.first_ns = now;
    }
    p.reported = true;
    // A report without metrics (a trainer between its logging steps) keeps the last ones shown.
    std::vector<std::pair<std::string, double>> kept;
    if (report.metrics.empty()) kept = std::move(p.latest.metrics);
    p.latest = report;
    if (report.metrics.empty()) p.latest.metrics = std::move(kept);
    p.latest_ns = now;
  }
  if (options.on_progress) options.on_progress(id, report);
}

void RunState::fail(std::size_t node, const char* phase, std::exception_ptr ex) {
  std::string what;
  int code = 1;
  try {
    std::rethrow_exception(ex);
  } catch (const ConfigError& e) {
    what = e.what();
    code = 2;
  } catch (const std::exception& e) {
    what = e.what();
  } catch (...) {
    what = "unknown exception";
  }
  {
    std::lock_guard<std::mutex> lock(error_mutex);
    if (error.empty()) {
      error = cat(node_origin(graph, node), " failed in ", phase, ": ", what);
      error_code = code;
    }
  }
  cancelled.store(true);
  tbb_graph.cancel();
}

}  // namespace embedflow::engine::exec
