#include "embedflow_runs/progress_line.hpp"

#include <sys/ioctl.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <condition_variable>
#include <cstdio>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "embedflow/log.hpp"
#include "embedflow/progress.hpp"
#include "embedflow_engine/progress_eta.hpp"
#include "embedflow_engine/trace.hpp"

namespace embedflow::runs {
namespace {

using engine::NodeActivity;

class ProgressLine final : public engine::LiveView {
 public:
  explicit ProgressLine(const engine::RunningGraph& run)
      : run_(run), start_(std::chrono::steady_clock::now()), busy_(run.graph().nodes.size(), 0),
        share_(run.graph().nodes.size(), 0.0), thread_([this] { loop(); }) {}
  ~ProgressLine() override {
    {
      std::lock_guard<std::mutex> lock(m_);
      done_ = true;
    }
    cv_.notify_all();
    thread_.join();
    set_status_line("");
  }

 private:
  static std::string duration(double s) {
    long t = static_cast<long>(s);
    if (t < 60) return cat(t, "s");
    if (t < 3600) return cat(t / 60, "m", t % 60 < 10 ? "0" : "", t % 60, "s");
    return cat(t / 3600, "h", (t % 3600) / 60 < 10 ? "0" : "", (t % 3600) / 60, "m");
  }

  static std::string number(double v) {
    char buf[32];
    std::snprintf(buf, sizeof buf, "%.4g", v);
    return buf;
  }

  // Exponentially smoothed busy share of each node over the last ticks; returns the busiest
  // (nodes.size() when none was busy).
  std::size_t bounding_node(const std::vector<NodeActivity>& nodes, double dt_s) {
    std::size_t best = nodes.size();
    double best_share = 0;
    for (std::size_t i = 0; i < nodes.size(); ++i) {
      if (!nodes[i].runs) continue;
      std::int64_t busy = nodes[i].busy_ns;
      double capacity = nodes[i].parallel ? run_.threads() : 1;
      double share = dt_s > 0 ? std::max(0.0, static_cast<double>(busy - busy_[i]) * 1e-9 / (dt_s * capacity)) : 0;
      busy_[i] = busy;
      share_[i] = 0.5 * share_[i] + 0.5 * std::min(share, 1.0);
      if (share_[i] > best_share) {
        best_share = share_[i];
        best = i;
      }
    }
    return best;
  }

  // " ETA 2m10s (train)", from the stages that report a known total; empty when none gives one.
  std::string eta(const std::vector<NodeActivity>& nodes) const {
    std::vector<engine::StageProgress> stages(nodes.size());
    for (std::size_t i = 0; i < nodes.size(); ++i) {
      const engine::ReportedProgress& p = nodes[i].progress;
      // A node that has ended (a trainer stopped early, short of its steps) bounds nothing. Ended
      // is closed, not finished: a trainer holding its inputs trains in close(), after its
      // inputs have finished.
      const bool running = p.reported && nodes[i].runs && !nodes[i].closed;
      stages[i] = engine::StageProgress{running, p.first_done, p.latest.done, p.latest.total,
                                        static_cast<double>(p.first_ns) * 1e-9, static_cast<double>(p.latest_ns) * 1e-9};
    }
    const engine::RunEta eta = engine::run_eta(stages);
    if (!eta.known()) return "";
    return cat(" ETA ", duration(eta.seconds), " (", run_.graph().nodes[eta.stage].id(), ")");
  }

  // " | bound by train (97% busy): 45/600 steps 7% loss 0.213", with the node's latest report.
  std::string bound_by(const std::vector<NodeActivity>& nodes, std::size_t bound) const {
    std::string text = cat(" | bound by ", run_.graph().nodes[bound].id(), " (", static_cast<int>(100 * share_[bound]), "% busy)");
    const engine::ReportedProgress& p = nodes[bound].progress;
    if (p.reported) {
      const ProgressReport& r = p.latest;
      text += cat(": ", r.done);
      if (r.total) text += cat("/", r.total);
      text += " " + (r.unit.empty() ? std::string("items") : r.unit);
      if (r.total) text += cat(" ", (100 * std::min(r.done, r.total)) / r.total, "%");
      for (const auto& [name, v] : r.metrics) text += " " + name + " " + number(v);
    }
    return text;
  }

  std::string line(double secs, double dt) {
    const std::vector<NodeActivity> nodes = run_.activity(engine::TraceRecorder::now_ns());
    std::size_t bound = bounding_node(nodes, dt);
    std::string text = duration(secs) + eta(nodes);
    if (bound < nodes.size()) text += bound_by(nodes, bound);
    std::uint64_t n = 0;
    for (const auto& node : nodes) n += node.source_records;
    double rate = secs > 0 ? static_cast<double>(n) / secs : 0;
    text += cat(" | ", n, " records ", static_cast<std::uint64_t>(rate), "/s");
    // A line wider than the terminal wraps, and "\r" then redraws only its last part.
    winsize ws{};
    std::size_t width = ioctl(STDERR_FILENO, TIOCGWINSZ, &ws) == 0 && ws.ws_col > 0 ? ws.ws_col : 160;
    if (text.size() >= width) text.resize(width - 1);
    return text;
  }

  void loop() {
    std::unique_lock<std::mutex> lock(m_);
    auto last = start_;
    while (!cv_.wait_for(lock, std::chrono::milliseconds(500), [this] { return done_; })) {
      auto now = std::chrono::steady_clock::now();
      double secs = std::chrono::duration<double>(now - start_).count();
      double dt = std::chrono::duration<double>(now - last).count();
      last = now;
      set_status_line(line(secs, dt));
    }
  }

  const engine::RunningGraph& run_;
  std::chrono::steady_clock::time_point start_;
  std::vector<std::int64_t> busy_;
  std::vector<double> share_;
  std::mutex m_;
  std::condition_variable cv_;
  bool done_ = false;
  std::thread thread_;
};

}  // namespace

std::unique_ptr<engine::LiveView> progress_line(const engine::RunningGraph& run) {
  return std::make_unique<ProgressLine>(run);
}

}  // namespace embedflow::runs
