#include "truth.hpp"

#include <embedflow/csv.hpp>
#include <embedflow/embedflow.hpp>

namespace embedflow::crowd {

int SubmissionAttributes::at(std::int64_t worker, std::int64_t grid) const {
  auto it = by_submission.find({worker, grid});
  if (it == by_submission.end()) throw DataError(cat("submission (worker ", worker, ", grid ", grid, ") is not in ", file));
  return it->second;
}

SubmissionAttributes read_submission_attributes(const std::string& dir) {
  const CsvTable t = read_csv_table(dir + "/truth.csv", "truth file");
  SubmissionAttributes s;
  s.file = t.file;
  int cols[3];
  const char* names[3] = {"worker", "grid", "attribute"};
  for (int k = 0; k < 3; ++k) {
    cols[k] = t.column(names[k]);
    if (cols[k] < 0) throw DataError(cat(t.file, ":", t.header_line, ": no column '", names[k], "'"));
  }
  for (std::size_t i = 0; i < t.rows.size(); ++i) {
    std::int64_t v[3];
    for (int k = 0; k < 3; ++k) {
      const std::string f = trim_csv_field(t.rows[i][static_cast<std::size_t>(cols[k])]);
      std::size_t used = 0;
      try {
        v[k] = std::stoll(f, &used);
      } catch (const std::exception&) {
        used = 0;
      }
      if (used == 0 || used != f.size())
        throw DataError(cat(t.file, ":", t.lines[i], ": column '", names[k], "' is not an integer: '", f, "'"));
    }
    s.by_submission[{v[0], v[1]}] = static_cast<int>(v[2]);
    s.attributes = std::max(s.attributes, static_cast<int>(v[2]) + 1);
  }
  return s;
}

}  // namespace embedflow::crowd
