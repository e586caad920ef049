// crowd.attribute_retrieval — which attribute did a worker cluster a grid by? The CEN paper's
// Fig. 4: the predicted attribute of a submission is the dimension argmax_k a_k of its attribute
// activation, mapped to an attribute; compared with the attribute the simulator actually used
// (gen_crowd's truth.csv), as a confusion matrix with the entropy of each row. Also compares the
// learned worker activations a^w with the simulated worker biases (workers.csv).
//
// Inputs:  train — crowd.cen_score's submissions on the training split (worker, grid,
//                  attributes f32[N,K], spread f32[N,K] optional): fits the mapping;
//          test  — the same on the held-out split: what is scored;
//          workers — optional: worker i64[W], attributes f32[W,K] (a^w of every worker).
// Outputs: metrics — one record at the end: method, retrieval (argmax a), retrieval_effective
//          (argmax a ⊙ spread), entropy_mean (mean row entropy, nats), submissions (scored
//          test submissions), worker_bias_r, worker_top_agreement (NaN without workers).
// Files (<out> prefix): _confusion.csv/.md/.png (rows: true attribute, columns: predicted
//   attribute and `unmapped`, row-normalised, with row entropy), _dimensions.csv (train votes:
//   dimension x attribute counts and the mapping), _worker_bias.md/.csv.
// Mapping (fitted on train submissions only): dimension k -> the attribute most often actually
//   used by the train submissions whose argmax is k (ties to the lower attribute index); a
//   dimension no train submission peaks on is unmapped. Submissions of noisy workers and lapses
//   (attribute -1 in truth.csv) are left out of the fit and the score.
// Ensembles: submissions tagged `member` (crowd.cen_score with `ensemble: M`) are M models'
//   activations; each member gets its own mapping from its own train submissions, and a test
//   submission's prediction is the attribute with the largest mean share over the members (a
//   member's share of attribute j: its activation on the dimensions mapped to j over its
//   activation sum). Worker bias is member 0's. _dimensions.csv then has a member column.
// Effective score: a_k alone ignores whether dimension k varies inside the grid; a grid holding
//   the worker's favourite attribute fixed makes its large a_k irrelevant to every distance of
//   that grid. a_k times the spread (standard deviation over the grid's members) of x_k is each
//   dimension's actual contribution; both scores are reported.
// Worker bias: for attribute j, dim(j) is the dimension mapped to j with the most train votes;
//   worker_bias_r is the mean over attributes of the Pearson correlation, over careful workers,
//   of a^w[w, dim(j)] and the true bias_j(w); worker_top_agreement the fraction of careful
//   workers whose largest true bias is the attribute mapped to argmax a^w.
//
//   ret: {type: crowd.attribute_retrieval, params: {name: CEN-mixture, truth: out/crowd, out: out/cen/mixture}}
#include <embedflow/atomic_file.hpp>
#include <algorithm>
#include <cmath>
#include <fstream>
#include <map>

#include <embedflow/csv.hpp>

#include "core/draw.hpp"
#include "crowd_types.hpp"

namespace embedflow::crowd {
namespace {

// truth.csv and workers.csv as tools/gen_crowd writes them, read by the SDK's CSV reader.
struct Csv : CsvTable {
  int col(const std::string& name) const {
    const int c = column(name);
    if (c < 0) throw DataError(cat(file, ":", header_line, ": no column '", name, "'"));
    return c;
  }
  double num(std::size_t row, int c) const {
    try {
      return std::stod(rows[row].at(static_cast<std::size_t>(c)));
    } catch (const std::exception&) {
      throw DataError(cat(file, ":", lines[row], ": column '", header[static_cast<std::size_t>(c)], "' is not a number"));
    }
  }
};

Csv read_csv(const std::string& path) { return Csv{read_csv_table(path)}; }

struct Sub {
  std::int64_t worker, grid, member;
  std::vector<float> a, spread;
};

void add_subs(const Record& r, std::vector<Sub>& out) {
  const Array& w = r.get("worker");
  const Array& g = r.get("grid");
  const Array& a = r.get("attributes");
  const Array* s = r.find("spread");
  const Array* m = r.find("member");
  if (m && m->numel() != w.numel()) throw DataError(cat("member must be i64[N], one per submission: ", r.describe()));
  if (a.rank() != 2 || a.shape()[0] != w.numel()) throw DataError(cat("attributes must be [N,K]: ", r.describe()));
  const std::int64_t k = a.shape()[1];
  for (std::int64_t i = 0; i < w.numel(); ++i) {
    Sub x{w.as_int(i), g.as_int(i), m ? m->as_int(i) : 0, {}, {}};
    for (std::int64_t j = 0; j < k; ++j) {
      x.a.push_back(static_cast<float>(a.as_double(i * k + j)));
      if (s) x.spread.push_back(static_cast<float>(s->as_double(i * k + j)));
    }
    out.push_back(std::move(x));
  }
}

std::size_t argmax(const std::vector<float>& v) { return static_cast<std::size_t>(std::max_element(v.begin(), v.end()) - v.begin()); }

double pearson(const std::vector<double>& x, const std::vector<double>& y) {
  const double n = static_cast<double>(x.size());
  double mx = 0, my = 0;
  for (std::size_t i = 0; i < x.size(); ++i) mx += x[i] / n, my += y[i] / n;
  double sxy = 0, sxx = 0, syy = 0;
  for (std::size_t i = 0; i < x.size(); ++i) sxy += (x[i] - mx) * (y[i] - my), sxx += (x[i] - mx) * (x[i] - mx), syy += (y[i] - my) * (y[i] - my);
  return sxx > 0 && syy > 0 ? sxy / std::sqrt(sxx * syy) : NAN;
}

// One model's dimension -> attribute mapping: the train votes (dimension x attribute counts of
// the train submissions peaking on the dimension) and, per dimension, the winning attribute (-1:
// no train submission peaks there), for argmax a and for argmax a * spread.
struct Fit {
  std::vector<std::vector<std::int64_t>> votes, votes_eff;
  std::vector<int> map, map_eff;
};

std::vector<int> mapping(const std::vector<std::vector<std::int64_t>>& votes) {
  std::vector<int> m(votes.size(), -1);
  for (std::size_t k = 0; k < votes.size(); ++k) {
    auto it = std::max_element(votes[k].begin(), votes[k].end());
    if (*it > 0) m[k] = static_cast<int>(it - votes[k].begin());
  }
  return m;
}

// Each member (one model, or each model of an ensemble: crowd.cen_score's `member` tag) with
// its own dimension mapping, and its test submissions by (worker, grid).
struct Models {
  std::map<std::int64_t, Fit> fits;
  std::map<std::int64_t, std::map<std::pair<std::int64_t, std::int64_t>, const Sub*>> test_of;
  bool ensemble() const { return fits.size() > 1; }
};

// The confusion matrix (rows: true attribute, normalised; last column: unmapped), its row
// entropies and the retrieval rates.
struct Scores {
  std::vector<std::vector<double>> conf;
  std::vector<double> entropy;
  double entropy_sum = 0;
  int entropy_rows = 0;
  std::int64_t n = 0;
  double retrieval = NAN, retrieval_eff = NAN;
  std::string members_alone;  // an ensemble's members alone, comma-separated
};

std::vector<float> effective(const Sub& s) {
  std::vector<float> e = s.a;
  if (s.spread.size() == e.size())
    for (std::size_t k = 0; k < e.size(); ++k) e[k] *= s.spread[k];
  return e;
}

// The paper's rule for one model: argmax a (or a * spread), mapped by that model's votes.
int alone(const Fit& f, const Sub& s, bool eff) { return eff ? f.map_eff[argmax(effective(s))] : f.map[argmax(s.a)]; }

class AttributeRetrieval final : public Node {
 public:
  void open(NodeContext& ctx) override {
    ctx_ = &ctx;
    const std::string dir = ctx.params().string("truth");
    Csv t = read_csv(dir + "/truth.csv");
    const int cw = t.col("worker"), cg = t.col("grid"), ca = t.col("attribute"), cn = t.col("attribute_name");
    for (std::size_t i = 0; i < t.rows.size(); ++i) {
      const auto key = std::make_pair(static_cast<std::int64_t>(t.num(i, cw)), static_cast<std::int64_t>(t.num(i, cg)));
      const int attr = static_cast<int>(t.num(i, ca));
      truth_[key] = attr;
      if (attr >= 0) {
        if (static_cast<int>(names_.size()) <= attr) names_.resize(static_cast<std::size_t>(attr) + 1);
        names_[static_cast<std::size_t>(attr)] = t.rows[i][static_cast<std::size_t>(cn)];
      }
    }
    workers_csv_ = read_csv(dir + "/workers.csv");
    for (const auto& h : workers_csv_.header)
      if (h.rfind("bias_", 0) == 0) bias_names_.push_back(h.substr(5));
    if (bias_names_.size() > names_.size()) names_.resize(bias_names_.size());
    for (std::size_t j = 0; j < bias_names_.size(); ++j)
      if (names_[j].empty()) names_[j] = bias_names_[j];
  }
  void process(std::size_t port, const RecordPtr& r, Emitter&) override {
    if (port == 0) add_subs(*r, train_);
    else if (port == 1) add_subs(*r, test_);
    else if (const Array* m = r->find("member"); !m || m->numel() == 0 || m->as_int(0) == 0) workers_ = r;
  }
  void close(Emitter& out) override {
    const Params& p = ctx_->params();
    const std::string prefix = p.string("out");
    if (train_.empty() || test_.empty()) throw DataError("needs train and test submissions");
    const Models models = fit_models();
    const Scores sc = score(models);
    std::vector<std::string> cols = names_;
    cols.push_back("unmapped");
    make_parent(prefix + "_confusion.csv");
    write_tables(prefix, models, sc, cols);
    std::vector<std::string> rows;
    for (std::size_t i = 0; i < names_.size(); ++i) rows.push_back(cat(names_[i], " H=", show(sc.entropy[i])));
    write_heatmap(prefix + "_confusion.png", cat(p.string("name"), ": attribute retrieval ", show(sc.retrieval)), sc.conf, rows,
                  cols, "true attribute", "predicted attribute (argmax a, mapped on train)");
    // Worker bias.
    double bias_r = NAN, top = NAN;
    if (workers_ && models.fits.count(0)) bias_r = worker_bias(models.fits.at(0).map, models.fits.at(0).votes, prefix, top);
    const bool ensemble = models.ensemble();
    log_info(ctx_->id(), p.string("name"), ": attribute retrieval ", sc.retrieval, " (effective ", sc.retrieval_eff, ") on ", sc.n,
             " test submissions",
             !ensemble ? std::string() : cat(" (ensemble of ", models.fits.size(), " models; alone ", sc.members_alone, ")"),
             "; worker bias r ", bias_r);
    Record r;
    r.set("method", Array::strings({p.string("name")}));
    r.set("retrieval", Array::scalar<double>(sc.retrieval));
    r.set("retrieval_effective", Array::scalar<double>(sc.retrieval_eff));
    r.set("entropy_mean", Array::scalar<double>(sc.entropy_rows ? sc.entropy_sum / sc.entropy_rows : NAN));
    r.set("submissions", Array::scalar<double>(static_cast<double>(sc.n)));
    r.set("worker_bias_r", Array::scalar<double>(bias_r));
    r.set("worker_top_agreement", Array::scalar<double>(top));
    out.emit(0, std::move(r));
  }

 private:
  int truth_of(const Sub& s) const {
    auto it = truth_.find({s.worker, s.grid});
    if (it == truth_.end()) throw DataError(cat("submission (worker ", s.worker, ", grid ", s.grid, ") is not in truth.csv"));
    return it->second;
  }
  // Each member maps its own dimensions from its own train votes: dimension order is arbitrary
  // per model.
  Models fit_models() const {
    const std::size_t A = names_.size();
    Models m;
    for (const Sub& s : train_) {
      Fit& f = m.fits[s.member];
      if (f.votes.empty()) f.votes.assign(s.a.size(), std::vector<std::int64_t>(A, 0)), f.votes_eff = f.votes;
      if (s.a.size() != f.votes.size()) throw DataError(cat("member ", s.member, ": submissions with ", s.a.size(), " and ", f.votes.size(), " dimensions"));
      const int t = truth_of(s);
      if (t < 0) continue;
      f.votes[argmax(s.a)][static_cast<std::size_t>(t)]++;
      f.votes_eff[argmax(effective(s))][static_cast<std::size_t>(t)]++;
    }
    for (auto& [member, f] : m.fits) f.map = mapping(f.votes), f.map_eff = mapping(f.votes_eff);
    for (const Sub& s : test_) {
      if (!m.fits.count(s.member)) throw DataError(cat("test submissions of member ", s.member, " but no train submissions of it"));
      m.test_of[s.member][{s.worker, s.grid}] = &s;
    }
    for (const auto& [member, f] : m.fits)
      if (!m.test_of.count(member)) throw DataError(cat("train submissions of member ", member, " but no test submissions of it"));
    return m;
  }

  // One model: the paper's rule, argmax a mapped. An ensemble: the attribute with the largest
  // mean share, a member's share of attribute j being the part of its activation sum on the
  // dimensions it maps to j (probability averaging, as deep ensembles average softmax outputs).
  int predict(const Models& m, const Sub& s, bool eff) const {
    if (!m.ensemble()) return alone(m.fits.begin()->second, s, eff);
    std::vector<double> share(names_.size(), 0.0);
    for (const auto& [member, f] : m.fits) {
      const auto& tests = m.test_of.at(member);
      auto it = tests.find({s.worker, s.grid});
      if (it == tests.end())
        throw DataError(cat("member ", member, " has no test submission (worker ", s.worker, ", grid ", s.grid, ")"));
      const std::vector<float> a = eff ? effective(*it->second) : it->second->a;
      const std::vector<int>& map = eff ? f.map_eff : f.map;
      double total = 0;
      for (float v : a) total += std::max(0.0f, v);
      if (total <= 0) continue;
      for (std::size_t k = 0; k < a.size(); ++k)
        if (map[k] >= 0) share[static_cast<std::size_t>(map[k])] += std::max(0.0f, a[k]) / total;
    }
    const auto best = std::max_element(share.begin(), share.end());
    return *best > 0 ? static_cast<int>(best - share.begin()) : -1;
  }

  Scores score(const Models& m) const {
    const std::size_t A = names_.size();
    const std::int64_t first = m.fits.begin()->first;
    Scores sc;
    sc.conf.assign(A, std::vector<double>(A + 1, 0.0));
    std::int64_t ok = 0, ok_eff = 0;
    for (const Sub& s : test_) {
      if (s.member != first) continue;
      const int t = truth_of(s);
      if (t < 0) continue;
      ++sc.n;
      const int pred = predict(m, s, false);
      ok += pred == t;
      ok_eff += predict(m, s, true) == t;
      sc.conf[static_cast<std::size_t>(t)][pred < 0 ? A : static_cast<std::size_t>(pred)] += 1;
    }
    sc.entropy.assign(A, NAN);
    for (std::size_t i = 0; i < A; ++i) {
      double total = 0;
      for (double v : sc.conf[i]) total += v;
      if (total == 0) continue;
      double h = 0;
      for (double& v : sc.conf[i]) {
        v /= total;
        if (v > 0) h -= v * std::log(v);
      }
      sc.entropy[i] = h, sc.entropy_sum += h, ++sc.entropy_rows;
    }
    sc.retrieval = sc.n ? double(ok) / double(sc.n) : NAN, sc.retrieval_eff = sc.n ? double(ok_eff) / double(sc.n) : NAN;
    // An ensemble's members alone (argmax a, each with its own mapping): what combining them gained.
    if (m.ensemble())
      for (const auto& [member, f] : m.fits) {
        std::int64_t member_n = 0, member_ok = 0;
        for (const auto& [key, sub] : m.test_of.at(member)) {
          const int t = truth_of(*sub);
          if (t < 0) continue;
          ++member_n;
          member_ok += alone(f, *sub, false) == t;
        }
        sc.members_alone += cat(sc.members_alone.empty() ? "" : ", ", show(member_n ? double(member_ok) / double(member_n) : NAN));
      }
    return sc;
  }

  // <prefix>_confusion.csv/.md and <prefix>_dimensions.csv (each member's mapping and votes).
  void write_tables(const std::string& prefix, const Models& m, const Scores& sc, const std::vector<std::string>& cols) const {
    const std::size_t A = names_.size();
    const bool ensemble = m.ensemble();
    AtomicOutputFile c_file(prefix + "_confusion.csv"), md_file(prefix + "_confusion.md");
    std::ostream &c = c_file.stream(), &md = md_file.stream();
    c << "true_attribute";
    md << "| true \\ predicted |";
    for (const auto& h : cols) c << "," << h, md << " " << h << " |";
    c << ",entropy\n";
    md << " entropy |\n|---|";
    for (std::size_t j = 0; j <= A; ++j) md << "---|";
    md << "---|\n";
    for (std::size_t i = 0; i < A; ++i) {
      c << names_[i];
      md << "| " << names_[i] << " |";
      for (double v : sc.conf[i]) c << "," << v, md << " " << show(v) << " |";
      c << "," << sc.entropy[i] << "\n";
      md << " " << show(sc.entropy[i]) << " |\n";
    }
    if (!ensemble)
      md << "\nretrieval (argmax a): " << show(sc.retrieval) << " of " << sc.n << " test submissions; argmax a*spread: "
         << show(sc.retrieval_eff) << "\n";
    else
      md << "\nretrieval of the ensemble of " << m.fits.size() << " (largest mean attribute share): " << show(sc.retrieval) << " of "
         << sc.n << " test submissions; with a*spread: " << show(sc.retrieval_eff) << "; each member alone (argmax a): "
         << sc.members_alone << "\n";
    c_file.commit();
    md_file.commit();
    AtomicOutputFile d_file(prefix + "_dimensions.csv");
    std::ostream& d = d_file.stream();
    d << (ensemble ? "member," : "") << "dimension,mapped_attribute,mapped_attribute_effective";
    for (const auto& h : names_) d << ",votes_" << h;
    d << "\n";
    for (const auto& [member, f] : m.fits)
      for (std::size_t k = 0; k < f.map.size(); ++k) {
        if (ensemble) d << member << ",";
        d << k << "," << (f.map[k] < 0 ? "unmapped" : names_[static_cast<std::size_t>(f.map[k])]) << ","
          << (f.map_eff[k] < 0 ? "unmapped" : names_[static_cast<std::size_t>(f.map_eff[k])]);
        for (auto v : f.votes[k]) d << "," << v;
        d << "\n";
      }
    d_file.commit();
  }

  static std::string show(double v) {
    if (std::isnan(v)) return "n/a";
    char b[32];
    std::snprintf(b, sizeof b, "%.3f", v);
    return b;
  }

  double worker_bias(const std::vector<int>& map, const std::vector<std::vector<std::int64_t>>& votes, const std::string& prefix,
                     double& top) {
    const Array& ids = workers_->get("worker");
    const Array& a = workers_->get("attributes");
    const std::int64_t K = a.shape()[1];
    std::map<std::int64_t, std::int64_t> row_of;
    for (std::int64_t i = 0; i < ids.numel(); ++i) row_of[ids.as_int(i)] = i;
    const Csv& w = workers_csv_;
    const int cw = w.col("worker"), cn = w.col("noisy");
    std::vector<int> cb;
    for (const auto& b : bias_names_) cb.push_back(w.col("bias_" + b));
    AtomicOutputFile md_file(prefix + "_worker_bias.md"), csv_file(prefix + "_worker_bias.csv");
    std::ostream &md = md_file.stream(), &csv = csv_file.stream();
    md << "| attribute | dimension | Pearson r (a^w vs true bias, careful workers) | workers |\n|---|---|---|---|\n";
    csv << "attribute,dimension,pearson_r,workers\n";
    double sum = 0;
    int count = 0;
    for (std::size_t j = 0; j < bias_names_.size(); ++j) {
      std::int64_t best = -1, best_votes = 0;
      for (std::size_t k = 0; k < map.size(); ++k)
        if (map[k] == static_cast<int>(j) && votes[k][j] > best_votes) best = static_cast<std::int64_t>(k), best_votes = votes[k][j];
      std::vector<double> x, y;
      if (best >= 0)
        for (std::size_t i = 0; i < w.rows.size(); ++i) {
          if (w.num(i, cn) != 0) continue;
          auto it = row_of.find(static_cast<std::int64_t>(w.num(i, cw)));
          if (it == row_of.end()) continue;
          x.push_back(a.as_double(it->second * K + best));
          y.push_back(w.num(i, cb[j]));
        }
      const double r = x.size() > 2 ? pearson(x, y) : NAN;
      if (!std::isnan(r)) sum += r, ++count;
      md << "| " << bias_names_[j] << " | " << (best < 0 ? std::string("unmapped") : cat(best)) << " | " << show(r) << " | " << x.size() << " |\n";
      csv << bias_names_[j] << "," << best << "," << r << "," << x.size() << "\n";
    }
    std::int64_t agree = 0, careful = 0;
    for (std::size_t i = 0; i < w.rows.size(); ++i) {
      if (w.num(i, cn) != 0) continue;
      auto it = row_of.find(static_cast<std::int64_t>(w.num(i, cw)));
      if (it == row_of.end()) continue;
      ++careful;
      std::size_t bj = 0;
      for (std::size_t j = 1; j < cb.size(); ++j)
        if (w.num(i, cb[j]) > w.num(i, cb[bj])) bj = j;
      std::int64_t bk = 0;
      for (std::int64_t k = 1; k < K; ++k)
        if (a.as_double(it->second * K + k) > a.as_double(it->second * K + bk)) bk = k;
      agree += map[static_cast<std::size_t>(bk)] == static_cast<int>(bj);
    }
    top = careful ? double(agree) / double(careful) : NAN;
    md << "\nworkers whose largest true bias is the attribute of argmax a^w: " << show(top) << " of " << careful << "\n";
    md_file.commit();
    csv_file.commit();
    return count ? sum / count : NAN;
  }

  NodeContext* ctx_ = nullptr;
  std::map<std::pair<std::int64_t, std::int64_t>, int> truth_;
  std::vector<std::string> names_, bias_names_;
  Csv workers_csv_;
  std::vector<Sub> train_, test_;
  RecordPtr workers_;
};

}  // namespace

NodeType attribute_retrieval_type() {
  return NodeTypeBuilder("crowd.attribute_retrieval")
      .doc("Attribute retrieval against gen_crowd's ground truth: argmax of each test submission's attribute "
           "activation, mapped dimension -> attribute on train submissions; confusion matrix with row entropy "
           "(CSV, Markdown, PNG), and learned worker activations against the true worker biases.")
      .example("ret: {type: crowd.attribute_retrieval, params: {name: CEN-mixture, truth: out/crowd_cen, out: out/cen_crowd/mixture/retrieval}}")
      .param(Param::string("name").doc("method name: the row of crowd.report"))
      .param(Param::path("truth").doc("gen_crowd's output directory (truth.csv, workers.csv)"))
      .param(Param::path("out").not_fingerprinted().doc("path prefix of the files, e.g. out/cen/mixture"))
      .input("train", "worker: i64[N], grid: i64[N], attributes: f32[N,K]", "train submissions (fit the mapping); `member: i64[N]` tags an ensemble's models")
      .input("test", "worker: i64[N], grid: i64[N], attributes: f32[N,K]", "test submissions (scored)")
      .optional_input("workers", "worker: i64[W], attributes: f32[W,K]", "a^w of every worker")
      .output("metrics", "method: str[1], retrieval: f64[]", "one record at the end")
      .create<AttributeRetrieval>();
}

}  // namespace embedflow::crowd
