// Node types for engine tests only: a vector source with a dim parameter, a two-input node
// that requires equal dims, a node that throws at a given record, and a parallel node with
// random per-record delays (to provoke out-of-order completion), and a counted line reader (cache
// tests: the log says how often it ran), and a slow pass-through that reports progress with
// metrics, logs now and then and writes a JSON summary (run record and live view tests).
#include <chrono>
#include <cmath>
#include <filesystem>
#include <fstream>
#include <thread>

#include <embedflow/atomic_file.hpp>
#include <embedflow/embedflow.hpp>
#include <embedflow/progress.hpp>
#include <embedflow/report_files.hpp>
#include <embedflow/results.hpp>

using namespace embedflow;

namespace {

class Vectors final : public Node {
 public:
  void open(NodeContext& ctx) override {
    count_ = ctx.params().integer("count");
    dim_ = ctx.params().integer("dim");
    batch_ = ctx.params().integer("batch");
  }
  bool produce(Emitter& out) override {
    if (done_ >= count_) return false;
    std::vector<float> v(static_cast<std::size_t>(batch_ * dim_), 1.0f);
    out.emit(Record().set("embedding", Array::from_vector<float>({batch_, dim_}, std::move(v))));
    ++done_;
    return done_ < count_;
  }

 private:
  std::int64_t count_ = 0, dim_ = 0, batch_ = 0, done_ = 0;
};

class PairCheck final : public Node {
 public:
  void process(std::size_t port, const RecordPtr& r, Emitter& out) override {
    out.emit(Record().set("port", Array::scalar<std::int64_t>(static_cast<std::int64_t>(port))));
  }
};

class Explode final : public Node {
 public:
  void open(NodeContext& ctx) override { at_ = ctx.params().integer("at"); }
  void process(std::size_t, const RecordPtr& r, Emitter& out) override {
    if (seen_++ == at_) throw DataError(cat("record ", at_, " is poisoned"));
    out.emit(r);
  }

 private:
  std::int64_t at_ = 0, seen_ = 0;
};

class Jittery final : public Node {
 public:
  void open(NodeContext& ctx) override { seed_ = ctx.seed(); }
  void process(std::size_t, const RecordPtr& r, Emitter& out) override {
    Rng rng(derive_seed(seed_, out.sequence()));
    std::this_thread::sleep_for(std::chrono::microseconds(rng() % 300));
    out.emit(r);
  }

 private:
  std::uint64_t seed_ = 0;
};

// Emits one record per line of a text file, {n: i64, text: str, value: f64}; appends "run" to
// `log` on open so a test can count how often the node actually ran.
class Lines final : public Node {
 public:
  void open(NodeContext& ctx) override {
    const std::string& path = ctx.params().string("path");
    in_.open(path);
    if (!in_) throw DataError(cat(path, ": cannot open"));
    if (ctx.params().has("log")) std::ofstream(ctx.params().string("log"), std::ios::app) << "run\n";
    delay_us_ = ctx.params().integer("delay_us");
  }
  bool produce(Emitter& out) override {
    std::string line;
    if (!std::getline(in_, line)) return false;
    if (delay_us_) std::this_thread::sleep_for(std::chrono::microseconds(delay_us_));
    out.emit(Record()
                 .set("n", Array::scalar<std::int64_t>(n_))
                 .set("text", Array::string_scalar(line))
                 .set("value", Array::scalar<double>(0.5 * static_cast<double>(n_))));
    ++n_;
    return true;
  }

 private:
  std::ifstream in_;
  std::int64_t n_ = 0, delay_us_ = 0;
};

// Component contracts without LibTorch: an encoder "model", a composite that stacks two models'
// embeddings, a pair loss and a label loss, a trainer that checks them and emits snapshots that
// carry the model's contract, and an embedder that takes D from the snapshot.
class Inert final : public Component {
 public:
  explicit Inert(const ComponentContext&) {}
};
class Passing final : public Node {};

Dim fixed_or_unknown(const PortSchema& s, const std::string& field, std::size_t dim) {
  const FieldSchema* f = s.find(field);
  if (!f || !f->shape || f->shape->size() <= dim) return Dim{};
  return (*f->shape)[dim];
}

void register_contract_types(Registry& r) {
  r.add(NodeTypeBuilder("testing.batches")
            .doc("Declares pair batches (a_image, b_image, pair_label) or label batches (image, label) of "
                 "f32[B,channels,28,28] images; emits nothing.")
            .source()
            .param(Param::choice("kind", {"pairs", "labels"}))
            .param(Param::integer("channels").default_value(1).min(1))
            .output("out", "*")
            .check([](SchemaContext& c) {
              std::string ch = std::to_string(c.params().integer("channels"));
              std::string image = "f32[B," + ch + ",28,28]";
              c.set_output("out", PortSchema::parse(c.params().string("kind") == "pairs"
                                                        ? "a_image: " + image + ", b_image: " + image + ", pair_label: f32[B]"
                                                        : "image: " + image + ", label: i64[B]"));
            })
            .create<Passing>());
  r.add(ComponentTypeBuilder("testing.encoder", "model")
            .doc("An image encoder's contract: channels in, dim out.")
            .param(Param::integer("channels").default_value(1).min(1))
            .param(Param::integer("dim").default_value(8).min(1))
            .consumes("in", "image: f32[N,$channels,H,W]")
            .produces("embedding: f32[N,$dim]")
            .create<Inert>());
  r.add(ComponentTypeBuilder("testing.stack", "model")
            .doc("concat(a(x), b(x)): the embedding size is the sum of its parts'.")
            .param(Param::component("a", "model"))
            .param(Param::component("b", "model"))
            .check([](ContractContext& c) {
              const ComponentContract* a = c.part("a");
              const ComponentContract* b = c.part("b");
              Dim da = fixed_or_unknown(a->produces, "embedding", 1), db = fixed_or_unknown(b->produces, "embedding", 1);
              Dim sum = da.kind == Dim::Kind::fixed && db.kind == Dim::Kind::fixed ? Dim{Dim::Kind::fixed, da.value + db.value, ""}
                                                                                  : Dim{};
              PortSchema out;
              out.add(FieldSchema{"embedding", DType::f32, std::vector<Dim>{Dim{Dim::Kind::symbol, -1, "N"}, sum}});
              c.contract().produces = out;
            })
            .create<Inert>());
  r.add(ComponentTypeBuilder("testing.pair_loss", "loss")
            .doc("A loss on pairs of embeddings.")
            .consumes("batch", "a_image: any[N,...], b_image: any[N,...], pair_label: any[N]")
            .consumes("outputs", "embedding: f32[N,D]")
            .create<Inert>());
  r.add(ComponentTypeBuilder("testing.label_loss", "loss")
            .doc("A loss on labelled images.")
            .consumes("batch", "image: any[N,...]")
            .consumes_one_of("batch", "label: i64[N] | pair_labels: f32[N,N]")
            .consumes("outputs", "embedding: f32[N,D]")
            .create<Inert>());
  r.add(NodeTypeBuilder("testing.trainer")
            .doc("Resolves its model's and loss's contracts; snapshots carry the model's. An optional validation "
                 "input, as torch.train's.")
            .param(Param::component("model", "model"))
            .param(Param::component("loss", "loss"))
            .input("in", "*")
            .optional_input("validation", "*")
            .output("model", "weights: u8[W], spec: str[1]")
            .check([](SchemaContext& c) {
              const PortSchema& in = c.input("in");
              PortSchema images = PortSchema::any();
              for (const char* f : {"image", "a_image"})
                if (const FieldSchema* fs = in.find(f)) {
                  FieldSchema as_input = *fs;
                  as_input.name = "image";
                  images.add(as_input);
                  break;
                }
              ComponentContract model = c.component("model", {{"in", images}});
              c.component("loss", {{"batch", in}, {"outputs", model.produces}});
              PortSchema out = c.output("model");
              out.set_carried("model", model.produces);
              c.set_output("model", out);
            })
            .create<Passing>());
  r.add(NodeTypeBuilder("testing.embedder")
            .doc("Embeds with the snapshot's model: embedding f32[B,D], D from what the snapshot carries.")
            .input("in", "image: any[B,...]")
            .side_input("model", "weights: u8[W], spec: str[1]")
            .output("out", "embedding: f32[B,D]")
            .check([](SchemaContext& c) {
              const PortSchema* produces = c.input("model").carried("model");
              Dim d = produces ? fixed_or_unknown(*produces, "embedding", 1) : Dim{};
              if (d.kind != Dim::Kind::fixed) return;
              PortSchema out;
              out.add(FieldSchema{"embedding", DType::f32, std::vector<Dim>{Dim{Dim::Kind::symbol, -1, "B"}, d}});
              c.set_output("out", out);
            })
            .create<Passing>());
}

// Reports progress per record: done = records so far, total = `total`, loss = 1 / done,
// lr = 0.5 ^ done; logs a line every `log_every` records; writes {"records": n} to `json`.
class ProgressReporter final : public Node {
 public:
  void open(NodeContext& ctx) override {
    ctx_ = &ctx;
    total_ = static_cast<std::uint64_t>(ctx.params().integer("total"));
    delay_us_ = ctx.params().integer("delay_us");
    log_every_ = ctx.params().integer("log_every");
    json_ = ctx.params().has("json") ? ctx.params().string("json") : "";
    // What the report shows: the loss and lr curves from the progress metrics, and a two-point
    // chart that says nothing about drawing few points (the report must not draw it).
    publish_chart(ctx, progress_chart("loss", "step", "loss", "loss"));
    ResultChart lr = progress_chart("learning rate", "step", "learning rate", "lr");
    lr.log_y = true;
    publish_chart(ctx, lr);
    ResultChart two;
    two.title = "two points";
    two.x_label = "x";
    two.y_label = "y";
    two.series.push_back({"endpoints", {0.0, 1.0}, {0.25, 0.75}, {}, {}, false});
    publish_chart(ctx, two);
    publish_text(ctx, "settings", cat("total: ", total_, "\ndelay_us: ", delay_us_));
  }
  void process(std::size_t, const RecordPtr& record, Emitter& out) override {
    std::this_thread::sleep_for(std::chrono::microseconds(delay_us_));
    ++done_;
    ProgressReport p;
    p.done = done_;
    p.total = total_;
    p.unit = "steps";
    p.metrics = {{"loss", 1.0 / static_cast<double>(done_)}, {"lr", std::pow(0.5, static_cast<double>(done_))}};
    report_progress(*ctx_, p);
    if (log_every_ > 0 && done_ % static_cast<std::uint64_t>(log_every_) == 0) log_info(ctx_->id(), "step ", done_);
    out.emit(record);
  }
  void close(Emitter&) override {
    // A summary table: the records seen, and the last loss with an interval around it.
    ResultTable t;
    t.title = "progress summary";
    t.columns = {{"records", "records", "", 1.0, true}, {"last_loss", "last loss", "", 1.0, false}};
    const double last = done_ ? 1.0 / static_cast<double>(done_) : NAN;
    t.rows.push_back({"reporter", {{"records", static_cast<double>(done_)}, {"last_loss", last}},
                      {{"last_loss", {last * 0.9, last * 1.1}}}});
    publish_results(*ctx_, t);
    if (json_.empty()) return;
    // Two figures: a 1x1 PNG beside the JSON (inside the run folder when the JSON is), and a
    // file outside any run folder, which the report must name and not read.
    static const unsigned char kPng[] = {
        0x89, 0x50, 0x4e, 0x47, 0x0d, 0x0a, 0x1a, 0x0a, 0x00, 0x00, 0x00, 0x0d, 0x49, 0x48, 0x44, 0x52, 0x00, 0x00, 0x00,
        0x01, 0x00, 0x00, 0x00, 0x01, 0x08, 0x06, 0x00, 0x00, 0x00, 0x1f, 0x15, 0xc4, 0x89, 0x00, 0x00, 0x00, 0x0d, 0x49,
        0x44, 0x41, 0x54, 0x78, 0x9c, 0x63, 0xf8, 0xcf, 0xc0, 0xf0, 0x1f, 0x00, 0x05, 0x00, 0x01, 0xff, 0x89, 0x99, 0x3d,
        0x1d, 0x00, 0x00, 0x00, 0x00, 0x49, 0x45, 0x4e, 0x44, 0xae, 0x42, 0x60, 0x82};
    const std::string png = (std::filesystem::path(json_).parent_path() / "pixel.png").string();
    write_file_atomic(png, std::string_view(reinterpret_cast<const char*>(kPng), sizeof kPng));
    publish_figure(*ctx_, {"one pixel", png, "a 1x1 PNG"});
    publish_figure(*ctx_, {"outside", "/etc/hostname", "not the run's"});
    JsonWriter j;
    j.begin_object().field("records", static_cast<std::int64_t>(done_)).field("last_loss", 1.0 / static_cast<double>(done_));
    j.end_object();
    write_text_atomic(json_, j.str() + "\n");
  }

 private:
  NodeContext* ctx_ = nullptr;
  std::uint64_t total_ = 0, done_ = 0;
  std::int64_t delay_us_ = 0, log_every_ = 0;
  std::string json_;
};

void register_optional_side(Registry& r);

void register_types(Registry& r) {
  register_contract_types(r);
  register_optional_side(r);
  r.add(NodeTypeBuilder("testing.lines")
            .doc("Emits one record per line of a text file; appends 'run' to `log` when it opens.")
            .source()
            .param(Param::path("path").doc("text file"))
            .param(Param::path("log").optional().not_fingerprinted().doc("append 'run' here on open"))
            .param(Param::integer("delay_us").default_value(0).min(0).not_fingerprinted().doc("sleep per line"))
            .output("out", "n: i64[], text: str[], value: f64[]")
            .create<Lines>());
  r.add(NodeTypeBuilder("testing.vectors")
            .doc("Emits count batches of ones, shape [batch, dim].")
            .source()
            .param(Param::integer("count").default_value(3).min(0))
            .param(Param::integer("dim").min(1))
            .param(Param::integer("batch").default_value(2).min(1))
            .output("out", "embedding: f32[B,$dim]")
            .create<Vectors>());
  r.add(NodeTypeBuilder("testing.pair_check")
            .doc("Requires the same D on both inputs.")
            .input("a", "embedding: f32[B,D]")
            .input("b", "embedding: f32[B,D]")
            .output("out", "port: i64[]")
            .create<PairCheck>());
  r.add(NodeTypeBuilder("testing.explode")
            .doc("Throws at record `at`.")
            .param(Param::integer("at").min(0))
            .input("in", "*")
            .output("out", "*")
            .forward("in", "out")
            .create<Explode>());
  r.add(NodeTypeBuilder("testing.progress")
            .doc("Pass-through that reports progress (loss, lr) per record, logs every log_every records and "
                 "writes a JSON summary at close.")
            .param(Param::integer("total").default_value(0).min(0).doc("records expected (0: unknown)"))
            .param(Param::integer("delay_us").default_value(0).min(0).doc("sleep per record"))
            .param(Param::integer("log_every").default_value(0).min(0).doc("log a line every this many records"))
            .param(Param::path("json").optional().doc("write {records, last_loss} here at close"))
            .input("in", "*")
            .output("out", "*")
            .forward("in", "out")
            .create<ProgressReporter>());
  r.add(NodeTypeBuilder("testing.jittery")
            .doc("Parallel pass-through with random delays.")
            .parallel()
            .input("in", "*")
            .output("out", "*")
            .forward("in", "out")
            .create<Jittery>());
}

// Passes each record on with `side_value`: the `value` of the latest record on its optional side
// input, or -1 while it has none.
class OptionalSide final : public Node {
 public:
  void open(NodeContext& ctx) override { ctx_ = &ctx; }
  void process(std::size_t, const RecordPtr& in, Emitter& out) override {
    Record r = *in;
    const RecordPtr side = ctx_->side(1);
    const Array* v = side ? side->find("value") : nullptr;
    r.set("side_value", Array::scalar<std::int64_t>(v ? v->as_int(0) : -1));
    out.emit(share(std::move(r)));
  }

 private:
  NodeContext* ctx_ = nullptr;
};

void register_optional_side(Registry& r) {
  r.add(NodeTypeBuilder("testing.optional_side")
            .doc("Tags each record with the value of its optional side input (-1 without one).")
            .input("in", "*")
            .side_input("side", "*", "optional", /*optional=*/true)
            .output("out", "*")
            .create<OptionalSide>());
}

}  // namespace

EMBEDFLOW_PLUGIN("testing", "0.0.1", "", register_types)
