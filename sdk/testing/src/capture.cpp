#include "embedflow/testing/capture.hpp"

#include <iostream>

namespace embedflow::testing {

LogCapture::LogCapture() : lines_(std::make_shared<Lines>()) {
  // The previous sink is read only here and in the destructor; the lambda keeps its own copy.
  previous_ = set_log_sink(nullptr);
  LogSink outer = previous_;
  std::shared_ptr<Lines> lines = lines_;
  set_log_sink([lines, outer](LogLevel level, std::string_view line) {
    {
      std::lock_guard<std::mutex> lock(lines->mutex);
      lines->text.append(line);
    }
    if (outer) outer(level, line);
  });
}

LogCapture::~LogCapture() { set_log_sink(std::move(previous_)); }

std::string LogCapture::text() const {
  std::lock_guard<std::mutex> lock(lines_->mutex);
  return lines_->text;
}

// Unbuffered: every write reaches xsputn or overflow, each under the lock, so whole writes from
// different threads do not tear.
class CoutCapture::Buffer final : public std::streambuf {
 public:
  std::string text() const {
    std::lock_guard<std::mutex> lock(mutex_);
    return text_;
  }

 protected:
  int_type overflow(int_type c) override {
    if (traits_type::eq_int_type(c, traits_type::eof())) return traits_type::not_eof(c);
    std::lock_guard<std::mutex> lock(mutex_);
    text_.push_back(traits_type::to_char_type(c));
    return c;
  }
  std::streamsize xsputn(const char* s, std::streamsize n) override {
    std::lock_guard<std::mutex> lock(mutex_);
    text_.append(s, static_cast<std::size_t>(n));
    return n;
  }

 private:
  mutable std::mutex mutex_;
  std::string text_;
};

CoutCapture::CoutCapture() : buffer_(std::make_unique<Buffer>()) {
  std::cout.flush();
  previous_ = std::cout.rdbuf(buffer_.get());
}

CoutCapture::~CoutCapture() { std::cout.rdbuf(previous_); }

std::string CoutCapture::text() const { return buffer_->text(); }

}  // namespace embedflow::testing
