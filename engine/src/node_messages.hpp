// What nodes send each other on the flow graph, and the edges it travels on, as the runtime's
// nodes keep them (node_runtime.hpp). Not part of the engine's interface.
#pragma once

#include <atomic>
#include <cstddef>
#include <cstdint>

#include "embedflow/record.hpp"
#include "in_flight.hpp"

namespace embedflow::engine::exec {

class NodeRuntime;

// oneTBB's try_put takes a message by const reference and copies it into its task (or its queue,
// then the task), and the copy never reads the original again. Copying a Message therefore takes
// the record over instead of sharing it: a record passes from node to node without the two
// atomic reference-count updates per hop a shared copy would cost. A sender that keeps using a
// record after sending it sends a Message holding its own shared copy (NodeRuntime::dispatch).
struct Message {
  mutable RecordPtr record;
  SourceState* source = nullptr;  // counted in its in_flight until handled
  std::uint64_t seq = 0;
  std::uint32_t port = 0;  // destination input port
  std::uint32_t edge = 0;  // destination's logical incoming edge
  bool eos = false;
  std::uint64_t count = 0;  // eos: messages sent on the edge before it

  Message() = default;
  Message(const Message& other) { *this = other; }
  Message& operator=(const Message& other) {
    if (this == &other) return *this;
    record = std::move(other.record);
    source = other.source;
    seq = other.seq;
    port = other.port;
    edge = other.edge;
    eos = other.eos;
    count = other.count;
    return *this;
  }
  Message(Message&&) = default;
  Message& operator=(Message&&) = default;
};

// One record a parallel node emitted, held until its turn in input order.
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

// End-of-stream bookkeeping of one logical incoming edge: it has ended once its EOS has come and
// as many of its messages have been handled as the EOS says were sent.
struct InEdge {
  std::uint32_t port = 0;
  bool side = false;
  std::atomic<bool> eos{false};
  std::atomic<std::uint64_t> expected{0};
  std::atomic<std::uint64_t> processed{0};
};

}  // namespace embedflow::engine::exec
