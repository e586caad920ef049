// Node types for engine tests only: a vector source with a dim parameter, a two-input node
// that requires equal dims, a node that throws at a given record, and a parallel node with
// random per-record delays (to provoke out-of-order completion), and a counted line reader (cache
// tests: the log says how often it ran).
#include <chrono>
#include <fstream>
#include <thread>

#include <embedflow/embedflow.hpp>

using namespace embedflow;

namespace {

class Vectors final : public Node {
 public:
  void open(NodeContext& ctx) override {
    count_ = ctx.params().integer("count");
    dim_ = ctx.params().integer("dim");
    batch_ = ctx.params().integer("batch");
  }
  bool produce(Emitter& out) override {
    if (done_ >= count_) return false;
    std::vector<float> v(static_cast<std::size_t>(batch_ * dim_), 1.0f);
    out.emit(Record().set("embedding", Array::from_vector<float>({batch_, dim_}, std::move(v))));
    ++done_;
    return done_ < count_;
  }

 private:
  std::int64_t count_ = 0, dim_ = 0, batch_ = 0, done_ = 0;
};

class PairCheck final : public Node {
 public:
  void process(std::size_t port, const RecordPtr& r, Emitter& out) override {
    out.emit(Record().set("port", Array::scalar<std::int64_t>(static_cast<std::int64_t>(port))));
  }
};

class Explode final : public Node {
 public:
  void open(NodeContext& ctx) override { at_ = ctx.params().integer("at"); }
  void process(std::size_t, const RecordPtr& r, Emitter& out) override {
    if (seen_++ == at_) throw DataError(cat("record ", at_, " is poisoned"));
    out.emit(r);
  }

 private:
  std::int64_t at_ = 0, seen_ = 0;
};

class Jittery final : public Node {
 public:
  void open(NodeContext& ctx) override { seed_ = ctx.seed(); }
  void process(std::size_t, const RecordPtr& r, Emitter& out) override {
    Rng rng(derive_seed(seed_, out.sequence()));
    std::this_thread::sleep_for(std::chrono::microseconds(rng() % 300));
    out.emit(r);
  }

 private:
  std::uint64_t seed_ = 0;
};

// Emits one record per line of a text file, {n: i64, text: str, value: f64}; appends "run" to
// `log` on open so a test can count how often the node actually ran.
class Lines final : public Node {
 public:
  void open(NodeContext& ctx) override {
    const std::string& path = ctx.params().string("path");
    in_.open(path);
    if (!in_) throw DataError(cat(path, ": cannot open"));
    if (ctx.params().has("log")) std::ofstream(ctx.params().string("log"), std::ios::app) << "run\n";
    delay_us_ = ctx.params().integer("delay_us");
  }
  bool produce(Emitter& out) override {
    std::string line;
    if (!std::getline(in_, line)) return false;
    if (delay_us_) std::this_thread::sleep_for(std::chrono::microseconds(delay_us_));
    out.emit(Record()
                 .set("n", Array::scalar<std::int64_t>(n_))
                 .set("text", Array::string_scalar(line))
                 .set("value", Array::scalar<double>(0.5 * static_cast<double>(n_))));
    ++n_;
    return true;
  }

 private:
  std::ifstream in_;
  std::int64_t n_ = 0, delay_us_ = 0;
};

void register_types(Registry& r) {
  r.add(NodeTypeBuilder("testing.lines")
            .doc("Emits one record per line of a text file; appends 'run' to `log` when it opens.")
            .source()
            .param(Param::path("path").doc("text file"))
            .param(Param::path("log").optional().not_fingerprinted().doc("append 'run' here on open"))
            .param(Param::integer("delay_us").default_value(0).min(0).not_fingerprinted().doc("sleep per line"))
            .output("out", "n: i64[], text: str[], value: f64[]")
            .create<Lines>());
  r.add(NodeTypeBuilder("testing.vectors")
            .doc("Emits count batches of ones, shape [batch, dim].")
            .source()
            .param(Param::integer("count").default_value(3).min(0))
            .param(Param::integer("dim").min(1))
            .param(Param::integer("batch").default_value(2).min(1))
            .output("out", "embedding: f32[B,$dim]")
            .create<Vectors>());
  r.add(NodeTypeBuilder("testing.pair_check")
            .doc("Requires the same D on both inputs.")
            .input("a", "embedding: f32[B,D]")
            .input("b", "embedding: f32[B,D]")
            .output("out", "port: i64[]")
            .create<PairCheck>());
  r.add(NodeTypeBuilder("testing.explode")
            .doc("Throws at record `at`.")
            .param(Param::integer("at").min(0))
            .input("in", "*")
            .output("out", "*")
            .forward("in", "out")
            .create<Explode>());
  r.add(NodeTypeBuilder("testing.jittery")
            .doc("Parallel pass-through with random delays.")
            .parallel()
            .input("in", "*")
            .output("out", "*")
            .forward("in", "out")
            .create<Jittery>());
}

}  // namespace

EMBEDFLOW_PLUGIN("testing", "0.0.1", "", register_types)
