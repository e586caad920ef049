#include "embedflow_runs/session.hpp"

#include <iostream>

#include "embedflow/log.hpp"
#include "embedflow_engine/cache.hpp"
#include "embedflow_engine/graph_file.hpp"
#include "embedflow_runs/progress_line.hpp"
#include "embedflow_runs/run_record.hpp"

namespace embedflow::runs {
using namespace engine;
namespace fs = std::filesystem;

namespace {

// Both taps see every record: a cached node that is also streamed writes its entry and feeds
// the stream.
class FanOutTap final : public OutputTap {
 public:
  FanOutTap(std::shared_ptr<OutputTap> first, std::shared_ptr<OutputTap> second)
      : first_(std::move(first)), second_(std::move(second)) {}
  void on_record(std::size_t port, const RecordPtr& record) override {
    first_->on_record(port, record);
    second_->on_record(port, record);
  }
  void on_finish(bool whole) override {
    first_->on_finish(whole);
    second_->on_finish(whole);
  }

 private:
  std::shared_ptr<OutputTap> first_, second_;
};

}  // namespace

ResolvedGraph prepare_graph(GraphSpec spec, std::vector<Diagnostic>& problems, const std::vector<std::string>& sets,
                            std::optional<std::uint64_t> seed, const Registry& registry) {
  if (seed) spec.seed = *seed;
  for (const auto& s : sets) apply_override(spec, s, problems);
  ResolvedGraph out = resolve(std::move(spec), registry, problems);
  if (problems.empty() && !out.spec.disabled.empty()) {
    std::string names;
    for (const auto& n : out.spec.disabled) names += (names.empty() ? "" : ", ") + n;
    log_info("graph", "left out (enabled: false, or fed only by left-out nodes): ", names);
  }
  return out;
}

RunOutcome execute_run(const ResolvedGraph& g, const RunRequest& request) {
  std::ostream& messages = request.messages ? *request.messages : std::cerr;
  RunOutcome outcome;
  std::vector<NodePlan> plans;
  std::unique_ptr<CachePlanner> planner;  // holds hit entries open until the run ends
  std::string cache_used;
  if (!request.no_cache && CachePlanner::any_cached(g)) {
    CacheRunOptions co;
    co.dir = request.cache_dir.empty() ? default_cache_dir() : fs::path(request.cache_dir);
    cache_used = co.dir.string();
    co.graph_file = fs::absolute(request.graph_file).lexically_normal().string();
    co.explain = request.explain_cache;
    co.explain_out = &messages;
    co.rebuild = request.rebuild_cache;
    co.stop = request.stop;
    planner = std::make_unique<CachePlanner>(g, co);
    plans = planner->plan();  // DataError: the caller's exit code 1
  } else if (request.explain_cache) {
    messages << "cache plan: " << (request.no_cache ? "--no-cache given" : "no node has cache: enabled")
             << "; every node runs\n";
  }
  if (request.dry_run) {
    std::size_t run = 0, replay = 0, skip = 0;
    for (std::size_t i = 0; i < g.nodes.size(); ++i) {
      auto mode = plans.empty() ? NodePlan::Mode::run : plans[i].mode;
      (mode == NodePlan::Mode::run ? run : mode == NodePlan::Mode::replay ? replay : skip)++;
    }
    messages << "dry run: " << run << " nodes would run, " << replay << " replay from the cache, " << skip
             << " are not needed; nothing was run or written\n";
    outcome.dry_run = true;
    return outcome;
  }
  if ((!request.taps.empty() || !request.consumers.empty()) && plans.empty()) plans.resize(g.nodes.size());
  for (const auto& [index, consumer] : request.consumers) plans.at(index).consumer = consumer;
  for (const auto& [index, tap] : request.taps) {
    NodePlan& plan = plans.at(index);
    if (plan.mode == NodePlan::Mode::skip)
      throw ConfigError(cat("node '", g.nodes[index].id(),
                            "' would not run: every node it feeds replays from the cache (run without the cache)"));
    plan.tap = plan.tap ? std::make_shared<FanOutTap>(plan.tap, tap) : tap;
  }

  RunRecordInfo info;
  info.run_id = make_run_id();
  info.command = request.command;
  info.graph_file = request.graph_file;
  info.overrides = request.overrides;
  info.seed_override = request.seed_override;
  info.threads = request.threads;
  info.cache_dir = cache_used;
  info.no_cache = request.no_cache;
  info.from_record = request.from_record;
  info.graph_sha256 = request.graph_sha256;
  // Throws embedflow::Error naming the folder when it cannot be written.
  RunRecorder recorder(run_output_dir(g.spec, request.out_option), info, g, request.plugins);
  set_run_id(info.run_id);

  if (request.before_run) request.before_run();
  RunOptions options;
  if (!plans.empty()) options.plans = &plans;
  options.threads = request.threads;
  options.trace_path = request.trace_path;
  options.stop = request.stop;
  options.progress = request.progress;
  options.live_view = progress_line;  // drawn on stderr when `progress`
  options.on_progress = [&recorder](std::string_view node, const ProgressReport& report) {
    recorder.on_progress(node, report);
  };
  ResultsSink sink;
  sink.table = [&recorder](std::string_view node, const ResultTable& table, bool headline) {
    recorder.on_results(node, table, headline);
  };
  sink.chart = [&recorder](std::string_view node, const ResultChart& chart) { recorder.on_chart(node, chart); };
  sink.figure = [&recorder](std::string_view node, const ResultFigure& figure) { recorder.on_figure(node, figure); };
  sink.text = [&recorder](std::string_view node, const std::string& title, const std::string& text) {
    recorder.on_text(node, title, text);
  };
  ResultsSink previous_results = set_results_sink(std::move(sink));
  outcome.result = run_graph(g, options);
  set_results_sink(std::move(previous_results));
  if (request.after_run) request.after_run(outcome.result);
  recorder.finish(outcome.result);
  set_run_id("");
  outcome.record_dir = recorder.dir();
  return outcome;
}

}  // namespace embedflow::runs
