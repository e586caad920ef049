// Engine overhead: the same three functions over N tiny records, run one of three ways:
//   loop   a plain loop (the work alone);
//   tbb    a raw oneTBB chain: input_node -> limiter_node(64) -> three function_nodes, the last
//          releasing the limiter (what a researcher would write with oneTBB directly);
//   graph  a 3-stage embedflow chain (source -> f1 -> f2 -> f3) with its in-flight cap of 64.
// Every side builds a new Record per stage, as real nodes do, so what a chain adds over the loop
// is its runtime's cost: task scheduling, routing, end-of-stream and in-flight accounting, and
// for embedflow the run record's per-node timing. Prints one JSON line: side, threads, records,
// wall and process CPU seconds, and a checksum of the results (equal on every side).
//
//   build/bin/bench_engine_overhead --side graph [--records N] [--threads T]
//
// tools/bench/engine_overhead/engine_overhead.py runs the sides in interleaved rounds and decides
// the target (embedflow's added CPU per message per stage within 1.3x of raw oneTBB's).
#include <tbb/flow_graph.h>
#include <tbb/global_control.h>
#include <time.h>

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

double process_cpu_s() {
  timespec ts{};
  clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &ts);
  return static_cast<double>(ts.tv_sec) + static_cast<double>(ts.tv_nsec) * 1e-9;
}

void run_loop(std::int64_t n) {
  for (std::int64_t i = 0; i < n; ++i) accumulate(*shift(*scale(*make_record(i))));
}

void run_tbb(std::int64_t n, int threads) {
  namespace flow = tbb::flow;
  tbb::global_control limit(tbb::global_control::max_allowed_parallelism, static_cast<std::size_t>(threads));
  flow::graph g;
  std::int64_t next = 0;
  flow::input_node<RecordPtr> source(g, [&](tbb::flow_control& fc) -> RecordPtr {
    if (next >= n) {
      fc.stop();
      return nullptr;
    }
    return make_record(next++);
  });
  flow::limiter_node<RecordPtr> limiter(g, 64);
  flow::function_node<RecordPtr, RecordPtr> f1(g, flow::serial, [](const RecordPtr& r) { return scale(*r); });
  flow::function_node<RecordPtr, RecordPtr> f2(g, flow::serial, [](const RecordPtr& r) { return shift(*r); });
  flow::function_node<RecordPtr, flow::continue_msg> f3(g, flow::serial, [](const RecordPtr& r) {
    accumulate(*r);
    return flow::continue_msg();
  });
  flow::make_edge(source, limiter);
  flow::make_edge(limiter, f1);
  flow::make_edge(f1, f2);
  flow::make_edge(f2, f3);
  flow::make_edge(f3, limiter.decrementer());
  source.activate();
  g.wait_for_all();
}

int run_embedflow(std::int64_t n, int threads) {
  Registry registry;
  registry.add(NodeTypeBuilder("bench.source").source().param(Param::integer("count")).output("out", "value: f64[]").create<Source>());
  registry.add(NodeTypeBuilder("bench.scale").input("in", "value: f64[]").output("out", "value: f64[]").create<Scale>());
  registry.add(NodeTypeBuilder("bench.shift").input("in", "value: f64[]").output("out", "value: f64[]").create<Shift>());
  registry.add(NodeTypeBuilder("bench.sum").input("in", "value: f64[]").create<Sum>());
  std::vector<Diagnostic> problems;
  GraphSpec spec = parse_graph_text(
      "max_in_flight: 64\nnodes:\n"
      "  src: {type: bench.source, params: {count: " + std::to_string(n) + "}}\n"
      "  f1: {type: bench.scale}\n  f2: {type: bench.shift}\n  f3: {type: bench.sum}\n"
      "edges: [src.out -> f1.in, f1.out -> f2.in, f2.out -> f3.in]\n",
      "bench.yaml", problems);
  ResolvedGraph g = resolve(std::move(spec), registry, problems);
  if (!problems.empty()) {
    for (const auto& p : problems) std::fprintf(stderr, "%s\n", p.str().c_str());
    return 2;
  }
  RunOptions options;
  options.threads = threads;
  RunResult r = run_graph(g, options);
  if (r.exit_code != 0) std::fprintf(stderr, "%s\n", r.error.c_str());
  return r.exit_code;
}

}  // namespace

int main(int argc, char** argv) {
  std::int64_t n = 2'000'000;
  int threads = 1;
  std::string side = "graph";
  for (int i = 1; i + 1 < argc; i += 2) {
    if (!std::strcmp(argv[i], "--records")) n = std::stoll(argv[i + 1]);
    else if (!std::strcmp(argv[i], "--threads")) threads = std::stoi(argv[i + 1]);
    else if (!std::strcmp(argv[i], "--side")) side = argv[i + 1];
  }
  if (side != "loop" && side != "tbb" && side != "graph") {
    std::fprintf(stderr, "--side must be loop, tbb or graph, not '%s'\n", side.c_str());
    return 2;
  }
  g_total = 0;
  const auto t0 = std::chrono::steady_clock::now();
  const double c0 = process_cpu_s();
  int status = 0;
  if (side == "loop") run_loop(n);
  else if (side == "tbb") run_tbb(n, threads);
  else status = run_embedflow(n, threads);
  const double cpu = process_cpu_s() - c0;
  const double wall = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  if (status != 0) return status;
  std::printf("{\"side\": \"%s\", \"threads\": %d, \"records\": %lld, \"wall_s\": %.6f, \"cpu_s\": %.6f, \"checksum\": %.17g}\n",
              side.c_str(), threads, static_cast<long long>(n), wall, cpu, g_total);
  return 0;
}
