// torch.train's validation parameters, ports and load-time checks (validation_spec.hpp).
#include "validation_spec.hpp"

#include "catalog.hpp"

namespace embedflow::torchfam {

bool select_maximizes(const std::string& metric, const std::string& mode) {
  if (mode == "max") return true;
  if (mode == "min") return false;
  return metric != "loss";
}

NodeTypeBuilder& with_validation(NodeTypeBuilder& b) {
  b.param(Param::integer("validate_every").default_value(0).min(0).doc(
       "steps between evaluations on the `validation` input (and one at the end); the best evaluation's weights "
       "are what the final snapshot and best.pt carry. 0: off"))
      .param(Param::choice("select_metric", kSelectMetrics).default_value("map_at_r").doc(
          "what selects the model: leave-one-out retrieval within the validation set under L2 distance "
          "(map_at_r, precision_at_1, r_precision, as eval.retrieval) or loss (the `loss` component on the "
          "validation batches)"))
      .param(Param::choice("select_mode", {"auto", "max", "min"}).default_value("auto").doc(
          "whether higher or lower is better; auto: max for the retrieval metrics, min for loss"))
      .param(Param::integer("patience").default_value(0).min(0).doc(
          "stop training after this many evaluations in a row without an improvement of more than min_delta; "
          "0: never stop early"))
      .param(Param::number("min_delta").default_value(0.0).min(0.0).doc(
          "how much better than the best so far an evaluation must be to count as an improvement"))
      .optional_input("validation", "*",
                      "validation batches (an image field and `label`; for select_metric loss, what the loss "
                      "reads), read to the end and held in memory")
      .output("validation",
              "step: i64[], epoch: i64[], metric: str[], value: f64[], improved: bool[], best: f64[], best_step: i64[], "
              "since_best: i64[], map_at_r: f64[], precision_at_1: f64[], r_precision: f64[], loss: f64[]",
              "one record per evaluation: the selected metric's value, whether it improved, the best so far and the "
              "evaluations since it; the retrieval metrics when the batches carry labels and the loss when it is "
              "the metric (NaN otherwise)")
      .check([](SchemaContext& c) {
        const Params& p = c.params();
        const bool connected = c.connected("validation");
        const std::int64_t every = p.integer("validate_every");
        if (every > 0 && !connected)
          c.error(cat("validate_every is ", every, " but the `validation` input is not connected: connect a stream "
                      "of labelled validation batches to train.validation"),
                  "validate_every");
        if (every == 0 && connected)
          c.error("the `validation` input is connected but validate_every is 0 (off): set the steps between "
                  "evaluations",
                  "validate_every");
        if (!connected) return;
        // Snapshots say which evaluation they come from; the final one is the best evaluation's.
        PortSchema snapshots = c.output("model");
        const PortSchema added = PortSchema::parse("validation: f64[1], validation_metric: str[1]");
        for (const FieldSchema& f : added.fields()) snapshots.add(f);
        c.set_output("model", snapshots);
        const PortSchema& v = c.input("validation");
        if (v.is_any()) return;
        const std::string& metric = p.string("select_metric");
        if (metric == "loss") {
          // The loss reads the validation batches as it reads the training batches.
          c.component_spec(p.value("loss"), {{"batch", v}, {"outputs", PortSchema::any()}},
                           "the loss on the validation batches (select_metric: loss)", "select_metric");
          return;
        }
        bool image = false;
        for (const auto& f : kImageFields) image = image || v.find(f) != nullptr;
        if (!image || !v.find("label"))
          c.error(cat("select_metric ", metric, " ranks the validation set by its labels: the `validation` input "
                      "needs an image field and `label`, got ", v.str()),
                  "select_metric");
      });
  return b;
}

}  // namespace embedflow::torchfam
