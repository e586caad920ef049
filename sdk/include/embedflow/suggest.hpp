// The one way an unknown-name message suggests a name: "; did you mean 'x'?" for the candidate
// closest to `word` by edit distance, or "" when none is close enough to help.
#pragma once

#include <string>
#include <vector>

namespace embedflow {

// `shown`, when given, holds how each candidate is written for the reader (a file's header as
// spelt, where `candidates` are its normalised names); the suggestion quotes that spelling.
std::string did_you_mean(const std::string& word, const std::vector<std::string>& candidates,
                         const std::vector<std::string>& shown = {});

}  // namespace embedflow
