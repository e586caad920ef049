// The attribute each submission was clustered by, as tools/gen_crowd's truth.csv records it:
// what the Conditional Similarity Network baseline is told (crowd.triplets and crowd.cen_score
// with `truth`), since CSN learns from triplets labelled with their similarity condition.
#pragma once

#include <cstdint>
#include <map>
#include <string>
#include <utility>

namespace embedflow::crowd {

struct SubmissionAttributes {
  std::string file;                                                  // the truth.csv read
  std::map<std::pair<std::int64_t, std::int64_t>, int> by_submission;  // (worker, grid) -> attribute, -1 none
  int attributes = 0;                                                // 1 + the largest attribute index

  // The attribute of (worker, grid); DataError naming the file when the submission is not in it.
  int at(std::int64_t worker, std::int64_t grid) const;
};

// Reads <dir>/truth.csv (columns worker, grid, attribute). DataError naming file:line for a missing
// column or a value that is not an integer, ConfigError when the file cannot be opened.
SubmissionAttributes read_submission_attributes(const std::string& dir);

}  // namespace embedflow::crowd
