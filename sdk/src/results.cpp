#include "embedflow/results.hpp"

#include <memory>
#include <mutex>

#include "embedflow/node.hpp"

namespace embedflow {
namespace {
// Published rarely (a few times per node per run): a plain mutex is enough.
std::mutex g_results_mutex;
std::shared_ptr<const ResultsSink> g_results_sink;

std::shared_ptr<const ResultsSink> current_sink() {
  std::lock_guard<std::mutex> lock(g_results_mutex);
  return g_results_sink;
}
}  // namespace

void publish_results(std::string_view node_id, const ResultTable& table) {
  if (auto sink = current_sink(); sink && sink->table) sink->table(node_id, table, false);
}
void publish_results(const NodeContext& ctx, const ResultTable& table) { publish_results(ctx.id(), table); }

void publish_headline(std::string_view node_id, const ResultTable& table) {
  if (auto sink = current_sink(); sink && sink->table) sink->table(node_id, table, true);
}
void publish_headline(const NodeContext& ctx, const ResultTable& table) { publish_headline(ctx.id(), table); }

void publish_chart(std::string_view node_id, const ResultChart& chart) {
  if (auto sink = current_sink(); sink && sink->chart) sink->chart(node_id, chart);
}
void publish_chart(const NodeContext& ctx, const ResultChart& chart) { publish_chart(ctx.id(), chart); }

void publish_figure(std::string_view node_id, const ResultFigure& figure) {
  if (auto sink = current_sink(); sink && sink->figure) sink->figure(node_id, figure);
}
void publish_figure(const NodeContext& ctx, const ResultFigure& figure) { publish_figure(ctx.id(), figure); }

void publish_text(std::string_view node_id, const std::string& title, const std::string& text) {
  if (auto sink = current_sink(); sink && sink->text) sink->text(node_id, title, text);
}
void publish_text(const NodeContext& ctx, const std::string& title, const std::string& text) {
  publish_text(ctx.id(), title, text);
}

ResultsSink set_results_sink(ResultsSink sink) {
  auto next = std::make_shared<const ResultsSink>(std::move(sink));
  std::lock_guard<std::mutex> lock(g_results_mutex);
  std::swap(g_results_sink, next);
  return next ? *next : ResultsSink();
}

}  // namespace embedflow
