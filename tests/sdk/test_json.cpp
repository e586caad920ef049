// The SDK's JSON text (JsonWriter, json_quote, json_number), checked against Python's json
// module: strings with control characters, quotes, backslashes, non-ASCII and invalid UTF-8
// parse and come back as written (invalid bytes as U+FFFD), and doubles are the shortest text
// that reads back as the same double (what Python's repr prints).
#include <catch2/catch.hpp>

#include <cmath>
#include <limits>

#include "cli.hpp"
#include "embedflow/report_files.hpp"

using namespace embedflow;
using namespace embedflow::test;
namespace fs = std::filesystem;

namespace {

// Every string, as the writer got it (bytes) and as Python must read it back (text, given
// as the UTF-8 of what is expected with \ufffd for each invalid byte sequence).
struct Case {
  std::string name, written, expected_utf8;
};

std::vector<Case> cases() {
  std::string controls;
  for (char c = 1; c < 0x20; ++c) controls += c;
  return {
      {"controls", controls + "\x7f", controls + "\x7f"},
      {"quotes", "say \"hi\" and 'bye'", "say \"hi\" and 'bye'"},
      {"backslashes", "C:\\path\\to\\file \\u0041 \\\"", "C:\\path\\to\\file \\u0041 \\\""},
      {"non_ascii", "caf\xc3\xa9 \xe6\x97\xa5\xe6\x9c\xac \xf0\x9f\x98\x80", "caf\xc3\xa9 \xe6\x97\xa5\xe6\x9c\xac \xf0\x9f\x98\x80"},
      {"invalid_utf8", "a\xff" "b\xc3", "a\xef\xbf\xbd" "b\xef\xbf\xbd"},
      {"empty", "", ""},
  };
}

}  // namespace

TEST_CASE("JsonWriter: strings of any bytes parse with Python's json and come back as written", "[json]") {
  const fs::path dir = scratch_dir("sdk_json");
  JsonWriter j;
  j.begin_object();
  j.key("strings").begin_object();
  for (const Case& c : cases()) j.field(c.name, c.written);
  j.end_object();
  j.key("expected").begin_object();
  // The expectations travel hex-encoded, so the writer under test cannot spoil them.
  for (const Case& c : cases()) {
    std::string hex;
    for (unsigned char b : c.expected_utf8) {
      char buf[3];
      std::snprintf(buf, sizeof buf, "%02x", b);
      hex += buf;
    }
    j.field(c.name, hex);
  }
  j.end_object();
  // A key that needs escaping too.
  j.field("key \"with\" \\ and \n", 1);
  j.end_object();
  write_file(dir / "strings.json", j.str());

  const Result py = run_python(R"PY(
import json, sys
text = open(sys.argv[1], encoding="utf-8").read()   # the file itself is valid UTF-8
d = json.loads(text)
problems = []
for name, hex_ in d["expected"].items():
    want = bytes.fromhex(hex_).decode("utf-8")
    if d["strings"][name] != want: problems.append(f"{name}: {d['strings'][name]!r} != {want!r}")
if d.get("key \"with\" \\ and \n") != 1: problems.append("escaped key")
# Round trip: Python's own encoding of what it read parses back to the same document.
if json.loads(json.dumps(d)) != d: problems.append("round trip")
for p in problems: print("PROBLEM:", p)
sys.exit(1 if problems else 0)
)PY",
                               {(dir / "strings.json").string()});
  INFO(py.out << py.err);
  CHECK(py.exit_code == 0);
}

TEST_CASE("JsonWriter and json_number: doubles as the shortest round-trip text, curves at full precision",
          "[json]") {
  CHECK(json_number(0.1) == "0.1");
  CHECK(json_number(1.0 / 3.0) == "0.3333333333333333");
  CHECK(json_number(std::numeric_limits<double>::quiet_NaN()) == "null");
  CHECK(json_number(std::numeric_limits<double>::infinity()) == "null");
  CHECK(json_quote("a\"b\\c\n") == "\"a\\\"b\\\\c\\n\"");

  const fs::path dir = scratch_dir("sdk_json");
  // A CMC-like curve whose values need all 17 digits, and values at the edges of double.
  const std::vector<double> curve{0.1, 1.0 / 3.0, 2.0 / 3.0, 0.123456789012345678, 1e-300, 5e-324, 1.7976931348623157e308};
  JsonWriter j;
  j.begin_object();
  j.field("tenth", 0.1).field("third", 1.0 / 3.0).field("nan", std::nan(""));
  j.key("cmc").numbers(curve);
  j.end_object();
  write_file(dir / "numbers.json", j.str());
  std::string hexes;
  for (double v : curve) {
    char buf[32];
    std::snprintf(buf, sizeof buf, "%a ", v);
    hexes += buf;
  }
  const Result py = run_python(R"PY(
import json, re, sys
text = open(sys.argv[1]).read()
d = json.loads(text)
want = [float.fromhex(h) for h in sys.argv[2].split()]
problems = []
if d["tenth"] != 0.1 or d["third"] != 1 / 3 or d["nan"] is not None: problems.append(f"scalars {d}")
if d["cmc"] != want: problems.append(f"cmc {d['cmc']} != {want}")
# Every number token is the shortest text for its double: what repr() prints.
for token in re.findall(r"-?\d[\d.eE+-]*", text):
    if repr(float(token)) != token:
        problems.append(f"{token} is not shortest ({repr(float(token))})")
if "0.1," not in text or "0.3333333333333333" not in text: problems.append("0.1 / 1/3 text")
for p in problems: print("PROBLEM:", p)
sys.exit(1 if problems else 0)
)PY",
                               {(dir / "numbers.json").string(), hexes});
  INFO(py.out << py.err);
  CHECK(py.exit_code == 0);
}
