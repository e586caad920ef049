#include "embedflow_engine/runtime.hpp"

#include <tbb/flow_graph.h>
#include <sys/ioctl.h>
#include <tbb/global_control.h>
#include <malloc.h>
#include <time.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <condition_variable>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <deque>
#include <map>
#include <mutex>
#include <thread>
#include <unordered_map>

#include "embedflow/atomic_file.hpp"
#include "embedflow/log.hpp"
#include "embedflow_engine/log_summary.hpp"
#include "embedflow_engine/progress_eta.hpp"
#include "embedflow_engine/trace.hpp"

namespace embedflow::engine {
namespace {

namespace flow = tbb::flow;

std::int64_t thread_cpu_ns() {
  timespec ts{};
  clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts);
  return static_cast<std::int64_t>(ts.tv_sec) * 1000000000 + ts.tv_nsec;
}

// The latest progress report of a node and where it started, for rates and ETAs.
struct NodeProgress {
  bool reported = false;
  ProgressReport latest;
  std::uint64_t first_done = 0;
  std::int64_t first_ns = 0, latest_ns = 0;
};

class Runtime;
class NodeRuntime;

// A statistic written by one thread at a time (a serial node's calls follow each other, and
// oneTBB orders them) needs no read-modify-write; `shared` ones (a parallel node's, a source's,
// whose pump and side inputs may run at once) do. Readers (the progress line) only load.
template <class T>
void bump(std::atomic<T>& counter, bool shared, T by = 1) {
  if (shared) counter.fetch_add(by, std::memory_order_relaxed);
  else counter.store(counter.load(std::memory_order_relaxed) + by, std::memory_order_relaxed);
}

// In-flight accounting of one source (see runtime.hpp): the messages descended from its records
// that are queued or being handled. Every message a node sends carries the source of the message
// it was handling and is counted here until its receiver has handled it (or holds its outputs
// for re-sequencing), so a source parks at `cap` without an allocation per record.
struct SourceState {
  std::atomic<std::int64_t> in_flight{0};
  std::int64_t cap = 64;
  std::int64_t low = 32;
  std::atomic<bool> parked{false};
  std::atomic<bool> done{false};
  std::function<void()> wake;

  void acquire() { in_flight.fetch_add(1, std::memory_order_relaxed); }
  void release() {
    // Sequentially consistent with the pump's park (store parked, then load in_flight): of the
    // two, at least one sees the other's write, so a wake-up is never lost. The load of parked
    // comes first because the source is rarely parked and an exchange is a locked write.
    const std::int64_t n = in_flight.fetch_sub(1) - 1;
    if (n <= low && parked.load() && !done.load(std::memory_order_acquire) && parked.exchange(false)) wake();
  }
};

// A handled message's count: released on every exit path, unless something takes it over —
// the first message sent while handling it, to the same source (a chain passes one count along
// instead of adding one and releasing one), or outputs held for re-sequencing.
class HeldCount {
 public:
  explicit HeldCount(SourceState* s) : source_(s) {}
  ~HeldCount() {
    if (source_) source_->release();
  }
  SourceState* take() { return std::exchange(source_, nullptr); }
  // Counts one message sent for `s`: this count when it is still held for `s`, else a new one.
  void count_send(SourceState* s) {
    if (source_ == s) source_ = nullptr;
    else s->acquire();
  }
  HeldCount(const HeldCount&) = delete;
  HeldCount& operator=(const HeldCount&) = delete;

 private:
  SourceState* source_;
};

struct Message {
  RecordPtr record;
  SourceState* source = nullptr;  // counted in its in_flight until handled
  std::uint64_t seq = 0;
  std::uint32_t port = 0;  // destination input port
  std::uint32_t edge = 0;  // destination's logical incoming edge
  bool eos = false;
  std::uint64_t count = 0;  // eos: messages sent on the edge before it
};

struct Output {
  std::size_t port;
  RecordPtr record;
};

struct OutEdge {
  NodeRuntime* dst = nullptr;
  std::uint32_t dst_port = 0;
  std::uint32_t dst_edge = 0;
  bool via_gate = false;
  bool side = false;       // into a side input: delivered even to a node done consuming
  std::uint64_t sent = 0;  // written only by the owning node's serialised dispatch
};

struct InEdge {
  std::uint32_t port = 0;
  bool side = false;
  std::atomic<bool> eos{false};
  std::atomic<std::uint64_t> expected{0};
  std::atomic<std::uint64_t> processed{0};
};

class Runtime {
 public:
  Runtime(const ResolvedGraph& g, const RunOptions& o) : graph(g), options(o) {}
  const ResolvedGraph& graph;
  const RunOptions& options;
  flow::graph tbb_graph;
  std::unique_ptr<TraceRecorder> trace;
  std::atomic<bool> cancelled{false};
  std::atomic<bool> running{false};  // every node open, sources activated
  std::mutex error_mutex;
  std::string error;
  int error_code = 0;
  std::atomic<std::uint64_t> expected_records{0};
  int threads = 1;
  std::unordered_map<std::string, std::size_t> index_of;  // node id -> index
  std::mutex progress_mutex;
  std::vector<NodeProgress> progress;  // per node, guarded by progress_mutex

  void note_progress(std::string_view id, const ProgressReport& report) {
    auto it = index_of.find(std::string(id));
    if (it != index_of.end()) {
      std::int64_t now = TraceRecorder::now_ns();
      std::lock_guard<std::mutex> lock(progress_mutex);
      NodeProgress& p = progress[it->second];
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

  bool stop_requested() const { return options.stop && options.stop->load(std::memory_order_relaxed); }

  void fail(std::size_t node, const char* phase, std::exception_ptr ex) {
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
};

class NodeRuntime final : public NodeContext {
 public:
  NodeRuntime(Runtime& rt, std::size_t index, std::unique_ptr<Node> node, bool acts_as_source, bool replaying,
              std::shared_ptr<OutputTap> tap)
      : rt_(rt), index_(index), rn_(rt.graph.nodes[index]), node_(std::move(node)), source_(acts_as_source),
        replaying_(replaying), tap_(std::move(tap)), rng_(rn_.seed) {
    parallel_ = rn_.type->concurrency == Concurrency::parallel && !source_;
  }

  // --- NodeContext -------------------------------------------------------------------------
  const std::string& id() const override { return rn_.id(); }
  const Params& params() const override { return rn_.params; }
  std::uint64_t seed() const override { return rn_.seed; }
  Rng& rng() override { return rng_; }
  RecordPtr side(std::size_t port) const override {
    std::lock_guard<std::mutex> lock(side_mutex_);
    return port < side_values_.size() ? side_values_[port] : nullptr;
  }
  const PortSchema& input_schema(std::size_t port) const override { return rn_.input_schemas.at(port); }
  const PortSchema& output_schema(std::size_t port) const override { return rn_.output_schemas.at(port); }
  bool input_connected(std::size_t port) const override { return !rn_.in_edges.at(port).empty(); }
  bool output_connected(std::size_t port) const override { return !rn_.out_edges.at(port).empty(); }
  int threads() const override { return rt_.threads; }
  bool stop_requested() const override { return rt_.stop_requested(); }
  void set_expected_items(std::uint64_t n) override {
    if (source_) rt_.expected_records.fetch_add(n);
  }
  const std::string& graph_file() const override { return rt_.graph.spec.file; }
  const Registry& registry() const override { return *rt_.graph.registry; }
  std::unique_ptr<Component> make_component(const std::string& param) const override {
    if (!rn_.params.has(param)) return nullptr;
    return rt_.graph.registry->instantiate(rn_.params.value(param), derive_seed(rn_.seed, param),
                                           cat("node '", id(), "' param '", param, "'"));
  }
  void done_consuming() override { stop_consuming(false); }
  bool output_wanted() const override { return !unneeded_.load(std::memory_order_relaxed); }

  // --- wiring ------------------------------------------------------------------------------
  void build() {
    const std::size_t inputs = rn_.type->inputs.size();
    side_values_.resize(inputs);
    outs_.resize(rn_.type->outputs.size());
    // Stream records wait for the first value of every connected side input, optional ones too
    // (an optional side input may be left unconnected, but once connected the node expects its
    // value, e.g. a photo table to look ids up in); an optional one that ends without a value
    // releases them. A node replayed from its cache has no inputs wired, so it waits for none.
    side_released_.assign(inputs, false);
    for (std::size_t p = 0; p < inputs && !replaying_; ++p)
      if (rn_.type->inputs[p].side && !rn_.in_edges[p].empty()) ++sides_missing_;
    std::size_t stream_edges = 0;
    for (std::size_t p = 0; p < inputs; ++p)
      if (!rn_.type->inputs[p].side) stream_edges += rn_.in_edges[p].size();
    // A parallel node fed by several stream edges gets a serial gate that merges them into one
    // numbered stream, so its outputs can be re-sequenced.
    gated_ = parallel_ && stream_edges > 1;
    if (gated_) {
      in_edges_.push_back(std::make_unique<InEdge>());  // logical edge 0: the gate's output
      gate_edges_ = stream_edges;
    }
    auto concurrency = parallel_ ? flow::unlimited : flow::serial;
    inbox_ = std::make_unique<flow::function_node<Message, flow::continue_msg>>(
        rt_.tbb_graph, concurrency, [this](const Message& m) {
          on_message(m);
          return flow::continue_msg();
        });
    if (gated_)
      gate_ = std::make_unique<flow::function_node<Message, flow::continue_msg>>(
          rt_.tbb_graph, flow::serial, [this](const Message& m) {
            on_gate(m);
            return flow::continue_msg();
          });
    if (source_) {
      source_state_->cap = rn_.spec->in_flight > 0 ? rn_.spec->in_flight : rt_.graph.spec.max_in_flight;
      source_state_->low = source_state_->cap / 2;
      pump_ = std::make_unique<flow::function_node<int, flow::continue_msg>>(rt_.tbb_graph, flow::serial, [this](int) {
        pump();
        return flow::continue_msg();
      });
      source_state_->wake = [this] { pump_->try_put(0); };
    }
  }

  // Registers an incoming edge; returns (logical edge index, via gate).
  std::pair<std::uint32_t, bool> add_in_edge(std::uint32_t port) {
    bool side = rn_.type->inputs[port].side;
    if (gated_ && !side) return {0, true};
    auto e = std::make_unique<InEdge>();
    e->port = port;
    e->side = side;
    in_edges_.push_back(std::move(e));
    return {static_cast<std::uint32_t>(in_edges_.size() - 1), false};
  }

  void connect(std::size_t out_port, NodeRuntime* dst, std::uint32_t dst_port) {
    auto [edge, via_gate] = dst->add_in_edge(dst_port);
    OutEdge oe;
    oe.dst = dst;
    oe.dst_port = dst_port;
    oe.dst_edge = edge;
    oe.via_gate = via_gate;
    oe.side = dst->rn_.type->inputs[dst_port].side;
    outs_[out_port].push_back(oe);
    if (!oe.side && std::find(dst->producers_.begin(), dst->producers_.end(), this) == dst->producers_.end())
      dst->producers_.push_back(this);
  }

  // --- early stop: consumers done, producers stop -----------------------------------------
  // This node takes no more stream records; `cut_short`: because its own consumers are done (its
  // output is then incomplete), not by its own choice. Producers whose every stream consumer is
  // now done stop in turn.
  void stop_consuming(bool cut_short) {
    if (cut_short) cut_short_.store(true);
    if (consuming_done_.exchange(true)) return;
    for (NodeRuntime* p : producers_) p->consumer_stopped();
  }

  void consumer_stopped() {
    if (unneeded_.load() || closed_.load()) return;  // a node that has closed gave its whole output
    std::size_t stream_edges = 0;
    for (const auto& port : outs_)
      for (const OutEdge& oe : port) {
        if (oe.side) continue;
        if (!oe.dst->consuming_done_.load()) return;
        ++stream_edges;
      }
    if (stream_edges == 0 || unneeded_.exchange(true)) return;
    if (source_) {
      log_info(id(), "every consumer is done: stopping after ", records_out_.load(), " records");
      // A parked pump wakes to finish; before the run starts, its first turn finishes instead.
      if (rt_.running.load()) pump_->try_put(0);
    } else {
      log_debug(id(), "every consumer is done: dropping its remaining input");
      stop_consuming(true);
    }
  }

  void open() {
    auto t0 = TraceRecorder::now_ns();
    try {
      CallTimer timed(*this, CallTimer::every_call);
      node_->open(*this);
    } catch (...) {
      rt_.fail(index_, "open", std::current_exception());
    }
    if (rt_.trace) rt_.trace->span(static_cast<std::uint32_t>(index_), "open", t0, TraceRecorder::now_ns());
  }

  // Called once every node is open and every edge made.
  void activate() {
    if (source_) {
      if (sides_missing_ == 0) pump_->try_put(0);
    } else if (in_edges_.empty()) {
      // Nothing can ever arrive: close right away (a node whose inputs are all optional).
      Message activation;
      activation.eos = true;
      inbox_->try_put(activation);
    }
  }

  void release_sources() { source_state_->done.store(true); }
  std::shared_ptr<SourceState> source_state() const { return source_state_; }
  bool finished() const { return finished_.load(); }
  bool closed() const { return closed_.load(); }  // close() has returned: the node has ended
  std::string unfinished_reason() const {
    std::string s;
    for (std::size_t i = 0; i < in_edges_.size(); ++i) {
      const InEdge& e = *in_edges_[i];
      s += cat(" [input '", rn_.type->inputs.empty() ? "" : rn_.type->inputs[e.port].name, "': ",
               e.eos.load() ? "ended" : "open", ", ", e.processed.load(), "/", e.expected.load(), "]");
    }
    return s;
  }
  NodeStats stats() const {
    NodeStats st;
    st.id = id();
    st.records_in = records_in_.load();
    st.records_out = records_out_.load();
    st.busy_s = static_cast<double>(busy_estimate_ns()) / 1e9;
    const double wall_sampled = static_cast<double>(wall_sampled_ns_.load());
    // An estimate: kept to the microsecond, which is all the sampling can claim.
    if (wall_sampled > 0)
      st.cpu_s = std::round(st.busy_s * static_cast<double>(cpu_sampled_ns_.load()) / wall_sampled * 1e6) / 1e6;
    st.mode = replaying_ ? "replay" : "run";
    st.stopped_early = cut_short_.load() || unneeded_.load();
    st.cache_write = tap_ != nullptr;
    return st;
  }
  // Busy time up to `now`, counting calls still running (a trainer's epochs replayed inside one
  // close() call would otherwise show as idle until the call returns).
  std::int64_t busy_ns(std::int64_t now) const {
    const std::int64_t running = running_calls_.load(std::memory_order_relaxed);
    const std::int64_t started = running_start_sum_.load(std::memory_order_relaxed);
    return busy_estimate_ns() + std::max<std::int64_t>(0, running * now - started);
  }
  // Timed calls' wall time, plus the short calls' share estimated from those sampled (CallTimer).
  std::int64_t busy_estimate_ns() const {
    const std::uint64_t sampled = sampled_calls_.load(std::memory_order_relaxed);
    const std::uint64_t short_calls = calls_.load(std::memory_order_relaxed) - timed_calls_.load(std::memory_order_relaxed);
    const double per_short_call =
        sampled ? static_cast<double>(sampled_wall_ns_.load(std::memory_order_relaxed)) / static_cast<double>(sampled) : 0;
    return busy_ns_.load(std::memory_order_relaxed) +
           static_cast<std::int64_t>(std::llround(per_short_call * static_cast<double>(short_calls)));
  }
  bool parallel() const { return parallel_; }
  // Records a source (or a replayed node) has emitted.
  std::uint64_t source_records() const { return source_ ? records_out_.load(std::memory_order_relaxed) : 0; }
  void deliver(const Message& m, bool via_gate) {
    if (via_gate) gate_->try_put(m);
    else inbox_->try_put(m);
  }

 private:
  // Adds the duration of one call into the node's body to its busy time (NodeStats). Two clock
  // reads and a handful of atomic updates cost about as much as a small node's whole call, so
  // produce and process calls that the last timed call predicts to be short (under 20 us) are
  // timed one in 64, picked by Fibonacci hashing of the call's index so that no periodic pattern
  // in a node's calls (a step every 4th batch) aliases with the sampling; busy time then counts
  // each untimed short call as the sampled short calls' mean. Calls predicted long, and open,
  // on_side and close, are timed exactly and count as running while they run (the progress
  // line's busy share). Thread CPU time costs a system call (about half a microsecond in a VM):
  // taken on long calls and on every 8th sampled one, for the ratio that scales busy time to CPU
  // time.
  class CallTimer {
   public:
    enum Kind { every_call, sampled };
    CallTimer(NodeRuntime& n, Kind kind) : n_(n) {
      if (kind == sampled) {
        // Only a parallel node's process calls overlap (a source's produce calls come from its
        // serial pump; on_side and close are timed as every_call).
        const std::uint64_t call = n_.parallel_ ? n_.calls_.fetch_add(1, std::memory_order_relaxed)
                                                : n_.calls_.load(std::memory_order_relaxed);
        if (!n_.parallel_) n_.calls_.store(call + 1, std::memory_order_relaxed);
        if (n_.last_call_ns_.load(std::memory_order_relaxed) < kShortCallNs) {
          if ((call * 0x9E3779B97F4A7C15ull) >> 58 != 0) {  // 63 in 64 short calls go untimed
            mode_ = Mode::untimed;
            return;
          }
          mode_ = Mode::sample;
        } else {
          n_.timed_calls_.fetch_add(1, std::memory_order_relaxed);
        }
      }
      t0_ = TraceRecorder::now_ns();
      if (mode_ == Mode::exact) {
        n_.running_start_sum_.fetch_add(t0_, std::memory_order_relaxed);
        n_.running_calls_.fetch_add(1, std::memory_order_relaxed);
        c0_ = thread_cpu_ns();
      } else if (n_.sampled_calls_.load(std::memory_order_relaxed) % 8 == 0) {
        c0_ = thread_cpu_ns();
      }
    }
    ~CallTimer() {
      if (mode_ == Mode::untimed) return;
      const std::int64_t wall = TraceRecorder::now_ns() - t0_;
      if (mode_ == Mode::exact) {
        n_.busy_ns_.fetch_add(wall, std::memory_order_relaxed);
        n_.running_calls_.fetch_sub(1, std::memory_order_relaxed);
        n_.running_start_sum_.fetch_sub(t0_, std::memory_order_relaxed);
      } else {
        n_.sampled_wall_ns_.fetch_add(wall, std::memory_order_relaxed);
        n_.sampled_calls_.fetch_add(1, std::memory_order_relaxed);
      }
      n_.last_call_ns_.store(wall, std::memory_order_relaxed);
      if (c0_ >= 0) {
        n_.cpu_sampled_ns_.fetch_add(thread_cpu_ns() - c0_, std::memory_order_relaxed);
        n_.wall_sampled_ns_.fetch_add(wall, std::memory_order_relaxed);
      }
    }
    CallTimer(const CallTimer&) = delete;
    CallTimer& operator=(const CallTimer&) = delete;

   private:
    static constexpr std::int64_t kShortCallNs = 20000;
    enum class Mode { exact, sample, untimed };
    NodeRuntime& n_;
    Mode mode_ = Mode::exact;
    std::int64_t t0_ = 0;
    std::int64_t c0_ = -1;
  };

  class Emit final : public Emitter {
   public:
    // `source`: the in-flight count the outputs join (that of the message being handled; a
    // source node's own for the records it produces).
    Emit(NodeRuntime& n, std::uint64_t seq, SourceState* source, std::vector<Output>* capture,
         HeldCount* held = nullptr)
        : node_(n), seq_(seq), source_(source), capture_(capture), held_(held) {}
    void emit(std::size_t port, RecordPtr record) override {
      if (port >= node_.outs_.size())
        throw Error(cat("emitted on output ", port, " but ", node_.rn_.type->name, " has ", node_.outs_.size(), " outputs"));
      if (!record) throw Error("emitted a null record");
      if (capture_) {
        capture_->push_back(Output{port, std::move(record)});
        return;
      }
      if (node_.source_) ++seq_;
      node_.dispatch(port, std::move(record), source_, held_);
    }
    std::uint64_t sequence() const override { return seq_; }

   private:
    NodeRuntime& node_;
    std::uint64_t seq_;
    SourceState* source_;
    std::vector<Output>* capture_;
    HeldCount* held_;
  };

  // `held`: the count of the message being handled, which the first message sent may take over.
  void dispatch(std::size_t port, RecordPtr record, SourceState* source, HeldCount* held = nullptr) {
    bump(records_out_, source_ || parallel_);
    if (tap_) tap_->on_record(port, record);
    std::vector<OutEdge>& edges = outs_[port];
    Message m;
    m.record = std::move(record);
    m.source = source;
    for (OutEdge& oe : edges) {
      if (!oe.side && oe.dst->consuming_done_.load(std::memory_order_relaxed)) continue;  // not wanted
      if (source) {
        if (held) held->count_send(source);
        else source->acquire();
      }
      m.seq = oe.sent++;
      m.port = oe.dst_port;
      m.edge = oe.dst_edge;
      oe.dst->deliver(m, oe.via_gate);
    }
  }

  void send_eos() {
    for (auto& port : outs_)
      for (OutEdge& oe : port) {
        Message m;
        m.eos = true;
        m.count = oe.sent;
        m.port = oe.dst_port;
        m.edge = oe.dst_edge;
        oe.dst->deliver(m, oe.via_gate);
      }
  }

  void on_gate(const Message& in) {
    HeldCount count(in.source);  // the forwarded copy takes the count over
    if (rt_.cancelled.load(std::memory_order_relaxed)) return;
    if (in.eos) {
      if (++gate_eos_ == gate_edges_) {
        Message e;
        e.eos = true;
        e.count = gate_forwarded_;
        inbox_->try_put(e);
      }
      return;
    }
    Message m = in;
    m.seq = gate_forwarded_++;
    m.edge = 0;
    count.take();
    inbox_->try_put(m);
  }

  void on_message(const Message& m) {
    HeldCount count(m.source);
    if (rt_.cancelled.load(std::memory_order_relaxed)) return;
    try {
      if (in_edges_.empty()) {  // the activation message of an input-less node
        try_finish();
        return;
      }
      InEdge& e = *in_edges_[m.edge];
      if (m.eos) {
        e.expected.store(m.count);
        e.eos.store(true);
        // On a parallel node the side value may still be in flight on another task when its
        // EOS is handled: only an edge that carried nothing is known to have ended empty.
        if (e.side && m.count == 0) check_side_ended(e);
        try_finish();
        return;
      }
      if (e.side) {
        on_side_value(e, m);
      } else if (consuming_done_.load(std::memory_order_relaxed)) {
        // Counted as handled, unprocessed: end of stream still arrives when the producers stop.
      } else {
        if (sides_missing_.load() > 0) {
          std::lock_guard<std::mutex> lock(side_mutex_);
          if (sides_missing_.load() > 0) {
            // Held until the side value arrives, the record no longer counts as in flight for
            // its source: the source may be what the side value waits for (a trainer needing
            // all of a stream that also feeds this node), and counting it would stall it.
            pending_.push_back(m);
            pending_.back().source = nullptr;
            return;
          }
        }
        process_stream(m, count);
      }
      bump(e.processed, parallel_);
      try_finish();
    } catch (...) {
      rt_.fail(index_, m.eos ? "close" : "process", std::current_exception());
    }
  }

  // `count` is the message's in-flight count: a parallel node's outputs held for re-sequencing
  // take it over.
  void process_stream(const Message& m, HeldCount& count) {
    bump(records_in_, parallel_);
    auto t0 = rt_.trace ? TraceRecorder::now_ns() : 0;
    if (!parallel_) {
      Emit out(*this, m.seq, m.source, nullptr, &count);
      CallTimer timed(*this, CallTimer::sampled);
      node_->process(m.port, m.record, out);
    } else {
      std::vector<Output> captured;
      Emit out(*this, m.seq, m.source, &captured);
      {
        CallTimer timed(*this, CallTimer::sampled);
        node_->process(m.port, m.record, out);
      }
      resequence(m.seq, std::move(captured), m.source, count);
    }
    if (rt_.trace) rt_.trace->span(static_cast<std::uint32_t>(index_), "process", t0, TraceRecorder::now_ns());
  }

  // Emits a parallel node's outputs in input order: results that arrive early wait in a map,
  // keeping their message's in-flight count until they are sent.
  void resequence(std::uint64_t seq, std::vector<Output> outputs, SourceState* source, HeldCount& count) {
    std::lock_guard<std::mutex> lock(reorder_mutex_);
    if (seq != next_seq_) {
      early_.emplace(seq, std::make_pair(std::move(outputs), count.take()));
      return;
    }
    for (auto& o : outputs) dispatch(o.port, std::move(o.record), source, &count);
    ++next_seq_;
    for (auto it = early_.find(next_seq_); it != early_.end(); it = early_.find(next_seq_)) {
      HeldCount held(it->second.second);
      for (auto& o : it->second.first) dispatch(o.port, std::move(o.record), it->second.second, &held);
      early_.erase(it);
      ++next_seq_;
    }
  }

  void on_side_value(InEdge& e, const Message& m) {
    std::deque<Message> ready;
    {
      std::lock_guard<std::mutex> lock(side_mutex_);
      bool first = !side_values_[e.port];
      side_values_[e.port] = m.record;
      if (first && !side_released_[e.port] && sides_missing_.fetch_sub(1) == 1) ready.swap(pending_);
      side_released_[e.port] = true;
    }
    Emit out(*this, m.seq, m.source, nullptr);  // on_side's outputs count afresh
    auto t0 = rt_.trace ? TraceRecorder::now_ns() : 0;
    {
      CallTimer timed(*this, CallTimer::every_call);
      node_->on_side(e.port, m.record, out);
    }
    if (rt_.trace) rt_.trace->span(static_cast<std::uint32_t>(index_), "side", t0, TraceRecorder::now_ns());
    if (source_ && sides_missing_.load() == 0) pump_->try_put(0);
    // Stream records that waited for this value run now, in arrival order (unless this node is
    // done consuming).
    for (Message& p : ready) {
      if (consuming_done_.load()) {
        bump(in_edges_[p.edge]->processed, parallel_);
        continue;
      }
      HeldCount none(nullptr);  // held records gave their counts back when they were held
      process_stream(p, none);
      bump(in_edges_[p.edge]->processed, parallel_);
    }
  }

  void check_side_ended(const InEdge& e) {
    std::size_t waiting = 0;
    std::deque<Message> ready;
    {
      std::lock_guard<std::mutex> lock(side_mutex_);
      if (side_values_[e.port]) return;
      if (rn_.type->inputs[e.port].optional) {
        // Released once every edge into the port has ended empty: the records go on without it.
        for (const auto& other : in_edges_)
          if (other->port == e.port && (!other->eos.load() || other->expected.load() != 0)) return;
        if (side_released_[e.port]) return;
        side_released_[e.port] = true;
        if (sides_missing_.fetch_sub(1) == 1) ready.swap(pending_);
      } else {
        waiting = pending_.size();
      }
    }
    if (rn_.type->inputs[e.port].optional) {
      if (source_ && sides_missing_.load() == 0) pump_->try_put(0);
      for (Message& p : ready) {
        HeldCount none(nullptr);
        if (!consuming_done_.load()) process_stream(p, none);
        bump(in_edges_[p.edge]->processed, parallel_);
      }
      return;
    }
    throw Error(cat("side input '", rn_.type->inputs[e.port].name, "' ended without a value", 
                    waiting ? cat("; ", waiting, " records waited for it") : ""));
  }

  void try_finish() {
    if (source_) return;  // sources finish from their pump
    for (const auto& e : in_edges_)
      if (!e->eos.load() || e->processed.load() != e->expected.load()) return;
    if (finished_.exchange(true)) return;
    finish();
  }

  void finish() {
    auto t0 = rt_.trace ? TraceRecorder::now_ns() : 0;
    {
      Emit out(*this, 0, nullptr, nullptr);
      CallTimer timed(*this, CallTimer::every_call);
      node_->close(out);
    }
    if (rt_.trace) rt_.trace->span(static_cast<std::uint32_t>(index_), "close", t0, TraceRecorder::now_ns());
    if (tap_) tap_->on_finish(!cut_short_.load() && !unneeded_.load());
    closed_.store(true);
    send_eos();
  }

  void pump() {
    if (rt_.cancelled.load(std::memory_order_relaxed) || finished_.load()) return;
    try {
      // A bounded quantum, then requeue: other sources sharing the pool get their turn.
      for (int quantum = 0; quantum < 256; ++quantum) {
        if (rt_.stop_requested() || exhausted_ || unneeded_.load(std::memory_order_relaxed)) break;
        if (source_state_->in_flight.load(std::memory_order_acquire) >= source_state_->cap) {
          source_state_->parked.store(true);  // sequentially consistent: see SourceState::release
          // Re-check: messages handled between the test and the park would not wake us.
          if (source_state_->in_flight.load() >= source_state_->cap) return;
          if (!source_state_->parked.exchange(false)) return;  // a release already re-queued us
          continue;
        }
        auto t0 = rt_.trace ? TraceRecorder::now_ns() : 0;
        Emit out(*this, produced_, source_state_.get(), nullptr);
        bool more;
        {
          CallTimer timed(*this, CallTimer::sampled);
          more = node_->produce(out);
        }
        produced_ = out.sequence();
        if (rt_.trace) rt_.trace->span(static_cast<std::uint32_t>(index_), "produce", t0, TraceRecorder::now_ns());
        if (!more) exhausted_ = true;
      }
      if (rt_.stop_requested() || exhausted_ || unneeded_.load()) {
        if (!finished_.exchange(true)) finish();
        return;
      }
      pump_->try_put(0);
    } catch (...) {
      rt_.fail(index_, "produce", std::current_exception());
    }
  }

  Runtime& rt_;
  std::size_t index_;
  const ResolvedNode& rn_;
  std::unique_ptr<Node> node_;
  bool source_;
  bool parallel_ = false;
  bool replaying_ = false;
  std::shared_ptr<OutputTap> tap_;
  Rng rng_;

  std::vector<std::unique_ptr<InEdge>> in_edges_;
  std::vector<std::vector<OutEdge>> outs_;
  std::unique_ptr<flow::function_node<Message, flow::continue_msg>> inbox_;
  std::unique_ptr<flow::function_node<Message, flow::continue_msg>> gate_;
  std::unique_ptr<flow::function_node<int, flow::continue_msg>> pump_;
  bool gated_ = false;
  std::size_t gate_edges_ = 0, gate_eos_ = 0;
  std::uint64_t gate_forwarded_ = 0;

  mutable std::mutex side_mutex_;
  std::vector<RecordPtr> side_values_;
  std::atomic<int> sides_missing_{0};
  std::vector<bool> side_released_;  // per input port: no longer counted in sides_missing_
  std::deque<Message> pending_;

  std::mutex reorder_mutex_;
  std::uint64_t next_seq_ = 0;
  std::map<std::uint64_t, std::pair<std::vector<Output>, SourceState*>> early_;

  std::shared_ptr<SourceState> source_state_ = std::make_shared<SourceState>();
  bool exhausted_ = false;
  std::uint64_t produced_ = 0;

  std::atomic<bool> finished_{false};
  // Early stop: the producers of this node's stream inputs; it takes no more stream records;
  // every stream consumer of its outputs is done; its output was cut short by that.
  std::vector<NodeRuntime*> producers_;
  std::atomic<bool> consuming_done_{false}, unneeded_{false}, cut_short_{false};
  std::atomic<bool> closed_{false};  // close() has returned: the output is whole
  std::atomic<std::uint64_t> records_in_{0}, records_out_{0};
  // CallTimer's figures: exactly timed calls' wall time; sampled short calls' count and wall time;
  // produce/process calls made and those of them timed exactly; the CPU-time sample.
  std::atomic<std::int64_t> busy_ns_{0}, sampled_wall_ns_{0}, cpu_sampled_ns_{0}, wall_sampled_ns_{0}, last_call_ns_{0};
  std::atomic<std::uint64_t> calls_{0}, timed_calls_{0}, sampled_calls_{0};
  std::atomic<std::int64_t> running_calls_{0}, running_start_sum_{0};
};

// Progress line on a terminal, drawn below the log (progress.hpp: set_status_line):
//   12s ETA 2m10s (train) | bound by train (97% busy): 45/600 steps 7% loss 0.213 lr 0.001 | 23040 records 1920/s
// The ETA is the bounding stage's, in progress_eta.hpp's sense: of the nodes reporting a known
// total (a trainer's steps, an evaluator's queries), the one whose own ETA is largest; with none,
// the line has no ETA. Source records are counted and rated but never give an ETA: a source's
// count is often unknown, and a trainer ends at its step count whatever waits upstream.
// "Bound by" names the node busiest over the last seconds, its busy time divided by the threads
// it can use (1 for a serial node, every worker for a parallel one): a stage that is busy all the
// time holds up everything before it (sources park at their in-flight cap) and starves
// everything after it. The two may differ (a decoder may be busiest while a trainer's steps are
// what the run waits for).
class Progress {
 public:
  Progress(Runtime& rt, const std::vector<std::unique_ptr<NodeRuntime>>& nodes)
      : rt_(rt), nodes_(nodes), start_(std::chrono::steady_clock::now()), busy_(nodes.size(), 0),
        share_(nodes.size(), 0.0), thread_([this] { loop(); }) {}
  ~Progress() {
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

  // Exponentially smoothed busy share of each node over the last ticks; returns the busiest.
  std::size_t bounding_node(double dt_s) {
    std::size_t best = nodes_.size();
    double best_share = 0;
    const std::int64_t now = TraceRecorder::now_ns();
    for (std::size_t i = 0; i < nodes_.size(); ++i) {
      if (!nodes_[i]) continue;
      std::int64_t busy = nodes_[i]->busy_ns(now);
      double capacity = nodes_[i]->parallel() ? rt_.threads : 1;
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

  std::string line(double secs, double dt) {
    std::size_t bound = bounding_node(dt);
    std::vector<NodeProgress> progress;
    {
      std::lock_guard<std::mutex> lock(rt_.progress_mutex);
      progress = rt_.progress;
    }
    std::vector<StageProgress> stages(progress.size());
    for (std::size_t i = 0; i < progress.size(); ++i) {
      const NodeProgress& p = progress[i];
      // A node that has ended (a trainer stopped early, short of its steps) bounds nothing. Ended
      // is closed, not finished: a trainer holding its inputs trains in close(), after its
      // inputs have finished.
      const bool running = p.reported && nodes_[i] && !nodes_[i]->closed();
      stages[i] = StageProgress{running, p.first_done, p.latest.done, p.latest.total,
                                static_cast<double>(p.first_ns) * 1e-9, static_cast<double>(p.latest_ns) * 1e-9};
    }
    std::string text = duration(secs);
    const RunEta eta = run_eta(stages);
    if (eta.known()) text += cat(" ETA ", duration(eta.seconds), " (", rt_.graph.nodes[eta.stage].id(), ")");
    if (bound < nodes_.size()) {
      text += cat(" | bound by ", rt_.graph.nodes[bound].id(), " (", static_cast<int>(100 * share_[bound]), "% busy)");
      const NodeProgress& p = progress[bound];
      if (p.reported) {
        const ProgressReport& r = p.latest;
        text += cat(": ", r.done);
        if (r.total) text += cat("/", r.total);
        text += " " + (r.unit.empty() ? std::string("items") : r.unit);
        if (r.total) text += cat(" ", (100 * std::min(r.done, r.total)) / r.total, "%");
        for (const auto& [name, v] : r.metrics) text += " " + name + " " + number(v);
      }
    }
    std::uint64_t n = 0;
    for (const auto& node : nodes_)
      if (node) n += node->source_records();
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
  Runtime& rt_;
  const std::vector<std::unique_ptr<NodeRuntime>>& nodes_;
  std::chrono::steady_clock::time_point start_;
  std::vector<std::int64_t> busy_;
  std::vector<double> share_;
  std::mutex m_;
  std::condition_variable cv_;
  bool done_ = false;
  std::thread thread_;
};

}  // namespace

bool tune_process_allocator() {
  static const bool applied = [] {
    const char* tunables = std::getenv("GLIBC_TUNABLES");
    const char* system = std::getenv("EMBEDFLOW_SYSTEM_MALLOC");
    if ((tunables && std::strstr(tunables, "glibc.malloc.")) || (system && std::strcmp(system, "1") == 0))
      return false;
#if defined(__GLIBC__)
    constexpr int kMmapThreshold = 32 << 20;  // glibc refuses more than HEAP_MAX_SIZE / 2
    constexpr int kTrimThreshold = 1 << 30;
    return mallopt(M_MMAP_THRESHOLD, kMmapThreshold) == 1 && mallopt(M_TRIM_THRESHOLD, kTrimThreshold) == 1;
#else
    return false;
#endif
  }();
  return applied;
}

RunResult run_graph(const ResolvedGraph& graph, const RunOptions& options) {
  tune_process_allocator();
  RunResult result;
  // Output files committed while the run drains after SIGINT/SIGTERM go to `<path>.partial`
  // (atomic_file.hpp), so an interrupted run never replaces a complete file.
  struct InterruptScope {
    explicit InterruptScope(const std::atomic<bool>* stop) { set_output_interrupt_flag(stop); }
    ~InterruptScope() { set_output_interrupt_flag(nullptr); }
  } interrupt_scope(options.stop);
  int threads = options.threads > 0 ? options.threads : static_cast<int>(std::thread::hardware_concurrency());
  if (threads < 1) threads = 1;
  tbb::global_control limit(tbb::global_control::max_allowed_parallelism, static_cast<std::size_t>(threads));
  auto t_start = std::chrono::steady_clock::now();

  Runtime rt(graph, options);
  rt.threads = threads;
  rt.progress.resize(graph.nodes.size());
  for (std::size_t i = 0; i < graph.nodes.size(); ++i) rt.index_of[graph.nodes[i].id()] = i;
  // Nodes report progress through the SDK (progress.hpp); this run listens until it ends.
  ProgressSink previous_sink =
      set_progress_sink([&rt](std::string_view id, const ProgressReport& r) { rt.note_progress(id, r); });
  if (!options.trace_path.empty()) rt.trace = std::make_unique<TraceRecorder>();

  // Messages may outlive the node that sent them (left in queues of a cancelled graph), so
  // source states are kept until every node is gone.
  std::vector<std::shared_ptr<SourceState>> source_states;
  std::vector<std::unique_ptr<NodeRuntime>> nodes(graph.nodes.size());
  for (std::size_t i = 0; i < graph.nodes.size(); ++i) {
    NodePlan* plan = options.plans ? &(*options.plans)[i] : nullptr;
    if (plan && plan->mode == NodePlan::Mode::skip) continue;
    const ResolvedNode& rn = graph.nodes[i];
    std::unique_ptr<Node> body;
    bool acts_as_source = rn.type->source;
    bool replaying = plan && plan->mode == NodePlan::Mode::replay;
    if (replaying) {
      body = std::move(plan->replay);
      acts_as_source = true;
    } else {
      try {
        body = rn.type->create();
      } catch (...) {
        rt.fail(i, "create", std::current_exception());
        break;
      }
    }
    nodes[i] = std::make_unique<NodeRuntime>(rt, i, std::move(body), acts_as_source, replaying,
                                              plan ? plan->tap : nullptr);
    nodes[i]->build();
    source_states.push_back(nodes[i]->source_state());
  }
  if (!rt.cancelled) {
    for (const ResolvedEdge& e : graph.edges) {
      if (!nodes[e.from.node] || !nodes[e.to.node]) continue;  // an edge into a skipped or replayed part
      // A replayed node has no inputs: its upstream edges are not wired.
      NodePlan* plan = options.plans ? &(*options.plans)[e.to.node] : nullptr;
      if (plan && plan->mode == NodePlan::Mode::replay) continue;
      nodes[e.from.node]->connect(e.from.port, nodes[e.to.node].get(), static_cast<std::uint32_t>(e.to.port));
    }
    // Open in topological order so a node may rely on its producers being ready. What the nodes
    // log meanwhile is held and printed when all are open, an info line that several logged word
    // for word printed once naming them (log_summary.hpp).
    LogSummaryScope summary;
    for (std::size_t i : graph.order) {
      if (!nodes[i] || rt.cancelled) continue;
      nodes[i]->open();
    }
  }
  {
    std::unique_ptr<Progress> progress;
    if (options.progress && !rt.cancelled) progress = std::make_unique<Progress>(rt, nodes);
    try {
      rt.running.store(true);
      if (!rt.cancelled)
        for (std::size_t i : graph.order)
          if (nodes[i]) nodes[i]->activate();
      rt.tbb_graph.wait_for_all();
    } catch (...) {
      rt.fail(0, "run", std::current_exception());
    }
  }
  for (auto& n : nodes)
    if (n) n->release_sources();
  set_progress_sink(std::move(previous_sink));

  result.seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - t_start).count();
  for (const auto& n : nodes)
    if (n) result.source_records += n->source_records();
  for (std::size_t i = 0; i < nodes.size(); ++i) {
    NodeStats st;
    if (nodes[i]) {
      st = nodes[i]->stats();
    } else {
      st.id = graph.nodes[i].id();
      st.mode = "skip";
    }
    st.reported_progress = rt.progress[i].reported;
    st.last_progress = rt.progress[i].latest;
    result.stats.push_back(std::move(st));
  }
  if (rt.cancelled) {
    result.exit_code = rt.error_code ? rt.error_code : 1;
    result.error = rt.error;
  } else {
    for (std::size_t i = 0; i < nodes.size(); ++i)
      if (nodes[i] && !nodes[i]->finished()) {
        result.exit_code = 1;
        result.error = cat(node_origin(graph, i), " never reached end of stream:", nodes[i]->unfinished_reason());
        break;
      }
    if (result.exit_code == 0 && rt.stop_requested()) result.exit_code = 130;
  }
  if (rt.trace) {
    std::vector<std::string> names, types;
    for (const auto& n : graph.nodes) {
      names.push_back(n.id());
      types.push_back(n.type ? n.type->name : "");
    }
    rt.trace->write(options.trace_path, names, types);
    if (rt.trace->dropped())
      log_warning("trace", rt.trace->dropped(), " events past the first 4M were not recorded");
  }
  nodes.clear();
  return result;
}

}  // namespace embedflow::engine
