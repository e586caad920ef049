// Captures for in-process tests: the log lines and the std::cout text written while an object
// lives. NodeRunner and the engine's GraphRunner use them around every call into a node, so a
// test can check what a node logged ("partial shuffle: ...") or printed (core.sink) without
// running the CLI in a child process.
#pragma once

#include <memory>
#include <mutex>
#include <streambuf>
#include <string>

#include "embedflow/log.hpp"

namespace embedflow::testing {

// Collects every log line ("[info] node: message\n") while it lives, instead of stderr. Nested
// captures forward to the one outside them, so that one sees the lines too. Restores the
// previous sink when destroyed (captures must end in reverse order of their start).
class LogCapture {
 public:
  LogCapture();
  ~LogCapture();
  LogCapture(const LogCapture&) = delete;
  LogCapture& operator=(const LogCapture&) = delete;
  std::string text() const;

 private:
  struct Lines {
    mutable std::mutex mutex;
    std::string text;
  };
  std::shared_ptr<Lines> lines_;
  LogSink previous_;
};

// Collects what is written to std::cout while it lives (thread-safe: nodes on several worker
// threads may print). Output through printf or the file descriptor is not seen.
class CoutCapture {
 public:
  CoutCapture();
  ~CoutCapture();
  CoutCapture(const CoutCapture&) = delete;
  CoutCapture& operator=(const CoutCapture&) = delete;
  std::string text() const;

 private:
  class Buffer;
  std::unique_ptr<Buffer> buffer_;
  std::streambuf* previous_ = nullptr;
};

}  // namespace embedflow::testing
