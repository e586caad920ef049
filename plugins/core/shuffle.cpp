// core.shuffle — seeded shuffle through a bounded buffer (as tf.data's shuffle): the first
// `buffer_size` records fill the buffer; then each arriving record replaces a uniformly chosen
// buffered one, which is emitted. At end of stream the rest leave in random order. A buffer at
// least as large as the stream gives a uniform permutation; memory is bounded by the buffer.
// A smaller buffer only mixes neighbours (a record leaves on average buffer_size arrivals after
// it came), so a stream sorted by class or place stays sorted at that scale; close() says so.
//
// Inputs: in   Outputs: out (same records, permuted)
//
// Example graph: `embedflow inspect core.shuffle`.
#include <algorithm>

#include "core_types.hpp"

namespace embedflow::core {
namespace {

class Shuffle final : public Node {
 public:
  void open(NodeContext& ctx) override {
    capacity_ = static_cast<std::size_t>(ctx.params().integer("buffer_size"));
    id_ = ctx.id();
    rng_ = &ctx.rng();
    // Grows with the records that arrive: buffer_size may exceed what the stream holds.
    buffer_.reserve(std::min<std::size_t>(capacity_, 4096));
  }
  void process(std::size_t, const RecordPtr& in, Emitter& out) override {
    ++seen_;
    if (buffer_.size() < capacity_) {
      buffer_.push_back(in);
      return;
    }
    std::uniform_int_distribution<std::size_t> pick(0, capacity_ - 1);
    std::size_t j = pick(*rng_);
    out.emit(std::move(buffer_[j]));
    buffer_[j] = in;
  }
  void close(Emitter& out) override {
    if (seen_ > capacity_)
      log_info(id_, "partial shuffle: ", seen_, " records through a buffer of ", capacity_,
               " (records move about buffer_size places; buffer_size >= ", seen_, " gives a uniform permutation)");
    std::shuffle(buffer_.begin(), buffer_.end(), *rng_);
    for (auto& r : buffer_) out.emit(std::move(r));
    buffer_.clear();
  }

 private:
  std::size_t capacity_ = 1, seen_ = 0;
  std::string id_;
  Rng* rng_ = nullptr;
  std::vector<RecordPtr> buffer_;
};

}  // namespace

NodeType shuffle_type() {
  return NodeTypeBuilder("core.shuffle")
      .doc("Seeded shuffle through a bounded buffer of buffer_size records.")
      .example(R"(nodes:
  numbers: {type: core.range, params: {count: 100}}
  mixed:   {type: core.shuffle, params: {buffer_size: 32}}
  show:    {type: core.sink, params: {mode: print}}
edges: [numbers.out -> mixed.in, mixed.out -> show.in]
)")
      .param(Param::integer("buffer_size").default_value(1024).min(1).doc("records held; larger = closer to a uniform permutation"))
      .input("in", "*")
      .output("out", "*")
      .forward("in", "out")
      .create<Shuffle>();
}

}  // namespace embedflow::core
