// Damaged LibTorch archives: LibTorch's reader never checks the zip's CRC-32s, so embedflow walks
// every archive first (plugins/torch/zip_integrity.cpp) and digests the saved tensors
// (model.hpp, write_state). Checked here: the zip walk's decisions on the fuzz corpus, 80
// single-bit flips of a real checkpoint (each refused naming the file, or else loading exactly
// the original weights), every loading path (checkpoint:, weights:, resume:) refusing a damaged
// file, `resume: auto` falling back to the newest intact checkpoint, and a tensor changed with
// its CRC rewritten to match (Python's zlib) caught by the digest.
#include <catch2/catch.hpp>

#include <algorithm>
#include <fstream>
#include <random>

#include "cli.hpp"
#include "embedflow/error.hpp"
#include "torch_test_util.hpp"
#include "zip_integrity.hpp"

namespace fs = std::filesystem;
using namespace embedflow::test;
using embedflow::torchfam::verify_zip_file;

namespace {

std::string read_bytes(const fs::path& p) {
  std::ifstream in(p, std::ios::binary);
  return std::string(std::istreambuf_iterator<char>(in), {});
}

void write_bytes(const fs::path& p, const std::string& bytes) {
  std::ofstream out(p, std::ios::binary);
  out.write(bytes.data(), static_cast<std::streamsize>(bytes.size()));
}

// Plain SGD (no momentum buffers), so the largest tensor in a checkpoint is a model weight.
std::string train_yaml(const fs::path& dir, const std::string& resume, int max_steps) {
  return "# checkpoint integrity\nseed: 3\nnodes:\n"
         "  data:  {type: io.hdf5_reader, params: {path: " + torch_data("train.h5") +
         ", fields: [id, label, image], batch_size: 64}}\n"
         "  train: {type: torch.train, params: {model: {type: torch.small_cnn, channels: [4, 8], hidden: 16, "
         "embedding_dim: 8}, loss: {type: torch.all_pairs_contrastive, mu: 0.5, margin: 1.0}, "
         "optimizer: {type: torch.sgd, lr: 0.05}, epochs: 2, threads: 1, checkpoint_every: 5, keep_checkpoints: 0, "
         "max_steps: " + std::to_string(max_steps) + ", resume: '" + resume + "', log_dir: " + (dir / "log").string() +
         ", checkpoint_dir: " + (dir / "ckpt").string() + "}}\n"
         "edges: [data.out -> train.in]\n";
}

// Embeds test.h5 through `source` (a torch.embed parameter map entry) into out.
std::string embed_yaml(const std::string& source, const fs::path& out) {
  return "# embed\nseed: 1\nnodes:\n"
         "  test:  {type: io.hdf5_reader, params: {path: " + torch_data("test.h5") + ", batch_size: 128}}\n"
         "  embed: {type: torch.embed, params: {" + source + "}}\n"
         "  save:  {type: io.hdf5_writer, params: {path: " + out.string() + ", group: embeddings}}\n"
         "edges: [test.out -> embed.in, embed.out -> save.in]\n";
}

const std::string kModel = "model: {type: torch.small_cnn, channels: [4, 8], hidden: 16, embedding_dim: 8, weights: ";

}  // namespace

TEST_CASE("the zip walk accepts the corpus's ok- archives and refuses its bad- ones naming the file", "[torch][checkpoint]") {
  std::size_t ok = 0, bad = 0;
  for (const auto& e : fs::directory_iterator(fs::path(source_dir()) / "fuzz" / "corpus" / "checkpoint_zip")) {
    const std::string name = e.path().filename().string();
    INFO(name);
    if (name.rfind("ok-", 0) == 0) {
      CHECK_NOTHROW(verify_zip_file(e.path(), name));
      ++ok;
    } else if (name.rfind("bad-", 0) == 0) {
      CHECK_THROWS_WITH(verify_zip_file(e.path(), name), Catch::StartsWith(name + ": "));
      ++bad;
    }
  }
  CHECK(ok >= 5);
  CHECK(bad >= 3);
}

TEST_CASE("a damaged checkpoint is refused wherever it is loaded, and resume: auto falls back to an intact one",
          "[torch][checkpoint][cli]") {
  const fs::path dir = scratch_dir("torch-checkpoint-integrity");
  run_graph_file_ok(dir, "train.yaml", train_yaml(dir, "", 10));
  const fs::path step5 = dir / "ckpt" / "step-00000005.pt", step10 = dir / "ckpt" / "step-00000010.pt";
  REQUIRE(fs::exists(step10));
  const std::string original = read_bytes(step10);
  const auto entries = verify_zip_file(step10, "step 10");
  run_graph_file_ok(dir, "embed.yaml", embed_yaml("checkpoint: " + step10.string(), dir / "reference.h5"));

  // 80 single-bit flips anywhere in the file. Each is refused naming the file, or else it hit a
  // byte no reader gives meaning to (a local header's alignment padding, a timestamp) and the
  // checkpoint embeds exactly as the original.
  const fs::path flips = dir / "flips";
  fs::create_directories(flips);
  std::mt19937_64 rng(7);
  std::size_t refused = 0, in_data = 0;
  std::vector<std::string> accepted;
  for (int k = 0; k < 80; ++k) {
    const std::size_t at = std::uniform_int_distribution<std::size_t>(0, original.size() - 1)(rng);
    std::string bytes = original;
    bytes[at] = static_cast<char>(bytes[at] ^ (1 << (k % 8)));
    const fs::path file = flips / ("flip-" + std::to_string(k) + ".pt");
    write_bytes(file, bytes);
    bool data = false;
    for (const auto& e : entries) data = data || (at >= e.data_offset && at < e.data_offset + e.size);
    in_data += data;
    try {
      verify_zip_file(file, file.string());
      INFO("a flip at byte " << at << " passes the zip walk");
      CHECK_FALSE(data);  // a flip inside an entry's bytes always changes its CRC-32
      accepted.push_back(file.string());
    } catch (const embedflow::DataError& e) {
      CHECK_THAT(e.what(), Catch::StartsWith(file.string() + ": "));
      ++refused;
    }
  }
  WARN("80 single-bit flips of a " << original.size() << "-byte checkpoint: " << refused << " refused, "
       << accepted.size() << " in padding or timestamps; " << in_data << " inside entries' bytes");
  CHECK(in_data > 0);
  CHECK(refused >= in_data);
  // The accepted flips, loaded through torch.embed: embeddings equal the original's bit for bit.
  std::vector<std::string> outputs{(dir / "reference.h5").string()};
  for (std::size_t i = 0; i < accepted.size() && i < 8; ++i) {
    const fs::path out = dir / ("accepted-" + std::to_string(i) + ".h5");
    run_graph_file_ok(dir, "embed-accepted.yaml", embed_yaml("checkpoint: " + accepted[i], out));
    outputs.push_back(out.string());
  }
  check_python(R"PY(
import sys, h5py, numpy as np
ref = h5py.File(sys.argv[1])['embeddings']['embedding'][:]
assert ref.shape == (128, 8), ref.shape
for p in sys.argv[2:]:
    assert np.array_equal(h5py.File(p)['embeddings']['embedding'][:], ref), p
print('identical', len(sys.argv) - 2)
)PY",
               outputs);

  // A flip in the largest tensor's bytes (a model weight), through each loading path: a located
  // error, a non-zero exit, no output.
  const auto largest = *std::max_element(entries.begin(), entries.end(), [](const auto& a, const auto& b) { return a.size < b.size; });
  REQUIRE(largest.name.find("/data/") != std::string::npos);
  std::string damaged = original;
  const std::size_t hit = largest.data_offset + largest.size / 2;
  damaged[hit] = static_cast<char>(damaged[hit] ^ 4);
  const fs::path bad = dir / "bad.pt";
  write_bytes(bad, damaged);
  for (const std::string& source : {"checkpoint: " + bad.string(), kModel + bad.string() + "}"}) {
    write_file(dir / "embed-bad.yaml", embed_yaml(source, dir / "bad.h5"));
    auto r = run_cli({"run", (dir / "embed-bad.yaml").string(), "--quiet"});
    INFO(source << "\n" << r.err);
    CHECK(r.exit_code != 0);
    CHECK_THAT(r.err, Catch::Contains(bad.string()) && Catch::Contains("is damaged") && Catch::Contains("CRC-32"));
    CHECK_FALSE(fs::exists(dir / "bad.h5"));
  }
  write_file(dir / "resume-bad.yaml", train_yaml(dir / "resume-bad", bad.string(), 12));
  auto resumed_bad = run_cli({"run", (dir / "resume-bad.yaml").string(), "--quiet"});
  INFO(resumed_bad.err);
  CHECK(resumed_bad.exit_code != 0);
  CHECK_THAT(resumed_bad.err, Catch::Contains(bad.string()) && Catch::Contains("is damaged"));

  // resume: auto with the newest checkpoint damaged takes step 5, with a warning naming step 10.
  write_bytes(step10, damaged);
  write_file(dir / "resume-auto.yaml", train_yaml(dir, "auto", 12));
  auto automatic = run_cli({"run", (dir / "resume-auto.yaml").string()});
  INFO(automatic.err);
  REQUIRE(automatic.exit_code == 0);
  CHECK_THAT(automatic.err, Catch::Contains("resume: auto skips the damaged checkpoint " + step10.string()) &&
                                Catch::Contains("at step 5"));
  CHECK(fs::exists(step5));

  // A model tensor changed and its CRC-32 rewritten in both headers: the zip walk passes, the
  // digest written with the tensors does not.
  write_bytes(step10, original);
  const fs::path rewritten = dir / "rewritten.pt";
  check_python(R"PY(
import sys, zipfile, zlib, struct
src, dst = sys.argv[1], sys.argv[2]
data = bytearray(open(src, 'rb').read())
z = zipfile.ZipFile(src)
info = max((i for i in z.infolist() if '/data/' in i.filename), key=lambda i: i.file_size)
name_len, extra_len = struct.unpack('<HH', data[info.header_offset + 26:info.header_offset + 30])
start = info.header_offset + 30 + name_len + extra_len
data[start + 4:start + 8] = struct.pack('<f', 123.0)  # the second float of the largest tensor
crc = zlib.crc32(bytes(data[start:start + info.file_size]))
data[info.header_offset + 14:info.header_offset + 18] = struct.pack('<I', crc)
# the central directory header whose name is the entry's
at = data.index(info.filename.encode(), z.start_dir) - 46
assert data[at:at + 4] == b'PK\x01\x02'
data[at + 16:at + 20] = struct.pack('<I', crc)
open(dst, 'wb').write(bytes(data))
zipfile.ZipFile(dst).testzip() is None or sys.exit('zipfile still finds a bad CRC')
print('rewrote', info.filename, info.file_size)
)PY",
               {step10.string(), rewritten.string()});
  CHECK_NOTHROW(verify_zip_file(rewritten, "rewritten"));
  write_file(dir / "embed-rewritten.yaml", embed_yaml("checkpoint: " + rewritten.string(), dir / "rewritten.h5"));
  auto digest = run_cli({"run", (dir / "embed-rewritten.yaml").string(), "--quiet"});
  INFO(digest.err);
  CHECK(digest.exit_code != 0);
  CHECK_THAT(digest.err, Catch::Contains(rewritten.string()) && Catch::Contains("do not match the digest"));
}
