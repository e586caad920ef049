#include "core/class_batcher.hpp"

namespace embedflow::image {

void ClassBatcher::on_side(std::size_t, const RecordPtr&, Emitter&) {
  if (tables_.fetch_add(1) > 0) throw DataError(cat("received a second table; ", one_table_only_));
}

void ClassBatcher::open_batcher(NodeContext& ctx) {
  ctx_ = &ctx;
  epochs_ = ctx.params().integer("epochs");
  classes_ = ClassSet::from_params(ctx.params());
}

std::size_t ClassBatcher::load_table(int needed, const char* needed_param) {
  loaded_ = true;
  table_ = ClassTable::load(ctx_->side(0), classes_, cat("node '", ctx_->id(), "' port 'table'"));
  const std::size_t classes = table_.index.labels.size();
  if (classes < static_cast<std::size_t>(needed))
    throw DataError(cat("the table has ", classes, " classes", classes_.all() ? "" : cat(" in ", classes_.str()), " but ",
                        needed_param, " is ", needed));
  return classes;
}

void add_class_batcher_ports(NodeTypeBuilder& b, const std::string& out_doc) {
  b.param(classes_param(" (a filter on the table)"))
      .side_input("table", "label: i64[N]", "one record with every image: id [N], label [N], image [N,...]")
      .output("out", "id: i64[B], label: i64[B], epoch: i64[B]", out_doc)
      .check([](SchemaContext& c) {
        check_classes(c);
        batcher_schema(c);
      });
}

}  // namespace embedflow::image
