#include "embedflow/results.hpp"

#include <memory>
#include <mutex>

#include "embedflow/node.hpp"

namespace embedflow {
namespace {
// Published rarely (once per evaluator per run): a plain mutex is enough.
std::mutex g_results_mutex;
std::shared_ptr<ResultsSink> g_results_sink;
}  // namespace

void publish_results(std::string_view node_id, const ResultTable& table) {
  std::shared_ptr<ResultsSink> sink;
  {
    std::lock_guard<std::mutex> lock(g_results_mutex);
    sink = g_results_sink;
  }
  if (sink && *sink) (*sink)(node_id, table);
}

void publish_results(const NodeContext& ctx, const ResultTable& table) { publish_results(ctx.id(), table); }

ResultsSink set_results_sink(ResultsSink sink) {
  auto next = sink ? std::make_shared<ResultsSink>(std::move(sink)) : nullptr;
  std::lock_guard<std::mutex> lock(g_results_mutex);
  std::swap(g_results_sink, next);
  return next ? *next : ResultsSink();
}

}  // namespace embedflow
