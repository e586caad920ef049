// The SDK's CSV reader (embedflow/csv.hpp): hand-written tiny cases for each rule, then Python's
// csv module as an independent oracle on a generated file full of awkward fields.
#include <catch2/catch.hpp>

#include <embedflow/csv.hpp>
#include <embedflow/error.hpp>

#include <filesystem>
#include <string>
#include <utility>
#include <vector>

#include "cli.hpp"

using namespace embedflow;
using namespace embedflow::test;

namespace {

using Rows = std::vector<std::pair<int, std::vector<std::string>>>;  // (start line, fields)
using F = std::vector<std::string>;

Rows parse(const std::string& text) {
  Rows out;
  for_each_csv_row(text, "t.csv", [&](std::vector<std::string>& row, int line) { out.emplace_back(line, row); });
  return out;
}

std::string parse_error(const std::string& text) {
  try {
    parse(text);
  } catch (const DataError& e) {
    return e.what();
  }
  return "(no error)";
}

std::string unhex(const std::string& h) {
  std::string s;
  for (std::size_t i = 0; i + 1 < h.size(); i += 2) s += static_cast<char>(std::stoi(h.substr(i, 2), nullptr, 16));
  return s;
}

// Lines of "start_line<TAB>hex(field)<TAB>hex(field)..." as printed by the Python oracle.
Rows parse_oracle(const std::string& out) {
  Rows rows;
  std::size_t pos = 0;
  while (pos < out.size()) {
    std::size_t end = out.find('\n', pos);
    if (end == std::string::npos) end = out.size();
    const std::string line = out.substr(pos, end - pos);
    pos = end + 1;
    std::vector<std::string> cells;
    std::size_t a = 0;
    while (true) {
      const std::size_t tab = line.find('\t', a);
      cells.push_back(line.substr(a, tab == std::string::npos ? std::string::npos : tab - a));
      if (tab == std::string::npos) break;
      a = tab + 1;
    }
    std::vector<std::string> fields;
    for (std::size_t i = 1; i < cells.size(); ++i) fields.push_back(unhex(cells[i]));
    rows.emplace_back(std::stoi(cells[0]), std::move(fields));
  }
  return rows;
}

// Writes argv[1] with csv.writer (random fields with commas, quotes, CR, LF, CRLF, tabs, spaces,
// UTF-8; rows of one empty field; blank rows; CRLF and LF row ends mixed; a few hand-written
// lines with padding after a closing quote and quotes inside unquoted fields), then reads it back
// with csv.reader and prints each non-blank row with the line it starts on. Lines are counted
// at \n only, like the reader under test (Python's file iterator would also split at a lone \r).
// argv[2] = "rows": 1..5 fields per row; "table": a header and 4 fields per row.
const char* kOracle = R"PY(
import csv, random, re, sys
path, mode, seed, n = sys.argv[1], sys.argv[2], int(sys.argv[3]), int(sys.argv[4])
rng = random.Random(seed)
atoms = ["a", "b", "xyz", " ", ",", '"', '""', "\n", "\r\n", "\r", "\t", "é", "ü€", "0", "-1.5", ","]
def field():
    k = rng.choice([0, 0, 1, 1, 2, 3, 5])
    return "".join(rng.choice(atoms) for _ in range(k))
with open(path, "w", newline="", encoding="utf-8") as f:
    writers = [csv.writer(f, lineterminator="\r\n"), csv.writer(f, lineterminator="\n")]
    def write(row):
        # Python 3.11's writer quotes a field with a CR only when the line terminator holds one.
        w = writers[0] if any("\r" in c for c in row) else rng.choice(writers)
        w.writerow(row)
    if mode == "table":
        write(["name", "a b", "c,d", 'q"'])
    for i in range(n):
        if mode == "table":
            write([field() for _ in range(4)])
            if i % 50 == 7:
                f.write('"ab"  ,x"y, "",""\n')
            continue
        r = rng.random()
        if r < 0.05:
            write([""])  # written as "" : one empty field, not a blank line
        elif r < 0.10:
            write([])  # a blank line, skipped by both readers
        elif r < 0.13:
            f.write('"ab"\t,x"y,,"q""r"\r\n')
        else:
            write([field() for _ in range(rng.randint(1, 5))])
data = open(path, encoding="utf-8", newline="").read()
lines = re.findall(r"[^\n]*\n|[^\n]+$", data)
reader = csv.reader(iter(lines))
prev = 0
for row in reader:
    start, prev = prev + 1, reader.line_num
    if row:
        print("\t".join([str(start)] + [c.encode("utf-8").hex() for c in row]))
)PY";

// Writes the oracle's awkward file at `path` (mode "rows" or "table", `rows` rows from `seed`)
// and returns the rows Python's csv.reader reads back from it.
Rows python_csv_rows(const std::string& path, const std::string& mode, const std::string& seed, const std::string& rows) {
  const Result py = run_python(kOracle, {path, mode, seed, rows});
  REQUIRE(py.exit_code == 0);
  return parse_oracle(py.out);
}

}  // namespace

TEST_CASE("csv: quoted fields hold commas and doubled quotes; padding may follow the closing quote") {
  CHECK(parse("a,\"b,c\",\"say \"\"hi\"\"\",d\n") == Rows{{1, F{"a", "b,c", "say \"hi\"", "d"}}});
  // A quote inside an unquoted field is an ordinary character (as in Python's csv).
  CHECK(parse("x\"y,z\"\n") == Rows{{1, F{"x\"y", "z\""}}});
  CHECK(parse("\"ab\" ,\"\"\n") == Rows{{1, F{"ab ", ""}}});
  CHECK(parse("a,,\n,\n") == Rows{{1, F{"a", "", ""}}, {2, F{"", ""}}});
}

TEST_CASE("csv: text after a closing quote is a DataError naming the line and field") {
  CHECK(parse_error("a,b\n1,\"abc\"def\n") == "t.csv:2: text after the closing quote of field 2 (a quote inside a "
                                                 "field must be doubled, and the whole field quoted)");
  // The line is where the stray text is, after a quoted newline.
  CHECK_THAT(parse_error("x\n\"multi\nline\"z,1\n"), Catch::StartsWith("t.csv:3: text after the closing quote of field 1"));
  CHECK_THAT(parse_error("\"a\"\"b\"\"\"c\n"), Catch::StartsWith("t.csv:1: text after the closing quote"));
}

TEST_CASE("csv: NUL bytes and invalid UTF-8 are DataErrors naming the line") {
  CHECK(parse_error(std::string("a,b\nc,d\ne,f\0g\n", 12)) == "t.csv:3: NUL byte (a binary file, or UTF-16 text?)");
  CHECK_THAT(parse_error("a\nb\xff\n"), Catch::StartsWith("t.csv:2: invalid UTF-8 (byte 0xff)"));
  CHECK_THAT(parse_error("a\n\"q\nr\xc3\"\n"), Catch::StartsWith("t.csv:3: invalid UTF-8"));    // cut sequence in quotes
  CHECK_THAT(parse_error("\xc0\xaf\n"), Catch::StartsWith("t.csv:1: invalid UTF-8"));           // overlong '/'
  CHECK_THAT(parse_error("\xed\xa0\x80\n"), Catch::StartsWith("t.csv:1: invalid UTF-8"));       // surrogate U+D800
  CHECK_THAT(parse_error("\xf4\x90\x80\x80\n"), Catch::StartsWith("t.csv:1: invalid UTF-8"));   // above U+10FFFF
  CHECK_THAT(parse_error("ok\n\xe2\x82"), Catch::StartsWith("t.csv:2: invalid UTF-8 (sequence cut off"));
  // Valid multi-byte text of every length passes: é, €, U+10348 and U+10FFFF.
  CHECK(parse("\xc3\xa9,\xe2\x82\xac,\xf0\x90\x8d\x88,\xf4\x8f\xbf\xbf\n") ==
        Rows{{1, F{"\xc3\xa9", "\xe2\x82\xac", "\xf0\x90\x8d\x88", "\xf4\x8f\xbf\xbf"}}});
  // Python decodes the same bytes the same way: what it rejects, we reject.
  const Result py = run_python(R"PY(
cases = [b"\xff", b"\xc0\xaf", b"\xed\xa0\x80", b"\xf4\x90\x80\x80", b"\xe2\x82", b"\xc3\xa9", b"\xf4\x8f\xbf\xbf", b"\xe0\x80\x80", b"\xf0\x80\x80\x80"]
for c in cases:
    try:
        c.decode("utf-8"); print("ok")
    except UnicodeDecodeError:
        print("bad")
)PY");
  REQUIRE(py.exit_code == 0);
  const std::vector<std::string> cases = {"\xff", "\xc0\xaf", "\xed\xa0\x80", "\xf4\x90\x80\x80", "\xe2\x82",
                                          "\xc3\xa9", "\xf4\x8f\xbf\xbf", "\xe0\x80\x80", "\xf0\x80\x80\x80"};
  std::string ours;
  for (const auto& c : cases) ours += csv_bytes_problem(c).empty() ? "ok\n" : "bad\n";
  CHECK(ours == py.out);
}

TEST_CASE("csv: a newline inside quotes keeps the row together and later rows keep their lines") {
  const Rows r = parse("h1,h2\n\"multi\nline\n\",x\nnext,y\n\"a\nb\",\"c\n\nd\"\nlast,z");
  REQUIRE(r.size() == 5);
  CHECK(r[0] == Rows::value_type{1, F{"h1", "h2"}});
  CHECK(r[1] == Rows::value_type{2, F{"multi\nline\n", "x"}});
  CHECK(r[2] == Rows::value_type{5, F{"next", "y"}});
  CHECK(r[3] == Rows::value_type{6, F{"a\nb", "c\n\nd"}});
  CHECK(r[4] == Rows::value_type{10, F{"last", "z"}});  // the row above spans lines 6-9
}

TEST_CASE("csv: CRLF ends rows; a CR inside quotes or mid-field is kept") {
  CHECK(parse("a,b\r\nc,d\r\n") == Rows{{1, F{"a", "b"}}, {2, F{"c", "d"}}});
  CHECK(parse("\"x\r\ny\",z\r\nw,v") == Rows{{1, F{"x\r\ny", "z"}}, {3, F{"w", "v"}}});
  CHECK(parse("\"q\r\"\r\n") == Rows{{1, F{"q\r"}}});
  CHECK(parse("a\rb,c\r\n") == Rows{{1, F{"a\rb", "c"}}});
  CHECK(parse("a,b\r") == Rows{{1, F{"a", "b"}}});  // a last CR with no LF still ends the row
  CHECK(parse("\r\n\r\na\r\n") == Rows{{3, F{"a"}}});
}

TEST_CASE("csv: blank lines are skipped; a line holding only \"\" is a row of one empty field") {
  CHECK(parse("\n\na\n\n\nb") == Rows{{3, F{"a"}}, {6, F{"b"}}});
  CHECK(parse("a\n\"\"\n\nb\n") == Rows{{1, F{"a"}}, {2, F{""}}, {4, F{"b"}}});
  CHECK(parse("a\n\"\"") == Rows{{1, F{"a"}}, {2, F{""}}});
  CHECK(parse(" \n") == Rows{{1, F{" "}}});  // spaces are data, not a blank line
  CHECK(parse("").empty());
  CHECK(parse("\n\r\n\n").empty());
}

TEST_CASE("csv: an unterminated quote is a DataError naming the line its row starts on") {
  CHECK(parse_error("a,b\n\nc,\"d\ne\nf\n") == "t.csv:3: unterminated quoted field");
  CHECK(parse_error("\"") == "t.csv:1: unterminated quoted field");
  CHECK_THROWS_AS(parse("x,\"y"), DataError);
}

TEST_CASE("csv table: BOM and padded header names, rows with their lines, column lookup") {
  const auto dir = scratch_dir("sdk_csv_table");
  write_file(dir / "t.csv", "\xEF\xBB\xBF\"path\", id ,\tlabel\r\n\r\nimg/a.png,1,\" 2 \"\r\n\"img/\nb.png\",3,4\r\n");
  const CsvTable t = read_csv_table((dir / "t.csv").string());
  CHECK(t.file == (dir / "t.csv").string());
  CHECK(t.header == F{"path", "id", "label"});
  CHECK(t.header_line == 1);
  CHECK(t.rows == std::vector<F>{{"img/a.png", "1", " 2 "}, {"img/\nb.png", "3", "4"}});
  CHECK(t.lines == std::vector<int>{3, 4});
  CHECK(t.column("path") == 0);
  CHECK(t.column("label") == 2);
  CHECK(t.column("nope") == -1);

  // Blank lines before the header: its line is the first non-blank one.
  write_file(dir / "late.csv", "\n\nx\n1\n");
  const CsvTable late = read_csv_table((dir / "late.csv").string());
  CHECK(late.header_line == 3);
  CHECK(late.lines == std::vector<int>{4});
}

TEST_CASE("csv table: wrong field count, unterminated quote, missing and empty files") {
  const auto dir = scratch_dir("sdk_csv_table_errors");
  const std::string wide = (dir / "wide.csv").string();
  write_file(wide, "a,b,c\n1,\"two\nlines\",3\n4,5\n");
  CHECK_THROWS_AS(read_csv_table(wide), DataError);
  CHECK_THROWS_WITH(read_csv_table(wide), wide + ":4: 2 fields, the header has 3");

  const std::string open_quote = (dir / "quote.csv").string();
  write_file(open_quote, "a,b\n1,2\n\"3,4\n");
  CHECK_THROWS_WITH(read_csv_table(open_quote), open_quote + ":3: unterminated quoted field");

  const std::string missing = (dir / "missing.csv").string();
  CHECK_THROWS_AS(read_csv_table(missing), ConfigError);
  CHECK_THROWS_WITH(read_csv_table(missing), missing + ": cannot open CSV file (No such file or directory)");
  CHECK_THROWS_WITH(read_csv_table(missing, "image list"), missing + ": cannot open image list (No such file or directory)");
  CHECK_THROWS_WITH(read_file_text(missing, "annotation CSV"), missing + ": cannot open annotation CSV (No such file or directory)");

  const std::string empty = (dir / "empty.csv").string();
  write_file(empty, "");
  CHECK_THROWS_AS(read_csv_table(empty), DataError);
  CHECK_THROWS_WITH(read_csv_table(empty), empty + ": empty CSV file (no header row)");
  write_file(empty, "\n\r\n");
  CHECK_THROWS_WITH(read_csv_table(empty), empty + ": empty CSV file (no header row)");
}

TEST_CASE("csv: trim_csv_field strips spaces and tabs only") {
  CHECK(trim_csv_field(" \t a b\t ") == "a b");
  CHECK(trim_csv_field("\r\n") == "\r\n");
  CHECK(trim_csv_field("   ").empty());
}

TEST_CASE("csv: rows and lines equal Python's csv.reader on a generated file of awkward fields") {
  const auto dir = scratch_dir("sdk_csv_oracle");
  const std::string path = (dir / "awkward.csv").string();
  const Rows want = python_csv_rows(path, "rows", "4180", "600");
  REQUIRE(want.size() > 500);
  // The file really is awkward: multi-line rows and rows of one empty field are there.
  int multiline = 0, single_empty = 0;
  for (std::size_t i = 0; i + 1 < want.size(); ++i) multiline += want[i + 1].first > want[i].first + 1;
  for (const auto& r : want) single_empty += r.second == F{""};
  CHECK(multiline > 20);
  CHECK(single_empty > 5);

  const Rows got = parse(read_file_text(path, "CSV file"));
  REQUIRE(got.size() == want.size());
  for (std::size_t i = 0; i < want.size(); ++i) {
    INFO("row " << i);
    CHECK(got[i] == want[i]);
  }
}

TEST_CASE("csv table: header, rows and lines equal Python's csv.reader") {
  const auto dir = scratch_dir("sdk_csv_oracle_table");
  const std::string path = (dir / "table.csv").string();
  const Rows want = python_csv_rows(path, "table", "7", "300");
  REQUIRE(want.size() > 300);
  const CsvTable t = read_csv_table(path);
  CHECK(t.header == want[0].second);
  CHECK(t.header_line == want[0].first);
  REQUIRE(t.rows.size() == want.size() - 1);
  for (std::size_t i = 0; i < t.rows.size(); ++i) {
    INFO("row " << i);
    CHECK(t.lines[i] == want[i + 1].first);
    CHECK(t.rows[i] == want[i + 1].second);
  }
}

TEST_CASE("csv_field: fields written with it read back whole, by Python's csv.reader and by the SDK") {
  const std::vector<std::string> fields{"plain", "CEN-mixture, 3 starts", "say \"hi\"", "two\nlines", "cr\rhere", "", " padded "};
  CHECK(csv_field("plain") == "plain");
  CHECK(csv_field("a,b") == "\"a,b\"");
  CHECK(csv_field("say \"hi\"") == "\"say \"\"hi\"\"\"");
  std::string text;
  for (std::size_t i = 0; i < fields.size(); ++i) text += (i ? "," : "") + csv_field(fields[i]);
  text += "\n";
  std::vector<std::vector<std::string>> rows;
  for_each_csv_row(text, "mem.csv", [&](std::vector<std::string>& row, int) { rows.push_back(row); });
  REQUIRE(rows.size() == 1);
  CHECK(rows[0] == fields);
  const auto dir = scratch_dir("sdk_csv_field");
  write_file(dir / "f.csv", text);
  const Result py = run_python("import csv, sys, json\nprint(json.dumps(next(csv.reader(open(sys.argv[1], newline='')))))\n",
                               {(dir / "f.csv").string()});
  REQUIRE(py.exit_code == 0);
  CHECK(py.out == "[\"plain\", \"CEN-mixture, 3 starts\", \"say \\\"hi\\\"\", \"two\\nlines\", \"cr\\rhere\", \"\", \" padded \"]\n");
}
