// Miners (components of kind "miner"), each equal to pytorch-metric-learning's class of the same
// name on the same inputs (tests/torch/test_mining.cpp against recorded PML outputs):
//   torch.batch_easy_hard_miner   BatchEasyHardMiner: per anchor, one positive and one negative
//                                 by strategy (easy / semihard / hard / all); its defaults (easy
//                                 positive, semi-hard negative) are the semi-hard miner
//   torch.batch_hard_miner        BatchHardMiner: per anchor, the farthest positive and the
//                                 closest negative, as triplets
//   torch.multi_similarity_miner  MultiSimilarityMiner: positives closer to the border than the
//                                 closest negative plus epsilon, negatives likewise
//   torch.pair_margin_miner       PairMarginMiner: positive pairs beyond pos_margin, negative
//                                 pairs within neg_margin
//   torch.triplet_margin_miner    TripletMarginMiner: triplets by their margin (all / hard /
//                                 semihard / easy)
// A miner sees the batch's embeddings (or a batch and a cross-batch memory) and their label
// relations (mining.hpp); it runs without gradients. For a similarity (distance: cosine), "closer"
// means larger, as in PML.
#include <limits>

#include "mining.hpp"
#include "torch_types.hpp"

namespace embedflow::torchfam {
namespace {

// PML's stand-ins for infinity: the largest and lowest finite values of the matrix's dtype.
double finite_extreme(const torch::Tensor& like, bool largest) {
  if (like.scalar_type() == torch::kFloat64)
    return largest ? std::numeric_limits<double>::max() : std::numeric_limits<double>::lowest();
  return largest ? std::numeric_limits<float>::max() : std::numeric_limits<float>::lowest();
}

enum class Strategy { easy, semihard, hard, all };

Strategy strategy_of(const std::string& s) {
  return s == "easy" ? Strategy::easy : s == "semihard" ? Strategy::semihard : s == "hard" ? Strategy::hard : Strategy::all;
}

using Range = std::optional<std::pair<double, double>>;

Range range_of(const Params& p, const std::string& name) {
  std::vector<double> v = p.numbers(name);
  if (v.empty()) return std::nullopt;
  return std::make_pair(v[0], v[1]);
}

// Per row, the entry of the smallest (take_min) or largest value among the `allowed` pairs, not
// past `thresholds` (per row; the semi-hard condition) and inside `range`; `valid`: rows that have
// one. PML's BatchEasyHardMiner.get_x_per_row.
struct RowPick {
  torch::Tensor values, indices, valid;
};

RowPick pick_per_row(bool take_min, const torch::Tensor& mat, const torch::Tensor& allowed, const Range& range,
                     const torch::Tensor& thresholds) {
  torch::Tensor excluded = ~allowed;
  if (thresholds.defined())
    excluded = excluded | (take_min ? mat <= thresholds.unsqueeze(1) : mat >= thresholds.unsqueeze(1));
  if (range) excluded = excluded | (mat > range->second) | (mat < range->first);
  torch::Tensor filled = mat.masked_fill(excluded, finite_extreme(mat, take_min));
  auto [values, indices] = take_min ? filled.min(1) : filled.max(1);
  return {values, indices, (~excluded).any(1)};
}

// BatchEasyHardMiner.mine: returns pairs (a1, p, a2, n).
class EasyHardMining {
 public:
  EasyHardMining(Strategy pos, Strategy neg, Range pos_range, Range neg_range)
      : pos_(pos), neg_(neg), pos_range_(pos_range), neg_range_(neg_range) {}

  IndicesTuple mine(const MiningDistance& d, const MiningInput& in) const {
    const torch::Tensor mat = d.matrix(in.query, in.reference);
    // A hard or semi-hard positive is the farthest, an easy one the closest; negatives the other
    // way round. Farthest is the largest distance, or the smallest similarity.
    auto positive_takes_max = [&](Strategy s) { return (s == Strategy::easy) == d.inverted(); };
    auto positives = [&](const torch::Tensor& thr) {
      return pick_per_row(!positive_takes_max(pos_), mat, in.relation.positive, pos_range_, thr);
    };
    auto negatives = [&](const torch::Tensor& thr) {
      return pick_per_row(positive_takes_max(neg_), mat, in.relation.negative, neg_range_, thr);
    };
    RowPick p, n;
    if (pos_ == Strategy::semihard && neg_ != Strategy::all) {
      n = negatives({});
      p = positives(n.values);
    } else if (neg_ == Strategy::semihard && pos_ != Strategy::all) {
      p = positives({});
      n = negatives(p.values);
    } else {
      if (pos_ != Strategy::all) p = positives({});
      if (neg_ != Strategy::all) n = negatives({});
    }
    const torch::Tensor rows = torch::arange(mat.size(0), torch::TensorOptions().dtype(torch::kLong).device(mat.device()));
    const IndicesTuple every = all_pairs(in.relation);
    if (pos_ != Strategy::all && neg_ != Strategy::all) {
      const torch::Tensor keep = p.valid & n.valid;
      const torch::Tensor a = rows.masked_select(keep);
      return {false, a, p.indices.masked_select(keep), a, n.indices.masked_select(keep)};
    }
    if (pos_ == Strategy::all && neg_ != Strategy::all)
      return {false, every.a1, every.p, rows.masked_select(n.valid), n.indices.masked_select(n.valid)};
    if (pos_ != Strategy::all)
      return {false, rows.masked_select(p.valid), p.indices.masked_select(p.valid), every.a2, every.n};
    return every;
  }

 private:
  Strategy pos_, neg_;
  Range pos_range_, neg_range_;
};

class BatchEasyHardMiner final : public Miner {
 public:
  explicit BatchEasyHardMiner(const ComponentContext& c)
      : distance_(c.params()),
        mining_(strategy_of(c.params().string("pos_strategy")), strategy_of(c.params().string("neg_strategy")),
                range_of(c.params(), "allowed_pos_range"), range_of(c.params(), "allowed_neg_range")) {}

 protected:
  IndicesTuple mine_indices(const MiningInput& in) override { return mining_.mine(distance_, in); }

 private:
  MiningDistance distance_;
  EasyHardMining mining_;
};

class BatchHardMiner final : public Miner {
 public:
  explicit BatchHardMiner(const ComponentContext& c)
      : distance_(c.params()), mining_(Strategy::hard, Strategy::hard, std::nullopt, std::nullopt) {}

 protected:
  IndicesTuple mine_indices(const MiningInput& in) override {
    IndicesTuple t = mining_.mine(distance_, in);
    return {true, t.a1, t.p, torch::Tensor(), t.n};
  }

 private:
  MiningDistance distance_;
  EasyHardMining mining_;
};

class MultiSimilarityMiner final : public Miner {
 public:
  explicit MultiSimilarityMiner(const ComponentContext& c) : distance_(c.params()), epsilon_(c.params().number("epsilon")) {}

 protected:
  IndicesTuple mine_indices(const MiningInput& in) override {
    const IndicesTuple every = all_pairs(in.relation);
    if (every.size(every.a1) == 0 || every.size(every.a2) == 0) {
      const torch::Tensor none = every.a1.narrow(0, 0, 0);
      return {false, none, none, none, none};
    }
    const torch::Tensor mat = distance_.matrix(in.query, in.reference);
    const bool inv = distance_.inverted();
    // Positives sort with every other entry at the near end, negatives at the far end.
    auto [pos_sorted, pos_idx] = mat.masked_fill(~in.relation.positive, finite_extreme(mat, inv)).sort(1);
    auto [neg_sorted, neg_idx] = mat.masked_fill(~in.relation.negative, finite_extreme(mat, !inv)).sort(1);
    const std::int64_t last = mat.size(1) - 1;
    torch::Tensor hard_pos = inv ? pos_sorted - epsilon_ < neg_sorted.select(1, last).unsqueeze(1)
                                 : pos_sorted + epsilon_ > neg_sorted.select(1, 0).unsqueeze(1);
    torch::Tensor hard_neg = inv ? neg_sorted + epsilon_ > pos_sorted.select(1, 0).unsqueeze(1)
                                 : neg_sorted - epsilon_ < pos_sorted.select(1, last).unsqueeze(1);
    const torch::Tensor hp = hard_pos.nonzero(), hn = hard_neg.nonzero();
    const torch::Tensor a1 = hp.select(1, 0), a2 = hn.select(1, 0);
    return {false, a1, pos_idx.index({a1, hp.select(1, 1)}), a2, neg_idx.index({a2, hn.select(1, 1)})};
  }

 private:
  MiningDistance distance_;
  double epsilon_;
};

class PairMarginMiner final : public Miner {
 public:
  explicit PairMarginMiner(const ComponentContext& c)
      : distance_(c.params()), pos_margin_(c.params().number("pos_margin")), neg_margin_(c.params().number("neg_margin")) {}

 protected:
  IndicesTuple mine_indices(const MiningInput& in) override {
    const torch::Tensor mat = distance_.matrix(in.query, in.reference);
    const IndicesTuple t = all_pairs(in.relation);
    const torch::Tensor pos = mat.index({t.a1, t.p}), neg = mat.index({t.a2, t.n});
    // Positive pairs not yet within pos_margin, negative pairs not yet beyond neg_margin.
    const torch::Tensor keep_pos = distance_.inverted() ? pos < pos_margin_ : pos > pos_margin_;
    const torch::Tensor keep_neg = distance_.inverted() ? neg > neg_margin_ : neg < neg_margin_;
    return {false, t.a1.masked_select(keep_pos), t.p.masked_select(keep_pos), t.a2.masked_select(keep_neg),
            t.n.masked_select(keep_neg)};
  }

 private:
  MiningDistance distance_;
  double pos_margin_, neg_margin_;
};

class TripletMarginMiner final : public Miner {
 public:
  explicit TripletMarginMiner(const ComponentContext& c)
      : distance_(c.params()), margin_(c.params().number("margin")), type_(c.params().string("type_of_triplets")) {}

 protected:
  IndicesTuple mine_indices(const MiningInput& in) override {
    const IndicesTuple t = all_triplets(in.relation);
    const torch::Tensor mat = distance_.matrix(in.query, in.reference);
    const torch::Tensor ap = mat.index({t.a1, t.p}), an = mat.index({t.a1, t.n});
    // How much closer the positive is than the negative.
    const torch::Tensor triplet_margin = distance_.margin(an, ap);
    torch::Tensor keep;
    if (type_ == "easy") {
      keep = triplet_margin > margin_;
    } else {
      keep = triplet_margin <= margin_;
      if (type_ == "hard") keep = keep & (triplet_margin <= 0);
      if (type_ == "semihard") keep = keep & (triplet_margin > 0);
    }
    return {true, t.a1.masked_select(keep), t.p.masked_select(keep), torch::Tensor(), t.n.masked_select(keep)};
  }

 private:
  MiningDistance distance_;
  double margin_;
  std::string type_;
};

// allowed_pos_range / allowed_neg_range: empty, or [low, high].
void check_range(ContractContext& c, const char* name) {
  const std::vector<double> v = c.params().numbers(name);
  if (!v.empty() && (v.size() != 2 || v[0] > v[1]))
    c.error(cat(name, " must be empty or [low, high] with low <= high, got ", v.size(), " number(s)"));
}

}  // namespace

ComponentType batch_easy_hard_miner_type() {
  const std::vector<std::string> strategies{"easy", "semihard", "hard", "all"};
  return miner_type("torch.batch_easy_hard_miner", false, "euclidean")
      .doc("PML's BatchEasyHardMiner: per anchor one positive and one negative by strategy (easy: the closest "
           "positive / farthest negative; hard: the farthest positive / closest negative; semihard: the hard one "
           "short of the other's distance; all: every pair); pairs (a1, p, a2, n). The defaults (easy positive, "
           "semihard negative: the closest negative farther than the closest positive) are the semi-hard miner.")
      .param(Param::choice("pos_strategy", strategies).default_value("easy").doc("how positives are chosen"))
      .param(Param::choice("neg_strategy", strategies).default_value("semihard").doc("how negatives are chosen"))
      .param(Param::numbers("allowed_pos_range").default_value(std::vector<double>{}).doc(
          "[low, high]: only positive pairs at distances in it; empty: any"))
      .param(Param::numbers("allowed_neg_range").default_value(std::vector<double>{}).doc(
          "[low, high]: only negative pairs at distances in it; empty: any"))
      .check([](ContractContext& c) {
        const std::string pos = c.params().string("pos_strategy"), neg = c.params().string("neg_strategy");
        if (pos == "semihard" && neg == "semihard") c.error("pos_strategy and neg_strategy cannot both be semihard");
        if ((pos == "all" && neg == "semihard") || (pos == "semihard" && neg == "all"))
          c.error("semihard cannot be combined with all (pos_strategy " + pos + ", neg_strategy " + neg + ")");
        check_range(c, "allowed_pos_range");
        check_range(c, "allowed_neg_range");
      })
      .create<BatchEasyHardMiner>();
}

ComponentType batch_hard_miner_type() {
  return miner_type("torch.batch_hard_miner", true, "euclidean")
      .doc("PML's BatchHardMiner: per anchor with a positive and a negative, the farthest positive and the closest "
           "negative; triplets (a, p, n).")
      .create<BatchHardMiner>();
}

ComponentType multi_similarity_miner_type() {
  return miner_type("torch.multi_similarity_miner", false, "cosine")
      .doc("PML's MultiSimilarityMiner (Wang et al. 2019): positive pairs less similar than the anchor's most similar "
           "negative plus epsilon, negative pairs more similar than its least similar positive minus epsilon; pairs "
           "(a1, p, a2, n). Cosine similarity by default, as PML.")
      .param(Param::number("epsilon").default_value(0.1).min(0.0).doc("the slack of both conditions"))
      .create<MultiSimilarityMiner>();
}

ComponentType pair_margin_miner_type() {
  return miner_type("torch.pair_margin_miner", false, "euclidean")
      .doc("PML's PairMarginMiner: positive pairs farther than pos_margin and negative pairs closer than neg_margin "
           "(for a similarity: less similar than pos_margin, more similar than neg_margin); pairs (a1, p, a2, n).")
      .param(Param::number("pos_margin").default_value(0.2).doc("positive pairs beyond this are mined"))
      .param(Param::number("neg_margin").default_value(0.8).doc("negative pairs within this are mined"))
      .create<PairMarginMiner>();
}

ComponentType triplet_margin_miner_type() {
  return miner_type("torch.triplet_margin_miner", true, "euclidean")
      .doc("PML's TripletMarginMiner: of every triplet (a, p, n), those with m = d_an - d_ap (s_ap - s_an for a "
           "similarity) by type_of_triplets: all: m <= margin; hard: m <= 0; semihard: 0 < m <= margin; easy: "
           "m > margin. Triplets (a, p, n).")
      .param(Param::number("margin").default_value(0.2).doc("the margin m is compared with"))
      .param(Param::choice("type_of_triplets", {"all", "hard", "semihard", "easy"}).default_value("all").doc(
          "which triplets are mined"))
      .create<TripletMarginMiner>();
}

}  // namespace embedflow::torchfam
