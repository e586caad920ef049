// torch.train's evaluation on a validation set and model selection (validation.hpp).
#include "validation.hpp"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <map>
#include <sstream>

#include "embedflow/results.hpp"

#include "bridge.hpp"
#include "catalog.hpp"
#include "validation_spec.hpp"

namespace embedflow::torchfam {
namespace fs = std::filesystem;

RetrievalScores leave_one_out_retrieval(const torch::Tensor& embeddings, const std::vector<std::int64_t>& labels) {
  const torch::Tensor e = embeddings.detach().to(torch::kCPU, torch::kFloat64).contiguous();
  const std::int64_t n = e.size(0);
  if (static_cast<std::int64_t>(labels.size()) != n)
    throw DataError(cat(n, " validation embeddings but ", labels.size(), " labels"));
  std::map<std::int64_t, std::int64_t> per_label;
  for (std::int64_t l : labels)
    if (l != -1) ++per_label[l];
  double map_at_r = 0, p_at_1 = 0, r_precision = 0;
  std::int64_t queries = 0;
  constexpr std::int64_t kBlock = 256;  // query rows per distance block: kBlock x n doubles at a time
  for (std::int64_t q0 = 0; q0 < n; q0 += kBlock) {
    const std::int64_t rows = std::min(kBlock, n - q0);
    // compute_mode 2: differences summed directly, not through a matrix product, so a distance
    // is exact to double rounding and the ranking does not depend on the blocking.
    const torch::Tensor d = torch::cdist(e.narrow(0, q0, rows), e, 2.0, /*compute_mode=*/2);
    const torch::Tensor order = std::get<1>(torch::sort(d, /*stable=*/true, /*dim=*/1, /*descending=*/false));
    auto o = order.accessor<std::int64_t, 2>();
    for (std::int64_t k = 0; k < rows; ++k) {
      const std::int64_t q = q0 + k, label = labels[static_cast<std::size_t>(q)];
      if (label == -1) continue;
      const std::int64_t r = per_label[label] - 1;  // the other items of the query's label
      if (r == 0) continue;
      ++queries;
      std::int64_t rank = 0, hits = 0;
      double precision_sum = 0;
      for (std::int64_t j = 0; j < n && rank < r; ++j) {
        const std::int64_t g = o[k][j];
        const std::int64_t gl = labels[static_cast<std::size_t>(g)];
        if (g == q || gl == -1) continue;
        ++rank;
        if (gl != label) continue;
        ++hits;
        precision_sum += static_cast<double>(hits) / static_cast<double>(rank);
        if (rank == 1) p_at_1 += 1;
      }
      map_at_r += precision_sum / static_cast<double>(r);
      r_precision += static_cast<double>(hits) / static_cast<double>(r);
    }
  }
  RetrievalScores s;
  s.queries = queries;
  if (queries == 0) return s;
  const auto nq = static_cast<double>(queries);
  s.map_at_r = map_at_r / nq;
  s.precision_at_1 = p_at_1 / nq;
  s.r_precision = r_precision / nq;
  return s;
}

namespace {

const char* kCsvHeader = "step,epoch,metric,value,improved,best,best_step,since_best,map_at_r,precision_at_1,r_precision,loss";

std::string num(double v) {
  if (std::isnan(v)) return "NaN";
  char buf[40];
  std::snprintf(buf, sizeof buf, "%.17g", v);
  return buf;
}

double metric_of(const ValidationRow& r, const std::string& metric) {
  if (metric == "map_at_r") return r.map_at_r;
  if (metric == "precision_at_1") return r.precision_at_1;
  if (metric == "r_precision") return r.r_precision;
  return r.loss;
}

// The rows as f64 [K, 12], in the column order of validation.csv (the metric name apart).
torch::Tensor rows_tensor(const std::vector<ValidationRow>& rows) {
  torch::Tensor t = torch::zeros({static_cast<std::int64_t>(rows.size()), 11}, torch::kFloat64);
  auto a = t.accessor<double, 2>();
  for (std::size_t i = 0; i < rows.size(); ++i) {
    const ValidationRow& r = rows[i];
    const double v[11] = {static_cast<double>(r.step), static_cast<double>(r.epoch), r.value, r.improved ? 1.0 : 0.0,
                          r.best, static_cast<double>(r.best_step), static_cast<double>(r.since_best), r.map_at_r,
                          r.precision_at_1, r.r_precision, r.loss};
    for (std::int64_t c = 0; c < 11; ++c) a[static_cast<std::int64_t>(i)][c] = v[c];
  }
  return t;
}

std::vector<ValidationRow> tensor_rows(const torch::Tensor& t) {
  std::vector<ValidationRow> rows;
  auto a = t.accessor<double, 2>();
  for (std::int64_t i = 0; i < t.size(0); ++i) {
    ValidationRow r;
    r.step = static_cast<std::int64_t>(a[i][0]);
    r.epoch = static_cast<std::int64_t>(a[i][1]);
    r.value = a[i][2];
    r.improved = a[i][3] != 0;
    r.best = a[i][4];
    r.best_step = static_cast<std::int64_t>(a[i][5]);
    r.since_best = static_cast<std::int64_t>(a[i][6]);
    r.map_at_r = a[i][7];
    r.precision_at_1 = a[i][8];
    r.r_precision = a[i][9];
    r.loss = a[i][10];
    rows.push_back(r);
  }
  return rows;
}

// Loads `state` into the model's tensors for the duration of one evaluation when it is not the
// model's own (a weight average), and puts the model's weights back afterwards.
class StateSwap {
 public:
  StateSwap(Model& model, const NamedTensors& state) {
    live_ = model.state();
    if (live_.size() != state.size()) throw DataError("validation: the exported state does not match the model's");
    bool same = true;
    for (std::size_t i = 0; i < state.size(); ++i) same = same && state[i].second.data_ptr() == live_[i].second.data_ptr();
    if (same) return;
    torch::NoGradGuard no_grad;
    for (std::size_t i = 0; i < state.size(); ++i) {
      saved_.push_back(live_[i].second.clone());
      live_[i].second.copy_(state[i].second);
    }
  }
  ~StateSwap() {
    torch::NoGradGuard no_grad;
    for (std::size_t i = 0; i < saved_.size(); ++i) live_[i].second.copy_(saved_[i]);
  }
  StateSwap(const StateSwap&) = delete;
  StateSwap& operator=(const StateSwap&) = delete;

 private:
  NamedTensors live_;
  std::vector<torch::Tensor> saved_;
};

}  // namespace

Validator::Validator(NodeContext& ctx, bool write_files) : ctx_(ctx) {
  const Params& p = ctx.params();
  every_ = p.integer("validate_every");
  metric_ = p.string("select_metric");
  maximize_ = select_maximizes(metric_, p.string("select_mode"));
  patience_ = p.integer("patience");
  min_delta_ = p.number("min_delta");
  if (write_files && !p.string("log_dir").empty()) csv_path_ = fs::path(p.string("log_dir")) / "validation.csv";
}

void Validator::add(const RecordPtr& batch) {
  const std::size_t index = batches_.size();
  if (image_field_.empty())
    for (const auto& f : kImageFields)
      if (batch->find(f)) {
        image_field_ = f;
        break;
      }
  if (metric_ != "loss") {
    if (image_field_.empty() || !batch->find(image_field_))
      throw DataError(cat("validation batch ", index, " has no image field (", image_field_.empty() ? "image" : image_field_,
                          "): ", batch->describe()));
    if (!batch->find("label"))
      throw DataError(cat("validation batch ", index, " has no `label` field (select_metric ", metric_,
                          " ranks the validation set by label): ", batch->describe()));
  }
  batches_.push_back(batch);
}

ValidationRow Validator::score(Model& model, Loss& loss, const std::string& loss_name) {
  ValidationRow row;
  torch::NoGradGuard no_grad;
  model.set_training(false);
  bool labelled = !image_field_.empty();
  for (const auto& b : batches_) labelled = labelled && b->find(image_field_) && b->find("label");
  if (labelled) {
    std::vector<torch::Tensor> embeddings;
    std::vector<std::int64_t> labels;
    for (const auto& b : batches_) {
      const torch::Tensor x = image_input(to_tensor(b->get(image_field_))).to(model.device());
      embeddings.push_back(model.embed(x).to(torch::kCPU));
      const Array& l = b->get("label");
      if (l.is_string() || l.numel() != x.size(0))
        throw DataError(cat("validation batch: `label` must hold one integer per image, got ", l.describe()));
      for (std::int64_t i = 0; i < l.numel(); ++i) labels.push_back(l.as_int(i));
    }
    const RetrievalScores s = leave_one_out_retrieval(torch::cat(embeddings, 0), labels);
    if (s.queries == 0 && metric_ != "loss")
      throw DataError("validation: no validation item shares its label with another, so there is nothing to retrieve");
    row.map_at_r = s.map_at_r;
    row.precision_at_1 = s.precision_at_1;
    row.r_precision = s.r_precision;
  }
  if (metric_ == "loss") {
    double sum = 0;
    std::int64_t rows = 0;
    for (std::size_t i = 0; i < batches_.size(); ++i) {
      StepInputs in(model, *batches_[i], model.device(), loss_name);
      in.set_evaluating(true);  // a loss with state (a cross-batch memory) leaves it unchanged
      const double v = loss.compute(in).item<double>();
      sum += v * static_cast<double>(in.batch_size());
      rows += in.batch_size();
    }
    row.loss = rows > 0 ? sum / static_cast<double>(rows) : kNaN;
  }
  return row;
}

bool Validator::evaluate(Model& model, Loss& loss, const std::string& loss_name, const NamedTensors& state,
                         std::int64_t step, std::int64_t epoch, double epoch_loss, Emitter& out, std::size_t port) {
  if (batches_.empty()) throw DataError("the `validation` input ended without a batch: there is nothing to evaluate on");
  ValidationRow row;
  {
    StateSwap swap(model, state);
    try {
      row = score(model, loss, loss_name);
    } catch (...) {
      model.set_training(true);
      throw;
    }
    model.set_training(true);
  }
  row.step = step;
  row.epoch = epoch;
  row.value = metric_of(row, metric_);
  row.improved = std::isfinite(row.value) &&
                 (!has_best() || (maximize_ ? row.value > best_ + min_delta_ : row.value < best_ - min_delta_));
  if (row.improved) {
    best_state_.clear();
    for (const auto& [name, t] : state) best_state_.emplace_back(name, t.detach().clone());
    best_ = row.value;
    best_step_ = step;
    best_epoch_ = epoch;
    best_loss_ = epoch_loss;
    since_best_ = 0;
  } else {
    ++since_best_;
    if (!std::isfinite(row.value)) log_warning(ctx_.id(), "validation at step ", step, ": ", metric_, " is ", row.value);
  }
  row.best = best_;
  row.best_step = best_step_;
  row.since_best = since_best_;
  rows_.push_back(row);
  write_row(row);
  present();
  log_info(ctx_.id(), "validation at step ", step, ": ", metric_, " ", row.value,
           row.improved ? " (best so far)" : cat(" (best ", best_, " at step ", best_step_, "; ", since_best_,
                                                 " evaluation(s) without improvement)"));
  if (ctx_.output_connected(port)) {
    Record r;
    r.set("step", Array::scalar<std::int64_t>(row.step));
    r.set("epoch", Array::scalar<std::int64_t>(row.epoch));
    r.set("metric", Array::string_scalar(metric_));
    r.set("value", Array::scalar<double>(row.value));
    Array improved = Array::zeros(DType::boolean, {});
    improved.mutable_data<bool>()[0] = row.improved;
    r.set("improved", std::move(improved));
    r.set("best", Array::scalar<double>(row.best));
    r.set("best_step", Array::scalar<std::int64_t>(row.best_step));
    r.set("since_best", Array::scalar<std::int64_t>(row.since_best));
    r.set("map_at_r", Array::scalar<double>(row.map_at_r));
    r.set("precision_at_1", Array::scalar<double>(row.precision_at_1));
    r.set("r_precision", Array::scalar<double>(row.r_precision));
    r.set("loss", Array::scalar<double>(row.loss));
    out.emit(port, std::move(r));
  }
  return row.improved;
}

std::string Validator::stop_reason() const {
  return cat("early stopping at step ", last_step(), ": ", since_best_, " evaluation(s) without ", metric_,
             maximize_ ? " rising" : " falling", " by more than ", min_delta_, " (patience ", patience_, "); the best, ",
             best_, ", was at step ", best_step_);
}

Record Validator::best_snapshot(const std::string& spec_text) const {
  Record r = make_snapshot(best_state_, spec_text, best_step_, best_epoch_);
  r.set("loss", Array::from_vector<double>({1}, {best_loss_}));
  r.set("validation", Array::from_vector<double>({1}, {best_}));
  r.set("validation_metric", Array::strings({metric_}));
  return r;
}

void Validator::annotate(Record& snapshot) const {
  if (snapshot.find("validation")) return;
  const std::int64_t step = snapshot.get("step").as_int(0);
  double value = kNaN;
  for (const auto& r : rows_)
    if (r.step == step) value = r.value;
  snapshot.set("validation", Array::from_vector<double>({1}, {value}));
  snapshot.set("validation_metric", Array::strings({metric_}));
}

// The curve so far, as the report draws it: one chart per metric, every trainer's on it.
void Validator::present() const {
  ResultChart c;
  c.title = "validation " + metric_;
  c.x_label = "step";
  c.y_label = metric_ + " on the validation set";
  ChartSeries s;
  s.name = metric_;
  for (const auto& r : rows_) s.x.push_back(static_cast<double>(r.step)), s.y.push_back(r.value);
  c.series.push_back(std::move(s));
  publish_chart(ctx_, c);
}

void Validator::write_row(const ValidationRow& row) {
  if (csv_path_.empty()) return;
  auto line = [this](const ValidationRow& r) {
    csv_ << r.step << ',' << r.epoch << ',' << metric_ << ',' << num(r.value) << ',' << (r.improved ? 1 : 0) << ','
         << num(r.best) << ',' << r.best_step << ',' << r.since_best << ',' << num(r.map_at_r) << ','
         << num(r.precision_at_1) << ',' << num(r.r_precision) << ',' << num(r.loss) << '\n';
  };
  if (!csv_.is_open()) {  // the first row of this run: the file restarts from the resumed rows
    fs::create_directories(csv_path_.parent_path());
    csv_.open(csv_path_, std::ios::trunc);
    if (!csv_) throw Error(cat("cannot write ", csv_path_.string()));
    csv_ << kCsvHeader << '\n';
    for (const auto& r : rows_) line(r);
  } else {
    line(row);
  }
  csv_.flush();
}

void Validator::save(torch::serialize::OutputArchive& checkpoint) const {
  torch::serialize::OutputArchive v;
  v.write("metric", c10::IValue(metric_));
  v.write("rows", rows_tensor(rows_), /*is_buffer=*/true);
  v.write("best", torch::tensor({best_, best_loss_, static_cast<double>(best_step_), static_cast<double>(best_epoch_),
                                 static_cast<double>(since_best_)}, torch::kFloat64),
          /*is_buffer=*/true);
  if (has_best()) {
    torch::serialize::OutputArchive model;
    write_state(best_state_, model);
    v.write("best_model", model);
  }
  checkpoint.write("validation", v);
}

void Validator::restore(torch::serialize::InputArchive& checkpoint, const std::string& what) {
  torch::serialize::InputArchive v;
  if (!checkpoint.try_read("validation", v)) {
    log_info(ctx_.id(), "resume: ", what, " was written without validation; model selection starts at this run");
    return;
  }
  const std::string metric = read_string(v, "metric", what);
  if (metric != metric_) {
    log_warning(ctx_.id(), "resume: ", what, " selected on ", metric, "; this run selects on ", metric_,
                " and starts its selection afresh");
    return;
  }
  torch::Tensor rows, best;
  v.read("rows", rows, true);
  v.read("best", best, true);
  rows_ = tensor_rows(rows);
  auto b = best.accessor<double, 1>();
  best_ = b[0];
  best_loss_ = b[1];
  best_step_ = static_cast<std::int64_t>(b[2]);
  best_epoch_ = static_cast<std::int64_t>(b[3]);
  since_best_ = static_cast<std::int64_t>(b[4]);
  torch::serialize::InputArchive model;
  if (v.try_read("best_model", model)) best_state_ = read_state(model, what + " (validation best_model)");
}

}  // namespace embedflow::torchfam
