#include "embedflow/progress.hpp"

#include <atomic>
#include <chrono>
#include <ctime>
#include <memory>
#include <mutex>
#include <random>

#include "embedflow/node.hpp"

namespace embedflow {
namespace {
// The sink is swapped rarely (once per run) and called often, from many threads: readers take a
// shared_ptr copy under a short lock, and an atomic flag spares the lock when nobody listens.
std::mutex g_sink_mutex;
std::shared_ptr<ProgressSink> g_sink;
std::atomic<bool> g_has_sink{false};

std::mutex g_run_mutex;
std::string g_run_id;
}  // namespace

void report_progress(std::string_view node_id, const ProgressReport& report) {
  if (!g_has_sink.load(std::memory_order_acquire)) return;
  std::shared_ptr<ProgressSink> sink;
  {
    std::lock_guard<std::mutex> lock(g_sink_mutex);
    sink = g_sink;
  }
  if (sink && *sink) (*sink)(node_id, report);
}

void report_progress(const NodeContext& ctx, const ProgressReport& report) { report_progress(ctx.id(), report); }

ProgressSink set_progress_sink(ProgressSink sink) {
  auto next = sink ? std::make_shared<ProgressSink>(std::move(sink)) : nullptr;
  std::lock_guard<std::mutex> lock(g_sink_mutex);
  std::swap(g_sink, next);
  g_has_sink.store(g_sink != nullptr, std::memory_order_release);
  return next ? *next : ProgressSink();
}

std::string run_id() {
  std::lock_guard<std::mutex> lock(g_run_mutex);
  return g_run_id;
}

void set_run_id(std::string id) {
  std::lock_guard<std::mutex> lock(g_run_mutex);
  g_run_id = std::move(id);
}

std::string make_run_id() {
  std::time_t now = std::chrono::system_clock::to_time_t(std::chrono::system_clock::now());
  std::tm utc{};
  gmtime_r(&now, &utc);
  char stamp[32];
  std::strftime(stamp, sizeof stamp, "%Y%m%dT%H%M%SZ", &utc);
  std::random_device rd;
  char suffix[8];
  std::snprintf(suffix, sizeof suffix, "%06x", static_cast<unsigned>(rd()) & 0xffffffu);
  return std::string(stamp) + "-" + suffix;
}

}  // namespace embedflow
