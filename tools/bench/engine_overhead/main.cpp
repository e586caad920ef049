// Engine overhead: the same three functions over N tiny records, once in a plain loop and once
// as a 3-stage embedflow chain (source -> f1 -> f2 -> f3), in one run. Prints the time per
// message and the overhead the engine adds per message per stage.
//
//   build/bin/bench_engine_overhead [--records N] [--threads T]
//
// Both sides build a new Record per stage, as real nodes do, so the difference is the engine:
// task scheduling, EOS accounting, in-flight tickets and routing.
#include <chrono>
#include <cstdio>
#include <cstring>
#include <string>

#include "embedflow_engine/graph.hpp"
#include "embedflow_engine/runtime.hpp"

using namespace embedflow;
using namespace embedflow::engine;

namespace {

RecordPtr make_record(std::int64_t i) { return share(Record().set("value", Array::scalar<double>(static_cast<double>(i)))); }
RecordPtr scale(const Record& r) { return share(Record().set("value", Array::scalar<double>(r.get("value").item<double>() * 2.0))); }
RecordPtr shift(const Record& r) { return share(Record().set("value", Array::scalar<double>(r.get("value").item<double>() + 1.0))); }
double g_total = 0;
void accumulate(const Record& r) { g_total += r.get("value").item<double>(); }

class Source final : public Node {
 public:
  void open(NodeContext& ctx) override { n_ = ctx.params().integer("count"); }
  bool produce(Emitter& out) override {
    if (i_ >= n_) return false;
    out.emit(make_record(i_++));
    return i_ < n_;
  }

 private:
  std::int64_t n_ = 0, i_ = 0;
};
class Scale final : public Node {
 public:
  void process(std::size_t, const RecordPtr& r, Emitter& out) override { out.emit(scale(*r)); }
};
class Shift final : public Node {
 public:
  void process(std::size_t, const RecordPtr& r, Emitter& out) override { out.emit(shift(*r)); }
};
class Sum final : public Node {
 public:
  void process(std::size_t, const RecordPtr& r, Emitter&) override { accumulate(*r); }
};

double seconds_since(std::chrono::steady_clock::time_point t) {
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - t).count();
}

}  // namespace

int main(int argc, char** argv) {
  std::int64_t n = 10'000'000;
  int threads = 2;
  for (int i = 1; i + 1 < argc; i += 2) {
    if (!std::strcmp(argv[i], "--records")) n = std::stoll(argv[i + 1]);
    if (!std::strcmp(argv[i], "--threads")) threads = std::stoi(argv[i + 1]);
  }

  Registry registry;
  registry.add(NodeTypeBuilder("bench.source").source().param(Param::integer("count")).output("out", "value: f64[]").create<Source>());
  registry.add(NodeTypeBuilder("bench.scale").input("in", "value: f64[]").output("out", "value: f64[]").create<Scale>());
  registry.add(NodeTypeBuilder("bench.shift").input("in", "value: f64[]").output("out", "value: f64[]").create<Shift>());
  registry.add(NodeTypeBuilder("bench.sum").input("in", "value: f64[]").create<Sum>());

  // Plain loop.
  g_total = 0;
  auto t0 = std::chrono::steady_clock::now();
  for (std::int64_t i = 0; i < n; ++i) accumulate(*shift(*scale(*make_record(i))));
  double loop_s = seconds_since(t0);
  double loop_total = g_total;

  // The same as a graph.
  std::vector<Diagnostic> problems;
  GraphSpec spec = parse_graph_text(
      "nodes:\n"
      "  src: {type: bench.source, params: {count: " + std::to_string(n) + "}}\n"
      "  f1: {type: bench.scale}\n  f2: {type: bench.shift}\n  f3: {type: bench.sum}\n"
      "edges: [src.out -> f1.in, f1.out -> f2.in, f2.out -> f3.in]\n",
      "bench.yaml", problems);
  ResolvedGraph g = resolve(std::move(spec), registry, problems);
  if (!problems.empty()) {
    for (const auto& p : problems) std::fprintf(stderr, "%s\n", p.str().c_str());
    return 2;
  }
  g_total = 0;
  RunOptions options;
  options.threads = threads;
  t0 = std::chrono::steady_clock::now();
  RunResult r = run_graph(g, options);
  double graph_s = seconds_since(t0);
  if (r.exit_code != 0) {
    std::fprintf(stderr, "%s\n", r.error.c_str());
    return 1;
  }
  if (g_total != loop_total) {
    std::fprintf(stderr, "results differ: loop %.17g, graph %.17g\n", loop_total, g_total);
    return 1;
  }

  double per_msg_loop = loop_s * 1e9 / static_cast<double>(n);
  double per_msg_graph = graph_s * 1e9 / static_cast<double>(n);
  double overhead_per_stage = (per_msg_graph - per_msg_loop) / 3.0;
  std::printf("engine_overhead: %lld records, 3 stages, %d threads\n", static_cast<long long>(n), threads);
  std::printf("  plain loop      %8.3f s  %8.1f ns/record\n", loop_s, per_msg_loop);
  std::printf("  embedflow graph %8.3f s  %8.1f ns/record\n", graph_s, per_msg_graph);
  std::printf("  added per message per stage: %.1f ns (target <= 1000 ns)\n", overhead_per_stage);
  std::printf("  ratio graph/loop: %.2fx\n", graph_s / loop_s);
  return overhead_per_stage <= 1000.0 ? 0 : 3;
}
