// core.sink — the end of a stream: counts records, or prints them one per line (to stdout or
// to the file `out`). `expect` turns it into an assertion: a different count at end of stream
// is an error. `delay_us` makes it a deliberately slow consumer (for back-pressure tests).
//
// Inputs: in   Outputs: none
//
// Example graph: `embedflow inspect core.sink`.
#include <chrono>
#include <cstdio>
#include <fstream>
#include <iostream>

#include "core_types.hpp"

namespace embedflow::core {
namespace {

class Sink final : public Node {
 public:
  void open(NodeContext& ctx) override {
    const Params& p = ctx.params();
    print_ = p.string("mode") == "print";
    if (p.has("expect")) expect_ = p.integer("expect");
    delay_ = std::chrono::microseconds(p.integer("delay_us"));
    if (p.has("out")) {
      path_ = p.string("out");
      file_.open(path_);
      if (!file_) throw DataError(cat("cannot write '", path_, "'"));
    }
  }
  void process(std::size_t, const RecordPtr& in, Emitter&) override {
    ++count_;
    if (delay_.count() > 0) {
      // Busy-wait: sleeping would hand the core to the producer and hide the back-pressure.
      auto until = std::chrono::steady_clock::now() + delay_;
      while (std::chrono::steady_clock::now() < until) {
      }
    }
    if (!print_) return;
    const std::string line = format_record(*in) + "\n";
    if (file_.is_open()) file_ << line;
    else std::cout << line;
  }
  void close(Emitter&) override {
    if (!print_) {
      if (file_.is_open()) file_ << "{\"count\": " << count_ << "}\n";
      else std::cout << "count: " << count_ << "\n";
    }
    if (file_.is_open()) {
      file_.close();
      if (!file_) throw DataError(cat("error writing '", path_, "'"));
    }
    std::cout.flush();
    if (expect_ >= 0 && count_ != expect_)
      throw DataError(cat("expected ", expect_, " records, received ", count_));
  }

 private:
  bool print_ = false;
  std::int64_t expect_ = -1, count_ = 0;
  std::chrono::microseconds delay_{0};
  std::string path_;
  std::ofstream file_;
};

}  // namespace

NodeType sink_type() {
  return NodeTypeBuilder("core.sink")
      .doc("Counts or prints records; `expect` asserts the count at end of stream.")
      .example(R"(nodes:
  numbers: {type: core.range, params: {count: 3}}
  show:    {type: core.sink, params: {mode: print}}
edges: [numbers.out -> show.in]
)")
      .param(Param::choice("mode", {"count", "print"}).default_value("count").doc("count records, or print one line each"))
      .param(Param::path("out").optional().not_fingerprinted().doc("write to this file instead of stdout"))
      .param(Param::integer("expect").optional().min(0).doc("fail unless exactly this many records arrive"))
      .param(Param::integer("delay_us").default_value(0).min(0).not_fingerprinted().doc("busy-wait per record (a slow consumer)"))
      .input("in", "*")
      .create<Sink>();
}

}  // namespace embedflow::core
