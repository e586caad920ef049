// io.hdf5_writer — writes its input stream to an HDF5 stream file: features, embeddings, pairs,
// anything. One group (`group`) holds one chunked, extensible dataset per field; batches keep
// their sizes; io.hdf5_reader, h5py and h5dump read the result (layout: docs/hdf5.md).
//
// Inputs: in — any records; the first fixes the field names, dtypes and shapes (a later record
//         that differs fails the run, naming the file and the record index).
// Caveats: the file appears only when the stream ends cleanly: records go to a temporary file
//          that is fsynced and renamed over `path` at end of stream, so a failed or killed run
//          leaves the previous file untouched. A run interrupted by SIGINT/SIGTERM keeps what
//          it wrote as `<path>.partial` (atomic_file.hpp), never under `path`. mode: append copies the existing file first
//          (appending to a group must match its schema; a new group is added beside the
//          others). Parent directories are created. Relative paths are relative to the working
//          directory.
//
//   nodes:
//     numbers: {type: core.range, params: {count: 1000}}
//     batches: {type: core.batch, params: {size: 100}}
//     save:    {type: io.hdf5_writer, params: {path: out/numbers.h5, group: numbers, compression: 4}}
//   edges: [numbers.out -> batches.in, batches.out -> save.in]
#include <embedflow/atomic_file.hpp>
#include <embedflow/hdf5/stream_file.hpp>
#include <filesystem>

#include "io_types.hpp"

namespace embedflow::io {
namespace {

namespace fs = std::filesystem;

class Hdf5Writer final : public Node {
 public:
  void open(NodeContext& ctx) override {
    const Params& p = ctx.params();
    path_ = p.string("path");
    group_ = p.string("group");
    hdf5::WriterOptions o;
    o.deflate_level = static_cast<int>(p.integer("compression"));
    o.append = p.string("mode") == "append";
    if (!path_.parent_path().empty()) fs::create_directories(path_.parent_path());
    writer_ = std::make_unique<hdf5::StreamFileWriter>(
        path_, std::map<std::string, std::string>{{"graph", ctx.graph_file()}, {"node", ctx.id()}}, o);
    writer_->add_port(group_);
    node_ = ctx.id();
  }

  void process(std::size_t, const RecordPtr& record, Emitter&) override { writer_->append(group_, *record); }

  void close(Emitter&) override {
    // The drain after Ctrl-C closes this node too, but the stream it saw was cut short.
    if (outputs_interrupted()) {
      fs::path partial = partial_path(path_);
      writer_->commit_partial(partial);  // marked complete = 0: it was cut short
      log_warning(node_, "interrupted: kept ", writer_->records(group_), " records as ", partial.string(), "; ",
                  path_.string(), " is untouched");
      return;
    }
    writer_->commit();
    std::error_code ec;
    fs::remove(partial_path(path_), ec);  // a leftover of an earlier interrupted run
    log_info(node_, "wrote ", writer_->records(group_), " records to ", path_.string(), " (group '", group_, "')");
  }

 private:
  fs::path path_;
  std::string group_, node_;
  // Destroyed without commit (a failed or cancelled run) it deletes its temporary file.
  std::unique_ptr<hdf5::StreamFileWriter> writer_;
};

}  // namespace

NodeType hdf5_writer_type() {
  return NodeTypeBuilder("io.hdf5_writer")
      .doc("Writes a stream to an HDF5 stream file (one group, a dataset per field), atomically at end of stream.")
      .param(Param::path("path").not_fingerprinted().doc("file to write (replaced or appended to when the stream ends)"))
      .param(Param::choice("mode", {"overwrite", "append"}).default_value("overwrite").doc(
          "overwrite: replace the file; append: add records to it (same schema per group)"))
      .param(Param::string("group").default_value("data").doc("group that receives the stream"))
      .param(Param::integer("compression").default_value(0).range(0, 9).doc("deflate level; 0: uncompressed"))
      .input("in", "*", "records or batches to store")
      .check([](SchemaContext& c) {
        const Params& p = c.params();
        const std::string& group = p.string("group");
        if (group.empty() || group.find('/') != std::string::npos || group == "." || group == "..")
          c.error("group must be a plain name (no '/')", "group");
        if (p.string("mode") == "append" && fs::exists(p.string("path")) && !hdf5::is_stream_file(p.string("path")))
          c.error(cat(p.string("path"), ": mode append needs an embedflow stream file; this is another HDF5 file or not "
                                        "HDF5 at all (use mode: overwrite, or another path)"),
                  "mode");
      })
      .example("save: {type: io.hdf5_writer, params: {path: out/numbers.h5, group: numbers, compression: 4}}")
      .create<Hdf5Writer>();
}

}  // namespace embedflow::io
