// Judged triplet files (Wang-style: a query image, two candidates A and B, and a person's
// judgement of which candidate is more like the query) whose rows name image files, either by
// path or by URL through an index file mapping each URL to the local file it was downloaded to.
// Read with the SDK's RFC 4180 reader; each image named gets an id (0, 1, ... in the order the
// file first names it), so the triplets can be scored against embeddings of the decoded images.
//
// Triplet file: a header row, then one row per triplet. Fields (header names by default, or
// the file's own names through `columns`): query, a, b (required), judgement (optional):
//   A        the query is more like A than B
//   B        the query is more like B than A
//   both     A and B are equally like the query (undecided)
//   neither  neither is like the query (undecided)
// (case-insensitive). Without a judgement column every row is A: the Wang order query,
// positive, negative.
// Index file (URL mode): a header row with columns url and path; relative paths are relative to
// `root`, default the index file's folder. In path mode relative paths are relative to `root`,
// default the triplet file's folder.
//
// Every problem is an embedflow::DataError naming the file and line: a short or long row, an
// empty cell, an unknown judgement, a URL the index lacks, an image file that is not there, a
// URL the index maps to two files; a header lacking a mapped or required column names the
// header line.
#pragma once

#include <cstdint>
#include <string>
#include <utility>
#include <vector>

namespace embedflow::image {

enum class Judgement : std::int8_t { a, b, both, neither };

// "A", "B", "both", "neither": as the triplets port carries it.
const char* judgement_name(Judgement j);
// Case-insensitive; false for anything but the four values (surrounding spaces ignored).
bool parse_judgement(const std::string& text, Judgement& out);

// The fields a `columns` mapping may name: query, a, b, judgement.
const std::vector<std::string>& judged_triplet_fields();

struct JudgedTripletOptions {
  std::string root;   // prefix of relative image paths; empty: the triplet (or index) file's folder
  std::string index;  // URL index (url,path); empty: the triplet file's cells are paths
  std::vector<std::pair<std::string, std::string>> columns;  // field -> the file's header name
  bool check_files = true;  // an image path that is not a file is an error (the fuzz target turns it off)
};

struct JudgedTriplet {
  std::int64_t query = 0, a = 0, b = 0;  // image ids: index into JudgedTripletFile::paths
  Judgement judgement = Judgement::a;
  int line = 0;  // where the row starts in the triplet file
};

struct JudgedTripletFile {
  std::vector<std::string> paths;  // image id -> file (root applied)
  std::vector<JudgedTriplet> triplets;
  bool has_judgement = false;  // the file has a judgement column
  std::int64_t count(Judgement j) const;
};

JudgedTripletFile read_judged_triplets(const std::string& path, const JudgedTripletOptions& options);

}  // namespace embedflow::image
