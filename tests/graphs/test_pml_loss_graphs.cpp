// The graphs that train with losses ported from pytorch-metric-learning, run small through the
// CLI: graphs/reid_proxy_anchor.yaml (Proxy-Anchor on PK batches of gen_reid_features' re-id
// features; its held-out identities ranked better than by the raw features) and
// graphs/fashion_multi_similarity.yaml (multi-similarity on Fashion-MNIST; self-retrieval on test
// images better than raw pixels). Figures come from each run's table.json.
#include <catch2/catch.hpp>

#include <filesystem>

#include "cli.hpp"

using namespace embedflow::test;
namespace fs = std::filesystem;

namespace {

// The table's rows as "method rank-1 mAP" lines, and a check that `better` beats every other row
// by `by` in mAP and rank-1.
const char* kCompareRows = R"PY(
import json, sys
table, better, by = sys.argv[1], sys.argv[2], float(sys.argv[3])
rows = {m["method"]: m for m in json.load(open(table))["methods"]}
for name, m in rows.items():
    print(f"{name}: rank-1 {m['rank-1']:.4f} mAP {m['mAP']:.4f}")
assert better in rows, sorted(rows)
for name, m in rows.items():
    if name != better:
        assert rows[better]["mAP"] > m["mAP"] + by, (better, rows[better]["mAP"], name, m["mAP"])
        assert rows[better]["rank-1"] > m["rank-1"], (better, rows[better]["rank-1"], name, m["rank-1"])
)PY";

}  // namespace

TEST_CASE("reid_proxy_anchor.yaml: Proxy-Anchor on PK batches beats the raw features on held-out identities", "[graphs][pml]") {
  const fs::path dir = scratch_dir("reid_proxy_anchor");
  fs::create_directories(dir / "data");
  // A third of the default data: 100 training identities (the proxies), 100 held-out test ones.
  const Result data = run_process({GEN_REID_FEATURES, "--out", (dir / "data/reid_128.h5").string(), "--dim", "128",
                                   "--identities", "100", "--val-identities", "10", "--test-identities", "100"});
  INFO(data.err);
  REQUIRE(data.exit_code == 0);
  const Result r = run_cli_in(dir, {"run", source_dir() + "/graphs/reid_proxy_anchor.yaml", "--threads", "1", "--quiet",
                                    "--set", "identities=100", "--set", "epochs=8", "--set", "learned.bootstrap=0",
                                    "--set", "euclidean.bootstrap=0", "--set", "cosine.bootstrap=0"});
  INFO(r.err);
  REQUIRE(r.exit_code == 0);
  const fs::path out = dir / "out/reid_proxy_anchor";
  CHECK(fs::exists(out / "train/loss.png"));
  const Result check = run_python(kCompareRows, {(out / "table.json").string(), "MLP + Proxy-Anchor", "0.05"});
  WARN(check.out);
  INFO(check.err);
  CHECK(check.exit_code == 0);
}

TEST_CASE("fashion_multi_similarity.yaml: multi-similarity on PK batches beats raw pixels in self-retrieval", "[graphs][pml]") {
  const fs::path dir = scratch_dir("fashion_multi_similarity");
  const Result r = run_cli({"run", source_dir() + "/graphs/fashion_multi_similarity.yaml", "--threads", "1", "--quiet",
                            "--set", "out=" + (dir / "out").string(), "--set", "train_limit=2000",
                            "--set", "test_limit=500", "--set", "learned.bootstrap=0", "--set", "raw.bootstrap=0"});
  INFO(r.err);
  REQUIRE(r.exit_code == 0);
  const Result check = run_python(kCompareRows, {(dir / "out/table.json").string(), "small CNN + multi-similarity", "0.05"});
  WARN(check.out);
  INFO(check.err);
  CHECK(check.exit_code == 0);
}
