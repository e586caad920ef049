// Runs a resolved graph on a oneTBB flow graph.
//
// Each embedflow node becomes one tbb::flow::function_node (serial or unlimited concurrency)
// that receives Messages; sources are driven by a serial "pump" node. Nodes route their own
// output to successors' inboxes, which lets the engine do what plain flow-graph edges do not:
//  - end-of-stream: an EOS message carries how many messages were sent on its edge, so a
//    parallel node closes exactly when the last of them has been processed;
//  - order: a parallel node's outputs are re-sequenced by input sequence number, so the stream
//    downstream is the same whatever the thread count;
//  - bounded memory: every message carries the source its first record came from, and counts
//    in that source's in-flight total from when it is sent until its receiver has handled it (a
//    parallel node's outputs waiting to be re-sequenced keep counting). A source stops producing
//    while `in_flight` messages are counted and is woken when they drop below half, so a fast
//    source before a slow sink blocks (without holding a thread) rather than dropping or
//    growing; no allocation is made per record for it. Stream records held for a side port's
//    first value stop counting, so a source whose whole stream the side value needs goes on.
#pragma once

#include <atomic>
#include <cstdint>
#include <functional>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include "embedflow/node.hpp"
#include "embedflow/progress.hpp"
#include "embedflow_engine/graph.hpp"
#include "embedflow_engine/live_view.hpp"

namespace embedflow::engine {

// Observes a node's output (the cache writer uses it). Called serially per node.
class OutputTap {
 public:
  virtual ~OutputTap() = default;
  virtual void on_record(std::size_t port, const RecordPtr& record) = 0;
  // The node closed cleanly. `whole`: it produced its whole output; false when it was stopped
  // early because every consumer was done (NodeContext::done_consuming), so a cache must not
  // keep what it saw as the node's output.
  virtual void on_finish(bool whole) = 0;
};

// A consumer of a node's output from outside the graph (the Python module's stream). The node
// counts it among its consumers until stop() is called: then, if every other consumer is done
// too, the node and the producers feeding only it stop as when consumer nodes are done
// (NodeContext::done_consuming), and the rest of the graph runs to its end. stop() may be called
// from any thread, before, during or after the run.
class ExternalConsumer {
 public:
  void stop();
  bool stopped() const;
  // The runtime's side: `on_stop` is called (once, on the stopping thread) by a stop() made
  // between attach() and detach(); detach() returns only when no such call is running.
  void attach(std::function<void()> on_stop);
  void detach();

 private:
  std::mutex mutex_;  // held while on_stop_ runs, so detach() waits for it
  std::atomic<bool> stopped_{false};
  std::function<void()> on_stop_;
};

struct NodePlan {
  enum class Mode { run, replay, skip };
  Mode mode = Mode::run;
  std::unique_ptr<Node> replay;       // replay: a source standing in for the node
  std::shared_ptr<OutputTap> tap;     // run: sees every output record
  std::shared_ptr<ExternalConsumer> consumer;  // run: one more consumer of its output
};

struct RunOptions {
  int threads = 0;            // 0 = every core
  std::string trace_path;     // Chrome trace JSON
  bool progress = false;      // show live_view while the graph runs
  LiveViewFactory live_view;  // the runs library's progress line on stderr, say; empty: none
  const std::atomic<bool>* stop = nullptr;  // set by SIGINT
  std::vector<NodePlan>* plans = nullptr;    // per node, indexed like ResolvedGraph::nodes
  // Called with every progress report a node makes (progress.hpp), on the reporting thread,
  // after the runtime has noted it for the live view. The run's metrics.jsonl is written here.
  std::function<void(std::string_view node, const ProgressReport& report)> on_progress;
};

struct NodeStats {
  std::string id;
  std::uint64_t records_in = 0, records_out = 0;
  // Time spent inside the node's open / produce / process / on_side / close calls, summed over
  // the threads that made them (a parallel node may exceed the run's wall time).
  double busy_s = 0;
  // CPU time of the calling threads during those calls: measured on long calls and on every
  // 64th short one, and scaled to busy_s by the measured ratio. Pools a node runs itself
  // (LibTorch's intra-op threads, OpenCV's) are not included; run.json has the process's total.
  double cpu_s = 0;
  std::string mode = "run";  // run, replay (from its cache), skip (not needed: all consumers replay)
  bool cache_write = false;  // ran with a cache tap: a miss whose output is being stored
  // Stopped before its input or its own production ended, because every consumer of its output
  // was done (NodeContext::done_consuming): its output is a prefix, and was not cached.
  bool stopped_early = false;
  ProgressReport last_progress;  // the node's latest report (done = 0 when it made none)
  bool reported_progress = false;
};

struct RunResult {
  int exit_code = 0;  // 0 done, 1 runtime failure, 2 invalid, 130 interrupted
  std::string error;  // located message when exit_code != 0 (and not interrupted)
  double seconds = 0;
  std::uint64_t source_records = 0;
  std::vector<NodeStats> stats;
};

RunResult run_graph(const ResolvedGraph& graph, const RunOptions& options);

// Makes glibc's malloc keep freed memory for reuse instead of handing it back to the kernel.
// By default glibc maps every block above a moving threshold (a decoded photo, a batch of them,
// a convolution's activations) with its own mmap and unmaps it on free, and trims the heap's top
// as soon as it is free; the next batch then page-faults through fresh zeroed pages. On a photo
// pipeline those faults cost half the CPU time. This caps mmap at glibc's largest allowed
// threshold (32 MiB) and keeps up to 1 GiB of freed heap, so peak memory is unchanged and the
// steady state reuses it. Applied once per process, by run_graph; a process that sets any
// glibc.malloc tunable in GLIBC_TUNABLES, or EMBEDFLOW_SYSTEM_MALLOC=1, keeps its own policy.
// Returns true when the policy was applied (now or earlier).
bool tune_process_allocator();

}  // namespace embedflow::engine
